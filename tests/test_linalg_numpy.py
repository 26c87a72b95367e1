"""kiln.numpy.linalg's decompositions and solvers against NumPy in float32 and float64 (batch
shapes with 0- and 1-sized axes), eagerly and under jit, their derivatives against finite
differences, vmap, singular input (inf/NaN, no error) and the names JAX 0.10.2 has."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import kiln
import kiln.numpy as jnp
from kiln.test_util import check_grads

from linalg_cases import FEW, FLOATS, batches, spd, tolerance

sizes = st.integers(1, 4)


def close(got, want, dtype, scale=10):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=scale * tolerance(dtype),
                               atol=scale * tolerance(dtype))


def _well_conditioned(batch, n, dtype, seed=0):
    m = np.random.default_rng(seed).normal(size=batch + (n, n))
    return (m + 2 * n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=batches, n=sizes, k=st.integers(0, 3))
def test_solve_inv_det_slogdet(x64, dtype, batch, n, k):
    a = _well_conditioned(batch, n, dtype)
    b = np.random.default_rng(1).normal(size=batch + (n, k)).astype(dtype)
    for f in (lambda f: f, kiln.jit):
        close(f(jnp.linalg.solve)(a, b), np.linalg.solve(a, b), dtype)
        close(f(jnp.linalg.inv)(a), np.linalg.inv(a), dtype)
        close(f(jnp.linalg.det)(a), np.linalg.det(a), dtype, 100)
        sign, logdet = f(jnp.linalg.slogdet)(a)
        want = np.linalg.slogdet(a)
        close(sign, want[0], dtype)
        close(logdet, want[1], dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=batches, m=sizes, n=sizes)
def test_svd_based_functions(x64, dtype, batch, m, n):
    a = np.random.default_rng(m + 5 * n).normal(size=batch + (m, n)).astype(dtype)
    close(jnp.linalg.svdvals(a), np.linalg.svd(a, compute_uv=False), dtype)
    close(kiln.jit(jnp.linalg.pinv)(a), np.linalg.pinv(a), dtype, 100)
    close(jnp.linalg.matrix_rank(a), np.linalg.matrix_rank(a), dtype)
    for ord in (2, -2, "nuc"):
        close(kiln.jit(lambda a: jnp.linalg.norm(a, ord, axis=(-2, -1)))(a),
              np.linalg.norm(a, ord, axis=(-2, -1)), dtype)
    q, r = kiln.jit(lambda a: jnp.linalg.qr(a, mode="complete"))(a)
    close(q @ r, a, dtype)


def test_factorisations_and_the_rest():
    a = _well_conditioned((2,), 3, np.float32)
    s = spd((2,), 3, np.float32)
    close(jnp.linalg.cholesky(s), np.linalg.cholesky(s), np.float32)
    close(jnp.linalg.cholesky(s, upper=True), np.linalg.cholesky(s, upper=True), np.float32)
    close(jnp.linalg.eigvalsh(s), np.linalg.eigvalsh(s), np.float32, 100)
    w, v = jnp.linalg.eigh(s)
    close(v @ (w[..., None] * np.swapaxes(np.asarray(v), -1, -2)), s, np.float32, 100)
    u, sv, vh = jnp.linalg.svd(a)
    close((np.asarray(u) * np.asarray(sv)[..., None, :]) @ vh, a, np.float32, 100)
    close(jnp.linalg.qr(a, mode="r"), np.linalg.qr(a, mode="r"), np.float32, 100)
    close(jnp.linalg.cond(a), np.linalg.cond(a), np.float32, 100)
    close(jnp.linalg.cond(a, 1), np.linalg.cond(a, 1), np.float32, 100)
    close(jnp.linalg.matrix_power(a, 3), np.linalg.matrix_power(a, 3), np.float32, 1000)
    close(jnp.linalg.matrix_power(a, -2), np.linalg.matrix_power(a, -2), np.float32, 100)
    close(jnp.linalg.multi_dot([a[0], a[1], a[0]]), a[0] @ a[1] @ a[0], np.float32, 1000)
    b = np.random.default_rng(2).normal(size=(5, 3)).astype(np.float32)
    y = np.random.default_rng(3).normal(size=5).astype(np.float32)
    got, want = jnp.linalg.lstsq(b, y), np.linalg.lstsq(b, y)
    for g, w in zip(got, want):
        close(g, w, np.float32, 100)
    t = np.random.default_rng(4).normal(size=(6, 2, 3)).astype(np.float32)
    close(jnp.linalg.tensorinv(t, ind=1), np.linalg.tensorinv(t, ind=1), np.float32, 100)
    r = np.random.default_rng(5).normal(size=6).astype(np.float32)
    close(jnp.linalg.tensorsolve(t, r), np.linalg.tensorsolve(t, r), np.float32, 100)


def test_derivatives(x64):
    a = _well_conditioned((2,), 3, np.float64)
    b = np.random.default_rng(1).normal(size=(2, 3, 2))
    check_grads(jnp.linalg.solve, (a, b), order=2, modes=("fwd", "rev"))
    check_grads(jnp.linalg.inv, (a,), order=1, modes=("fwd", "rev"))
    check_grads(jnp.linalg.det, (a,), order=2, modes=("fwd", "rev"))
    check_grads(lambda a: jnp.linalg.slogdet(a)[1], (a,), order=2, modes=("fwd", "rev"))
    check_grads(jnp.linalg.pinv, (b,), order=1, modes=("fwd", "rev"))
    g = kiln.jit(kiln.grad(lambda a: jnp.linalg.slogdet(a)[1].sum()))(a)
    np.testing.assert_allclose(np.asarray(g), np.swapaxes(np.linalg.inv(a), -1, -2), rtol=1e-8)


def test_vmap_of_solve():
    a = _well_conditioned((3,), 3, np.float32)
    b = np.ones((3, 3), np.float32)
    got = kiln.jit(kiln.vmap(jnp.linalg.solve))(a, b)
    close(got, np.linalg.solve(a, b[..., None])[..., 0], np.float32)


@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_singular_input_gives_inf_or_nan_not_an_error(backend):
    sing = np.ones((3, 3), np.float32)
    assert float(kiln.jit(jnp.linalg.det, backend=backend)(sing)) == 0
    assert not np.isfinite(np.asarray(kiln.jit(jnp.linalg.inv, backend=backend)(sing))).all()
    sign, logdet = kiln.jit(jnp.linalg.slogdet, backend=backend)(sing)
    assert float(sign) == 0 and float(logdet) == -np.inf


def test_errors():
    with pytest.raises(ValueError, match="requires square matrices"):
        jnp.linalg.inv(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="Unsupported QR decomposition mode 'full'"):
        jnp.linalg.qr(np.ones((2, 3), np.float32), mode="full")


def test_names_match_jax_but_the_general_eigendecomposition():
    jax = pytest.importorskip("jax")
    want = {n for n in dir(jax.numpy.linalg) if not n.startswith("_")} - {"eig", "eigvals"}
    assert want <= set(dir(jnp.linalg))
