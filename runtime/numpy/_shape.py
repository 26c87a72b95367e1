"""`kiln.numpy` shape operations: reshaping, transposing, joining, splitting, tiling, padding,
flipping and rolling, `take`/`take_along_axis`, and diagonals/triangles.

Everything is plain Python over `kiln.lax` (reshape, broadcast_in_dim, transpose, concatenate,
slice, pad, rev, gather, select_n, iota): shapes, axes and counts are static Python values,
array contents are never inspected. Behaviour, dtypes (weak types included) and errors follow
JAX's `jax.numpy`; where JAX fails on a well-defined NumPy input for a reason that is only an
artefact of its implementation (`order='A'`, an axis=None `partition`), kiln follows NumPy.
"""
import math
import operator

import numpy as np

from .. import lax
from ..array import Array, to_array
from ..compiler.ir import dtypes
from ._core import (check_arraylike, canonicalize_axis, canonical_dtype, promote_dtypes,
                    broadcast_shapes as _broadcast_shapes, broadcast_to as _broadcast_to,
                    _convert)
from . import _creation, _reductions, _ufuncs
from ..sharding_types import out_sharding_keyword

__all__ = [
    "ndim", "shape", "size", "reshape", "ravel", "transpose", "matrix_transpose",
    "permute_dims", "swapaxes", "moveaxis", "rollaxis", "squeeze", "expand_dims",
    "broadcast_to", "broadcast_arrays", "broadcast_shapes", "atleast_1d", "atleast_2d",
    "atleast_3d", "concatenate", "concat", "stack", "unstack", "hstack", "vstack", "dstack",
    "column_stack", "split", "array_split", "hsplit", "vsplit", "dsplit", "tile", "repeat",
    "resize", "flip", "fliplr", "flipud", "roll", "rot90", "pad", "take", "take_along_axis",
    "diag", "diagonal", "tril", "triu", "trace",
]


# ------------------------------------------------------------------------------- helpers

def _arr(fun_name, x):
    check_arraylike(fun_name, x)
    return to_array(x, fun_name)


def _arrs(fun_name, xs):
    check_arraylike(fun_name, *xs)
    return [to_array(x, fun_name) for x in xs]


def _index_tuple(x):
    """An int or a sequence of ints as a tuple of Python ints."""
    if isinstance(x, (tuple, list)):
        return tuple(operator.index(i) for i in x)
    return (operator.index(x),)


def _axis_index_error(axis, ndim, fun_name):
    """NumPy's AxisError is both a ValueError and an IndexError (JAX raises the latter)."""
    try:
        return canonicalize_axis(axis, ndim, fun_name)
    except ValueError as e:
        raise np.exceptions.AxisError(f"{fun_name}: {e}") from None


def _astype(x, dtype):
    return lax.convert_element_type(x, canonical_dtype(dtype))


def _static_ints(x, fun_name, what):
    """A static int or sequence of ints given as Python values, NumPy or (concrete) kiln
    arrays; traced values fail here, as in JAX, because the result decides a shape."""
    if isinstance(x, (Array, np.ndarray, np.generic)):
        x = np.asarray(x)
        if x.dtype.kind not in "iub":
            raise TypeError(f"{fun_name}: {what} must be integers, got dtype {x.dtype}")
        return x.tolist()
    if isinstance(x, (tuple, list)):
        return [_static_ints(v, fun_name, what) for v in x]
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{fun_name}: {what} must be integers, got {x!r}") from None


def _check_permutation(perm, x):
    if sorted(perm) != list(range(x.ndim)):
        raise TypeError(f"transpose permutation isn't a permutation of operand dimensions, "
                        f"got permutation {tuple(perm)} for operand shape {x.shape}.")
    return lax.transpose(x, perm)


def _last_two(x, axis1, axis2, fun_name):
    """Move axis1 and axis2 of x to the end (in that order)."""
    a1 = canonicalize_axis(axis1, x.ndim, fun_name)
    a2 = canonicalize_axis(axis2, x.ndim, fun_name)
    if a1 == a2:
        raise ValueError(f"{fun_name}: axis1 and axis2 can not be the same, got axis1={axis1} "
                         f"and axis2={axis2}")
    return _moveaxis(x, (a1, a2), (x.ndim - 2, x.ndim - 1))


# ----------------------------------------------------------------------- shape queries

def ndim(a):
    """Number of dimensions of `a`."""
    return a.ndim if hasattr(a, "ndim") else np.ndim(a)


def shape(a):
    """Shape of `a` as a tuple."""
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def size(a, axis=None):
    """Number of elements of `a`, or along `axis` (int or tuple)."""
    shp = shape(a)
    if axis is None:
        return math.prod(shp)
    axes = _index_tuple(axis)
    return math.prod(shp[canonicalize_axis(ax, len(shp), "size")] for ax in axes)


# ------------------------------------------------------------------------- reshaping

def _canonical_shape(newshape):
    try:
        scalar = not hasattr(newshape, "__iter__") or getattr(newshape, "ndim", 1) == 0
        dims = (newshape,) if scalar else tuple(newshape)
        return tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{newshape}.") from None


def _compute_newshape(x, newshape):
    """Resolve one -1 entry of `newshape` against the size of x (JAX's errors)."""
    dims = _canonical_shape(newshape)
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise TypeError(f"can only specify one unknown axis size with a `-1` value, got "
                        f"{newshape}")
    if not unknown:
        if any(d < 0 for d in dims) or x.size != math.prod(dims):
            raise TypeError(f"cannot reshape array of shape {x.shape} (size {x.size}) into "
                            f"shape {newshape} (size {math.prod(dims)})")
        return dims
    i, = unknown
    known = math.prod(dims[:i] + dims[i + 1:])
    if any(d < 0 for d in dims[:i] + dims[i + 1:]) or known == 0 or x.size % known:
        raise TypeError(f"cannot reshape array of shape {x.shape} (size {x.size}) into shape "
                        f"{newshape} because the product of specified axis sizes ({known}) "
                        f"does not evenly divide {x.size}")
    return dims[:i] + (x.size // known,) + dims[i + 1:]


@out_sharding_keyword
def reshape(a, shape=None, order="C", *, copy=None, out_sharding=None):
    """Give `a` a new shape (one entry may be -1); order 'C' (row-major) or 'F'."""
    x = _arr("reshape", a)
    newshape = _compute_newshape(x, shape)
    if order in ("C", "A"):  # kiln arrays are always C-contiguous, so 'A' means 'C'
        return lax.reshape(x, newshape)
    if order == "F":
        rev = tuple(range(x.ndim))[::-1]
        out = lax.reshape(x, newshape[::-1], dimensions=rev)
        return lax.transpose(out, tuple(range(len(newshape)))[::-1])
    raise ValueError(f"Unexpected value for 'order' argument: {order}.")


def ravel(a, order="C", *, out_sharding=None):
    """Flatten `a` to one dimension ('K' reads C order: kiln arrays are C-contiguous)."""
    x = _arr("ravel", a)
    return reshape(x, (x.size,), "C" if order == "K" else order)


def resize(a, new_shape):
    """Repeat the flattened `a` cyclically to fill `new_shape` (zeros if `a` is empty)."""
    x = ravel(_arr("resize", a))
    new_shape = _index_tuple(new_shape)
    if any(d < 0 for d in new_shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    new_size = math.prod(new_shape)
    if x.size == 0 or new_size == 0:
        return lax.full_like(x, 0, shape=new_shape)
    x = tile(x, -(-new_size // x.size))
    return lax.reshape(lax.slice(x, (0,), (new_size,)), new_shape)


# ----------------------------------------------------------------------- transposing

def transpose(a, axes=None):
    """Permute the axes of `a` (reverse them by default); negative axes are allowed."""
    x = _arr("transpose", a)
    perm = tuple(range(x.ndim))[::-1] if axes is None else \
        tuple(canonicalize_axis(i, x.ndim, "transpose") for i in _index_tuple(axes))
    return _check_permutation(perm, x)


def permute_dims(a, /, axes):
    """Array-API name of `transpose` with explicit axes."""
    return transpose(_arr("permute_dims", a), axes)


def matrix_transpose(x, /):
    """Swap the last two axes."""
    x = _arr("matrix_transpose", x)
    if x.ndim < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got "
                         f"ndim={x.ndim}")
    return lax.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def swapaxes(a, axis1, axis2):
    """Interchange two axes."""
    x = _arr("swapaxes", a)
    perm = list(range(x.ndim))
    i = _axis_index_error(axis1, x.ndim, "swapaxes")
    j = _axis_index_error(axis2, x.ndim, "swapaxes")
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(x, perm)


def _moveaxis(x, source, destination):
    perm = [i for i in range(x.ndim) if i not in source]
    for dest, src in sorted(zip(destination, source)):
        perm.insert(dest, src)
    return _check_permutation(perm, x)


def moveaxis(a, source, destination):
    """Move axes `source` to positions `destination` (ints or equal-length sequences)."""
    x = _arr("moveaxis", a)
    src = tuple(canonicalize_axis(i, x.ndim, "moveaxis") for i in _index_tuple(source))
    dst = tuple(canonicalize_axis(i, x.ndim, "moveaxis") for i in _index_tuple(destination))
    if len(src) != len(dst):
        raise ValueError(f"Inconsistent number of elements: {len(src)} vs {len(dst)}")
    for name, axes in (("source", src), ("destination", dst)):
        if len(set(axes)) != len(axes):
            raise TypeError(f"moveaxis: repeated axis in `{name}` argument {axes}")
    return _moveaxis(x, src, dst)


def rollaxis(a, axis, start=0):
    """Roll `axis` backwards until it lies before position `start` (NumPy's legacy API)."""
    x = _arr("rollaxis", a)
    axis = canonicalize_axis(axis, x.ndim, "rollaxis")
    start = operator.index(start)
    if not -x.ndim <= start <= x.ndim:
        raise ValueError(f"rollaxis: start={start} must be in [{-x.ndim}, {x.ndim}]")
    start = start + x.ndim if start < 0 else start
    if axis < start:
        start -= 1
    return _moveaxis(x, (axis,), (start,))


# ------------------------------------------------------------------ adding/removing axes

def squeeze(a, axis=None):
    """Remove axes of size 1 (all of them, or those in `axis`)."""
    x = _arr("squeeze", a)
    if axis is None:
        return lax.squeeze(x, tuple(i for i, d in enumerate(x.shape) if d == 1))
    dims = tuple(canonicalize_axis(i, x.ndim, "squeeze") for i in _index_tuple(axis))
    if len(set(dims)) != len(dims):
        raise ValueError(f"dimensions are not unique: {dims}")
    for d in dims:
        if x.shape[d] != 1:
            raise ValueError(f"cannot select an axis to squeeze out which has size not equal "
                             f"to one, got shape={x.shape} and dimensions={dims}")
    return lax.squeeze(x, dims)


def expand_dims(a, axis):
    """Insert size-1 axes at the positions `axis` (int or tuple) of the result."""
    x = _arr("expand_dims", a)
    axes = _index_tuple(axis)
    nd = x.ndim + len(axes)
    dims = tuple(canonicalize_axis(i, nd, "expand_dims") for i in axes)
    if len(set(dims)) != len(dims):
        raise ValueError(f"repeated axis in lax.expand_dims: {axes}")
    return lax.expand_dims(x, dims)


def _atleast(n, arys, fun_name, place):
    out = [place(x) if x.ndim < n else x for x in _arrs(fun_name, arys)]
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    """View each input with at least one dimension."""
    return _atleast(1, arys, "atleast_1d", lambda x: lax.expand_dims(x, (0,)))


def atleast_2d(*arys):
    """View each input with at least two dimensions (leading axes are added)."""
    return _atleast(2, arys, "atleast_2d",
                    lambda x: lax.expand_dims(x, tuple(range(2 - x.ndim))))


_ATLEAST_3D = {0: (0, 1, 2), 1: (0, 2), 2: (2,)}


def atleast_3d(*arys):
    """View each input with at least three dimensions: (N,) -> (1, N, 1), (M, N) -> (M, N, 1)."""
    return _atleast(3, arys, "atleast_3d", lambda x: lax.expand_dims(x, _ATLEAST_3D[x.ndim]))


# ---------------------------------------------------------------------- broadcasting

def broadcast_shapes(*shapes):
    """The shape that NumPy broadcasting gives for `shapes` (ints count as 1-D shapes)."""
    if not shapes:
        return ()
    return tuple(_broadcast_shapes(*(_index_tuple(s) for s in shapes)))


def broadcast_to(array, shape, *, out_sharding=None):
    """Broadcast `array` to `shape` (NumPy rules)."""
    x = _arr("broadcast_to", array)
    shape = _index_tuple(shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"broadcast_to: shape {shape} has a negative dimension")
    return _broadcast_to(x, shape)


def broadcast_arrays(*args):
    """Broadcast the arguments against each other to their common shape (no dtype
    promotion)."""
    arrays = _arrs("broadcast_arrays", args)
    shape = broadcast_shapes(*(a.shape for a in arrays))
    return [a if a.shape == shape else broadcast_to(a, shape) for a in arrays]


# --------------------------------------------------------------------------- joining

def _sequence(fun_name, arrays):
    """The arrays of a joining function: a sequence, or the slices of one array."""
    if isinstance(arrays, (Array, np.ndarray)):
        x = to_array(arrays, fun_name)
        if x.ndim == 0:
            raise ValueError(f"{fun_name}: need a sequence of arrays, got a 0-d array")
        return [lax.index_in_dim(x, i, 0, keepdims=False) for i in range(x.shape[0])]
    return _arrs(fun_name, list(arrays))


def _join_dtype(xs, dtype):
    return promote_dtypes(*xs) if dtype is None else [_astype(x, dtype) for x in xs]


def _check_concat_shapes(xs, axis):
    nd = xs[0].ndim
    shapes = ", ".join(str(x.shape) for x in xs)
    if any(x.ndim != nd for x in xs):
        raise TypeError(f"Cannot concatenate arrays with different numbers of dimensions: "
                        f"got {shapes}.")
    base = xs[0].shape[:axis] + xs[0].shape[axis + 1:]
    if any(x.shape[:axis] + x.shape[axis + 1:] != base for x in xs):
        raise TypeError(f"Cannot concatenate arrays with shapes that differ in dimensions "
                        f"other than the one being concatenated: concatenating along "
                        f"dimension {axis} for shapes {shapes}.")


def _concatenate_array(x, axis, dtype):
    """concatenate(x) for one array x: its slices along axis 0 joined, as a reshape."""
    if x.ndim == 0 or x.shape[0] == 0:
        raise ValueError("Need at least one array to concatenate.")
    if dtype is not None:
        x = _astype(x, dtype)
    if axis is None:
        return lax.reshape(x, (x.size,))
    if x.ndim == 1:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    axis = canonicalize_axis(axis, x.ndim - 1, "concatenate")
    shape = x.shape[1:axis + 1] + (x.shape[0] * x.shape[axis + 1],) + x.shape[axis + 2:]
    return lax.reshape(x, shape, tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1,
                                                                                 x.ndim)))


def concatenate(arrays, axis=0, dtype=None):
    """Join arrays along an existing axis (axis=None flattens them first); dtypes promote."""
    if isinstance(arrays, (Array, np.ndarray)):
        return _concatenate_array(to_array(arrays, "concatenate"), axis, dtype)
    xs = _sequence("concatenate", arrays)
    if not xs:
        raise ValueError("Need at least one array to concatenate.")
    if axis is None:
        xs = [ravel(x) for x in xs]
        axis = 0
    if xs[0].ndim == 0:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    axis = canonicalize_axis(axis, xs[0].ndim, "concatenate")
    xs = _join_dtype(xs, dtype)
    _check_concat_shapes(xs, axis)
    return lax.concatenate(xs, axis)


def concat(arrays, /, *, axis=0):
    """Array-API name of `concatenate`."""
    check_arraylike("concat", *arrays)
    return concatenate(arrays, axis=axis)


def stack(arrays, axis=0, out=None, dtype=None):
    """Join arrays of equal shape along a new axis."""
    if out is not None:
        raise TypeError("stack: the 'out' argument is not supported; kiln arrays are "
                        "immutable, use the returned array")
    if isinstance(arrays, (Array, np.ndarray)):
        x = to_array(arrays, "stack")
        if x.ndim == 0 or x.shape[0] == 0:
            raise ValueError("Need at least one array to stack.")
        x = x if dtype is None else _astype(x, dtype)
        return _moveaxis(x, (0,), (canonicalize_axis(axis, x.ndim, "stack"),))
    xs = _sequence("stack", arrays)
    if not xs:
        raise ValueError("Need at least one array to stack.")
    shapes = {x.shape for x in xs}
    if len(shapes) > 1:
        raise ValueError(f"All input arrays must have the same shape. Got "
                         f"{', '.join(str(x.shape) for x in xs)}.")
    axis = canonicalize_axis(axis, xs[0].ndim + 1, "stack")
    xs = _join_dtype(xs, dtype)
    return lax.concatenate([lax.expand_dims(x, (axis,)) for x in xs], axis)


def unstack(x, /, *, axis=0):
    """Split `x` into a tuple of slices along `axis`."""
    x = _arr("unstack", x)
    if x.ndim == 0:
        raise ValueError("Input array must be at least 1-d.")
    axis = canonicalize_axis(axis, x.ndim, "unstack")
    return tuple(lax.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis]))


def vstack(tup, dtype=None):
    """Stack arrays vertically (along axis 0 of their 2-D views)."""
    return concatenate([atleast_2d(x) for x in _sequence("vstack", tup)], axis=0, dtype=dtype)


def hstack(tup, dtype=None):
    """Stack arrays horizontally (axis 1, or axis 0 for 1-D inputs)."""
    xs = [atleast_1d(x) for x in _sequence("hstack", tup)]
    return concatenate(xs, axis=0 if xs and xs[0].ndim == 1 else 1, dtype=dtype)


def dstack(tup, dtype=None):
    """Stack arrays depth-wise (along axis 2 of their 3-D views)."""
    return concatenate([atleast_3d(x) for x in _sequence("dstack", tup)], axis=2, dtype=dtype)


def column_stack(tup):
    """Stack 1-D arrays as columns of a 2-D array (2-D inputs are joined as they are)."""
    xs = [lax.transpose(atleast_2d(x), (1, 0)) if x.ndim < 2 else x
          for x in _sequence("column_stack", tup)]
    return concatenate(xs, axis=1)


# -------------------------------------------------------------------------- splitting

def _split_sizes(fun_name, size, indices_or_sections):
    spec = indices_or_sections
    if isinstance(spec, (tuple, list)) or (isinstance(spec, (Array, np.ndarray))
                                           and spec.ndim > 0):
        bounds = [0] + list(_static_ints(spec, fun_name, "split indices")) + [size]
        sizes = [b - a for a, b in zip(bounds[:-1], bounds[1:])]
        if any(s < 0 for s in sizes):
            raise ValueError(f"Sizes passed to split must be nonnegative, got {sizes} (from "
                             f"split indices {bounds[1:-1]} along an axis of size {size}; "
                             f"kiln, like JAX, requires increasing indices within the axis)")
        return sizes
    sections = _static_ints(spec, fun_name, "the number of sections")
    if sections <= 0:
        raise ValueError(f"{fun_name}: number of sections must be larger than 0, got {sections}")
    part, rest = divmod(size, sections)
    if rest and fun_name != "array_split":
        raise ValueError(f"array split does not result in an equal division: rest is {rest}")
    return [part + 1] * rest + [part] * (sections - rest)


def _split(fun_name, ary, indices_or_sections, axis):
    x = _arr(fun_name, ary)
    axis = _axis_index_error(axis, x.ndim, fun_name)
    out, start = [], 0
    for s in _split_sizes(fun_name, x.shape[axis], indices_or_sections):
        out.append(lax.slice_in_dim(x, start, start + s, axis=axis))
        start += s
    return out


def split(ary, indices_or_sections, axis=0):
    """Split into equal sections, or at the given indices, along `axis`."""
    return _split("split", ary, indices_or_sections, axis)


def array_split(ary, indices_or_sections, axis=0):
    """As `split`, but sections may differ in size by one."""
    return _split("array_split", ary, indices_or_sections, axis)


def vsplit(ary, indices_or_sections):
    """Split along axis 0."""
    return _split("vsplit", ary, indices_or_sections, 0)


def hsplit(ary, indices_or_sections):
    """Split along axis 1 (axis 0 for 1-D arrays)."""
    x = _arr("hsplit", ary)
    return _split("hsplit", x, indices_or_sections, 0 if x.ndim == 1 else 1)


def dsplit(ary, indices_or_sections):
    """Split along axis 2."""
    return _split("dsplit", ary, indices_or_sections, 2)


# ------------------------------------------------------------------- tiling, repeating

def tile(A, reps):
    """Repeat the whole array `reps` times along each axis."""
    x = _arr("tile", A)
    reps = tuple(_static_ints(r, "tile", "reps") for r in _as_tuple(reps))
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}")
    reps = (1,) * (x.ndim - len(reps)) + reps
    x = lax.expand_dims(x, tuple(range(len(reps) - x.ndim)))
    # (d0, d1, ...) -> (r0, d0, r1, d1, ...) -> (r0 * d0, r1 * d1, ...)
    wide = tuple(v for r, d in zip(reps, x.shape) for v in (r, d))
    out = lax.broadcast_in_dim(x, wide, tuple(range(1, 2 * x.ndim, 2)))
    return lax.reshape(out, tuple(r * d for r, d in zip(reps, x.shape)))


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def repeat(a, repeats, axis=None, *, total_repeat_length=None, out_sharding=None):
    """Repeat each element `repeats` times (an int, or one count per element along `axis`).

    Without `total_repeat_length` the counts must be static (they decide the result's shape);
    with it, they may be traced and the result is cut or padded (with the last element) to
    that length, as in JAX.
    """
    check_arraylike("repeat", a, repeats)
    x = to_array(a, "repeat")
    if axis is None:
        x, axis = ravel(x), 0
    axis = canonicalize_axis(axis, max(x.ndim, 1), "repeat")
    if total_repeat_length is not None:
        return _repeat_dynamic(x, repeats, axis, operator.index(total_repeat_length))
    counts = _static_ints(repeats, "repeat", "repeats")
    if isinstance(counts, list) and len(counts) == 1:
        counts = counts[0]
    if x.ndim == 0:
        if isinstance(counts, list):
            raise ValueError("`repeat` with a scalar parameter `a` is only implemented for "
                             "scalar values of the parameter `repeats`.")
        return lax.broadcast(x, (_check_count(counts),))
    if isinstance(counts, int):
        return _repeat_uniform(x, _check_count(counts), axis)
    return _repeat_counts(x, counts, axis)


def _check_count(n):
    if n < 0:
        raise ValueError(f"repeat: repeats may not contain negative values, got {n}")
    return n


def _repeat_uniform(x, n, axis):
    shape = x.shape[:axis + 1] + (n,) + x.shape[axis + 1:]
    dims = tuple(i for i in range(x.ndim + 1) if i != axis + 1)
    out = lax.broadcast_in_dim(x, shape, dims)
    return lax.reshape(out, x.shape[:axis] + (x.shape[axis] * n,) + x.shape[axis + 1:])


def _repeat_counts(x, counts, axis):
    """One gather whose (static) index lists element i counts[i] times."""
    if len(counts) != x.shape[axis]:
        raise ValueError(f"repeat: got {len(counts)} repeat counts for axis {axis} of size "
                         f"{x.shape[axis]}; give one count per element or a single count")
    index = np.repeat(np.arange(len(counts), dtype=np.int32), [_check_count(n) for n in counts])
    if not index.size:
        return lax.full_like(x, 0, shape=x.shape[:axis] + (0,) + x.shape[axis + 1:])
    return _gather_axis(x, to_array(index), axis, "promise_in_bounds", None)


def _repeat_dynamic(x, repeats, axis, total):
    """JAX's algorithm: mark where each element's run starts, then a cumulative sum gives
    every output position its source index (runs past `total` are dropped)."""
    if x.ndim == 0:
        return lax.broadcast(x, (total,))
    if total == 0:
        return lax.full_like(x, 0, shape=x.shape[:axis] + (0,) + x.shape[axis + 1:])
    if x.shape[axis] == 0:
        return x
    reps = lax.convert_element_type(ravel(_arr("repeat", repeats)), dtypes.int32)
    reps = _broadcast_to(reps, (x.shape[axis],))
    starts = lax.cumsum(lax.pad(lax.slice(reps, (0,), (reps.shape[0] - 1,)),
                                np.int32(0), ((1, 0, 0),)), 0)
    marks = lax.scatter_add(lax.full((total,), 0, dtypes.int32), lax.expand_dims(starts, (1,)),
                            lax.full(starts.shape, 1, dtypes.int32),
                            lax.ScatterDimensionNumbers((), (0,), (0,)), mode="drop")
    index = lax.sub(lax.cumsum(marks, 0), np.int32(1))
    return _gather_axis(x, index, axis, "clip", None)


# --------------------------------------------------------------- flipping and rolling

def flip(m, axis=None):
    """Reverse the order of elements along `axis` (all axes by default)."""
    x = _arr("flip", m)
    dims = tuple(range(x.ndim)) if axis is None else \
        tuple(canonicalize_axis(i, x.ndim, "flip") for i in _index_tuple(axis))
    if len(set(dims)) != len(dims):
        raise TypeError(f"rev dimensions must be unique, got {dims}.")
    return lax.rev(x, dims)


def fliplr(m):
    """Reverse along axis 1."""
    return flip(_arr("fliplr", m), 1)


def flipud(m):
    """Reverse along axis 0."""
    return flip(_arr("flipud", m), 0)


def roll(a, shift, axis=None):
    """Shift elements cyclically by `shift` along `axis` (the flattened array by default)."""
    x = _arr("roll", a)
    if axis is None:
        return lax.reshape(roll(ravel(x), shift, 0), x.shape)
    axes = tuple(canonicalize_axis(i, x.ndim, "roll") for i in _index_tuple(axis))
    shifts = _static_index_tuple(shift)
    if shifts is None:
        return _roll_dynamic(x, _arr("roll", shift), axes)
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        raise ValueError(f"roll: 'shift' {shifts} and 'axis' {axes} must have the same "
                         f"length, or one of them must be a single value")
    n = max(len(shifts), len(axes))
    for ax, s in zip(axes * (n // len(axes)), shifts * (n // len(shifts))):
        size = x.shape[ax]
        if size:
            i = (-s) % size
            x = lax.concatenate([lax.slice_in_dim(x, i, size, axis=ax),
                                 lax.slice_in_dim(x, 0, i, axis=ax)], ax)
    return x


def _static_index_tuple(x):
    """`x` as a tuple of Python ints if it is a static int or sequence of them, else None."""
    items = x if isinstance(x, (tuple, list)) else (x,)
    if all(isinstance(i, (int, np.integer)) for i in items):
        return tuple(operator.index(i) for i in items)
    return None


def _roll_dynamic(x, shift, axes):
    if shift.ndim > 1:
        raise ValueError("'shift' and 'axis' arguments to roll must be scalars or 1D arrays")
    shift = lax.convert_element_type(shift, dtypes.int32)
    n = shift.shape[0] if shift.ndim else 1
    if len(axes) != n and 1 not in (len(axes), n):
        raise ValueError(f"roll: 'shift' of shape {shift.shape} and 'axis' {axes} must have "
                         f"the same length, or one of them must be a single value")
    count = max(len(axes), n)
    for k in range(count):
        ax = axes[k if len(axes) > 1 else 0]
        s = lax.index_in_dim(shift, k if n > 1 else 0, 0, keepdims=False) if shift.ndim \
            else shift
        size = x.shape[ax]
        s = _ufuncs.remainder(s, np.int32(max(size, 1)))
        doubled = lax.concatenate([x, x], ax)
        x = lax.dynamic_slice_in_dim(doubled, lax.sub(np.int32(size), s), size, ax)
    return x


def rot90(m, k=1, axes=(0, 1)):
    """Rotate by 90 degrees `k` times in the plane of `axes` (from the first towards the
    second)."""
    x = _arr("rot90", m)
    if x.ndim < 2:
        raise ValueError(f"rot90 requires its first argument to have ndim at least two, but got "
                         f"first argument of shape {x.shape}, which has ndim {x.ndim}")
    axes = _index_tuple(axes)
    if len(axes) != 2:
        raise ValueError(f"rot90: axes must be a pair of axes, got {axes}")
    ax1, ax2 = (canonicalize_axis(i, x.ndim, "rot90") for i in axes)
    if ax1 == ax2:
        raise ValueError("Axes must be different")
    k = operator.index(k) % 4
    if k == 0:
        return x
    if k == 2:
        return lax.rev(x, (ax1, ax2))
    perm = list(range(x.ndim))
    perm[ax1], perm[ax2] = perm[ax2], perm[ax1]
    if k == 1:
        return lax.transpose(lax.rev(x, (ax2,)), perm)
    return lax.rev(lax.transpose(x, perm), (ax2,))


# --------------------------------------------------------------------------- padding

def _pairs(values, nd, name):
    """NumPy's pad-width forms (scalar, (n,), (before, after), ((b, a),), per-axis pairs)
    as a tuple of nd (before, after) pairs of static values."""
    try:
        arr = np.asarray(values)
    except ValueError:
        arr = np.empty(0, object)
    if arr.dtype == object:
        raise TypeError(f"`{name}` entries must be the same shape: {values}")
    if arr.shape not in ((nd, 2), (1, 2), (2,), (1,), ()):
        raise ValueError(f"jnp.pad: {name} with nd={nd} has unsupported shape {arr.shape}. "
                         f"Valid shapes are ({nd}, 2), (1, 2), (2,), (1,), or ().")
    return tuple((p[0].item(), p[1].item()) for p in np.broadcast_to(arr, (nd, 2)))


def _check_nonempty(x, pad_width, mode):
    for d, (lo, hi) in zip(x.shape, pad_width):
        if d == 0 and (lo > 0 or hi > 0):
            raise ValueError(f"Cannot apply '{mode}' padding to empty axis")


def _pad_constant(x, pad_width, constant_values=0):
    cv = to_array(np.asarray(constant_values) if isinstance(constant_values, (list, tuple))
                  else constant_values, "pad")
    cv = _convert(cv, x.dtype, x.weak_type)
    if cv.ndim == 0 or cv.shape == (1,):
        return lax.pad(x, lax.reshape(cv, ()), [(lo, hi, 0) for lo, hi in pad_width])
    if cv.ndim == 1 and cv.shape[0] != 2 or cv.ndim > 2:
        raise ValueError(f"jnp.pad: constant_values has unsupported shape {cv.shape}. If the "
                         f"shape is 1D or 2D, the last dimension must be of size 1 or 2.")
    cv = _broadcast_to(cv, (x.ndim, 2))
    for i, (lo, hi) in enumerate(pad_width):
        for side, width in ((0, lo), (1, hi)):
            if width:
                config = [(0, 0, 0)] * x.ndim
                config[i] = (width, 0, 0) if side == 0 else (0, width, 0)
                value = lax.reshape(lax.slice(cv, (i, side), (i + 1, side + 1)), ())
                x = lax.pad(x, value, config)
    return x


def _pad_wrap(x, pad_width):
    _check_nonempty(x, pad_width, "wrap")
    for i, (lo, hi) in enumerate(pad_width):
        size = x.shape[i]
        if not size:
            continue
        (lo_reps, lo_rem), (hi_reps, hi_rem) = divmod(lo, size), divmod(hi, size)
        parts = [lax.slice_in_dim(x, size - lo_rem, size, axis=i)] if lo_rem else []
        parts += [x] * (lo_reps + hi_reps + 1)
        parts += [lax.slice_in_dim(x, 0, hi_rem, axis=i)] if hi_rem else []
        x = lax.concatenate(parts, i)
    return x


def _pad_edge(x, pad_width):
    _check_nonempty(x, pad_width, "edge")
    for i, (lo, hi) in enumerate(pad_width):
        n = x.shape[i]
        if n:
            before = _repeat_uniform(lax.slice_in_dim(x, 0, 1, axis=i), lo, i)
            after = _repeat_uniform(lax.slice_in_dim(x, n - 1, n, axis=i), hi, i)
            x = lax.concatenate([before, x, after], i)
    return x


def _reflect_side(x, i, padding, before, mode, odd):
    """Grow axis i of x by `padding` reflected elements on one side (JAX's loop)."""
    size = x.shape[i]
    offset = 1 if mode == "reflect" and size > 1 else 0
    edge = lax.slice_in_dim(x, 0, 1, axis=i) if before else \
        lax.slice_in_dim(x, x.shape[i] - 1, x.shape[i], axis=i)
    while padding > 0:
        cur = min(padding, size - offset)
        padding -= cur
        n = x.shape[i]
        if before:
            part = lax.slice_in_dim(x, offset, offset + cur, axis=i)
        else:
            stop = n if mode == "symmetric" or size == 1 else n - 1
            part = lax.slice_in_dim(x, n - cur - offset, stop, axis=i)
        part = lax.rev(part, (i,))
        if odd:
            part = _ufuncs.subtract(_ufuncs.multiply(2, edge), part)
            if size > 1:
                m = part.shape[i]
                edge = lax.slice_in_dim(part, 0, 1, axis=i) if before else \
                    lax.slice_in_dim(part, m - 1, m, axis=i)
        x = lax.concatenate([part, x] if before else [x, part], i)
    return x


def _pad_reflect(mode):
    def fn(x, pad_width, reflect_type="even"):
        if reflect_type not in ("even", "odd"):
            raise ValueError(f"jnp.pad: reflect_type must be 'even' or 'odd', got "
                             f"{reflect_type!r}")
        _check_nonempty(x, pad_width, mode)
        for i, (lo, hi) in enumerate(pad_width):
            if x.shape[i] and (lo or hi):
                x = _reflect_side(x, i, lo, True, mode, reflect_type == "odd")
                x = _reflect_side(x, i, hi, False, mode, reflect_type == "odd")
        return x
    return fn


def _pad_empty(x, pad_width):
    return lax.pad(x, lax.full_like(x, 0, shape=()), [(lo, hi, 0) for lo, hi in pad_width])


def _pad_linear_ramp(x, pad_width, end_values=0):
    ends = _pairs(end_values, x.ndim, "end_values")
    for i, ((lo, hi), (end_lo, end_hi)) in enumerate(zip(pad_width, ends)):
        n = x.shape[i]
        ramps = []
        for width, end, edge_at in ((lo, end_lo, 0), (hi, end_hi, n - 1)):
            edge = lax.squeeze(lax.slice_in_dim(x, edge_at, edge_at + 1, axis=i), (i,))
            ramp = _creation.linspace(end, edge, width, endpoint=False, dtype=x.dtype, axis=i)
            ramps.append(_convert(ramp, x.dtype, x.weak_type))
        x = lax.concatenate([ramps[0], x, lax.rev(ramps[1], (i,))], i)
    return x


def _pad_stat(reduce_name):
    def fn(x, pad_width, stat_length=None):
        lengths = None if stat_length is None else _pairs(stat_length, x.ndim, "stat_length")
        for i, (lo, hi) in enumerate(pad_width):
            stats = []
            for side, width in ((0, lo), (1, hi)):
                part = x
                if lengths is not None:
                    length = min(lengths[i][side], x.shape[i])
                    if lengths[i][0] == 0 or lengths[i][1] == 0:
                        raise ValueError("stat_length of 0 yields no value for padding")
                    part = lax.slice_in_dim(x, 0, length, axis=i) if side == 0 else \
                        lax.slice_in_dim(x, x.shape[i] - length, x.shape[i], axis=i)
                stat = getattr(_reductions, reduce_name)(part, axis=i, keepdims=True)
                if x.dtype.kind in "iu":
                    stat = _ufuncs.round(stat)
                stat = _convert(stat, x.dtype, x.weak_type)
                stats.append(_repeat_uniform(stat, width, i))
            x = lax.concatenate([stats[0], x, stats[1]], i)
        return x
    return fn


_PAD_MODES = {
    "constant": (_pad_constant, ("constant_values",)),
    "edge": (_pad_edge, ()),
    "wrap": (_pad_wrap, ()),
    "reflect": (_pad_reflect("reflect"), ("reflect_type",)),
    "symmetric": (_pad_reflect("symmetric"), ("reflect_type",)),
    "linear_ramp": (_pad_linear_ramp, ("end_values",)),
    "maximum": (_pad_stat("max"), ("stat_length",)),
    "minimum": (_pad_stat("min"), ("stat_length",)),
    "mean": (_pad_stat("mean"), ("stat_length",)),
    "median": (_pad_stat("median"), ("stat_length",)),
    "empty": (_pad_empty, ()),
}


def pad(array, pad_width, mode="constant", **kwargs):
    """Pad an array. `pad_width` is an int, a (before, after) pair or one pair per axis;
    modes: constant (constant_values), edge, wrap, reflect/symmetric (reflect_type),
    linear_ramp (end_values), maximum/minimum/mean/median (stat_length), empty."""
    x = _arr("pad", array)
    pad_width = _pairs(pad_width, x.ndim, "pad_width")
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
               for p in pad_width for v in p):
        raise TypeError("`pad_width` must be of integral type.")
    if callable(mode):
        raise TypeError("kiln.numpy.pad: a callable `mode` is not supported; use one of "
                        + ", ".join(repr(m) for m in _PAD_MODES))
    if mode not in _PAD_MODES:
        raise ValueError(f"Unimplemented padding mode '{mode}' for np.pad; expected one of "
                         + ", ".join(repr(m) for m in _PAD_MODES))
    fn, allowed = _PAD_MODES[mode]
    extra = set(kwargs) - set(allowed)
    if extra:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {extra}")
    if x.ndim == 0:
        return x
    if any(v < 0 for p in pad_width for v in p):
        raise ValueError("index can't contain negative values")
    return fn(x, pad_width, **kwargs)


# ---------------------------------------------------------------------------- take

def _index_dtype(axis_size):
    return dtypes.int64 if axis_size > np.iinfo(np.int32).max else dtypes.int32


def _wrap_negative(indices, axis_size):
    """Indices as int32 (int64 for huge axes) with negative entries counted from the end."""
    idx = lax.convert_element_type(indices, _index_dtype(axis_size))
    if indices.dtype.kind == "u":
        return idx
    return lax.select(lax.lt(idx, lax.full_like(idx, 0)),
                      lax.add(idx, lax.full_like(idx, axis_size)), idx)


def _gather_axis(x, indices, axis, mode, fill_value):
    """x[..., indices, ...] with `indices` (any shape) replacing axis `axis`."""
    nidx = indices.ndim
    slice_sizes = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(range(axis)) + tuple(range(axis + nidx, x.ndim + nidx - 1)),
        collapsed_slice_dims=(axis,), start_index_map=(axis,))
    return lax.gather(x, lax.expand_dims(indices, (nidx,)), dnums, slice_sizes, mode=mode,
                      fill_value=fill_value)


_TAKE_MODES = {None: "fill", "fill": "fill", "clip": "clip", "wrap": "promise_in_bounds"}


def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """Elements of `a` at `indices` along `axis` (of the flattened `a` by default).

    Out-of-bounds indices: mode None/'fill' returns `fill_value` (NaN, the integer minimum
    for signed, maximum for unsigned, True for bool), 'clip' clamps, 'wrap' wraps around.
    """
    if out is not None:
        raise TypeError("take: the 'out' argument is not supported; kiln arrays are "
                        "immutable, use the returned array")
    x, idx = _arrs("take", (a, indices))
    if idx.dtype.kind not in "iu":
        raise ValueError(f"take: indices must have an integer type, got {idx.dtype}")
    if axis is None:
        x, axis = ravel(x), 0
    else:
        axis = canonicalize_axis(axis, x.ndim, "take")
    if mode == "raise":
        raise ValueError("take: mode='raise' is not supported (checking bounds needs the "
                         "index values at trace time); use mode='fill', 'clip' or 'wrap'")
    if mode not in _TAKE_MODES:
        raise ValueError(f"Invalid mode '{mode}' for np.take")
    n = x.shape[axis]
    out_shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
    if n == 0 and idx.size:
        raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
    if idx.size == 0:
        return lax.full_like(x, 0, shape=out_shape)
    if mode == "wrap":
        idx = _ufuncs.remainder(lax.convert_element_type(idx, _index_dtype(n)),
                                _index_dtype(n).type(n))
    elif mode != "clip":
        idx = _wrap_negative(idx, n)
    return _gather_axis(x, idx, axis, _TAKE_MODES[mode], fill_value)


_ALONG_MODES = ("fill", "clip", "promise_in_bounds")


def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None, *,
                    wrap_negative_indices=None):
    """out[..., i, ...] = arr[..., indices[..., i, ...], ...] along `axis`, with the other
    axes of `indices` and `arr` broadcast against each other (NumPy's take_along_axis)."""
    x, idx = _arrs("take_along_axis", (arr, indices))
    if idx.dtype.kind not in "iu":
        raise TypeError(f"take_along_axis indices must be of integer type, got {idx.dtype}")
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(f"take_along_axis indices must be 1D if axis=None, got shape "
                             f"{idx.shape}")
        x, axis = ravel(x), 0
    if x.ndim != idx.ndim:
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{idx.ndim} vs. {x.ndim}")
    axis = canonicalize_axis(axis, x.ndim, "take_along_axis")
    mode = "fill" if mode is None else getattr(mode, "value", mode)
    if mode not in _ALONG_MODES:
        raise ValueError(f'Unknown gather mode "{mode}"; expected one of {_ALONG_MODES}')
    arr_shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    out_shape = tuple(_broadcast_shapes(idx.shape, arr_shape))
    if x.shape[axis] == 0:
        return lax.full(out_shape, 0, x.dtype)
    if mode != "promise_in_bounds" if wrap_negative_indices is None else wrap_negative_indices:
        idx = _wrap_negative(idx, x.shape[axis])
    return _gather_along(x, idx, axis, out_shape, mode, fill_value)


def _gather_along(x, idx, axis, out_shape, mode, fill_value):
    """The gather of take_along_axis: axes where `indices` has size 1 are taken whole,
    axes where `arr` has size 1 are squeezed, equal axes are matched with an iota index."""
    if math.prod(out_shape) == 0:
        return lax.full_like(x, 0, shape=out_shape)
    index_dims = [i for i in range(x.ndim) if i == axis or idx.shape[i] != 1]
    squeeze = [i for i in index_dims if i != axis and x.shape[i] == 1]
    batch = [i for i in index_dims if i != axis and x.shape[i] != 1]
    new = {d: d - sum(s < d for s in squeeze) for d in range(x.ndim) if d not in squeeze}
    batch_shape = tuple(out_shape[i] for i in index_dims)
    components = [lax.reshape(_broadcast_to(idx, tuple(
        out_shape[i] if i in index_dims else 1 for i in range(x.ndim))), batch_shape)]
    components += [lax.broadcasted_iota(components[0].dtype, batch_shape, index_dims.index(i))
                   for i in batch]
    gather_idx = lax.concatenate([lax.expand_dims(c, (len(batch_shape),)) for c in components],
                                 len(batch_shape))
    operand = lax.squeeze(x, squeeze)
    collapsed = [new[axis]] + [new[i] for i in batch]
    slice_sizes = tuple(1 if d in collapsed else operand.shape[d] for d in range(operand.ndim))
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(i for i in range(x.ndim) if i not in index_dims),
        collapsed_slice_dims=tuple(sorted(collapsed)), start_index_map=tuple(collapsed))
    return lax.gather(operand, gather_idx, dnums, slice_sizes, mode=mode,
                      fill_value=fill_value)


# ----------------------------------------------------------- diagonals and triangles

def _diagonal_last2(x, offset):
    """The `offset` diagonal of the last two axes of x, as a new last axis (slices only)."""
    n, m = x.shape[-2:]
    length = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    r0, c0 = min(max(-offset, 0), n), min(max(offset, 0), m)
    nd = x.ndim
    block = lax.slice(x, (0,) * (nd - 2) + (r0, c0),
                      x.shape[:-2] + (r0 + length, c0 + length))
    flat = lax.reshape(block, x.shape[:-2] + (length * length,))
    return lax.slice(flat, (0,) * (nd - 1), flat.shape, (1,) * (nd - 2) + (length + 1,))


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The `offset` diagonal of the axes (axis1, axis2), as the last axis of the result."""
    x = _arr("diagonal", a)
    if x.ndim < 2:
        raise ValueError("diagonal requires an array of at least two dimensions.")
    return _diagonal_last2(_last_two(x, axis1, axis2, "diagonal"), operator.index(offset))


def diag(v, k=0):
    """The k-th diagonal of a 2-D array, or a 2-D array with the 1-D `v` on its k-th
    diagonal."""
    x = _arr("diag", v)
    k = operator.index(k)
    if x.ndim == 2:
        return _diagonal_last2(x, k)
    if x.ndim != 1:
        raise ValueError("diag input must be 1d or 2d")
    # Element i of v lands at flat position i * (n + 1) + start of the n x n result.
    length, n = x.shape[0], x.shape[0] + abs(k)
    start = k if k >= 0 else -k * n
    used = length + max(length - 1, 0) * n
    flat = lax.pad(x, lax.full_like(x, 0, shape=()), ((start, n * n - start - used, n),))
    return lax.reshape(flat, (n, n))


def _tri_mask(shape, k, upper):
    """Boolean mask of the (N, M) lower (col - row <= k) or upper (col - row >= k) part,
    broadcast to `shape`."""
    rows_cols = shape[-2:]
    diff = lax.sub(lax.broadcasted_iota(dtypes.int32, rows_cols, 1),
                   lax.broadcasted_iota(dtypes.int32, rows_cols, 0))
    mask = (lax.ge if upper else lax.le)(diff, np.int32(k))
    return lax.broadcast_in_dim(mask, shape, (len(shape) - 2, len(shape) - 1))


def _triangle(fun_name, m, k, upper):
    x = _arr(fun_name, m)
    if x.ndim < 2:
        raise ValueError(f"Argument to jax.numpy.{fun_name} must be at least 2D")
    return lax.select(_tri_mask(x.shape, operator.index(k), upper), x, lax.full_like(x, 0))


def tril(m, k=0):
    """Zero the elements above the k-th diagonal of the last two axes."""
    return _triangle("tril", m, k, upper=False)


def triu(m, k=0):
    """Zero the elements below the k-th diagonal of the last two axes."""
    return _triangle("triu", m, k, upper=True)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum of the `offset` diagonal of axes (axis1, axis2); dtypes as `kiln.numpy.sum`."""
    if out is not None:
        raise TypeError("trace: the 'out' argument is not supported; kiln arrays are "
                        "immutable, use the returned array")
    x = _arr("trace", a)
    diag_ = _diagonal_last2(_last_two(x, axis1, axis2, "trace"), operator.index(offset))
    return _reductions.sum(diag_, axis=-1, dtype=dtype)
