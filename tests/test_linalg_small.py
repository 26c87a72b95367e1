"""The LLVM backend's kernels for batches of small real matrices (small_matrix.py: cholesky, lu
and triangular_solve without a LAPACK call per matrix) against the reference backend and
NumPy/SciPy, over batch shapes with 0, 1 and more matrices than one SIMD group holds, n in
1..24 and one size past the threshold (LAPACK's path), float32 and float64; non
positive-definite and singular input as JAX gives it; which path the code takes."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import kiln
import kiln.lax.linalg as kl
import kiln.numpy as knp
from kiln.compiler.backends.llvm import small_matrix

from linalg_cases import FEW, FLOATS, check_all, spd, triangular

small_batches = st.sampled_from([(0,), (1,), (2,), (3, 1), (5, 7), (37,)])
small_sizes = st.one_of(st.integers(1, small_matrix.SMALL_MAX),
                        st.just(small_matrix.SMALL_MAX + 3))


def _reference(f, *args):
    return kiln.jit(f, backend="reference")(*args)


def _llvm_text(f, *args):
    return kiln.jit(f).lower(*args).compile().as_text()


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=small_batches, n=small_sizes)
def test_cholesky(x64, dtype, batch, n):
    a = spd(batch, n, dtype, seed=n)
    got = kiln.jit(kl.cholesky)(a)
    check_all([got], [np.linalg.cholesky(a) if a.size else a], dtype, scale=10)
    check_all([got], [_reference(kl.cholesky, a)], dtype, scale=10)


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=small_batches, m=small_sizes, n=small_sizes)
def test_lu_pivots_equal_the_reference(x64, dtype, batch, m, n):
    a = np.random.default_rng(m * 31 + n).normal(size=batch + (m, n)).astype(dtype)
    lu, pivots, permutation = kiln.jit(kl.lu)(a)
    want = _reference(kl.lu, a)
    np.testing.assert_array_equal(pivots, want[1])
    np.testing.assert_array_equal(permutation, want[2])
    check_all([lu], [want[0]], dtype, scale=50)


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=small_batches, n=small_sizes, vectors=st.integers(1, 9),
       flags=st.tuples(*[st.booleans()] * 4))
def test_triangular_solve(x64, dtype, batch, n, vectors, flags):
    left_side, lower, transpose_a, unit_diagonal = flags
    a = triangular(batch, n, dtype, seed=n)
    b = np.random.default_rng(vectors).normal(
        size=batch + ((n, vectors) if left_side else (vectors, n))).astype(dtype)

    def f(a, b):
        return kl.triangular_solve(a, b, left_side=left_side, lower=lower,
                                   transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    check_all([kiln.jit(f)(a, b)], [_reference(f, a, b)], dtype, scale=10)


@pytest.mark.parametrize("dtype", FLOATS)
@FEW
@given(batch=small_batches, n=small_sizes)
def test_solve_and_inv_match_numpy(x64, dtype, batch, n):
    a = triangular(batch, n, dtype, seed=n) + np.random.default_rng(n).normal(
        size=batch + (n, n)).astype(dtype)
    b = np.random.default_rng(n + 1).normal(size=batch + (n, 2)).astype(dtype)
    scale = 100 if dtype == np.float32 else 10
    if a.size:
        check_all([kiln.jit(knp.linalg.solve)(a, b)], [np.linalg.solve(a, b)], dtype, scale)
        check_all([kiln.jit(knp.linalg.inv)(a)], [np.linalg.inv(a)], dtype, scale)


def test_not_positive_definite_gives_nan_in_that_matrix_only():
    a = spd((19,), 5, np.float32)
    a[3, 2, 2] = -50.0
    a[17, 0, 0] = np.nan
    got = np.asarray(kiln.jit(kl.cholesky)(a))
    lower = np.tril(np.ones((5, 5), bool))
    for i in (3, 17):
        assert np.isnan(got[i][lower]).all() and (got[i][~lower] == 0).all()
    good = [i for i in range(19) if i not in (3, 17)]
    check_all([got[good]], [np.linalg.cholesky(a[good])], np.float32, scale=10)


def test_singular_input_as_jax():
    """A singular matrix's inverse is inf/NaN where JAX's is (which of the two depends on the
    order of the substitutions' operations, in JAX as here); the others are exact."""
    jnp = pytest.importorskip("jax.numpy")
    a = np.stack([np.zeros((4, 4)), np.ones((4, 4)), np.eye(4),
                  np.diag([1.0, 2.0, 0.0, 3.0])]).astype(np.float32)
    a[1, 0, 0] = 2.0   # rank 2
    got = np.asarray(kiln.jit(knp.linalg.inv)(a))
    want = np.asarray(jnp.linalg.inv(a))
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    assert not np.isfinite(got[[0, 1]]).any()
    np.testing.assert_array_equal(got[2], np.eye(4))
    lu, pivots, permutation = kiln.jit(kl.lu)(a)
    want = _reference(kl.lu, a)
    for g, w in zip((lu, pivots, permutation), want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("shape, native", [((2, 24, 24), True), ((2, 25, 25), False),
                                           ((8, 8), True), ((9, 9), False)])
def test_native_up_to_the_threshold(shape, native):
    a = spd(shape[:-2], shape[-1], np.float32)
    texts = (_llvm_text(kl.cholesky, a), _llvm_text(lambda a: kl.lu(a)[0], a),
             _llvm_text(lambda a: kl.triangular_solve(a, a, left_side=True), a))
    for text, routine in zip(texts, ("potrf", "getrf", "trsm")):
        assert (f"kiln_s{routine}" not in text) == native, routine


def test_complex_takes_lapack():
    a = spd((3,), 4, np.complex64)
    assert "kiln_cpotrf" in _llvm_text(kl.cholesky, a)
    np.testing.assert_allclose(kiln.jit(kl.cholesky)(a), np.linalg.cholesky(a), rtol=1e-5,
                               atol=1e-5)


def test_large_triangular_solve_in_panels():
    """n * n * vectors past 2 * SPLIT_TASK_FLOPS: trsm on panels of columns on the pool."""
    a = triangular((), 256, np.float32)
    b = np.random.default_rng(1).normal(size=(256, 130)).astype(np.float32)
    for left_side, rhs in ((True, b), (False, b.T.copy())):
        def f(a, b):
            return kl.triangular_solve(a, b, left_side=left_side, lower=True)
        assert ".chunk" in _llvm_text(f, a, rhs)
        check_all([kiln.jit(f)(a, rhs)], [_reference(f, a, rhs)], np.float32, scale=10)


def test_lu_ties_take_the_first_largest_entry():
    """Entries of equal magnitude in a column (small integers): the pivot is the first, as
    getrf's; zero columns are left unscaled."""
    a = np.random.default_rng(3).integers(-2, 3, size=(60, 4, 4)).astype(np.float32)
    lu, pivots, permutation = kiln.jit(kl.lu)(a)
    want = _reference(kl.lu, a)
    np.testing.assert_array_equal(pivots, want[1])
    np.testing.assert_array_equal(permutation, want[2])
    check_all([lu], [want[0]], np.float32)
