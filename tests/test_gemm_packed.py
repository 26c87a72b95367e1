"""The packed, cache-blocked matrix-product kernels (gemm_packed.py) called directly.

Its sizes and strides are run-time arguments, so one compiled function per dtype is checked with
hypothesis over m, n and k (1, odd sizes, sizes around the micro-kernel's block, past one block
of the contraction (KC) and of the columns (NC)), operands stored transposed or not and inside
larger buffers (leading dimensions past the matrix), C inside a larger buffer (ldc > n: the
elements between rows must be left alone), and C += the product (`accumulate`), against NumPy;
then every m and n of 1, 7, 17 and 33 (edge row blocks and tiles) in every layout, and products
with no rows or columns (C untouched). Products through `jit` that reach it,
and the x86-64 baseline, AVX2 and Zen 1 targets, are in test_llvm_gemm.py; the kernel here is
compiled for the CPU `KILN_CPU` names (make test reruns this file for x86-64-v3, whose 16
registers take the 6 x 16 micro-kernel).
"""
import ctypes

import llvmlite.ir as ir
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import llvmlite.binding as llvm

from kiln.compiler.backends.llvm import gemm_packed, target

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_ENGINES = []   # the compiled kernels live as long as the module


@pytest.fixture(scope="module")
def kernels():
    """The runtime library's kernels (gemm_packed.emit), compiled for the CPU KILN_CPU names
    as the runtime library is."""
    module = ir.Module("gemm_packed_test")
    module.triple = target.triple()
    gemm_packed.emit(module)
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    engine = llvm.create_mcjit_compiler(parsed, target.host_machine())
    engine.finalize_object()
    _ENGINES.append(engine)
    signature = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] + [ctypes.c_int64] * 2) * 2,
                                 ctypes.c_void_p, *[ctypes.c_int64] * 5)
    return {dtype: signature(engine.get_function_address(gemm_packed.NAMES[dtype]))
            for dtype in DTYPES}


def stored(rng, rows, cols, transposed, pad, dtype):
    """(buffer, row stride, column stride) of a rows x cols matrix stored (transposed or not)
    in a buffer `pad` elements wider than it."""
    if transposed:
        buffer = rng.uniform(-1, 1, (cols, rows + pad)).astype(dtype)
        return buffer, 1, rows + pad
    buffer = rng.uniform(-1, 1, (rows, cols + pad)).astype(dtype)
    return buffer, cols + pad, 1


def product(kernels, dtype, m, n, k, lhs_t, rhs_t, pads, seed, accumulate=False):
    rng = np.random.default_rng(seed)
    a, sam, sak = stored(rng, m, k, lhs_t, pads[0], dtype)
    b, sbk, sbn = stored(rng, k, n, rhs_t, pads[1], dtype)
    ldc = n + pads[2]
    c = np.full((m, ldc), 7.0, dtype)
    kernels[dtype](a.ctypes.data, sam, sak, b.ctypes.data, sbk, sbn, c.ctypes.data, ldc, m, n, k,
                   int(accumulate))
    op_a = np.lib.stride_tricks.as_strided(a, (m, k), (sam * a.itemsize, sak * a.itemsize))
    op_b = np.lib.stride_tricks.as_strided(b, (k, n), (sbk * b.itemsize, sbn * b.itemsize))
    want = op_a.astype(np.float64) @ op_b.astype(np.float64) + (7.0 if accumulate else 0.0)
    return c, want


SIZES = st.one_of(st.integers(1, 40), st.sampled_from([47, 63, 64, 65, 95, 96, 97, 127, 129]))


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(DTYPES), SIZES, SIZES, st.one_of(SIZES, st.integers(250, 530)),
       st.booleans(), st.booleans(), st.tuples(*[st.sampled_from([0, 0, 1, 5])] * 3),
       st.integers(0, 2**32 - 1), st.booleans())
def test_products_match_numpy(kernels, dtype, m, n, k, lhs_t, rhs_t, pads, seed, accumulate):
    c, want = product(kernels, dtype, m, n, k, lhs_t, rhs_t, pads, seed, accumulate)
    tol = 3e-6 * np.sqrt(k) if dtype == np.float32 else 1e-14 * np.sqrt(k)
    np.testing.assert_allclose(c[:, :n], want, rtol=tol, atol=tol)
    assert (c[:, n:] == 7.0).all()   # the padding between C's rows is never written


@pytest.mark.parametrize("dtype", DTYPES)
def test_several_column_and_contraction_blocks(kernels, dtype):
    """n past two blocks of columns and k past two blocks of the contraction, ragged ends."""
    nc = gemm_packed.micro().pack_bytes // (gemm_packed.KC * dtype.itemsize)
    m, n, k = 53, 2 * nc + 45, 2 * gemm_packed.KC + 17
    for lhs_t, rhs_t, accumulate in [(False, False, False), (True, True, True)]:
        c, want = product(kernels, dtype, m, n, k, lhs_t, rhs_t, (3, 0, 2), 1, accumulate)
        tol = 1e-4 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(c[:, :n], want, rtol=tol, atol=tol)
        assert (c[:, n:] == 7.0).all()



@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lhs_t, rhs_t", [(False, False), (True, False), (False, True),
                                          (True, True)])
def test_edge_tiles_every_layout(kernels, dtype, lhs_t, rhs_t):
    """m and n of 1, 7, 17, 33 (one partial row block or tile, several with a partial last
    one: the prefetches of rows past m and the masked loads of B's row across tiles), k of 1,
    17 and past one contraction block, each operand transposed or not inside a larger
    buffer."""
    for i, (m, n, k) in enumerate((m, n, k) for m in (1, 7, 17, 33) for n in (1, 7, 17, 33)
                                  for k in (1, 17, gemm_packed.KC + 3)):
        c, want = product(kernels, dtype, m, n, k, lhs_t, rhs_t, (1, 3, 2), i, i % 2 == 1)
        tol = 3e-6 * np.sqrt(k) if dtype == np.float32 else 1e-14 * np.sqrt(k)
        np.testing.assert_allclose(c[:, :n], want, rtol=tol, atol=tol)
        assert (c[:, n:] == 7.0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_products_leave_c_alone(kernels, dtype):
    """m or n of 0: the kernel writes nothing (its callers zero C for k = 0)."""
    for m, n in [(0, 5), (5, 0), (0, 0)]:
        c, _ = product(kernels, dtype, m, n, 3, False, False, (0, 0, 2), 0)
        assert c.shape == (m, n + 2) and (c == 7.0).all()
