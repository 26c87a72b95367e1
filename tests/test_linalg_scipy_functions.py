"""kiln.scipy.linalg's matrix functions, Schur-based solvers and special matrices against SciPy
(float32 and float64, hypothesis over sizes, 1x1 included), eagerly and under jit, with
expm's derivatives against finite differences and JAX."""
import numpy as np
import pytest
import scipy.linalg as S
from hypothesis import given, strategies as st

import kiln
import kiln.scipy.linalg as K
from kiln.test_util import check_grads

from linalg_cases import FEW, FLOATS, general, spd, tolerance


def _close(got, want, dtype, scale=100):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=scale * tolerance(dtype),
                               atol=scale * tolerance(dtype))


small = st.integers(1, 5)


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(n=small, scale=st.sampled_from([0.1, 1.0, 8.0]), batch=st.booleans())
def test_expm_matches_scipy_eager_and_jit(x64, dtype, n, scale, batch):
    a = (general((2,) if batch else (), n, np.float64, n) * scale / n).astype(dtype)
    want = S.expm(a.astype(np.float64))
    for got in (K.expm(a), kiln.jit(K.expm)(a)):
        assert np.asarray(got).dtype == dtype
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e3 * tolerance(dtype),
                                   atol=1e3 * tolerance(dtype) * np.abs(want).max())


def test_expm_frechet_and_grads(x64):
    a, e = general((), 3, np.float64, 1), general((), 3, np.float64, 2)
    want_expm, want_l = S.expm_frechet(a, e)
    got_expm, got_l = kiln.jit(K.expm_frechet)(a, e)
    _close(got_expm, want_expm, np.float64)
    _close(got_l, want_l, np.float64)
    check_grads(K.expm, (a,), order=1, modes=("fwd", "rev"))


def test_expm_grad_matches_jax():
    jax = pytest.importorskip("jax")
    a = general((), 4, np.float32, 3) / 2

    def loss(lib):
        return lambda a: (lib.expm(a) ** 2).sum()
    want = jax.grad(loss(jax.scipy.linalg))(a)
    got = kiln.jit(kiln.grad(loss(K)))(a)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(n=small)
def test_schur_functions_match_scipy(x64, dtype, n):
    a = general((), n, dtype, n)
    p = spd((), n, dtype, n)
    t, z = K.schur(a)
    _close(np.asarray(z) @ np.asarray(t) @ np.asarray(z).T, a, dtype)
    _close(K.schur(a)[0], S.schur(a)[0], dtype)
    h, q = kiln.jit(lambda a: K.hessenberg(a, calc_q=True))(a)
    _close(np.asarray(q) @ np.asarray(h) @ np.conj(np.asarray(q)).T, a, dtype)
    st_, sz = S.schur(a.astype(np.float64))
    ct, cz = K.rsf2csf(st_.astype(dtype), sz.astype(dtype))
    want_t, want_z = S.rsf2csf(st_, sz)
    _close(ct, want_t, dtype)
    _close(cz, want_z, dtype)
    _close(kiln.jit(K.sqrtm)(p), S.sqrtm(p.astype(np.float64)), dtype)
    _close(K.funm(p, np.exp), S.expm(p.astype(np.float64)), dtype, 1000)
    c = general((), n, dtype, n + 7)[:, :max(n - 1, 1)] if n > 1 else general((), 1, dtype, 9)
    b = spd((), c.shape[1], dtype, 3)
    _close(kiln.jit(K.solve_sylvester)(p, b, c), S.solve_sylvester(p, b, c), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_eigh_tridiagonal_and_qr_multiply(x64, dtype):
    d, e = general((), 5, dtype, 1)[0], general((), 5, dtype, 2)[0, :4]
    _close(K.eigh_tridiagonal(d, e, eigvals_only=True),
           S.eigh_tridiagonal(d, e, eigvals_only=True), dtype)
    with pytest.raises(NotImplementedError, match="eigenvectors"):
        K.eigh_tridiagonal(d, e)
    a, c = general((), 4, dtype, 3)[:, :3], general((), 4, dtype, 4)
    for mode, cc in (("right", c), ("left", c[:3])):
        for got, want in zip(K.qr_multiply(a, cc, mode), S.qr_multiply(a, cc, mode)):
            _close(got, want, dtype)   # (both through geqrf: the same signs)


@FEW
@given(n=st.integers(2, 6), m=st.integers(1, 6), mode=st.sampled_from(["full", "same",
                                                                     "valid"]))
def test_special_matrices_of_arrays_match_scipy(x64, n, m, mode):
    v = general((), n, np.float64, n)[0]
    w = general((), m, np.float64, m)[0]
    for name, args in (("circulant", (v,)), ("companion", (v,)), ("fiedler", (v,)),
                       ("fiedler_companion", (v,)), ("hankel", (v,)), ("hankel", (v, w)),
                       ("leslie", (v, w[:n - 1])) if m >= n - 1 else ("hankel", (w,)),
                       ("convolution_matrix", (v, m, mode))):
        want = getattr(S, name)(*args)
        _close(getattr(K, name)(*args), want, np.float64)
        _close(kiln.jit(getattr(K, name), static_argnums=(1, 2) if len(args) == 3 else ())(
            *args), want, np.float64)


@pytest.mark.parametrize("n", [1, 2, 4, 5])
def test_special_matrices_of_a_size_match_scipy(x64, n):
    for name, args in (("dft", (n,)), ("dft", (n, "sqrtn")), ("helmert", (n,)),
                       ("helmert", (n, True)), ("hilbert", (n,)), ("invhilbert", (n,)),
                       ("pascal", (n,)), ("pascal", (n, "lower")), ("invpascal", (n,)),
                       ("invpascal", (n, "upper"))):
        _close(getattr(K, name)(*args), getattr(S, name)(*args), np.float64)
    if n & (n - 1) == 0:
        assert np.array_equal(np.asarray(K.hadamard(n)), S.hadamard(n))
    with pytest.raises(ValueError, match="power of 2"):
        K.hadamard(3)
