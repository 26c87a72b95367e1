"""kiln.lax.linalg's `tridiagonal` and `qdwh`, the enums `EigImplementation`,
`EighImplementation`, `SvdAlgorithm` and the choices eig/eigh/svd accept, and
kiln.scipy.linalg.polar through qdwh: against JAX 0.10.2 and SciPy's sytrd/hetrd, real and
complex, batched, eagerly, under jit and vmap, and JAX's errors."""
import warnings

import numpy as np
import pytest
import scipy.linalg.lapack as lapack
from hypothesis import HealthCheck, given, settings, strategies as st

import kiln
import kiln.numpy as knp
import kiln.lax.linalg as K
import kiln.scipy.linalg as KS

jax = pytest.importorskip("jax")
from jax.lax import linalg as J  # noqa: E402
import jax.scipy.linalg as JS  # noqa: E402

FIXTURE = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture(autouse=True)
def jax_x64():
    """JAX in 64 bits too (the x64 fixture turns kiln's on), so both compute in float64."""
    with jax.enable_x64(True):
        yield


def _tol(dtype):
    return 2e-4 if np.finfo(dtype).bits <= 32 else 1e-10


def close(got, want, tol):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    scale = 1 + (np.max(np.abs(want)) if want.size else 0)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


def _matrix(rng, shape, dtype):
    a = rng.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.normal(size=shape)
    return a.astype(dtype)


# ------------------------------------------------------------------------- tridiagonal

@settings(max_examples=10, **FIXTURE)
@given(batch=st.sampled_from([(), (2,), (2, 1)]), n=st.integers(1, 6),
       dtype=st.sampled_from(DTYPES), lower=st.booleans(), seed=st.integers(0, 99))
def test_tridiagonal_matches_jax_and_lapack(x64, batch, n, dtype, lower, seed):
    a = _matrix(np.random.default_rng(seed), batch + (n, n), dtype)
    got = K.tridiagonal(a, lower=lower)
    want = J.tridiagonal(a, lower=lower)
    for g, w in zip(got, want):
        close(g, w, _tol(dtype))
    if not batch:   # LAPACK's own routine, as scipy binds it
        routine = lapack.zhetrd if np.dtype(dtype).kind == "c" else lapack.dsytrd
        ref = routine(a.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64),
                      lower=int(lower))
        for g, w in zip(got, ref[:4]):
            np.testing.assert_allclose(np.asarray(g), w, atol=_tol(dtype) * (1 + abs(w).max()
                                                                            if w.size else 1))


def test_tridiagonal_reconstructs_the_matrix_under_jit_and_vmap(x64):
    rng = np.random.default_rng(0)
    a = _matrix(rng, (3, 7, 7), np.complex128)
    a = a + np.conj(np.swapaxes(a, -1, -2))
    arr, d, e, taus = kiln.jit(K.tridiagonal)(a)
    varr, vd, ve, vtaus = kiln.vmap(K.tridiagonal)(a)
    for g, w in zip((varr, vd, ve, vtaus), (arr, d, e, taus)):
        close(g, w, 1e-12)
    # Q = H_0 ... H_n-2 from the reflectors below the subdiagonal; Q^H A Q = T
    q = np.asarray(K.householder_product(np.asarray(arr)[..., 1:, :-1], taus))
    q = np.concatenate([np.zeros((3, 1, 6)), q], axis=1)
    q = np.concatenate([np.eye(7)[None, :, :1].repeat(3, 0), q], axis=2)
    t = (np.apply_along_axis(np.diag, -1, np.asarray(d)).astype(complex)
         + np.apply_along_axis(lambda v: np.diag(v, -1), -1, np.asarray(e))
         + np.apply_along_axis(lambda v: np.diag(v, 1), -1, np.asarray(e)))
    np.testing.assert_allclose(np.conj(np.swapaxes(q, -1, -2)) @ a @ q, t, atol=1e-10)


def test_tridiagonal_errors_match_jax():
    for shape, exc, message in [((3,), TypeError, "must have rank at least 2"),
                                ((2, 3), ValueError, "must be a square matrix. Got shape (2, 3)"),
                                ((0, 0), ValueError, "must be a square matrix. Got shape (0, 0)")]:
        for fn in (K.tridiagonal, J.tridiagonal):
            with pytest.raises(exc, match=message.replace("(", r"\(").replace(")", r"\)")):
                fn(np.zeros(shape, np.float32))
    with pytest.raises(TypeError, match="tridiagonal does not accept dtype int32"):
        K.tridiagonal(np.zeros((2, 2), np.int32))
    a = np.eye(3, dtype=np.float32)
    for grad in (kiln.grad, jax.grad):
        with pytest.raises(NotImplementedError, match="Differentiation rule for 'tridiagonal'"):
            grad(lambda x: K.tridiagonal(x)[1].sum() if grad is kiln.grad
                 else J.tridiagonal(x)[1].sum())(a)
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'tridiagonal'"):
        kiln.jit(kiln.grad(lambda x: knp.sum(K.tridiagonal(x)[0])))(a)


# ------------------------------------------------------------------------- qdwh

@settings(max_examples=6, **FIXTURE)
@given(m=st.integers(1, 5), n=st.integers(1, 5), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 99))
def test_qdwh_matches_jax(x64, m, n, dtype, seed):
    m, n = max(m, n), min(m, n)
    x = _matrix(np.random.default_rng(seed), (m, n), dtype)
    u, h, k, ok = K.qdwh(x)
    ju, jh, jk, jok = J.qdwh(x)
    close(u, ju, _tol(dtype) * 10)
    close(h, jh, _tol(dtype) * 10)
    assert int(k) == int(jk) and bool(ok) == bool(jok)
    assert np.asarray(k).dtype == np.asarray(jk).dtype
    u, h = np.asarray(u), np.asarray(h)
    np.testing.assert_allclose(u @ h, x, atol=_tol(dtype) * 10 * (1 + abs(x).max()))
    np.testing.assert_allclose(np.conj(u.T) @ u, np.eye(n), atol=_tol(dtype) * 10)
    assert np.linalg.eigvalsh(h).min() > -_tol(dtype) * 10


def test_qdwh_under_jit_vmap_and_its_options(x64):
    rng = np.random.default_rng(4)
    xs = _matrix(rng, (3, 6, 4), np.float64)
    got = kiln.jit(kiln.vmap(K.qdwh))(xs)
    want = jax.vmap(J.qdwh)(xs)
    for g, w in zip(got[:2], want[:2]):
        close(g, w, 1e-10)
    np.testing.assert_array_equal(got[2], want[2])
    x = xs[0]
    for kw in ({"max_iterations": 2}, {"eps": 1e-6}, {"dynamic_shape": (4, 3)},
               {"is_hermitian": True}):
        g, w = K.qdwh(x, **kw), J.qdwh(x, **kw)
        for a, b in zip(g[:2], w[:2]):
            close(a, b, 1e-10)
        assert int(g[2]) == int(w[2]) and bool(g[3]) == bool(w[3]), kw
    with pytest.raises(ValueError, match="must have M >= N"):
        K.qdwh(x.T)


def test_polar_goes_through_qdwh_as_jax(x64):
    rng = np.random.default_rng(5)
    for shape, side in [((5, 3), "right"), ((2, 3, 4), "left"), ((4, 4), "right")]:
        a = rng.normal(size=shape)
        for f in (KS.polar, kiln.jit(KS.polar, static_argnums=1)):
            for g, w in zip(f(a, side), JS.polar(a, side)):
                close(g, w, 1e-10)
    for fn in (KS.polar, JS.polar):
        with pytest.raises(NotImplementedError, match="method='qdwh' only supports"):
            fn(np.eye(3), "left")
    with pytest.raises(ValueError, match="Unknown polar decomposition method"):
        KS.polar(np.eye(3), method="eig")


# ------------------------------------------------------------------------- the enums

def test_the_enums_have_jaxs_members():
    for name in ("EigImplementation", "EighImplementation", "SvdAlgorithm"):
        assert ([(m.name, m.value) for m in getattr(K, name)]
                == [(m.name, m.value) for m in getattr(J, name)])


def _refusal(fn):
    try:
        fn()
    except Exception as e:   # noqa: BLE001  (compared with JAX's)
        return type(e), str(e)
    return None


def test_implementation_choices_run_or_fail_as_on_jaxs_cpu(x64):
    a = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]])
    calls = [(m, lambda L, m=m: L.eigh(a, implementation=getattr(L, m[0])[m[1]]))
             for m in [("EighImplementation", x) for x in ("QR", "JACOBI", "QDWH")]]
    calls += [(m, lambda L, m=m: L.svd(a, algorithm=getattr(L, m[0])[m[1]]))
              for m in [("SvdAlgorithm", x) for x in ("DEFAULT", "QR", "JACOBI", "POLAR",
                                                      "DIVIDE_AND_CONQUER")]]
    calls += [(m, lambda L, m=m: L.eig(a, implementation=getattr(L, m[0])[m[1]]))
              for m in [("EigImplementation", x) for x in ("CUSOLVER", "MAGMA", "LAPACK")]]
    for label, call in calls:
        assert _refusal(lambda: call(K)) == _refusal(lambda: call(J)), label
    v, w = K.eigh(a, implementation=K.EighImplementation.QR)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=1e-12)
    s = K.svd(a, algorithm=K.SvdAlgorithm.QR, compute_uv=False)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=1e-12)
    with pytest.raises(NotImplementedError, match="Jacobi and Polar"):
        kiln.jit(lambda a: K.svd(a, algorithm=K.SvdAlgorithm.POLAR))(a)
    for use_magma, refused in ((True, True), (False, False)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outcome = _refusal(lambda: K.eig(a, use_magma=use_magma))
        assert (outcome is not None) == refused
        assert any("use_magma is deprecated" in str(c.message) for c in caught)
