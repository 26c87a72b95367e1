"""`kiln.numpy` functions that build a new array from an old one with elements added, removed
or replaced: append, insert, delete, fill_diagonal, put, put_along_axis, place, trim_zeros,
diagflat, vander, mask_indices, block, fromfunction.

kiln arrays are immutable, so the NumPy functions that work in place (`fill_diagonal`, `put`,
`place`, `put_along_axis`) need `inplace=False`, as in JAX, and return the new array.
Positions given as arrays (`insert`, `delete`) must be concrete, since they fix the result's
shape; `delete` with `assume_unique_indices=True` works under `jit`.
"""
import operator

import numpy as np

from ..array import to_array
from ._core import check_arraylike
from .. import numpy as jnp

__all__ = ["append", "insert", "delete", "fill_diagonal", "put", "put_along_axis", "place",
           "trim_zeros", "diagflat", "vander", "mask_indices", "block", "fromfunction"]


def _arr(name, x):
    check_arraylike(name, x)
    return to_array(x, name)


def _not_inplace(name, inplace):
    if inplace:
        raise ValueError(f"jax.numpy.{name} cannot modify arrays in-place, because kiln arrays "
                         f"are immutable. Pass inplace=False to instead return an updated "
                         f"array.")


def append(arr, values, axis=None):
    """`arr` with `values` appended (both flattened when `axis` is None)."""
    a, v = _arr("append", arr), _arr("append", values)
    if axis is None:
        return jnp.concatenate([jnp.ravel(a), jnp.ravel(v)])
    return jnp.concatenate([a, v], axis=axis)


def _positions(obj, n, name):
    """Concrete integer positions from an int, a slice or an array, within 0..n."""
    if isinstance(obj, slice):
        return np.arange(n)[obj]
    try:
        idx = np.asarray(obj)
    except Exception:   # a traced value
        raise TypeError(f"jnp.{name}: the positions must be concrete (known when the "
                        f"function is compiled), not a traced value") from None
    if idx.dtype.kind == "b":
        raise ValueError(f"jnp.{name}(): boolean index arrays are not supported")
    return idx


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """`arr` without the entries at `obj` along `axis` (the flattened array if None)."""
    a = _arr("delete", arr)
    if axis is None:
        a, axis = jnp.ravel(a), 0
    axis = axis + a.ndim if axis < 0 else axis
    n = a.shape[axis]
    if assume_unique_indices and not isinstance(obj, slice):
        idx = jnp.asarray(obj)
        idx = jnp.ravel(jnp.where(idx < 0, idx + n, idx))
        keep_n = n - idx.size
        # positions i of the result: i plus how many deleted positions are at or before it
        i = jnp.arange(keep_n)
        shift = jnp.sum(jnp.sort(idx)[None, :] - jnp.arange(idx.size)[None, :] <= i[:, None],
                        axis=1)
        return jnp.take(a, i + shift, axis=axis)
    idx = _positions(obj, n, "delete")
    idx = np.where(idx < 0, idx + n, idx).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"index out of bounds for axis {axis} with size {n}")
    keep = np.setdiff1d(np.arange(n), idx)
    return jnp.take(a, jnp.asarray(keep, dtype=jnp.int32), axis=axis)


def insert(arr, obj, values, axis=None):
    """`arr` with `values` inserted before the positions `obj` along `axis`."""
    a = _arr("insert", arr)
    if axis is None:
        a, axis = jnp.ravel(a), 0
    axis = axis + a.ndim if axis < 0 else axis
    n = a.shape[axis]
    idx = _positions(obj, n + 1, "insert") if isinstance(obj, slice) else \
        _positions(obj, n, "insert")
    scalar = idx.ndim == 0
    idx = np.where(idx < 0, idx + n, idx).ravel()
    if idx.size and (idx.min() < 0 or idx.max() > n):
        raise IndexError(f"index {obj} is out of bounds for axis {axis} with size {n}")
    check_arraylike("insert", values)
    v = jnp.asarray(values, dtype=a.dtype)
    if scalar:   # NumPy: values as an a.ndim array whose first axis runs along `axis`
        v = jnp.moveaxis(jnp.reshape(v, (1,) * (a.ndim - v.ndim) + v.shape), 0, axis)
        idx = np.full(v.shape[axis], idx[0])
    shape = list(a.shape)
    shape[axis] = idx.size
    v = jnp.broadcast_to(v, tuple(shape))
    order = np.argsort(idx, kind="stable")
    placed = np.empty_like(idx)
    placed[order] = idx[order] + np.arange(idx.size)   # where each value lands
    total = n + idx.size
    is_new = np.zeros(total, bool)
    is_new[placed] = True
    from_old = np.clip(np.cumsum(~is_new) - 1, 0, max(n - 1, 0))
    from_new = np.zeros(total, np.int64)
    from_new[placed] = np.arange(idx.size)
    new = jnp.take(v, jnp.asarray(from_new, jnp.int32), axis=axis)
    if n == 0:
        return new
    old = jnp.take(a, jnp.asarray(from_old, jnp.int32), axis=axis)
    mask_shape = [1] * a.ndim
    mask_shape[axis] = total
    return jnp.where(jnp.reshape(jnp.asarray(is_new), mask_shape), new, old)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """`a` with its main diagonal set to `val` (repeated cyclically); `inplace=False`."""
    _not_inplace("fill_diagonal", inplace)
    arr = _arr("fill_diagonal", a)
    if arr.ndim < 2:
        raise ValueError("array must be at least 2-d")
    if arr.ndim > 2 and len(set(arr.shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    n = min(arr.shape)
    if arr.ndim == 2 and wrap and arr.shape[0] > arr.shape[1] + 1:
        step = arr.shape[1] + 1
        flat = np.arange(0, arr.size, step)
        rows, cols = flat // arr.shape[1], flat % arr.shape[1]
        idx = (jnp.asarray(rows), jnp.asarray(cols))
        count = flat.size
    else:
        idx = (jnp.arange(n),) * arr.ndim
        count = n
    vals = jnp.ravel(jnp.asarray(val, dtype=arr.dtype))
    vals = jnp.tile(vals, -(-count // max(vals.size, 1)))[:count]
    return arr.at[idx].set(vals)


def put(a, ind, v, mode=None, *, inplace=True):
    """`a` with the flat positions `ind` set to `v` (cycled); `inplace=False`."""
    _not_inplace("put", inplace)
    arr = _arr("put", a)
    check_arraylike("put", ind, v)
    ind = jnp.ravel(jnp.asarray(ind))
    vals = jnp.ravel(jnp.asarray(v, dtype=arr.dtype))
    if vals.size == 0:
        return arr
    vals = jnp.tile(vals, -(-ind.size // vals.size))[:ind.size]
    if mode == "wrap":
        ind = jnp.mod(ind, arr.size)
    elif mode == "clip":
        ind = jnp.clip(ind, 0, arr.size - 1)
    elif mode not in (None, "fill", "drop", "raise", "promise_in_bounds"):
        raise ValueError(f"mode should be one of 'wrap' or 'clip'; got mode={mode}")
    flat = jnp.ravel(arr).at[ind].set(vals, mode=None if mode in ("wrap", "clip") else mode)
    return jnp.reshape(flat, arr.shape)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """`arr` with `values` written at `indices` along `axis` (`take_along_axis`'s inverse)."""
    _not_inplace("put_along_axis", inplace)
    a = _arr("put_along_axis", arr)
    idx = jnp.asarray(indices)
    if axis is None:
        a, axis = jnp.ravel(a), 0
        idx = jnp.ravel(idx)
    axis = axis + a.ndim if axis < 0 else axis
    idx = jnp.where(idx < 0, idx + a.shape[axis], idx)
    shape = jnp.broadcast_shapes(idx.shape, ())
    grids = list(jnp.indices(shape, sparse=True))
    grids[axis] = idx
    out = a.at[tuple(grids)].set(jnp.broadcast_to(jnp.asarray(values, a.dtype), idx.shape),
                                 mode=mode)
    return out if arr is None or np.ndim(arr) == a.ndim else jnp.reshape(out, np.shape(arr))


def place(arr, mask, vals, *, inplace=True):
    """`arr` with the entries where `mask` is true set to `vals`, cycled in order."""
    _not_inplace("place", inplace)
    a = _arr("place", arr)
    check_arraylike("place", mask, vals)
    m = jnp.ravel(jnp.asarray(mask, dtype=bool))
    v = jnp.ravel(jnp.asarray(vals, dtype=a.dtype))
    if v.size == 0:
        return a
    k = jnp.cumsum(m) - 1
    out = jnp.where(m, v[jnp.mod(k, v.size)], jnp.ravel(a))
    return jnp.reshape(out, a.shape)


def trim_zeros(filt, trim="fb", axis=None):
    """`filt` without its leading (`f`) and trailing (`b`) zeros (a concrete array)."""
    a = _arr("trim_zeros", filt)
    nz = np.asarray(a) != 0
    if a.ndim == 0:
        raise TypeError("Cannot trim a 0-d array")
    axes = tuple(range(a.ndim)) if axis is None else \
        ((axis,) if isinstance(axis, int) else tuple(axis))
    index = [slice(None)] * a.ndim
    for ax in axes:
        ax = ax + a.ndim if ax < 0 else ax
        along = nz.any(axis=tuple(d for d in range(a.ndim) if d != ax)) if a.ndim > 1 else nz
        where = np.flatnonzero(along)
        start, stop = (0, 0) if where.size == 0 else (where[0], where[-1] + 1)
        index[ax] = slice(start if "f" in trim.lower() else 0,
                          stop if "b" in trim.lower() else a.shape[ax])
    return a[tuple(index)]


def diagflat(v, k=0):
    """A 2-D array with the flattened `v` on diagonal `k`."""
    return jnp.diag(jnp.ravel(_arr("diagflat", v)), k)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of 1-D `x`: columns `x**(N-1) ... x**0` (or increasing)."""
    a = _arr("vander", x)
    if a.ndim != 1:
        raise ValueError("x must be a one-dimensional array")
    n = a.shape[0] if N is None else operator.index(N)
    if n < 0:
        raise ValueError("N must be nonnegative")
    powers = jnp.arange(n) if increasing else jnp.arange(n - 1, -1, -1)
    return jnp.power(a[:, None], powers[None, :].astype(a.dtype if a.dtype.kind in "fc"
                                                        else jnp.int32))


def mask_indices(n, mask_func, k=0, *, size=None):
    """The indices where `mask_func(ones((n, n)), k)` is non-zero."""
    return jnp.nonzero(mask_func(jnp.ones((n, n)), k), size=size)


def block(arrays):
    """An array assembled from nested lists of blocks (the innermost list joined along the
    last axis, the outer ones along earlier axes)."""
    def depth(x):
        return 1 + depth(x[0]) if isinstance(x, list) and x else (1 if isinstance(x, list)
                                                                   else 0)
    if isinstance(arrays, tuple):
        raise TypeError("jnp.block: arrays is a tuple; only lists can be used to arrange "
                        "blocks")
    d = depth(arrays)

    def leaves_ndim(x):
        return max(leaves_ndim(e) for e in x) if isinstance(x, list) else jnp.ndim(x)
    ndim = max(d, leaves_ndim(arrays))

    def build(x, level):
        if not isinstance(x, list):
            return jnp.reshape(jnp.asarray(x), (1,) * (ndim - jnp.ndim(x)) + jnp.shape(x))
        if not x:
            raise ValueError("Lists cannot be empty")
        return jnp.concatenate([build(e, level + 1) for e in x], axis=ndim - d + level)
    return build(arrays, 0)


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """`function(*coordinates)` over the index grid of `shape` (coordinates of `dtype`)."""
    shape = tuple(operator.index(s) for s in shape)
    grids = [jnp.reshape(jnp.arange(n, dtype=dtype), (1,) * i + (n,) + (1,) * (len(shape) - i - 1))
             for i, n in enumerate(shape)]
    grids = [jnp.broadcast_to(g, shape) for g in grids]
    return function(*grids, **kwargs)
