"""The lu primitive (kiln.lax.linalg.lu): against SciPy's getrf (lu_factor) in float32 and
float64 over batch, tall and wide shapes (0- and 1-sized included), the LLVM lowering against
the reference backend, derivatives against finite differences (both modes, order 2), vmap,
singular input, JAX's errors and the emulated CUDA device."""
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given

import kiln
import kiln.lax.linalg as kl
from kiln.test_util import check_grads

from linalg_cases import (FEW, FLOATS, batches, check_all, check_grad_against_jax,
                         on_emulated_cuda, sizes)


def _want(a):
    *batch, m, n = a.shape
    k = min(m, n)
    lu = np.zeros(a.shape, a.dtype)
    piv = np.zeros(tuple(batch) + (k,), np.int32)
    perm = np.broadcast_to(np.arange(m, dtype=np.int32), tuple(batch) + (m,)).copy()
    if a.size:
        for i in np.ndindex(*batch):
            lu[i], piv[i] = scipy.linalg.lu_factor(a[i], check_finite=False)
            for j, p in enumerate(piv[i]):
                perm[i][[j, p]] = perm[i][[p, j]]
    return lu, piv, perm


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=batches, m=sizes, n=sizes)
def test_lu_matches_scipy_eager_and_llvm(x64, dtype, batch, m, n):
    a = np.random.default_rng(m * 7 + n).normal(size=batch + (m, n)).astype(dtype)
    want = _want(a)
    check_all(kl.lu(a), want, dtype)
    check_all(kiln.jit(kl.lu)(a), want, dtype)
    check_all(kiln.jit(kl.lu, backend="reference")(a), want, dtype)


@pytest.mark.parametrize("shape", [(2, 3, 3), (4, 3), (3, 5)])
def test_lu_grads_order_two(x64, shape):
    a = np.random.default_rng(5).normal(size=shape)
    check_grads(lambda a: kl.lu(a)[0], (a,), order=2, modes=("fwd", "rev"))


def test_grad_under_jit_matches_jax():
    a = np.random.default_rng(6).normal(size=(4, 4)).astype(np.float32)

    def loss(lib):
        return lambda a: (lib.lu(a)[0] ** 3).sum()
    check_grad_against_jax(loss, a, 1e-4)


def test_vmap_over_a_middle_axis():
    a = np.random.default_rng(7).normal(size=(3, 2, 3)).astype(np.float32)
    got = kiln.jit(kiln.vmap(kl.lu, in_axes=1))(a)
    check_all(got, _want(np.moveaxis(a, 1, 0)), np.float32)


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_singular_input_factors_without_error(backend):
    a = np.zeros((2, 3, 3), np.float32)
    a[0, 0, 0] = 1
    a[1] = np.ones((3, 3))
    lu, piv, perm = kiln.jit(kl.lu, backend=backend)(a)
    check_all((lu, piv, perm), _want(a), np.float32)


def test_errors_are_jax_s():
    with pytest.raises(TypeError, match=r"Input 0 to lu must have rank at least 2, but got "
                                        r"shape=\(2,\)"):
        kl.lu(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="lu does not accept dtype int32 at position 0"):
        kl.lu(np.ones((2, 2), np.int32))


def test_llvm_calls_getrf():   # past small_matrix.py's sizes (tests/test_linalg_small.py)
    text = kiln.jit(kl.lu).lower(np.ones((20, 20), np.float32)).compile().as_text()
    assert "kiln_sgetrf" in text


def test_emulated_cuda_device(monkeypatch):
    a = np.random.default_rng(8).normal(size=(2, 4, 3)).astype(np.float32)
    check_all(on_emulated_cuda(monkeypatch, kl.lu, a), _want(a), np.float32)


@pytest.mark.parametrize("shape, dtype", [((260, 260), np.float32), ((300, 270), np.float32),
                                          ((2, 270, 290), np.complex64)])
def test_blocked_getrf_past_its_threshold(shape, dtype):
    """min(m, n) >= lower_lu.BLOCKED_MIN: two column blocks, the update on the thread pool;
    the pivots are one getrf's."""
    from kiln.compiler.backends.llvm import lower_lu
    assert min(shape[-2:]) >= lower_lu.BLOCKED_MIN
    rng = np.random.default_rng(9)
    a = rng.normal(size=shape) + (1j * rng.normal(size=shape) if dtype == np.complex64 else 0)
    a = a.astype(dtype)
    lu, pivots, permutation = kiln.jit(kl.lu)(a)
    want = _want(a)
    np.testing.assert_array_equal(pivots, want[1])
    np.testing.assert_array_equal(permutation, want[2])
    np.testing.assert_allclose(lu, want[0], rtol=1e-3, atol=1e-3)
