"""The svd primitive (kiln.lax.linalg.svd): against SciPy's gesdd in float32 and float64 over
batch, tall and wide shapes (0- and 1-sized included), full and reduced, with and without
singular vectors, the LLVM lowering against the reference backend, derivatives against finite
differences (both modes, order 2), vmap, JAX's errors and the emulated CUDA device."""
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, strategies as st

import kiln
import kiln.lax.linalg as kl
from kiln.test_util import check_grads

from linalg_cases import (FEW, FLOATS, batches, check_all, check_grad_against_jax,
                         on_emulated_cuda, sizes)


def _want(a, full):
    *batch, m, n = a.shape
    k = min(m, n)
    ucols, vrows = (m, n) if full else (k, k)
    u = np.broadcast_to(np.eye(m, ucols, dtype=a.dtype), tuple(batch) + (m, ucols)).copy()
    vt = np.broadcast_to(np.eye(vrows, n, dtype=a.dtype), tuple(batch) + (vrows, n)).copy()
    s = np.zeros(tuple(batch) + (k,), a.dtype)
    if a.size:
        for i in np.ndindex(*batch):
            u[i], s[i], vt[i] = scipy.linalg.svd(a[i], full_matrices=full, lapack_driver="gesdd")
    return u, s, vt


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=batches, m=sizes, n=sizes, full=st.booleans(), uv=st.booleans())
def test_svd_matches_scipy_eager_and_llvm(x64, dtype, batch, m, n, full, uv):
    a = np.random.default_rng(m * 7 + n).normal(size=batch + (m, n)).astype(dtype)
    want = _want(a, full) if uv else [_want(a, full)[1]]

    def f(a):
        out = kl.svd(a, full_matrices=full, compute_uv=uv)
        return out if uv else [out]
    check_all(f(a), want, dtype, 10)
    check_all(kiln.jit(f)(a), want, dtype, 10)
    check_all(kiln.jit(f, backend="reference")(a), want, dtype, 10)


@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 3), (3, 5)])
def test_svd_grads_order_two(x64, shape):
    a = np.random.default_rng(5).normal(size=shape)
    check_grads(lambda a: kl.svd(a, full_matrices=False), (a,), order=2, modes=("fwd", "rev"))
    check_grads(lambda a: kl.svd(a, compute_uv=False), (a,), order=2, modes=("fwd", "rev"))


def test_grad_under_jit_matches_jax():
    a = np.random.default_rng(6).normal(size=(5, 3)).astype(np.float32)

    def loss(lib):
        def f(a):
            u, s, vt = lib.svd(a, full_matrices=False)
            return (u ** 4).sum() + (s ** 2).sum() + (vt ** 3).sum()
        return f
    check_grad_against_jax(loss, a, 1e-3)


def test_vmap_over_a_middle_axis():
    a = np.random.default_rng(7).normal(size=(4, 2, 3)).astype(np.float32)
    got = kiln.jit(kiln.vmap(lambda a: kl.svd(a, full_matrices=False), in_axes=1))(a)
    check_all(got, _want(np.moveaxis(a, 1, 0), False), np.float32, 10)


def test_errors():
    with pytest.raises(TypeError, match=r"Input 0 to svd must have rank at least 2"):
        kl.svd(np.ones(2, np.float32))
    with pytest.raises(NotImplementedError, match="not implemented for full matrices"):
        kiln.grad(lambda a: kl.svd(a)[0].sum())(np.ones((3, 2), np.float32))


def test_llvm_calls_gesdd():
    text = kiln.jit(kl.svd).lower(np.ones((3, 2), np.float32)).compile().as_text()
    assert "kiln_sgesdd" in text


def test_emulated_cuda_device(monkeypatch):
    a = np.random.default_rng(8).normal(size=(2, 4, 3)).astype(np.float32)
    check_all(on_emulated_cuda(monkeypatch, kl.svd, a), _want(a, True), np.float32, 10)


def _gauge_invariant(a):
    """Functions of the complex factors that do not depend on the singular vectors' phases:
    the values, |U|^2, |Vt|^2 and each pair's outer product u_j vt_j."""
    import kiln.numpy as jnp
    u, s, vt = kl.svd(a, full_matrices=False)
    pairs = u[..., :, :, None] * vt[..., None, :, :]
    return s, jnp.abs(u) ** 2, jnp.abs(vt) ** 2, pairs


@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 3), (3, 5)])
def test_complex_svd_grads(x64, shape):
    """JAX's complex rule (with the phase term on dU's diagonal), both modes, against finite
    differences of phase-independent functions, and the values alone to second order."""
    rng = np.random.default_rng(9)
    a = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    check_grads(_gauge_invariant, (a,), order=1, modes=("fwd", "rev"))
    check_grads(lambda a: kl.svd(a, compute_uv=False), (a,), order=2, modes=("fwd", "rev"))


def test_full_matrices_of_a_square_matrix_have_derivatives(x64):
    a = np.random.default_rng(10).normal(size=(3, 3))
    check_grads(lambda a: kl.svd(a, full_matrices=True), (a,), order=2, modes=("fwd", "rev"))


def test_complex_grad_under_jit_matches_jax():
    rng = np.random.default_rng(11)
    a = (rng.normal(size=(4, 3)) + 1j * rng.normal(size=(4, 3))).astype(np.complex64)

    def loss(lib):
        def f(a):
            u, s, vt = lib.svd(a, full_matrices=False)
            pairs = u[:, :, None] * vt[None, :, :]
            return (abs(u) ** 4).sum() + (s ** 2).sum() + (pairs.real ** 2).sum()
        return f
    check_grad_against_jax(loss, a, 1e-3)
