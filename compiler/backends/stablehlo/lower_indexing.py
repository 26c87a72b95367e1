"""StableHLO rules of the indexing family (compiler/primitives/indexing.py).

`dynamic_slice`, `dynamic_update_slice` and `gather` clamp their start indices so the window
fits, in StableHLO as in kiln; a "fill" gather then replaces the windows that did not fit by
`fill_value` (a mask computed from the indices, as JAX does). Scatters drop updates whose
window does not fit ("drop", "promise_in_bounds": StableHLO's own rule); "clip" scatters clamp
each index first. The index vector is the last axis of `indices` (`index_vector_dim`).
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from ...primitives.indexing import default_fill
from .lower_reductions import scalar, dense_array
from .lower_structural import concatenate, slice_, reshape
from .types import tensor_type


def dynamic_slice(ctx, x, starts, sizes):
    """The window of x of `sizes` at `starts` (rank-0 integer Values), clamped to fit."""
    aval = x.aval.update(shape=tuple(int(s) for s in sizes))
    names = ", ".join(a.name for a in [x] + list(starts))
    types = ", ".join(a.type for a in [x] + list(starts))
    return ctx.emit(f"stablehlo.dynamic_slice {names}, sizes = {list(aval.shape)} : ({types}) "
                    f"-> {tensor_type(aval)}", aval)


def dynamic_update_slice(ctx, x, update, starts):
    """x with `update` written at `starts` (rank-0 integer Values), clamped to fit."""
    names = ", ".join(a.name for a in [x, update] + list(starts))
    types = ", ".join(a.type for a in [x, update] + list(starts))
    return ctx.emit(f"stablehlo.dynamic_update_slice {names} : ({types}) -> {x.type}", x.aval)


def _dynamic_slice(ctx, args, *, slice_sizes):
    return [dynamic_slice(ctx, args[0], args[1:], slice_sizes)]


def _dynamic_update_slice(ctx, args):
    return [dynamic_update_slice(ctx, args[0], args[1], args[2:])]


def _dims(**fields):
    return ", ".join(f"{k} = {[int(v) for v in vs]}" for k, vs in fields.items() if vs)


def _components(ctx, indices):
    """Each component of the index vector, of shape indices.shape[:-1]."""
    shape = indices.aval.shape
    out = []
    for k in range(shape[-1]):
        part = slice_(ctx, indices, [0] * (len(shape) - 1) + [k], list(shape[:-1]) + [k + 1])
        out.append(reshape(ctx, part, shape[:-1]))
    return out


def _fits(ctx, indices, index_map, window, operand_shape):
    """bool[indices.shape[:-1]]: whether each window fits without clamping."""
    fits = None
    for comp, d in zip(_components(ctx, indices), index_map):
        ok = ctx.binary("stablehlo.and", ctx.compare("GE", comp, ctx.scalar_like(0, comp)),
                        ctx.compare("LE", comp, ctx.scalar_like(operand_shape[d] - window[d],
                                                                comp)))
        fits = ok if fits is None else ctx.binary("stablehlo.and", fits, ok)
    return fits


def _gather(ctx, args, *, dimension_numbers, slice_sizes, mode="clip", fill_value=None):
    x, indices = args
    dn = dimension_numbers
    aval = ctx.out_avals[0]
    fields = _dims(offset_dims=dn.offset_dims, collapsed_slice_dims=dn.collapsed_slice_dims,
                   start_index_map=dn.start_index_map)
    attrs = (f"dimension_numbers = #stablehlo.gather<{fields}{', ' if fields else ''}"
             f"index_vector_dim = {indices.aval.ndim - 1}>, indices_are_sorted = false, "
             f"slice_sizes = {dense_array(slice_sizes)}")
    (out,) = ctx.generic("stablehlo.gather", [x, indices], [aval], [], attrs)
    if mode != "fill" or not dn.start_index_map:
        return [out]
    fits = _fits(ctx, indices, dn.start_index_map, slice_sizes, x.aval.shape)
    batch_pos = [i for i in range(aval.ndim) if i not in dn.offset_dims]
    if fits is None:
        return [out]
    mask = ctx.broadcast(fits, aval.shape, batch_pos) if fits.aval.shape != aval.shape or \
        batch_pos != list(range(aval.ndim)) else fits
    fill = default_fill(aval.dtype) if fill_value is None else fill_value
    return [ctx.select(mask, out, ctx.scalar_like(fill, out))]


def _clamped(ctx, indices, index_map, window, operand_shape):
    parts = []
    for comp, d in zip(_components(ctx, indices), index_map):
        lo = ctx.scalar_like(0, comp)
        hi = ctx.scalar_like(max(operand_shape[d] - window[d], 0), comp)
        c = ctx.emit(f"stablehlo.clamp {lo}, {comp}, {hi} : {comp.type}", comp.aval)
        parts.append(reshape(ctx, c, comp.aval.shape + (1,)))
    return concatenate(ctx, parts, indices.aval.ndim - 1)


def _scatter(combine):
    def rule(ctx, args, *, dimension_numbers, mode="drop"):
        x, indices, updates = args
        dn = dimension_numbers
        if mode == "clip" and dn.scatter_dims_to_operand_dims:
            it = iter(updates.aval.shape[d] for d in dn.update_window_dims)
            window = [1 if d in dn.inserted_window_dims else next(it)
                      for d in range(x.aval.ndim)]
            indices = _clamped(ctx, indices, dn.scatter_dims_to_operand_dims, window,
                               x.aval.shape)
        fields = _dims(update_window_dims=dn.update_window_dims,
                       inserted_window_dims=dn.inserted_window_dims,
                       scatter_dims_to_operand_dims=dn.scatter_dims_to_operand_dims)
        attrs = (f"indices_are_sorted = false, scatter_dimension_numbers = "
                 f"#stablehlo.scatter<{fields}{', ' if fields else ''}"
                 f"index_vector_dim = {indices.aval.ndim - 1}>, unique_indices = false")
        s = scalar(x.aval.dtype)
        return ctx.generic("stablehlo.scatter", [x, indices, updates], ctx.out_avals,
                           [([s, s], lambda b: [combine(ctx, *b)])], attrs)
    return rule


def _op(name, boolean=None):
    def combine(ctx, a, b):
        op = boolean if boolean and a.aval.dtype == np.bool_ else name
        return ctx.binary(op, a, b)
    return combine


STABLEHLO[PRIMITIVES["dynamic_slice"]] = _dynamic_slice
STABLEHLO[PRIMITIVES["dynamic_update_slice"]] = _dynamic_update_slice
STABLEHLO[PRIMITIVES["gather"]] = _gather
STABLEHLO[PRIMITIVES["scatter"]] = _scatter(lambda ctx, a, b: b)
STABLEHLO[PRIMITIVES["scatter_add"]] = _scatter(_op("stablehlo.add", "stablehlo.or"))
STABLEHLO[PRIMITIVES["scatter_mul"]] = _scatter(_op("stablehlo.multiply", "stablehlo.and"))
STABLEHLO[PRIMITIVES["scatter_min"]] = _scatter(_op("stablehlo.minimum"))
STABLEHLO[PRIMITIVES["scatter_max"]] = _scatter(_op("stablehlo.maximum"))
