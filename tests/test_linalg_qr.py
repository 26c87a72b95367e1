"""The qr primitive (kiln.lax.linalg.qr): against NumPy's (LAPACK's) in float32 and float64
over batch, tall and wide shapes (0- and 1-sized included), both full_matrices, the LLVM
lowering (geqrf + orgqr) against the reference backend, derivatives against finite
differences (both modes, order 2), vmap, JAX's errors and the emulated CUDA device."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import kiln
import kiln.lax.linalg as kl
from kiln.test_util import check_grads

from linalg_cases import (FEW, FLOATS, batches, check_all, check_grad_against_jax,
                         on_emulated_cuda, sizes)


def _want(a, full_matrices):
    *batch, m, n = a.shape
    if a.size == 0:
        cols = m if full_matrices else min(m, n)
        return (np.broadcast_to(np.eye(m, cols, dtype=a.dtype), tuple(batch) + (m, cols)),
                np.zeros(tuple(batch) + (cols, n), a.dtype))
    return np.linalg.qr(a, mode="complete" if full_matrices else "reduced")


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=batches, m=sizes, n=sizes, full=st.booleans())
def test_qr_matches_numpy_eager_and_llvm(x64, dtype, batch, m, n, full):
    a = np.random.default_rng(m * 7 + n).normal(size=batch + (m, n)).astype(dtype)
    want = _want(a, full)

    def f(a):
        return kl.qr(a, full_matrices=full)
    check_all(f(a), want, dtype, 10)
    check_all(kiln.jit(f)(a), want, dtype, 10)
    check_all(kiln.jit(f, backend="reference")(a), want, dtype, 10)


@pytest.mark.parametrize("shape, full", [((2, 4, 3), False), ((3, 3), True), ((3, 5), False),
                                         ((2, 4), True)])
def test_qr_grads_order_two(x64, shape, full):
    a = np.random.default_rng(5).normal(size=shape)
    check_grads(lambda a: kl.qr(a, full_matrices=full), (a,), order=2, modes=("fwd", "rev"))


def test_grad_under_jit_matches_jax():
    a = np.random.default_rng(6).normal(size=(5, 3)).astype(np.float32)

    def loss(lib):
        def f(a):
            q, r = lib.qr(a, full_matrices=False)
            return (q ** 3).sum() + (r ** 2).sum()
        return f
    check_grad_against_jax(loss, a, 1e-4)


def test_vmap_over_a_middle_axis():
    a = np.random.default_rng(7).normal(size=(4, 2, 3)).astype(np.float32)
    got = kiln.jit(kiln.vmap(lambda a: kl.qr(a, full_matrices=False), in_axes=1))(a)
    check_all(got, _want(np.moveaxis(a, 1, 0), False), np.float32, 10)


def test_errors():
    with pytest.raises(TypeError, match=r"Input 0 to qr must have rank at least 2"):
        kl.qr(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="qr does not accept dtype int32 at position 0"):
        kl.qr(np.ones((2, 2), np.int32))
    with pytest.raises(NotImplementedError, match="full_matrices=True for a tall matrix"):
        kiln.grad(lambda a: kl.qr(a)[0].sum())(np.ones((3, 2), np.float32))


def test_llvm_calls_geqrf_and_orgqr():
    text = kiln.jit(kl.qr).lower(np.ones((3, 2), np.float32)).compile().as_text()
    assert "kiln_sgeqrf" in text and "kiln_sorgqr" in text


def test_emulated_cuda_device(monkeypatch):
    a = np.random.default_rng(8).normal(size=(2, 4, 3)).astype(np.float32)
    check_all(on_emulated_cuda(monkeypatch, kl.qr, a), _want(a, True), np.float32, 10)
