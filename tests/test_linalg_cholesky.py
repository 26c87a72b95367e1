"""The cholesky and triangular_solve primitives (kiln.lax.linalg): against NumPy/SciPy in
float32 and float64 over batch shapes (0- and 1-sized included), the LLVM lowering (LAPACK's
potrf, BLAS's trsm) against the reference backend, derivatives against finite differences
(both modes, order 2), vmap, JAX's errors, NaN for a matrix that is not positive definite, and
the emulated CUDA device."""
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, strategies as st

import kiln
import kiln.lax.linalg as kl
from kiln.test_util import check_grads

from linalg_cases import FEW, FLOATS, batches, on_emulated_cuda, sizes, spd, tolerance, triangular


def close(got, want, dtype):
    got = np.asarray(got)
    assert got.shape == np.shape(want) and got.dtype == np.dtype(dtype), (got.shape, got.dtype)
    np.testing.assert_allclose(got, want, rtol=tolerance(dtype), atol=tolerance(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=batches, n=sizes)
def test_cholesky_matches_numpy_eager_and_llvm(x64, dtype, batch, n):
    a = spd(batch, n, dtype)
    want = np.linalg.cholesky(a) if a.size else a
    close(kl.cholesky(a), want, dtype)
    close(kiln.jit(kl.cholesky)(a), want, dtype)
    close(kiln.jit(kl.cholesky, backend="reference")(a), want, dtype)


def _ts_case(data, dtype):
    batch, n, k = data.draw(batches), data.draw(sizes), data.draw(sizes)
    flags = {name: data.draw(st.booleans()) for name in
             ("left_side", "lower", "transpose_a", "unit_diagonal")}
    a = triangular(batch, n, dtype)
    b = np.random.default_rng(1).normal(size=batch + ((n, k) if flags["left_side"]
                                                       else (k, n))).astype(dtype)
    return a, b, flags


def _ts_want(a, b, left_side, lower, transpose_a, unit_diagonal):
    if a.size == 0 or b.size == 0:
        return np.zeros(b.shape, b.dtype)
    out = np.empty(b.shape, np.float64)
    for i in np.ndindex(a.shape[:-2]):
        ai, bi = a[i], (b[i] if left_side else b[i].T)
        trans = transpose_a if left_side else not transpose_a
        x = scipy.linalg.solve_triangular(ai, bi, trans=int(trans), lower=lower,
                                          unit_diagonal=unit_diagonal)
        out[i] = x if left_side else x.T
    return out


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(data=st.data())
def test_triangular_solve_matches_scipy_eager_and_llvm(x64, dtype, data):
    a, b, flags = _ts_case(data, dtype)
    want = _ts_want(a, b, **flags)

    def f(a, b):
        return kl.triangular_solve(a, b, **flags)
    close(f(a, b), want, dtype)
    close(kiln.jit(f)(a, b), want, dtype)
    close(kiln.jit(f, backend="reference")(a, b), want, dtype)


def test_cholesky_grads_order_two(x64):
    a = spd((2,), 3, np.float64)
    check_grads(kl.cholesky, (a,), order=2, modes=("fwd", "rev"))
    check_grads(kiln.jit(kl.cholesky), (a,), order=1, modes=("fwd", "rev"))


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower, transpose_a, unit_diagonal",
                         [(True, False, False), (False, True, True), (True, True, False)])
def test_triangular_solve_grads_order_two(x64, left_side, lower, transpose_a, unit_diagonal):
    a = triangular((2,), 3, np.float64)
    b = np.random.default_rng(2).normal(size=(2, 3, 2) if left_side else (2, 2, 3))

    def f(a, b):
        return kl.triangular_solve(a, b, left_side=left_side, lower=lower,
                                   transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    check_grads(f, (a, b), order=2, modes=("fwd", "rev"))


def test_grad_of_jit_matches_jax():
    jax = pytest.importorskip("jax")
    a = spd((), 4, np.float32)

    def loss(lib):
        return lambda a: (lib.cholesky(a) ** 2).sum() + lib.triangular_solve(
            lib.cholesky(a), a, left_side=True, lower=True).sum()
    want = jax.grad(loss(jax.lax.linalg))(a)
    close(kiln.jit(kiln.grad(loss(kl)))(a), want, np.float32)


def test_vmap_over_a_middle_axis():
    a = np.moveaxis(spd((3,), 4, np.float32), 0, 1)
    b = np.random.default_rng(3).normal(size=(4, 3, 2)).astype(np.float32)
    got = kiln.vmap(lambda a, b: kl.triangular_solve(kl.cholesky(a), b, left_side=True,
                                                     lower=True), in_axes=(1, 1))(a, b)
    want = [np.linalg.solve(np.linalg.cholesky(a[:, i]), b[:, i]) for i in range(3)]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    got = kiln.jit(kiln.vmap(kl.cholesky, in_axes=1))(a)
    np.testing.assert_allclose(np.asarray(got), np.linalg.cholesky(np.moveaxis(a, 1, 0)),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_not_positive_definite_gives_nan_in_the_lower_triangle(backend):
    a = spd((3,), 3, np.float32)
    a[1] = -np.eye(3)
    out = np.asarray(kiln.jit(kl.cholesky, backend=backend)(a))
    assert np.isnan(out[1][np.tril_indices(3)]).all() and (out[1][np.triu_indices(3, 1)] == 0).all()
    np.testing.assert_allclose(out[[0, 2]], np.linalg.cholesky(a[[0, 2]]), rtol=1e-5)


@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_zero_pivot_gives_inf_or_nan(backend):
    a = np.eye(3, dtype=np.float32)
    a[1, 1] = 0
    b = np.ones((3, 1), np.float32)
    out = np.asarray(kiln.jit(lambda a, b: kl.triangular_solve(a, b, left_side=True,
                                                               lower=True), backend=backend)(a, b))
    assert not np.isfinite(out[1:]).any()


def test_errors_are_jax_s():
    with pytest.raises(ValueError, match=r"must have shape \[..., n, n\], got shape \(2, 3\)"):
        kl.cholesky(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="cholesky does not accept dtype int32 at position 0. "
                       "Accepted dtypes at position 0 are subtypes of floating, complexfloating."):
        kl.cholesky(np.ones((2, 2), np.int32), symmetrize_input=False)
    with pytest.raises(ValueError, match="Incompatible shapes for arguments to triangular_solve"):
        kl.triangular_solve(np.eye(3, dtype=np.float32), np.ones((2, 2), np.float32),
                            left_side=True)
    with pytest.raises(TypeError, match="equal batch dimensions"):
        kl.triangular_solve(np.ones((2, 3, 3), np.float32), np.ones((1, 3, 3), np.float32))


def test_llvm_calls_lapack():   # past small_matrix.py's sizes (tests/test_linalg_small.py)
    text = kiln.jit(kl.cholesky).lower(spd((), 20, np.float32)).compile().as_text()
    assert "kiln_spotrf" in text


def test_emulated_cuda_device(monkeypatch):
    a = spd((2,), 3, np.float32)

    def f(a):
        L = kl.cholesky(a)
        return kl.triangular_solve(L, a, left_side=True, lower=True)
    want = kiln.jit(f, backend="reference")(a)
    np.testing.assert_allclose(np.asarray(on_emulated_cuda(monkeypatch, f, a)), want, rtol=1e-5)


def _factor_and_solve(a, b):
    return (kl.triangular_solve(kl.cholesky(a), b, left_side=True, lower=True), kl.lu(b),
            kl.qr(b), kl.eigh(a), kl.svd(b))


def test_kiln_compile_library_binds_lapack(tmp_path):   # (lu, qr, eigh, svd too)
    import kiln.aot
    from kiln.cli.aot import compile_library
    from kiln.compiler.aot import Target
    a, b = spd((2,), 3, np.float32), np.ones((2, 3, 2), np.float32)
    compile_library([Target(_factor_and_solve, (a, b))], tmp_path / "lib", name="lib")
    got = kiln.aot.load(tmp_path / "lib")._factor_and_solve(a, b)
    want = kiln.jit(_factor_and_solve)(a, b)
    for g, w in zip(kiln.tree_util.tree_leaves(got), kiln.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_complex_conjugate_only_solve_is_refused_by_llvm_with_a_fix():
    from kiln.compiler.errors import BackendUnsupportedError
    a = np.eye(2, dtype=np.complex64)

    def f(a, b):
        return kl.triangular_solve(a, b, left_side=True, lower=True, conjugate_a=True)
    with pytest.raises(BackendUnsupportedError, match=r"no BLAS form(.|\n)*jnp.conj\(a\)"):
        kiln.jit(f, backend="llvm")(a, a)
    np.testing.assert_allclose(np.asarray(kiln.jit(f)(a, a)), a)   # falls back to the reference


def test_complex_cholesky_and_solve_on_llvm():
    m = np.random.default_rng(4).normal(size=(2, 3, 3, 2)).view(np.complex128)[..., 0]
    a = (m @ np.conj(np.swapaxes(m, -1, -2)) + 3 * np.eye(3)).astype(np.complex64)
    L = kiln.jit(kl.cholesky, backend="llvm")(a)
    np.testing.assert_allclose(np.asarray(L), np.linalg.cholesky(a), rtol=1e-4, atol=1e-4)
    f = kiln.jit(lambda L, b: kl.triangular_solve(L, b, left_side=True, lower=True,
                                                  transpose_a=True, conjugate_a=True),
                 backend="llvm")
    np.testing.assert_allclose(np.asarray(f(L, a)), np.linalg.solve(
        np.conj(np.swapaxes(np.asarray(L), -1, -2)), a), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("lower, want_grad", [
    (True, [[-0.131151, -0.805499, -0.339797], [1.222146, 1.150623, -0.078415],
            [1.604913, 4.142744, 2.875203]]),
    (False, [[0.082188, 0.218035, -0.093575], [-0.658855, 1.167069, 2.936699],
             [-0.339797, -0.078415, 2.875203]]),
])
def test_scipy_cholesky_reads_one_triangle_unsymmetrised(lower, want_grad):
    # kiln.scipy.linalg.cholesky, as JAX's: the named triangle's factor, the input not
    # symmetrised (jnp.linalg.cholesky symmetrises); gradients recorded from JAX 0.10.2.
    from kiln.scipy import linalg as ksl
    import kiln.numpy as jnp
    spd_a = np.array([[4., 1, 0.5], [1, 3, 0.2], [0.5, 0.2, 2]], np.float32)
    junk = np.triu(np.full((3, 3), 0.7, np.float32), 1)
    b = spd_a + (junk if lower else junk.T)
    want = np.linalg.cholesky(spd_a.astype(np.float64))
    close(ksl.cholesky(b, lower=lower), want if lower else want.T, np.float32)
    w = np.arange(9, dtype=np.float32).reshape(3, 3)
    grad = kiln.grad(lambda a: jnp.sum(w * ksl.cholesky(a, lower=lower)))
    np.testing.assert_allclose(grad(b), want_grad, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(kiln.jit(grad)(b), want_grad, rtol=2e-5, atol=2e-5)
    assert ksl.cholesky(np.array([[4, 2], [2, 3]])).dtype == np.float32


@pytest.mark.parametrize("batch", [(), (2,)])
def test_complex_cholesky_vjp_is_the_transpose_of_its_jvp(batch):
    # JAX's convention: the VJP transposes the JVP without conjugating, so that
    # grad(holomorphic=True) is the complex derivative (it was conjugated).
    rng = np.random.RandomState(0)
    def rand(*shape):
        return (rng.randn(*shape) + 1j * rng.randn(*shape)).astype(np.complex64)
    m = rand(*batch, 3, 3)
    a = m @ np.conj(np.swapaxes(m, -1, -2)) + 3 * np.eye(3, dtype=np.complex64)
    da, ct = rand(*batch, 3, 3), rand(*batch, 3, 3)
    def chol(x):   # without symmetrising the input, which conjugates (not complex-linear)
        return kl.cholesky(x, symmetrize_input=False)
    _, tangent = kiln.jvp(chol, (a,), (da,))
    _, vjp_fun = kiln.vjp(chol, a)
    (cotangent,) = vjp_fun(ct)
    np.testing.assert_allclose(np.sum(np.asarray(tangent) * ct),
                               np.sum(np.asarray(cotangent) * da), rtol=1e-4)


def test_complex_cholesky_holomorphic_grad_matches_jax():
    import kiln.numpy as jnp
    a = np.array([[5., 2 + 3j, 5j], [2 - 3j, 7., 1 + 7j], [-5j, 1 - 7j, 12.]], np.complex64)
    got = kiln.grad(lambda x: jnp.sum(jnp.linalg.cholesky(x)), holomorphic=True)(a)
    want = [[1.7069, 0.5049 + 1.5043j, -0.5469 + 0.7826j],   # recorded from JAX 0.10.2
            [0.5049 - 1.5043j, 1.5177, 0.5937 + 0.8883j],
            [-0.5469 - 0.7826j, 0.5937 - 0.8883j, 0.7817]]
    np.testing.assert_allclose(got, np.array(want), atol=2e-4)
