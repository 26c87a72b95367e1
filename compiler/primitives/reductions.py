"""Reductions and scans: reduce_{sum,prod,max,min,and,or,xor}, argmax/argmin, and the cumulative
family cumsum/cumprod/cummax/cummin/cumlogsumexp.

`axes` are static sorted tuples of non-negative ints; reductions drop those axes (keepdims is a
reshape above). Reductions of empty axes give the monoid's identity (0, 1, -inf/min, +inf/max,
True, False), as XLA does.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from .core import register, check_axes, check_dtype_kinds


def _identity_max(dtype):
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def _identity_min(dtype):
    if dtype.kind == "f":
        return np.inf
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max


def reduction(name, np_fn, kinds, identity):
    """Factory: a monoid reduction over static axes."""
    def abstract_eval(x, *, axes):
        check_dtype_kinds(name, x, kinds, f"dtype kinds {kinds!r}")
        check_axes(name, axes, x.ndim)
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


def _xor_reduce(x, axis):
    return np.bitwise_xor.reduce(x, axis=axis) if x.dtype != np.bool_ else \
        np.logical_xor.reduce(x, axis=axis)


reduce_sum = reduction("reduce_sum", np.sum, "iufc", lambda d: 0)
reduce_prod = reduction("reduce_prod", np.prod, "iufc", lambda d: 1)
reduce_max = reduction("reduce_max", np.max, "biuf", _identity_max)
reduce_min = reduction("reduce_min", np.min, "biuf", _identity_min)
reduce_and = reduction("reduce_and", np.all, "b", lambda d: True)
reduce_or = reduction("reduce_or", np.any, "b", lambda d: False)
reduce_xor = reduction("reduce_xor", _xor_reduce, "biu", lambda d: 0)


def _arg_eval(name):
    def abstract_eval(x, *, axes, index_dtype):
        check_axes(name, axes, x.ndim)
        if len(axes) != 1:
            raise ValueError(f"{name} reduces exactly one axis, got axes {tuple(axes)}")
        if x.shape[axes[0]] == 0:
            raise ValueError(f"{name}: attempt to get {name} of an empty sequence "
                             f"(axis {axes[0]} of shape {x.shape} has size 0)")
        if np.dtype(index_dtype).kind not in "iu":
            raise TypeError(f"{name}: index_dtype must be an integer type, got {index_dtype}")
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
        check_dtype_kinds(name, x, kinds, f"dtype kinds {kinds!r}")
        if not 0 <= axis < max(x.ndim, 1) or x.ndim == 0:
            raise ValueError(f"{name}: axis {axis} is out of bounds for array of dimension {x.ndim}")
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


cumsum = cumulative("cumsum", lambda x, axis: np.cumsum(x, axis=axis, dtype=x.dtype), "iufc")
cumprod = cumulative("cumprod", lambda x, axis: np.cumprod(x, axis=axis, dtype=x.dtype), "iufc")
cummax = cumulative("cummax", lambda x, axis: np.maximum.accumulate(x, axis=axis), "iuf")
cummin = cumulative("cummin", lambda x, axis: np.minimum.accumulate(x, axis=axis), "iuf")
cumlogsumexp = cumulative("cumlogsumexp", _cumlogsumexp, "f")
