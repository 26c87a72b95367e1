"""The eig primitive (kiln.lax.linalg.eig, jnp.linalg.eig/eigvals): against SciPy's (LAPACK's
geev) in float32/float64 and complex over batch shapes (0- and 1-sized included), either
eigenvector side, the LLVM lowering against the reference backend, the eigenvalues'
derivatives against finite differences and JAX, vmap and JAX's errors."""
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, strategies as st

import kiln
import kiln.lax.linalg as kl
import kiln.numpy as jnp
from kiln.test_util import check_grads

from linalg_cases import FEW, FLOATS, batches, check_all, general, sizes


def _want(a, left, right):
    cdt = np.result_type(a.dtype, np.complex64)
    w, vl, vr = (np.zeros(a.shape[:-1], cdt), np.zeros(a.shape, cdt), np.zeros(a.shape, cdt))
    for i in np.ndindex(a.shape[:-2] if a.size else (0,)):
        w[i], vl[i], vr[i] = scipy.linalg.eig(a[i], left=True, right=True)
    return [w] + ([vl] if left else []) + ([vr] if right else [])


@pytest.mark.parametrize("dtype", FLOATS + [np.complex64, np.complex128])
@FEW
@given(batch=batches, n=sizes, left=st.booleans(), right=st.booleans())
def test_eig_matches_scipy_eager_and_llvm(x64, dtype, batch, n, left, right):
    a = general(batch, n, dtype, n)
    want = _want(a, left, right)

    def f(a):
        return kl.eig(a, compute_left_eigenvectors=left, compute_right_eigenvectors=right)
    scale = 100 if np.dtype(dtype) in (np.float32, np.complex64) else 10
    real = np.float32 if np.dtype(dtype) in (np.float32, np.complex64) else np.float64
    for got in (f(a), kiln.jit(f)(a), kiln.jit(f, backend="reference")(a)):
        assert len(got) == len(want)
        assert all(g.dtype == w.dtype for g, w in zip(got, want))
        check_all([np.asarray(g) for g in got], want, real, scale)


def test_numpy_eig_and_eigvals_are_jax_s():
    jax = pytest.importorskip("jax")
    a = general((2,), 4, np.float32, 3)
    w, v = jnp.linalg.eig(a)
    jw, jv = jax.numpy.linalg.eig(a)
    np.testing.assert_allclose(np.asarray(w), jw, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(v), jv, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(kiln.jit(jnp.linalg.eigvals)(a)),
                               jax.numpy.linalg.eigvals(a), rtol=1e-4, atol=1e-5)
    assert type(jnp.linalg.eig(a)).__name__ == "EigResult"


def _eigvals_loss(lib):
    def f(a):
        w = lib.linalg.eigvals(a)
        return w.real.sum() + (w.imag ** 2).sum() + (lib.abs(w) ** 3).sum()
    return f


def test_eigenvalue_grads_match_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as jjnp
    a = general((2,), 4, np.float32, 4)
    want = jax.grad(_eigvals_loss(jjnp))(a)
    got = kiln.jit(kiln.grad(_eigvals_loss(jnp)))(a)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-3, atol=2e-3)


def _real_part(a):
    return kl.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0].real


def test_eigenvalue_grads(x64):
    # order 1 only: the JVP needs the eigenvectors, whose derivative JAX does not give either
    a = general((), 3, np.float64, 5)
    check_grads(_real_part, (a,), order=1, modes=("fwd", "rev"))


def test_eigenvector_grads_are_refused():
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs=True"):
        kiln.grad(lambda a: jnp.linalg.eig(a)[1].real.sum())(np.eye(2, dtype=np.float32))


def _with_vectors(a):
    return kl.eig(a, enable_eigvec_derivs=True)


@pytest.mark.parametrize("complex_input", [False, True])
def test_eigenvector_grads(x64, complex_input):
    """JAX's opt-in rule against finite differences: the eigenvalues and both sets of
    eigenvectors (geev's normalisation differentiated), forward and reverse, batched."""
    rng = np.random.default_rng(12)
    a = rng.normal(size=(2, 3, 3)) + (1j * rng.normal(size=(2, 3, 3)) if complex_input else 0)
    check_grads(_with_vectors, (a,), order=1, modes=("fwd", "rev"))


def _eigvec_loss(np_, lax):
    def f(a):
        w, vl, vr = lax.linalg.eig(a, enable_eigvec_derivs=True)
        return (np_.sum(np_.abs(vr) ** 2 * np_.arange(4)) + np_.sum(np_.imag(vr[0]) ** 2)
                + np_.sum(np_.real(vl) ** 3) + np_.sum(np_.real(w) ** 2))
    return f


@pytest.mark.parametrize("complex_input", [False, True])
def test_eigenvector_grads_and_jvp_match_jax(x64, complex_input):
    jax = pytest.importorskip("jax")
    import jax.numpy as jjnp
    rng = np.random.default_rng(13)
    a = rng.normal(size=(4, 4)) + (1j * rng.normal(size=(4, 4)) if complex_input else 0)
    with jax.enable_x64(True):
        want = jax.grad(_eigvec_loss(jjnp, jax.lax))(a)
        tangent = rng.normal(size=a.shape).astype(a.dtype)
        _, jax_tangents = jax.jvp(lambda x: jax.lax.linalg.eig(x, enable_eigvec_derivs=True),
                                  (a,), (tangent,))
    got = kiln.jit(kiln.grad(_eigvec_loss(jnp, kiln.lax)))(a)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-9)
    _, tangents = kiln.jvp(_with_vectors, (a,), (tangent,))
    for x, y in zip(tangents, jax_tangents):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-9, atol=1e-9)


def test_vmap_over_a_middle_axis():
    a = np.random.default_rng(7).normal(size=(3, 2, 3)).astype(np.float32)
    got = kiln.jit(kiln.vmap(jnp.linalg.eigvals, in_axes=1))(a)
    check_all([got], [_want(np.moveaxis(a, 1, 0), False, False)[0]], np.float32, 10)


def test_errors():
    with pytest.raises(ValueError, match=r"The input to eig must be a square matrix. Got "
                                         r"shape \(2, 3\)"):
        kl.eig(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="eig"):
        kl.eig(np.ones((2, 2), np.int32))


def test_llvm_calls_geev_and_failure_gives_nan():
    text = kiln.jit(jnp.linalg.eigvals).lower(np.eye(3, dtype=np.float32)).compile().as_text()
    assert "kiln_sgeev" in text
    bad = np.full((2, 2), np.nan, np.float32)
    assert np.isnan(np.asarray(kiln.jit(jnp.linalg.eigvals)(bad)).real).all()


def test_emulated_cuda_device(monkeypatch):
    from linalg_cases import on_emulated_cuda
    a = general((2,), 3, np.float32, 8)
    check_all(on_emulated_cuda(monkeypatch, jnp.linalg.eig, a),
              kiln.jit(jnp.linalg.eig, backend="reference")(a), np.float32, 10)
