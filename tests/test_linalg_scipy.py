"""kiln.scipy.linalg against SciPy in float32 and float64, eagerly and under jit, with
derivatives (a Gaussian-process log likelihood through cho_factor/cho_solve) and vmap."""
import numpy as np
import pytest
import scipy.linalg as S

import kiln
import kiln.numpy as jnp
import kiln.scipy.linalg as L
from kiln.test_util import check_grads

from linalg_cases import FLOATS, spd, tolerance


def close(got, want, dtype, scale=100):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=scale * tolerance(dtype),
                               atol=scale * tolerance(dtype))


def _inputs(dtype):
    rng = np.random.default_rng(0)
    a = (rng.normal(size=(4, 4)) + 4 * np.eye(4)).astype(dtype)
    return a, rng.normal(size=(4, 2)).astype(dtype), spd((), 4, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_family_and_triangular_solves(x64, dtype, lower):
    a, b, s = _inputs(dtype)
    close(L.cholesky(s, lower=lower), S.cholesky(s, lower=lower), dtype)
    want = S.cho_solve(S.cho_factor(s, lower=lower), b)
    close(L.cho_solve(L.cho_factor(s, lower=lower), b), want, dtype)
    close(kiln.jit(lambda s, b: L.cho_solve((L.cholesky(s, lower=lower), lower), b[:, 0]))(s, b),
          want[:, 0], dtype)
    for trans in (0, 1, 2, "T"):
        close(kiln.jit(lambda a, b: L.solve_triangular(a, b, trans=trans, lower=lower))(a, b),
              S.solve_triangular(a, b, trans=trans, lower=lower), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_lu_family(x64, dtype):
    a, b, _ = _inputs(dtype)
    for got, want in zip(L.lu(a), S.lu(a)):
        close(got, want, dtype)
    for got, want in zip(L.lu(b, permute_l=True), S.lu(b, permute_l=True)):
        close(got, want, dtype)
    factors, want_factors = L.lu_factor(a), S.lu_factor(a)
    for got, want in zip(factors, want_factors):
        close(got, want, dtype)
    for trans in (0, 1, 2):
        close(kiln.jit(lambda lu, piv, b: L.lu_solve((lu, piv), b, trans=trans))(*factors, b),
              S.lu_solve(want_factors, b, trans=trans), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_the_rest(x64, dtype):
    a, b, s = _inputs(dtype)
    for mode in ("full", "economic", "r"):
        for got, want in zip(L.qr(b, mode=mode), S.qr(b, mode=mode)):
            close(got, want, dtype)
    for got, want in zip(L.svd(b), S.svd(b)):
        close(got, want, dtype)
    w, v = L.eigh(s)
    close(w, S.eigh(s)[0], dtype)
    close(L.eigh(s, eigvals_only=True), S.eigh(s, eigvals_only=True), dtype)
    close(L.det(a), S.det(a), dtype)
    close(L.inv(a), S.inv(a), dtype)
    close(kiln.jit(L.solve)(a, b), S.solve(a, b), dtype)
    close(L.solve(s, b, assume_a="pos"), S.solve(s, b, assume_a="pos"), dtype)
    for side, method in (("right", "qdwh"), ("right", "svd"), ("left", "svd")):
        # (qdwh, the default, takes a square matrix with side='right' only, as JAX's)
        for got, want in zip(L.polar(a, side=side, method=method), S.polar(a, side=side)):
            close(got, want, dtype)
    blocks = (np.ones((2, 2), dtype), np.array([[3]], dtype), np.arange(3, dtype=dtype))
    close(L.block_diag(*blocks), S.block_diag(*blocks), dtype)
    close(L.toeplitz(np.arange(3.0), np.arange(4.0) + 5), S.toeplitz(np.arange(3.0),
                                                                      np.arange(4.0) + 5), dtype)
    close(L.toeplitz(np.arange(3.0)), S.toeplitz(np.arange(3.0)), dtype)


def _gp_log_likelihood(length, x, y):
    """A Gaussian-process regression's log marginal likelihood (RBF kernel)."""
    d = x[:, None] - x[None, :]
    k = jnp.exp(-0.5 * d ** 2 / length ** 2) + 0.1 * jnp.eye(x.shape[0])
    c, lower = L.cho_factor(k, lower=True)
    alpha = L.cho_solve((c, lower), y)
    return -0.5 * y @ alpha - jnp.sum(jnp.log(jnp.diagonal(c)))


def test_gaussian_process_gradient(x64):
    x = np.linspace(0, 3, 6)
    y = np.sin(x)
    check_grads(lambda length: _gp_log_likelihood(length, x, y), (0.7,), order=2,
                modes=("fwd", "rev"))
    g = kiln.jit(kiln.grad(_gp_log_likelihood))(0.7, x, y)
    eps = 1e-6
    fd = (_gp_log_likelihood(0.7 + eps, x, y) - _gp_log_likelihood(0.7 - eps, x, y)) / (2 * eps)
    np.testing.assert_allclose(float(g), float(fd), rtol=1e-6)


def test_vmap_of_solve_triangular():
    a = np.tril(np.random.default_rng(1).normal(size=(3, 4, 4)) + 4 * np.eye(4)).astype(
        np.float32)
    b = np.ones((3, 4), np.float32)
    got = kiln.vmap(lambda a, b: L.solve_triangular(a, b, lower=True))(a, b)
    close(got, [S.solve_triangular(a[i], b[i], lower=True) for i in range(3)], np.float32)


def test_errors():
    with pytest.raises(ValueError, match="Invalid 'trans' value 3"):
        L.solve_triangular(np.eye(2), np.ones(2), trans=3)
    with pytest.raises(NotImplementedError, match="no generalised problem"):
        L.eigh(np.eye(2), np.eye(2))
