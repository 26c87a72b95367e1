"""`kiln.numpy` reductions: sums, extrema, statistics, cumulative sums and quantiles.

Every function is plain Python over `kiln.lax`, following JAX's definitions step by step so that
values and dtypes agree: `sum`/`prod` of bools and small integers accumulate in the default
integer (unsigned in the default unsigned), float16 is accumulated in float32, `mean`/`var` of
integers give the default float, and every reduction returns a strongly typed result. `axis` is
None, an int or a tuple (negative values allowed); `keepdims`, `dtype`, `where=` and `initial=`
follow NumPy where JAX accepts them, and `out=` is refused as in JAX. Reductions without an
identity (`max`, `min`, `ptp`) of an empty axis raise unless `initial=` is given.
"""
import builtins
import math
import operator

import numpy as np

from .. import lax
from ..compiler.ir import dtypes
from ..compiler.primitives.indexing import GatherDimensionNumbers
from ._core import (check_arraylike, as_array, canonicalize_axis, broadcast_to,
                    promote_dtypes_inexact, promote_dtypes_numeric)
from ._creation import _user_dtype, _to_inexact
from ..sharding_types import out_sharding_keyword
from ._ufuncs import (where as _where, isnan, multiply, subtract, true_divide, maximum, minimum,
                      floor, ceil, less)

__all__ = ["sum", "prod", "max", "min", "amax", "amin", "all", "any", "mean", "average", "var",
           "std", "ptp", "count_nonzero", "argmax", "argmin", "nanargmax", "nanargmin", "nansum",
           "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "cumsum", "cumprod",
           "nancumsum", "nancumprod", "cumulative_sum", "cumulative_prod", "quantile",
           "nanquantile", "percentile", "nanpercentile", "median", "nanmedian"]

_all = builtins.all


# ------------------------------------------------------------------------------ helpers

def _check_out(name, out):
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported; kiln "
                                  f"arrays are immutable, use the return value instead.")


def _arraylike(name, a):
    check_arraylike(name, a)
    return as_array(a, name)


def _check_where(name, where):
    if where is None:
        return None
    where = _arraylike(name, where)
    if where.dtype != dtypes.bool_:
        raise ValueError(f"jnp.{name}: where must be None or a boolean array; got "
                         f"where.dtype={where.dtype!r}.")
    return where


def _reduction_dims(a, axis, name):
    """Canonical non-negative reduction axes (order kept); duplicates are a ValueError."""
    if axis is None:
        return tuple(range(a.ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list, np.ndarray)) else (axis,)
    dims = tuple(canonicalize_axis(x, a.ndim, f"jnp.{name}") for x in axes)
    if len(set(dims)) != len(dims):
        raise ValueError(f"duplicate value in 'axis': {axis}")
    return dims


def _upcast_f16(dtype):
    return dtypes.float32 if dtype == dtypes.float16 else dtype


def _promote_integer_dtype(dtype):
    """Small integers (and bool) accumulate in the default (unsigned) integer, as in JAX."""
    if dtype == dtypes.bool_:
        return dtypes.default_int()
    default = {"u": dtypes.default_uint(), "i": dtypes.default_int()}.get(dtype.kind)
    if default is not None and dtype.itemsize < default.itemsize:
        return default
    return dtype


def _init_value(dtype, value):
    """The identity `value` (0, 1, +-inf, True, False) as a constant of `dtype`."""
    if dtype == dtypes.bool_:
        return np.array(value > 0)
    if dtype.kind in "iu" and np.isinf(value):
        info = np.iinfo(dtype)
        return np.array(info.min if value < 0 else info.max, dtype)
    return np.array(value).astype(dtype)   # -1 is all ones in an unsigned dtype


def _cast_to_numeric(x):
    return promote_dtypes_numeric(x)[0]


def _cast_to_bool(x):
    if x.dtype.kind == "c":
        x = lax.real(x)
    return lax.convert_element_type(x, dtypes.bool_)


def _complex_extremum(reduce, fill):
    """Lexicographic max/min of complex values: the best real part, then the best imaginary
    part among the elements that reach it (NumPy's and XLA's order)."""
    def fn(x, dims):
        re, im = lax.real(x), lax.imag(x)
        best = reduce(re, dims)
        kept = tuple(i for i in range(x.ndim) if i not in dims)
        at_best = lax.eq(re, lax.broadcast_in_dim(best, x.shape, kept))
        best_im = reduce(lax.select(at_best, im, lax.full_like(im, fill)), dims)
        return lax.complex(best, best_im)
    return fn


def _real_or_complex(reduce, fill):
    complex_fn = _complex_extremum(reduce, fill)

    def fn(x, dims):
        return complex_fn(x, dims) if x.dtype.kind == "c" else reduce(x, dims)
    return fn


# op name -> (reduction over axes, binary combination used for `initial=`)
_MONOIDS = {
    "add": (lax.reduce_sum, lax.add),
    "mul": (lax.reduce_prod, lax.mul),
    "max": (_real_or_complex(lax.reduce_max, -np.inf), lax.max),
    "min": (_real_or_complex(lax.reduce_min, np.inf), lax.min),
    "and": (lax.reduce_and, lax.bitwise_and),
    "or": (lax.reduce_or, lax.bitwise_or),
    "xor": (lax.reduce_xor, lax.bitwise_xor),
}


def _reduction(a, name, op, init_val, *, has_identity=True, preproc=None, bool_op=None,
               upcast_f16_for_computation=False, axis=None, dtype=None, out=None,
               keepdims=False, initial=None, where_=None, promote_integers=False):
    """JAX's `_reduction`: one monoid reduction with dtype, where=, initial= and keepdims."""
    _check_out(name, out)
    a = _arraylike(name, a)
    where_ = _check_where(name, where_)
    if initial is None and not has_identity and where_ is not None:
        raise ValueError(f"reduction operation {name} does not have an identity, so to use a "
                         f"where mask one has to specify 'initial'")
    if preproc is not None:
        a = preproc(a)
    dims = _reduction_dims(a, axis, name)
    if initial is None and not has_identity and not _all(a.shape[d] >= 1 for d in dims):
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    if dtype is None:
        result_dtype = _promote_integer_dtype(a.dtype) if promote_integers else a.dtype
    else:
        result_dtype = _user_dtype(dtype, name)
    computation_dtype = _upcast_f16(result_dtype) if upcast_f16_for_computation and \
        dtypes.is_inexact(result_dtype) else result_dtype
    a = lax.convert_element_type(a, computation_dtype)
    reduce, combine = _MONOIDS[op if computation_dtype != dtypes.bool_ else bool_op or op]
    if where_ is not None:
        a = _where(where_, a, _init_value(a.dtype, init_val))
    result = reduce(a, dims)
    if initial is not None:
        initial_arr = lax.convert_element_type(initial, a.dtype)
        if initial_arr.shape != ():
            raise ValueError(f"initial value must be a scalar. Got array of shape "
                             f"{initial_arr.shape}")
        result = combine(initial_arr, result)
    if keepdims:
        result = lax.expand_dims(result, dims)
    return lax.convert_element_type(result, result_dtype)


# ---------------------------------------------------------------------- plain reductions

def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,  # noqa: A001
        promote_integers=True):
    """Sum of elements over `axis` (bools and small integers sum in the default integer)."""
    return _reduction(a, "sum", "add", 0, preproc=_cast_to_numeric, bool_op="or",
                      upcast_f16_for_computation=dtype is None, axis=axis, dtype=dtype, out=out,
                      keepdims=keepdims, initial=initial, where_=where,
                      promote_integers=promote_integers)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
    """Product of elements over `axis`."""
    return _reduction(a, "prod", "mul", 1, preproc=_cast_to_numeric, bool_op="and",
                      upcast_f16_for_computation=dtype is None, axis=axis, dtype=dtype, out=out,
                      keepdims=keepdims, initial=initial, where_=where,
                      promote_integers=promote_integers)


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
    """Maximum over `axis`; an empty axis needs `initial=` (NaNs propagate)."""
    return _reduction(a, "max", "max", -np.inf, has_identity=False, axis=axis, out=out,
                      keepdims=keepdims, initial=initial, where_=where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
    """Minimum over `axis`; an empty axis needs `initial=` (NaNs propagate)."""
    return _reduction(a, "min", "min", np.inf, has_identity=False, axis=axis, out=out,
                      keepdims=keepdims, initial=initial, where_=where)


def amax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Alias of `max`."""
    return max(a, axis=axis, out=out, keepdims=keepdims, initial=initial, where=where)


def amin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Alias of `min`."""
    return min(a, axis=axis, out=out, keepdims=keepdims, initial=initial, where=where)


def all(a, axis=None, out=None, keepdims=False, *, where=None):  # noqa: A001
    """Whether every element over `axis` is nonzero."""
    return _reduction(a, "all", "and", True, preproc=_cast_to_bool, axis=axis, out=out,
                      keepdims=keepdims, where_=where)


def any(a, axis=None, out=None, keepdims=False, *, where=None):  # noqa: A001
    """Whether any element over `axis` is nonzero."""
    return _reduction(a, "any", "or", False, preproc=_cast_to_bool, axis=axis, out=out,
                      keepdims=keepdims, where_=where)


def count_nonzero(a, axis=None, keepdims=False):
    """The number of nonzero elements over `axis` (default integer dtype)."""
    a = _arraylike("count_nonzero", a)
    return sum(lax.ne(a, lax.full_like(a, 0)), axis=axis, dtype=dtypes.default_int(),
               keepdims=keepdims)


def ptp(a, axis=None, out=None, keepdims=False):
    """Peak to peak: `max - min` over `axis`."""
    a = _arraylike("ptp", a)
    _check_out("ptp", out)
    return lax.sub(amax(a, axis=axis, keepdims=keepdims), amin(a, axis=axis, keepdims=keepdims))


# -------------------------------------------------------------------- argmax and argmin

def _arg_extremum(name, lax_fn, a, axis, keepdims):
    if a.dtype.kind == "c":
        raise TypeError(f"jnp.{name} does not accept dtype {a.dtype}: complex values have no "
                        f"order; take the real part or the absolute value first.")
    if axis is None:
        dims = tuple(range(a.ndim))
        a = lax.reshape(a, (a.size,))
        axis = 0
    else:
        axis = canonicalize_axis(axis, a.ndim, f"jnp.{name}")
        dims = (axis,)
    if a.shape[axis] == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    result = lax_fn(a, axis, dtypes.default_int())
    return lax.expand_dims(result, dims) if keepdims else result


def _arg_axis(axis):
    return None if axis is None else operator.index(axis)


def argmax(a, axis=None, out=None, keepdims=None):
    """Index of the (first) maximum over `axis` (of the flattened array when None)."""
    a = _arraylike("argmax", a)
    _check_out("argmax", out)
    return _arg_extremum("argmax", lax.argmax, a, _arg_axis(axis), bool(keepdims))


def argmin(a, axis=None, out=None, keepdims=None):
    """Index of the (first) minimum over `axis` (of the flattened array when None)."""
    a = _arraylike("argmin", a)
    _check_out("argmin", out)
    return _arg_extremum("argmin", lax.argmin, a, _arg_axis(axis), bool(keepdims))


def _nan_arg_extremum(name, arg_fn, fill, a, axis, out, keepdims):
    a = _arraylike(name, a)
    _check_out(name, out)
    axis, keepdims = _arg_axis(axis), bool(keepdims)
    if not dtypes.is_inexact(a.dtype):
        return arg_fn(a, axis=axis, keepdims=keepdims)
    nan_mask = isnan(a)
    res = arg_fn(_where(nan_mask, fill, a), axis=axis, keepdims=keepdims)
    return _where(all(nan_mask, axis=axis, keepdims=keepdims), -1, res)


def nanargmax(a, axis=None, out=None, keepdims=None):
    """`argmax` ignoring NaNs; -1 where a slice is all NaN (as in JAX)."""
    return _nan_arg_extremum("nanargmax", argmax, -np.inf, a, axis, out, keepdims)


def nanargmin(a, axis=None, out=None, keepdims=None):
    """`argmin` ignoring NaNs; -1 where a slice is all NaN (as in JAX)."""
    return _nan_arg_extremum("nanargmin", argmin, np.inf, a, axis, out, keepdims)


# ---------------------------------------------------------------- mean, var, std, average

def _count(a, dims, keepdims, where, dtype):
    """The number of elements each reduction sees, as an array of `dtype`."""
    if where is None:
        return as_array(np.array(math.prod(a.shape[d] for d in dims), dtype))
    return sum(broadcast_to(where, a.shape), dims, dtype=dtype, keepdims=keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Arithmetic mean over `axis` (integers give the default float; float16 sums in float32)."""
    return _mean(a, axis, dtype, out, keepdims, where, dtype is None)


def _mean(a, axis, dtype, out, keepdims, where, upcast_f16_for_computation):
    a = _arraylike("mean", a)
    where = _check_where("mean", where)
    _check_out("mean", out)
    result_dtype = _to_inexact(a.dtype) if dtype is None else _user_dtype(dtype, "mean")
    computation_dtype = _upcast_f16(result_dtype) if upcast_f16_for_computation and \
        dtypes.is_inexact(result_dtype) else result_dtype
    total = sum(a, axis, dtype=computation_dtype, keepdims=keepdims, where=where)
    normalizer = _count(a, _reduction_dims(a, axis, "mean"), keepdims, where, computation_dtype)
    return lax.convert_element_type(lax.div(total, normalizer), result_dtype)


def _var_promote_types(a_dtype, dtype):
    """(computation dtype, result dtype) of var/std, as JAX chooses them."""
    if dtype is not None:
        if not dtypes.is_complex(dtype) and dtypes.is_complex(a_dtype):
            raise ValueError("jax.numpy.var does not yet support real dtype parameters when "
                             "computing the variance of an array of complex values. The "
                             "semantics of numpy.var seem unclear in this case.")
        computation_dtype = dtype
    elif not dtypes.is_inexact(a_dtype):
        dtype = computation_dtype = _to_inexact(a_dtype)
    else:
        dtype = np.dtype(np.finfo(a_dtype).dtype)  # complex variances are real
        computation_dtype = a_dtype
    return _upcast_f16(computation_dtype), np.dtype(dtype)


def _correction(ddof, correction):
    if correction is None:
        return ddof
    if not isinstance(ddof, int) or ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


def _abs2(centered):
    if centered.dtype.kind == "c":
        return lax.real(lax.mul(centered, lax.conj(centered)))
    return lax.square(centered)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """Variance over `axis` with `ddof` (or `correction`) degrees of freedom removed."""
    correction = _correction(ddof, correction)
    a = _arraylike("var", a)
    return _var(a, axis, dtype, out, correction, keepdims, where, mean)


def _var(a, axis, dtype, out, correction, keepdims, where, a_mean):
    where = _check_where("var", where)
    if dtype is not None:
        dtype = _user_dtype(dtype, "var")
    _check_out("var", out)
    computation_dtype, dtype = _var_promote_types(a.dtype, dtype)
    a = lax.convert_element_type(a, computation_dtype)
    if a_mean is None:
        a_mean = mean(a, axis, dtype=computation_dtype, keepdims=True, where=where)
    else:
        a_mean = lax.convert_element_type(_arraylike("var", a_mean), computation_dtype)
    centered = _abs2(lax.sub(a, broadcast_to(a_mean, a.shape)))
    computation_dtype = centered.dtype
    dims = _reduction_dims(a, axis, "var")
    normalizer = lax.sub(_count(a, dims, keepdims, where, computation_dtype),
                         lax.convert_element_type(correction, computation_dtype))
    result = sum(centered, axis, dtype=computation_dtype, keepdims=keepdims, where=where)
    result = lax.convert_element_type(lax.div(result, normalizer), dtype)
    return _where(lax.gt(normalizer, lax.full_like(normalizer, 0)), result, np.nan)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """Standard deviation: the square root of `var`."""
    correction = _correction(ddof, correction)
    a = _arraylike("std", a)
    _check_where("std", where)
    if dtype is not None:
        dtype = _user_dtype(dtype, "std")
        if not dtypes.is_inexact(dtype):
            raise ValueError(f"dtype argument to jnp.std must be inexact; got {dtype}")
    _check_out("std", out)
    return lax.sqrt(_var(a, axis, dtype, None, correction, keepdims, where, mean))


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """Weighted average over `axis`; with `returned=True` also the sum of the weights."""
    if weights is None:
        (a,) = promote_dtypes_inexact(_arraylike("average", a))
        avg = mean(a, axis=axis, keepdims=keepdims)
        size = math.prod(a.shape[d] for d in _reduction_dims(a, axis, "average"))
        weights_sum = lax.full((), size, dtype=avg.dtype)
    else:
        check_arraylike("average", a, weights)
        a, weights = promote_dtypes_inexact(a, weights)
        if a.shape != weights.shape:
            weights = _align_weights(a, weights, axis)
        weights_sum = sum(weights, axis=axis, keepdims=keepdims)
        avg = true_divide(sum(multiply(a, weights), axis=axis, keepdims=keepdims), weights_sum)
    if not returned:
        return avg
    if avg.shape != weights_sum.shape:
        weights_sum = broadcast_to(weights_sum, avg.shape)
    return avg, weights_sum


def _align_weights(a, weights, axis):
    """1-D (or axis-shaped) weights reshaped to broadcast against `a` along `axis`."""
    if axis is None:
        raise ValueError("Axis must be specified when shapes of a and weights differ.")
    axes = _reduction_dims(a, axis, "average")
    if weights.shape != tuple(a.shape[ax] for ax in axes):
        raise ValueError("Shape of weights must be consistent with shape of a along specified "
                         "axis.")
    new_shape = tuple(d if i in axes else 1 for i, d in enumerate(a.shape))
    return lax.reshape(weights, new_shape, dimensions=tuple(np.argsort(axes)))


# ----------------------------------------------------------------------- NaN-ignoring

def _nan_reduction(a, name, reduction, init_val, nan_if_all_nan, axis=None, keepdims=False,
                   where=None, **kwargs):
    a = _arraylike(name, a)
    where = _check_where(name, where)
    if not dtypes.is_inexact(a.dtype):
        return reduction(a, axis=axis, keepdims=keepdims, where=where, **kwargs)
    nan_mask = isnan(a)
    out = reduction(_where(nan_mask, _init_value(a.dtype, init_val), a), axis=axis,
                    keepdims=keepdims, where=where, **kwargs)
    if nan_if_all_nan:
        return _where(all(nan_mask, axis=axis, keepdims=keepdims), np.nan, out)
    return out


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """`min` ignoring NaNs (NaN where a slice is all NaN and no `initial` is given)."""
    return _nan_reduction(a, "nanmin", min, np.inf, initial is None, axis=axis, out=out,
                          keepdims=keepdims, initial=initial, where=where)


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """`max` ignoring NaNs (NaN where a slice is all NaN and no `initial` is given)."""
    return _nan_reduction(a, "nanmax", max, -np.inf, initial is None, axis=axis, out=out,
                          keepdims=keepdims, initial=initial, where=where)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """`sum` treating NaNs as zero."""
    if dtype is not None:
        dtype = _user_dtype(dtype, "nansum")
    return _nan_reduction(a, "nansum", sum, 0, False, axis=axis, dtype=dtype, out=out,
                          keepdims=keepdims, initial=initial, where=where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """`prod` treating NaNs as one."""
    if dtype is not None:
        dtype = _user_dtype(dtype, "nanprod")
    return _nan_reduction(a, "nanprod", prod, 1, False, axis=axis, dtype=dtype, out=out,
                          keepdims=keepdims, initial=initial, where=where)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """`mean` of the non-NaN elements (NaN where a slice is all NaN)."""
    a = _arraylike("nanmean", a)
    where = _check_where("nanmean", where)
    _check_out("nanmean", out)
    if not dtypes.is_inexact(a.dtype):
        return mean(a, axis, dtype, None, keepdims, where=where)
    dtype = _to_inexact(a.dtype) if dtype is None else _user_dtype(dtype, "nanmean")
    normalizer = sum(lax.bitwise_not(isnan(a)), axis=axis, dtype=dtype, keepdims=keepdims,
                     where=where)
    return lax.div(nansum(a, axis, dtype=dtype, keepdims=keepdims, where=where), normalizer)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    """`var` of the non-NaN elements."""
    a = _arraylike("nanvar", a)
    where = _check_where("nanvar", where)
    if dtype is not None:
        dtype = _user_dtype(dtype, "nanvar")
    _check_out("nanvar", out)
    computation_dtype, dtype = _var_promote_types(a.dtype, dtype)
    a = lax.convert_element_type(a, computation_dtype)
    if mean is None:
        a_mean = nanmean(a, axis, dtype=computation_dtype, keepdims=True, where=where)
    else:
        a_mean = lax.convert_element_type(_arraylike("nanvar", mean), computation_dtype)
    nan_mask = isnan(a)
    centered = _abs2(_where(nan_mask, 0, lax.sub(a, broadcast_to(a_mean, a.shape))))
    normalizer = subtract(sum(lax.bitwise_not(nan_mask), axis=axis, keepdims=keepdims,
                              where=where), ddof)
    empty = lax.le(normalizer, lax.full_like(normalizer, 0))
    result = _where(empty, np.nan, sum(centered, axis, keepdims=keepdims, where=where))
    divisor = lax.convert_element_type(_where(empty, 1, normalizer), result.dtype)
    return lax.convert_element_type(lax.div(result, divisor), dtype)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    """`std` of the non-NaN elements."""
    a = _arraylike("nanstd", a)
    _check_where("nanstd", where)
    if dtype is not None:
        dtype = _user_dtype(dtype, "nanstd")
    _check_out("nanstd", out)
    return lax.sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where,
                           mean=mean))


# ------------------------------------------------------------------------- cumulative

def _cumulative_reduction(name, scan, a, axis, dtype, out=None, fill_nan=False, fill_value=0,
                          promote_integers=False):
    a = _arraylike(name, a)
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported")
    if axis is None or a.ndim == 0:
        a = lax.reshape(a, (a.size,))
    axis = canonicalize_axis(0 if axis is None else axis, a.ndim, f"jnp.{name}")
    if fill_nan and dtypes.is_inexact(a.dtype):
        a = _where(isnan(a), _init_value(a.dtype, fill_value), a)
    if dtype is None:
        result_type = _promote_integer_dtype(a.dtype) \
            if promote_integers or a.dtype == dtypes.bool_ else a.dtype
        computation_type = result_type
    else:
        result_type = _user_dtype(dtype, name)
        computation_type = result_type
        if result_type == dtypes.bool_:
            if a.dtype != dtypes.bool_:
                a = lax.ne(a, lax.full_like(a, 0))
            computation_type = dtypes.default_int()
    a = lax.convert_element_type(a, computation_type)
    return lax.convert_element_type(scan(a, axis), result_type)


def cumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum along `axis` (of the flattened array when None)."""
    return _cumulative_reduction("cumsum", lax.cumsum, a, axis, dtype, out)


def cumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product along `axis` (of the flattened array when None)."""
    return _cumulative_reduction("cumprod", lax.cumprod, a, axis, dtype, out)


def nancumsum(a, axis=None, dtype=None, out=None):
    """`cumsum` treating NaNs as zero."""
    return _cumulative_reduction("nancumsum", lax.cumsum, a, axis, dtype, out, fill_nan=True,
                                 fill_value=0)


def nancumprod(a, axis=None, dtype=None, out=None):
    """`cumprod` treating NaNs as one."""
    return _cumulative_reduction("nancumprod", lax.cumprod, a, axis, dtype, out,
                                 fill_nan=True, fill_value=1)


def _cumulative_api(name, what, scan, identity, x, axis, dtype, include_initial):
    """The array-API `cumulative_sum`/`cumulative_prod` (axis optional only for 1-D input)."""
    x = _arraylike(name, x)
    if x.ndim == 0:
        raise ValueError(f"The input must be non-scalar to take a cumulative {what}, however a "
                         f"scalar value or scalar array was given.")
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"The input array has rank {x.ndim}, however axis was not set to "
                             f"an explicit value. The axis argument is only optional for "
                             f"one-dimensional arrays.")
        axis = 0
    axis = canonicalize_axis(axis, x.ndim, f"jnp.{name}")
    if dtype is not None:
        dtype = _user_dtype(dtype, name)
    out = _cumulative_reduction(name, scan, x, axis, dtype, promote_integers=what == "sum")
    if include_initial:
        shape = list(x.shape)
        shape[axis] = 1
        out = lax.concatenate([lax.full(shape, identity, dtype=out.dtype), out], axis)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array-API cumulative sum (small integers accumulate in the default integer)."""
    return _cumulative_api("cumulative_sum", "sum", lax.cumsum, 0, x, axis, dtype,
                           include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array-API cumulative product."""
    return _cumulative_api("cumulative_prod", "product", lax.cumprod, 1, x, axis, dtype,
                           include_initial)


# -------------------------------------------------------------------------- quantiles

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """The `q`-th quantiles (q in [0, 1], a scalar or 1-D array) over `axis`."""
    return _quantile_api("quantile", a, q, axis, out, overwrite_input, method, keepdims,
                         weights, False)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    """`quantile` of the non-NaN elements."""
    return _quantile_api("nanquantile", a, q, axis, out, overwrite_input, method, keepdims,
                         weights, True)


@out_sharding_keyword
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """The `q`-th percentiles (q in [0, 100]) over `axis`."""
    check_arraylike("percentile", a, q)
    (q,) = promote_dtypes_inexact(q)
    return quantile(a, true_divide(q, 100), axis=axis, out=out,
                    overwrite_input=overwrite_input, method=method, keepdims=keepdims,
                    weights=weights)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    """`percentile` of the non-NaN elements."""
    check_arraylike("nanpercentile", a, q)
    (q,) = promote_dtypes_inexact(q)
    return nanquantile(a, true_divide(q, 100), axis=axis, out=out,
                       overwrite_input=overwrite_input, method=method, keepdims=keepdims,
                       weights=weights)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median over `axis` (the mean of the two middle values for even counts)."""
    check_arraylike("median", a)
    return quantile(a, 0.5, axis=axis, out=out, overwrite_input=overwrite_input,
                    keepdims=keepdims, method="midpoint")


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median of the non-NaN elements over `axis`."""
    check_arraylike("nanmedian", a)
    return nanquantile(a, 0.5, axis=axis, out=out, overwrite_input=overwrite_input,
                       keepdims=keepdims, method="midpoint")


def _quantile_api(name, a, q, axis, out, overwrite_input, method, keepdims, weights,
                  squash_nans):
    check_arraylike(name, a, q)
    if weights is not None:
        check_arraylike(name, weights)
    if overwrite_input or out is not None:
        raise ValueError(f"jax.numpy.{name} does not support overwrite_input=True or "
                         f"out != None")
    return _quantile(as_array(a), as_array(q), axis, method, keepdims, squash_nans,
                     None if weights is None else as_array(weights))


def _quantile_weights(a, weights, axis, method):
    if weights.dtype.kind == "c":
        raise ValueError("Weights cannot be complex types.")
    if method != "inverted_cdf":
        raise NotImplementedError(f"{method} doesn't support weights. Only method "
                                  f"'inverted_cdf' supports weights.")
    a, weights = promote_dtypes_inexact(a, weights)
    if weights.shape == a.shape:
        return a, weights
    if axis is None:
        raise ValueError("Weights shape must match 'a' shape when axis is None.")
    axes = _reduction_dims(a, axis, "quantile")
    if weights.shape != tuple(a.shape[ax] for ax in axes):
        raise ValueError(f"Weights shape {weights.shape} must match reduction axes "
                         f"{tuple(a.shape[ax] for ax in axes)}")
    order = tuple(int(i) for i in np.argsort(axes))
    weights = lax.transpose(weights, order)
    return a, lax.broadcast_in_dim(weights, a.shape, tuple(sorted(axes)))


def _move_axes_last(x, axes):
    """Merge `axes` of x into one trailing axis (the others keep their order)."""
    keep = [d for d in range(x.ndim) if d not in axes]
    perm = tuple(keep) + tuple(sorted(axes))
    shape = tuple(x.shape[d] for d in keep) + (math.prod(x.shape[d] for d in axes),)
    return lax.reshape(x, shape, dimensions=perm)


def _take_points(a, index):
    """a[index[0], ..., index[n-1]] for integer arrays of one shape (an XLA gather)."""
    shape = index[0].shape
    if math.prod(shape) == 0:
        return lax.full(shape, 0, a.dtype)
    idx = lax.concatenate([lax.reshape(lax.convert_element_type(i, dtypes.int32), shape + (1,))
                           for i in index], len(shape))
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(a.ndim)),
                                   start_index_map=tuple(range(a.ndim)))
    return lax.gather(a, idx, dnums, (1,) * a.ndim, mode="clip")


def _quantile(a, q, axis, method, keepdims, squash_nans, weights):
    if method not in _METHODS:
        raise ValueError("method can only be 'linear', 'lower', 'higher', 'midpoint', "
                         "'nearest' or 'inverted_cdf'")
    if weights is not None:
        a, weights = _quantile_weights(a, weights, axis, method)
    else:
        (a,) = promote_dtypes_inexact(a)
    if a.dtype.kind == "c":
        raise ValueError("quantile does not support complex input, as the operation is poorly "
                         "defined.")
    keepdim = []
    if axis is None:
        keepdim = [1] * a.ndim if keepdims else []
        a = lax.reshape(a, (a.size,))
        weights = None if weights is None else lax.reshape(weights, (weights.size,))
        axis = 0
    elif isinstance(axis, (tuple, list)):
        axes = _reduction_dims(a, tuple(axis), "quantile")
        keepdim = [1 if d in axes else n for d, n in enumerate(a.shape)]
        a = _move_axes_last(a, axes)
        weights = None if weights is None else _move_axes_last(weights, axes)
        axis = a.ndim - 1
    else:
        axis = canonicalize_axis(axis, a.ndim, "jnp.quantile")
    if q.ndim > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {q.shape}")
    if a.shape[axis] == 0:
        raise TypeError(f"jnp.quantile: cannot take a quantile over an axis of size 0 (axis "
                        f"{axis} of shape {a.shape})")
    if not squash_nans:
        a = _where(any(isnan(a), axis=axis, keepdims=True), np.nan, a)
    if weights is None:
        a = lax.sort(a, dimension=axis)
    else:
        a, weights = lax.sort((a, weights), dimension=axis, num_keys=1)
    nan_data = isnan(a)
    if method == "inverted_cdf":
        result = _inverted_cdf(a, q, axis, keepdims, squash_nans, weights, nan_data)
    else:
        low_value, high_value, high_weight = _neighbours(a, q, axis, keepdims, squash_nans)
        result = _interpolate(method, low_value, high_value, high_weight, q.dtype)
    if keepdims and keepdim:
        result = lax.reshape(result, tuple(q.shape) + tuple(keepdim))
    return lax.convert_element_type(result, a.dtype)


def _neighbours(a, q, axis, keepdims, squash_nans):
    """The sorted values just below and above each quantile, and the upper one's weight."""
    q_ndim = q.ndim
    n_after = a.ndim if keepdims else a.ndim - 1
    q = lax.expand_dims(q, tuple(range(q_ndim, q_ndim + n_after)))
    if squash_nans:
        counts = sum(lax.bitwise_not(isnan(a)), axis=axis, dtype=q.dtype, keepdims=keepdims)
        last = subtract(lax.expand_dims(counts, tuple(range(q_ndim))), 1)
    else:
        last = subtract(lax.convert_element_type(a.shape[axis], q.dtype), 1)
    pos = multiply(q, last)
    low, high = floor(pos), ceil(pos)
    high_weight = subtract(pos, low)
    low = maximum(0, minimum(low, last))
    high = maximum(0, minimum(high, last))
    return _gather_at(a, low, axis, keepdims), _gather_at(a, high, axis, keepdims), high_weight


def _gather_at(a, pos, axis, keepdims):
    """a at index `pos` along `axis`; pos has shape q_shape + (the kept shape of a)."""
    n_after = a.ndim if keepdims else a.ndim - 1
    q_ndim = pos.ndim - n_after
    after = tuple(1 if d == axis else n for d, n in enumerate(a.shape) if keepdims or d != axis)
    pos = broadcast_to(lax.convert_element_type(pos, dtypes.int32), pos.shape[:q_ndim] + after)
    out_shape = pos.shape
    index = [lax.broadcasted_iota(dtypes.int32, out_shape, q_ndim + d) for d in range(n_after)]
    if keepdims:
        index[axis] = pos
    else:
        index.insert(axis, pos)
    return _take_points(a, index)


def _interpolate(method, low_value, high_value, high_weight, q_dtype):
    if method == "linear":
        low_weight = subtract(1, high_weight)
        return lax.add(multiply(lax.convert_element_type(low_value, q_dtype), low_weight),
                       multiply(lax.convert_element_type(high_value, q_dtype), high_weight))
    if method == "lower":
        return low_value
    if method == "higher":
        return high_value
    if method == "nearest":
        return _where(lax.le(high_weight, lax.full_like(high_weight, 0.5)), low_value,
                      high_value)
    return multiply(lax.add(low_value, high_value), lax.full_like(low_value, 0.5))


def _inverted_cdf(a, q, axis, keepdims, squash_nans, weights, nan_data):
    """The smallest sorted value whose cumulative weight reaches q * (total weight)."""
    q_ndim = q.ndim
    if weights is None:
        weights = lax.full_like(a, 1.0)
    zeros = lax.full_like(weights, 0)
    bad_weights = lax.bitwise_or(lax.lt(weights, zeros), isnan(weights))
    clean = lax.select(lax.bitwise_or(bad_weights, nan_data), zeros, weights)
    cum = cumsum(clean, axis=axis)
    total = lax.index_in_dim(cum, -1, axis=axis, keepdims=keepdims)
    target = multiply(lax.reshape(q, q.shape + (1,) * total.ndim),
                      lax.expand_dims(total, tuple(range(q_ndim))))
    if not keepdims:
        target = lax.expand_dims(target, (axis + q_ndim,))
    is_less = less(lax.expand_dims(cum, tuple(range(q_ndim))), target)
    idx = sum(lax.convert_element_type(is_less, dtypes.default_int()), axis=axis + q_ndim,
              keepdims=keepdims)
    if squash_nans:
        valid = sum(lax.bitwise_not(nan_data), axis=axis, dtype=q.dtype, keepdims=keepdims)
    else:
        valid = lax.full_like(total, a.shape[axis], dtype=q.dtype)
    max_idx = lax.expand_dims(lax.convert_element_type(subtract(valid, 1), idx.dtype),
                              tuple(range(q_ndim)))
    idx = maximum(0, minimum(idx, max_idx))
    if keepdims:
        idx = lax.squeeze(idx, (q_ndim + axis,))
    result = _gather_at(a, idx, axis, False)
    if keepdims:
        result = lax.expand_dims(result, (q_ndim + axis,))
    all_nan = lax.eq(valid, lax.full_like(valid, 0))
    any_bad = any(bad_weights, axis=axis, keepdims=keepdims)
    missing = all_nan if squash_nans else any(nan_data, axis=axis, keepdims=keepdims)
    force_nan = lax.expand_dims(lax.bitwise_or(any_bad, missing), tuple(range(q_ndim)))
    return _where(force_nan, np.nan, result)
