"""kiln.numpy reductions: sums, extrema, statistics, cumulative sums, quantiles.

Values are compared with NumPy under hypothesis (shapes with 0- and 1-sized axes; bool, int32,
uint8, float32 and float16; axis None/int/negative/tuple; keepdims; where=/initial=/dtype=).
Result dtypes and weak types are compared with tables recorded from JAX 0.10.2 (x64 off and
on), and every error path is asserted with its message.
"""
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kiln.numpy as jnp
from kiln.array import Array

DTYPES = ["bool", "int32", "uint8", "float32", "float16"]
FEW = settings(max_examples=30, deadline=None)

# ------------------------------------------------------------------- JAX dtype tables

# Result dtype of each call for inputs of dtype bool, int8, uint8, int16, uint16, int32, uint32,
# float16, float32, complex64 and weakly typed int, float, complex arrays (JAX 0.10.2). No
# result is weakly typed; ERR means JAX raises.
CALLS = {
    "sum": lambda x: jnp.sum(x), "prod": lambda x: jnp.prod(x),
    "max": lambda x: jnp.max(x), "min": lambda x: jnp.min(x),
    "all": lambda x: jnp.all(x), "any": lambda x: jnp.any(x),
    "mean": lambda x: jnp.mean(x), "var": lambda x: jnp.var(x), "std": lambda x: jnp.std(x),
    "ptp": lambda x: jnp.ptp(x), "count_nonzero": lambda x: jnp.count_nonzero(x),
    "argmax": lambda x: jnp.argmax(x), "argmin": lambda x: jnp.argmin(x),
    "cumsum": lambda x: jnp.cumsum(x), "cumprod": lambda x: jnp.cumprod(x),
    "nancumsum": lambda x: jnp.nancumsum(x), "nancumprod": lambda x: jnp.nancumprod(x),
    "cumulative_sum": lambda x: jnp.cumulative_sum(x),
    "cumulative_prod": lambda x: jnp.cumulative_prod(x),
    "median": lambda x: jnp.median(x), "quantile": lambda x: jnp.quantile(x, 0.5),
    "percentile": lambda x: jnp.percentile(x, 50), "average": lambda x: jnp.average(x),
    "nansum": lambda x: jnp.nansum(x), "nanprod": lambda x: jnp.nanprod(x),
    "nanmax": lambda x: jnp.nanmax(x), "nanmin": lambda x: jnp.nanmin(x),
    "nanmean": lambda x: jnp.nanmean(x), "nanvar": lambda x: jnp.nanvar(x),
    "nanstd": lambda x: jnp.nanstd(x), "nanmedian": lambda x: jnp.nanmedian(x),
    "nanargmax": lambda x: jnp.nanargmax(x),
    "sum_keep": lambda x: jnp.sum(x, axis=0, keepdims=True),
    "mean_where": lambda x: jnp.mean(x, where=jnp.array([True, False, True])),
    "max_init": lambda x: jnp.max(x, initial=0),
    "sum_dtype_f16": lambda x: jnp.sum(x, dtype=jnp.float16),
    "var_ddof1": lambda x: jnp.var(x, ddof=1),
    "average_w": lambda x: jnp.average(x, weights=jnp.array([1., 2., 3.])),
}

TABLE_X32 = """
sum             i32  i32  u32  i32  u32  i32  u32  f16  f32  c64  i32  f32  c64
prod            i32  i32  u32  i32  u32  i32  u32  f16  f32  c64  i32  f32  c64
max             b1   i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
min             b1   i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
all             b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1
any             b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1
mean            f32  f32  f32  f32  f32  f32  f32  f16  f32  c64  f32  f32  c64
var             f32  f32  f32  f32  f32  f32  f32  f16  f32  f32  f32  f32  f32
std             f32  f32  f32  f32  f32  f32  f32  f16  f32  f32  f32  f32  f32
ptp             ERR  i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
count_nonzero   i32  i32  i32  i32  i32  i32  i32  i32  i32  i32  i32  i32  i32
argmax          i32  i32  i32  i32  i32  i32  i32  i32  i32  ERR  i32  i32  ERR
argmin          i32  i32  i32  i32  i32  i32  i32  i32  i32  ERR  i32  i32  ERR
cumsum          i32  i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
cumprod         i32  i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
nancumsum       i32  i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
nancumprod      i32  i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
cumulative_sum  i32  i32  u32  i32  u32  i32  u32  f16  f32  c64  i32  f32  c64
cumulative_prod i32  i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
median          f32  f32  f32  f32  f32  f32  f32  f16  f32  ERR  f32  f32  ERR
quantile        f32  f32  f32  f32  f32  f32  f32  f16  f32  ERR  f32  f32  ERR
percentile      f32  f32  f32  f32  f32  f32  f32  f16  f32  ERR  f32  f32  ERR
average         f32  f32  f32  f32  f32  f32  f32  f16  f32  c64  f32  f32  c64
nansum          i32  i32  u32  i32  u32  i32  u32  f16  f32  c64  i32  f32  c64
nanprod         i32  i32  u32  i32  u32  i32  u32  f16  f32  c64  i32  f32  c64
nanmax          b1   i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
nanmin          b1   i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
nanmean         f32  f32  f32  f32  f32  f32  f32  f16  f32  c64  f32  f32  c64
nanvar          f32  f32  f32  f32  f32  f32  f32  f16  f32  f32  f32  f32  f32
nanstd          f32  f32  f32  f32  f32  f32  f32  f16  f32  f32  f32  f32  f32
nanmedian       f32  f32  f32  f32  f32  f32  f32  f16  f32  ERR  f32  f32  ERR
nanargmax       i32  i32  i32  i32  i32  i32  i32  i32  i32  ERR  i32  i32  ERR
sum_keep        i32  i32  u32  i32  u32  i32  u32  f16  f32  c64  i32  f32  c64
mean_where      f32  f32  f32  f32  f32  f32  f32  f16  f32  c64  f32  f32  c64
max_init        b1   i8   u8   i16  u16  i32  u32  f16  f32  c64  i32  f32  c64
sum_dtype_f16   f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16
var_ddof1       f32  f32  f32  f32  f32  f32  f32  f16  f32  f32  f32  f32  f32
average_w       f32  f32  f32  f32  f32  f32  f32  f32  f32  c64  f32  f32  c64
"""

TABLE_X64 = """
sum             i64  i64  u64  i64  u64  i64  u64  f16  f32  c64  i64  f64  c128
prod            i64  i64  u64  i64  u64  i64  u64  f16  f32  c64  i64  f64  c128
max             b1   i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
min             b1   i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
all             b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1
any             b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1   b1
mean            f32  f32  f32  f32  f32  f32  f32  f16  f32  c64  f64  f64  c128
var             f32  f32  f32  f32  f32  f32  f32  f16  f32  f32  f64  f64  f64
std             f32  f32  f32  f32  f32  f32  f32  f16  f32  f32  f64  f64  f64
ptp             ERR  i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
count_nonzero   i64  i64  i64  i64  i64  i64  i64  i64  i64  i64  i64  i64  i64
argmax          i64  i64  i64  i64  i64  i64  i64  i64  i64  ERR  i64  i64  ERR
argmin          i64  i64  i64  i64  i64  i64  i64  i64  i64  ERR  i64  i64  ERR
cumsum          i64  i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
cumprod         i64  i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
nancumsum       i64  i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
nancumprod      i64  i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
cumulative_sum  i64  i64  u64  i64  u64  i64  u64  f16  f32  c64  i64  f64  c128
cumulative_prod i64  i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
median          f32  f32  f32  f32  f32  f32  f32  f16  f32  ERR  f64  f64  ERR
quantile        f32  f32  f32  f32  f32  f32  f32  f16  f32  ERR  f64  f64  ERR
percentile      f32  f32  f32  f32  f32  f32  f32  f16  f32  ERR  f64  f64  ERR
average         f32  f32  f32  f32  f32  f32  f32  f16  f32  c64  f64  f64  c128
nansum          i64  i64  u64  i64  u64  i64  u64  f16  f32  c64  i64  f64  c128
nanprod         i64  i64  u64  i64  u64  i64  u64  f16  f32  c64  i64  f64  c128
nanmax          b1   i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
nanmin          b1   i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
nanmean         f32  f32  f32  f32  f32  f32  f32  f16  f32  c64  f64  f64  c128
nanvar          f32  f32  f32  f32  f32  f32  f32  f16  f32  f32  f64  f64  f64
nanstd          f32  f32  f32  f32  f32  f32  f32  f16  f32  f32  f64  f64  f64
nanmedian       f32  f32  f32  f32  f32  f32  f32  f16  f32  ERR  f64  f64  ERR
nanargmax       i64  i64  i64  i64  i64  i64  i64  i64  i64  ERR  i64  i64  ERR
sum_keep        i64  i64  u64  i64  u64  i64  u64  f16  f32  c64  i64  f64  c128
mean_where      f32  f32  f32  f32  f32  f32  f32  f16  f32  c64  f64  f64  c128
max_init        b1   i8   u8   i16  u16  i32  u32  f16  f32  c64  i64  f64  c128
sum_dtype_f16   f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16
var_ddof1       f32  f32  f32  f32  f32  f32  f32  f16  f32  f32  f64  f64  f64
average_w       f64  f64  f64  f64  f64  f64  f64  f64  f64  c128 f64  f64  c128
"""

SHORT = {"b1": "bool", "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16",
         "i32": "int32", "u32": "uint32", "i64": "int64", "u64": "uint64", "f16": "float16",
         "f32": "float32", "f64": "float64", "c64": "complex64", "c128": "complex128"}


def _table(text):
    return {row.split()[0]: row.split()[1:] for row in text.strip().splitlines()}


def _table_inputs():
    strong = [jnp.array([1, 0, 2], dtype=d) for d in
              ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "float16",
               "float32", "complex64")]
    return strong + [jnp.full((3,), 1), jnp.full((3,), 1.0), jnp.full((3,), 1.0j)]


def _check_table(name, row):
    for x, expected in zip(_table_inputs(), row):
        if expected == "ERR":
            with pytest.raises((TypeError, ValueError)):
                CALLS[name](x)
            continue
        out = CALLS[name](x)
        assert (out.dtype, out.weak_type) == (np.dtype(SHORT[expected]), False), \
            (name, x.dtype, x.weak_type, out.dtype, out.weak_type, expected)


@pytest.mark.parametrize("name", list(CALLS))
def test_result_dtypes_match_jax(name):
    _check_table(name, _table(TABLE_X32)[name])


@pytest.mark.parametrize("name", list(CALLS))
def test_result_dtypes_match_jax_x64(name, x64):
    _check_table(name, _table(TABLE_X64)[name])


# --------------------------------------------------------------------------- helpers

def _elements(dtype, nan=False):
    elements = {"bool": st.booleans(), "int32": st.integers(-5, 5), "uint8": st.integers(0, 9),
                "float32": st.floats(-10, 10, width=32) | st.just(0.5),
                "float16": st.floats(-10, 10, width=16)}[dtype]
    return elements | st.just(np.nan) if nan and dtype.startswith("float") else elements


@st.composite
def arrays(draw, dtypes=DTYPES, nan=False, min_dims=0, min_side=0):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=3, min_side=min_side,
                                  max_side=4))
    return draw(hnp.arrays(dtype, shape, elements=_elements(dtype, nan)))


@st.composite
def axes(draw, ndim, tuples=True):
    """None, an int (possibly negative) or a tuple of distinct axes (possibly negative)."""
    options = [st.none()]
    if ndim:
        options.append(st.integers(-ndim, ndim - 1))
        if tuples:
            options.append(st.lists(st.integers(0, ndim - 1), unique=True).flatmap(
                lambda ax: st.tuples(*[st.sampled_from([a, a - ndim]) for a in ax])))
    return draw(st.one_of(*options))


def _dims(shape, axis):
    if axis is None:
        return tuple(range(len(shape)))
    return tuple(a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,)))


def _reduced_size(shape, axis):
    return int(np.prod([shape[d] for d in _dims(shape, axis)], dtype=np.int64))


def _nonempty(shape, axis):
    return all(shape[d] > 0 for d in _dims(shape, axis))


def check(out, expected, dtype, rtol=0.0, atol=0.0):
    assert isinstance(out, Array), type(out)
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    assert not out.weak_type
    expected = np.asarray(expected)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    if rtol or atol:
        kind = np.complex128 if expected.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(np.asarray(out).astype(kind), expected.astype(kind),
                                   rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(np.asarray(out), expected.astype(out.dtype))


def _cast(x, dtype):
    """x converted to dtype as XLA does: float -> int conversions saturate (NaN -> 0)."""
    dtype = np.dtype(dtype)
    if x.dtype.kind == "f" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = np.nan_to_num(np.clip(np.trunc(x), info.min, info.max), nan=0.0)
    return x.astype(dtype)


def _tol(dtype):
    return {"float16": dict(rtol=2e-3, atol=2e-3), "float32": dict(rtol=2e-5, atol=2e-5)}.get(
        np.dtype(dtype).name, {})


SUM_DTYPE = {"bool": "int32", "int32": "int32", "uint8": "uint32", "float32": "float32",
             "float16": "float16"}
MEAN_DTYPE = {"bool": "float32", "int32": "float32", "uint8": "float32", "float32": "float32",
              "float16": "float16"}


def _computation(dtype):
    return "float32" if dtype == "float16" else dtype


@pytest.fixture(autouse=True)
def _quiet_numpy():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


# ------------------------------------------------------------------ sums and extrema

@FEW
@given(st.data(), arrays(), st.booleans())
def test_sum_prod(data, x, keepdims):
    axis = data.draw(axes(x.ndim))
    res = SUM_DTYPE[x.dtype.name]
    comp = _computation(res)
    for fn, ref in ((jnp.sum, np.sum), (jnp.prod, np.prod)):
        out = fn(x, axis=axis, keepdims=keepdims)
        check(out, ref(x.astype(comp), axis=axis, keepdims=keepdims).astype(res), res,
              **_tol(res))


@FEW
@given(st.data(), arrays(dtypes=["int32", "float32", "float16", "bool"]),
       st.sampled_from(["int32", "float32", "float16", "bool", "uint8"]))
def test_sum_prod_dtype_argument(data, x, dtype):
    axis = data.draw(axes(x.ndim))
    if dtype == "bool":
        check(jnp.sum(x, axis=axis, dtype=dtype), np.any(x != 0, axis=axis), "bool")
        check(jnp.prod(x, axis=axis, dtype=dtype), np.all(x != 0, axis=axis), "bool")
        return
    xs = _cast(x, dtype)
    check(jnp.sum(x, axis=axis, dtype=dtype), np.sum(xs, axis=axis, dtype=dtype), dtype,
          **_tol(dtype))
    check(jnp.prod(x, axis=axis, dtype=dtype), np.prod(xs, axis=axis, dtype=dtype), dtype,
          **_tol(dtype))


@FEW
@given(st.data(), arrays(), st.booleans())
def test_max_min(data, x, keepdims):
    axis = data.draw(axes(x.ndim))
    for fn, alias, ref, name in ((jnp.max, jnp.amax, np.max, "max"),
                                 (jnp.min, jnp.amin, np.min, "min")):
        if not _nonempty(x.shape, axis):
            with pytest.raises(ValueError, match=f"zero-size array to reduction operation "
                                                 f"{name} which has no identity"):
                fn(x, axis=axis, keepdims=keepdims)
            continue
        expected = ref(x, axis=axis, keepdims=keepdims)
        check(fn(x, axis=axis, keepdims=keepdims), expected, x.dtype)
        check(alias(x, axis=axis, keepdims=keepdims), expected, x.dtype)


@FEW
@given(st.data(), arrays(dtypes=["int32", "float32", "uint8", "bool"]), st.booleans())
def test_where_and_initial(data, x, keepdims):
    axis = data.draw(axes(x.ndim))
    where = data.draw(hnp.arrays("bool", x.shape[data.draw(st.integers(0, x.ndim)):]))
    init = {"bool": True, "uint8": 3, "int32": -2, "float32": 1.5}[x.dtype.name]
    res = SUM_DTYPE[x.dtype.name]
    xs = x.astype(res)
    check(jnp.sum(x, axis=axis, keepdims=keepdims, where=where, initial=init),
          np.sum(xs, axis=axis, keepdims=keepdims, where=where,
                 initial=np.asarray(init).astype(res)), res, **_tol(res))
    check(jnp.prod(x, axis=axis, where=where), np.prod(xs, axis=axis, where=where), res,
          **_tol(res))
    check(jnp.max(x, axis=axis, keepdims=keepdims, where=where, initial=init),
          np.max(x, axis=axis, keepdims=keepdims, where=where,
                 initial=np.asarray(init).astype(x.dtype)), x.dtype)
    check(jnp.min(x, axis=axis, where=where, initial=init),
          np.min(x, axis=axis, where=where, initial=np.asarray(init).astype(x.dtype)), x.dtype)
    check(jnp.all(x, axis=axis, where=where), np.all(x, axis=axis, where=where), "bool")
    check(jnp.any(x, axis=axis, keepdims=keepdims, where=where),
          np.any(x, axis=axis, keepdims=keepdims, where=where), "bool")
    check(jnp.mean(x, axis=axis, where=where),
          np.mean(x.astype(np.float32), axis=axis, where=where), "float32", **_tol("float32"))


@FEW
@given(st.data(), arrays(), st.booleans())
def test_all_any_count_nonzero(data, x, keepdims):
    axis = data.draw(axes(x.ndim))
    check(jnp.all(x, axis=axis, keepdims=keepdims), np.all(x, axis=axis, keepdims=keepdims),
          "bool")
    check(jnp.any(x, axis=axis, keepdims=keepdims), np.any(x, axis=axis, keepdims=keepdims),
          "bool")
    check(jnp.count_nonzero(x, axis=axis, keepdims=keepdims),
          np.count_nonzero(x, axis=axis, keepdims=keepdims), "int32")


@FEW
@given(st.data(), arrays(dtypes=["int32", "uint8", "float32", "float16"]), st.booleans())
def test_ptp(data, x, keepdims):
    axis = data.draw(axes(x.ndim))
    if not _nonempty(x.shape, axis):
        with pytest.raises(ValueError, match="reduction operation max which has no identity"):
            jnp.ptp(x, axis=axis)
        return
    check(jnp.ptp(x, axis=axis, keepdims=keepdims), np.ptp(x, axis=axis, keepdims=keepdims),
          x.dtype)


def test_complex_extrema_are_lexicographic():
    c = jnp.array([1 + 5j, 3 + 1j, 3 + 2j, 2 + 9j])
    check(jnp.max(c), 3 + 2j, "complex64")
    check(jnp.min(c), 1 + 5j, "complex64")
    check(jnp.ptp(c), 2 - 3j, "complex64")
    check(jnp.max(c, initial=10), 10, "complex64")
    check(jnp.max(c, where=jnp.array([True, False, False, True]), initial=0), 2 + 9j,
          "complex64")
    check(jnp.max(c.reshape(2, 2), axis=1, keepdims=True), [[3 + 1j], [3 + 2j]], "complex64")


def test_reductions_match_jax_quirks():
    i8 = jnp.array([100, 100], dtype="int8")
    check(jnp.sum(i8, promote_integers=False), -56, "int8")
    check(jnp.sum(jnp.array([True, True]), promote_integers=False), 2, "int32")
    check(jnp.sum(jnp.array([60000, 60000], dtype="float16")), np.inf, "float16")
    check(jnp.mean(jnp.array([60000, 60000], dtype="float16")), 60000, "float16")
    check(jnp.max(jnp.arange(3, dtype="uint8"), initial=-1), 255, "uint8")
    check(jnp.max(jnp.arange(3, dtype="uint8"), initial=300), 44, "uint8")
    check(jnp.sum(jnp.arange(3), initial=1.5), 4, "int32")
    check(jnp.max(jnp.array([1.0, np.nan, 3.0])), np.nan, "float32")
    check(jnp.sum(jnp.ones(3), where=jnp.ones((2, 3), bool)), [2, 2, 2], "float32")
    check(jnp.sum(jnp.ones((2, 3)), axis=()), np.ones((2, 3)), "float32")


# ----------------------------------------------------------------- argmax and argmin

@FEW
@given(st.data(), arrays(dtypes=DTYPES, nan=True), st.booleans())
def test_argmax_argmin(data, x, keepdims):
    axis = data.draw(axes(x.ndim, tuples=False))
    for fn, ref, name in ((jnp.argmax, np.argmax, "argmax"), (jnp.argmin, np.argmin,
                                                               "argmin")):
        if x.size == 0 and (axis is None or x.shape[axis] == 0):
            with pytest.raises(ValueError, match=f"attempt to get {name} of an empty sequence"):
                fn(x, axis=axis, keepdims=keepdims)
            continue
        check(fn(x, axis=axis, keepdims=keepdims), ref(x, axis=axis, keepdims=keepdims),
              "int32")


@FEW
@given(st.data(), arrays(dtypes=["float32", "int32"], nan=True, min_side=1), st.booleans())
def test_nanargmax_nanargmin(data, x, keepdims):
    axis = data.draw(axes(x.ndim, tuples=False))
    for fn, ref, fill in ((jnp.nanargmax, np.argmax, -np.inf), (jnp.nanargmin, np.argmin,
                                                                 np.inf)):
        nan = np.isnan(x.astype(np.float64))
        expected = ref(np.where(nan, fill, x), axis=axis, keepdims=keepdims)
        expected = np.where(np.all(nan, axis=axis, keepdims=keepdims), -1, expected)
        check(fn(x, axis=axis, keepdims=keepdims), expected, "int32")


# -------------------------------------------------------------------- mean, var, std

@FEW
@given(st.data(), arrays(), st.booleans())
def test_mean(data, x, keepdims):
    axis = data.draw(axes(x.ndim))
    res = MEAN_DTYPE[x.dtype.name]
    ref = np.mean(x.astype(np.float32), axis=axis, keepdims=keepdims).astype(res)
    check(jnp.mean(x, axis=axis, keepdims=keepdims), ref, res, **_tol(res))


@FEW
@given(st.data(), arrays(), st.booleans(), st.sampled_from([0, 1, 1.5]))
def test_var_std(data, x, keepdims, ddof):
    axis = data.draw(axes(x.ndim))
    res = MEAN_DTYPE[x.dtype.name]
    n = _reduced_size(x.shape, axis)
    var = np.var(x.astype(np.float32), axis=axis, ddof=ddof, keepdims=keepdims)
    var = np.where(n - ddof > 0, var, np.nan)
    check(jnp.var(x, axis=axis, ddof=ddof, keepdims=keepdims), var.astype(res), res,
          rtol=2e-3 if res == "float16" else 1e-4, atol=1e-3)
    check(jnp.std(x, axis=axis, correction=ddof, keepdims=keepdims),
          np.sqrt(var).astype(res), res, rtol=2e-3 if res == "float16" else 1e-4, atol=1e-3)


@FEW
@given(st.data(), arrays(dtypes=["float32", "int32"]))
def test_var_where_and_mean(data, x):
    axis = data.draw(axes(x.ndim))
    where = data.draw(hnp.arrays("bool", x.shape))
    xf = x.astype(np.float32)
    count = np.sum(np.broadcast_to(where, x.shape), axis=axis)
    ref = np.where(count > 0, np.var(xf, axis=axis, where=where), np.nan)
    check(jnp.var(x, axis=axis, where=where), ref, "float32", rtol=1e-4, atol=1e-4)
    m = np.mean(xf, axis=axis, keepdims=True)
    check(jnp.var(x, axis=axis, mean=m), np.var(xf, axis=axis, mean=m), "float32", rtol=1e-4,
          atol=1e-4)


def test_var_std_match_jax_quirks():
    x = jnp.arange(6.0).reshape(2, 3)
    out = jnp.var(x, dtype=int)  # computed in int32, then promoted with NaN: weak float32
    assert (out.dtype, out.weak_type, float(out)) == (np.float32, True, 3.0)
    check(jnp.var(x.astype(jnp.complex64)), np.var(np.arange(6.0)), "float32", rtol=1e-6)
    check(jnp.var(x.astype(jnp.complex64), dtype=jnp.complex64), np.var(np.arange(6.0)),
          "complex64", rtol=1e-6)
    check(jnp.var(jnp.array([1 + 1j, 2 - 1j])), 1.25, "float32")
    check(jnp.std(x, dtype=jnp.float16), np.std(np.arange(6.0)), "float16", rtol=1e-3)
    check(jnp.var(x, ddof=6), np.nan, "float32")
    check(jnp.var(jnp.zeros((0, 3))), np.nan, "float32")


@FEW
@given(st.data(), arrays(min_side=1), st.booleans(), st.booleans())
def test_average(data, x, returned, keepdims):
    axis = data.draw(axes(x.ndim))
    res = MEAN_DTYPE[x.dtype.name]
    xf = x.astype(np.float32)
    out = jnp.average(x, axis=axis, returned=returned, keepdims=keepdims)
    ref = np.average(xf, axis=axis, returned=returned, keepdims=keepdims)
    if returned:
        check(out[0], ref[0].astype(res), res, **_tol(res))
        check(out[1], np.broadcast_to(ref[1], ref[0].shape).astype(res), res, **_tol(res))
    else:
        check(out, ref.astype(res), res, **_tol(res))
    # weights of the array's shape, and 1-D weights along one axis
    w = data.draw(hnp.arrays("float32", x.shape, elements=st.integers(1, 4).map(float)))
    check(jnp.average(x, axis=axis, weights=w, keepdims=keepdims),
          np.average(xf, axis=axis, weights=w, keepdims=keepdims), "float32", rtol=1e-5)
    if x.ndim:
        ax = data.draw(st.integers(-x.ndim, x.ndim - 1))
        w1 = np.arange(1.0, x.shape[ax] + 1, dtype=np.float32)
        avg, wsum = jnp.average(x, axis=ax, weights=w1, returned=True)
        ref_avg, ref_wsum = np.average(xf, axis=ax, weights=w1, returned=True)
        check(avg, ref_avg, "float32", rtol=1e-5)
        check(wsum, ref_wsum, "float32")


def test_average_multi_axis_weights():
    x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    w = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    check(jnp.average(x, (2, 0), weights=w), np.average(x, (2, 0), weights=w.T.reshape(2, 1, 4)
                                                        * np.ones((2, 3, 4))), "float32",
          rtol=1e-6)
    check(jnp.average(jnp.arange(3), weights=jnp.array([1, 2, 3])), 8 / 6, "float32",
          rtol=1e-6)
    check(jnp.average(x, 1, weights=jnp.zeros(3)), np.full((2, 4), np.nan), "float32")


# ----------------------------------------------------------------------- NaN-ignoring

@FEW
@given(st.data(), arrays(dtypes=["float32", "float16", "int32", "bool"], nan=True),
       st.booleans())
def test_nan_reductions(data, x, keepdims):
    axis = data.draw(axes(x.ndim))
    res = SUM_DTYPE[x.dtype.name]
    comp = _computation(res)
    kw = dict(axis=axis, keepdims=keepdims)
    check(jnp.nansum(x, **kw), np.nansum(x.astype(comp), **kw).astype(res), res, **_tol(res))
    check(jnp.nanprod(x, **kw), np.nanprod(x.astype(comp), **kw).astype(res), res,
          **_tol(res))
    mres = MEAN_DTYPE[x.dtype.name]
    check(jnp.nanmean(x, **kw), np.nanmean(x.astype(np.float32), **kw).astype(mres), mres,
          **_tol(mres))
    for ddof in (0, 1):
        xf = x.astype(np.float32)
        count = np.sum(~np.isnan(xf), axis=axis, keepdims=keepdims)
        var = np.where(count - ddof > 0, np.nanvar(xf, ddof=ddof, **kw), np.nan)
        check(jnp.nanvar(x, ddof=ddof, **kw), var.astype(mres), mres,
              rtol=2e-3 if mres == "float16" else 1e-4, atol=1e-3)
        check(jnp.nanstd(x, ddof=ddof, **kw), np.sqrt(var).astype(mres), mres,
              rtol=2e-3 if mres == "float16" else 1e-4, atol=1e-3)
    for fn, ref, name in ((jnp.nanmax, np.nanmax, "max"), (jnp.nanmin, np.nanmin, "min")):
        if not _nonempty(x.shape, axis):
            with pytest.raises(ValueError, match=f"operation {name} which has no identity"):
                fn(x, **kw)
            continue
        check(fn(x, **kw), ref(x, **kw), x.dtype)


def test_nan_reductions_match_jax():
    n = jnp.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]])
    check(jnp.nanmax(n, 1, initial=-5), [3, -5], "float32")
    check(jnp.nanmax(n, 1), [3, np.nan], "float32")
    check(jnp.nanmean(jnp.array([60000, 60000], dtype="float16")), np.inf, "float16")
    check(jnp.nanmean(n, 1, where=jnp.array([True, False, True])), [2, np.nan], "float32")
    check(jnp.nanvar(n, 1, where=jnp.array([True, False, True])), [1, np.nan], "float32")
    check(jnp.nansum(n, dtype=int), 4, "int32")
    check(jnp.nanvar(n, dtype=int), 1, "int32")
    check(jnp.nanvar(jnp.array([1 + 1j, 2 - 1j, np.nan])), 1.25, "float32")
    check(jnp.nanvar(jnp.array([1.0, 2.0, np.nan]), mean=jnp.array(1.0)), 0.5, "float32")
    check(jnp.nanmax(jnp.array([1 + 5j, complex(np.nan, 0), 3])), 3, "complex64")


# ------------------------------------------------------------------------ cumulative

CUM_DTYPE = {"bool": "int32", "int32": "int32", "uint8": "uint8", "float32": "float32",
             "float16": "float16"}


@FEW
@given(st.data(), arrays(nan=True))
def test_cumsum_cumprod(data, x):
    axis = data.draw(axes(x.ndim, tuples=False))
    res = CUM_DTYPE[x.dtype.name]
    for fn, ref in ((jnp.cumsum, np.cumsum), (jnp.cumprod, np.cumprod),
                    (jnp.nancumsum, np.nancumsum), (jnp.nancumprod, np.nancumprod)):
        check(fn(x, axis=axis), ref(x, axis=axis, dtype=res), res, **_tol(res))


@FEW
@given(st.data(), arrays(dtypes=["int32", "float32", "bool"]),
       st.sampled_from(["int32", "float32", "bool", "uint8"]))
def test_cumulative_dtype_argument(data, x, dtype):
    axis = data.draw(axes(x.ndim, tuples=False))
    if dtype == "bool":
        flat = (x != 0).ravel() if axis is None else (x != 0)
        check(jnp.cumsum(x, axis=axis, dtype=dtype), np.cumsum(flat, axis=axis or 0) > 0,
              "bool")
        check(jnp.cumprod(x, axis=axis, dtype=dtype), np.cumprod(flat, axis=axis or 0) > 0,
              "bool")
        return
    check(jnp.cumsum(x, axis=axis, dtype=dtype),
          np.cumsum(_cast(x, dtype), axis=axis, dtype=dtype), dtype, **_tol(dtype))


@FEW
@given(st.data(), arrays(min_dims=1), st.booleans())
def test_cumulative_sum_prod(data, x, include_initial):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    res = SUM_DTYPE[x.dtype.name]
    check(jnp.cumulative_sum(x, axis=axis, include_initial=include_initial),
          np.cumulative_sum(x, axis=axis, dtype=res, include_initial=include_initial), res,
          **_tol(res))
    res = CUM_DTYPE[x.dtype.name]
    check(jnp.cumulative_prod(x, axis=axis, include_initial=include_initial),
          np.cumulative_prod(x, axis=axis, dtype=res, include_initial=include_initial), res,
          **_tol(res))
    if x.ndim == 1:
        check(jnp.cumulative_sum(x), np.cumulative_sum(x, dtype=SUM_DTYPE[x.dtype.name]),
              SUM_DTYPE[x.dtype.name], **_tol(x.dtype))


def test_cumulative_matches_jax():
    check(jnp.cumsum(jnp.array([200, 100], dtype="uint8")), [200, 44], "uint8")
    check(jnp.cumsum(3.0), [3.0], "float32")
    check(jnp.cumsum(jnp.array(3.0), 0), [3.0], "float32")
    check(jnp.cumulative_sum(jnp.array([100, 100], dtype="int8")), [100, 200], "int32")
    check(jnp.cumulative_sum(jnp.array([0, 1, 2]), dtype=bool), [False, True, True], "bool")
    check(jnp.cumulative_sum(jnp.zeros((0, 3)), axis=0, include_initial=True),
          np.zeros((1, 3)), "float32")
    check(jnp.cumsum(jnp.array([1 + 5j, 3 + 1j])), [1 + 5j, 4 + 6j], "complex64")


# ------------------------------------------------------------------------- quantiles

QS = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 0.3]),
               hnp.arrays("float32", st.integers(0, 3),
                          elements=st.sampled_from([0.0, 0.125, 0.3, 0.5, 0.875, 1.0])))


@FEW
@given(st.data(), arrays(dtypes=["float32", "int32", "float16", "bool"], nan=True), QS,
       st.booleans(), st.sampled_from(["linear", "lower", "higher", "midpoint"]))
def test_quantile(data, x, q, keepdims, method):
    axis = data.draw(axes(x.ndim))
    assume(axis != () and not (x.ndim == 0 and keepdims))  # NumPy differs (JAX's tested below)
    res = MEAN_DTYPE[x.dtype.name]
    if not _nonempty(x.shape, axis) or (x.ndim == 0 and axis is not None):
        if x.ndim == 0 and axis is not None:
            return
        with pytest.raises(TypeError, match="cannot take a quantile over an axis of size 0"):
            jnp.quantile(x, q, axis=axis, keepdims=keepdims, method=method)
        return
    if x.size == 0:  # NumPy cannot reshape these; the result is empty
        shape = np.shape(q) + np.sum(x, axis=axis, keepdims=keepdims).shape
        check(jnp.quantile(x, q, axis=axis, keepdims=keepdims, method=method),
              np.zeros(shape), res)
        return
    ref = np.quantile(x.astype(np.float64), np.asarray(q, np.float64), axis=axis,
                      keepdims=keepdims, method=method).astype(res)
    tol = dict(rtol=2e-3, atol=1e-2) if res == "float16" else dict(rtol=1e-5, atol=1e-5)
    check(jnp.quantile(x, q, axis=axis, keepdims=keepdims, method=method), ref, res, **tol)
    check(jnp.percentile(x, np.asarray(q, np.float32) * 100, axis=axis, keepdims=keepdims,
                         method=method), ref, res, **tol)
    if method == "midpoint" and np.ndim(q) == 0:
        med = np.median(x.astype(np.float64), axis=axis, keepdims=keepdims).astype(res)
        check(jnp.median(x, axis=axis, keepdims=keepdims), med, res, **tol)


@FEW
@given(st.data(), arrays(dtypes=["float32", "int32"], nan=True, min_side=1), QS,
       st.booleans(), st.sampled_from(["linear", "lower", "higher", "midpoint"]))
def test_nanquantile(data, x, q, keepdims, method):
    axis = data.draw(axes(x.ndim))
    assume(axis != () and not (x.ndim == 0 and keepdims))
    ref = np.nanquantile(x.astype(np.float64), np.asarray(q, np.float64), axis=axis,
                         keepdims=keepdims, method=method)
    out = jnp.nanquantile(x, q, axis=axis, keepdims=keepdims, method=method)
    check(out, ref, "float32", rtol=1e-5, atol=1e-5)
    check(jnp.nanpercentile(x, np.asarray(q, np.float32) * 100, axis=axis, keepdims=keepdims,
                            method=method), ref, "float32", rtol=1e-5, atol=1e-5)
    if method == "midpoint" and np.ndim(q) == 0:
        check(jnp.nanmedian(x, axis=axis, keepdims=keepdims),
              np.nanmedian(x.astype(np.float64), axis=axis, keepdims=keepdims), "float32",
              rtol=1e-5, atol=1e-5)


QS_EXACT = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0]),
                     hnp.arrays("float32", st.integers(0, 3),
                                elements=st.sampled_from([0.0, 0.125, 0.5, 0.875, 1.0])))


@FEW
@given(st.data(), arrays(dtypes=["float32"], min_dims=1, min_side=1), QS_EXACT, st.booleans())
def test_quantile_inverted_cdf(data, x, q, keepdims):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    ref = np.quantile(x, np.asarray(q, np.float64), axis=axis, keepdims=keepdims,
                      method="inverted_cdf")
    check(jnp.quantile(x, q, axis=axis, keepdims=keepdims, method="inverted_cdf"), ref,
          "float32")
    w = data.draw(hnp.arrays("float32", x.shape, elements=st.integers(1, 4).map(float)))
    ref_w = np.quantile(x, np.asarray(q, np.float64), axis=axis, keepdims=keepdims,
                        method="inverted_cdf", weights=w)
    check(jnp.quantile(x, q, axis=axis, keepdims=keepdims, method="inverted_cdf", weights=w),
          ref_w, "float32")


def test_quantile_methods_match_jax():
    x = jnp.arange(6.0).reshape(2, 3)
    check(jnp.quantile(x, 0.3, method="nearest"), 1.0, "float32")
    check(jnp.quantile(jnp.arange(4.0), 0.5, method="nearest"), 1.0, "float32")
    check(jnp.quantile(x, jnp.array([0.3, 0.9]), axis=1, keepdims=True),
          [[[0.6], [3.6]], [[1.8], [4.8]]], "float32", rtol=1e-6)
    check(jnp.quantile(x, jnp.array([0.3, 0.9]), axis=(0, 1), keepdims=True),
          [[[1.5]], [[4.5]]], "float32", rtol=1e-6)
    check(jnp.quantile(x, 1.5), 5.0, "float32")
    check(jnp.quantile(x, -0.5), 0.0, "float32")
    check(jnp.quantile(jnp.array([-np.inf, np.inf]), 0.5), np.nan, "float32")
    check(jnp.quantile(jnp.array([1.0, np.nan, 3.0]), 0.5), np.nan, "float32")
    check(jnp.quantile(x, 0.4, axis=0, method="inverted_cdf", weights=jnp.array([1.0, 3.0])),
          [3, 4, 5], "float32")
    check(jnp.quantile(x, 0.5, axis=1, method="inverted_cdf",
                       weights=jnp.array([[1.0, -3.0, 1.0], [0.0, 0.0, 2.0]])),
          [np.nan, 5.0], "float32")
    check(jnp.quantile(jnp.arange(24.0).reshape(2, 3, 4), 0.5, axis=(2, 0),
                       method="inverted_cdf", weights=jnp.arange(8.0).reshape(4, 2)),
          [13, 17, 21], "float32")
    check(jnp.median(jnp.zeros((0, 3)), 1), np.zeros(0), "float32")
    check(jnp.quantile(x, 0.5, axis=()), x, "float32")
    check(jnp.quantile(x, 0.5, axis=(), keepdims=True), x, "float32")
    check(jnp.quantile(jnp.array(3.0), 0.5, keepdims=True), [3.0], "float32")
    check(jnp.quantile(x, jnp.array([]), axis=1, keepdims=True), np.zeros((0, 2, 1)),
          "float32")
    check(jnp.median(jnp.array([True, False, True])), 1.0, "float32")


# ---------------------------------------------------------------------------- errors

x23 = jnp.arange(6.0).reshape(2, 3)
ERRORS = [
    ("jnp.sum([1, 2])", TypeError, "sum requires ndarray or scalar arguments, got <class "
     "'list'> at position 0."),
    ("jnp.mean((1, 2))", TypeError, "mean requires ndarray or scalar arguments"),
    ("jnp.median([1.0, 2.0])", TypeError, "median requires ndarray or scalar arguments"),
    ("jnp.cumsum([1, 2])", TypeError, "cumsum requires ndarray or scalar arguments"),
    ("jnp.argmax([1, 2])", TypeError, "argmax requires ndarray or scalar arguments"),
    ("jnp.average([1.0, 2.0])", TypeError, "average requires ndarray or scalar arguments"),
    ("jnp.quantile(x23, [0.3])", TypeError, "got <class 'list'> at position 1"),
    ("jnp.sum(x23, out=x23)", NotImplementedError, "The 'out' argument to jnp.sum is not "
     "supported"),
    ("jnp.max(x23, out=x23)", NotImplementedError, "'out' argument to jnp.max"),
    ("jnp.argmin(x23, out=1)", NotImplementedError, "'out' argument to jnp.argmin"),
    ("jnp.cumsum(x23, out=1)", NotImplementedError, "'out' argument to jnp.cumsum"),
    ("jnp.var(x23, out=1)", NotImplementedError, "'out' argument to jnp.var"),
    ("jnp.nanmean(x23, out=1)", NotImplementedError, "'out' argument to jnp.nanmean"),
    ("jnp.ptp(x23, out=1)", NotImplementedError, "'out' argument to jnp.ptp"),
    ("jnp.sum(x23, axis=2)", ValueError, "axis 2 is out of bounds for array of dimension 2"),
    ("jnp.mean(x23, axis=-3)", ValueError, "axis -3 is out of bounds"),
    ("jnp.sum(3.0, axis=0)", ValueError, "axis 0 is out of bounds for array of dimension 0"),
    ("jnp.sum(x23, axis=(0, -2))", ValueError, "duplicate value in 'axis': (0, -2)"),
    ("jnp.sum(x23, axis=1.0)", TypeError, "axis must be an integer, got 1.0"),
    ("jnp.argmax(x23, axis=(0, 1))", TypeError, "'tuple' object cannot be interpreted as an "
     "integer"),
    ("jnp.argmax(x23, axis=2)", ValueError, "axis 2 is out of bounds"),
    ("jnp.cumsum(x23, 2)", ValueError, "axis 2 is out of bounds"),
    ("jnp.cumsum(x23, 1.0)", TypeError, "axis must be an integer"),
    ("jnp.sum(x23, dtype='foo')", TypeError, "data type 'foo' not understood"),
    ("jnp.cumsum(x23, dtype='foo')", TypeError, "data type 'foo' not understood"),
    ("jnp.sum(x23, where=jnp.array(1))", ValueError, "jnp.sum: where must be None or a "
     "boolean array; got where.dtype=dtype('int32')."),
    ("jnp.mean(x23, where=x23)", ValueError, "jnp.mean: where must be None or a boolean"),
    ("jnp.std(x23, where=x23)", ValueError, "jnp.std: where must be None"),
    ("jnp.sum(x23, where=[True, False, True])", TypeError, "sum requires ndarray"),
    ("jnp.sum(x23, where=jnp.array([True, False]))", ValueError,
     "Incompatible shapes for broadcasting"),
    ("jnp.sum(x23, initial=jnp.array([1.0]))", ValueError, "initial value must be a scalar. "
     "Got array of shape (1,)"),
    ("jnp.max(jnp.zeros((0, 3)))", ValueError, "zero-size array to reduction operation max "
     "which has no identity"),
    ("jnp.amin(jnp.zeros((0, 3)), axis=0)", ValueError, "operation min which has no identity"),
    ("jnp.nanmax(jnp.zeros((0, 3)))", ValueError, "operation max which has no identity"),
    ("jnp.ptp(jnp.zeros((0, 3)))", ValueError, "operation max which has no identity"),
    ("jnp.max(x23, where=x23 > 2)", ValueError, "reduction operation max does not have an "
     "identity, so to use a where mask one has to specify 'initial'"),
    ("jnp.max(x23, dtype=int)", TypeError, "unexpected keyword argument 'dtype'"),
    ("jnp.all(x23, initial=True)", TypeError, "unexpected keyword argument 'initial'"),
    ("jnp.mean(jnp.array([True, False]), dtype=bool)", TypeError, "div does not accept dtype "
     "bool"),
    ("jnp.ptp(jnp.array([True]))", TypeError, "sub does not accept dtype bool"),
    ("jnp.argmax(jnp.zeros((0, 3)))", ValueError, "attempt to get argmax of an empty sequence"),
    ("jnp.argmin(jnp.zeros((0, 3)), 0)", ValueError, "attempt to get argmin of an empty "
     "sequence"),
    ("jnp.argmax(jnp.array([1 + 5j]))", TypeError, "jnp.argmax does not accept dtype "
     "complex64"),
    ("jnp.nanargmin(jnp.array([1 + 5j]))", TypeError, "does not accept dtype complex64"),
    ("jnp.var(x23, ddof=1, correction=1)", ValueError, "ddof and correction can't be provided "
     "simultaneously."),
    ("jnp.std(x23, ddof=0.0, correction=1)", ValueError, "can't be provided simultaneously"),
    ("jnp.var(x23.astype(jnp.complex64), dtype=jnp.float32)", ValueError, "does not yet "
     "support real dtype parameters"),
    ("jnp.std(x23, dtype=int)", ValueError, "dtype argument to jnp.std must be inexact; got "
     "int32"),
    ("jnp.nanstd(x23, dtype=int)", TypeError, "sqrt does not accept dtype int32"),
    ("jnp.var(x23, axis=1, mean=jnp.ones(2))", ValueError, "Incompatible shapes"),
    ("jnp.cumulative_sum(x23)", ValueError, "The input array has rank 2, however axis was not "
     "set to an explicit value."),
    ("jnp.cumulative_prod(jnp.array(3.0))", ValueError, "The input must be non-scalar to take "
     "a cumulative product"),
    ("jnp.cumulative_sum(jnp.array(3.0))", ValueError, "non-scalar to take a cumulative sum"),
    ("jnp.cumulative_sum(x23, axis=2)", ValueError, "axis 2 is out of bounds"),
    ("jnp.median(x23, out=1)", ValueError, "jax.numpy.quantile does not support "
     "overwrite_input=True or out != None"),
    ("jnp.nanmedian(x23, overwrite_input=True)", ValueError, "jax.numpy.nanquantile does not "
     "support overwrite_input=True"),
    ("jnp.quantile(x23, jnp.array([[0.3]]))", ValueError, "q must be have rank <= 1, got shape "
     "(1, 1)"),
    ("jnp.quantile(x23, 0.3, method='foo')", ValueError, "method can only be 'linear', "
     "'lower', 'higher', 'midpoint', 'nearest' or 'inverted_cdf'"),
    ("jnp.quantile(x23, 0.3, axis=(0, 0))", ValueError, "duplicate value in 'axis'"),
    ("jnp.quantile(x23, 0.3, axis=2)", ValueError, "axis 2 is out of bounds"),
    ("jnp.quantile(x23.astype(complex), 0.3)", ValueError, "quantile does not support complex "
     "input"),
    ("jnp.quantile(x23, 0.3, weights=x23)", NotImplementedError, "linear doesn't support "
     "weights. Only method 'inverted_cdf' supports weights."),
    ("jnp.quantile(x23, 0.5, method='inverted_cdf', weights=jnp.arange(3.0))", ValueError,
     "Weights shape must match 'a' shape when axis is None."),
    ("jnp.quantile(x23, 0.5, axis=1, method='inverted_cdf', weights=jnp.arange(2.0))",
     ValueError, "Weights shape (2,) must match reduction axes (3,)"),
    ("jnp.quantile(x23, 0.5, axis=1, method='inverted_cdf', weights=jnp.ones(3) * 1j)",
     ValueError, "Weights cannot be complex types."),
    ("jnp.quantile(x23, 0.5, method='inverted_cdf', weights=[1.0])", TypeError,
     "quantile requires ndarray or scalar arguments"),
    ("jnp.median(jnp.zeros((0, 3)), 0)", TypeError, "cannot take a quantile over an axis of "
     "size 0"),
    ("jnp.percentile([1, 2], 30)", TypeError, "percentile requires ndarray"),
    ("jnp.average(x23, weights=jnp.array([1.0, 2.0, 3.0]))", ValueError, "Axis must be "
     "specified when shapes of a and weights differ."),
    ("jnp.average(x23, 0, weights=jnp.array([1.0, 2.0, 3.0]))", ValueError, "Shape of weights "
     "must be consistent with shape of a along specified axis."),
    ("jnp.average(x23, 1, weights=[1.0, 2.0, 3.0])", TypeError, "at position 1"),
]


@pytest.mark.parametrize("expr,exc,match", ERRORS)
def test_errors(expr, exc, match):
    with pytest.raises(exc) as info:
        eval(expr)
    assert match in str(info.value)


def test_methods_forward_to_reductions():
    x = jnp.arange(6.0).reshape(2, 3)
    check(x.sum(axis=0), [3, 5, 7], "float32")
    check(x.mean(1), [1, 4], "float32")
    check(x.max(), 5, "float32")
    check(x.argmin(axis=1), [0, 0], "int32")
    check(x.cumsum(1), [[0, 1, 3], [3, 7, 12]], "float32")
    check(x.var(ddof=1), 3.5, "float32")
