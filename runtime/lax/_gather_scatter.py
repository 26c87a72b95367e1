"""`lax.gather` and the `lax.scatter` family: JAX's signatures over the gather and scatter
primitives, operand batching dimensions included.

The primitives take no batching dimensions. Dimension numbers with them are checked as JAX
checks them (JAX's errors), then rewritten (`gather_dims.without_batching`): each batching
pair becomes one more index column, the iota along the indices' batching dimension, which
the gather collapses and the scatter inserts in the operand's batching dimension. That is
exact in every mode: the iota is always in bounds and its window of 1 always fits, so
clamping, filling and dropping depend on the user's columns alone, as in XLA. Every backend,
transform and rule gets batched gathers and scatters from that rewrite.

A batching dimension with slice size 0 (JAX allows 0 or 1) reads no element: the result is
0 where the window fits, as XLA's.
"""
import numpy as np

from ..array import to_array
from ..dispatch import bind
from ..compiler.ir import dtypes
from ..compiler.primitives import PRIMITIVES as P
from ..compiler.primitives.gather_dims import (GatherDimensionNumbers, ScatterDimensionNumbers,
                                               batching_index_dims, check_scatter,
                                               gather_shape, without_batching)
from ..compiler.primitives.indexing import check_indices
from ._ops import (GatherScatterMode, _shape, broadcasted_iota, concatenate,
                   convert_element_type, full_like)

__all__ = ["GatherDimensionNumbers", "ScatterDimensionNumbers", "gather", "scatter",
           "scatter_add", "scatter_max", "scatter_min", "scatter_mul"]


def _with_batch_columns(indices, operand_shape, dn):
    """`indices` with one iota column per batching pair of `dn` after the user's columns (in
    int32 when the indices' type cannot count the batch)."""
    operand_dims, indices_dims = batching_index_dims(dn)
    most = max((operand_shape[d] - 1 for d in operand_dims), default=0)
    if most > np.iinfo(indices.dtype).max:
        indices = convert_element_type(indices, dtypes.int32)
    shape = indices.shape[:-1] + (1,)
    columns = [broadcasted_iota(indices.dtype, shape, d) for d in indices_dims]
    return concatenate([indices] + columns, len(shape) - 1)


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    # As in JAX, lax.gather without a mode promises in-bounds indices (which clamp here).
    mode = GatherScatterMode.from_any("promise_in_bounds" if mode is None else mode)
    if mode is GatherScatterMode.ONE_HOT:
        raise ValueError("gather: mode ONE_HOT is not supported")
    x = to_array(operand, "lax.gather")
    indices = to_array(start_indices, "lax.gather")
    dn = GatherDimensionNumbers(*(tuple(v) for v in dimension_numbers))
    slice_sizes = _shape(slice_sizes)
    if dn.operand_batching_dims or dn.start_indices_batching_dims:
        check_indices("gather", indices)
        gather_shape(x.shape, indices.shape, dn, slice_sizes)
        if any(slice_sizes[d] == 0 for d in dn.operand_batching_dims):
            x = full_like(x, 0)
        slice_sizes = tuple(1 if d in dn.operand_batching_dims else z
                            for d, z in enumerate(slice_sizes))
        indices, dn = _with_batch_columns(indices, x.shape, dn), without_batching(dn)
    return bind(P["gather"], x, indices, dimension_numbers=dn, slice_sizes=slice_sizes,
                mode=mode.value, fill_value=fill_value)


def _scatter(name):
    prim = P[name]

    def fn(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
           unique_indices=False, mode=None):
        mode = GatherScatterMode.from_any(mode)
        x = to_array(operand, f"lax.{name}")
        u = to_array(updates, f"lax.{name}")
        indices = to_array(scatter_indices, f"lax.{name}")
        if u.dtype != x.dtype and u.weak_type:
            u = convert_element_type(u, x.dtype)
        dn = ScatterDimensionNumbers(*(tuple(v) for v in dimension_numbers))
        if dn.operand_batching_dims or dn.scatter_indices_batching_dims:
            check_indices(name, indices)
            check_scatter(x.shape, indices.shape, u.shape, dn)
            indices, dn = _with_batch_columns(indices, x.shape, dn), without_batching(dn)
        return bind(prim, x, indices, u, dimension_numbers=dn,
                    mode="drop" if mode is GatherScatterMode.FILL_OR_DROP else mode.value)
    fn.__name__ = name
    return fn


scatter, scatter_add, scatter_mul, scatter_min, scatter_max = map(
    _scatter, ("scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"))
