"""kiln.aot.load: libraries built by kiln.compiler.aot, called from Python without the compiler.

One library (compiled once per module) holds an elementwise function (also at empty and scalar
shapes), a matmul (kiln's kernel) and a matrix-vector product (BLAS), a data-dependent Python
`while`, a grad and a vmap stage, pytrees in and out (dicts, tuples, a namedtuple, None) and a
`debug_print`; every result is compared with `kiln.jit`'s. Then: the loader in a process where
gast, llvmlite and astor cannot be imported; every refusal (tampered library or header, missing
files, another kiln, another CPU or architecture, malformed manifests), which must happen
before the library is mapped; argument checks; error codes; calls from several threads.
"""
import functools
import json
import shutil
import subprocess
import sys
import textwrap
import threading
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kiln
import kiln.aot
import kiln.numpy as jnp
from kiln.aot import AOTLoadError
from kiln.cli.aot import compile_library
from kiln.compiler.aot import Target
from kiln.compiler.aot.manifest import tree_from_json, tree_to_json
from kiln.compiler.config import config

F32 = np.float32
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
PART = {C64: np.dtype(np.float32), C128: np.dtype(np.float64)}
Stats = namedtuple("Stats", ["mean", "spread"])


def elementwise(x, y):
    return jnp.tanh(x) * y + 1.0


def matmul(a, b):
    return a @ b


def matvec(a, v):
    return a @ v


def halvings(x):
    """Halve x until its squared norm is at most 1 (a while on values); also count the steps."""
    count = 0
    while jnp.sum(x * x) > 1.0:
        x = x * 0.5
        count = count + 1
    return x, count


def loss(params, x):
    return jnp.sum(jnp.tanh(x @ params["w"] + params["b"]) ** 2)


def row_norm(v):
    return jnp.sqrt(jnp.sum(v * v))


def pytree_fn(params, pair):
    a, b = pair
    h = params["w"] * a + params["b"]
    return {"h": h, "stats": Stats(jnp.mean(h), jnp.max(h) - jnp.min(h)), "nothing": None,
            "sum": (a + b, jnp.sum(b))}


def scaled(n, x):
    return x * n


def mixed(flags, small, half):
    return jnp.where(flags, small, -small), half * 2, ~flags


def printing(x):
    kiln.debug.print("x is {}", x)
    return x * 2.0


def zeros(shape, dtype=F32):
    return np.zeros(shape, dtype)


PARAMS = {"w": zeros((4, 3)), "b": zeros(3)}
TARGETS = [
    Target(elementwise, (zeros((3, 4)), zeros(4))),
    Target(elementwise, (zeros((0, 4)), zeros(4)), name="elementwise_empty"),
    Target(elementwise, (zeros(()), zeros(())), name="elementwise_scalar"),
    Target(elementwise, (zeros((1, 1)), zeros(1)), name="elementwise_one"),
    Target(mixed, (zeros(4, bool), zeros(4, np.int8), zeros(4, np.float16))),
    Target(matmul, (zeros((160, 80)), zeros((80, 64)))),
    Target(matvec, (zeros((160, 80)), zeros(80))),
    Target(halvings, (zeros(5),)),
    Target(loss, (PARAMS, zeros((2, 4))), transforms=(("grad", 0),)),
    Target(row_norm, (zeros((6, 5)),), transforms=(("vmap", 0),)),
    Target(pytree_fn, ({"w": zeros(3), "b": zeros(3)}, (zeros(3), zeros(3)))),
    Target(printing, (zeros(2),)),
    Target(scaled, (np.int32(0), F32(0))),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    directory = tmp_path_factory.mktemp("aot") / "funcs"
    compile_library(TARGETS, directory, name="funcs")
    return directory


@pytest.fixture(scope="module")
def lib(built):
    return kiln.aot.load(built)


@pytest.fixture
def copy(built, tmp_path):
    """A fresh copy of the built directory (its own path: loading it maps a new library)."""
    target = tmp_path / "copy"
    shutil.copytree(built, target)
    return target


def rand(shape, seed=0, dtype=F32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def same_tree(got, want):
    got_leaves, got_tree = kiln.tree_util.tree_flatten(got)
    want_leaves, want_tree = kiln.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        close(g, w)
        assert type(g) is kiln.Array and g.weak_type == w.weak_type


# ------------------------------------------------------------------------------ results

finite = hnp.arrays(F32, (3, 4), elements=st.floats(-20, 20, width=32))


@settings(max_examples=15, deadline=None)
@given(finite, hnp.arrays(F32, (4,), elements=st.floats(-20, 20, width=32)))
def test_elementwise_matches_jit(lib, x, y):
    same_tree(lib.elementwise(x, y), kiln.jit(elementwise)(x, y))


@pytest.mark.parametrize("name, shapes", [("elementwise_empty", [(0, 4), (4,)]),
                                          ("elementwise_scalar", [(), ()]),
                                          ("elementwise_one", [(1, 1), (1,)])])
def test_empty_and_scalar_shapes(lib, name, shapes):
    args = [rand(s, k) for k, s in enumerate(shapes)]
    same_tree(lib[name](*args), kiln.jit(elementwise)(*args))


@settings(max_examples=15, deadline=None)
@given(hnp.arrays(bool, 4), hnp.arrays(np.int8, 4),
       hnp.arrays(np.float16, 4, elements=st.floats(-1000, 1000, width=16)))
def test_bool_int8_and_float16_buffers(lib, flags, small, half):
    same_tree(lib.mixed(flags, small, half), kiln.jit(mixed)(flags, small, half))


def uses(lib, name):
    return next(f for f in lib.manifest["functions"] if f["name"] == name)["uses"]


def test_products_match_jit(lib):
    """A real matrix product runs kiln's own kernel; a matrix times a vector calls BLAS."""
    assert "blas" not in uses(lib, "matmul") and "blas" in uses(lib, "matvec")
    a, b = rand((160, 80), 1), rand((80, 64), 2)
    same_tree(lib.matmul(a, b), kiln.jit(matmul)(a, b))
    same_tree(lib.matvec(a, b[:, 0]), kiln.jit(matvec)(a, b[:, 0]))


@pytest.mark.parametrize("scale", [0.1, 3.0, 1000.0])
def test_while_on_values_matches_jit(lib, scale):
    x = rand(5, 3) * F32(scale)
    same_tree(lib.halvings(x), kiln.jit(halvings)(x))


def test_grad_stage_matches_jit(lib):
    params, x = {"w": rand((4, 3), 4), "b": rand(3, 5)}, rand((2, 4), 6)
    got = lib.grad_loss(params, x)
    assert set(got) == {"w", "b"}
    same_tree(got, kiln.jit(kiln.grad(loss))(params, x))


def test_vmap_stage_matches_jit(lib):
    v = rand((6, 5), 7)
    same_tree(lib.vmap_row_norm(v), kiln.jit(kiln.vmap(row_norm))(v))


def test_pytrees_in_and_out(lib):
    params, pair = {"w": rand(3, 8), "b": rand(3, 9)}, (rand(3, 10), rand(3, 11))
    got = lib.pytree_fn(params, pair)
    same_tree(got, kiln.jit(pytree_fn)(params, pair))
    assert type(got["stats"]) is Stats and got["nothing"] is None
    # a list stands for a tuple, keywords name the arguments
    same_tree(lib.pytree_fn(pair=list(pair), params=params), got)


def test_debug_print_goes_to_python(lib, capsys):
    x = np.array([1.5, -2.0], F32)
    close(lib.printing(x), x * 2)
    assert capsys.readouterr().out == "x is [ 1.5 -2. ]\n"


def test_python_scalars_convert_to_the_expected_dtype(lib):
    close(lib.elementwise_scalar(2, 0.5), kiln.jit(elementwise)(F32(2), F32(0.5)))
    close(lib.scaled(3, 2.5), kiln.jit(scaled)(np.int32(3), F32(2.5)))
    for bad in (2.5, 2 ** 40, True):
        with pytest.raises(TypeError, match=rf"scaled: argument n: expected i32\[\], got "
                                            rf"{type(bad).__name__} {bad}"):
            lib.scaled(bad, 1.0)
    with pytest.raises(TypeError, match=r"argument x: expected f32\[3,4\], got float 1.0"):
        lib.elementwise(1.0, rand(4))


pytrees = st.recursive(
    st.integers(0, 9),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
                            st.dictionaries(st.text("abc", min_size=1, max_size=2), inner,
                                            max_size=3),
                            st.tuples(inner, inner).map(lambda t: Stats(*t)), st.none()),
    max_leaves=8)


@settings(max_examples=25, deadline=None)
@given(pytrees)
def test_tree_json_round_trip(tree):
    """The manifest's treedef encoding (compile side) and decoding (loader) agree."""
    leaves, treedef = kiln.tree_util.tree_flatten(tree)
    node = tree_from_json(json.loads(json.dumps(tree_to_json(treedef))))
    assert node.leaves == len(leaves)
    rebuilt = kiln.aot._unflatten(node, iter(leaves))
    assert rebuilt == tree and type(rebuilt) is type(tree)
    flat = []
    kiln.aot._flatten(node, tree, "x", flat, "f")
    assert flat == leaves


def test_mapping_access_and_repr(lib):
    assert lib["matmul"] is lib.matmul and "halvings" in lib and len(lib) == len(TARGETS)
    assert list(lib) == [f["name"] for f in lib.manifest["functions"]]
    text = repr(lib)
    assert "matmul(a: f32[160,80], b: f32[80,64]) -> f32[160,64]" in text
    assert ("pytree_fn(params: {'b': f32[3], 'w': f32[3]}, pair: (f32[3], f32[3])) -> {'h': f32[3], "
            "'nothing': None, 'stats': Stats(mean=f32[], spread=f32[]), 'sum': (f32[3], f32[])}"
            in text)
    with pytest.raises(AttributeError, match="has no function 'nope'; it has elementwise"):
        lib.nope
    with pytest.raises(KeyError, match="nope"):
        lib["nope"]


# ------------------------------------------------------------------------------ argument checks

@pytest.mark.parametrize("args, message", [
    ((rand((4, 3)), rand(4)), r"elementwise: argument x: expected f32\[3,4\], got f32\[4,3\]"),
    ((rand((3, 4)), rand(4, dtype=np.float64)), r"argument y: expected f32\[4\], got f64\[4\]"),
    ((rand((3, 4)), [1.0, 2.0, 3.0, 4.0]), r"argument y: expected f32\[4\], got a list of 4"),
    ((rand((3, 4)),), r"elementwise\(\) missing 1 argument: y \(it takes x, y\)"),
    ((rand((3, 4)), rand(4), rand(4)), r"elementwise\(\) takes 2 arguments \(x, y\), got 3"),
])
def test_wrong_arguments(lib, args, message):
    with pytest.raises(TypeError, match=message):
        lib.elementwise(*args)


def test_wrong_pytree_arguments(lib):
    pair = (rand(3), rand(3))
    with pytest.raises(TypeError, match=r"pytree_fn: argument params: expected a dict with keys "
                                        r"\['b', 'w'\], got a dict with keys \['w'\]"):
        lib.pytree_fn({"w": rand(3)}, pair)
    with pytest.raises(TypeError, match=r"argument pair: expected a tuple of 2, got a tuple of 3"):
        lib.pytree_fn({"w": rand(3), "b": rand(3)}, pair + pair[:1])
    with pytest.raises(TypeError, match=r"argument params\['w'\]: expected f32\[3\], got i32\[3\]"):
        lib.pytree_fn({"w": np.arange(3, dtype=np.int32), "b": rand(3)}, pair)
    with pytest.raises(TypeError, match="unexpected keyword argument 'q'"):
        lib.pytree_fn(q=1)


def test_inputs_need_not_be_contiguous(lib):
    x = rand((4, 3)).T   # Fortran order
    y = rand(8)[::2]
    same_tree(lib.elementwise(x, y), kiln.jit(elementwise)(np.ascontiguousarray(x), y.copy()))


def rotate(z, w, s):
    return jnp.exp(1j * z) * w + jnp.conj(z) * s, jnp.abs(z), (z * w).imag


@pytest.fixture(scope="module")
def complex_lib(tmp_path_factory):
    """`rotate` on c64 and on c128 (compiled with x64 on, so that c128 stays c128)."""
    directory = tmp_path_factory.mktemp("aot") / "complex"
    old = config.read("enable_x64")
    config.update("enable_x64", True)
    try:
        compile_library([Target(rotate, (zeros(5, C64), zeros(5, C64), zeros((), C64)),
                                name="rotate64"),
                         Target(rotate, (zeros((2, 3), C128), zeros(3, C128), zeros((), C128)),
                                name="rotate128")], directory, name="complex")
    finally:
        config.update("enable_x64", old)
    return kiln.aot.load(directory)


def complex_rand(shape, seed, dtype):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("seed", range(3))
def test_complex_arguments_and_results(complex_lib, x64, seed):
    for name, shape, dtype in (("rotate64", (5,), C64), ("rotate128", (2, 3), C128)):
        z, w = complex_rand(shape, seed, dtype), complex_rand(shape[-1:], seed + 1, dtype)
        s = dtype.type(0.5 - 2j)
        got = complex_lib[name](z, w, s)
        assert [np.asarray(v).dtype for v in got] == [dtype, PART[dtype], PART[dtype]]
        same_tree(got, kiln.jit(rotate)(z, w, s))
        # a Python complex (or int, or float) converts to a rank-0 complex leaf
        same_tree(complex_lib[name](z, w, 0.5 - 2j), got)
        same_tree(complex_lib[name](z, w, 3), kiln.jit(rotate)(z, w, dtype.type(3)))
    wide = complex_rand(5, seed, C128)   # never narrowed silently
    with pytest.raises(TypeError, match=r"argument z: expected c64\[5\], got c128\[5\]"):
        complex_lib.rotate64(wide, wide, 1j)
    assert repr(complex_lib.rotate64) == ("<kiln.aot function rotate64(z: c64[5], w: c64[5], "
                                          "s: c64[]) -> (c64[5], f32[5], f32[5])>")


def test_error_codes_raise_runtime_error(copy):
    other = kiln.aot.load(copy)
    other._dll.funcs_bind_extern(b"kiln_sgemv", None)   # unbind BLAS: the call returns 2
    a, v = rand((160, 80)), rand(80)
    with pytest.raises(RuntimeError, match=r"matvec .* failed with error 2: the BLAS routines"):
        other.matvec(a, v)
    kiln.aot._bind_externs(other._dll, other.manifest, other.strerror)   # what load does: this process's BLAS
    same_tree(other.matvec(a, v), kiln.jit(matvec)(a, v))


def test_calls_from_threads(lib):
    inputs = [(rand((160, 80), k), rand((80, 64), k + 100), rand(5, k) * F32(k + 1))
              for k in range(16)]
    expected = [(a @ b, kiln.jit(halvings)(x)) for a, b, x in inputs]
    results, errors = {}, []

    def work(k):
        try:
            for _ in range(5):
                a, b, x = inputs[k]
                results[k] = (lib.matmul(a, b), lib.halvings(x))
        except Exception as e:   # noqa: BLE001  (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, (product, loop) in enumerate(expected):
        np.testing.assert_allclose(np.asarray(results[k][0]), product, rtol=1e-4, atol=1e-4)
        same_tree(results[k][1], loop)


# ------------------------------------------------------------------------------ no compiler

BLOCKED = textwrap.dedent("""
    import importlib.abc, json, sys
    import numpy as np

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("gast", "llvmlite", "astor"):
                raise ImportError(f"{name} is blocked in this test")

    sys.meta_path.insert(0, Block())
    import kiln.aot
    lib = kiln.aot.load(sys.argv[1])
    a = np.arange(160 * 80, dtype=np.float32).reshape(160, 80) / 1000
    b = np.arange(80 * 64, dtype=np.float32).reshape(80, 64) / 1000
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 5
    y = np.arange(4, dtype=np.float32)
    out = {"elementwise": np.asarray(lib.elementwise(x, y)).tolist(),
           "matmul": np.asarray(lib.matmul(a, b)).tolist(),
           "halvings": [np.asarray(v).tolist() for v in lib.halvings(np.full(5, 9, np.float32))],
           "printing": np.asarray(lib.printing(np.ones(2, np.float32))).tolist(),
           "imported": [m for m in ("gast", "llvmlite", "astor") if m in sys.modules]}
    print(json.dumps(out))
""")


def test_loader_needs_no_compiler(built):
    result = subprocess.run([sys.executable, "-c", BLOCKED, str(built)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    printed, data = result.stdout.rsplit("\n", 2)[:2]
    assert printed == "x is [1. 1.]"
    out = json.loads(data)
    assert out["imported"] == []
    a = np.arange(160 * 80, dtype=F32).reshape(160, 80) / 1000
    b = np.arange(80 * 64, dtype=F32).reshape(80, 64) / 1000
    x, y = np.arange(12, dtype=F32).reshape(3, 4) / 5, np.arange(4, dtype=F32)
    close(np.array(out["elementwise"], F32), kiln.jit(elementwise)(x, y))
    close(np.array(out["matmul"], F32), kiln.jit(matmul)(a, b))
    want = kiln.jit(halvings)(np.full(5, 9, F32))
    close(np.array(out["halvings"][0], F32), want[0])
    assert out["halvings"][1] == int(want[1]) and out["printing"] == [2.0, 2.0]


def test_generic_build_loads_here(tmp_path):
    manifest = compile_library([Target(elementwise, (zeros((3, 4)), zeros(4)))], tmp_path,
                               cpu="generic")
    assert manifest["target"]["mode"] == "generic" and "avx2" not in manifest["target"]["features"]
    x, y = rand((3, 4), 12), rand(4, 13)
    same_tree(kiln.aot.load(tmp_path).elementwise(x, y), kiln.jit(elementwise)(x, y))


# ------------------------------------------------------------------------------ refusals

def mapped(directory):
    """Whether a library file of `directory` is mapped into this process."""
    return str(directory) in Path("/proc/self/maps").read_text()


def refused(directory, *patterns):
    with pytest.raises(AOTLoadError) as info:
        kiln.aot.load(directory)
    for pattern in patterns:
        assert pattern in str(info.value), str(info.value)
    assert not mapped(directory)
    return str(info.value)


def edit_manifest(directory, change):
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def flip_byte(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", ["libfuncs.so", "funcs.h"])
def test_tampered_files_are_refused(copy, name):
    path = copy / name
    flip_byte(path, path.stat().st_size // 2)
    refused(copy, f"{path} does not match the SHA-256", "tampered")


@pytest.mark.parametrize("name", ["libfuncs.so", "funcs.h", "matmul.ll"])
def test_missing_files_are_refused(copy, name):
    (copy / name).unlink()
    refused(copy, f"lacks {name}, which the manifest lists", "copy the whole directory")


def test_missing_manifest_and_directory(copy, tmp_path):
    (copy / "manifest.json").unlink()
    refused(copy, "has no manifest.json")
    refused(tmp_path / "nowhere", "is not a directory")


@pytest.mark.parametrize("change, patterns", [
    (lambda m: m.update(kiln_version="99.1.0"),
     [f"was compiled by kiln 99.1.0, this is kiln {kiln.__version__}", "kiln compile"]),
    (lambda m: m.update(manifest_version=3), ["manifest version 3", "reads version 2"]),
    (lambda m: m.update(format="other"), ["is not a kiln AOT manifest"]),
    (lambda m: m["files"].update({"../outside.txt": "0" * 64}),
     ["names the file '../outside.txt', which is not a plain file name"]),
    (lambda m: m.pop("files"), ["lists no content hash for the library"]),
    (lambda m: m["functions"][0].pop("in_tree"), ["is malformed", "'in_tree'"]),
])
def test_incompatible_or_malformed_manifests_are_refused(copy, change, patterns):
    edit_manifest(copy, change)
    refused(copy, *patterns)


@pytest.mark.parametrize("change, pattern", [
    (lambda m: m["target"].update(features=5), "target 'features' has the wrong type"),
    (lambda m: m["target"].update(features=[5]), "target 'features' is not a list of names"),
    (lambda m: m.update(blas={"int_bits": "sixty-four"}), "integer width"),
    (lambda m: m.update(blas={"int_bits": 48}), "integer width"),
    (lambda m: m.update(blas=[]), "integer width"),
    (lambda m: m.update(name="funcs\udc80"), "is not valid Unicode"),
    (lambda m: m["functions"][0].update(name="f\ud800"), "is not valid Unicode"),
    (lambda m: m.update(name="not an identifier"), "is not a C identifier"),
    (lambda m: m["functions"][0].update(symbol=["x"]), "is not a C identifier"),
    (lambda m: m["functions"][0].update(uses=5), "lists its uses as 5"),
    (lambda m: m.update(functions={"a": 1}), "'functions' is not a JSON array"),
    (lambda m: m.update(functions=[1]), "something other than function specs"),
    (lambda m: m.update(library=7), "'library' is not a JSON string"),
    (lambda m: m["target"].update(triple=None), "target 'triple' has the wrong type"),
    (lambda m: m.update(extra=functools.reduce(lambda acc, _: [acc], range(100), [])),
     "nested deeper than 64 levels"),
])
def test_manifests_of_the_wrong_shape_are_refused(copy, change, pattern):
    """Every malformed shape is an AOTLoadError before the library is opened (hostile
    manifests: wrong types, lone surrogates, deep nesting)."""
    edit_manifest(copy, change)
    refused(copy, "manifest.json is malformed", pattern)


def test_manifests_nested_beyond_the_json_parser_are_refused(copy):
    (copy / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(copy, "nests deeper than any kiln manifest")


def test_invalid_json_is_refused(copy):
    (copy / "manifest.json").write_text("{not json")
    refused(copy, "manifest.json is not valid JSON")


def test_another_cpu_is_refused(copy, monkeypatch):
    edit_manifest(copy, lambda m: m["target"]["features"].append("kiln_imaginary_feature"))
    refused(copy, "lacks the features it requires: kiln_imaginary_feature", "--cpu generic")
    monkeypatch.setattr(kiln.aot, "host_features", lambda: {"sse", "sse2"})
    message = refused(copy, "lacks the features it requires")
    assert "avx2" in message or "sse4_2" in message


def test_another_architecture_is_refused(copy):
    def arm(manifest):
        manifest["target"].update(triple="aarch64-unknown-linux-gnu", machine="aarch64")
    edit_manifest(copy, arm)
    refused(copy, "was compiled for aarch64-unknown-linux-gnu")


def test_unknown_cpu_features(copy, monkeypatch):
    """Without /proc/cpuinfo, a native build is refused and a generic one loads."""
    monkeypatch.setattr(kiln.aot, "host_features", lambda: None)
    refused(copy, "--cpu native", "cannot be read")
    edit_manifest(copy, lambda m: m["target"].update(mode="generic"))
    assert kiln.aot.load(copy).elementwise_scalar(1.0, 2.0) is not None
