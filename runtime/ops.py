"""`kiln.ops`: JAX's segment reductions, `segment_sum`, `segment_prod`, `segment_max` and
`segment_min`.

`segment_sum(data, segment_ids, num_segments)` is an array of `num_segments` rows (the rest of
`data`'s shape after its first axis): row s reduces the rows of `data` whose id is s, as
`zeros.at[segment_ids].add(data)` does. A segment no row names holds the reduction's identity
(0, 1, the dtype's lowest or highest value: `-inf`/`inf` for floats). Ids outside
`[0, num_segments)`, negative ones included, are dropped (`mode=None`, JAX's `FILL_OR_DROP`);
another `mode` is the scatter's (`"clip"`, `"promise_in_bounds"`). Without `num_segments` it is
`max(segment_ids) + 1`, which needs concrete ids, as in JAX (a traced array under `jit` is a
ConcretizationTypeError: pass `num_segments`). `bucket_size` reduces buckets of that many rows
on their own, then the buckets' results, as JAX's does; `indices_are_sorted` and
`unique_indices` are hints.
"""
import math

import numpy as np

from .array import to_array
from .dispatch import is_traced

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _identity(op, dtype):
    if op == "add":
        return 0
    if op == "multiply":
        return 1
    if dtype == np.bool_:
        return op == "min"
    if np.issubdtype(dtype, np.inexact):
        return -np.inf if op == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if op == "max" else info.max


def _segment_reduce(name, op, data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode, out_sharding):
    from . import numpy as jnp
    data = to_array(data)
    segment_ids = to_array(segment_ids)
    if data.ndim == 0:
        raise TypeError(f"{name}: data must have at least one dimension, got shape ()")
    if segment_ids.ndim != 1 or segment_ids.shape[0] != data.shape[0]:
        raise TypeError(f"{name}: segment_ids must be a 1-D array as long as data's first axis "
                        f"({data.shape[0]}), got shape {tuple(segment_ids.shape)}")
    if not np.issubdtype(segment_ids.dtype, np.integer):
        raise TypeError(f"{name}: segment_ids must be integers, got {segment_ids.dtype}")
    if num_segments is None:
        if is_traced(segment_ids):
            from .errors import ConcretizationTypeError
            raise ConcretizationTypeError(
                f"{name}: num_segments is None, so it is max(segment_ids) + 1, which needs the "
                f"ids' values; they are traced here. Pass num_segments (a Python int).")
        if segment_ids.shape[0] == 0:
            raise ValueError(f"{name}: num_segments is None, so it is max(segment_ids) + 1, "
                             f"but segment_ids is empty. Pass num_segments.")
        num_segments = int(np.max(np.asarray(segment_ids))) + 1
    num_segments = int(num_segments)
    if num_segments < 0:
        raise ValueError(f"{name}: num_segments must be non-negative, got {num_segments}")
    kwargs = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                  mode=mode, wrap_negative_indices=False, out_sharding=out_sharding)
    rows = data.shape[0]
    buckets = 1 if bucket_size is None else max(1, math.ceil(rows / int(bucket_size)))
    empty = jnp.full((num_segments,) + tuple(data.shape[1:]), _identity(op, data.dtype),
                     data.dtype)
    if buckets == 1:
        return getattr(empty.at[segment_ids], op)(data, **kwargs)
    size = int(bucket_size)
    parts = [getattr(empty.at[segment_ids[b * size:(b + 1) * size]], op)(
        data[b * size:(b + 1) * size], **kwargs) for b in range(buckets)]
    combine = {"add": jnp.sum, "multiply": jnp.prod, "max": jnp.max, "min": jnp.min}[op]
    return combine(jnp.stack(parts), axis=0).astype(data.dtype)


def _segment(name, op):
    def reduction(data, segment_ids, num_segments=None, indices_are_sorted=False,
                  unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
        return _segment_reduce(name, op, data, segment_ids, num_segments, indices_are_sorted,
                               unique_indices, bucket_size, mode, out_sharding)
    reduction.__name__ = reduction.__qualname__ = name
    reduction.__doc__ = (f"`{name}(data, segment_ids, num_segments=None, ...)`: JAX's; rows of "
                         f"`data` with the same id reduced by {op} (module docstring).")
    return reduction


segment_sum = _segment("segment_sum", "add")
segment_prod = _segment("segment_prod", "multiply")
segment_max = _segment("segment_max", "max")
segment_min = _segment("segment_min", "min")
