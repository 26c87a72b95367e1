"""Tests for `kiln.Array`: immutability, hashing, repr/str (checked against JAX 0.10.2's strings),
metadata, conversions and their errors, NumPy/DLPack interop, iteration, operators with Python
scalars / NumPy values / Arrays (results, dtypes and weak types recorded from JAX 0.10.2),
unsupported operand types, the methods forwarded to `kiln.numpy`, and pickling.
"""
import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kiln.numpy as jnp
from kiln.array import Array, to_array


def A(value, dtype=None):
    """A strongly typed Array from NumPy data (as jnp.asarray(np.asarray(value, dtype)))."""
    return to_array(np.asarray(value, dtype))


def W(value):
    """A weakly typed Array from a Python scalar (as jnp.asarray(value))."""
    return to_array(value)


X = A([1, 2, 3], "int32")
F = A([1.5, 2.0, 3.0], "float32")
I8 = A([1, 2, 3], "int8")
U8 = A([1, 2], "uint8")
B = A([True, False])
M = A([[1.0, 2.0], [3.0, 4.0]], "float32")
V = A([1.0, 1.0], "float32")
C = A([1 + 2j, 3 - 1j], "complex64")
NAMESPACE = dict(A=A, W=W, X=X, F=F, I8=I8, U8=U8, B=B, M=M, V=V, C=C, np=np, jnp=jnp)


def check(got, value, dtype, weak):
    assert isinstance(got, Array), type(got)
    assert str(got.dtype) == dtype, (got.dtype, dtype)
    assert got.weak_type == weak, got.weak_type
    expected = np.asarray(value, dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6)
    else:
        np.testing.assert_array_equal(np.asarray(got), expected)


# ----------------------------------------------------------------------- immutability

def test_item_assignment_is_a_type_error_showing_the_at_rewrite():
    x = A([1, 2, 3], "int32")
    with pytest.raises(TypeError, match=r"immutable.*x = x\.at\[idx\]\.set\(y\)"):
        x[0] = 5
    with pytest.raises(AttributeError, match="__delitem__"):  # as JAX 0.10.2
        del x[0]
    np.testing.assert_array_equal(np.asarray(x), [1, 2, 3])


def test_arrays_are_unhashable():
    with pytest.raises(TypeError, match="unhashable type"):
        hash(W(1))
    with pytest.raises(TypeError, match="unhashable type"):
        {X: 1}


def test_numpy_views_are_read_only():
    view = np.asarray(X)
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 7
    copied = np.array(X)
    copied[0] = 7
    np.testing.assert_array_equal(np.asarray(X), [1, 2, 3])
    assert np.asarray(X, dtype=np.float64).dtype == np.float64
    assert X.__array__(copy=True).flags.writeable


def test_copy_and_deepcopy_share_the_immutable_array():
    assert copy.copy(X) is X
    assert copy.deepcopy([X])[0] is X


# ------------------------------------------------------------------------------ repr

# (expression, repr, str), all recorded from JAX 0.10.2.
REPRS = [
    ("A([0, 1, 2, 3], 'int32')",
     'Array([0, 1, 2, 3], dtype=int32)',
     '[0 1 2 3]'),
    ("A(np.arange(6).reshape(2, 3), 'int32')",
     'Array([[0, 1, 2],\n'
     '       [3, 4, 5]], dtype=int32)',
     '[[0 1 2]\n'
     ' [3 4 5]]'),
    ("A(np.arange(24).reshape(2, 3, 4), 'int32')",
     'Array([[[ 0,  1,  2,  3],\n'
     '        [ 4,  5,  6,  7],\n'
     '        [ 8,  9, 10, 11]],\n'
     '\n'
     '       [[12, 13, 14, 15],\n'
     '        [16, 17, 18, 19],\n'
     '        [20, 21, 22, 23]]], dtype=int32)',
     '[[[ 0  1  2  3]\n'
     '  [ 4  5  6  7]\n'
     '  [ 8  9 10 11]]\n'
     '\n'
     ' [[12 13 14 15]\n'
     '  [16 17 18 19]\n'
     '  [20 21 22 23]]]'),
    ('W(3)',
     'Array(3, dtype=int32, weak_type=True)',
     '3'),
    ('W(3.5)',
     'Array(3.5, dtype=float32, weak_type=True)',
     '3.5'),
    ('W(True)',
     'Array(True, dtype=bool)',
     'True'),
    ('W(1+2j)',
     'Array(1.+2.j, dtype=complex64, weak_type=True)',
     '(1+2j)'),
    ("A(3, 'int32')",
     'Array(3, dtype=int32)',
     '3'),
    ("A(2.5, 'float32')",
     'Array(2.5, dtype=float32)',
     '2.5'),
    ("A([], 'float32')",
     'Array([], shape=(0,), dtype=float32)',
     '[]'),
    ("A(np.zeros((0, 3)), 'float32')",
     'Array([], shape=(0, 3), dtype=float32)',
     '[]'),
    ("A(np.zeros((2, 0)), 'int32')",
     'Array([], shape=(2, 0), dtype=int32)',
     '[]'),
    ("A(np.zeros((0,)), 'int32')",
     'Array([], shape=(0,), dtype=int32)',
     '[]'),
    ("A([1.5, 2.25, -3.0], 'float32')",
     'Array([ 1.5 ,  2.25, -3.  ], dtype=float32)',
     '[ 1.5   2.25 -3.  ]'),
    ("A([1e-8, 1.0, 1e8], 'float32')",
     'Array([1.e-08, 1.e+00, 1.e+08], dtype=float32)',
     '[1.e-08 1.e+00 1.e+08]'),
    ("A([np.nan, np.inf, -np.inf], 'float32')",
     'Array([ nan,  inf, -inf], dtype=float32)',
     '[ nan  inf -inf]'),
    ('A([True, False], bool)',
     'Array([ True, False], dtype=bool)',
     '[ True False]'),
    ("A([1, 2], 'uint8')",
     'Array([1, 2], dtype=uint8)',
     '[1 2]'),
    ("A([1, 2], 'int8')",
     'Array([1, 2], dtype=int8)',
     '[1 2]'),
    ("A([1.5, 2], 'float16')",
     'Array([1.5, 2. ], dtype=float16)',
     '[1.5 2. ]'),
    ("A([1+2j, 3-4j], 'complex64')",
     'Array([1.+2.j, 3.-4.j], dtype=complex64)',
     '[1.+2.j 3.-4.j]'),
    ("A(np.arange(100), 'int32')",
     'Array([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16,\n'
     '       17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,\n'
     '       34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,\n'
     '       51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67,\n'
     '       68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84,\n'
     '       85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99],      dtype=int32)',
     '[ 0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23\n'
     ' 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47\n'
     ' 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71\n'
     ' 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95\n'
     ' 96 97 98 99]'),
    ("A(np.arange(2000), 'int32')",
     'Array([   0,    1,    2, ..., 1997, 1998, 1999], dtype=int32)',
     '[   0    1    2 ... 1997 1998 1999]'),
    ("A(np.arange(12.).reshape(3, 4) / 7, 'float32')",
     'Array([[0.        , 0.14285715, 0.2857143 , 0.42857143],\n'
     '       [0.5714286 , 0.71428573, 0.85714287, 1.        ],\n'
     '       [1.1428572 , 1.2857143 , 1.4285715 , 1.5714285 ]], dtype=float32)',
     '[[0.         0.14285715 0.2857143  0.42857143]\n'
     ' [0.5714286  0.71428573 0.85714287 1.        ]\n'
     ' [1.1428572  1.2857143  1.4285715  1.5714285 ]]'),
    ('jnp.zeros((2, 2)) + 1.5',
     'Array([[1.5, 1.5],\n'
     '       [1.5, 1.5]], dtype=float32)',
     '[[1.5 1.5]\n'
     ' [1.5 1.5]]'),
    ('jnp.arange(3) * 1.0',
     'Array([0., 1., 2.], dtype=float32, weak_type=True)',
     '[0. 1. 2.]'),
    ('jnp.ones(3) * W(2.0)',
     'Array([2., 2., 2.], dtype=float32)',
     '[2. 2. 2.]'),
    ('jnp.arange(3.0)',
     'Array([0., 1., 2.], dtype=float32)',
     '[0. 1. 2.]'),
    ("A([[1, 2], [3, 4]], 'int32') > 2",
     'Array([[False, False],\n'
     '       [ True,  True]], dtype=bool)',
     '[[False False]\n'
     ' [ True  True]]'),
    ("A([0.1, 0.2, 0.3], 'float32')",
     'Array([0.1, 0.2, 0.3], dtype=float32)',
     '[0.1 0.2 0.3]'),
    ("A([123456789, 1], 'int32')",
     'Array([123456789,         1], dtype=int32)',
     '[123456789         1]'),
    ("A([-1, 1], 'int32')",
     'Array([-1,  1], dtype=int32)',
     '[-1  1]'),
    ("A(np.arange(4).reshape(1,2,2,1), 'int32')",
     'Array([[[[0],\n'
     '         [1]],\n'
     '\n'
     '        [[2],\n'
     '         [3]]]], dtype=int32)',
     '[[[[0]\n'
     '   [1]]\n'
     '\n'
     '  [[2]\n'
     '   [3]]]]'),
    ('W(2) + 1',
     'Array(3, dtype=int32, weak_type=True)',
     '3'),
    ('jnp.full((2, 2), 3)',
     'Array([[3, 3],\n'
     '       [3, 3]], dtype=int32, weak_type=True)',
     '[[3 3]\n'
     ' [3 3]]'),
    ("A([1., 2.], 'float32').at[0].set(3)",
     'Array([3., 2.], dtype=float32)',
     '[3. 2.]'),
    ("A(np.arange(60).reshape(3, 4, 5) * 1000, 'int32')",
     'Array([[[    0,  1000,  2000,  3000,  4000],\n'
     '        [ 5000,  6000,  7000,  8000,  9000],\n'
     '        [10000, 11000, 12000, 13000, 14000],\n'
     '        [15000, 16000, 17000, 18000, 19000]],\n'
     '\n'
     '       [[20000, 21000, 22000, 23000, 24000],\n'
     '        [25000, 26000, 27000, 28000, 29000],\n'
     '        [30000, 31000, 32000, 33000, 34000],\n'
     '        [35000, 36000, 37000, 38000, 39000]],\n'
     '\n'
     '       [[40000, 41000, 42000, 43000, 44000],\n'
     '        [45000, 46000, 47000, 48000, 49000],\n'
     '        [50000, 51000, 52000, 53000, 54000],\n'
     '        [55000, 56000, 57000, 58000, 59000]]], dtype=int32)',
     '[[[    0  1000  2000  3000  4000]\n'
     '  [ 5000  6000  7000  8000  9000]\n'
     '  [10000 11000 12000 13000 14000]\n'
     '  [15000 16000 17000 18000 19000]]\n'
     '\n'
     ' [[20000 21000 22000 23000 24000]\n'
     '  [25000 26000 27000 28000 29000]\n'
     '  [30000 31000 32000 33000 34000]\n'
     '  [35000 36000 37000 38000 39000]]\n'
     '\n'
     ' [[40000 41000 42000 43000 44000]\n'
     '  [45000 46000 47000 48000 49000]\n'
     '  [50000 51000 52000 53000 54000]\n'
     '  [55000 56000 57000 58000 59000]]]'),
]


@pytest.mark.parametrize("expr, expected_repr, expected_str", REPRS)
def test_repr_and_str_match_jax(expr, expected_repr, expected_str):
    x = eval(expr, NAMESPACE)
    assert repr(x) == expected_repr
    assert str(x) == expected_str


def test_format():
    assert f"{W(2.5):.2f}" == "2.50"
    assert f"{A(7, 'int32'):04d}" == "0007"
    assert format(X) == "[1 2 3]"
    with pytest.raises(TypeError):
        format(X, ".2f")


# -------------------------------------------------------------------------- metadata

def test_metadata():
    x = A(np.arange(24).reshape(2, 3, 4), "float32")
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.size == 24
    assert x.dtype == np.float32 and not x.weak_type
    assert x.itemsize == 4 and x.nbytes == 96
    assert W(2.0).weak_type and W(2.0).shape == () and W(2.0).size == 1
    assert not W(True).weak_type
    check(x.T, np.arange(24).reshape(2, 3, 4).T, "float32", False)
    check(x.mT, np.swapaxes(np.arange(24).reshape(2, 3, 4), -1, -2), "float32", False)
    check(C.real, [1, 3], "float32", False)
    check(C.imag, [2, -1], "float32", False)
    check(F.imag, [0, 0, 0], "float32", False)
    check(W(2.0).real, 2.0, "float32", True)
    assert x.aval.shape == (2, 3, 4)
    assert x.block_until_ready() is x
    assert X.device in X.devices()


def test_item_and_tolist():
    assert W(5).item() == 5 and type(W(5).item()) is int
    assert A([1.5, 2.5], "float32").item(1) == 2.5
    assert A([[1, 2], [3, 4]], "int32").tolist() == [[1, 2], [3, 4]]
    assert W(2.5).tolist() == 2.5
    with pytest.raises(ValueError):
        X.item()


def test_dlpack_round_trip():
    x = A(np.arange(6).reshape(2, 3), "float32")
    back = np.from_dlpack(x)
    np.testing.assert_array_equal(back, np.arange(6).reshape(2, 3))
    assert back.dtype == np.float32
    assert x.__dlpack_device__() == (1, 0)
    strided = x[:, ::2]
    np.testing.assert_array_equal(np.from_dlpack(strided), [[0, 2], [3, 5]])


def test_pickle_round_trip_keeps_dtype_and_weak_type():
    for x in [X, W(2.5), A(np.zeros((0, 3)), "int8"), C, B]:
        y = pickle.loads(pickle.dumps(x))
        assert isinstance(y, Array)
        assert y.dtype == x.dtype and y.weak_type == x.weak_type and y.shape == x.shape
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


# ---------------------------------------------------------------- len and iteration

def test_len_and_iteration():
    m = A([[1, 2], [3, 4]], "int32")
    assert len(m) == 2
    rows = list(m)
    assert all(isinstance(r, Array) for r in rows)
    check(rows[1], [3, 4], "int32", False)
    items = list(A([1.5, 2.5], "float32"))
    check(items[0], 1.5, "float32", False)
    assert repr(items[0]) == "Array(1.5, dtype=float32)"
    weak_rows = list(jnp.zeros((2, 2)) + 1.5)
    assert weak_rows[0].dtype == np.float32
    check(list(reversed(X))[0], 3, "int32", False)
    assert list(A(np.zeros((0, 2)), "float32")) == []
    with pytest.raises(TypeError, match="len\\(\\) of unsized object"):
        len(W(3))
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        iter(W(3))


# ------------------------------------------------------------------------ conversions

def test_scalar_conversions():
    assert bool(A([1], "int32")) is True
    assert bool(W(0.0)) is False
    assert int(W(3.7)) == 3
    assert float(W(3)) == 3.0
    assert complex(W(3)) == 3 + 0j
    assert int(A(7, "uint8")) == 7
    assert A(3, "int32").__index__() == 3
    assert [10, 20, 30][A(1, "int32")] == 20
    assert list(range(10))[A(2, "int32"):A(4, "int32")] == [2, 3]


CONVERSION_ERRORS = [
    (lambda: bool(A([1, 2], "int32")), ValueError,
     "The truth value of an array with more than one element is ambiguous"),
    (lambda: bool(A([], "int32")), ValueError,
     "The truth value of an empty array is ambiguous. Use `array.size > 0`"),
    (lambda: int(A([2.5], "float32")), TypeError,
     "Only scalar arrays can be converted to Python scalars; got arr.ndim=1"),
    (lambda: int(A([[7]], "int32")), TypeError,
     "Only scalar arrays can be converted to Python scalars; got arr.ndim=2"),
    (lambda: float(A([1, 2], "int32")), TypeError, "Only scalar arrays can be converted"),
    (lambda: complex(A([1, 2], "int32")), TypeError, "Only scalar arrays can be converted"),
    (lambda: int(A([], "int32")), TypeError, "Only scalar arrays can be converted"),
    (lambda: W(1 + 2j).__index__(), TypeError,
     "(?i)only integer scalar arrays can be converted to a scalar index"),
    (lambda: A(3.0, "float32").__index__(), TypeError,
     "(?i)only integer scalar arrays can be converted to a scalar index"),
    (lambda: A([3], "int32").__index__(), TypeError,
     "(?i)only integer scalar arrays can be converted to a scalar index"),
    (lambda: A(True).__index__(), TypeError,
     "(?i)only integer scalar arrays can be converted to a scalar index"),
]


@pytest.mark.parametrize("expr, exc, match", CONVERSION_ERRORS)
def test_conversion_errors(expr, exc, match):
    with pytest.raises(exc, match=match):
        expr()


# -------------------------------------------------------------------------- operators

# (expression, (value, dtype, weak_type) or a list of them), recorded from JAX 0.10.2.
OPERATORS = [
    ('X + 1', ([2, 3, 4], 'int32', False)),
    ('X + 1.5', ([2.5, 3.5, 4.5], 'float32', True)),
    ('1.5 + X', ([2.5, 3.5, 4.5], 'float32', True)),
    ('I8 + 1', ([2, 3, 4], 'int8', False)),
    ('I8 * 2.0', ([2.0, 4.0, 6.0], 'float32', True)),
    ('I8 + np.int32(1)', ([2, 3, 4], 'int32', False)),
    ('I8 + np.array([1, 2, 3])', ([2, 4, 6], 'int32', False)),
    ('np.array([1, 2, 3]) + I8', ([2, 4, 6], 'int32', False)),
    ('np.float32(2) * I8', ([2.0, 4.0, 6.0], 'float32', False)),
    ('X + F', ([2.5, 4.0, 6.0], 'float32', False)),
    ('F + X', ([2.5, 4.0, 6.0], 'float32', False)),
    ('W(1) + W(2.0)', (3.0, 'float32', True)),
    ('W(1) + 2', (3, 'int32', True)),
    ('2 - W(1.5)', (0.5, 'float32', True)),
    ('W(2.0) * F', ([3.0, 4.0, 6.0], 'float32', False)),
    ('X - 1', ([0, 1, 2], 'int32', False)),
    ('5 - X', ([4, 3, 2], 'int32', False)),
    ('X * True', ([1, 2, 3], 'int32', False)),
    ('X / 2', ([0.5, 1.0, 1.5], 'float32', False)),
    ('2 / X', ([2.0, 1.0, 0.6666666865348816], 'float32', False)),
    ('X // 2', ([0, 1, 1], 'int32', False)),
    ('-7 // X', ([-7, -4, -3], 'int32', False)),
    ('X % 2', ([1, 0, 1], 'int32', False)),
    ('7 % X', ([0, 1, 1], 'int32', False)),
    ('X ** 2', ([1, 4, 9], 'int32', False)),
    ('2 ** X', ([2, 4, 8], 'int32', False)),
    ('F ** 0.5', ([1.2247449159622192, 1.4142135381698608, 1.7320507764816284], 'float32', False)),
    ('M @ V', ([3.0, 7.0], 'float32', False)),
    ("np.ones((2, 2), 'float32') @ V", ([2.0, 2.0], 'float32', False)),
    ('V @ M', ([4.0, 6.0], 'float32', False)),
    ('X & 3', ([1, 2, 3], 'int32', False)),
    ('6 | X', ([7, 6, 7], 'int32', False)),
    ('X ^ X', ([0, 0, 0], 'int32', False)),
    ('X << 2', ([4, 8, 12], 'int32', False)),
    ('1 << X', ([2, 4, 8], 'int32', False)),
    ('X >> 1', ([0, 1, 1], 'int32', False)),
    ('~X', ([-2, -3, -4], 'int32', False)),
    ('~B', ([False, True], 'bool', False)),
    ('-U8', ([255, 254], 'uint8', False)),
    ('-F', ([-1.5, -2.0, -3.0], 'float32', False)),
    ('+X', ([1, 2, 3], 'int32', False)),
    ("abs(A([-1, 2], 'int32'))", ([1, 2], 'int32', False)),
    ('abs(W(-2.5))', (2.5, 'float32', True)),
    ('X == 2', ([False, True, False], 'bool', False)),
    ('X != 2', ([True, False, True], 'bool', False)),
    ("X < A([3, 2, 1], 'int32')", ([True, False, False], 'bool', False)),
    ('2 <= X', ([False, True, True], 'bool', False)),
    ('X > np.array([0, 5, 1])', ([True, False, True], 'bool', False)),
    ('F >= 2', ([False, True, True], 'bool', False)),
    ('B == True', ([True, False], 'bool', False)),
    ('divmod(X, 2)', [([0, 1, 1], 'int32', False), ([1, 0, 1], 'int32', False)]),
    ('divmod(7, X)', [([7, 3, 2], 'int32', False), ([0, 1, 1], 'int32', False)]),
    ('round(W(2.5))', (2, 'int32', False)),
    ('round(W(3.5))', (4, 'int32', False)),
    ("round(A([1.5, 2.5], 'float32'))", ([2, 2], 'int32', False)),
    ("round(A(2.5, 'float32'), 0)", (2.0, 'float32', False)),
    ('F.sum()', (6.5, 'float32', False)),
    ('M.sum(axis=0)', ([4.0, 6.0], 'float32', False)),
    ('X.mean()', (2.0, 'float32', False)),
    ('F.max()', (3.0, 'float32', False)),
    ('F.min()', (1.5, 'float32', False)),
    ('M.argmax(axis=1)', ([1, 1], 'int32', False)),
    ('X.reshape(3, 1)', ([[1], [2], [3]], 'int32', False)),
    ('X.reshape((1, 3))', ([[1, 2, 3]], 'int32', False)),
    ('X.reshape(-1, 1)', ([[1], [2], [3]], 'int32', False)),
    ("X.astype('float32')", ([1.0, 2.0, 3.0], 'float32', False)),
    ('X.astype(float)', ([1.0, 2.0, 3.0], 'float32', False)),
    ("F.astype('int32')", ([1, 2, 3], 'int32', False)),
    ("W(2).astype('float32')", (2.0, 'float32', False)),
    ('M.transpose()', ([[1.0, 3.0], [2.0, 4.0]], 'float32', False)),
    ('M.T', ([[1.0, 3.0], [2.0, 4.0]], 'float32', False)),
    ('M.ravel()', ([1.0, 2.0, 3.0, 4.0], 'float32', False)),
    ('M.flatten()', ([1.0, 2.0, 3.0, 4.0], 'float32', False)),
    ("A(np.arange(3).reshape(1, 3, 1), 'int32').squeeze()", ([0, 1, 2], 'int32', False)),
    ("A(np.arange(3).reshape(1, 3, 1), 'int32').squeeze(0)", ([[0], [1], [2]], 'int32', False)),
    ('X.clip(2, 8)', ([2, 2, 3], 'int32', False)),
    ('X.clip(max=2)', ([1, 2, 2], 'int32', False)),
    ('F.round()', ([2.0, 2.0, 3.0], 'float32', False)),
    ('F.dot(F)', (15.25, 'float32', False)),
    ('C.real', ([1.0, 3.0], 'float32', False)),
    ('C.imag', ([2.0, -1.0], 'float32', False)),
    ('F.real', ([1.5, 2.0, 3.0], 'float32', False)),
    ('F.imag', ([0.0, 0.0, 0.0], 'float32', False)),
    ('W(2.0).real', (2.0, 'float32', True)),
    ('C.conj()', (['(1-2j)', '(3+1j)'], 'complex64', False)),
    ("A([3, 1, 2], 'int32').sort()", ([1, 2, 3], 'int32', False)),
    ("A([3, 1, 2], 'int32').argsort()", ([1, 2, 0], 'int32', False)),
    ('M.trace()', (5.0, 'float32', False)),
    ('M.diagonal()', ([1.0, 4.0], 'float32', False)),
    ('X.cumsum()', ([1, 3, 6], 'int32', False)),
    ('X.prod()', (6, 'int32', False)),
    ('M.std()', (1.1180340051651, 'float32', False)),
    ('M.var(axis=0)', ([1.0, 1.0], 'float32', False)),
    ('B.all()', (False, 'bool', False)),
    ('B.any()', (True, 'bool', False)),
    ('X.take(A([0, 2]))', ([1, 3], 'int32', False)),
    ('X.repeat(2)', ([1, 1, 2, 2, 3, 3], 'int32', False)),
    ("A([3, 1, 2], 'int32').ptp()", (2, 'int32', False)),
    ("A([1, 3, 5], 'int32').searchsorted(4)", (2, 'int32', False)),
    ('X.copy()', ([1, 2, 3], 'int32', False)),
    ('X.nonzero()', [([0, 1, 2], 'int32', False)]),
    ('M.swapaxes(0, 1)', ([[1.0, 3.0], [2.0, 4.0]], 'float32', False)),
    ('X.argmin()', (0, 'int32', False)),
    ('F.var()', (0.3888888657093048, 'float32', False)),
    ('M.cumprod(axis=1)', ([[1.0, 2.0], [3.0, 12.0]], 'float32', False)),
    ('X.conjugate()', ([1, 2, 3], 'int32', False)),
    ('W(3).T', (3, 'int32', True)),

]


@pytest.mark.parametrize("expr, expected", OPERATORS)
def test_operators_and_methods_match_jax(expr, expected):
    got = eval(expr, NAMESPACE)
    if isinstance(expected, list):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            check(g, *e)
    else:
        check(got, *expected)


@pytest.mark.xfail(reason="kiln.numpy comparisons do not yet give weakly typed bools when the "
                          "promoted operands are weak (JAX 0.10.2 does)", strict=False)
@pytest.mark.parametrize("expr, expected", [
    ("X != 2.5", ([True, True, True], "bool", True)),
    ("X < 2.5", ([True, True, False], "bool", True)),
    ("A(2, 'int32') == 2.0", (True, "bool", True)),
])
def test_weak_comparisons_match_jax(expr, expected):
    check(eval(expr, NAMESPACE), *expected)


@pytest.mark.parametrize("expr, expected", [
    ("round(A([2.567, 1.234], 'float32'), 1)", ([2.6000001430511475, 1.2000000476837158],
                                                "float32", False)),
    ("A([1.26, 5.55], 'float32').round(1)", ([1.3000000715255737, 5.599999904632568],
                                            "float32", False)),
])
def test_round_with_decimals_matches_jax_bits(expr, expected):
    got = eval(expr, NAMESPACE)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected[0], np.float32))


UNSUPPORTED = [
    lambda: X + [1, 2, 3],
    lambda: [1, 2, 3] + X,
    lambda: X * (1, 2, 3),
    lambda: [1, 2] * A(3, "int32"),
    lambda: (1, 2) * A(3, "int32"),
    lambda: X + "a",
    lambda: X + None,
    lambda: X - {1: 2},
    lambda: X < [1, 2, 3],
    lambda: X == [1, 2, 3],
    lambda: X @ [1, 2, 3],
    lambda: X & {1},
]


@pytest.mark.parametrize("expr", UNSUPPORTED)
def test_unsupported_operand_types_are_type_errors(expr):
    with pytest.raises(TypeError):
        expr()


def test_comparison_with_none_is_python_identity():
    assert (X == None) is False  # noqa: E711
    assert (X != None) is True  # noqa: E711


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(st.sampled_from([np.int32, np.float32]), hnp.array_shapes(min_dims=0,
                                                                            max_dims=3,
                                                                            min_side=0,
                                                                            max_side=4),
                  elements=st.integers(-20, 20)),
       st.integers(1, 5))
def test_operators_against_numpy(x, k):
    kx = to_array(x)
    for got, expected in [(kx + k, x + k), (k - kx, k - x), (kx * kx, x * x),
                          (kx // k, x // k), (kx % k, x % k), (-kx, -x), (abs(kx), abs(x)),
                          (kx < k, x < k), (k >= kx, k >= x), (kx == kx, x == x)]:
        assert got.shape == expected.shape
        np.testing.assert_array_equal(np.asarray(got), expected.astype(got.dtype))


def test_array_priority_beats_numpy_operators():
    out = np.arange(3, dtype=np.int8) + I8
    assert isinstance(out, Array)
    out = np.float32(2.0) * X
    assert isinstance(out, Array) and out.dtype == np.float32


# ------------------------------------------------------------------- forwarded methods

def test_method_keyword_forms():
    x = A(np.arange(24).reshape(2, 3, 4), "int32")
    assert x.reshape(4, 6).shape == (4, 6)
    assert x.reshape((4, -1)).shape == (4, 6)
    assert x.transpose(2, 0, 1).shape == (4, 2, 3)
    assert x.transpose((1, 0, 2)).shape == (3, 2, 4)
    assert x.transpose().shape == (4, 3, 2)
    assert x.sum(axis=(0, 2), keepdims=True).shape == (1, 3, 1)
    assert x.max(axis=-1).shape == (2, 3)
    assert x.astype(jnp.float32).dtype == np.float32
    assert x.squeeze().shape == (2, 3, 4)
    check(A([[1.26], [5.55]], "float32").squeeze(axis=1).round(), [1.0, 6.0], "float32", False)
