"""Tests for NumPy indexing on `kiln.Array`: `x[idx]`, `x.at[idx].<op>(...)` and the index
helpers of `kiln.numpy` (`nonzero`, `select`, `choose`, `ix_`, `unravel_index`, ...).

In-bounds indexing is checked against NumPy on the same data with hypothesis-generated index
expressions (ints, negative ints, slices with any step, None, Ellipsis, integer arrays as kiln
arrays / NumPy arrays / lists, boolean masks, scalar booleans). Updates are checked against
NumPy's `ufunc.at` on copies. Out-of-bounds behaviour (clamped reads, dropped updates, modes),
dtype and weak-type rules and error messages are checked against values recorded from
JAX 0.10.2. A small fake trace checks that the traced-friendly paths never need concrete values.
"""
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln.numpy as jnp
from kiln import dispatch
from kiln.array import Array, to_array
from kiln.numpy import _indexing

SETTINGS = settings(max_examples=80, deadline=None)
DTYPES = (np.int32, np.float32, np.bool_, np.uint8)


def A(value, dtype=None):
    return to_array(np.asarray(value, dtype))


def data_for(shape, dtype):
    x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    if dtype == np.bool_:
        return x % 3 == 1
    return (x * 7 % 23 - (0 if dtype == np.uint8 else 5)).astype(dtype)


def check_same(got, expected, dtype=None, weak=False):
    assert isinstance(got, Array), type(got)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == (expected.dtype if dtype is None else np.dtype(dtype)), got.dtype
    assert got.weak_type == weak
    if got.dtype.kind == "f":
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(np.asarray(got), expected)


# ----------------------------------------------------------------- index expressions

SHAPES = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)
ADV_SHAPES = st.sampled_from([(2,), (3,), (1,), (2, 1), (1, 3), (0,)])


@st.composite
def scalar_ints(draw, n):
    i = draw(st.integers(-n, n - 1))
    form = draw(st.sampled_from(["py", "np32", "np64", "karr", "nparr"]))
    return {"py": i, "np32": np.int32(i), "np64": np.int64(i),
            "karr": A(i, np.int32), "nparr": np.asarray(i)}[form]


@st.composite
def int_arrays(draw, n, shape, in_tuple, lo=None, hi=None):
    lo = -n if lo is None else lo
    hi = n - 1 if hi is None else hi
    size = int(np.prod(shape))
    vals = np.asarray(draw(st.lists(st.integers(lo, hi), min_size=size, max_size=size)),
                      np.int32).reshape(shape)
    forms = ["karr", "nparr"] + (["list"] if in_tuple and size else [])
    form = draw(st.sampled_from(forms))
    return {"karr": to_array(vals), "nparr": vals, "list": vals.tolist()}[form]


@st.composite
def slices(draw, n):
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
    return slice(draw(bound), draw(bound), step)


@st.composite
def bool_masks(draw, shape):
    size = int(np.prod(shape))
    vals = np.asarray(draw(st.lists(st.booleans(), min_size=size, max_size=size)),
                      bool).reshape(shape)
    return draw(st.sampled_from([to_array(vals), vals]))


@st.composite
def entries_for(draw, shape, axes, adv_shape, allow_bool, in_tuple):
    out, k = [], 0
    while k < len(axes):
        if draw(st.integers(0, 6)) == 0:
            out.append(draw(st.sampled_from([None, None, True, False] if allow_bool else [None])))
        n = shape[axes[k]]
        kinds = ["slice", "slice"] + (["int", "int", "intarr"] if n else [])
        kinds += ["bool"] if allow_bool else []
        kind = draw(st.sampled_from(kinds))
        if kind == "slice":
            out.append(draw(slices(n)))
        elif kind == "int":
            out.append(draw(scalar_ints(n)))
        elif kind == "intarr":
            sub = adv_shape[draw(st.integers(0, len(adv_shape))):]
            out.append(draw(int_arrays(n, sub, in_tuple)))
        else:
            width = 2 if k + 1 < len(axes) and draw(st.booleans()) else 1
            out.append(draw(bool_masks(tuple(shape[a] for a in axes[k:k + width]))))
            k += width - 1
        k += 1
    return out


@st.composite
def index_exprs(draw, shape, allow_bool=True):
    """A NumPy-style index for an array of `shape` (all integer indices in bounds)."""
    ndim = len(shape)
    m = draw(st.integers(0, ndim))
    adv_shape = draw(ADV_SHAPES)
    if draw(st.booleans()):
        before = draw(st.integers(0, m))
        head = draw(entries_for(shape, list(range(before)), adv_shape, allow_bool, True))
        tail = draw(entries_for(shape, list(range(ndim - (m - before), ndim)), adv_shape,
                                allow_bool, True))
        entries = head + [Ellipsis] + tail
    else:
        entries = draw(entries_for(shape, list(range(m)), adv_shape, allow_bool, True))
    if len(entries) == 1 and draw(st.booleans()) and not isinstance(entries[0], list):
        return entries[0]
    return tuple(entries)


def to_numpy_index(idx):
    if isinstance(idx, tuple):
        return tuple(to_numpy_index(i) for i in idx)
    return np.asarray(idx) if isinstance(idx, Array) else idx


def numpy_or_error(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return fn(), None
    except (IndexError, ValueError) as e:
        return None, e


# ------------------------------------------------------------------------ getitem

@SETTINGS
@given(st.data(), SHAPES, st.sampled_from(DTYPES))
def test_getitem_matches_numpy(data, shape, dtype):
    x = data_for(shape, dtype)
    idx = data.draw(index_exprs(shape))
    expected, err = numpy_or_error(lambda: x[to_numpy_index(idx)])
    if err is not None:
        with pytest.raises((IndexError, ValueError)):
            to_array(x)[idx]
        return
    check_same(to_array(x)[idx], expected)
    check_same(to_array(x).at[idx].get(), expected)


@SETTINGS
@given(st.data(), SHAPES.filter(lambda s: len(s) >= 1))
def test_getitem_static_paths_keep_weak_type(data, shape):
    x = data_for(shape, np.float32)
    weak = _indexing._as_type(to_array(x), np.dtype(np.float32), True)
    idx = data.draw(index_exprs(shape, allow_bool=False))
    expected, err = numpy_or_error(lambda: x[to_numpy_index(idx)])
    if err is None:
        check_same(weak[idx], expected, weak=True)


@settings(max_examples=60, deadline=None)
@given(st.data(), SHAPES.filter(lambda s: len(s) >= 1 and s[0] > 0), st.sampled_from(DTYPES))
def test_out_of_bounds_reads_clamp_and_fill(data, shape, dtype):
    x = data_for(shape, dtype)
    n = shape[0]
    idx = np.asarray(data.draw(st.lists(st.integers(-3 * n, 3 * n), min_size=0, max_size=5)),
                     np.int32)
    wrapped = np.where(idx < 0, idx + n, idx)
    clamped = x[np.clip(wrapped, 0, n - 1)]
    check_same(to_array(x)[to_array(idx)], clamped)
    check_same(to_array(x).at[to_array(idx)].get(mode="clip"), clamped)
    fill = {"i": np.iinfo(x.dtype).min if x.dtype.kind == "i" else 0, "f": np.nan,
            "u": np.iinfo(x.dtype).max if x.dtype.kind == "u" else 0, "b": True}[x.dtype.kind]
    inside = ((wrapped >= 0) & (wrapped < n)).reshape((-1,) + (1,) * (x.ndim - 1))
    filled = np.where(inside, clamped, np.asarray(fill, x.dtype))
    check_same(to_array(x).at[to_array(idx)].get(mode="fill"), filled)
    custom = np.where(inside, clamped, np.asarray(1, x.dtype))
    check_same(to_array(x).at[to_array(idx)].get(mode="fill", fill_value=1), custom)


# Recorded from JAX 0.10.2: (expression on x = arange(10) int32, expected value).
X10 = A(np.arange(10), np.int32)
JAX_READS = [
    (lambda: X10[11], 9),
    (lambda: X10[-11], 0),
    (lambda: X10[A(11, np.int32)], 9),
    (lambda: X10[A(-11, np.int32)], 0),
    (lambda: X10[A([11, -11, -1, 3], np.int32)], [9, 0, 9, 3]),
    (lambda: X10.at[11].get(), 9),
    (lambda: X10.at[11].get(mode="clip"), 9),
    (lambda: X10.at[11].get(mode="fill"), -2147483648),
    (lambda: X10.at[A([11, -11, 10, -10])].get(mode="fill"),
     [-2147483648, -2147483648, -2147483648, 0]),
    (lambda: X10.at[A([11, -11])].get(mode="fill", fill_value=-5), [-5, -5]),
    (lambda: X10.at[A([11, -11])].get(mode="drop", fill_value=-5), [-5, -5]),
    (lambda: X10.at[A([11, -11])].get(mode="promise_in_bounds"), [9, 0]),
    (lambda: X10.at[0].get(fill_value=3), 0),
    (lambda: X10[5:2:-1], [5, 4, 3]),
    (lambda: X10[None, 3, None], [[3]]),
    (lambda: X10[True, [0, 1]], [0, 1]),
    (lambda: X10[[], ], np.zeros(0, np.int32)),
    (lambda: X10[A([], bool)], np.zeros(0, np.int32)),
    (lambda: X10[np.uint8(3)], 3),
    (lambda: X10[np.int64(-1)], 9),
    (lambda: X10[np.array(3)], 3),
    (lambda: X10[:A(3, np.int32)], [0, 1, 2]),
    (lambda: X10[[True, 1], ], [1, 1]),
    (lambda: A(np.arange(200), np.int32)[A([255], np.uint8)], [199]),
    (lambda: A(np.arange(10.), np.float32).at[A([20])].get(mode="fill", fill_value=7), [7.0]),
    (lambda: A(np.arange(10.), np.float32).at[A([20, 1])].get(mode="drop"), [np.nan, 1.0]),
    (lambda: A([1, 2], np.uint8).at[A([3, 1])].get(mode="fill"), [255, 2]),
    (lambda: A([True, False]).at[A([3, 1])].get(mode="fill"), [True, False]),
    (lambda: A(np.arange(6).reshape(2, 3), np.int32)[A([[True, False, True],
                                                        [False, False, True]])], [0, 2, 5]),
    (lambda: A(np.arange(6).reshape(2, 3), np.int32)[..., A([True, False, True])],
     [[0, 2], [3, 5]]),
    (lambda: A(np.zeros((0, 3)), np.float32)[A([], np.int32)], np.zeros((0, 3), np.float32)),
    (lambda: A(np.zeros((2, 0)), np.float32)[1], np.zeros((0,), np.float32)),
]


@pytest.mark.parametrize("expr, expected", JAX_READS)
def test_reads_recorded_from_jax(expr, expected):
    got = expr()
    expected = np.asarray(expected)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(got), expected.astype(got.dtype))


def test_weak_type_of_indexed_scalars():
    w = to_array(5)  # weak int32, as jnp.asarray(5)
    for got, shape in [(w[()], ()), (w[None], (1,)), (w[...], ()), (w[True], (1,)),
                       (w[False], (0,))]:
        assert got.shape == shape and got.dtype == np.int32 and got.weak_type


def test_scalar_bool_after_none_follows_numpy():
    # JAX 0.10.2 returns only x[0] here (a bug in its scalar-bool handling); kiln follows NumPy.
    x = np.arange(24).reshape(2, 3, 4)
    check_same(to_array(x)[None, True], x[None, True], dtype=to_array(x).dtype)
    check_same(to_array(x)[None, True, [0, 1]], x[None, True, [0, 1]],
               dtype=to_array(x).dtype)


def test_negative_small_dtype_indices_wrap_without_overflow():
    # JAX 0.10.2 wraps int8 -1 in int8 (overflowing to 0 or raising OverflowError for 200);
    # kiln converts to the index dtype first, so -1 is the last element as NumPy says.
    x = A(np.arange(200), np.int32)
    assert int(x[A(-1, np.int8)]) == 199
    np.testing.assert_array_equal(np.asarray(x[A([-1, -2], np.int8)]), [199, 198])


# ------------------------------------------------------------------------------ errors

INDEX_ERRORS = [
    (lambda: X10[[0, 1]], TypeError,
     r"Using a non-tuple sequence for multidimensional indexing is not allowed; use "
     r"`arr\[array\(seq\)\]`"),
    (lambda: X10[[]], TypeError, r"non-tuple sequence"),
    (lambda: X10[[slice(None)]], TypeError, r"use `arr\[tuple\(seq\)\]`"),
    (lambda: X10[1.0], TypeError,
     r"Indexer must have integer or boolean type, got indexer with type float64"),
    (lambda: X10[A(1.0, np.float32)], TypeError,
     r"Indexer must have integer or boolean type, got indexer with type float32"),
    (lambda: X10[[1.5, 2], ], TypeError, r"Indexer must have integer or boolean type"),
    (lambda: X10[1j], TypeError, r"got indexer with type complex128"),
    (lambda: X10["a"], TypeError, r"kiln does not support string indexing; got idx='a'"),
    (lambda: X10[object()], IndexError,
     r"only integers, slices \(`:`\), ellipsis \(`...`\), newaxis \(`None`\) and integer or "
     r"boolean arrays are valid indices"),
    (lambda: X10[0, 0], IndexError,
     r"Too many indices: array is 1-dimensional, but 2 were indexed"),
    (lambda: to_array(5)[0], IndexError,
     r"Too many indices: array is 0-dimensional, but 1 were indexed"),
    (lambda: X10[..., ...], IndexError, r"an index can only have a single ellipsis \('...'\)"),
    (lambda: X10[np.array([True, False])], IndexError,
     r"boolean index did not match shape of indexed array in index 0: got \(2,\), "
     r"expected \[10\]"),
    (lambda: A(np.zeros(0), np.float32)[0], IndexError,
     r"index is out of bounds for axis 0 with size 0"),
    (lambda: A(np.zeros(0), np.float32)[A(0, np.int32)], IndexError,
     r"index is out of bounds for axis 0 with size 0"),
    (lambda: X10[1.5:], TypeError, r"'float' object cannot be interpreted as an integer"),
    (lambda: X10[::0], ValueError, r"slice step cannot be zero"),
    (lambda: X10[False, [0, 1]], ValueError,
     r"Incompatible shapes for broadcasting: shapes=\[\(0,\), \(2,\)\]"),
    (lambda: A(np.arange(6).reshape(2, 3))[[[0], [1, 2]], ], TypeError,
     r"Indexer sequences must be rectangular"),
    (lambda: X10.at[0].get(mode="foo"), ValueError, r'Unknown gather mode "foo"'),
    (lambda: X10.at[0].get(mode="one_hot"), ValueError, r"does not support mode='one_hot'"),
    (lambda: X10.at[A([20])].get(mode="fill", fill_value=A([1, 2])), ValueError,
     r"fill_value argument to indexed get\(\) must be a scalar"),
    (lambda: X10.at[0].set(1, mode="foo"), ValueError, r'Unknown gather mode "foo"'),
    (lambda: X10.at[0].add(1, foo=3), TypeError,
     r"\.at\[\]\.add\(\) got an unexpected keyword argument 'foo'"),
    (lambda: X10.at[1].set(A([1, 2])), ValueError,
     r"Cannot broadcast to shape with fewer dimensions: arr_shape=\(2,\) shape=\(\)"),
    (lambda: X10.at[:2].set(A([1, 2, 3])), ValueError,
     r"Incompatible shapes for broadcasting: \(3,\) and requested shape \(2,\)"),
    (lambda: X10.at[0].set(2 ** 40), OverflowError,
     r"Python int 1099511627776 too large to convert to int32"),
    (lambda: A([True, False]).at[0].add(True), TypeError,
     r"add does not accept dtype bool at position 0. Accepted dtypes at position 0 are "
     r"subtypes of integer, floating, complexfloating."),
    (lambda: A([True, False]).at[0].subtract(True), TypeError,
     r"sub does not accept dtype bool"),
    (lambda: A([True, False]).at[0].multiply(False), TypeError,
     r"mul does not accept dtype bool"),
    (lambda: A([True, False]).at[1].divide(True), TypeError, r"mul does not accept dtype bool"),
    (lambda: A([True, False]).at[1].power(True), TypeError, r"mul does not accept dtype bool"),
    (lambda: A([1, 2], np.int32).at[0].apply(lambda v: v + 1.5), ValueError,
     r"func must be elementwise and keep the dtype int32; it returned float32"),
    (lambda: A([1, 2], np.int32).at[0].apply(3), TypeError, r"needs a unary function"),
]


@pytest.mark.parametrize("expr, exc, match", INDEX_ERRORS)
def test_index_errors(expr, exc, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises(exc, match=match):
            expr()


def test_setitem_is_a_type_error_naming_at():
    with pytest.raises(TypeError, match=r"x = x\.at\[idx\]\.set\(y\)"):
        X10[0] = 5


# ------------------------------------------------------------------------- updates

def numpy_update(x, idx, values, op):
    """The expected result of `x.at[idx].op(values)` computed with NumPy on a copy."""
    x = np.asarray(x)
    out = x.copy()
    if op == "set":
        out[idx] = values
    elif op in ("add", "subtract", "multiply", "min", "max"):
        ufunc = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
                 "min": np.minimum, "max": np.maximum}[op]
        ufunc.at(out, idx, values)
    elif op in ("divide", "power"):
        factors = np.ones_like(x)
        np.multiply.at(factors, idx, values)
        with np.errstate(all="ignore"):
            out = x / factors if op == "divide" else np.power(x, factors)
        out = out.astype(np.float32) if op == "divide" else out
    else:  # apply
        counts = np.zeros(x.shape, np.int64)
        np.add.at(counts, idx, 1)
        for k in range(counts.max(initial=0)):
            out = np.where(counts > k, APPLY_NP(out), out)
    return out


def APPLY(v):
    return v * 2 + 1


def APPLY_NP(v):
    return (v * 2 + 1).astype(v.dtype)


OPS_FOR = {
    np.int32: ["set", "add", "subtract", "multiply", "min", "max", "divide", "power", "apply"],
    np.float32: ["set", "add", "subtract", "multiply", "min", "max", "divide", "power", "apply"],
    np.uint8: ["set", "add", "subtract", "min", "max"],
    np.bool_: ["set", "min", "max"],
}


@st.composite
def update_values(draw, shape, dtype, op):
    """Scalar or an array broadcastable to `shape`, small enough for power/multiply."""
    lo, hi = (0, 3) if op in ("power", "multiply", "divide") else (-9, 9)
    if dtype == np.uint8:
        lo = max(lo, 0)
    if op == "divide":
        lo = 1
    if draw(st.booleans()):
        v = draw(st.integers(lo, hi))
        return (v % 2 == 1) if dtype == np.bool_ else np.asarray(v, dtype)[()]
    sub = shape[draw(st.integers(0, len(shape))):]
    if sub and draw(st.booleans()):
        sub = (1,) + sub[1:]
    size = int(np.prod(sub))
    vals = np.asarray(draw(st.lists(st.integers(lo, hi), min_size=size, max_size=size)))
    vals = vals.reshape(sub)
    return (vals % 2 == 1) if dtype == np.bool_ else vals.astype(dtype)


@settings(max_examples=100, deadline=None)
@given(st.data(), SHAPES, st.sampled_from(DTYPES))
def test_updates_match_numpy_ufunc_at(data, shape, dtype):
    op = data.draw(st.sampled_from(OPS_FOR[dtype]))
    x = data_for(shape, dtype)
    if op == "power":
        x = np.asarray(np.abs(x) % 4)
    idx = data.draw(index_exprs(shape))
    np_idx = to_numpy_index(idx)
    target, err = numpy_or_error(lambda: x[np_idx])
    if err is not None:
        return
    values = data.draw(update_values(target.shape, dtype, op))
    kv = APPLY if op == "apply" else (to_array(values) if isinstance(values, np.ndarray)
                                      else values)
    expected = numpy_update(x, np_idx, values, op)
    got = getattr(to_array(x).at[idx], op)(kv)
    check_same(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.data(), SHAPES.filter(lambda s: len(s) >= 1 and s[0] > 0),
       st.sampled_from(["set", "add", "min", "max", "multiply"]), st.sampled_from(["drop", "clip"]))
def test_out_of_bounds_updates_drop_or_clip(data, shape, op, mode):
    x = data_for(shape, np.int32)
    n = shape[0]
    idx = np.asarray(data.draw(st.lists(st.integers(-3 * n, 3 * n), min_size=0, max_size=5)),
                     np.int32)
    wrapped = np.where(idx < 0, idx + n, idx)
    vals = np.arange(1, idx.size + 1, dtype=np.int32).reshape((-1,) + (1,) * (x.ndim - 1))
    if mode == "drop":
        keep = (wrapped >= 0) & (wrapped < n)
        expected = numpy_update(x, (wrapped[keep],), vals[keep], op)
    else:
        expected = numpy_update(x, (np.clip(wrapped, 0, n - 1),), vals, op)
    got = getattr(to_array(x).at[to_array(idx)], op)(to_array(vals), mode=mode)
    check_same(got, expected)
    if mode == "drop":
        check_same(getattr(to_array(x).at[to_array(idx)], op)(to_array(vals)), expected)
        check_same(getattr(to_array(x).at[to_array(idx)], op)(to_array(vals), mode="fill"),
                   expected)


# Recorded from JAX 0.10.2: (expression, expected values, dtype, weak_type, warns).
F2 = A([1.0, 2.0], np.float32)
JAX_UPDATES = [
    (lambda: X10.at[11].set(5), np.arange(10), np.int32, False, False),
    (lambda: X10.at[A([11, -11, -1])].set(5), [0, 1, 2, 3, 4, 5, 6, 7, 8, 5], np.int32, False,
     False),
    (lambda: X10.at[A([11, -11, -1])].set(5, mode="clip"), [5, 1, 2, 3, 4, 5, 6, 7, 8, 5],
     np.int32, False, False),
    (lambda: X10.at[A([0, 0, 1])].add(5), [10, 6, 2, 3, 4, 5, 6, 7, 8, 9], np.int32, False,
     False),
    (lambda: A(np.arange(1, 11), np.int32).at[0].set(2.7), np.r_[2, 2:11], np.int32, False,
     True),
    (lambda: A(np.arange(1, 11), np.int32).at[0].add(1.5), np.r_[2, 2:11], np.int32, False,
     True),
    (lambda: A([3, 2], np.int32).at[0].divide(2), [1.5, 2.0], np.float32, False, False),
    (lambda: A([3, 2], np.int32).at[0].power(2), [9, 2], np.int32, False, False),
    (lambda: A(np.arange(1, 11), np.int32).at[1].power(2.5), np.r_[1, 4, 3:11], np.int32,
     False, True),
    (lambda: A([1, 2], np.int32).at[A([0, 0, 0])].apply(lambda v: v * 3), [27, 2], np.int32,
     False, False),
    (lambda: A([1, 2], np.int32).at[A([0, 5])].apply(lambda v: v * 3), [3, 2], np.int32, False,
     False),
    (lambda: A([1, 2], np.int32).at[A([0, 5])].apply(lambda v: v * 3, mode="clip"), [3, 6],
     np.int32, False, False),
    (lambda: A([1, 2], np.uint8).at[0].set(300), [44, 2], np.uint8, False, False),
    (lambda: A([1, 2], np.int8).at[0].set(300), [44, 2], np.int8, False, False),
    (lambda: A([1, 2], np.int8).at[0].add(A(300, np.int32)), [45, 2], np.int8, False, True),
    (lambda: A([1, 2], np.uint8).at[0].add(-1), [0, 2], np.uint8, False, False),
    (lambda: A([1, 2], np.uint8).at[0].subtract(2), [255, 2], np.uint8, False, False),
    (lambda: A([1, 2], np.uint8).at[0].add(A(1, np.int32)), [2, 2], np.uint8, False, True),
    (lambda: A([True, False]).at[1].max(True), [True, True], np.bool_, False, False),
    (lambda: A([True, False]).at[0].add(1), [True, False], np.bool_, False, True),
    (lambda: A([True, False]).at[0].set(1), [True, False], np.bool_, False, True),
    (lambda: A([1, 2], np.int32).at[0].set(True), [1, 2], np.int32, False, False),
    (lambda: F2.at[0].set(A(3.0, np.float16)), [3.0, 2.0], np.float32, False, False),
    (lambda: A([1.0, 2.0], np.float16).at[0].set(3.0), [3.0, 2.0], np.float16, False, False),
    (lambda: A([1.0, 2.0], np.float16).at[0].set(np.float32(3.0)), [3.0, 2.0], np.float16,
     False, True),
    (lambda: F2.at[0].apply(lambda v: v * 2 + 1), [3.0, 2.0], np.float32, False, False),
    (lambda: to_array(1.0).at[()].set(3), 3.0, np.float32, True, False),
    (lambda: A(1.0, np.float32).at[()].set(3), 3.0, np.float32, False, False),
    (lambda: to_array(2.0).at[()].add(np.float32(1.0)), 3.0, np.float32, True, False),
    (lambda: to_array(2).at[()].add(1.5), 3, np.int32, True, True),
    (lambda: to_array(2).at[()].divide(2), 1.0, np.float32, True, False),
    (lambda: to_array(2).at[()].power(2), 4, np.int32, True, False),
    (lambda: to_array(3.0).at[...].add(2), 5.0, np.float32, True, False),
    (lambda: A(np.arange(4), np.int32).at[::-1].set(A(np.arange(4), np.int32)), [3, 2, 1, 0],
     np.int32, False, False),
    (lambda: A(np.arange(4), np.int32).at[::-2].set(A(np.arange(2), np.int32)), [0, 1, 2, 0],
     np.int32, False, False),
    (lambda: A(np.arange(4), np.int32).at[None].set(A(np.arange(4), np.int32)), [0, 1, 2, 3],
     np.int32, False, False),
    (lambda: A(np.arange(4), np.int32).at[None, 0].set(A(np.ones((1,)))), [1, 1, 2, 3],
     np.int32, False, True),
    (lambda: A(np.arange(4), np.int32).at[True].set(7), [7, 7, 7, 7], np.int32, False, False),
    (lambda: A(np.arange(4), np.int32).at[False].set(7), [0, 1, 2, 3], np.int32, False, False),
    (lambda: A([[1, 2]], np.int32).at[0, None].set([[5, 6]]), [[5, 6]], np.int32, False,
     False),
    (lambda: X10.at[A(np.arange(10) > 4)].set(A(np.arange(5), np.int32)),
     [0, 1, 2, 3, 4, 0, 1, 2, 3, 4], np.int32, False, False),
    (lambda: X10.at[A(np.arange(10) > 4)].add(1), [0, 1, 2, 3, 4, 6, 7, 8, 9, 10], np.int32,
     False, False),
    (lambda: A(np.arange(6).reshape(2, 3), np.int32).at[A([True, False])].add(A([7, 8, 9])),
     [[7, 9, 11], [3, 4, 5]], np.int32, False, False),
    (lambda: A(np.arange(6).reshape(2, 3), np.int32).at[A([True, False]), ...].multiply(3),
     [[0, 3, 6], [3, 4, 5]], np.int32, False, False),
    (lambda: A(np.arange(6.).reshape(2, 3), np.float32).at[A([True, False]), 1:].max(100.0),
     [[0.0, 100.0, 100.0], [3.0, 4.0, 5.0]], np.float32, False, False),
    (lambda: A(np.arange(6).reshape(2, 3), np.int32).at[
        A([[True, False, True], [False, True, False]])].set(A([7, 8, 9], np.int32)),
     [[7, 1, 8], [3, 9, 5]], np.int32, False, False),
    (lambda: A(np.arange(24).reshape(2, 3, 4), np.int32).at[:, A([0, 1]), A([1, 2])].add(
        A([100, 200])),
     [[[0, 101, 2, 3], [4, 5, 206, 7], [8, 9, 10, 11]],
      [[12, 113, 14, 15], [16, 17, 218, 19], [20, 21, 22, 23]]], np.int32, False, False),
    (lambda: A(np.arange(24).reshape(2, 3, 4), np.int32).at[None, 1, ::2, A([3, 0])].set(0),
     [[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]],
      [[0, 13, 14, 0], [16, 17, 18, 19], [0, 21, 22, 0]]], np.int32, False, False),
]


@pytest.mark.parametrize("expr, expected, dtype, weak, warns", JAX_UPDATES)
def test_updates_recorded_from_jax(expr, expected, dtype, weak, warns):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = expr()
    check_same(got, np.asarray(expected, dtype), weak=weak)
    future = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert bool(future) == warns, [str(w.message) for w in caught]
    if warns:
        assert "scatter inputs have incompatible types" in str(future[0].message)


def test_update_does_not_modify_the_original():
    x = A([1, 2, 3], np.int32)
    y = x.at[0].set(10)
    np.testing.assert_array_equal(np.asarray(x), [1, 2, 3])
    np.testing.assert_array_equal(np.asarray(y), [10, 2, 3])


def test_update_accepts_lists_and_hints():
    x = A(np.zeros((2, 3)), np.float32)
    got = x.at[0].set([1, 2, 3], indices_are_sorted=True, unique_indices=True,
                      wrap_negative_indices=True)
    check_same(got, np.array([[1, 2, 3], [0, 0, 0]], np.float32))
    got = x.at[A([0, 0]), A([1, 1])].add(1.0, unique_indices=False)
    check_same(got, np.array([[0, 2, 0], [0, 0, 0]], np.float32))


def test_wrap_negative_indices_false():
    x = A(np.arange(5), np.int32)
    got = x.at[A([-1, 1])].set(9, wrap_negative_indices=False)
    check_same(got, np.array([0, 9, 2, 3, 4], np.int32))
    got = _indexing.getitem(x, A([-1, 2]), mode="fill", fill_value=-7,
                            wrap_negative_indices=False)
    check_same(got, np.array([-7, 2], np.int32))


def test_empty_updates_are_no_ops():
    x = A(np.arange(6).reshape(2, 3), np.int32)
    for idx in [A([], np.int32), (slice(0, 0),), (..., slice(3, 1))]:
        check_same(x.at[idx].add(5), np.arange(6).reshape(2, 3).astype(np.int32))
    check_same(A(np.zeros((0, 2)), np.float32).at[:, 1].apply(lambda v: v + 1),
               np.zeros((0, 2), np.float32))


# --------------------------------------------------------------- a fake tracer

class _EagerTrace:
    """Runs primitives eagerly but keeps results wrapped, like a compiler trace would."""

    def bind(self, prim, args, params):
        vals = [a.inner if isinstance(a, Traced) else a for a in args]
        out = dispatch.apply_eager(prim, vals, params)
        if prim.multiple_results:
            return tuple(Traced(o) for o in out)
        return Traced(out)


class Traced:
    """A stand-in for a traced value: it has an abstract value but no concrete one."""
    _kiln_trace = _EagerTrace()

    def __init__(self, inner):
        self.inner = inner

    shape = property(lambda self: self.inner.shape)
    dtype = property(lambda self: self.inner.dtype)
    ndim = property(lambda self: self.inner.ndim)
    size = property(lambda self: self.inner.size)
    weak_type = property(lambda self: self.inner.weak_type)
    aval = property(lambda self: self.inner.aval)

    def _concrete(self, *args):
        raise TypeError("ConcretizationError: a traced value has no concrete value")

    __bool__ = __int__ = __index__ = __float__ = __array__ = _concrete

    def __getitem__(self, idx):
        return _indexing.getitem(self, idx)

    @property
    def at(self):
        from kiln.array import _AtIndexer
        return _AtIndexer(self)


def T(value, dtype=None):
    return Traced(A(value, dtype))


def untrace(t):
    assert isinstance(t, Traced), type(t)
    return np.asarray(t.inner)


def test_traced_integer_array_indexing():
    x = np.arange(12).reshape(3, 4).astype(np.int32)
    np.testing.assert_array_equal(untrace(T(x)[T([2, -1])]), x[[2, -1]])
    np.testing.assert_array_equal(untrace(T(x)[:, T([[0], [3]])]), x[:, [[0], [3]]])
    np.testing.assert_array_equal(untrace(T(x)[T(1, np.int32), ::-1]), x[1, ::-1])
    np.testing.assert_array_equal(untrace(to_array(x)[T(-1, np.int32)]), x[-1])
    np.testing.assert_array_equal(untrace(T(x)[1:, None, 2]), x[1:, None, 2])


def test_traced_updates():
    x = np.arange(6).astype(np.float32)
    np.testing.assert_array_equal(untrace(T(x).at[T([1, 1, 7])].add(1.0)),
                                  [0, 3, 2, 3, 4, 5])
    np.testing.assert_array_equal(untrace(T(x).at[2].set(T(9.0, np.float32))),
                                  [0, 1, 9, 3, 4, 5])
    np.testing.assert_array_equal(untrace(to_array(x).at[1:3].multiply(T(2.0, np.float32))),
                                  [0, 2, 4, 3, 4, 5])


def test_traced_boolean_mask_update_compiles_to_select():
    x = np.arange(6).reshape(2, 3).astype(np.float32)
    mask = x > 2
    np.testing.assert_array_equal(untrace(T(x).at[T(mask)].set(0.0)), np.where(mask, 0, x))
    np.testing.assert_array_equal(untrace(to_array(x).at[T(mask)].add(1.0)),
                                  np.where(mask, x + 1, x))
    row = np.array([True, False])
    expected = x.copy()
    expected[row] = [7, 8, 9]
    np.testing.assert_array_equal(untrace(T(x).at[T(row)].set(A([7, 8, 9], np.float32))),
                                  expected)
    np.testing.assert_array_equal(untrace(T(x).at[T(row), ...].max(4.0)),
                                  np.where(row[:, None], np.maximum(x, 4), x))


def test_traced_boolean_mask_read_is_a_clear_index_error():
    x = T(np.arange(6), np.int32)
    with pytest.raises(_indexing.NonConcreteBooleanIndexError,
                       match=r"boolean indices must be concrete.*jnp\.where\(mask, x, fill\)"):
        x[T(np.arange(6) > 2)]
    assert issubclass(_indexing.NonConcreteBooleanIndexError, IndexError)
    with pytest.raises(IndexError, match="Slice entries must be static integers"):
        x[T(1, np.int32):]


def test_traced_nonzero_needs_size():
    m = T([0, 3, 0, 5], np.int32)
    with pytest.raises(TypeError, match="size argument of jnp.nonzero must be statically"):
        jnp.nonzero(m)
    rows, = jnp.nonzero(m, size=3, fill_value=-1)
    np.testing.assert_array_equal(untrace(rows), [1, 3, -1])


# ------------------------------------------------------------------ index helpers

@settings(max_examples=50, deadline=None)
@given(st.data(), SHAPES.filter(lambda s: len(s) >= 1), st.sampled_from(DTYPES))
def test_nonzero_family_matches_numpy(data, shape, dtype):
    x = data_for(shape, dtype)
    if dtype != np.bool_:
        x = np.where(x % 2 == 0, 0, x).astype(dtype)
    kx = to_array(x)
    got = jnp.nonzero(kx)
    for g, e in zip(got, np.nonzero(x)):
        check_same(g, e.astype(np.int32))
    check_same(jnp.flatnonzero(kx), np.flatnonzero(x).astype(np.int32))
    check_same(jnp.argwhere(kx), np.argwhere(x).astype(np.int32))
    check_same(kx[kx != 0] if dtype != np.bool_ else kx[kx], x[x != 0])
    size = data.draw(st.integers(0, 6))
    count = np.count_nonzero(x)
    for g, e in zip(jnp.nonzero(kx, size=size, fill_value=-1), np.nonzero(x)):
        padded = np.full(size, -1, np.int32)
        padded[:min(size, count)] = e[:size]
        check_same(g, padded)


NONZERO_JAX = [
    (lambda: jnp.nonzero(A([[0.0, 3], [4, 0]]), size=5), ([0, 1, 0, 0, 0], [1, 0, 0, 0, 0])),
    (lambda: jnp.nonzero(A([[0.0, 3], [4, 0]]), size=1), ([0], [1])),
    (lambda: jnp.nonzero(A([[0.0, 3], [4, 0]]), size=4, fill_value=(-1, -2)),
     ([0, 1, -1, -1], [1, 0, -2, -2])),
    (lambda: jnp.nonzero(A(np.zeros((2, 3))), size=2), ([0, 0], [0, 0])),
    (lambda: jnp.nonzero(A([1 + 1j, 0j])), ([0],)),
    (lambda: jnp.where(A([1, 0, 3])), ([0, 2],)),
    (lambda: A([1, 0, 3]).nonzero(), ([0, 2],)),
    (lambda: (jnp.flatnonzero(A([[0, 3], [4, 0]]), size=3, fill_value=9),), ([1, 2, 9],)),
    (lambda: (jnp.argwhere(A([[0, 3], [4, 0]]), size=3),), ([[0, 1], [1, 0], [0, 0]],)),
]


@pytest.mark.parametrize("expr, expected", NONZERO_JAX)
def test_nonzero_recorded_from_jax(expr, expected):
    got = expr()
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        check_same(g, np.asarray(e, np.int32))


def test_nonzero_edge_cases():
    assert jnp.argwhere(to_array(3)).shape == (1, 0)
    assert jnp.argwhere(to_array(0)).shape == (0, 0)
    assert jnp.argwhere(A(np.zeros((0, 2)))).shape == (0, 2)
    with pytest.raises(ValueError, match="Calling nonzero on 0d arrays is not allowed"):
        jnp.nonzero(to_array(3))
    with pytest.raises(TypeError, match="nonzero requires ndarray or scalar arguments"):
        jnp.nonzero([1, 2])
    with pytest.raises(ValueError, match="fill_value must be a scalar or a tuple of length 2"):
        jnp.nonzero(A([[0.0, 3], [4, 0]]), size=4, fill_value=(-1, -2, 3))


def test_nonzero_family_returns_int64_under_x64(x64):
    # JAX 0.10.2 with x64 returns its default integer type, int64, from all of these.
    x = A(np.array([[0.5, 0], [2.0, -1.0]], np.complex64))
    for out in (jnp.nonzero(x)[0], jnp.nonzero(x, size=5, fill_value=-1)[1],
                jnp.flatnonzero(x), jnp.argwhere(x), jnp.argwhere(to_array(3)),
                jnp.where(x)[0]):
        assert out.dtype == np.int64
    check_same(jnp.argwhere(x), np.argwhere(np.asarray(x)).astype(np.int64))


@settings(max_examples=40, deadline=None)
@given(st.data(), SHAPES.filter(lambda s: len(s) >= 1))
def test_compress_and_extract_match_numpy(data, shape):
    x = data_for(shape, np.float32)
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    n = x.size if axis is None else shape[axis]
    cond = np.asarray(data.draw(st.lists(st.booleans(), min_size=0, max_size=n)), bool)
    check_same(jnp.compress(to_array(cond), to_array(x), axis=axis),
               np.compress(cond, x, axis=axis))
    mask = data_for(shape, np.bool_)
    check_same(jnp.extract(to_array(mask), to_array(x)), np.extract(mask, x))


def test_compress_recorded_from_jax():
    x = A(np.arange(12.0).reshape(3, 4), np.float32)
    check_same(jnp.compress(A([True, False, True]), x, axis=0, size=3),
               np.array([[0, 1, 2, 3], [8, 9, 10, 11], [0, 0, 0, 0]], np.float32))
    check_same(jnp.compress(A([True, False, True]), x, axis=1, size=2, fill_value=-1),
               np.array([[0, 2], [4, 6], [8, 10]], np.float32))
    check_same(jnp.compress(A([1, 0, 1]), A(np.arange(12).reshape(3, 4), np.int32), axis=1),
               np.array([[0, 2], [4, 6], [8, 10]], np.int32))
    check_same(jnp.compress(A([True, False, True, False, False]), x, axis=0), x[::2])
    check_same(jnp.extract(A([[True, False], [False, True]]), A(np.arange(4).reshape(2, 2),
                                                                np.int32), size=3),
               np.array([0, 3, 0], np.int32))
    with pytest.raises(ValueError, match="condition contains entries that are out of bounds"):
        jnp.compress(A([True, False, True, False, True]), x, axis=0)
    with pytest.raises(ValueError, match="size must be positive and not greater than the size"):
        jnp.compress(A([True, False, True]), x, axis=0, size=4)
    with pytest.raises(ValueError, match="condition must be a 1D array"):
        jnp.compress(A([[True]]), x)


@settings(max_examples=40, deadline=None)
@given(st.data(), SHAPES)
def test_select_matches_numpy(data, shape):
    k = data.draw(st.integers(1, 3))
    conds = [data_for(shape, np.bool_) ^ (np.arange(int(np.prod(shape))).reshape(shape) % (j + 2)
                                          == 0) for j in range(k)]
    choices = [data_for(shape, np.float32) + j for j in range(k)]
    got = jnp.select([to_array(c) for c in conds], [to_array(c) for c in choices], default=-1.0)
    check_same(got, np.select(conds, choices, default=-1.0))


def test_select_recorded_from_jax():
    c1, c2 = A([True, False, False]), A([True, True, False])
    check_same(jnp.select([c1, c2], [A([1, 2, 3], np.int32), A([4, 5, 6], np.float32)]),
               np.array([1, 5, 0], np.float32))
    check_same(jnp.select([c1], [to_array(1.5)]), np.array([1.5, 0, 0], np.float32), weak=True)
    check_same(jnp.select([A([1, 0, 2])], [A([1, 2, 3], np.int8)], default=100),
               np.array([1, 100, 3], np.int8))
    check_same(jnp.select([A([[True], [False]])], [A([1, 2, 3], np.int32)]),
               np.array([[1, 2, 3], [0, 0, 0]], np.int32))
    with pytest.raises(ValueError, match="condlist must be non-empty"):
        jnp.select([], [])
    with pytest.raises(ValueError, match=r"condlist must have length equal to choicelist "
                                         r"\(1 vs 0\)"):
        jnp.select([c1], [])
    with pytest.raises(TypeError, match="select requires ndarray or scalar arguments"):
        jnp.select([[True]], [A([1])])


def test_choose():
    a = A([0, 1, 2, 1], np.int32)
    choices = [A([1, 2, 3, 4]), A([10, 20, 30, 40]), A([100.0, 200, 300, 400], np.float32)]
    check_same(jnp.choose(a, choices), np.array([1, 20, 300, 40], np.float32))
    two = [A([1, 2, 3, 4], np.int32), A([10, 20, 30, 40], np.int32)]
    check_same(jnp.choose(A([0, 1, 2, -1]), two, mode="wrap"), np.array([1, 20, 3, 40],
                                                                        np.int32))
    check_same(jnp.choose(A([0, 1, 5, -1]), two, mode="clip"), np.array([1, 20, 30, 4],
                                                                        np.int32))
    check_same(jnp.choose(A([[0], [1]]), [A([1, 2, 3], np.int32), to_array(7)]),
               np.array([[1, 2, 3], [7, 7, 7]], np.int32))
    np.testing.assert_array_equal(
        np.asarray(jnp.choose(A([[2, 0], [1, 2]]), [A(np.full((2, 2), k)) for k in range(3)])),
        np.choose([[2, 0], [1, 2]], [np.full((2, 2), k) for k in range(3)]))
    with pytest.raises(ValueError, match="invalid entry in choice array"):
        jnp.choose(a, two)
    with pytest.raises(ValueError, match="mode='foo' not understood"):
        jnp.choose(a, two, mode="foo")
    with pytest.raises(ValueError, match="`a` array must be integer typed"):
        jnp.choose(A([0.0, 1.0]), two)


def test_ix_indices_and_diagonals():
    r, c = jnp.ix_(A([0, 2]), A([1, 3]))
    assert r.shape == (2, 1) and c.shape == (1, 2)
    x = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(to_array(x)[jnp.ix_(A([0, 2]), A([1, 3]))]),
                                  x[np.ix_([0, 2], [1, 3])])
    np.testing.assert_array_equal(np.asarray(jnp.ix_(A([True, False, True]))[0]), [0, 2])
    e, f = jnp.ix_(A([], np.int32), A([2, 3, 4]))
    assert e.shape == (0, 1) and e.dtype == np.int32 and f.shape == (1, 3)
    with pytest.raises(ValueError, match="must be 1-dimensional, got shape \\(1, 2\\)"):
        jnp.ix_(A([[0, 1]]))
    assert jnp.ix_() == ()
    check_same(jnp.indices((2, 3)), np.indices((2, 3)).astype(np.int32))
    for g, e in zip(jnp.indices((2, 3), sparse=True), np.indices((2, 3), sparse=True)):
        check_same(g, e.astype(np.int32))
    check_same(jnp.indices((2, 3), dtype=np.float32), np.indices((2, 3)).astype(np.float32))
    check_same(jnp.indices(()), np.zeros((0,), np.int32))
    check_same(jnp.indices((0, 2)), np.zeros((2, 0, 2), np.int32))
    for n, nd in [(3, 2), (3, 3), (0, 2)]:
        got = jnp.diag_indices(n, nd)
        assert len(got) == nd
        for g, e in zip(got, np.diag_indices(n, nd)):
            check_same(g, e.astype(np.int32))
    with pytest.raises(ValueError, match="n argument to diag_indices must be nonnegative"):
        jnp.diag_indices(-1)
    check_same(jnp.diag_indices_from(A(np.zeros((2, 2))))[0], np.arange(2, dtype=np.int32))
    with pytest.raises(ValueError, match="All dimensions of input must be of equal length"):
        jnp.diag_indices_from(A(np.zeros((2, 3))))


@pytest.mark.parametrize("n, k, m", [(3, 0, None), (3, 1, None), (3, -1, 5), (4, -5, None),
                                     (3, 10, 2), (4, 7, None), (3, -10, 2), (0, 0, None),
                                     (1, 0, 4)])
def test_tril_triu_indices_match_numpy(n, k, m):
    for fn, ref in [(jnp.tril_indices, np.tril_indices), (jnp.triu_indices, np.triu_indices)]:
        for g, e in zip(fn(n, k, m), ref(n, k, m)):
            check_same(g, e.astype(np.int32))
    x = np.zeros((n, n if m is None else m))
    for fn, ref in [(jnp.tril_indices_from, np.tril_indices_from),
                    (jnp.triu_indices_from, np.triu_indices_from)]:
        for g, e in zip(fn(to_array(x), k), ref(x, k)):
            check_same(g, e.astype(np.int32))


def test_unravel_and_ravel_multi_index():
    flat = A([0, 5, 7, 11, 12, -1, -12, -13, 100], np.int32)
    rows, cols = jnp.unravel_index(flat, (3, 4))
    # Recorded from JAX 0.10.2: out-of-range indices clamp instead of raising.
    check_same(rows, np.array([0, 1, 1, 2, 2, 2, 0, 0, 2], np.int32))
    check_same(cols, np.array([0, 1, 3, 3, 3, 3, 0, 0, 3], np.int32))
    r, c = jnp.unravel_index(7, (3, 4))
    check_same(r, np.int32(1), weak=True)
    check_same(c, np.int32(3), weak=True)
    r, c = jnp.unravel_index(A([3, 300], np.uint16), (3, 4))
    check_same(r, np.array([0, 2], np.uint16))
    check_same(c, np.array([3, 3], np.uint16))
    check_same(jnp.unravel_index(A([3, 2], np.int8), (3, 4))[1], np.array([3, 2], np.int8))
    idx = (A([0, 1, 2], np.int32), A([3, 0, 1], np.int32))
    check_same(jnp.ravel_multi_index(idx, (3, 4)), np.array([3, 4, 9], np.int32))
    check_same(jnp.ravel_multi_index(idx, (3, 4), order="F"), np.array([9, 1, 5], np.int32))
    oob = (A([0, 1, 5], np.int32), A([-3, 0, 1], np.int32))
    check_same(jnp.ravel_multi_index(oob, (3, 4), mode="clip"), np.array([0, 4, 9], np.int32))
    check_same(jnp.ravel_multi_index(oob, (3, 4), mode="wrap"), np.array([1, 4, 9], np.int32))
    check_same(jnp.ravel_multi_index(idx, (3, 4), dtype=np.int8), np.array([3, 4, 9], np.int8))
    small = (A([0, 1, 2], np.int8), A([3, 0, 1], np.int8))
    check_same(jnp.ravel_multi_index(small, (3, 4)), np.array([3, 4, 9], np.int8))
    with pytest.raises(ValueError, match="invalid entry in coordinates array"):
        jnp.ravel_multi_index(oob, (3, 4))
    with pytest.raises(ValueError, match="not large enough to hold flattened index"):
        jnp.ravel_multi_index(small, (3, 400))
    with pytest.raises(ValueError, match="is not an integer type"):
        jnp.ravel_multi_index(idx, (3, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="invalid mode='x'"):
        jnp.ravel_multi_index(idx, (3, 4), mode="x")
    with pytest.raises(ValueError, match="invalid order='x'"):
        jnp.ravel_multi_index(idx, (3, 4), order="x")


@settings(max_examples=40, deadline=None)
@given(st.data(), SHAPES.filter(lambda s: len(s) >= 1 and 0 not in s))
def test_unravel_ravel_round_trip_matches_numpy(data, shape):
    size = int(np.prod(shape))
    flat = np.asarray(data.draw(st.lists(st.integers(0, size - 1), max_size=6)), np.int32)
    coords = jnp.unravel_index(to_array(flat), shape)
    for g, e in zip(coords, np.unravel_index(flat, shape)):
        check_same(g, e.astype(np.int32))
    check_same(jnp.ravel_multi_index(coords, shape), flat)


def test_index_results_pickle():
    got = A(np.arange(6).reshape(2, 3), np.int32)[:, A([2, 0])]
    back = pickle.loads(pickle.dumps(got))
    check_same(back, np.array([[2, 0], [5, 3]], np.int32))
