"""Shape-changing primitives: iota, broadcast_in_dim, reshape, transpose, squeeze, rev, slice,
pad, concatenate.

These move or replicate elements without arithmetic. Their params are static tuples of Python
ints (hashable), so the specialiser can fold them and the backends can compute strides at
compile time.
"""
import numpy as np

from ..ir.abstract import ShapedArray, shape_str
from .core import register, type_error, check_axes, check_shape, check_same_dtypes


def _iota_eval(*, dtype, shape, dimension):
    shape = check_shape("iota", shape)
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota: dimension {dimension} out of range for shape {shape}")
    return ShapedArray(shape, dtype, False)


def _iota(*, dtype, shape, dimension):
    ar = np.arange(shape[dimension], dtype=dtype)
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.broadcast_to(ar.reshape(view), shape).copy()


iota = register("iota", _iota_eval, _iota)


def _broadcast_in_dim_eval(x, *, shape, broadcast_dimensions):
    shape = check_shape("broadcast_in_dim", shape)
    if len(broadcast_dimensions) != x.ndim:
        raise type_error("broadcast_in_dim", f"broadcast_dimensions must have length equal to "
                         f"operand ndim; got broadcast_dimensions {broadcast_dimensions} for "
                         f"operand ndim {x.ndim}.")
    check_axes("broadcast_in_dim", broadcast_dimensions, len(shape), "broadcast_dimensions")
    if list(broadcast_dimensions) != sorted(broadcast_dimensions):
        raise type_error("broadcast_in_dim", f"broadcast_dimensions must be strictly "
                         f"increasing; got {broadcast_dimensions}")
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] not in (1, shape[d]):
            raise type_error("broadcast_in_dim", f"operand dimension sizes must either be 1, or "
                             f"be equal to their corresponding dimensions in the target "
                             f"broadcast shape; got operand of shape {shape_str(x.shape)}, "
                             f"target broadcast shape {shape_str(shape)}, "
                             f"broadcast_dimensions {broadcast_dimensions}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _broadcast_in_dim(x, *, shape, broadcast_dimensions):
    view = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        view[d] = x.shape[i]
    return np.broadcast_to(x.reshape(view), shape)


broadcast_in_dim = register("broadcast_in_dim", _broadcast_in_dim_eval, _broadcast_in_dim)


def _reshape_eval(x, *, new_sizes, dimensions=None):
    new_sizes = check_shape("reshape", new_sizes)
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise type_error("reshape", f"total size of new array must be unchanged: cannot reshape "
                         f"array of shape {shape_str(x.shape)} (size {x.size}) into shape "
                         f"{shape_str(new_sizes)} (size {int(np.prod(new_sizes))})")
    if dimensions is not None:
        check_axes("reshape", dimensions, x.ndim, "dimensions")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def _reshape(x, *, new_sizes, dimensions=None):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return np.reshape(x, new_sizes)


reshape = register("reshape", _reshape_eval, _reshape)


def _transpose_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise ValueError(f"transpose permutation isn't a permutation of operand dimensions, got "
                         f"permutation {tuple(permutation)} for operand shape "
                         f"{shape_str(x.shape)}.")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


transpose = register("transpose", _transpose_eval, lambda x, *, permutation: np.transpose(x, permutation))


def _squeeze_eval(x, *, dimensions):
    check_axes("squeeze", dimensions, x.ndim, "dimensions")
    for d in dimensions:
        if x.shape[d] != 1:
            raise ValueError(f"cannot select an axis to squeeze out which has size not equal to "
                             f"one, got shape={shape_str(x.shape)} and dimensions={tuple(dimensions)}")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions),
                       x.dtype, x.weak_type)


squeeze = register("squeeze", _squeeze_eval,
                   lambda x, *, dimensions: np.reshape(x, [s for i, s in enumerate(x.shape)
                                                           if i not in dimensions]))


def _rev_eval(x, *, dimensions):
    check_axes("rev", dimensions, x.ndim, "dimensions")
    return x


rev = register("rev", _rev_eval, lambda x, *, dimensions: np.flip(x, dimensions) if dimensions else x)


def _slice_eval(x, *, start_indices, limit_indices, strides=None):
    if not (len(start_indices) == len(limit_indices) == x.ndim):
        raise type_error("slice", f"start_indices {start_indices} and limit_indices "
                         f"{limit_indices} must have one entry per dimension of the operand "
                         f"of shape {shape_str(x.shape)}")
    strides = strides or (1,) * x.ndim
    out = []
    for s, l, st, d in zip(start_indices, limit_indices, strides, x.shape):
        if not 0 <= s <= l <= d or st < 1:
            raise type_error("slice", f"start_indices {start_indices}, limit_indices "
                             f"{limit_indices} and strides {strides} are invalid for operand "
                             f"shape {shape_str(x.shape)}: need 0 <= start <= limit <= size and "
                             f"stride >= 1")
        out.append(max(0, -(-(l - s) // st)))
    return ShapedArray(out, x.dtype, x.weak_type)


def _slice(x, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides))]


slice_p = register("slice", _slice_eval, _slice)


def _pad_eval(x, padding_value, *, padding_config):
    check_same_dtypes("pad", (x, padding_value))
    if padding_value.shape:
        raise type_error("pad", f"padding_value must be a scalar, got shape {padding_value.shape}")
    if len(padding_config) != x.ndim:
        raise ValueError(f"pad: padding_config {padding_config} must have one (low, high, "
                         f"interior) triple per dimension of shape {shape_str(x.shape)}")
    out = []
    for (lo, hi, interior), d in zip(padding_config, x.shape):
        if interior < 0:
            raise ValueError(f"pad: interior padding must be non-negative, got {interior}")
        size = lo + hi + d + max(d - 1, 0) * interior
        if size < 0:
            raise ValueError(f"pad: dimension of size {d} with padding ({lo}, {hi}, {interior}) "
                             f"would have negative size {size}")
        out.append(size)
    return ShapedArray(out, x.dtype, x.weak_type)


def _pad(x, padding_value, *, padding_config):
    out_shape = [lo + hi + d + max(d - 1, 0) * it for (lo, hi, it), d in zip(padding_config, x.shape)]
    out = np.full(out_shape, padding_value, dtype=x.dtype)
    src, dst = [], []
    for (lo, hi, it), d, n in zip(padding_config, x.shape, out_shape):
        # Element i of the operand lands at lo + i * (it + 1); negative padding crops.
        positions = lo + np.arange(d) * (it + 1)
        keep = (positions >= 0) & (positions < n)
        src.append(np.nonzero(keep)[0])
        dst.append(positions[keep])
    if all(len(s) for s in src) or x.ndim == 0:
        out[np.ix_(*dst)] = x[np.ix_(*src)]
    return out


pad = register("pad", _pad_eval, _pad)


def _concatenate_eval(*xs, dimension):
    if not xs:
        raise ValueError("concatenate requires at least one operand")
    check_same_dtypes("concatenate", xs)
    nd = xs[0].ndim
    if not 0 <= dimension < max(nd, 1) or nd == 0:
        raise ValueError(f"concatenate: dimension {dimension} out of range for operands of rank {nd}")
    for x in xs:
        if x.ndim != nd or any(a != b for i, (a, b) in enumerate(zip(x.shape, xs[0].shape))
                               if i != dimension):
            raise type_error("concatenate", "operands must have equal shapes except in the "
                             f"concatenation dimension {dimension}, got "
                             + ", ".join(shape_str(y.shape) for y in xs))
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, xs[0].dtype, all(x.weak_type for x in xs))


concatenate = register("concatenate", _concatenate_eval,
                       lambda *xs, dimension: np.concatenate(xs, axis=dimension))
