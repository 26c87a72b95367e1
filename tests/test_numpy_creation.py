"""kiln.numpy array creation: array/asarray, filled arrays, ranges, eye/tri, meshgrid.

Values are compared with NumPy (hypothesis over shapes with 0- and 1-sized axes, dtypes and
arguments); dtypes and weak types are compared with tables recorded from JAX 0.10.2 with
x64 off (and a few with x64 on); every error path is asserted with its message.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kiln.numpy as jnp
from kiln.array import Array

DTYPES = ["bool", "int32", "uint8", "float32", "float16"]
FEW = settings(max_examples=25, deadline=None)

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def check(out, expected, dtype, weak=False, rtol=0.0, atol=0.0):
    """`out` is an Array with the given dtype and weak type whose values equal `expected`."""
    assert isinstance(out, Array), type(out)
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    assert out.weak_type == weak, (out.weak_type, weak)
    expected = np.asarray(expected)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    if rtol or atol:
        np.testing.assert_allclose(np.asarray(out, dtype=np.complex128 if expected.dtype.kind
                                              == "c" else np.float64),
                                   expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(np.asarray(out), expected.astype(out.dtype))


# ----------------------------------------------------------------------- array / asarray

# (expression, dtype, weak_type) recorded from JAX 0.10.2 (x64 off).
ARRAY_TYPES = [
    ("jnp.array(1.0)", "float32", True),
    ("jnp.array(1)", "int32", True),
    ("jnp.array(True)", "bool", False),
    ("jnp.array(1j)", "complex64", True),
    ("jnp.array([1.0])", "float32", False),
    ("jnp.array([1, 2.0])", "float32", False),
    ("jnp.array([])", "float32", False),
    ("jnp.array([[]])", "float32", False),
    ("jnp.array(np.float64(1))", "float32", False),
    ("jnp.array(np.arange(3))", "int32", False),
    ("jnp.array(1.0, dtype=jnp.float16)", "float16", False),
    ("jnp.array(1.0, ndmin=2)", "float32", True),
    ("jnp.array([jnp.array(1.0), 2])", "float32", False),
    ("jnp.array([jnp.array(1.0, dtype='float16'), 2])", "float16", False),
    ("jnp.array([jnp.array(1, dtype='uint8'), 2])", "uint8", False),
    ("jnp.array([jnp.array(1, dtype='uint8'), np.int8(2)])", "int16", False),
    ("jnp.array([np.int8(1), 2])", "int8", False),
    ("jnp.array([np.int8(1), 2.5])", "float32", False),
    ("jnp.array(jnp.asarray(1.0))", "float32", True),
    ("jnp.array([True, 2])", "int32", False),
    ("jnp.array(1, dtype=float)", "float32", False),
    ("jnp.array(1, dtype='f')", "float32", False),
    ("jnp.array(1, dtype=np.float64)", "float32", False),
    ("jnp.array(1, dtype=jnp.int64)", "int32", False),
    ("jnp.array(complex(1, 0))", "complex64", True),
    ("jnp.asarray(1.0)", "float32", True),
    ("jnp.asarray(1.0, jnp.float32)", "float32", False),
    ("jnp.asarray([1, 2])", "int32", False),
    ("jnp.asarray(np.float64(2))", "float32", False),
    ("jnp.asarray(jnp.asarray(2.0))", "float32", True),
    ("jnp.array(bytearray(b'abc'))", "uint8", False),
    ("jnp.array(range(3))", "int32", False),
    ("jnp.array(np.bool_(True))", "bool", False),
    ("jnp.array(np.uint64(2**63))", "uint32", False),
    ("jnp.array([jnp.zeros(2), [1, 2]])", "float32", False),
    ("jnp.array([jnp.asarray(1.0), 1.0])", "float32", False),
    ("jnp.array(1, ndmin=-1)", "int32", True),
    ("jnp.array([np.float16(2), 1])", "float16", False),
    ("jnp.array([np.float16(2), jnp.asarray(1.0)])", "float16", False),
    ("jnp.float32(3)", "float32", False),
    ("jnp.copy(1.0)", "float32", True),
    ("jnp.copy(jnp.asarray(1.0))", "float32", True),
    ("jnp.copy(np.arange(3))", "int32", False),
]


@pytest.mark.parametrize("expr,dtype,weak", ARRAY_TYPES)
def test_array_dtypes_match_jax(expr, dtype, weak):
    out = eval(expr)
    assert out.dtype == np.dtype(dtype) and out.weak_type == weak


def test_array_values_and_shapes():
    check(jnp.array([[1, 2], [3, 4]], dtype=jnp.float16), [[1, 2], [3, 4]], "float16")
    check(jnp.array(jnp.arange(3), ndmin=2), [[0, 1, 2]], "int32")
    check(jnp.array([1], ndmin=3), [[[1]]], "int32")
    check(jnp.array([jnp.arange(3), np.arange(3)], dtype=jnp.uint8), [[0, 1, 2]] * 2, "uint8")
    check(jnp.array([[jnp.asarray(1.0)], [2]]), [[1.0], [2.0]], "float32")
    check(jnp.array([1.5], dtype=int), [1], "int32")
    check(jnp.array([1.0, 0.0], dtype=bool), [True, False], "bool")
    check(jnp.array(memoryview(b"ab")), [97, 98], "uint8")
    check(jnp.array([[], []]), np.zeros((2, 0)), "float32")
    check(jnp.array([], dtype=int), np.zeros(0), "int32")
    check(jnp.array(np.uint64(2**63)), 0, "uint32")
    check(jnp.asarray(3, dtype=bool), True, "bool")


def test_array_copies_host_data():
    host = np.arange(3.0, dtype=np.float32)
    for fn in (jnp.array, jnp.asarray):
        out = fn(host)
        host[0] = 10.0
        assert float(out[0]) == 0.0
        host[0] = 0.0


def test_asarray_returns_same_array():
    x = jnp.arange(3)
    assert jnp.asarray(x) is x
    assert jnp.array(x) is not x
    check(jnp.copy(x), [0, 1, 2], "int32")


def test_array_jax_array_protocol():
    class Wrapped:
        def __jax_array__(self):
            return jnp.arange(2.0)
    check(jnp.array(Wrapped()), [0.0, 1.0], "float32")
    check(jnp.array([Wrapped(), Wrapped()]), [[0.0, 1.0]] * 2, "float32")


scalars = st.one_of(st.booleans(), st.integers(-1000, 1000),
                    st.floats(-1e3, 1e3, allow_nan=False, width=32))


def _nested(shape):
    leaf = scalars
    for n in reversed(shape):
        leaf = st.lists(leaf, min_size=n, max_size=n)
    return leaf


def _python_kind(values):
    kinds = {type(v) for v in np.asarray(values, dtype=object).ravel().tolist()}
    if float in kinds:
        return "float32"
    if int in kinds:
        return "int32"
    return "bool" if kinds == {bool} else "float32"


@FEW
@given(st.data(), hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3))
def test_array_from_nested_lists(data, shape):
    values = data.draw(_nested(shape))
    expected_dtype = _python_kind(values)
    out = jnp.array(values)
    check(out, np.array(values, dtype=expected_dtype), expected_dtype)
    tup = jnp.asarray(tuple(values))
    check(tup, np.array(values, dtype=expected_dtype), expected_dtype)


@FEW
@given(scalars, st.sampled_from([None] + DTYPES))
def test_array_from_python_scalar(value, dtype):
    if type(value) is not bool and dtype == "uint8" and not 0 <= int(value) <= 255:
        with pytest.raises(OverflowError, match=f"Python integer {int(value)} out of bounds"):
            jnp.array(value, dtype=dtype)
        return
    out = jnp.array(value, dtype=dtype)
    if dtype is None:
        dtype = _python_kind([value])
        weak = type(value) is not bool
    else:
        weak = False
    check(out, np.array(value).astype(dtype), dtype, weak)


@FEW
@given(hnp.arrays(st.sampled_from(["bool", "int8", "uint8", "int64", "float16", "float64"]),
                  shapes))
def test_array_from_numpy(host):
    canonical = {"int64": "int32", "float64": "float32"}.get(host.dtype.name, host.dtype.name)
    with np.errstate(all="ignore"):
        check(jnp.array(host), host.astype(canonical), canonical)
        check(jnp.asarray(host, dtype="float32"), host.astype(np.float32), "float32")


def test_array_x64(x64):
    check(jnp.array(1), 1, "int64", weak=True)
    check(jnp.array([1.5, 2]), [1.5, 2], "float64")
    check(jnp.array(np.arange(3)), [0, 1, 2], "int64")


ARRAY_ERRORS = [
    ("jnp.array(None)", ValueError, "None is not a valid value for jnp.array"),
    ("jnp.array([1, None])", ValueError, "None is not a valid value"),
    ("jnp.array('a')", TypeError, "is not a valid kiln array type"),
    ("jnp.array(b'abc')", TypeError, "dtype |S3 is not a valid kiln array type"),
    ("jnp.array({})", TypeError, "Only arrays of numeric types"),
    ("jnp.array(np.array([1, 2], dtype=object))", TypeError, "dtype object"),
    ("jnp.array(1, dtype='foo')", TypeError, "data type 'foo' not understood"),
    ("jnp.array(1, dtype=object)", TypeError, "not a valid kiln array type"),
    ("jnp.array(1, dtype=str)", TypeError, "not a valid kiln array type"),
    ("jnp.array(1, dtype=jnp.zeros(1))", ValueError, "use dtype=arr.dtype"),
    ("jnp.array([[1], [2, 3]])", ValueError, "inhomogeneous shape"),
    ("jnp.array([jnp.zeros(2), jnp.ones(3)])", TypeError, "Cannot concatenate"),
    ("jnp.array([1], order='C')", NotImplementedError, "only order='K'"),
    ("jnp.asarray([1], order='F')", NotImplementedError, "only order='K'"),
    ("jnp.copy(jnp.arange(3.), order='C')", NotImplementedError, "only order='K'"),
    ("jnp.array(2**40)", OverflowError, "out of bounds for int32"),
    ("jnp.array([np.int8(1), 300])", OverflowError, "out of bounds for int8"),
    ("jnp.array(-1, dtype='uint8')", OverflowError, "out of bounds for uint8"),
    ("jnp.array(float('inf'), dtype=int)", OverflowError, "infinity"),
    ("jnp.copy([1])", TypeError, "copy requires ndarray or scalar arguments"),
]


@pytest.mark.parametrize("expr,exc,match", ARRAY_ERRORS)
def test_array_errors(expr, exc, match):
    with pytest.raises(exc) as info:
        eval(expr)
    assert match in str(info.value)


# ---------------------------------------------------------------------- filled arrays

@FEW
@given(shapes, st.sampled_from([None] + DTYPES + [int, float, bool, "i", jnp.int8]))
def test_zeros_ones_empty(shape, dtype):
    expected = {None: "float32", int: "int32", float: "float32", bool: "bool",
                "i": "int32"}.get(dtype, None) or np.dtype(jnp.dtype(dtype)).name
    check(jnp.zeros(shape, dtype), np.zeros(shape), expected)
    check(jnp.ones(shape, dtype), np.ones(shape), expected)
    check(jnp.empty(shape, dtype), np.zeros(shape), expected)
    check(jnp.zeros(list(shape), dtype), np.zeros(shape), expected)


@FEW
@given(shapes, st.sampled_from([1, 1.5, True, -2, np.float32(2.5), np.int8(-3)]),
       st.sampled_from([None] + DTYPES))
def test_full_scalar(shape, fill, dtype):
    out = jnp.full(shape, fill, dtype)
    if dtype is None:
        dtype = {bool: "bool", int: "int32", float: "float32"}.get(type(fill)) or \
            np.asarray(fill).dtype.name
        weak = type(fill) in (int, float)
    else:
        weak = False
    check(out, np.full(shape, np.asarray(fill).astype(dtype)), dtype, weak)


@FEW
@given(shapes, st.sampled_from(DTYPES))
def test_full_broadcasts_array_fill(shape, dtype):
    fill = np.arange(shape[-1] if shape else 1).astype(dtype).reshape(
        (shape[-1],) if shape else ())
    check(jnp.full(shape, fill), np.broadcast_to(fill, shape), dtype)
    check(jnp.full(shape, jnp.asarray(fill), "float32"),
          np.broadcast_to(fill, shape).astype(np.float32), "float32")


def test_full_dtypes_match_jax():
    check(jnp.full(3, 1.0), [1.0] * 3, "float32", weak=True)
    check(jnp.full(3, 1), [1] * 3, "int32", weak=True)
    check(jnp.full(3, True), [True] * 3, "bool")
    check(jnp.full(3, np.float64(1)), [1.0] * 3, "float32")
    check(jnp.full(3, jnp.asarray(1.0)), [1.0] * 3, "float32", weak=True)
    check(jnp.full(3, 300, jnp.uint8), [44] * 3, "uint8")
    check(jnp.full(3, 1.5, int), [1] * 3, "int32")
    check(jnp.zeros(jnp.array([2, 3])), np.zeros((2, 3)), "float32")
    check(jnp.zeros(jnp.array(3)), np.zeros(3), "float32")
    check(jnp.zeros(True), np.zeros(1), "float32")


PROTOS = [jnp.arange(6.0).reshape(2, 3), jnp.asarray(2.0), jnp.asarray(3), np.ones(2), 1.5, 3,
          True, jnp.arange(3) > 0, np.float64(2)]
# (dtype, weak) of zeros_like(proto) for each PROTOS entry, recorded from JAX 0.10.2.
PROTO_TYPES = [("float32", False), ("float32", True), ("int32", True), ("float32", False),
               ("float32", True), ("int32", True), ("bool", False), ("bool", False),
               ("float32", False)]


@pytest.mark.parametrize("proto,expected", list(zip(PROTOS, PROTO_TYPES)))
def test_like_functions_keep_dtype_and_weak_type(proto, expected):
    dtype, weak = expected
    shape = np.shape(proto)
    check(jnp.zeros_like(proto), np.zeros(shape), dtype, weak)
    check(jnp.ones_like(proto), np.ones(shape), dtype, weak)
    check(jnp.empty_like(proto), np.zeros(shape), dtype, weak)
    check(jnp.full_like(proto, 2), np.full(shape, 2), dtype, weak)


@FEW
@given(hnp.arrays(st.sampled_from(DTYPES), shapes), st.sampled_from([None] + DTYPES),
       st.one_of(st.none(), shapes))
def test_like_functions_with_overrides(proto, dtype, shape):
    x = jnp.asarray(proto)
    out_shape = x.shape if shape is None else shape
    out_dtype = x.dtype if dtype is None else dtype
    check(jnp.zeros_like(x, dtype, shape), np.zeros(out_shape), out_dtype)
    check(jnp.ones_like(x, dtype=dtype, shape=shape), np.ones(out_shape), out_dtype)
    check(jnp.empty_like(x, dtype, shape), np.zeros(out_shape), out_dtype)
    check(jnp.full_like(x, 1.7, dtype, shape), np.full(out_shape, np.asarray(1.7, np.float32)
                                                        .astype(out_dtype)), out_dtype)


def test_full_like_values_match_jax():
    x = jnp.arange(6.0).reshape(2, 3)
    check(jnp.full_like(x.astype(int), 1.7), np.ones((2, 3)), "int32")
    check(jnp.full_like(x.astype(jnp.uint8), 300), np.full((2, 3), 44), "uint8")
    check(jnp.full_like(x.astype(jnp.uint8), -1), np.full((2, 3), 255), "uint8")
    check(jnp.full_like(jnp.asarray(1), 1.5), 1, "int32", weak=True)
    check(jnp.full_like(x, jnp.array([1, 2, 3])), [[1, 2, 3]] * 2, "float32")
    check(jnp.full_like(x, jnp.array([1, 2, 3]), int, (4, 3)), [[1, 2, 3]] * 4, "int32")
    check(jnp.full_like(x > 0, 2), np.ones((2, 3)), "bool")
    check(jnp.ones_like(x, complex), np.ones((2, 3)), "complex64")


FILLED_ERRORS = [
    ("jnp.zeros(3.0)", TypeError, "shapes must be 1D sequences of concrete values of integer"),
    ("jnp.ones((3.0,))", TypeError, "got (3.0,)"),
    ("jnp.empty(None)", TypeError, "got (None,)"),
    ("jnp.zeros('3')", TypeError, "integer type"),
    ("jnp.zeros(np.ones((2, 2)))", TypeError, "integer type"),
    ("jnp.zeros(i for i in [2])", TypeError, "expected sequence object with len >= 0"),
    ("jnp.zeros(-1)", ValueError, "negative dimensions are not allowed"),
    ("jnp.ones((2, -1))", ValueError, "got shape (2, -1)"),
    ("jnp.full(-1, 0)", ValueError, "negative dimensions"),
    ("jnp.zeros_like(jnp.ones(2), shape=-1)", ValueError, "negative dimensions"),
    ("jnp.zeros_like(jnp.ones(2), shape=2.0)", TypeError, "integer type"),
    ("jnp.zeros(3, 2)", TypeError, "Did you accidentally write `jax.numpy.zeros(3, 2)`"),
    ("jnp.empty(3, 2)", TypeError, "Cannot interpret '2' as a data type"),
    ("jnp.zeros(3, 'foo')", TypeError, "data type 'foo' not understood"),
    ("jnp.zeros(3, dtype=object)", TypeError, "not a valid kiln array type"),
    ("jnp.zeros(2, 'U')", TypeError, "not a valid kiln array type"),
    ("jnp.zeros(2, jnp.zeros(1))", ValueError, "instead of dtype=arr use dtype=arr.dtype"),
    ("jnp.zeros(2, 5.0)", TypeError, "not understood"),
    ("jnp.full((2, 3), [1, 2, 3])", TypeError, "full requires ndarray or scalar arguments"),
    ("jnp.full(3, None)", TypeError, "full requires ndarray or scalar arguments"),
    ("jnp.full((2, 3), np.array([1, 2]))", ValueError, "Incompatible shapes for broadcasting"),
    ("jnp.full(2.5, 0)", TypeError, "integer type"),
    ("jnp.zeros_like([1, 2])", TypeError, "zeros_like requires ndarray or scalar arguments"),
    ("jnp.empty_like([1, 2])", TypeError, "empty_like requires ndarray or scalar arguments"),
    ("jnp.full_like([1], 1)", TypeError, "at position 0"),
    ("jnp.full_like(jnp.ones(2), None)", TypeError, "at position 1"),
    ("jnp.full_like(jnp.asarray(2.0), jnp.array([1, 2, 3]))", ValueError,
     "fewer dimensions"),
    ("jnp.ones_like(jnp.ones(2), 'foo')", TypeError, "data type 'foo' not understood"),
]


@pytest.mark.parametrize("expr,exc,match", FILLED_ERRORS)
def test_filled_errors(expr, exc, match):
    with pytest.raises(exc) as info:
        eval(expr)
    assert match in str(info.value)


def test_filled_x64(x64):
    check(jnp.zeros(2), np.zeros(2), "float64")
    check(jnp.ones(2, int), np.ones(2), "int64")
    check(jnp.full(2, 1), [1, 1], "int64", weak=True)


# ---------------------------------------------------------------------------- arange

# (expression, dtype, values) recorded from JAX 0.10.2 (x64 off).
ARANGE_CASES = [
    ("jnp.arange(5)", "int32", [0, 1, 2, 3, 4]),
    ("jnp.arange(2.5)", "float32", [0, 1, 2]),
    ("jnp.arange(1, 5.5)", "float32", [1, 2, 3, 4, 5]),
    ("jnp.arange(5, 0, -1)", "int32", [5, 4, 3, 2, 1]),
    ("jnp.arange(-3)", "int32", []),
    ("jnp.arange(np.int8(1), 5)", "int8", [1, 2, 3, 4]),
    ("jnp.arange(np.float64(3))", "float32", [0, 1, 2]),
    ("jnp.arange(jnp.array(3, dtype='int8'))", "int8", [0, 1, 2]),
    ("jnp.arange(0.5, 3, dtype=int)", "int32", [0, 1, 2]),
    ("jnp.arange(0.5, 3.2, 0.7, dtype=int)", "int32", [0, 0, 0, 0]),
    ("jnp.arange(2**31 - 1, 2**31 + 2)", "int32", [2147483647, -2147483648, -2147483647]),
    ("jnp.arange(5, None, 2)", "int32", [0, 2, 4]),
    ("jnp.arange(1.5, 4, dtype=jnp.float16)", "float16", [1.5, 2.5, 3.5]),
    ("jnp.arange(0, 1, .25, dtype=jnp.float16)", "float16", [0, .25, .5, .75]),
    ("jnp.arange(np.uint8(3), 10, np.int8(2))", "int16", [3, 5, 7, 9]),
    ("jnp.arange(3, dtype=complex)", "complex64", [0, 1, 2]),
    ("jnp.arange(10, 0, -3.5)", "float32", [10, 6.5, 3]),
]


@pytest.mark.parametrize("expr,dtype,values", ARANGE_CASES)
def test_arange_matches_jax(expr, dtype, values):
    check(eval(expr), np.array(values), dtype)


@FEW
@given(st.integers(-20, 20), st.integers(-20, 20), st.sampled_from([None, 1, 2, 3, -1, -4]),
       st.sampled_from([None, "int32", "float32", "int8"]))
def test_arange_integers(start, stop, step, dtype):
    out = jnp.arange(start, stop, step, dtype=dtype)
    expected = np.arange(start, stop, 1 if step is None else step)
    if dtype is not None:
        expected = expected.astype(dtype)
    check(out, expected, dtype or "int32")


@FEW
@given(st.floats(-10, 10, width=32), st.floats(-10, 10, width=32),
       st.sampled_from([0.25, 0.5, 1.0, 1.5, -0.5, -1.25]))
def test_arange_floats(start, stop, step):
    out = jnp.arange(start, stop, step)
    n = max(0, int(np.ceil((stop - start) / step)))
    expected = np.float32(start) + np.float32(step) * np.arange(n, dtype=np.float32)
    check(out, expected, "float32", rtol=1e-6, atol=1e-5)


def test_arange_x64(x64):
    check(jnp.arange(3), [0, 1, 2], "int64")
    check(jnp.arange(1.0), [0], "float64")


ARANGE_ERRORS = [
    ("jnp.arange(0, 5, 0)", ZeroDivisionError, "step must not be zero"),
    ("jnp.arange(2, dtype=bool)", TypeError, "iota does not accept dtype bool"),
    ("jnp.arange(True)", TypeError, "does not accept dtype bool"),
    ("jnp.arange(np.array([5]))", ValueError, "arguments must be scalars; got stop=[5]"),
    ("jnp.arange(1, np.array([5]))", ValueError, "got stop=[5]"),
    ("jnp.arange([5])", TypeError, "arange requires ndarray, scalar, or None arguments"),
    ("jnp.arange(0, 5, [1])", TypeError, "at position 2"),
    ("jnp.arange(1j)", ValueError, "complex start/stop/step"),
    ("jnp.arange(None)", TypeError, "must be a scalar, got None"),
    ("jnp.arange(0, 5, dtype='foo')", TypeError, "data type 'foo' not understood"),
    ("jnp.arange(float('inf'))", OverflowError, "cannot compute the number of elements"),
    ("jnp.arange(float('nan'))", ValueError, "cannot convert float NaN"),
]


@pytest.mark.parametrize("expr,exc,match", ARANGE_ERRORS)
def test_arange_errors(expr, exc, match):
    with pytest.raises(exc) as info:
        eval(expr)
    assert match in str(info.value)


# -------------------------------------------------------------- linspace and friends

bounds = st.one_of(st.floats(-10, 10, width=32),
                   hnp.arrays("float32", hnp.array_shapes(min_dims=1, max_dims=2, max_side=3),
                              elements=st.floats(-10, 10, width=32)))


@FEW
@given(bounds, bounds, st.integers(0, 6), st.booleans(), st.data())
def test_linspace(start, stop, num, endpoint, data):
    try:
        ndim = np.broadcast(start, stop).ndim
    except ValueError:
        return
    axis = data.draw(st.integers(-ndim - 1, ndim))
    out, step = jnp.linspace(start, stop, num, endpoint=endpoint, retstep=True, axis=axis)
    ref, ref_step = np.linspace(np.float64(start), np.float64(stop), num, endpoint=endpoint,
                                retstep=True, axis=axis)
    check(out, ref, "float32", rtol=1e-5, atol=1e-5)
    assert step.dtype == np.float32
    if num > 1 or (num == 1 and not endpoint):
        np.testing.assert_allclose(np.asarray(step), ref_step, rtol=1e-5, atol=1e-5)
    else:
        assert np.isnan(np.asarray(step)).all()


def _linspace_ref(start, stop, num, dtype):
    """JAX's linspace formula, start * (1 - t) + stop * t then the endpoint, computed in
    `dtype` (float16 stays float16; everything else is computed in float32)."""
    f = np.float16 if dtype == "float16" else np.float32
    if num < 2:
        return np.full(num, start, f)
    t = np.arange(num - 1, dtype=f) / f(num - 1)
    return np.append(f(start) * (f(1) - t) + f(stop) * t, f(stop))


@FEW
@given(st.integers(-20, 20), st.integers(-20, 20), st.integers(0, 8),
       st.sampled_from(["int32", "uint8", "float16", "bool"]))
def test_linspace_dtype(start, stop, num, dtype):
    out = jnp.linspace(start, stop, num, dtype=dtype)
    ref = _linspace_ref(start, stop, num, dtype)
    if dtype in ("int32", "uint8"):
        ref = np.clip(np.floor(ref), 0 if dtype == "uint8" else -2**31, 2**31 - 1)  # saturates
    check(out, ref.astype(dtype), dtype)


def test_linspace_dtypes_match_jax():
    check(jnp.linspace(0, 1, 5), [0, .25, .5, .75, 1], "float32")
    check(jnp.linspace(jnp.float16(0), 1, 3), [0, .5, 1], "float16")
    check(jnp.linspace(jnp.int8(0), 1, 3), [0, .5, 1], "float32")
    check(jnp.linspace(np.float64(0), 1, 3), [0, .5, 1], "float32")
    check(jnp.linspace(0, 1j, 3), [0, .5j, 1j], "complex64")
    check(jnp.linspace(0, 1, 3, dtype=bool), [False, True, True], "bool")
    check(jnp.linspace(-1.5, 10, 4, dtype=int), [-2, 2, 6, 10], "int32")
    out, step = jnp.linspace(jnp.array([0.0, 1.0]), 2, 1, endpoint=False, retstep=True)
    check(out, [[0.0, 1.0]], "float32")
    check(step, [2.0, 1.0], "float32")


def test_linspace_x64(x64):
    check(jnp.linspace(0, 1, 3), [0, .5, 1], "float64")
    check(jnp.linspace(jnp.int8(0), 1, 3), [0, .5, 1], "float32")


@FEW
@given(st.floats(-3, 3, width=32), st.floats(-3, 3, width=32), st.integers(0, 6),
       st.booleans(), st.sampled_from([10.0, 2.0, 0.5]))
def test_logspace(start, stop, num, endpoint, base):
    out = jnp.logspace(start, stop, num, endpoint=endpoint, base=base)
    ref = np.logspace(start, stop, num, endpoint=endpoint, base=base)
    check(out, ref, "float32", rtol=2e-5)


@FEW
@given(st.floats(0.125, 100, width=32), st.floats(0.125, 100, width=32), st.integers(0, 6),
       st.booleans(), st.sampled_from([1.0, -1.0]))
def test_geomspace(start, stop, num, endpoint, sign):
    out = jnp.geomspace(sign * start, sign * stop, num, endpoint=endpoint)
    ref = np.geomspace(sign * np.float64(start), sign * np.float64(stop), num,
                       endpoint=endpoint)
    check(out, ref, "float32", rtol=2e-5)


def test_spaces_with_axes_and_dtypes():
    lo, hi = jnp.array([1.0, 2.0]), jnp.array([100.0, 200.0])
    check(jnp.geomspace(lo, hi, 3, axis=-1), [[1, 10, 100], [2, 20, 200]], "float32",
          rtol=1e-5)
    check(jnp.geomspace(1, 100, 3, dtype=int), [1, 10, 100], "int32")
    check(jnp.geomspace(1j, 100j, 3), [1j, 10j, 100j], "complex64", rtol=1e-5)
    check(jnp.logspace(jnp.array([0.0, 1.0]), 2, 3, axis=1),
          [[1, 10, 100], [10, 10 ** 1.5, 100]], "float32", rtol=1e-5)
    check(jnp.logspace(0, 2, 3, dtype=int), [1, 10, 100], "int32")
    check(jnp.logspace(jnp.float16(0), 2, 3), [1, 10, 100], "float16")


SPACE_ERRORS = [
    ("jnp.linspace(0, 1, -1)", ValueError, "Number of samples, -1, must be non-negative."),
    ("jnp.linspace(0, 1, 2.5)", TypeError, "cannot be interpreted as an integer"),
    ("jnp.linspace([0, 1], 2, 3)", TypeError, "linspace requires ndarray or scalar arguments"),
    ("jnp.linspace(jnp.zeros(2), 1, 3, axis=2)", ValueError,
     "axis 2 is out of bounds for array of dimension 2"),
    ("jnp.linspace(0, 1, 3, dtype='foo')", TypeError, "data type 'foo' not understood"),
    ("jnp.linspace(jnp.zeros(2), jnp.zeros(3), 3)", ValueError, "Incompatible shapes"),
    ("jnp.logspace([0], 2, 3)", TypeError, "logspace requires ndarray or scalar arguments"),
    ("jnp.logspace(0, 2, 3, base=jnp.array([2.0, 10.0]))", ValueError, "Incompatible shapes"),
    ("jnp.geomspace([1], 2, 3)", TypeError, "geomspace requires ndarray or scalar arguments"),
    ("jnp.geomspace(1, 100, 3, axis=1)", ValueError,
     "axis 1 is out of bounds for array of dimension 1"),
]


@pytest.mark.parametrize("expr,exc,match", SPACE_ERRORS)
def test_space_errors(expr, exc, match):
    with pytest.raises(exc) as info:
        eval(expr)
    assert match in str(info.value)


def test_geomspace_sign_change_is_nan():
    assert np.isnan(np.asarray(jnp.geomspace(1, -100, 3))).all()


# ------------------------------------------------------------ eye, identity, tri, grids

@FEW
@given(st.integers(0, 5), st.one_of(st.none(), st.integers(0, 5)), st.integers(-6, 6),
       st.sampled_from([None] + DTYPES))
def test_eye_and_tri(n, m, k, dtype):
    check(jnp.eye(n, m, k, dtype), np.eye(n, m, k), dtype or "float32")
    check(jnp.tri(n, m, k, dtype), np.tri(n, m, k), dtype or "float32")
    check(jnp.eye(n, m, k=jnp.array(k)), np.eye(n, m, k), "float32")
    check(jnp.identity(n, dtype), np.identity(n), dtype or "float32")


def test_eye_tri_x64(x64):
    check(jnp.eye(2), np.eye(2), "float64")
    check(jnp.tri(2), np.tri(2), "float32")  # JAX: tri defaults to float32 even with x64


def test_eye_huge_offset():
    check(jnp.eye(2, k=2**40), np.zeros((2, 2)), "float32")
    check(jnp.eye(3, 4, k=np.int8(1)), np.eye(3, 4, 1), "float32")


MATRIX_ERRORS = [
    ("jnp.eye(-1)", ValueError, "negative dimensions are not allowed"),
    ("jnp.eye(2, -1)", ValueError, "negative dimensions"),
    ("jnp.eye(2.0)", TypeError, "N must be an integer"),
    ("jnp.eye(2, 2.0)", TypeError, "M must be an integer"),
    ("jnp.eye(None)", TypeError, "must be an integer"),
    ("jnp.eye((2, 3))", TypeError, "must be an integer"),
    ("jnp.eye(2, k=1.0)", ValueError, "k must be a scalar integer"),
    ("jnp.eye(2, k=jnp.array([1]))", ValueError, "k must be a scalar integer"),
    ("jnp.eye(2, dtype='foo')", TypeError, "data type 'foo' not understood"),
    ("jnp.identity(-1)", ValueError, "negative dimensions"),
    ("jnp.identity(2, 'foo')", TypeError, "data type 'foo' not understood"),
    ("jnp.tri(-1)", ValueError, "negative dimensions"),
    ("jnp.tri(2.0)", TypeError, "N must be an integer"),
    ("jnp.tri(2, k=1.5)", TypeError, "k must be an integer"),
    ("jnp.meshgrid(jnp.arange(3.), copy=False)", ValueError, "only supports copy=True"),
    ("jnp.meshgrid(jnp.arange(3.), indexing='foo')", ValueError,
     "Valid values for indexing are 'xy' and 'ij', got foo"),
    ("jnp.meshgrid(jnp.ones((2, 2)))", ValueError, "must be 1D, got shapes [(2, 2)]"),
    ("jnp.meshgrid(1.0)", ValueError, "must be 1D"),
    ("jnp.meshgrid([1, 2])", TypeError, "meshgrid requires ndarray or scalar arguments"),
]


@pytest.mark.parametrize("expr,exc,match", MATRIX_ERRORS)
def test_matrix_errors(expr, exc, match):
    with pytest.raises(exc) as info:
        eval(expr)
    assert match in str(info.value)


@FEW
@given(st.lists(st.integers(0, 4), min_size=0, max_size=4), st.booleans(),
       st.sampled_from(["xy", "ij"]), st.sampled_from(DTYPES))
def test_meshgrid(sizes, sparse, indexing, dtype):
    xs = [np.arange(n).astype(dtype) for n in sizes]
    out = jnp.meshgrid(*map(jnp.asarray, xs), sparse=sparse, indexing=indexing)
    ref = np.meshgrid(*xs, sparse=sparse, indexing=indexing)
    assert isinstance(out, list) and len(out) == len(ref)
    for o, r in zip(out, ref):
        check(o, r, dtype)
