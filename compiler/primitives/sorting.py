"""sort: a stable (optionally) multi-operand sort along one dimension.

The first `num_keys` operands are keys compared lexicographically; every operand is permuted
the same way. Floating-point keys use the total order of JAX/XLA: -NaN < -inf < ... < -0.0 <
0.0 < ... < inf < NaN (NaNs last, as NumPy).
"""
import numpy as np

from ..ir.abstract import ShapedArray
from .core import register, type_error


def _sort_eval(*xs, dimension, is_stable=True, num_keys=1):
    if not xs:
        raise type_error("sort", "requires at least one operand")
    shape = xs[0].shape
    for x in xs:
        if x.shape != shape:
            raise type_error("sort", f"operands must all have the same shape, got "
                             + ", ".join(str(y.shape) for y in xs))
    if not 0 <= dimension < max(len(shape), 1) or not shape:
        raise ValueError(f"sort: dimension {dimension} out of range for shape {shape}")
    if not 1 <= num_keys <= len(xs):
        raise ValueError(f"sort: num_keys={num_keys} must be between 1 and {len(xs)}")
    return tuple(ShapedArray(x.shape, x.dtype, x.weak_type) for x in xs)


def _total_order_key(x):
    """An integer key whose order is the float total order (-0.0 before 0.0, NaN last)."""
    if x.dtype.kind != "f":
        return x
    bits = x.dtype.itemsize * 8
    x = np.where(np.isnan(x), np.asarray(np.nan, x.dtype), x)  # one canonical (positive) NaN
    i = x.view(np.dtype(f"i{x.dtype.itemsize}")).astype(np.int64)
    mask = np.int64((1 << (bits - 1)) - 1)
    return np.where(i < 0, i ^ mask, i)


def _sort(*xs, dimension, is_stable=True, num_keys=1):
    keys = [_total_order_key(k) for k in xs[:num_keys]]
    moved = [np.moveaxis(k, dimension, -1) for k in keys]
    if len(moved) == 1:
        perm = np.argsort(moved[0], axis=-1, kind="stable")
    else:
        perm = np.lexsort(moved[::-1], axis=-1)
    perm = np.moveaxis(perm, -1, dimension)
    return tuple(np.take_along_axis(x, perm, axis=dimension) for x in xs)


sort = register("sort", _sort_eval, _sort, multiple_results=True)
