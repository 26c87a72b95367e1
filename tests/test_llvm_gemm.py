"""Small matrix products as generated kernels (gemm.py), and OpenBLAS on one thread.

Products are drawn with hypothesis over m, n, k (1, odd sizes, sizes around the kernel's
blocks), operands stored transposed or not, batch dimensions, and every float dtype
(complex64/complex128 keep BLAS or the fused loop nest below the threshold: gemm.py is real
only), and compared with the reference backend. Which path a product takes is asserted from the
generated IR. The kernel is also compiled and run for the x86-64 baseline, x86-64-v3 (AVX2)
and znver1 in a child process (the host CPU replaced), against NumPy (with the layouts of
test_gemm_layouts.py that read operands through strides), and its assembly checked
to use no register wider than the target has. Performance is never asserted here
(BENCHMARKS.md, docs/llvm.md).
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kiln.compiler.backends import reference
from kiln.compiler.backends.llvm import blas_lookup, compile_function, lower_linalg
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.ssa import Eqn, Function, Var
from kiln.compiler.primitives import PRIMITIVES

DTYPES = [np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)]
SIZES = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 64])


def product_fn(ls, rs, dims, dtype):
    a, b = Var("a", ShapedArray(ls, dtype)), Var("b", ShapedArray(rs, dtype))
    out = Var("out", PRIMITIVES["dot_general"].abstract_eval(a.aval, b.aval,
                                                            dimension_numbers=dims))
    return Function("f", [a, b], [Eqn([out], PRIMITIVES["dot_general"], [a, b],
                                      {"dimension_numbers": dims})], [out])


def operand(rng, shape, dtype):
    x = rng.uniform(-1, 1, shape)
    if dtype.kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return x.astype(dtype)


def layout(m, n, k, batch, lhs_t, rhs_t):
    """Shapes and dimension numbers of op(A) @ op(B), A stored k x m when lhs_t, B stored
    n x k when rhs_t, batch axes first."""
    nb = len(batch)
    ls = batch + ((k, m) if lhs_t else (m, k))
    rs = batch + ((n, k) if rhs_t else (k, n))
    dims = (((nb + (0 if lhs_t else 1),), (nb + (1 if rhs_t else 0),)),
            (tuple(range(nb)), tuple(range(nb))))
    return ls, rs, dims


def native_text(fn):
    return compile_function(fn).as_text("llvm-unoptimized")


@settings(max_examples=60, deadline=None)
@given(SIZES, SIZES, SIZES, st.sampled_from([(), (1,), (3,), (2, 2)]), st.booleans(),
       st.booleans(), st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_small_products_match_reference(m, n, k, batch, lhs_t, rhs_t, dtype, seed):
    ls, rs, dims = layout(m, n, k, batch, lhs_t, rhs_t)
    fn = product_fn(ls, rs, dims, dtype)
    rng = np.random.default_rng(seed)
    a, b = operand(rng, ls, dtype), operand(rng, rs, dtype)
    (got,), (want,) = compile_function(fn)(a, b), reference.compile_function(fn)(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 2e-5 if dtype in (DTYPES[0], DTYPES[2]) else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * k)


@pytest.mark.parametrize("dtype, routine", [(np.float32, "kiln_gemm_float32"),
                                            (np.float64, "kiln_gemm_float64")])
def test_real_products_below_the_threshold_are_generated_loops(dtype, routine):
    small = product_fn(*layout(8, 64, 64, (), False, False)[:3], np.dtype(dtype))
    text = native_text(small)
    assert routine not in text and "p.head" in text
    assert ("<16 x float>" if dtype == np.float32 else "<8 x double>") in text
    transposed_b = native_text(product_fn(*layout(8, 64, 64, (), False, True)[:3], np.dtype(dtype)))
    assert routine not in transposed_b and "p.head" not in transposed_b and "q.head" in transposed_b
    side = 96   # 8 x 96 x 96 = 73728 multiply-adds: inline; 96^3 is above INLINE_MAX_FLOPS
    assert side ** 3 > lower_linalg.INLINE_MAX_FLOPS >= 8 * side * side
    big = native_text(product_fn(*layout(side, side, side, (), False, False)[:3], np.dtype(dtype)))
    assert routine in big and "kiln_sgemm" not in big and "kiln_dgemm" not in big
    assert routine not in native_text(product_fn(*layout(8, side, side, (), False, False)[:3],
                                                 np.dtype(dtype)))
    # at most INLINE_MAX_ROWS rows: the loop nest at any size (one pass over B either way)
    wide = product_fn(*layout(lower_linalg.INLINE_MAX_ROWS, 1024, 512, (), False, False)[:3],
                      np.dtype(dtype))
    assert routine not in native_text(wide)


def test_paths_that_take_the_packed_kernel_blas_or_loops():
    f32 = np.dtype(np.float32)
    # both operands transposed: neither unpacked form reads them in place: the packed kernel
    text = native_text(product_fn(*layout(16, 24, 32, (), True, True)[:3], f32))
    assert "kiln_gemm_float32" in text and "sgemm" not in text
    # B stored transposed beyond gemm.DOT_MAX_ROWS rows: the packed kernel
    text = native_text(product_fn(*layout(16, 64, 64, (), False, True)[:3], f32))
    assert "kiln_gemm_float32" in text and "sgemm" not in text
    # a matrix times a long vector: gemv streams the matrix faster
    assert "kiln_sgemv" in native_text(product_fn(*layout(256, 1, 64, (), False, False)[:3], f32))
    # complex products: cgemm above MIN_BLAS_FLOPS
    assert "kiln_cgemm" in native_text(product_fn(*layout(16, 16, 32, (), False, False)[:3],
                                                  np.dtype(np.complex64)))


BASELINE_CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    from kiln.compiler.backends.llvm import compile_function, target
    cpu = sys.argv[1]
    target.host_cpu = lambda: (cpu, "")   # generate code for this CPU on this machine
    sys.path.insert(0, sys.argv[2])
    from test_llvm_gemm import layout, operand, product_fn
    from kiln.compiler.backends import reference
    rng = np.random.default_rng(0)
    widest = set()
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        for m, n, k, lhs_t, rhs_t in [(8, 64, 64, False, False), (7, 13, 9, True, False),
                                      (5, 17, 33, False, True), (1, 3, 2, False, False),
                                      (67, 45, 300, False, False), (29, 70, 301, True, True)]:
            ls, rs, dims = layout(m, n, k, (2,), lhs_t, rhs_t)
            fn = product_fn(ls, rs, dims, dtype)
            native = compile_function(fn)
            a, b = operand(rng, ls, dtype), operand(rng, rs, dtype)
            np.testing.assert_allclose(native(a, b)[0], reference.compile_function(fn)(a, b)[0],
                                       rtol=2e-5, atol=1e-4)
            asm = native.as_text("asm")
            text = native.as_text("llvm-unoptimized")   # generated code, never BLAS
            assert ("kiln_gemm_" in text) == (m * n * k > 2**19) and "kiln_sgemm" not in text \
                and "kiln_dgemm" not in text
            widest |= {r for r in ("xmm", "ymm", "zmm") if "%" + r in asm}
    from test_gemm_layouts import (BASELINE_LAYOUTS, BASELINE_SIZES, BASELINE_VIEWS, check,
                                   layout_fn, view_fn)
    for dtype, (lhs, rhs) in BASELINE_LAYOUTS:   # operands read in place through strides
        check(layout_fn(lhs, rhs, BASELINE_SIZES, np.dtype(dtype)), rng, 1e-4)
    for dtype, view in BASELINE_VIEWS:           # transposes read in place by the product
        check(view_fn(*view, BASELINE_SIZES, np.dtype(dtype)), rng, 1e-4)
    print(" ".join(sorted(widest)))
''')


@pytest.mark.parametrize("cpu, allowed", [("x86-64", {"xmm"}), ("x86-64-v3", {"xmm", "ymm"}),
                                          ("znver1", {"xmm", "ymm"})])
def test_kernel_runs_on_baseline_targets(cpu, allowed, tmp_path):
    result = subprocess.run([sys.executable, "-c", BASELINE_CHILD, cpu, os.path.dirname(__file__)],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "KILN_CACHE_DIR": "off"})
    assert result.returncode == 0, result.stderr[-3000:]
    used = set(result.stdout.split())
    assert "xmm" in used and used <= allowed


# ------------------------------------------------------------------------------ BLAS threads

ONE_THREAD_CHILD = textwrap.dedent('''
    import ctypes, sys
    import numpy as np
    from kiln.compiler.backends.llvm import blas_lookup, compile_function
    sys.path.insert(0, sys.argv[1])
    from test_llvm_gemm import layout, product_fn
    get = ctypes.CFUNCTYPE(ctypes.c_int)(blas_lookup.library().lookup("openblas_get_num_threads"))
    f = compile_function(product_fn(*layout(256, 256, 256, (), False, False), np.dtype(np.complex64)))
    x = np.ones((256, 256), np.complex64)
    assert (f(x, x)[0] == 256).all()
    print(get())
''')


@pytest.mark.skipif(blas_lookup.library().lookup("openblas_get_num_threads") is None,
                    reason="needs OpenBLAS")
def test_blas_runs_on_one_thread():
    """kiln's pool splits large products; OpenBLAS itself is set to one thread on first use."""
    result = subprocess.run([sys.executable, "-c", ONE_THREAD_CHILD, os.path.dirname(__file__)],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "KILN_CACHE_DIR": "off"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["1"]
