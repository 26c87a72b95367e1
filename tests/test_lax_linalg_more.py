"""kiln.lax.linalg's functions beside the primitives (geqrf, householder_product, ormqr,
lu_pivots_to_permutation, symmetric_product, tridiagonal_solve, cholesky_update) and
jnp.linalg.qr(mode='raw'), against JAX 0.10.2 and NumPy: real and complex, batched, tall and
wide, pivoting and singular tridiagonal systems, under jit and grad, and JAX's errors."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kiln
import kiln.numpy as knp
import kiln.lax.linalg as K
from kiln.lax._linalg_more import geqrf

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.lax import linalg as J  # noqa: E402

FIXTURE = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def jax_x64():
    """JAX in 64 bits too (the x64 fixture turns kiln's on), so both compute in float64."""
    with jax.enable_x64(True):
        yield


def close(got, want, tol=1e-10):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


def _matrix(rng, shape, complex_):
    a = rng.normal(size=shape)
    return a + 1j * rng.normal(size=shape) if complex_ else a


@settings(max_examples=12, **FIXTURE)
@given(batch=st.sampled_from([(), (2,), (1, 2)]), m=st.integers(1, 5), n=st.integers(1, 5),
       complex_=st.booleans(), seed=st.integers(0, 99))
def test_the_qr_family_matches_jax(x64, batch, m, n, complex_, seed):
    rng = np.random.default_rng(seed)
    a = _matrix(rng, batch + (m, n), complex_)
    h, taus = geqrf(a)
    jh, jtaus = jnp.linalg.qr(a, mode="raw")
    close(h, np.swapaxes(np.asarray(jh), -1, -2))
    close(taus, jtaus)
    raw = knp.linalg.qr(a, mode="raw")
    close(raw[0], jh)
    if not batch:
        close(raw[0], np.linalg.qr(a, mode="raw")[0])
    if m >= n:
        close(K.householder_product(h, taus), J.householder_product(np.asarray(h), jtaus))
    for left in (True, False):
        for transpose in (True, False):
            c = _matrix(rng, batch + ((m, 2) if left else (3, m)), complex_)
            close(K.ormqr(h, taus, c, left=left, transpose=transpose),
                  J.ormqr(np.asarray(h), jtaus, c, left=left, transpose=transpose))


def test_qr_family_under_jit_and_grad(x64):
    a = np.random.default_rng(1).normal(size=(5, 3))
    f = kiln.jit(lambda a: K.householder_product(*geqrf(a)))
    close(f(a), np.linalg.qr(a)[0])
    g = kiln.grad(lambda a: knp.sum(K.householder_product(*geqrf(a)) ** 3))(a)
    jg = jax.grad(lambda a: jnp.sum(jnp.linalg.qr(a)[0] ** 3))(a)
    close(g, jg, 1e-8)


def test_lu_pivots_and_symmetric_product(x64):
    pivots = np.array([[2, 2, 3], [0, 1, 2]], np.int32)
    close(K.lu_pivots_to_permutation(pivots, 5), J.lu_pivots_to_permutation(pivots, 5))
    lu, piv, perm = K.lu(np.random.default_rng(2).normal(size=(4, 4)))
    close(K.lu_pivots_to_permutation(piv, 4), perm)
    rng = np.random.default_rng(3)
    a, c = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 4))
    for symmetrize in (False, True):
        close(K.symmetric_product(a, c, alpha=2.0, beta=0.5, symmetrize_output=symmetrize),
              J.symmetric_product(a, c, alpha=2.0, beta=0.5, symmetrize_output=symmetrize))


@settings(max_examples=12, **FIXTURE)
@given(m=st.integers(1, 9), complex_=st.booleans(), zero_pivot=st.booleans(),
       seed=st.integers(0, 99))
def test_tridiagonal_solve_matches_jax(x64, m, complex_, zero_pivot, seed):
    """Partial pivoting between neighbouring rows (a zero first diagonal element is solved),
    NaN for singular systems, the perturbation of tiny pivots."""
    rng = np.random.default_rng(seed)
    dl, d, du = (_matrix(rng, (3, m), complex_) for _ in range(3))
    dl[:, 0] = 0
    du[:, -1] = 0
    if zero_pivot:
        d[0, 0] = 0
    b = _matrix(rng, (3, m, 2), complex_)
    close(K.tridiagonal_solve(dl, d, du, b), J.tridiagonal_solve(dl, d, du, b), 1e-8)


def test_singular_tridiagonal_systems(x64):
    dl, d, du = np.array([0.0, 1.0]), np.array([1.0, 1.0]), np.array([1.0, 0.0])
    b = np.array([[1.0], [2.0]])
    assert np.isnan(np.asarray(K.tridiagonal_solve(dl, d, du, b))).all()
    close(K.tridiagonal_solve(dl, d, du, b, perturb_singular=True),
          J.tridiagonal_solve(dl, d, du, b, perturb_singular=True), 1e-6)


def test_tridiagonal_solve_under_jit_and_grad(x64):
    rng = np.random.default_rng(4)
    dl, d, du = rng.normal(size=(3, 6))
    dl[0] = du[-1] = d[0] = 0
    b = rng.normal(size=(6, 2))
    close(kiln.jit(K.tridiagonal_solve)(dl, d, du, b), J.tridiagonal_solve(dl, d, du, b), 1e-8)
    for argnum in range(4):
        g = kiln.grad(lambda *xs: knp.sum(K.tridiagonal_solve(*xs) ** 2), argnums=argnum)
        jg = jax.grad(lambda *xs: jnp.sum(J.tridiagonal_solve(*xs) ** 2), argnums=argnum)
        got, want = np.asarray(g(dl, d, du, b)), np.asarray(jg(dl, d, du, b))
        if argnum == 0:   # JAX's derivative in dl[0] (outside the matrix) is not defined
            got, want = got[1:], want[1:]
        if argnum == 2:
            got, want = got[:-1], want[:-1]
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-7)


def test_cholesky_update(x64):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 4))
    r = np.linalg.cholesky(x @ x.T + 4 * np.eye(4)).T
    w = rng.normal(size=4)
    close(K.cholesky_update(r, w), J.cholesky_update(r, w))
    new = np.asarray(K.cholesky_update(r, w))
    close(new.T @ new, r.T @ r + np.outer(w, w), 1e-9)
    with pytest.raises(ValueError, match="rank of exactly 2"):
        K.cholesky_update(np.stack([r, r]), np.stack([w, w]))


def test_errors(x64):
    with pytest.raises(TypeError, match="accept dtype int64 at position 0"):
        K.lu_pivots_to_permutation(np.array([1, 0]), 3)
    with pytest.raises(ValueError, match="has to exceed the trailing dimension"):
        K.lu_pivots_to_permutation(np.array([1, 0, 2], np.int32), 2)
    with pytest.raises(ValueError, match="rank of at least 2"):
        K.tridiagonal_solve(np.zeros(3), np.ones(3), np.zeros(3), np.ones(3))
    with pytest.raises(TypeError, match="ormqr requires arguments to have the same dtypes"):
        K.ormqr(np.eye(3), np.zeros(3), np.eye(3, dtype=np.float32))
    with pytest.raises(TypeError, match="does not accept dtype int"):
        geqrf(np.eye(3, dtype=np.int32))
