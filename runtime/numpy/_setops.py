"""`kiln.numpy` set operations: unique (and the array-API unique_all, unique_counts,
unique_inverse, unique_values), isin, union1d, intersect1d, setdiff1d, setxor1d.

JAX's algorithms: sort (rows compared lexicographically for `axis`), mark where a value
differs from its predecessor (NaNs equal with `equal_nan`), then gather the marked entries.
The number of results depends on the data, so under `jit` pass `size=` (the results are
padded: with `fill_value` where given, else with the first result, as JAX does); eagerly the
results have their natural length.
"""
from typing import NamedTuple

import numpy as np

from ..array import to_array
from ._core import check_arraylike
from . import _indexing, _reductions, _shape, _sorting, _creation, _ufuncs

__all__ = ["unique", "unique_all", "unique_counts", "unique_inverse", "unique_values", "isin",
           "union1d", "intersect1d", "setdiff1d", "setxor1d"]


def _arr(name, x):
    check_arraylike(name, x)
    return to_array(x, name)


def _differs(a, b, equal_nan):
    """Rows of `a` and `b` (2-D) differ somewhere (NaNs equal each other with `equal_nan`)."""
    neq = _ufuncs.not_equal(a, b)
    if equal_nan and a.dtype.kind in "fc":
        neq = _ufuncs.logical_and(neq, _ufuncs.logical_not(
            _ufuncs.logical_and(_ufuncs.isnan(a), _ufuncs.isnan(b))))
    return _reductions.any(neq, axis=1)


def _positions(mask, size):
    """The indices where `mask` is set: all of them, or the first `size` (padded with 0)."""
    return _indexing.nonzero(mask, size=size)[0]


def _fill(result, count, size, fill_value):
    if size is None or fill_value is None:
        return result
    valid = _creation.arange(size) < count
    valid = _shape.reshape(valid, (size,) + (1,) * (result.ndim - 1))
    return _indexing.where(valid, result, _creation.asarray(fill_value, dtype=result.dtype))


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):
    """The sorted unique values of `ar` (rows along `axis`), optionally with the first
    index of each, the inverse mapping and the counts."""
    arr = _arr("unique", ar)
    if axis is None:
        rows = _shape.reshape(arr, (arr.size, 1))
    else:
        axis = axis + arr.ndim if axis < 0 else axis
        moved = _shape.moveaxis(arr, axis, 0)
        rows = _shape.reshape(moved, (moved.shape[0], -1))
    n = rows.shape[0]
    if rows.shape[1] == 1:
        perm = _sorting.argsort(rows[:, 0])
    else:
        perm = _sorting.lexsort(tuple(rows[:, j] for j in range(rows.shape[1] - 1, -1, -1)))
    aux = rows[perm]
    if n:
        mask = _shape.concatenate([_creation.ones(1, bool),
                                   _differs(aux[1:], aux[:-1], equal_nan)])
    else:
        mask = _creation.zeros(0, bool)
    count = _reductions.sum(mask)
    ind = _positions(mask, size)
    values = aux[ind] if n else _creation.zeros((size or 0, rows.shape[1]), arr.dtype)
    values = _fill(values, count, size, fill_value)
    if axis is None:
        result = values[:, 0]
    else:
        result = _shape.moveaxis(_shape.reshape(values, (-1,) + moved.shape[1:]), 0, axis)
    out = [result]
    if return_index:
        out.append(perm[ind] if n else _creation.zeros(size or 0, int))
    if return_inverse:
        # Indices and counts in the default integer type (int64 under x64), as JAX's.
        inv = _creation.zeros(n, int).at[perm].set(_reductions.cumsum(mask) - 1) \
            if n else _creation.zeros(0, int)
        out.append(_shape.reshape(inv, arr.shape) if axis is None else inv)
    if return_counts:
        if n:
            ends = _indexing.nonzero(_shape.concatenate([mask, _creation.ones(1, bool)]),
                                     size=None if size is None else size + 1)[0]
            ends = ends.at[1:].set(_indexing.where(ends[1:] > 0, ends[1:], n))
            out.append(_ufuncs.subtract(ends[1:], ends[:-1]))
        else:
            out.append(_creation.zeros(size or 0, int))
    return out[0] if len(out) == 1 else tuple(out)


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def unique_all(x, /, *, size=None, fill_value=None):
    """The array API's `unique_all`: values, first indices, inverse indices, counts."""
    return UniqueAllResult(*unique(x, True, True, True, size=size, fill_value=fill_value))


def unique_counts(x, /, *, size=None, fill_value=None):
    return UniqueCountsResult(*unique(x, return_counts=True, size=size, fill_value=fill_value))


def unique_inverse(x, /, *, size=None, fill_value=None):
    return UniqueInverseResult(*unique(x, return_inverse=True, size=size, fill_value=fill_value))


def unique_values(x, /, *, size=None, fill_value=None):
    return unique(x, size=size, fill_value=fill_value)


def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """Whether each element of `element` is in `test_elements` (every pair compared)."""
    a, b = _arr("isin", element), _arr("isin", test_elements)
    found = _reductions.any(_ufuncs.equal(_shape.ravel(a)[:, None], _shape.ravel(b)[None, :]),
                            axis=1)
    found = _ufuncs.logical_not(found) if invert else found
    return _shape.reshape(found, a.shape)


def _select(mask, values, size, fill_value):
    """`values[mask]`, or its first `size` entries padded with `fill_value`."""
    picked = values[_positions(mask, size)]
    return _fill(picked, _reductions.sum(mask), size, fill_value)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values in either array."""
    a, b = _arr("union1d", ar1), _arr("union1d", ar2)
    return unique(_shape.concatenate([_shape.ravel(a), _shape.ravel(b)]), size=size,
                  fill_value=fill_value)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The unique values of `ar1` not in `ar2` (sorted unless `assume_unique`)."""
    a, b = _shape.ravel(_arr("setdiff1d", ar1)), _shape.ravel(_arr("setdiff1d", ar2))
    if not assume_unique:
        n_unique = None
        if size is not None and a.size:
            # padded with the first value: only the first n_unique entries are real
            a, counts = unique(a, return_counts=True, size=a.size)
            n_unique = _reductions.sum(counts > 0)
        elif a.size:
            a = unique(a)
    mask = isin(a, b, invert=True)
    if not assume_unique and size is not None and a.size:
        mask = _ufuncs.logical_and(mask, _creation.arange(a.size) < n_unique)
    return _select(mask, a, size, fill_value)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted values in exactly one of the arrays."""
    a, b = _shape.ravel(_arr("setxor1d", ar1)), _shape.ravel(_arr("setxor1d", ar2))
    if not assume_unique:
        a, b = unique(a), unique(b)
    aux = _sorting.sort(_shape.concatenate([a, b]))
    if aux.size == 0:
        return _select(_creation.zeros(0, bool), aux, size, fill_value)
    edge = _creation.ones(1, bool)
    flag = _shape.concatenate([edge, _ufuncs.not_equal(aux[1:], aux[:-1]), edge])
    return _select(_ufuncs.logical_and(flag[1:], flag[:-1]), aux, size, fill_value)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """The sorted values in both arrays, optionally with their indices in each."""
    a, b = _shape.ravel(_arr("intersect1d", ar1)), _shape.ravel(_arr("intersect1d", ar2))
    if not assume_unique:
        if return_indices:
            a, ind1 = unique(a, return_index=True)
            b, ind2 = unique(b, return_index=True)
        else:
            a, b = unique(a), unique(b)
    aux = _shape.concatenate([a, b])
    order = _sorting.argsort(aux)
    aux = aux[order]
    if aux.size < 2:
        mask = _creation.zeros(max(aux.size - 1, 0), bool)
    else:
        mask = _ufuncs.equal(aux[1:], aux[:-1])
    values = _select(mask, aux[:-1], size, fill_value)
    if not return_indices:
        return values
    i1 = _select(mask, order[:-1], size, None)
    i2 = _select(mask, order[1:], size, None) - a.size
    if not assume_unique:
        i1, i2 = ind1[i1], ind2[i2]
    return values, i1, i2
