"""Reductions and scans: reduce_{sum,prod,max,min,and,or,xor}, argmax/argmin, and the cumulative
family cumsum/cumprod/cummax/cummin/cumlogsumexp.

`axes` are static sorted tuples of non-negative ints; reductions drop those axes (keepdims is a
reshape above). Reductions of empty axes give the monoid's identity (0, 1, -inf/min, +inf/max,
True, False), as XLA does.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from .core import register, check_dtype_kinds

NUMBER, ANY, ORDERED, FLOAT, LOGICAL = "iufc", "biufc", "biuf", "f", "biu"
_KIND_TEXT = {NUMBER: "subtypes of number", ANY: "any dtype", FLOAT: "subtypes of floating",
              ORDERED: "subtypes of integer, floating, bool"}


def _identity_max(dtype):
    if dtype.kind in "fc":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def _identity_min(dtype):
    if dtype.kind in "fc":
        return np.inf
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max


def check_reduction_axes(x, axes):
    """JAX's errors for reduction axes (rank-checked, no duplicates)."""
    if any(not 0 <= a < x.ndim for a in axes):
        raise ValueError(f"reduction axes {tuple(axes)} contains out-of-bounds indices for "
                         f"{x.dtype}[{','.join(map(str, x.shape))}].")
    if len(set(axes)) != len(axes):
        raise ValueError(f"duplicate value in 'axes' of reduction: {tuple(axes)}")


def _check_logical(name, x):
    if x.dtype.kind not in "biu":
        raise TypeError(f"logical reduction requires operand dtype bool or int, got {x.dtype}.")


def _logical_reduce(logical, bitwise):
    def reduce(x, axis):
        return (logical if x.dtype == np.bool_ else bitwise).reduce(x, axis=axis)
    return reduce


def reduction(name, np_fn, kinds, identity):
    """Factory: a monoid reduction over static axes."""
    def abstract_eval(x, *, axes):
        if kinds == LOGICAL:
            _check_logical(name, x)
        else:
            check_dtype_kinds(name, x, kinds, _KIND_TEXT[kinds])
        check_reduction_axes(x, axes)
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes),
                           x.dtype, x.weak_type)

    def impl(x, *, axes):
        if x.size == 0 or not axes:
            if not axes:
                return np.array(x, copy=True)
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
            return np.full(shape, identity(x.dtype), x.dtype)
        with np.errstate(all="ignore"):
            return np.asarray(np_fn(x, axis=tuple(axes))).astype(x.dtype)
    return register(name, abstract_eval, impl)


reduce_sum = reduction("reduce_sum", np.sum, NUMBER, lambda d: 0)
reduce_prod = reduction("reduce_prod", np.prod, NUMBER, lambda d: 1)
reduce_max = reduction("reduce_max", np.max, ANY, _identity_max)
reduce_min = reduction("reduce_min", np.min, ANY, _identity_min)
# On integers the logical reductions are bitwise (identity of `and`: all bits set).
reduce_and = reduction("reduce_and", _logical_reduce(np.logical_and, np.bitwise_and), LOGICAL,
                       lambda d: True if d == np.bool_ else np.invert(np.zeros((), d)))
reduce_or = reduction("reduce_or", _logical_reduce(np.logical_or, np.bitwise_or), LOGICAL,
                      lambda d: False)
reduce_xor = reduction("reduce_xor", _logical_reduce(np.logical_xor, np.bitwise_xor), LOGICAL,
                       lambda d: False)


def _arg_eval(name):
    def abstract_eval(x, *, axes, index_dtype):
        if len(axes) != 1 or not 0 <= axes[0] < x.ndim:
            raise ValueError(f"Invalid axis {axes[0] if len(axes) == 1 else tuple(axes)} for "
                             f"operand shape {x.shape}")
        check_dtype_kinds(name, x, ORDERED, _KIND_TEXT[ORDERED])
        if x.shape[axes[0]] == 0:
            raise ValueError(f"argmin and argmax require non-empty reduced dimension. "
                             f"operand.shape={x.shape} axis={axes[0]}")
        if np.dtype(index_dtype).kind not in "iu":
            raise TypeError(f"index_dtype must be an integer type, but got "
                            f"{np.dtype(index_dtype)}")
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i != axes[0]),
                           index_dtype, False)
    return abstract_eval


def _argminmax(np_arg):
    def impl(x, *, axes, index_dtype):
        axis = axes[0]
        if x.dtype.kind == "f":
            # NaN wins, as in JAX/NumPy: the first NaN's index.
            nan = np.isnan(x)
            any_nan = nan.any(axis=axis)
            out = np.where(any_nan, np.argmax(nan, axis=axis), np_arg(np.where(nan, 0, x), axis=axis))
        else:
            out = np_arg(x, axis=axis)
        return np.asarray(out).astype(index_dtype)
    return impl


argmax = register("argmax", _arg_eval("argmax"), _argminmax(np.argmax))
argmin = register("argmin", _arg_eval("argmin"), _argminmax(np.argmin))


def cumulative(name, accumulate, kinds):
    """Factory: an inclusive scan along one axis, optionally from the end."""
    def abstract_eval(x, *, axis, reverse=False):
        check_dtype_kinds(name, x, kinds, _KIND_TEXT[kinds])
        if not 0 <= axis < x.ndim:
            raise ValueError(f"axis {axis} is out of bounds for array of shape {x.shape}")
        return x

    def impl(x, *, axis, reverse=False):
        if reverse:
            x = np.flip(x, axis)
        with np.errstate(all="ignore"):
            out = np.asarray(accumulate(x, axis)).astype(x.dtype)
        return np.flip(out, axis) if reverse else out
    return register(name, abstract_eval, impl)


def _cumlogsumexp(x, axis):
    return np.logaddexp.accumulate(x, axis=axis)


cumsum = cumulative("cumsum", lambda x, axis: np.cumsum(x, axis=axis, dtype=x.dtype), NUMBER)
cumprod = cumulative("cumprod", lambda x, axis: np.cumprod(x, axis=axis, dtype=x.dtype), NUMBER)
cummax = cumulative("cummax", lambda x, axis: np.maximum.accumulate(x, axis=axis), NUMBER)
cummin = cumulative("cummin", lambda x, axis: np.minimum.accumulate(x, axis=axis), NUMBER)
cumlogsumexp = cumulative("cumlogsumexp", _cumlogsumexp, FLOAT)
