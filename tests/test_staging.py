"""The staging service (runtime/staging.py) and the layering around it: the backend table and
its reference fallback, the guarded cache (guards, limit, unhashable keys, one compile under
concurrent first calls), static arguments, the staticness policy of the transforms, the stage
names that come from the pipeline alone, and the imports: the compiler never imports the
runtime, and the API adapters import no private name of another module.
"""
import ast
import importlib
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import staging
from kiln.cli import commands
from kiln.compiler import passes
from kiln.compiler.errors import BackendUnsupportedError
from kiln.compiler.ir.abstract import ShapedArray

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------- backends

def test_backend_names_and_aliases():
    assert staging.backend_name("cpu") == "llvm"
    assert staging.backend_name("reference") == "reference"
    assert staging.backend_name("gpu") == "cuda"
    with pytest.raises(ValueError, match=r"unknown backend 'tpu'; available: 'reference', "
                                         r"'exact', 'llvm', 'cuda', 'pjrt', 'cpu', 'gpu'"):
        staging.backend_name("tpu")
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        kiln.jit(lambda x: x, backend="tpu")


def _double(x):
    return x * 2.0


def _unsupported(monkeypatch):
    """A backend `fussy` that refuses everything, as a backend refuses what it cannot lower."""
    def compile_function(ssa):
        raise BackendUnsupportedError("fussy cannot lower this")
    monkeypatch.setitem(staging.BACKENDS, "fussy",
                        staging.Backend("reference", lambda: compile_function, False))


def test_compile_falls_back_only_when_asked(monkeypatch):
    _unsupported(monkeypatch)
    fn = kiln.make_ir(_double)(np.ones(3, np.float32))
    with pytest.raises(BackendUnsupportedError, match="fussy cannot lower this"):
        staging.compile_ssa(fn, "fussy")
    ssa, executable = staging.compile_ssa(fn, "fussy", fallback="reference")
    np.testing.assert_allclose(executable(np.arange(3, dtype=np.float32))[0], [0, 2, 4])
    assert str(ssa).startswith("def _double(x: 'f32[3]')")


def test_jit_falls_back_without_an_explicit_backend(monkeypatch):
    _unsupported(monkeypatch)
    monkeypatch.setenv("KILN_BACKEND", "fussy")
    np.testing.assert_allclose(kiln.jit(_double)(jnp.ones(2)), [2, 2])
    with pytest.raises(BackendUnsupportedError, match="fussy"):
        kiln.jit(_double, backend="fussy")(jnp.ones(2))


# ------------------------------------------------------------------------------------ cache

class _Made(staging.Entry):
    __slots__ = ("value",)


def _maker(log, value="made"):
    def make(stale):
        log.append(stale)
        entry = _Made()
        entry.value, entry.guards = value, []
        return entry
    return make


def test_cache_makes_once_and_remakes_when_a_guard_changes():
    cache, log = staging.GuardedCache(), []
    scope = {"SCALE": 1.0}

    def make(stale):
        log.append(stale)
        entry = _Made()
        entry.value, entry.guards = scope["SCALE"], [(scope, "SCALE", scope["SCALE"])]
        return entry
    first = cache.lookup("k", make)
    assert cache.lookup("k", make) is first and log == [None]
    scope["SCALE"] = 2.0
    assert first.changed_global() == "SCALE" and cache.get("k") is None
    second = cache.lookup("k", make)
    assert second.value == 2.0 and log == [None, first] and len(cache) == 1


def test_cache_limit_drops_the_oldest():
    cache, log = staging.GuardedCache(limit=2), []
    for key in "abc":
        cache.lookup(key, _maker(log, key))
    assert cache.keys() == ["b", "c"] and [e.value for e in cache.values()] == ["b", "c"]


def test_unhashable_keys_are_made_every_time():
    cache, log = staging.GuardedCache(), []
    key = ("f", [1, 2])
    cache.lookup(key, _maker(log))
    cache.lookup(key, _maker(log))
    assert log == [None, None] and len(cache) == 0 and cache.get(key) is None


def test_concurrent_first_lookups_make_once():
    cache, log, results = staging.GuardedCache(), [], []
    start = threading.Barrier(6)

    def slow(stale):
        time.sleep(0.05)
        return _maker(log)(stale)

    def run():
        start.wait()
        results.append(cache.lookup("k", slow))
    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(log) == 1 and all(r is results[0] for r in results)


# ------------------------------------------------------------------------ static arguments

def _three(a, b, c=3, *, d=4):
    return a


def test_static_args_split_and_merge():
    static = staging.StaticArgs(_three, 1, "d")
    assert static.nums == {1} and static.names == {"b", "d"}
    statics, args, kwargs = static.split((1, "two"), {"c": 5, "d": 6}, "_three")
    assert statics == (("#", 1, "two"), ("=", "d", 6)) and args == [1] and kwargs == {"c": 5}
    assert staging.merge_statics(args, kwargs, statics) == ([1, "two"], {"c": 5, "d": 6})


def test_static_args_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"static_argnums=\(7,\), but only accepts 3"):
        staging.StaticArgs(_three, 7)
    with pytest.raises(ValueError, match=r"invalid argnames \{'e'\} in donate_argnames"):
        staging.StaticArgs(_three, (), "e", "donate")
    with pytest.raises(ValueError, match=r"argument 1 of _three is static but has unhashable "
                                         r"type list \(\[2\]\). Pass a tuple"):
        staging.StaticArgs(_three, 1).split((1, [2]), {}, "_three")


class _Opaque:
    pass


@pytest.mark.parametrize("value, differentiated, floats, static", [
    (True, False, False, True), (3, False, False, True), ("sum", False, False, True),
    (_Opaque(), False, False, True), (None, False, False, True),
    (1.5, False, False, False), (1.5, False, True, True), (1j, False, True, True),
    (np.float32(1.5), False, True, False), (np.ones(2), False, True, False),
    (jnp.ones(2), False, True, False),
    (True, True, True, False), (2.0, True, True, False),
])
def test_static_mask(value, differentiated, floats, static):
    assert staging.static_mask([value], [differentiated], floats) == (static,)


def test_split_and_merge_leaves_keep_types():
    statics, dynamic = staging.split_leaves([1.0, True, "a", 1], [False, True, True, True])
    assert statics == ((1, bool, True), (2, str, "a"), (3, int, 1)) and dynamic == [1.0]
    assert staging.merge_leaves(dynamic, statics) == [1.0, True, "a", 1]
    assert staging.split_leaves([True], [True])[0] != staging.split_leaves([1], [True])[0]


# ------------------------------------------------------------------------------------ stage

_TABLE = np.arange(3, dtype=np.float32)


def _scaled(x, mode):
    return x * _TABLE if mode == "table" else x + 1.0


def test_stage_binds_statics_and_makes_closed_over_arrays_operands():
    aval = ShapedArray((3,), np.dtype("float32"))
    st = staging.stage(_scaled, [aval], lambda tracers: ((tracers[0], "table"), {}), "scaled")
    assert [v.aval for v in st.fn.invars[:1]] == [aval] and len(st.fn.invars) == 2
    np.testing.assert_array_equal(st.extra[0], _TABLE)
    assert [a.str_short() for a in st.out_avals] == ["f32[3]"]
    # (user contexts made by other tests guard every specialisation: runtime/user_context.py)
    assert [name for _, name, _ in st.guards if not name.startswith("user context")] == \
        ["_TABLE"]
    st = staging.stage(_scaled, [aval], lambda tracers: ((tracers[0], "plus"), {}), "scaled")
    assert st.extra == [] and len(st.fn.invars) == 1


def test_stage_checks_outputs():
    aval = ShapedArray((), np.dtype("float32"))
    with pytest.raises(TypeError, match=r"function named transformed by kiln returned a value "
                                        r"of type <class 'str'> at output component \[1\]"):
        staging.stage(lambda x: (x, "no"), [aval], lambda t: ((t[0],), {}), "named")


# ------------------------------------------------------------------------ names and imports

def test_stage_names_come_from_the_pipeline():
    assert passes.STAGES == ["ssa"] + [p.stage for p in passes.LLVM_PIPELINE]
    assert [p.stage for p in passes.through("simplified")] == ["simplified"]
    with pytest.raises(ValueError, match="no stage 'fused' in the reference pipeline"):
        passes.through("fused", "reference")
    ssa_stages = [name for name, s in commands.STAGES.items()
                  if s.language == "python" and s.needs_args]
    assert set(passes.STAGES) <= set(ssa_stages)
    from kiln.compiler.backends.llvm.executable import LEVELS
    native = [name for name, s in commands.STAGES.items() if s.language in ("llvm", "asm")]
    assert native == list(LEVELS)


def _imports(path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield node.level, node.module or "", alias.name, node.lineno


def test_the_compiler_never_imports_the_runtime():
    bad = []
    for path in sorted((ROOT / "compiler").rglob("*.py")):
        depth = len(path.relative_to(ROOT / "compiler").parts) - 1   # packages below compiler
        for level, module, _, line in _imports(path):
            absolute = level == 0 and (module == "kiln" or module.startswith("kiln.")) and \
                not module.startswith("kiln.compiler")
            if absolute or level > depth + 1:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {'.' * level}{module}")
    assert bad == []


ADAPTERS = ["staging", "jit", "ad", "vmap", "fastcall", "wrappers", "cli.commands", "cli.aot",
            "cli.doctor"]


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapters_import_no_private_names(name):
    module = importlib.import_module(f"kiln.{name}")
    package = module.__package__
    bad = []
    for level, source, imported, line in _imports(Path(module.__file__)):
        if imported is None or not imported.startswith("_") or imported.startswith("__"):
            continue
        base = importlib.import_module(("." * level + source) if level else source, package) \
            if source or level else None
        if not isinstance(getattr(base, imported, None), types.ModuleType):
            bad.append(f"{name}:{line}: {imported}")
    assert bad == []
