"""The LLVM backend's runtime pieces: buffer pool, disk cache, BLAS pointers, parallel_for, externs.

Native code here is built directly with llvmlite (tiny modules JIT-compiled with MCJIT), so these
tests do not depend on the code generator.
"""
import ctypes
import multiprocessing
import os
import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kiln.compiler.backends.llvm import blas, disk_cache, externs, memory, parallel

I32, I64, PTR, VOID = ir.IntType(32), ir.IntType(64), ir.PointerType(), ir.VoidType()
MiB = 1 << 20
_ENGINES = []  # compiled code lives as long as its engine


def jit(module: ir.Module):
    """MCJIT-compile an llvmlite module for the host, bind its externs; returns name -> address."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module.triple = llvm.get_process_triple()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    machine = llvm.Target.from_triple(module.triple).create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2)
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    externs.bind_externs(engine.get_global_value_address, module.name)
    _ENGINES.append(engine)
    return engine


def cfunc(engine, name, *argtypes):
    return ctypes.CFUNCTYPE(None, *argtypes)(engine.get_function_address(name))


def ptr(array):
    return array.ctypes.data


def rss_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- memory.py ---------------------------------------------------------------------------------------

DTYPES = [np.float32, np.float64, np.int32, np.uint32, np.int8, np.bool_, np.complex64]


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.sampled_from([0, 1, 3, 17, 1024, 1500]), max_size=3).filter(lambda s: np.prod(s) <= 3e6),
       dtype=st.sampled_from(DTYPES))
def test_empty_matches_np_empty(shape, dtype):
    array = memory.empty(shape, dtype)
    assert array.shape == tuple(shape) and array.dtype == dtype
    assert array.flags.c_contiguous and array.flags.writeable
    if array.nbytes >= memory.THRESHOLD_BYTES:
        assert array.ctypes.data % 64 == 0
        assert array.base is not None and array.base.base is not None  # a pooled view, not an owner
    array.fill(1)
    assert (array == 1).all()


def test_small_and_object_arrays_are_plain_numpy():
    assert memory.empty((10,), np.float32).flags.owndata
    assert memory.empty((MiB,), object).flags.owndata
    assert memory.empty(np.int64(3), np.float32).shape == (3,)
    with pytest.raises(ValueError):
        memory.empty((-1, 4), np.float32)


def test_freed_block_is_reused():
    pool = memory.BufferPool(limit=64 * MiB)
    first = pool.empty((1000, 1000), np.float32)
    address = first.ctypes.data
    del first
    again = pool.empty((1000, 1000), np.float32)
    assert again.ctypes.data == address
    assert pool.stats()["hits"] == 1 and pool.stats()["misses"] == 1
    other_dtype = pool.empty((1000, 1000), np.int32)  # same size class, different dtype
    assert other_dtype.ctypes.data != address


def test_views_keep_the_block_alive():
    pool = memory.BufferPool(limit=64 * MiB)
    array = pool.empty((1024, 1024), np.float64)
    array[...] = 7.0
    views = [array[::2, 1:], array.T, array.reshape(-1), array.view(np.int64), np.asarray(array)[3]]
    expected = [view.copy() for view in views]
    address = array.ctypes.data
    del array
    while views:
        assert pool.stats()["live_blocks"] == 1
        other = pool.empty((1024, 1024), np.float64)
        assert other.ctypes.data != address
        other[...] = -1.0
        assert all(np.array_equal(view, copy) for view, copy in zip(views, expected))
        views.pop()
        del other
    assert pool.stats()["live_blocks"] == 0
    reused = [pool.empty((1024, 1024), np.float64) for _ in range(2)]
    assert address in {array.ctypes.data for array in reused} and pool.stats()["misses"] == 2


def test_repeated_alloc_free_does_not_grow_memory():
    pool = memory.BufferPool(limit=64 * MiB)
    sizes = [(MiB,), (3 * MiB // 4 + 5,), (2 * MiB + 3,)]

    def cycle(count):
        for i in range(count):
            array = pool.empty(sizes[i % 3], np.float32)
            array[::1024] = i  # touch every page
            del array

    cycle(100)
    before = rss_bytes()
    cycle(10_000)
    assert rss_bytes() - before < 8 * MiB
    stats = pool.stats()
    assert stats["misses"] == 3 and stats["hits"] == 10_097 and stats["live_blocks"] == 0


def test_pool_is_bounded_and_releases_least_recently_used():
    pool = memory.BufferPool(limit=5 * MiB)
    a, b, c = (pool.empty((n * MiB,), np.uint8) for n in (1, 2, 3))
    addresses = [x.ctypes.data for x in (a, b, c)]
    del a, b  # cached: 1 + 2 MiB
    assert pool.stats()["cached_bytes"] == 3 * MiB
    del c  # 6 MiB > 5 MiB: the 1 MiB block (returned first) goes
    stats = pool.stats()
    assert stats["cached_bytes"] == 5 * MiB and stats["evictions"] == 1
    big = pool.empty((6 * MiB,), np.uint8)
    del big  # larger than the limit: dropped without flushing the pool
    assert pool.stats()["cached_bytes"] == 5 * MiB and pool.stats()["evictions"] == 2
    assert pool.empty((2 * MiB,), np.uint8).ctypes.data == addresses[1]
    assert pool.empty((3 * MiB,), np.uint8).ctypes.data == addresses[2]


def test_clear_and_limit():
    pool = memory.BufferPool(limit=64 * MiB)
    keep = pool.empty((2 * MiB,), np.uint8)
    dropped = pool.empty((4 * MiB,), np.uint8)
    del dropped
    assert pool.clear() == 4 * MiB
    stats = pool.stats()
    assert stats["cached_bytes"] == 0 and stats["live_bytes"] == 2 * MiB
    pool.set_limit(0)
    del keep
    assert pool.stats()["cached_bytes"] == 0 and pool.limit_bytes() == 0
    assert set(memory.stats()) >= {"hits", "misses", "cached_bytes", "live_bytes", "limit_bytes"}


def test_pool_limit_from_environment(monkeypatch):
    monkeypatch.setenv("KILN_BUFFER_POOL", "3M")
    assert memory.BufferPool().limit_bytes() == 3 * MiB
    monkeypatch.setenv("KILN_BUFFER_POOL", "1g")
    assert memory.BufferPool().limit_bytes() == 1 << 30
    monkeypatch.setenv("KILN_BUFFER_POOL", "lots")
    with pytest.raises(ValueError, match="KILN_BUFFER_POOL='lots'.*512M"):
        memory.BufferPool()


def test_size_classes_waste_at_most_an_eighth():
    for nbytes in [MiB, MiB + 1, 3 * MiB - 7, 100_000_000, 5 * 10**9]:
        block = memory.size_class(nbytes)
        assert nbytes <= block <= nbytes * 9 / 8 + memory.PAGE_BYTES and block % memory.PAGE_BYTES == 0


def test_threads_share_the_pool_safely():
    pool = memory.BufferPool(limit=16 * MiB)
    errors = []

    def work(tag):
        for i in range(300):
            array = pool.empty(((1 + i % 3) * MiB // 4,), np.int32)
            array[::1000] = tag
            if not (array[::1000] == tag).all():
                errors.append(tag)

    threads = [threading.Thread(target=work, args=(tag,)) for tag in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = pool.stats()
    assert not errors
    assert stats["live_blocks"] == 0 and stats["hits"] + stats["misses"] == 1200


def test_forked_child_does_not_share_pooled_memory():
    array = memory.empty((MiB,), np.int32)
    array[:] = 1
    pid = os.fork()
    if pid == 0:  # child: writes to its copy and exits at once
        array[:] = 2
        os._exit(0)
    os.waitpid(pid, 0)
    assert (array == 1).all()


# -- disk_cache.py -----------------------------------------------------------------------------------

@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    return disk_cache.default()


@settings(max_examples=15, deadline=None)
@given(payload=st.binary(max_size=5000), parts=st.lists(st.text(max_size=20), max_size=4))
def test_cache_round_trip(tmp_path_factory, payload, parts):
    cache = disk_cache.DiskCache(tmp_path_factory.mktemp("cache"))
    entry = disk_cache.key(*parts)
    assert cache.load(entry) is None
    assert cache.store(entry, payload)
    assert cache.load(entry) == payload
    assert cache.info()["entries"] == 1


def test_keys_depend_on_every_part_and_its_boundaries():
    assert disk_cache.key("ssa", "x86_64", "skx") == disk_cache.key("ssa", "x86_64", "skx")
    variants = {disk_cache.key(*p) for p in [("ab", "c"), ("a", "bc"), ("abc",), (b"abc",), ("ab", "c", "")]}
    assert len(variants) == 4  # str and bytes of the same text hash alike
    assert len(disk_cache.key("x")) == 64


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_corrupt_or_truncated_entries_are_misses_and_deleted(tmp_path_factory, data):
    cache = disk_cache.DiskCache(tmp_path_factory.mktemp("cache"))
    entry = disk_cache.key("corrupt")
    cache.store(entry, b"object code" * 20)
    path = cache.directory / f"{entry}.kobj"
    blob = bytearray(path.read_bytes())
    if data.draw(st.booleans(), label="flip"):
        position = data.draw(st.integers(0, len(blob) - 1), label="position")
        blob[position] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    else:
        blob = blob[:data.draw(st.integers(0, len(blob) - 1), label="length")]
    path.write_bytes(bytes(blob))
    assert cache.load(entry) is None
    assert not path.exists()


def _hammer(directory, worker, rounds):
    """Store and load two shared keys with this worker's payloads; return what was read."""
    cache = disk_cache.DiskCache(directory)
    seen = []
    for i in range(rounds):
        entry = disk_cache.key("shared", str(i % 2))
        cache.store(entry, f"worker {worker} round {i} ".encode() * (100 + 37 * worker))
        seen.append(cache.load(entry))
    return seen


def test_concurrent_writers_never_expose_partial_entries(tmp_path):
    with multiprocessing.get_context("fork").Pool(4) as pool:
        results = pool.starmap(_hammer, [(tmp_path, worker, 60) for worker in range(4)])
    valid = {f"worker {w} round {i} ".encode() * (100 + 37 * w) for w in range(4) for i in range(60)}
    for payload in (p for seen in results for p in seen):
        assert payload in valid
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".kobj", ".kobj"]  # no temporary files left


def test_cache_location_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "mine"))
    assert disk_cache.default().directory == tmp_path / "mine" / "llvm"
    monkeypatch.delenv("KILN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert disk_cache.default().directory == tmp_path / "xdg" / "kiln" / "llvm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert disk_cache.default().directory == tmp_path / "home" / ".cache" / "kiln" / "llvm"


@pytest.mark.parametrize("setting", ["", "0", "off", "None"])
def test_cache_disabled_by_environment(monkeypatch, setting):
    monkeypatch.setenv("KILN_CACHE_DIR", setting)
    entry = disk_cache.key("anything")
    assert disk_cache.store(entry, b"data") is False
    assert disk_cache.load(entry) is None
    assert disk_cache.info() == {"path": None, "enabled": False, "entries": 0, "bytes": 0}
    assert disk_cache.clear() == 0


def test_info_clear_and_unusable_directories(cache, tmp_path, monkeypatch):
    for i in range(3):
        disk_cache.store(disk_cache.key(str(i)), b"x" * 100)
    (cache.directory / ".tmp-stale").write_bytes(b"left by a crashed writer")
    info = disk_cache.info()
    assert info["entries"] == 3 and info["bytes"] == 3 * (100 + disk_cache._HEADER.size) and info["enabled"]
    assert disk_cache.clear() == 3 and list(cache.directory.iterdir()) == []
    (tmp_path / "a-file").write_bytes(b"")
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "a-file"))  # cannot be a directory
    assert disk_cache.store(disk_cache.key("y"), b"data") is False
    assert disk_cache.load(disk_cache.key("y")) is None
    with pytest.raises(ValueError, match="hex"):
        disk_cache.load("../escape")


# -- blas.py -----------------------------------------------------------------------------------------

def test_blas_addresses(monkeypatch):
    for name in ("sgemm", "dgemm", "sgemv", "dgemv"):
        assert blas.address(name) > 0
    with pytest.raises(ValueError, match="no routine 'sgemmm'"):
        blas.address("sgemmm")
    with pytest.raises(TypeError, match="float32 and float64, not int32"):
        blas.routine("gemm", np.int32)
    assert blas.int_type().width == blas.library().int_bits
    monkeypatch.setenv("KILN_BLAS", "scipy")
    assert blas.library.__wrapped__().name == "scipy-cython_blas"
    monkeypatch.setenv("KILN_BLAS", "mkl")
    with pytest.raises(ValueError, match="KILN_BLAS='mkl'"):
        blas.library.__wrapped__()


LIBRARIES = [lib for lib in (blas._numpy_openblas(), blas._scipy_cython_blas()) if lib is not None]


def _ctypes_gemm(library, a, b):
    """Row-major a @ b through the raw pointer: the column-major product b^T a^T."""
    (m, k), n = a.shape, b.shape[1]
    scalar = np.ctypeslib.as_ctypes_type(a.dtype)
    integer = {32: ctypes.c_int32, 64: ctypes.c_int64}[library.int_bits]
    c = np.zeros((m, n), a.dtype)
    gemm = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 13)(library.lookup(blas.routine("gemm", a.dtype)))

    def ref(ctype, value):
        return ctypes.byref(ctype(value))

    gemm(ref(ctypes.c_char, b"N"), ref(ctypes.c_char, b"N"), ref(integer, n), ref(integer, m), ref(integer, k),
         ref(scalar, 1.0), ptr(b), ref(integer, max(1, n)), ptr(a), ref(integer, max(1, k)), ref(scalar, 0.0),
         ptr(c), ref(integer, max(1, n)))
    return c


@settings(max_examples=15, deadline=None)
@given(m=st.integers(0, 9), n=st.integers(0, 9), k=st.integers(0, 9), dtype=st.sampled_from([np.float32, np.float64]),
       library=st.sampled_from(LIBRARIES))
def test_gemm_through_pointer_with_ctypes(m, n, k, dtype, library):
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    np.testing.assert_allclose(_ctypes_gemm(library, a, b), a @ b, rtol=1e-5, atol=1e-5)


def _blas_module():
    module = ir.Module("blas_test")
    for dtype in (np.float32, np.float64):
        for trans_a in (False, True):
            for trans_b in (False, True):
                name = f"gemm_{np.dtype(dtype).char}{int(trans_a)}{int(trans_b)}"
                function = ir.Function(module, ir.FunctionType(VOID, [PTR] * 3 + [I64] * 3), name)
                builder = ir.IRBuilder(function.append_basic_block("entry"))
                a, b, c, m, n, k = function.args
                blas.emit_gemm(builder, dtype, m, n, k, a, b, c, trans_a=trans_a, trans_b=trans_b)
                builder.ret_void()
            name = f"gemv_{np.dtype(dtype).char}{int(trans_a)}"
            function = ir.Function(module, ir.FunctionType(VOID, [PTR] * 3 + [I32] * 2), name)
            builder = ir.IRBuilder(function.append_basic_block("entry"))
            a, x, y, m, n = function.args
            blas.emit_gemv(builder, dtype, m, n, a, x, y, trans_a=trans_a)
            builder.ret_void()
    function = ir.Function(module, ir.FunctionType(VOID, [PTR] * 3), "gemm_scaled")
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    a, b, c = function.args  # 2 * A[3x4 in a 3x6 buffer] @ B[4x5]^T-stored + 0.5 * C[3x5 in 3x7]
    blas.emit_gemm(builder, np.float64, 3, 5, 4, a, b, c, trans_b=True, lda=6, ldc=7, alpha=2.0, beta=0.5)
    builder.ret_void()
    return jit(module)


@pytest.fixture(scope="module")
def blas_engine():
    return _blas_module()


@settings(max_examples=20, deadline=None)
@given(m=st.integers(0, 7), n=st.integers(0, 7), k=st.integers(0, 7), trans_a=st.booleans(),
       trans_b=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]))
def test_emitted_gemm_is_row_major_matmul(blas_engine, m, n, k, trans_a, trans_b, dtype):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    c = np.full((m, n), np.nan, dtype)
    gemm = cfunc(blas_engine, f"gemm_{np.dtype(dtype).char}{int(trans_a)}{int(trans_b)}",
                 *[ctypes.c_void_p] * 3, *[ctypes.c_int64] * 3)
    gemm(ptr(a), ptr(b), ptr(c), m, n, k)
    expected = (a.T if trans_a else a) @ (b.T if trans_b else b)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)


@settings(max_examples=15, deadline=None)
@given(m=st.integers(0, 7), n=st.integers(0, 7), trans_a=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]))
def test_emitted_gemv_is_row_major_matvec(blas_engine, m, n, trans_a, dtype):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, n)).astype(dtype)
    x = rng.standard_normal(m if trans_a else n).astype(dtype)
    y = np.full(n if trans_a else m, np.nan, dtype)
    gemv = cfunc(blas_engine, f"gemv_{np.dtype(dtype).char}{int(trans_a)}", *[ctypes.c_void_p] * 3,
                 ctypes.c_int32, ctypes.c_int32)
    gemv(ptr(a), ptr(x), ptr(y), m, n)
    np.testing.assert_allclose(y, (a.T if trans_a else a) @ x, rtol=1e-5, atol=1e-5)


def test_emitted_gemm_strides_and_scalars(blas_engine):
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((3, 6)), rng.standard_normal((5, 4)), rng.standard_normal((3, 7))
    expected = c.copy()
    expected[:, :5] = 2 * a[:, :4] @ b.T + 0.5 * c[:, :5]
    cfunc(blas_engine, "gemm_scaled", *[ctypes.c_void_p] * 3)(ptr(a), ptr(b), ptr(c))
    np.testing.assert_allclose(c, expected, rtol=1e-12)


# -- parallel.py and externs.py (the thread pool and parallel_for: test_pool.py) -------------------------

def test_num_threads_setting(monkeypatch):
    monkeypatch.delenv("KILN_NUM_THREADS", raising=False)
    assert parallel.num_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("KILN_NUM_THREADS", "3")
    assert parallel.num_threads() == 3
    for bad in ("0", "two", "-1", "100000"):
        monkeypatch.setenv("KILN_NUM_THREADS", bad)
        with pytest.raises(ValueError, match="KILN_NUM_THREADS"):
            parallel.num_threads()


def test_bind_externs_fills_each_modules_own_globals(monkeypatch):
    monkeypatch.setenv("KILN_NUM_THREADS", "3")
    modules = [ir.Module(name) for name in ("first", "second")]
    for module, names in zip(modules, (["kiln_num_threads", "kiln_sgemm"], ["kiln_num_threads"])):
        for name in names:
            assert externs.declare(module, name) is externs.declare(module, name)
    engines = [jit(module) for module in modules]
    assert externs.bind_externs(engines[0].get_global_value_address, "first") == ["kiln_num_threads", "kiln_sgemm"]
    for engine, name in zip(engines, ("first", "second")):
        assert ctypes.c_int64.from_address(engine.get_global_value_address(f"{name}.kiln_num_threads")).value == 3
    assert ctypes.c_void_p.from_address(engines[0].get_global_value_address("first.kiln_sgemm")).value \
        == blas.address("sgemm")
    assert externs.bind_externs(engines[1].get_global_value_address, "elsewhere") == []
    with pytest.raises(KeyError, match="unknown extern 'kiln_nope'"):
        externs.declare(modules[0], "kiln_nope")
