"""The eigh primitive (kiln.lax.linalg.eigh): against SciPy's (LAPACK's syevd) in
float32 and float64 over batch shapes (0- and 1-sized included), either triangle, the LLVM
lowering against the reference backend, derivatives against finite differences (both modes,
order 2), vmap, JAX's errors and the emulated CUDA device."""
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, strategies as st

import kiln
import kiln.lax.linalg as kl
from kiln.test_util import check_grads

from linalg_cases import (FEW, FLOATS, batches, check_all, check_grad_against_jax,
                         on_emulated_cuda, sizes)


def _want(a, lower):
    if a.size == 0:
        return np.zeros(a.shape, a.dtype), np.zeros(a.shape[:-1], a.dtype)
    v, w = np.zeros(a.shape, a.dtype), np.zeros(a.shape[:-1], a.dtype)
    for i in np.ndindex(a.shape[:-2]):   # LAPACK's syevd, as JAX (NumPy's eigh has other signs)
        w[i], v[i] = scipy.linalg.eigh(a[i], lower=lower, driver="evd")
    return v, w


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=batches, n=sizes, lower=st.booleans())
def test_eigh_matches_scipy_eager_and_llvm(x64, dtype, batch, n, lower):
    a = np.random.default_rng(n).normal(size=batch + (n, n)).astype(dtype)
    want = _want(a, lower)

    def f(a):
        return kl.eigh(a, lower=lower, symmetrize_input=False)
    check_all(f(a), want, dtype, 10)
    check_all(kiln.jit(f)(a), want, dtype, 10)
    check_all(kiln.jit(f, backend="reference")(a), want, dtype, 10)


def test_symmetrize_input_reads_both_triangles(x64):
    a = np.random.default_rng(1).normal(size=(3, 3))
    check_all(kl.eigh(a), _want((a + a.T) / 2, True), np.float64, 10)


def test_eigh_grads_order_two(x64):
    a = np.random.default_rng(5).normal(size=(2, 3, 3))
    check_grads(kl.eigh, (a,), order=2, modes=("fwd", "rev"))


def test_grad_under_jit_matches_jax():
    a = np.random.default_rng(6).normal(size=(4, 4)).astype(np.float32)

    def loss(lib):
        def f(a):
            v, w = lib.eigh(a)
            return (v ** 4).sum() + (w ** 2).sum()
        return f
    check_grad_against_jax(loss, a, 1e-3)


def test_repeated_eigenvalues_give_finite_eigenvalue_gradients():
    g = kiln.jit(kiln.grad(lambda a: kl.eigh(a)[1].sum()))(np.eye(3, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(g), np.eye(3), atol=1e-6)


def test_vmap_over_a_middle_axis():
    a = np.random.default_rng(7).normal(size=(3, 2, 3)).astype(np.float32)
    got = kiln.jit(kiln.vmap(lambda a: kl.eigh(a, symmetrize_input=False), in_axes=1))(a)
    check_all(got, _want(np.moveaxis(a, 1, 0), True), np.float32, 10)


def test_errors():
    with pytest.raises(ValueError, match=r"Argument to symmetric eigendecomposition must have "
                                         r"shape \[..., n, n\], got shape \(2, 3\)"):
        kl.eigh(np.ones((2, 3), np.float32))
    with pytest.raises(NotImplementedError, match="subset_by_index"):
        kl.eigh(np.eye(2, dtype=np.float32), subset_by_index=(0, 1))


def test_llvm_calls_syevd():
    text = kiln.jit(kl.eigh).lower(np.eye(3, dtype=np.float32)).compile().as_text()
    assert "kiln_ssyevd" in text


def test_emulated_cuda_device(monkeypatch):
    a = np.random.default_rng(8).normal(size=(2, 3, 3)).astype(np.float32)
    check_all(on_emulated_cuda(monkeypatch, kl.eigh, a),
              kiln.jit(kl.eigh, backend="reference")(a),
              np.float32, 10)


@pytest.mark.parametrize("lower", [True, False])
def test_eigenvector_signs_are_jax_s(lower):
    jax = pytest.importorskip("jax")
    a = np.random.default_rng(9).normal(size=(5, 5)).astype(np.float32)

    def f(lib):
        return lambda a: lib.eigh(a, lower=lower, symmetrize_input=False)
    want = f(jax.lax.linalg)(a)
    for backend in ("llvm", "reference"):
        check_all(kiln.jit(f(kl), backend=backend)(a), [np.asarray(x) for x in want],
                  np.float32, 10)
