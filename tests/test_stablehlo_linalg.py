"""The StableHLO rules of the decompositions (compiler/backends/stablehlo/
lower_decompositions.py, lower_lu.py, lower_qr.py, lower_jacobi.py, lower_svd.py) run by
jaxlib's XLA against the reference backend: hypothesis over shapes (batch axes and empty
matrices included), dtypes and flags, NaN on a matrix that is not positive definite, LU's
pivots on ties and NaNs, QR's and hessenberg's LAPACK signs, grad and vmap of programs using
them, eigh's and svd's values, schur and eig, and every new family (windows,
fft, conv too) on the xla-cpu-pjrt plug-in when it is installed."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import kiln
import kiln.numpy as jnp
from kiln.lax import linalg

pytest.importorskip("jax", reason="the second consumer of the StableHLO text is jaxlib")
from test_stablehlo import SETTINGS, both, check, values  # noqa: E402

pytestmark = pytest.mark.usefixtures("x64_module")
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
BATCHES = [(), (0,), (1,), (3,), (2, 2)]


def spd(batch, n, dtype, seed=0):
    """Hermitian positive-definite matrices, well conditioned."""
    a = values(batch + (n, n), dtype, seed)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def tol(dtype):
    return 2e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9


@SETTINGS
@given(st.sampled_from(BATCHES), st.sampled_from([0, 1, 2, 5]), st.sampled_from(DTYPES))
def test_cholesky(batch, n, dtype):
    a = spd(batch, n, dtype)
    check(lambda a: linalg.cholesky(a, symmetrize_input=False), a, rtol=tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_cholesky_not_positive_definite_is_nan(dtype):
    a = spd((4,), 3, dtype)
    a[1, 2, 2] = -5.0                         # indefinite: potrf fails in the last column
    a[2] = [[1, 1, 0], [1, 1, 0], [0, 0, 1]]  # singular: a zero pivot in the middle
    a[3, 0, 0] = np.nan
    got = np.asarray(kiln.jit(lambda a: linalg.cholesky(a, symmetrize_input=False),
                              backend="reference")(a))
    below = np.tril(np.ones((3, 3), bool))
    assert np.isnan(got[1:][:, below]).all() and np.isfinite(got[0]).all()
    check(lambda a: linalg.cholesky(a, symmetrize_input=False), a, rtol=tol(dtype))
    b = np.array([[4, 2], [2, 1]], dtype)     # an exact zero last pivot: XLA gives 0 there
    check(lambda a: linalg.cholesky(a, symmetrize_input=False), b, rtol=tol(dtype))


@SETTINGS
@given(st.sampled_from(BATCHES), st.sampled_from([0, 1, 3]), st.sampled_from([0, 1, 2]),
       st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from(DTYPES))
def test_triangular_solve(batch, n, k, left, lower, trans, conj, unit, dtype):
    a = values(batch + (n, n), dtype, 1) + 4 * np.eye(n, dtype=dtype)
    b = values(batch + ((n, k) if left else (k, n)), dtype, 2)
    f = lambda a, b: linalg.triangular_solve(a, b, left_side=left, lower=lower,
                                             transpose_a=trans, conjugate_a=conj,
                                             unit_diagonal=unit)
    check(f, a, b, rtol=tol(dtype))


def test_grad_and_vmap_through_cholesky_and_solve():
    a, y = spd((3,), 4, np.float64), values((3, 4), np.float64, 5)

    def nll(a, y):      # a Gaussian likelihood: solve with the factor, log-determinant
        chol = linalg.cholesky(a)
        z = linalg.triangular_solve(chol, y[:, None], left_side=True, lower=True)
        return 0.5 * (z ** 2).sum() + jnp.log(jnp.diagonal(chol)).sum()

    check(kiln.vmap(kiln.grad(nll, argnums=(0, 1))), a, y, rtol=1e-8)
    check(kiln.vmap(nll), a, y, rtol=1e-9)


@SETTINGS
@given(st.sampled_from(BATCHES), st.sampled_from([(0, 0), (1, 1), (3, 3), (4, 2), (2, 5)]),
       st.sampled_from(DTYPES), st.booleans())
def test_lu(batch, mn, dtype, special):
    a = values(batch + mn, dtype, 4)
    if special and a.size:
        a = np.round(a / 2).astype(dtype)       # ties between pivots, zero pivots
        a[..., 0, :] = 0
        a.flat[::7] = np.nan
    check(lambda a: linalg.lu(a), a, rtol=tol(dtype))


def test_grad_and_vmap_through_lu():
    a = values((3, 4, 4), np.float64, 6) + 3 * np.eye(4)
    f = lambda a: jnp.log(jnp.abs(jnp.diagonal(linalg.lu(a)[0]))).sum()
    check(kiln.vmap(kiln.grad(f)), a, rtol=1e-8)
    check(kiln.vmap(lambda a: linalg.lu(a)[2]), a)


@SETTINGS
@given(st.sampled_from(BATCHES), st.sampled_from([(0, 2), (1, 1), (3, 3), (4, 2), (2, 5)]),
       st.sampled_from(DTYPES), st.booleans(), st.booleans())
def test_qr(batch, mn, dtype, full, special):
    """LAPACK's signs: R's diagonal as geqrf leaves it, an identity reflector where the
    column below the diagonal is already zero."""
    a = values(batch + mn, dtype, 7)
    if special and a.size:
        a[..., 1:, 0] = 0                       # a column that needs no reflection
        a[..., -1] *= -1
    check(lambda a: linalg.qr(a, full_matrices=full), a, rtol=tol(dtype))


def test_grad_and_vmap_through_qr():
    a = values((3, 4, 3), np.float64, 8)
    f = lambda a: (linalg.qr(a, full_matrices=False)[1] ** 3).sum() + jnp.sin(
        linalg.qr(a, full_matrices=False)[0]).sum()
    check(kiln.vmap(kiln.grad(f)), a, rtol=1e-8)


@SETTINGS
@given(st.sampled_from(BATCHES), st.sampled_from([0, 1, 2, 5]), st.sampled_from(DTYPES))
def test_hessenberg(batch, n, dtype):
    """gehrd's packed result: H, the reflectors below its subdiagonal, and their taus, with
    larfg's signs."""
    check(linalg.hessenberg, values(batch + (n, n), dtype, 10), rtol=tol(dtype))


def test_schur_and_eig_run_on_jaxlib():
    """The QR iteration's module through jaxlib's XLA as well (tests/test_pjrt_jit.py checks
    it thoroughly on the plug-in): A = Z T Z^T with T quasi-triangular, and eig's values as
    LAPACK's up to their order."""
    a = values((2, 4, 4), np.float64, 12)
    (t, z, w), (_, _, w_ref) = both(lambda a: tuple(linalg.schur(a)) + (linalg.eig(a)[0],), a)
    np.testing.assert_allclose(z @ t @ np.swapaxes(z, -1, -2), a, atol=1e-12)
    assert (np.tril(t, -2) == 0).all()
    key = lambda w: sorted((round(x.real, 8), round(x.imag, 8)) for x in w.ravel())
    assert key(w) == key(w_ref)


def test_eigh_and_svd_run_on_jaxlib():
    """The Jacobi modules through jaxlib's XLA as well (tests/test_pjrt_jit.py checks them
    against the reference on the plug-in): eigenvalues and singular values as LAPACK's."""
    for dtype in (np.float64, np.complex128):
        a = values((2, 4, 3), dtype, 9)
        got, want = both(lambda a: (linalg.eigh(a[..., :3, :])[1],
                                    linalg.svd(a, compute_uv=False)), a)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_new_families_run_on_the_xla_cpu_pjrt_plugin():
    """The same text through the xla-cpu-pjrt plug-in (an older XLA than jaxlib's), when it
    is installed: every new family parses, compiles and matches the reference."""
    from kiln.compiler.backends.pjrt import client as pjrt, plugins
    from kiln.compiler.backends.stablehlo import lower_module
    from kiln import lax
    from kiln.tree_util import tree_leaves
    found = [p.path for p in plugins.discover() if p.name == "xla-cpu-pjrt"]
    if not found:
        pytest.skip("xla-cpu-pjrt is not installed")
    cpu = kiln.pjrt.client(found[0])
    pool = lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), ((1, 0), (0, 1)))
    x, a = values((4, 5), np.float32), values((2, 3, 3), np.float32)
    tri = a + np.float32(3) * np.eye(3, dtype=np.float32)
    cases = [
        (lambda x: lax.fft(x, "RFFT", (5,)), (x,)),
        (lambda l, r: lax.conv_general_dilated(l, r, (1, 2), ((1, 0), (0, 1)), (1, 1), (2, 1),
                                               feature_group_count=2),
         (values((2, 4, 5, 5), np.float32), values((4, 2, 2, 2), np.float32))),
        (kiln.grad(lambda x: pool(x).sum()), (x,)),
        (lambda x, t: kiln.jvp(pool, (x,), (t,))[1], (x, x)),
        (lambda a: linalg.cholesky(a), (spd((2,), 3, np.float32),)),
        (lambda a, b: linalg.triangular_solve(a, b, left_side=True, lower=True,
                                              transpose_a=True), (tri, a)),
        (lambda a: linalg.lu(a), (a,)),
        (lambda a: linalg.qr(a), (values((2, 3, 2), np.complex64),)),
    ]
    for f, args in cases:
        reference = kiln.jit(f, backend="reference")
        module = lower_module(reference.lower(*args)._entry.ssa)
        want = [np.asarray(w) for w in tree_leaves(reference(*args))]
        got = pjrt.Executable(cpu, module.text, list(args), want)(*args)
        for g, w in zip(got if isinstance(got, (list, tuple)) else [got], want):
            np.testing.assert_allclose(g.to_host(), w, rtol=1e-3, atol=1e-3)
