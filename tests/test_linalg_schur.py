"""The schur and hessenberg primitives (kiln.lax.linalg.schur/hessenberg): against SciPy's
(LAPACK's gees, gehrd) in float32/float64 and complex over batch shapes (0- and 1-sized
included), the LLVM lowering against the reference backend, JAX's results, errors and the
absent derivatives."""
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given

import kiln
import kiln.lax.linalg as kl

from linalg_cases import FEW, FLOATS, batches, check_all, general, sizes

DTYPES = FLOATS + [np.complex64, np.complex128]


def _real(dtype):
    return np.float32 if np.dtype(dtype) in (np.float32, np.complex64) else np.float64


def _each(a, f, shapes):
    outs = [np.zeros(s, a.dtype) for s in shapes]
    for i in np.ndindex(a.shape[:-2] if a.size else (0,)):
        for out, value in zip(outs, f(a[i])):
            out[i] = value
    return outs


@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(batch=batches, n=sizes)
def test_schur_matches_scipy_eager_and_llvm(x64, dtype, batch, n):
    a = general(batch, n, dtype, n)
    output = "complex" if np.dtype(dtype).kind == "c" else "real"
    want = _each(a, lambda m: scipy.linalg.schur(m, output=output), [a.shape, a.shape])
    for f, count in ((kl.schur, 2), (lambda a: kl.schur(a, compute_schur_vectors=False), 1)):
        for got in (f(a), kiln.jit(f)(a), kiln.jit(f, backend="reference")(a)):
            assert len(got) == count
            check_all([np.asarray(g) for g in got], want[:count], _real(dtype), 50)


@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(batch=batches, n=sizes)
def test_hessenberg_reconstructs_and_llvm_matches_reference(x64, dtype, batch, n):
    a = general(batch, n, dtype, n)
    h = _each(a, lambda m: [scipy.linalg.hessenberg(m)], [a.shape])[0]
    for got in (kl.hessenberg(a), kiln.jit(kl.hessenberg)(a)):
        ref = kiln.jit(kl.hessenberg, backend="reference")(a)
        assert got[1].shape == a.shape[:-2] + (max(n - 1, 0),)
        check_all([np.asarray(g) for g in got], [np.asarray(r) for r in ref], _real(dtype), 50)
        if n != 2:   # (SciPy returns a 2x2 matrix as it is; complex gehrd makes h[1, 0] real)
            check_all([np.triu(np.asarray(got[0]), -1)], [h], _real(dtype), 50)


def test_results_are_jax_s():
    jax = pytest.importorskip("jax")
    a = general((2,), 5, np.float32, 3)
    for kf, jf in ((kl.schur, jax.lax.linalg.schur),
                   (kl.hessenberg, jax.lax.linalg.hessenberg)):
        for got, want in zip(kiln.jit(kf)(a), jf(a)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


def test_errors_and_no_derivative():
    with pytest.raises(ValueError, match=r"The input to schur must be a square matrix"):
        kl.schur(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"Argument to Hessenberg reduction must have shape"):
        kl.hessenberg(np.ones((2, 3), np.float32))
    with pytest.raises(NotImplementedError, match="sort feature"):
        kl.schur(np.eye(2, dtype=np.float32), sort_eig_vals=True)
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'schur'"):
        kiln.grad(lambda a: kl.schur(a)[0].sum())(np.eye(2, dtype=np.float32))


def test_llvm_calls_gees_and_gehrd():
    lowered = kiln.jit(lambda a: (kl.schur(a), kl.hessenberg(a))).lower(
        np.eye(3, dtype=np.float32))
    text = lowered.compile().as_text()
    assert "kiln_sgees" in text and "kiln_sgehrd" in text
