"""`kiln.lax` conveniences that JAX builds from other lax operations: stacking, splitting,
tiling, collapsing, broadcasting helpers, `index_take`, `scatter_sub`, `reciprocal`, `empty`,
`dtype` and `optimization_barrier`. Each is a decomposition into `_ops` (no new primitive), so
every transform and backend supports it already."""
import builtins

import numpy as np

from ..array import to_array
from ..tree_util import tree_map
from ..compiler.ir import dtypes
from . import _ops as L
from ._gather_scatter import GatherDimensionNumbers, gather, scatter_add

__all__ = ["DotDimensionNumbers", "broadcast_like", "broadcast_shapes", "collapse", "dtype",
           "empty", "index_take", "optimization_barrier", "reciprocal", "scatter_sub", "split",
           "stack", "tile", "unstack"]

# As in JAX, a type alias: ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)).
DotDimensionNumbers = tuple


def broadcast_shapes(*shapes):
    """NumPy's broadcasting of static shapes (ranks aligned at the right), as a tuple."""
    shapes = [L._shape(s) for s in shapes]
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for ds in zip(*[(1,) * (rank - len(s)) + s for s in shapes]):
        sizes = {d for d in ds if d != 1}
        if len(sizes) > 1:
            raise ValueError(f"lax.broadcast_shapes: incompatible shapes for broadcasting: "
                             f"{tuple(shapes)}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_like(arr, like_arr):
    """`arr` broadcast (NumPy's rules) to `like_arr`'s shape."""
    x = to_array(arr, "lax.broadcast_like")
    shape = to_array(like_arr, "lax.broadcast_like").shape
    rank = len(shape)
    if x.ndim > rank or broadcast_shapes(x.shape, shape) != shape:
        raise ValueError(f"lax.broadcast_like: cannot broadcast {x.shape} to {shape}")
    return L.broadcast_in_dim(x, shape, tuple(range(rank - x.ndim, rank)))


def collapse(operand, start_dimension, stop_dimension=None):
    """Merge axes [start_dimension, stop_dimension) into one (bounds clipped as a Python
    slice's, as in JAX)."""
    x = to_array(operand, "lax.collapse")
    lo, hi, _ = builtins.slice(start_dimension, stop_dimension).indices(x.ndim)
    if hi < lo:
        raise ValueError(f"lax.collapse: stop_dimension {stop_dimension} comes before "
                         f"start_dimension {start_dimension} for shape {x.shape}")
    return L.reshape(x, x.shape[:lo] + (int(np.prod(x.shape[lo:hi], dtype=int)),)
                     + x.shape[hi:])


def stack(operands, axis=0):
    xs = [to_array(x, "lax.stack") for x in operands]
    if not xs:
        raise ValueError("lax.stack: need at least one operand")
    axis = L._canonical_axis(axis, xs[0].ndim + 1)
    return L.concatenate([L.expand_dims(x, (axis,)) for x in xs], axis)


def unstack(x, axis=0):
    x = to_array(x, "lax.unstack")
    axis = L._canonical_axis(axis, x.ndim)
    return tuple(L.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis]))


def split(operand, sizes, axis=0):
    """Pieces of the given sizes (summing to the axis length) along `axis`, as a list."""
    x = to_array(operand, "lax.split")
    axis = L._canonical_axis(axis, x.ndim)
    sizes = L._shape(sizes)
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[axis]:
        raise ValueError(f"lax.split: sizes {sizes} must be non-negative and sum to "
                         f"{x.shape[axis]}, the size of axis {axis}")
    starts = np.cumsum((0,) + sizes)
    return [L.slice_in_dim(x, int(a), int(b), 1, axis) for a, b in zip(starts[:-1], starts[1:])]


def tile(operand, reps):
    x = to_array(operand, "lax.tile")
    reps = L._shape(reps)
    if len(reps) != x.ndim:
        raise ValueError(f"lax.tile: len(reps) = {len(reps)} must equal the rank {x.ndim}")
    wide = tuple(d for r, n in zip(reps, x.shape) for d in (r, n))
    y = L.broadcast_in_dim(x, wide, tuple(range(1, 2 * x.ndim, 2)))
    return L.reshape(y, tuple(r * n for r, n in zip(reps, x.shape)))


def empty(shape, dtype, *, out_sharding=None):
    """An array of the shape and dtype; kiln fills it with zeros (JAX leaves it unspecified)."""
    return L.full(shape, 0, dtype)


def reciprocal(x):
    return L.integer_pow(x, -1)


def dtype(x):
    """The canonical dtype of a value, an array or a dtype-like."""
    if isinstance(x, (type, str, np.dtype)):
        return np.dtype(dtypes.canonicalize(x))
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    return np.dtype(to_array(x).dtype)


def index_take(src, idxs, axes):
    """`src` indexed along `axes` by one index array per axis (wrapping negative indices), as
    JAX's: one gather whose batch axis leads."""
    src = to_array(src, "lax.index_take")
    axes = tuple(axes)
    idx = L.concatenate([L.expand_dims(to_array(i, "lax.index_take"), (1,)) for i in idxs], 1)
    size = L.broadcast_in_dim(np.array([src.shape[a] for a in axes], dtype=idx.dtype),
                              idx.shape, (1,))
    idx = L.rem(L.add(L.rem(idx, size), size), size)
    slice_sizes = tuple(1 if a in axes else d for a, d in enumerate(src.shape))
    dn = GatherDimensionNumbers(offset_dims=tuple(range(1, src.ndim - len(axes) + 1)),
                                collapsed_slice_dims=axes, start_index_map=axes)
    return gather(src, idx, dn, slice_sizes)


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """`scatter_add` of the negated updates."""
    return scatter_add(operand, scatter_indices, L.neg(updates), dimension_numbers,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       mode=mode)


def optimization_barrier(operand, /):
    """Identity on a pytree (its leaves as arrays, as JAX's). kiln's passes do not move
    computation across values the way XLA does, so there is nothing to prevent."""
    return tree_map(lambda x: to_array(x, "optimization_barrier"), operand)
