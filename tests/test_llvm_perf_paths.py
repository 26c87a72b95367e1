"""The LLVM backend's fast paths against the reference backend: dot_general through BLAS,
loop nests split across threads.

Products are drawn with hypothesis over dimension numbers (batch axes anywhere, operands stored
transposed, contractions over several axes in any pair order, contraction lengths 0 and 1),
dtypes float32/float64/int32 and `preferred_element_type`, and compared with the reference
backend. Large fused nests (elementwise chains, reductions over leading, trailing and all axes,
transposed views, iota) run on several threads and must match the reference, also when several
Python threads call them at once. The on-disk object cache is exercised across processes: a
second process loads the object code without building IR, and damaged entries are recompiled.
The dispatch fast path (a native entry that checks its arrays itself) must fall back to
converting inputs of any other form, and jit's fast path must never run a specialisation the
ordinary path would not choose (types, weak types, changed globals). 10,000 calls must not grow
memory. Performance is never asserted here (see BENCHMARKS.md).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln.compiler import passes
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.ssa import Eqn, Function, Var
from kiln.compiler.primitives import PRIMITIVES
from kiln.compiler.backends import reference
from kiln.compiler.backends.llvm import compile_function
from kiln.compiler.backends.llvm.lower_linalg import plan_blas

SETTINGS = settings(max_examples=40, deadline=None)
F32, F64, I32 = (np.dtype(t) for t in (np.float32, np.float64, np.int32))


def one_equation(name, in_avals, **params):
    """An SSA function of a single equation `name` on inputs of `in_avals`."""
    invars = [Var(f"a{i}", a) for i, a in enumerate(in_avals)]
    out = Var("out", PRIMITIVES[name].abstract_eval(*in_avals, **params))
    return Function("f", invars, [Eqn([out], PRIMITIVES[name], invars, params)], [out])


def run_both(fn, *args):
    return compile_function(fn)(*args), reference.compile_function(fn)(*args)


# --------------------------------------------------------------------------- dot_general

@st.composite
def products(draw):
    """(lhs shape, rhs shape, dimension_numbers). Each operand is either *blocked* (its batch,
    free and contracting axes each in one block, the blocks in a random order: what BLAS takes
    as it is, transposed or not) or its axes are in a random memory order; contracting pairs
    are listed in a random order."""
    batch = draw(st.lists(st.sampled_from([1, 2, 3]), max_size=2))
    contract = draw(st.lists(st.sampled_from([16, 33, 5, 1, 0]), max_size=2))
    free_l = draw(st.lists(st.sampled_from([16, 40, 7, 1, 2]), min_size=1, max_size=2))
    free_r = draw(st.lists(st.sampled_from([16, 40, 7, 1, 2]), min_size=1, max_size=2))
    sizes = {"b": batch, "c": contract}

    def layout(free):
        blocks = [[(kind, i) for i in range(len(sizes.get(kind, free)))] for kind in "bcf"]
        if draw(st.booleans()):
            order = [item for block in draw(st.permutations(blocks)) for item in block]
        else:
            order = draw(st.permutations([item for block in blocks for item in block]))
        shape = tuple(sizes.get(kind, free)[i] for kind, i in order)
        return shape, {item: axis for axis, item in enumerate(order)}

    (ls, lpos), (rs, rpos) = layout(free_l), layout(free_r)
    pairs = draw(st.permutations(range(len(contract))))
    dims = ((tuple(lpos[("c", i)] for i in pairs), tuple(rpos[("c", i)] for i in pairs)),
            (tuple(lpos[("b", i)] for i in range(len(batch))),
             tuple(rpos[("b", i)] for i in range(len(batch)))))
    return ls, rs, dims


def _operand(rng, shape, dtype):
    if dtype.kind == "i":
        return rng.integers(-4, 5, shape).astype(dtype)
    return rng.uniform(-1, 1, shape).astype(dtype)


@SETTINGS
@given(products(), st.sampled_from([(F32, None), (F64, None)] * 3 + [(I32, None), (F32, F64),
                                                                   (I32, F32)]),
       st.integers(0, 2**32 - 1))
def test_dot_general_matches_reference(product, types, seed):
    ls, rs, dims = product
    dtype, preferred = types
    rng = np.random.default_rng(seed)
    lhs, rhs = _operand(rng, ls, dtype), _operand(rng, rs, dtype)
    fn = one_equation("dot_general", [ShapedArray(ls, dtype), ShapedArray(rs, dtype)],
                      dimension_numbers=dims, preferred_element_type=preferred)
    (got,), (want,) = run_both(fn, lhs, rhs)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-4 if want.dtype == F32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 50)


def _matmul_text(ls, rs, dims, dtype=F32):
    fn = one_equation("dot_general", [ShapedArray(ls, dtype), ShapedArray(rs, dtype)],
                      dimension_numbers=dims)
    return compile_function(fn).as_text("llvm-unoptimized")


def test_transposed_operands_are_read_in_place():
    both_transposed = (((0,), (1,)), ((), ()))
    text = _matmul_text((64, 32), (48, 64), both_transposed)
    assert "kiln_gemm_float32" in text and text.count("transpose") == 0
    plan = plan_blas(ShapedArray((64, 32), F32), ShapedArray((48, 64), F32),
                     ShapedArray((32, 48), F32), both_transposed)
    assert plan.kind == "gemm" and plan.lhs.trans and plan.rhs.trans


def test_vectors_use_gemv_and_batches_loop_over_gemm():
    assert "kiln_dgemv" in _matmul_text((128, 64), (64,), (((1,), (0,)), ((), ())), F64)
    assert "kiln_sgemv" in _matmul_text((64,), (64, 128), (((0,), (0,)), ((), ())))
    text = _matmul_text((3, 96, 64), (64, 3, 96), (((2,), (0,)), ((0,), (1,))))
    assert "kiln_gemm_float32" in text and "batch" in text


def test_outer_products_small_and_integer_products_stay_loops():
    outer = (((1,), (0,)), ((), ()))
    assert "gemm" not in _matmul_text((256, 1), (1, 256), outer)
    assert "gemm" not in _matmul_text((4, 3), (3, 2), outer)
    assert "gemm" not in _matmul_text((64, 64), (64, 64), outer, I32)


def test_empty_contraction_gives_zeros():
    fn = one_equation("dot_general", [ShapedArray((64, 0), F32), ShapedArray((0, 96), F32)],
                      dimension_numbers=(((1,), (0,)), ((), ())))
    (got,), _ = run_both(fn, np.ones((64, 0), np.float32), np.ones((0, 96), np.float32))
    np.testing.assert_array_equal(got, np.zeros((64, 96), np.float32))


# ------------------------------------------------------------------------------ threads

def _parallel_program(x, y):
    a = x * x + x * 2
    return (a, jnp.sum(a * y, axis=0), jnp.max(a, axis=-1), jnp.sum(y), jnp.swapaxes(a, 0, 1) - y.T,
            jnp.min(a + jnp.arange(a.shape[-1], dtype=a.dtype), axis=0))


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([(1, 1 << 20), (1100, 1000), (3, 350_003), ((1 << 20) + 5, 1), (1025, 1024)]),
       st.sampled_from([F32, I32]), st.integers(0, 2**32 - 1))
def test_parallel_nests_match_reference(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x, y = (_operand(rng, shape, dtype) for _ in range(2))
    got = kiln.jit(_parallel_program, backend="llvm")(x, y)
    want = kiln.jit(_parallel_program, backend="reference")(x, y)
    for g, w in zip(got, want):
        tol = 1e-5 * max(1, np.sqrt(x.size)) if dtype == F32 else 0
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


def test_leading_axes_reductions_split_their_kept_axes():
    """Sums over the two leading axes of a 3-D array: threads split the last axis."""
    z = np.random.default_rng(0).integers(-50, 50, (80, 100, 300)).astype(np.int32)
    f = kiln.jit(lambda z: (jnp.sum(z, axis=(0, 1)), jnp.max(z * 3, axis=0)), backend="llvm")
    s, m = f(z)
    np.testing.assert_array_equal(np.asarray(s), z.sum(axis=(0, 1)))
    np.testing.assert_array_equal(np.asarray(m), (z * 3).max(axis=0))
    assert "kiln_parallel_for" in f.lower(z).compile().as_text("llvm-unoptimized")


def test_only_large_nests_are_split():
    f = kiln.jit(lambda x: x * x + x * 2.0, backend="llvm")
    big, small = np.ones((1100, 1000), np.float32), np.ones((60, 70), np.float32)
    assert "kiln_parallel_for" in f.lower(big).compile().as_text("llvm-unoptimized")
    assert "kiln_parallel_for" not in f.lower(small).compile().as_text("llvm-unoptimized")
    total = kiln.jit(lambda x: jnp.sum(x), backend="llvm")   # every axis reduced: one thread
    assert "kiln_parallel_for" not in total.lower(big).compile().as_text("llvm-unoptimized")


_THREADED_PROGRAM = """
import numpy as np, kiln, kiln.numpy as jnp
x = np.arange(3 * 800_011, dtype=np.int32).reshape(3, 800_011) % 1000
f = kiln.jit(lambda x: (x * 3 + 1, jnp.sum(x, axis=0)), backend="llvm")
a, s = f(x)
assert "kiln_parallel_for" in f.lower(x).compile().as_text("llvm-unoptimized")
assert (np.asarray(a) == x * 3 + 1).all() and (np.asarray(s) == x.sum(axis=0)).all()
print("ok")
"""


@pytest.mark.parametrize("threads", ["1", "3"])
def test_thread_count_setting(tmp_path, threads):
    """KILN_NUM_THREADS: one thread, or more threads than cores (blocks are claimed
    dynamically, so any count covers every block exactly once)."""
    env = {**os.environ, "KILN_NUM_THREADS": threads, "KILN_CACHE_DIR": str(tmp_path)}
    script = tmp_path / "threaded_program.py"
    script.write_text(_THREADED_PROGRAM)
    done = subprocess.run([sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_concurrent_calls_of_parallel_kernels():
    from concurrent.futures import ThreadPoolExecutor
    f = kiln.jit(lambda x: jnp.sum(x * x + 1.0, axis=0), backend="llvm")
    xs = [np.full((1400, 1000), k, np.float32) for k in range(6)]
    f(xs[0])   # specialise first: tracing is not thread-safe (calls of compiled code are)
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda x: np.asarray(f(x)), xs * 3))
    for x, got in zip(xs * 3, results):
        np.testing.assert_allclose(got, (x * x + 1).sum(axis=0), rtol=1e-5)


# --------------------------------------------------------------------------- disk cache

_CACHED_PROGRAM = '''
import json, sys, time
import numpy as np
import kiln, kiln.numpy as jnp
from kiln.compiler import passes
from kiln.compiler.backends.llvm import compile_function
from kiln.compiler.backends.llvm.executable import cache_key

def f(x, w):
    return jnp.tanh(x @ w) * 2.0 + 1.0

x, w = np.linspace(-1, 1, 96 * 64, dtype=np.float32).reshape(96, 64), np.eye(64, dtype=np.float32)
ssa = passes.run_pipeline(kiln.make_ir(f)(x, w), pipeline=passes.PIPELINES["llvm"])
start = time.perf_counter()
executable = compile_function(ssa)
seconds = time.perf_counter() - start
built = "kiln.compiler.backends.llvm.codegen" in sys.modules
out, = executable(x, w)
ok = bool(np.allclose(out, np.tanh(x) * 2 + 1, atol=1e-5))
text = executable.as_text("llvm") if sys.argv[1] == "text" else ""
print(json.dumps({"seconds": seconds, "built": built, "ok": ok, "text": "kiln_main" in text,
                  "key": cache_key(ssa)}))
'''


def _run_cached(tmp_path, *args):
    script = tmp_path / "cached_program.py"
    script.write_text(_CACHED_PROGRAM)
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _entry(tmp_path, key):
    return tmp_path / "cache" / "llvm" / f"{key}.kobj"


def test_second_process_loads_object_code_from_disk(tmp_path):
    first = _run_cached(tmp_path, "-")
    assert first["ok"] and first["built"] and _entry(tmp_path, first["key"]).is_file()
    second = _run_cached(tmp_path, "text")
    assert second["ok"] and not second["built"]   # no IR built, the code generator not imported
    assert second["text"]                        # the IR is rebuilt when asked for


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupt_entries_are_recompiled(tmp_path, damage):
    entry = _entry(tmp_path, _run_cached(tmp_path, "-")["key"])
    data = bytearray(entry.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        del data[len(data) // 3:]
    entry.write_bytes(bytes(data))
    again = _run_cached(tmp_path, "-")
    assert again["ok"] and again["built"]
    assert _run_cached(tmp_path, "-")["built"] is False   # the rewritten entry is whole


# ---------------------------------------------------------------------------- dispatch

def _affine_executable():
    fn = kiln.make_ir(lambda x, w: x @ w + 1.0)(np.ones((4, 3), np.float32),
                                                 np.ones((3, 2), np.float32))
    return compile_function(passes.run_pipeline(fn, pipeline=passes.PIPELINES["llvm"]))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")   # np.asmatrix
def test_inputs_in_any_form_are_converted():
    """The native entry takes exact arrays only; everything else is converted first."""
    ex = _affine_executable()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    want = x @ w + 1
    forms = [(x, w), (x.astype(np.float64), w), (np.asfortranarray(x), w),
             (np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2], w),
             (x.astype(">f4"), w), (x.tolist(), w), (np.asmatrix(x), w),
             (np.frombuffer(b"\0" + x.tobytes(), np.float32, offset=1).reshape(4, 3), w)]
    for k, (a, b) in enumerate(forms):
        expected = np.asarray(a, np.float32) @ w + 1 if k == 3 else want
        np.testing.assert_array_equal(ex(a, b)[0], expected, err_msg=str(k))
    assert ex.call_exact((x, w)) is not None and ex.call_exact((x.T.copy().T, w)) is None
    with pytest.raises(TypeError, match="takes 2 arrays"):
        ex(x)
    with pytest.raises(TypeError, match="shape"):
        ex(x[:2], w)


def test_jit_fast_path_respects_types_weak_types_and_globals():
    f = kiln.jit(lambda x, y: x * y + SCALE, backend="llvm")
    x, y = jnp.ones((3,), jnp.float32), jnp.full((3,), 2.0, jnp.float32)
    globals()["SCALE"] = 1.0
    assert np.asarray(f(x, y)).tolist() == [3.0] * 3
    assert np.asarray(f(x, y)).tolist() == [3.0] * 3          # the fast path
    globals()["SCALE"] = 5.0                                     # a guarded global changed
    assert np.asarray(f(x, y)).tolist() == [7.0] * 3
    assert np.asarray(f(x, np.full(3, 2.0, np.float32))).tolist() == [7.0] * 3
    doubled = f(x, jnp.ones((3, 1), jnp.float32))                # another shape
    assert doubled.shape == (3, 3)
    weak = f(jnp.asarray(2.0), jnp.asarray(3.0))                 # weak scalars
    strong = f(jnp.asarray(2.0, jnp.float32), jnp.asarray(3.0, jnp.float32))
    assert weak.weak_type and not strong.weak_type and float(weak) == float(strong) == 11.0
    assert f._cache_size() == 4   # the changed global replaced its specialisation


SCALE = 1.0


def test_jit_fast_path_python_floats_follow_enable_x64():
    from kiln.compiler.config import config
    g = kiln.jit(lambda v: v * 2.0 + 1.0, backend="llvm")
    assert float(g(1.5)) == 4.0 and g(1.5).dtype == np.float32 and g(1.5).weak_type
    old = config.read("enable_x64")
    config.update("enable_x64", True)
    try:
        assert g(1.5).dtype == np.float64   # the float is float64 now: a new specialisation
    finally:
        config.update("enable_x64", old)
    assert g(2.5).dtype == np.float32 and float(g(2.5)) == 6.0
    assert g._cache_size() == 2


def _rss_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_ten_thousand_calls_do_not_grow_memory():
    f = kiln.jit(lambda x, w, b: (jnp.tanh(x @ w + b), jnp.sum(x)), backend="llvm")
    x, w, b = (jnp.ones(s, jnp.float32) for s in ((8, 32), (32, 16), (16,)))
    big = kiln.jit(lambda z: z * 2.0 + 1.0, backend="llvm")
    z = np.ones((700, 600), np.float32)   # outputs from the buffer pool
    for _ in range(200):
        f(x, w, b), big(z)
    before = _rss_bytes()
    for _ in range(10_000):
        f(x, w, b)
    for _ in range(300):
        big(z)
    assert _rss_bytes() - before < 8 << 20


# ------------------------------------------------------------------------ compile modes

def _small_program(x, y, w):
    a = jnp.tanh(x * y + 1.5) - jnp.exp(-x)
    return a @ w, jnp.max(a, axis=0), jnp.sum(a * a, axis=1), jnp.where(x > y, x, y)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 6), st.integers(0, 9), st.booleans(), st.integers(0, 2**32 - 1))
def test_quick_and_optimised_compilations_agree(m, n, quick, seed):
    """Tiny functions compile at O0 with FastISel (executable.opt_level); the same programs
    compiled at O3 must agree with them and with the reference."""
    from kiln.compiler.backends.llvm import executable
    rng = np.random.default_rng(seed)
    x, y = (rng.uniform(-2, 2, (m, n)).astype(np.float32) for _ in range(2))
    w = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    fn = passes.run_pipeline(kiln.make_ir(_small_program)(x, y, w),
                             pipeline=passes.PIPELINES["llvm"])
    old = executable.QUICK_WORK
    executable.QUICK_WORK = 10**9 if quick else -1
    try:
        got = compile_function(fn)(x, y, w)
        assert executable.opt_level(fn) == (0 if quick else 3)
    finally:
        executable.QUICK_WORK = old
    for g, want in zip(got, reference.compile_function(fn)(x, y, w)):
        np.testing.assert_allclose(g, want, rtol=2e-6, atol=2e-6)
