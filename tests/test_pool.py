"""The thread pool of generated code (pool.py): tasks, concurrent tasks at barriers, nesting,
parallel_for on the pool, and matrix products split into panels (lower_linalg.py).

Every pool function is IR compiled here into a small module whose extern globals are bound
like any compiled function's (the runtime library's pool); the thread count is the runtime
library's `kiln_num_threads`, changed in this process (1, 2, 8) or set by `KILN_NUM_THREADS`
in a child process. Anything that could hang runs in a child with a timeout.
"""
import ctypes
import os
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kiln.compiler.backends import reference
from kiln.compiler.backends.llvm import compile_function, lower_linalg, parallel, pool, rtlib
from kiln.compiler.backends.llvm import ltypes as T
from kiln.compiler.backends.llvm.loops import counted_loop
from test_llvm_gemm import layout, operand, product_fn
from test_llvm_runtime import jit as _jit

HERE = os.path.dirname(os.path.abspath(__file__))
COUNTS = (0, 1, 2, 3, 7, 64, 1000)


def _i64_at(b, base, index):
    return b.gep(base, [index if isinstance(index, ir.Value) else T.i64(index)], source_etype=T.I64)


def _driver(module, name, task, concurrent):
    """void name(ptr env, i64 n): run_tasks(task, env, n)."""
    function = ir.Function(module, ir.FunctionType(T.VOID, [T.PTR, T.I64]), name)
    b = ir.IRBuilder(function.append_basic_block("entry"))
    pool.emit_run_tasks(b, task, function.args[0], function.args[1], concurrent)
    b.ret_void()


def build_module(name="pool_test"):
    """The test module: see each function's comment."""
    module = ir.Module(name)
    # count(env = i64 counts[n], i): counts[i] += 1
    count = ir.Function(module, pool.TASK_TYPE, "count_task")
    b = ir.IRBuilder(count.append_basic_block("entry"))
    b.atomic_rmw("add", _i64_at(b, *count.args), T.i64(1), "seq_cst")
    b.ret_void()
    _driver(module, "run", count, False)
    _driver(module, "run_concurrent", count, True)

    # meet(env = {barrier (16 bytes), arrivals, rounds, parties, errors}, i): `rounds` times,
    # arrive, wait, check that everyone arrived, wait again
    meet = ir.Function(module, pool.TASK_TYPE, "meet_task")
    b = ir.IRBuilder(meet.append_basic_block("entry"))
    env = meet.args[0]
    arrivals, errors = _i64_at(b, env, 2), _i64_at(b, env, 5)
    rounds = b.load(_i64_at(b, env, 3), typ=T.I64)
    parties = b.load(_i64_at(b, env, 4), typ=T.I64)

    def one_round(b2, r, carried):
        b2.atomic_rmw("add", arrivals, T.i64(1), "seq_cst")
        pool.emit_barrier_wait(b2, env, parties)
        seen = b2.load_atomic(arrivals, "seq_cst", 8, typ=T.I64)
        with b2.if_then(b2.icmp_signed("!=", seen, b2.mul(b2.add(r, T.i64(1)), parties))):
            b2.atomic_rmw("add", errors, T.i64(1), "seq_cst")
        pool.emit_barrier_wait(b2, env, parties)
        return carried
    counted_loop(b, rounds, one_round, (), "round")
    b.ret_void()
    _driver(module, "meet", meet, True)

    # nested(env = i64 counts[n * 8], i): run count over counts[8 i : 8 i + 8] on the pool, and a
    # parallel_for adding 1 to each of them again (each ends at 2)
    nested = ir.Function(module, pool.TASK_TYPE, "nested_task")
    b = ir.IRBuilder(nested.append_basic_block("entry"))
    inner = _i64_at(b, nested.args[0], b.mul(nested.args[1], T.i64(8)))
    pool.emit_run_tasks(b, count, inner, 8, False)
    parallel.emit_parallel_for(b, _range_body(module), inner, T.i64(8), 1)
    b.ret_void()
    _driver(module, "nested", nested, False)
    _driver(module, "nested_concurrent", nested, True)

    # loop(env = {i64 *counts, i64 grain, i64 chunks, i64 misaligned}, n, grain)
    loop = ir.Function(module, ir.FunctionType(T.VOID, [T.PTR, T.I64, T.I64]), "loop")
    b = ir.IRBuilder(loop.append_basic_block("entry"))
    parallel.emit_parallel_for(b, _checked_body(module), loop.args[0], loop.args[1], loop.args[2])
    b.ret_void()
    return module


def _range_body(module):
    """body(i64 counts[], lo, hi): counts[lo:hi] += 1 (atomically)."""
    body = ir.Function(module, parallel.BODY_TYPE, "range_body")
    b = ir.IRBuilder(body.append_basic_block("entry"))
    _add_one(b, *body.args)
    b.ret_void()
    return body


def _add_one(b, counts, lo, hi):
    """counts[lo:hi] += 1, atomically."""
    def add(b2, i, carried):
        b2.atomic_rmw("add", _i64_at(b2, counts, b2.add(lo, i)), T.i64(1), "seq_cst")
        return carried
    counted_loop(b, b.sub(hi, lo), add, (), "it")


def _checked_body(module):
    """body(env = {counts, grain, chunks, misaligned}, lo, hi): counts[lo:hi] += 1, count the
    chunks and the chunks not starting at a multiple of the grain."""
    body = ir.Function(module, parallel.BODY_TYPE, "checked_body")
    b = ir.IRBuilder(body.append_basic_block("entry"))
    env, lo, hi = body.args
    counts, grain = parallel.unpack_env(b, env, [T.PTR, T.I64])
    b.atomic_rmw("add", _i64_at(b, env, 2), T.i64(1), "seq_cst")
    with b.if_then(b.icmp_signed("!=", b.srem(lo, grain), T.i64(0))):
        b.atomic_rmw("add", _i64_at(b, env, 3), T.i64(1), "seq_cst")
    _add_one(b, counts, lo, hi)
    b.ret_void()
    return body


def _function(engine, name, *argtypes):
    return ctypes.CFUNCTYPE(None, *argtypes)(engine.get_function_address(name))


@pytest.fixture(scope="module")
def engine():
    return _jit(build_module())


@pytest.fixture(params=[1, 2, 8])
def threads(request):
    slot = ctypes.c_int64.from_address(rtlib.extern_address("kiln_num_threads"))
    before = slot.value
    slot.value = request.param
    yield request.param
    slot.value = before


def test_the_pool_ir_verifies():
    module = ir.Module("kiln.pool_verify")
    module.triple = llvm.get_process_triple()
    pool.emit(module, module.triple)
    llvm.parse_assembly(str(module)).verify()
    for triple in ("aarch64-unknown-linux-gnu", "x86_64-unknown-linux-gnu"):
        other = ir.Module(f"kiln.pool_{triple.split('-')[0]}")
        other.triple = triple
        pool.emit(other, triple)
        llvm.parse_assembly(str(other)).verify()
        assert ("aarch64.hint" if triple.startswith("aarch64") else "sse2.pause") in str(other)


@pytest.mark.parametrize("concurrent", [False, True])
def test_every_task_runs_once(engine, threads, concurrent):
    run = _function(engine, "run_concurrent" if concurrent else "run", ctypes.c_void_p, ctypes.c_int64)
    for n in COUNTS:
        if concurrent and n > 64:
            continue
        counts = np.zeros(n + 3, np.int64)
        for repeat in range(3):
            run(counts.ctypes.data, n)
            assert (counts[:n] == repeat + 1).all() and not counts[n:].any(), (n, counts)


def test_nested_pools_do_not_deadlock(engine, threads):
    for name in ("nested", "nested_concurrent"):
        run = _function(engine, name, ctypes.c_void_p, ctypes.c_int64)
        for n in (1, 2, 7):
            counts = np.zeros(8 * n, np.int64)
            run(counts.ctypes.data, n)
            assert (counts == 2).all(), (name, n, counts)


def _expected_chunks(n, grain, threads):
    blocks = -(-n // grain)
    chunks = min(blocks, threads * pool.CHUNKS_PER_THREAD)
    if threads <= 1 or chunks <= 1:
        return int(n > 0)
    per = -(-blocks // chunks)
    return -(-blocks // per)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.sampled_from([0, 1, 2, 3, 7, 64, 1000, 4097]), grain=st.integers(-1, 300))
def test_parallel_for_runs_every_iteration_once(engine, threads, n, grain):
    loop = _function(engine, "loop", ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    counts = np.zeros(n + 5, np.int64)
    env = np.array([counts.ctypes.data, max(grain, 1), 0, 0], np.int64)
    loop(env.ctypes.data, n, grain)
    assert (counts[:n] == 1).all() and not counts[n:].any()
    assert env[2] == _expected_chunks(n, max(grain, 1), threads)
    assert env[3] == 0   # every chunk starts at a multiple of the grain


CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import test_pool as t
    engine = t._jit(t.build_module("pool_child"))
    meet = t._function(engine, "meet", t.ctypes.c_void_p, t.ctypes.c_int64)
    run = t._function(engine, "run", t.ctypes.c_void_p, t.ctypes.c_int64)
    for parties in (2, 3, 8, 8):
        env = np.zeros(6, np.int64)
        env[3], env[4] = 300, parties
        meet(env.ctypes.data, parties)
        assert env[2] == 300 * parties and env[5] == 0, env
    for n in t.COUNTS:
        counts = np.zeros(n + 1, np.int64)
        run(counts.ctypes.data, n)
        assert (counts[:n] == 1).all() and counts[n] == 0
    print("ok")
''')


@pytest.mark.parametrize("setting", ["1", "2", "8"])
def test_concurrent_tasks_meet_at_barriers(setting):
    """8 replicas on 2 cores wait for each other 600 times; KILN_NUM_THREADS does not limit
    concurrent jobs."""
    result = subprocess.run([sys.executable, "-c", CHILD, HERE], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "KILN_NUM_THREADS": setting})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["ok"]


# ------------------------------------------------------------------ products split in panels

PANEL_SIZES = st.sampled_from([1, 2, 5, 17, 33, 64, 65, 130])


@pytest.fixture
def small_panels(monkeypatch):
    """Split products a thousand times smaller than the real thresholds (no disk cache)."""
    monkeypatch.setenv("KILN_CACHE_DIR", "off")
    monkeypatch.setattr(lower_linalg, "TASK_FLOPS", 1 << 9)
    monkeypatch.setattr(lower_linalg, "SPLIT_MIN_FLOPS", 1 << 10)
    monkeypatch.setattr(lower_linalg, "PANEL_ALIGN", 4)
    monkeypatch.setattr(lower_linalg, "INLINE_MAX_FLOPS", 0)
    monkeypatch.setattr(lower_linalg, "INLINE_MAX_VECTOR_FLOPS", 0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(PANEL_SIZES, PANEL_SIZES, st.sampled_from([2, 3, 31, 64]),
       st.sampled_from([(), (1,), (3,), (2, 2)]), st.booleans(), st.booleans(),
       st.sampled_from([np.float32, np.float64, np.complex64, np.complex128]),
       st.integers(0, 2**32 - 1))
def test_split_products_match_numpy(small_panels, threads, m, n, k, batch, lhs_t, rhs_t, dtype,
                                    seed):
    dtype = np.dtype(dtype)
    ls, rs, dims = layout(m, n, k, batch, lhs_t, rhs_t)
    fn = product_fn(ls, rs, dims, dtype)
    native = compile_function(fn)
    plan = lower_linalg.plan_blas(fn.invars[0].aval, fn.invars[1].aval, fn.outvars[0].aval, dims)
    split = plan is not None and lower_linalg.split(plan, dtype)
    assert ("kiln_run_tasks" in native.as_text("llvm-unoptimized")) == split
    rng = np.random.default_rng(seed)
    a, b = operand(rng, ls, dtype), operand(rng, rs, dtype)
    (got,), (want,) = native(a, b), reference.compile_function(fn)(a, b)
    tol = 2e-5 if dtype.itemsize * (2 if dtype.kind == "f" else 1) == 8 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * k)


def test_large_products_split_at_the_real_thresholds():
    f32 = np.dtype(np.float32)
    big = product_fn(*layout(128, 512, 784, (), False, False)[:3], f32)
    assert "kiln_run_tasks" in compile_function(big).as_text("llvm-unoptimized")
    medium = product_fn(*layout(128, 128, 128, (), False, False)[:3], f32)
    text = compile_function(medium).as_text("llvm-unoptimized")
    assert "kiln_gemm_float32" in text and "kiln_run_tasks" not in text


SPLIT_CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    from kiln.compiler.backends.llvm import blas_lookup, compile_function
    sys.path.insert(0, sys.argv[1])
    from test_llvm_gemm import layout, operand, product_fn
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.complex128):
        ls, rs, dims = layout(300, 700, 500, (2,), False, True)
        fn = product_fn(ls, rs, dims, np.dtype(dtype))
        native = compile_function(fn)
        assert "kiln_run_tasks" in native.as_text("llvm-unoptimized")
        a, b = operand(rng, ls, np.dtype(dtype)), operand(rng, rs, np.dtype(dtype))
        want = np.einsum("bik,bjk->bij", a.astype(np.complex128), b.astype(np.complex128))
        for _ in range(10):   # 22 panels at once on 8 threads (packed kernel, BLAS)
            got = native(a, b)[0]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    print(blas_lookup.library().name)
''')


@pytest.mark.parametrize("blas", ["numpy", "scipy"])
def test_concurrent_blas_calls_are_safe(blas):
    """OpenBLAS (NumPy's and SciPy's) called by 8 pool threads at once gives NumPy's results."""
    if blas == "scipy":
        pytest.importorskip("scipy")
    result = subprocess.run([sys.executable, "-c", SPLIT_CHILD, HERE], capture_output=True,
                            text=True, timeout=300,
                            env={**os.environ, "KILN_BLAS": blas, "KILN_NUM_THREADS": "8",
                                 "KILN_CACHE_DIR": "off"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1].startswith(blas)
