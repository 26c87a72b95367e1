"""Shape-changing primitives: iota, broadcast_in_dim, reshape, transpose, squeeze, rev, slice,
pad, concatenate.

These move or replicate elements without arithmetic. Their params are static tuples of Python
ints (hashable), so the specialiser can fold them and the backends can compute strides at
compile time.

Being linear, each one's JVP applies the primitive itself to the tangent (`_same_on_tangent`),
and its VJP is the adjoint data movement: broadcast sums, slice pads, pad slices, concatenate
slices, transpose and reshape invert themselves.

Batching rules keep the batch axis where it is whenever the primitive allows it (transpose,
squeeze, rev, slice, pad and concatenate only renumber their params around it);
`batch_at` and `align_batch_axes` are shared with the indexing and sorting families.
"""
import numpy as np

from ..ir.abstract import ShapedArray, shape_str
from . import emit as E
from . import batching as B
from .core import register, type_error, check_shape, check_same_dtypes, JVP, VJP, BATCH
from .rule_forms import tangent_rule, cotangent_rule


def _same_on_tangent(name):
    """JVP of a primitive linear in its first operand: itself, applied to that tangent (any
    further operands, such as dynamic_slice's start indices, are passed through)."""
    def jvp(primals, tangents, outs, **params):
        return E.bind(name, tangents[0], *primals[1:], **params)
    jvp.__name__ = f"{name}_jvp"
    return jvp


def _tangent_or_zeros(primal, tangent):
    """A symbolic zero tangent (None) made concrete, for rules that combine several."""
    return E.zeros_like(primal) if tangent is None else tangent


# ------------------------------------------------------------------- batching vocabulary

def around(axes, d):
    """Axis numbers of one example, as axes of the value that carries its batch on axis `d`."""
    return tuple(a + 1 if a >= d else a for a in axes)


def insert(values, d, value):
    """The tuple `values` with `value` inserted at position `d`."""
    values = tuple(values)
    return values[:d] + (value,) + values[d:]


def batch_at(x, d, size, at):
    """`x` with its batch axis (`d`, or None: unbatched, then broadcast along a new axis) at
    position `at`."""
    if d is not None:
        return B.moveaxis(x, d, at)
    a = E.aval(x)
    return E.broadcast_in_dim(x, shape=insert(a.shape, at, size),
                              broadcast_dimensions=around(range(a.ndim), at))


def align_batch_axes(args, dims):
    """(axis, operands): every operand carrying its batch on one axis, the first batched
    operand's (the others moved there, unbatched ones broadcast along it)."""
    size = B.batch_size(args, dims)
    at = next(d for d in dims if d is not None)
    return at, [batch_at(x, d, size, at) for x, d in zip(args, dims)]


def _iota_eval(*, dtype, shape, dimension):
    shape = check_shape("iota", shape)
    if np.dtype(dtype).kind not in "iufc":
        raise TypeError(f"iota does not accept dtype {np.dtype(dtype)}. Accepted dtypes are "
                        f"subtypes of integer, floating, complexfloating.")
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota dimension must be between 0 and len(shape), got "
                         f"dimension={dimension} for shape={shape}")
    return ShapedArray(shape, dtype, False)


def _iota(*, dtype, shape, dimension):
    ar = np.arange(shape[dimension], dtype=dtype)
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.broadcast_to(ar.reshape(view), shape).copy()


iota = register("iota", _iota_eval, _iota)
iota.zero_derivative = True


def _broadcast_in_dim_eval(x, *, shape, broadcast_dimensions):
    shape = check_shape("broadcast_in_dim", shape)
    dims = tuple(broadcast_dimensions)
    if len(dims) != x.ndim:
        raise type_error("broadcast_in_dim", f"broadcast_dimensions must have length equal to "
                         f"operand ndim; got broadcast_dimensions {dims} for operand ndim "
                         f"{x.ndim}.")
    if len(shape) < x.ndim:
        raise type_error("broadcast_in_dim", f"target broadcast shape must have equal or higher "
                         f"rank to the operand shape; got operand ndim {x.ndim} and target "
                         f"broadcast ndim {len(shape)}.")
    if not set(dims) <= set(range(len(shape))):
        raise type_error("broadcast_in_dim", f"broadcast_dimensions must be a subset of output "
                         f"dimensions, got {dims} for operand ndim {x.ndim} and shape {shape}.")
    if any(x.shape[i] not in (1, shape[d]) for i, d in enumerate(dims)):
        raise type_error("broadcast_in_dim", f"operand dimension sizes must either be 1, or "
                         f"be equal to their corresponding dimensions in the target "
                         f"broadcast shape; got operand of shape {x.shape}, target broadcast "
                         f"shape {shape}, broadcast_dimensions {dims}")
    if len(set(dims)) != len(dims):
        raise type_error("broadcast_in_dim", f"broadcast_dimensions must not contain "
                         f"duplicates, got broadcast_dimensions {dims}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _broadcast_in_dim(x, *, shape, broadcast_dimensions):
    order = sorted(range(x.ndim), key=lambda i: broadcast_dimensions[i])
    x = np.transpose(x, order)  # broadcast_dimensions need not be increasing
    view = [1] * len(shape)
    for j, i in enumerate(order):
        view[broadcast_dimensions[i]] = x.shape[j]
    return np.broadcast_to(x.reshape(view), shape)


def _broadcast_in_dim_vjp(ct, primals, outs, *, shape, broadcast_dimensions):
    # Sum over the new axes and the operand's size-1 axes that were stretched; the kept axes
    # come out in output order, which need not be the operand's.
    x_shape = E.aval(primals[0]).shape
    dims = broadcast_dimensions
    kept = sorted((i for i, n in enumerate(x_shape) if n == shape[dims[i]]), key=lambda i: dims[i])
    summed = tuple(sorted(set(range(len(shape))) - {dims[i] for i in kept}))
    if summed:
        ct = E.reduce_sum(ct, axes=summed)
    perm = tuple(sorted(range(len(kept)), key=lambda j: kept[j]))
    if perm != tuple(range(len(kept))):
        ct = E.transpose(ct, permutation=perm)
    if len(kept) != len(x_shape):
        ct = E.reshape(ct, new_sizes=x_shape)
    return [ct]


broadcast_in_dim = register("broadcast_in_dim", _broadcast_in_dim_eval, _broadcast_in_dim)
JVP[broadcast_in_dim] = tangent_rule(_same_on_tangent("broadcast_in_dim"))
VJP[broadcast_in_dim] = cotangent_rule(_broadcast_in_dim_vjp)


def _broadcast_in_dim_batch(args, dims, *, shape, broadcast_dimensions):
    x = B.moveaxis(args[0], dims[0], 0)
    size = E.aval(x).shape[0]
    return E.broadcast_in_dim(x, shape=(size,) + tuple(shape),
                              broadcast_dimensions=(0,) + B.shift(broadcast_dimensions)), 0


BATCH[broadcast_in_dim] = _broadcast_in_dim_batch


def _reshape_eval(x, *, new_sizes, dimensions=None):
    if any(isinstance(d, (int, np.integer)) and d < 0 for d in new_sizes):
        raise TypeError(f"reshape new_sizes must all be positive, got {tuple(new_sizes)}.")
    new_sizes = check_shape("reshape", new_sizes, "new_sizes")
    if dimensions is not None and sorted(dimensions) != list(range(x.ndim)):
        raise type_error("reshape", f"dimensions must be a permutation of operand dimensions, "
                         f"got dimensions {tuple(dimensions)} for shape {x.shape}.")
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise type_error("reshape", f"total size of new array must be unchanged: cannot reshape "
                         f"array of shape {shape_str(x.shape)} (size {x.size}) into shape "
                         f"{shape_str(new_sizes)} (size {int(np.prod(new_sizes))})")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def _reshape(x, *, new_sizes, dimensions=None):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return np.reshape(x, new_sizes)


def _reshape_vjp(ct, primals, outs, *, new_sizes, dimensions=None):
    shape = E.aval(primals[0]).shape
    if dimensions is None:
        return [E.reshape(ct, new_sizes=shape)]
    moved = tuple(shape[d] for d in dimensions)
    return [E.transpose(E.reshape(ct, new_sizes=moved), permutation=_inverse(dimensions))]


def _inverse(permutation):
    return tuple(int(i) for i in np.argsort(permutation))


reshape = register("reshape", _reshape_eval, _reshape)
JVP[reshape] = tangent_rule(_same_on_tangent("reshape"))
VJP[reshape] = cotangent_rule(_reshape_vjp)


def _reshape_batch(args, dims, *, new_sizes, dimensions=None):
    x = B.moveaxis(args[0], dims[0], 0)
    if dimensions is not None:
        x = E.transpose(x, permutation=(0,) + B.shift(dimensions))
    size = E.aval(x).shape[0]
    return E.reshape(x, new_sizes=(size,) + tuple(new_sizes), dimensions=None), 0


BATCH[reshape] = _reshape_batch


def _transpose_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"transpose permutation isn't a permutation of operand dimensions, got "
                        f"permutation {tuple(permutation)} for operand shape {x.shape}.")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


transpose = register("transpose", _transpose_eval, lambda x, *, permutation: np.transpose(x, permutation))
JVP[transpose] = tangent_rule(_same_on_tangent("transpose"))
VJP[transpose] = cotangent_rule(lambda ct, primals, outs, *, permutation: [
    E.transpose(ct, permutation=_inverse(permutation))])


def _transpose_batch(args, dims, *, permutation):
    """The batch axis stays where it is; the example's axes are permuted around it."""
    d = dims[0]
    return E.transpose(args[0], permutation=insert(around(permutation, d), d, d)), d


BATCH[transpose] = _transpose_batch


def _squeeze_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions):
        raise ValueError(f"dimensions are not unique: {tuple(dimensions)}")
    if not all(0 <= d < x.ndim for d in dimensions):
        raise ValueError(f"dimensions outside range [0, ndim): {tuple(dimensions)}")
    if any(x.shape[d] != 1 for d in dimensions):
        raise ValueError(f"cannot select an axis to squeeze out which has size not equal to "
                         f"one, got shape={x.shape} and dimensions={tuple(dimensions)}")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions),
                       x.dtype, x.weak_type)


squeeze = register("squeeze", _squeeze_eval,
                   lambda x, *, dimensions: np.reshape(x, [s for i, s in enumerate(x.shape)
                                                           if i not in dimensions]))
JVP[squeeze] = tangent_rule(_same_on_tangent("squeeze"))
VJP[squeeze] = cotangent_rule(lambda ct, primals, outs, *, dimensions: [
    E.reshape(ct, new_sizes=E.aval(primals[0]).shape)])


def _squeeze_batch(args, dims, *, dimensions):
    d = dims[0]
    out = E.squeeze(args[0], dimensions=around(dimensions, d))
    return out, d - sum(1 for a in dimensions if a < d)


BATCH[squeeze] = _squeeze_batch


def _rev_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions):
        raise type_error("rev", f"dimensions must be unique, got {tuple(dimensions)}.")
    if not all(0 <= d < x.ndim for d in dimensions):
        raise type_error("rev", f"dimensions must all be less than operand ndim, got "
                         f"dimensions {tuple(dimensions)} for operand ndim {x.ndim}.")
    return x


rev = register("rev", _rev_eval, lambda x, *, dimensions: np.flip(x, dimensions) if dimensions else x)
JVP[rev] = tangent_rule(_same_on_tangent("rev"))
VJP[rev] = cotangent_rule(
    lambda ct, primals, outs, *, dimensions: [E.rev(ct, dimensions=dimensions)])
BATCH[rev] = lambda args, dims, *, dimensions: (
    E.rev(args[0], dimensions=around(dimensions, dims[0])), dims[0])


def _slice_eval(x, *, start_indices, limit_indices, strides=None):
    start, limit = tuple(start_indices), tuple(limit_indices)
    if len(start) != x.ndim:
        raise type_error("slice", f"start_indices must have length equal to the number of "
                         f"dimensions of the operand, got indices {start} for operand shape "
                         f"{x.shape}.")
    if len(limit) != len(start):
        raise type_error("slice", f"limit_indices must have the same length as start_indices, "
                         f"got start_indices {start} and limit_indices {limit}.")
    if any(l > d for l, d in zip(limit, x.shape)):
        raise type_error("slice", f"limit_indices must be less than or equal to operand shape, "
                         f"got limit_indices {limit} for operand shape {x.shape}.")
    if any(s < 0 for s in start):
        raise type_error("slice", f"start_indices must be greater than or equal to zero, got "
                         f"start_indices of {start}.")
    if any(l < s for s, l in zip(start, limit)):
        raise type_error("slice", f"limit_indices must be greater than or equal to "
                         f"start_indices, got start_indices {start} and limit_indices {limit}.")
    strides = tuple(strides or (1,) * x.ndim)
    if len(strides) != x.ndim:
        raise type_error("slice", f"strides must have length equal to the number of dimensions "
                         f"of the operand, got strides {strides} for operand shape {x.shape}.")
    if any(st < 1 for st in strides):
        raise type_error("slice", f"strides must be positive, got {strides}")
    out = [-(-(l - s) // st) for s, l, st in zip(start, limit, strides)]
    return ShapedArray(out, x.dtype, x.weak_type)


def _slice(x, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides))]


def _slice_vjp(ct, primals, outs, *, start_indices, limit_indices, strides=None):
    # Zeros around the slice and between strided elements: lo = start, interior = stride - 1,
    # hi = what is left after the last element taken.
    shape = E.aval(primals[0]).shape
    strides = strides or (1,) * len(shape)
    taken = E.aval(ct).shape
    config = tuple((s, d - (s + (n - 1) * st + 1 if n else s), st - 1)
                   for s, d, n, st in zip(start_indices, shape, taken, strides))
    if not any(any(c) for c in config):  # the whole operand
        return [ct]
    return [E.pad(ct, E.scalar(0, E.aval(ct)), padding_config=config)]


slice_p = register("slice", _slice_eval, _slice)
JVP[slice_p] = tangent_rule(_same_on_tangent("slice"))
VJP[slice_p] = cotangent_rule(_slice_vjp)


def _slice_batch(args, dims, *, start_indices, limit_indices, strides=None):
    x, d = args[0], dims[0]
    size = E.aval(x).shape[d]
    return E.slice_(x, start_indices=insert(start_indices, d, 0),
                    limit_indices=insert(limit_indices, d, size),
                    strides=None if strides is None else insert(strides, d, 1)), d


BATCH[slice_p] = _slice_batch


def _pad_eval(x, padding_value, *, padding_config):
    if padding_value.dtype != x.dtype:
        raise type_error("pad", f"operand and padding_value must be same dtype: got {x.dtype} "
                         f"and {padding_value.dtype}.")
    if padding_value.shape:
        raise ValueError(f"padding_value must be a scalar; got "
                         f"np.shape(padding_value)={padding_value.shape}")
    config = tuple(tuple(c) for c in padding_config)
    if len(config) != x.ndim:
        raise ValueError(f"length of padding_config must equal the number of axes of operand, "
                         f"got padding_config {config} for operand shape {x.shape}")
    if any(interior < 0 for _, _, interior in config):
        raise ValueError(f"interior padding in padding_config must be nonnegative, got "
                         f"padding_config {config}")
    out = tuple(lo + hi + d + max(d - 1, 0) * interior
                for (lo, hi, interior), d in zip(config, x.shape))
    if any(d < 0 for d in out):
        raise ValueError(f"Dimension size after padding is not at least 0, got result shape "
                         f"{out}, for padding_config {config} and operand shape {x.shape}")
    return ShapedArray(out, x.dtype, x.weak_type and padding_value.weak_type)


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


def _pad_jvp(primals, tangents, outs, *, padding_config):
    tx = _tangent_or_zeros(primals[0], tangents[0])
    tv = tangents[1] if tangents[1] is not None else E.scalar(0, E.aval(tx))
    return E.pad(tx, tv, padding_config=padding_config)


def _pad_vjp(ct, primals, outs, *, padding_config):
    # The operand's elements: crop the edge padding (negative padding grows back as zeros,
    # the cropped elements' cotangent), then take every (interior + 1)-th element. The padding
    # value's cotangent is everything else.
    x_aval, out_shape = E.aval(primals[0]), E.aval(ct).shape
    ct_x = ct
    if any(lo or hi for lo, hi, _ in padding_config):
        ct_x = E.pad(ct, E.scalar(0, E.aval(ct)),
                     padding_config=tuple((-lo, -hi, 0) for lo, hi, _ in padding_config))
    if any(interior for _, _, interior in padding_config):
        ct_x = E.slice_(ct_x, start_indices=(0,) * x_aval.ndim,
                        limit_indices=E.aval(ct_x).shape,
                        strides=tuple(interior + 1 for _, _, interior in padding_config))
    kept = int(np.prod([_pad_kept(d, c, n)
                        for d, c, n in zip(x_aval.shape, padding_config, out_shape)]))
    if kept == int(np.prod(out_shape)):  # no element of the output is padding
        return [ct_x, None]
    axes = tuple(range(len(out_shape)))
    return [ct_x, E.sub(E.reduce_sum(ct, axes=axes), E.reduce_sum(ct_x, axes=axes))]


def _pad_kept(d, config, n):
    """How many of an axis' `d` operand elements land inside the padded axis of size `n`."""
    lo, _, interior = config
    return sum(1 for i in range(d) if 0 <= lo + i * (interior + 1) < n)


pad = register("pad", _pad_eval, _pad)
JVP[pad] = tangent_rule(_pad_jvp)
VJP[pad] = cotangent_rule(_pad_vjp)


def _pad_batch(args, dims, *, padding_config):
    """An unbatched padding value: the batch axis stays and is not padded. A batched one (one
    value per example): pad with zero, then select each example's value where the padding
    is (a mask made by padding `True`s with `False`)."""
    (x, value), (dx, dv) = args, dims
    if dv is None:
        return E.pad(x, value, padding_config=insert(padding_config, dx, (0, 0, 0))), dx
    size, d = B.batch_size(args, dims), 0 if dx is None else dx
    config = padding_config if dx is None else insert(padding_config, dx, (0, 0, 0))
    padded = E.pad(x, E.scalar(0, E.aval(x)), padding_config=config)
    if dx is None:  # one operand for every example: padded once
        padded = batch_at(padded, None, size, d)
    ones = E.full(B.example_shape(x, dx), True, np.bool_)
    inside = batch_at(E.pad(ones, E.scalar(False, E.aval(ones)), padding_config=padding_config),
                      None, size, d)
    values = E.broadcast_in_dim(value, shape=E.aval(inside).shape, broadcast_dimensions=(d,))
    return E.select(inside, padded, values), d


BATCH[pad] = _pad_batch


def _concatenate_eval(*xs, dimension):
    if not xs:
        raise TypeError("concatenate expects at least one operand, got 0.")
    shapes = ", ".join(str(x.shape) for x in xs)
    if len({x.ndim for x in xs}) != 1:
        raise TypeError(f"Cannot concatenate arrays with different numbers of dimensions: got "
                        f"{shapes}.")
    if not 0 <= dimension < xs[0].ndim:
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for shapes "
                        f"{shapes}.")
    rest = {x.shape[:dimension] + x.shape[dimension + 1:] for x in xs}
    if len(rest) != 1:
        raise TypeError(f"Cannot concatenate arrays with shapes that differ in dimensions other "
                        f"than the one being concatenated: concatenating along dimension "
                        f"{dimension} for shapes {shapes}.")
    check_same_dtypes("concatenate", xs)
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, xs[0].dtype, all(x.weak_type for x in xs))


def _concatenate_jvp(primals, tangents, outs, *, dimension):
    return E.concatenate(*(_tangent_or_zeros(p, t) for p, t in zip(primals, tangents)),
                         dimension=dimension)


def _concatenate_vjp(ct, primals, outs, *, dimension):
    shape = E.aval(ct).shape
    cts, start = [], 0
    for p in primals:
        n = E.aval(p).shape[dimension]
        lo = tuple(start if i == dimension else 0 for i in range(len(shape)))
        hi = tuple(start + n if i == dimension else d for i, d in enumerate(shape))
        cts.append(E.slice_(ct, start_indices=lo, limit_indices=hi))
        start += n
    return cts


concatenate = register("concatenate", _concatenate_eval,
                       lambda *xs, dimension: np.concatenate(xs, axis=dimension))
JVP[concatenate] = tangent_rule(_concatenate_jvp)
VJP[concatenate] = cotangent_rule(_concatenate_vjp)


def _concatenate_batch(args, dims, *, dimension):
    d, xs = align_batch_axes(args, dims)
    return E.concatenate(*xs, dimension=around((dimension,), d)[0]), d


BATCH[concatenate] = _concatenate_batch
