"""The NumPy definitions of lu and triangular_solve call LAPACK's getrf and BLAS's trsm on NumPy
arrays of LAPACK's types (compiler/primitives/decompositions.py, `on_lapack`); the loops they
replace stay the definition for CuPy arrays, float16 and large batches of small matrices. Both
ways give the same factors and solutions, to rounding, with the same pivots."""
import numpy as np
import pytest

from kiln.compiler.primitives import decompositions, lu

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 1e-4, np.float64: 1e-10, np.complex64: 1e-4, np.complex128: 1e-10}


def matrices(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def both(fn, *args, **params):
    """(LAPACK's result, the loop's result) of the definition `fn`."""
    assert decompositions.on_lapack(*args)
    fast = fn(*args, **params)
    saved = decompositions.on_lapack
    try:
        decompositions.on_lapack = lu.on_lapack = lambda *a: False
        slow = fn(*args, **params)
    finally:
        decompositions.on_lapack = lu.on_lapack = saved
    return fast, slow


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 6, 4), (2, 4, 7), (40, 17, 17)])
def test_getrf_gives_the_loops_factors(shape, dtype):
    a = matrices(shape, dtype)
    (f, p, q), (f2, p2, q2) = both(lu._lu, a)
    np.testing.assert_array_equal(p, p2)
    np.testing.assert_array_equal(q, q2)
    np.testing.assert_allclose(f, f2, rtol=TOL[dtype], atol=TOL[dtype])
    assert f.dtype == a.dtype and p.dtype == q.dtype == np.int32


def test_a_singular_matrix_and_a_nan_take_the_loops_rule():
    a = np.array([[0., 0., 1.], [0., 0., 2.], [1., 1., 1.]], np.float32)
    (f, p, q), (f2, p2, q2) = both(lu._lu, a)   # a zero pivot: no error, U's diagonal has a 0
    np.testing.assert_array_equal(p, p2)
    np.testing.assert_allclose(f, f2)
    nan = a.copy()
    nan[1, 0] = np.nan   # not finite: the loop, whose NaN pivot rule every backend follows
    (f, p, q), (f2, p2, q2) = both(lu._lu, nan)
    assert p[0] == 1 and np.isnan(f[1:, 0]).all()   # the first NaN is the pivot
    np.testing.assert_array_equal(f, f2)
    np.testing.assert_array_equal(p, p2)


def test_large_batches_of_small_matrices_take_the_loop():
    small = matrices((decompositions.LOOP_BATCH + 1, 4, 4), np.float32)
    assert not decompositions.on_lapack(small)
    assert decompositions.on_lapack(small[:decompositions.LOOP_BATCH])
    assert decompositions.on_lapack(matrices((decompositions.LOOP_BATCH + 1, 16, 16), np.float32))
    assert not decompositions.on_lapack(small.astype(np.float16))
    assert not decompositions.on_lapack(small[:, :0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a,conjugate_a", [(False, False), (True, False), (True, True),
                                                     (False, True)])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_trsm_gives_the_substitutions_solution(dtype, left_side, lower, transpose_a, conjugate_a,
                                               unit_diagonal):
    a = matrices((2, 5, 5), dtype) + 4 * np.eye(5, dtype=dtype)
    b = matrices((2, 5, 3) if left_side else (2, 3, 5), dtype, seed=1)
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    fast, slow = both(decompositions._triangular_solve, a, b, **params)
    np.testing.assert_allclose(fast, slow, rtol=TOL[dtype], atol=TOL[dtype])
    assert fast.dtype == b.dtype and fast.shape == b.shape
