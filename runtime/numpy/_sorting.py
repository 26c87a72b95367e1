"""`kiln.numpy` sorting and searching: sort, argsort, lexsort, sort_complex, partition,
argpartition, searchsorted.

All of them are built on the multi-operand `lax.sort` primitive, whose comparator is JAX's:
-0.0 equals 0.0 and NaNs sort last (complex numbers compare by real part, then imaginary).
`searchsorted` is JAX's default binary search, unrolled over the static number of levels, with
the same comparator. `partition`/`argpartition` return exactly JAX's arrangement: the kth+1
smallest in ascending order, then the rest (values in descending order for `partition`,
indices in increasing order for `argpartition`); unlike JAX they also accept booleans, complex
numbers and axis=None (NumPy flattens), and they order the integer minimum correctly.
"""
import operator

import numpy as np

from .. import lax
from ..array import Array, to_array
from ..compiler.ir import dtypes
from ._core import check_arraylike, canonicalize_axis, canonical_dtype, promote_dtypes
from . import _shape

__all__ = ["sort", "argsort", "lexsort", "sort_complex", "partition", "argpartition",
           "searchsorted"]

_INT32_MAX = np.iinfo(np.int32).max


def _arr(fun_name, x):
    check_arraylike(fun_name, x)
    return to_array(x, fun_name)


def _sort_axis(x, axis, fun_name):
    """(x, dimension): axis=None sorts the flattened array."""
    if axis is None:
        return _shape.ravel(x), 0
    return x, canonicalize_axis(axis, x.ndim, fun_name)


def _check_kind_order(fun_name, kind, order):
    if kind is not None:
        raise TypeError(f"'kind' argument to {fun_name} is not supported. Use stable=True or "
                        f"stable=False to specify sort stability.")
    if order is not None:
        raise TypeError(f"'order' argument to {fun_name} is not supported (kiln arrays have no "
                        f"structured dtypes).")


def _default_index_dtype(size):
    return dtypes.int64 if size > _INT32_MAX else dtypes.default_int()


def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """Sorted copy of `a` along `axis` (the flattened array for axis=None)."""
    _check_kind_order("sort", kind, order)
    x, dim = _sort_axis(_arr("sort", a), axis, "sort")
    out = lax.sort(x, dimension=dim, is_stable=stable)
    return lax.rev(out, (dim,)) if descending else out


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
    """Indices that sort `a` along `axis`; a stable descending sort keeps equal elements in
    their original order."""
    _check_kind_order("argsort", kind, order)
    x, dim = _sort_axis(_arr("argsort", a), axis, "argsort")
    idx_dtype = _default_index_dtype(x.shape[dim]) if dtype is None else \
        canonical_dtype(dtype, "argsort")
    iota = lax.broadcasted_iota(idx_dtype, x.shape, dim)
    if descending and stable:
        x, iota = lax.rev(x, (dim,)), lax.rev(iota, (dim,))
    _, idx = lax.sort_key_val(x, iota, dimension=dim, is_stable=stable)
    return lax.rev(idx, (dim,)) if descending else idx


def lexsort(keys, axis=-1):
    """Indices that sort by the last key, then the one before, ...; each key is an array of
    the same shape (a 2-D array gives one key per row)."""
    if isinstance(keys, (Array, np.ndarray)):
        keys = to_array(keys, "lexsort")
        keys = list(_shape.unstack(keys)) if keys.ndim else [keys]
    keys = list(keys)
    check_arraylike("lexsort", *keys)
    keys = [to_array(k, "lexsort") for k in keys]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    if len({k.shape for k in keys}) > 1:
        raise ValueError(f"all keys need to be the same shape, got "
                         f"{', '.join(str(k.shape) for k in keys)}")
    if keys[0].ndim == 0:
        return lax.full((), 0, dtypes.default_int())
    dim = canonicalize_axis(axis, keys[0].ndim, "lexsort")
    iota = lax.broadcasted_iota(_default_index_dtype(keys[0].shape[dim]), keys[0].shape, dim)
    return lax.sort(keys[::-1] + [iota], dimension=dim, num_keys=len(keys))[-1]


def sort_complex(a):
    """Sort along the last axis and return a complex array."""
    x = sort(_arr("sort_complex", a))
    # JAX's `to_complex_dtype`: complex128 from 64-bit types, complex64 from all others.
    wide = x.dtype in (dtypes.float64, dtypes.complex128, dtypes.int64, dtypes.uint64)
    complex_dtype = dtypes.complex128 if wide else dtypes.complex64
    return lax.convert_element_type(x, complex_dtype)


# ----------------------------------------------------------------------- partitioning

def _partition_args(fun_name, a, kth, axis):
    x, dim = _sort_axis(_arr(fun_name, a), axis, fun_name)
    n = x.shape[dim]
    kth = operator.index(kth)
    if not -n <= kth < n:
        raise ValueError(f"{fun_name}: kth={kth} is out of bounds for an axis of size {n}")
    return x, dim, kth % n


def partition(a, kth, axis=-1):
    """`a` rearranged along `axis` so that element `kth` is where a sort would put it: the
    kth+1 smallest first (ascending), then the others (descending), as JAX returns them."""
    x, dim, kth = _partition_args("partition", a, kth, axis)
    s = lax.sort(x, dimension=dim)
    n = x.shape[dim]
    return lax.concatenate([lax.slice_in_dim(s, 0, kth + 1, axis=dim),
                            lax.rev(lax.slice_in_dim(s, kth + 1, n, axis=dim), (dim,))], dim)


def argpartition(a, kth, axis=-1):
    """Indices that partition `a`: those of the kth+1 smallest (in sorted order), then the
    others in increasing index order, as JAX returns them (int32)."""
    x, dim, kth = _partition_args("argpartition", a, kth, axis)
    n = x.shape[dim]
    iota = lax.broadcasted_iota(dtypes.int32, x.shape, dim)
    _, perm = lax.sort_key_val(x, iota, dimension=dim)
    rest = lax.sort(lax.slice_in_dim(perm, kth + 1, n, axis=dim), dimension=dim)
    return lax.concatenate([lax.slice_in_dim(perm, 0, kth + 1, axis=dim), rest], dim)


# ------------------------------------------------------------------------ searchsorted
#
# The sort comparator as elementwise lax: floats with NaNs last (and equal to each other),
# complex numbers lexicographically, booleans False < True.

def _isnan(x):
    return lax.ne(x, x)


def _lt_float(x, y):
    return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(lax.bitwise_not(_isnan(x)), _isnan(y)))


def _le_float(x, y):
    return lax.bitwise_or(lax.le(x, y), _isnan(y))


def _eq_float(x, y):
    return lax.bitwise_or(lax.eq(x, y), lax.bitwise_and(_isnan(x), _isnan(y)))


def _lt_complex(x, y):
    rx, ry, ix, iy = lax.real(x), lax.real(y), lax.imag(x), lax.imag(y)
    return lax.bitwise_or(_lt_float(rx, ry), lax.bitwise_and(_eq_float(rx, ry), _lt_float(ix, iy)))


def _le_complex(x, y):
    rx, ry, ix, iy = lax.real(x), lax.real(y), lax.imag(x), lax.imag(y)
    return lax.bitwise_or(_lt_float(rx, ry), lax.bitwise_and(_eq_float(rx, ry), _le_float(ix, iy)))


_LESS = {  # dtype kind -> (less than, less or equal)
    "f": (_lt_float, _le_float),
    "c": (_lt_complex, _le_complex),
    "b": (lambda x, y: lax.bitwise_and(lax.bitwise_not(x), y), lambda x, y: lax.bitwise_or(lax.bitwise_not(x), y)),
    "i": (lax.lt, lax.le),
    "u": (lax.lt, lax.le),
}

_METHODS = ("compare_all", "scan", "scan_unrolled", "sort")


def _binary_search(a, v, go_left, dtype):
    """JAX's scan search: keep a[low] < v <= a[high] (for side='left'); the answer is high."""
    n = a.shape[0]
    low = lax.full(v.shape, 0, dtype)
    high = lax.full(v.shape, n, dtype)
    for _ in range(n.bit_length()):
        mid = lax.add(low, lax.div(lax.sub(high, low), dtype.type(2)))
        left = go_left(v, _shape._gather_axis(a, mid, 0, "clip", None))
        low, high = lax.select(left, low, mid), lax.select(left, mid, high)
    return high


def _count_below(a, v, below, dtype):
    """Number of elements of `a` for which below(a_i, v) holds, for every element of v."""
    shape = (a.shape[0],) + v.shape
    av = lax.broadcast_in_dim(a, shape, (0,))
    vv = lax.broadcast_in_dim(v, shape, tuple(range(1, len(shape))))
    return lax.reduce_sum(lax.convert_element_type(below(av, vv), dtype), (0,))


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Indices at which to insert `v` into the sorted 1-D `a` to keep it sorted: the first
    suitable position (side='left') or the last (side='right'). NaNs sort last."""
    if sorter is None:
        check_arraylike("searchsorted", a, v)
    else:
        check_arraylike("searchsorted", a, v, sorter)
    a, v = to_array(a, "searchsorted"), to_array(v, "searchsorted")
    if a.ndim != 1:
        raise ValueError(f"a should be 1-dimensional, got shape {a.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"invalid argument side={side!r}, expected 'left' or 'right'")
    if method not in _METHODS:
        raise ValueError(f"invalid argument method={method!r}, expected one of "
                         f"{sorted(_METHODS)}")
    a, v = promote_dtypes(a, v)
    n = a.shape[0]
    if sorter is not None:
        sorter = to_array(sorter, "searchsorted")
        if sorter.dtype.kind not in "iu":
            raise TypeError(f"searchsorted: sorter must have an integer type, got "
                            f"{sorter.dtype}")
        a = _shape.take(a, _shape._wrap_negative(sorter, n), mode="clip")
    dtype = dtypes.int64 if n > _INT32_MAX else dtypes.int32
    if n == 0:
        return lax.full(v.shape, 0, dtype)
    lt, le = _LESS[a.dtype.kind]
    if method.startswith("scan"):
        return _binary_search(a, v, le if side == "left" else lt, dtype)
    return _count_below(a, v, lt if side == "left" else le, dtype)
