"""StableHLO rules of the structural family (compiler/primitives/structural.py): iota,
broadcast_in_dim, reshape, squeeze, transpose, rev, slice, pad, concatenate. Each is one
StableHLO operation (a reshape with `dimensions` is a transpose first)."""
from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .types import tensor_type


def iota(ctx, aval, dim):
    return ctx.emit(f"stablehlo.iota dim = {dim} : {tensor_type(aval)}", aval)


def _iota(ctx, args, *, dtype, shape, dimension):
    return [iota(ctx, ctx.out_avals[0], dimension)]


def _broadcast_in_dim(ctx, args, *, shape, broadcast_dimensions):
    (x,) = args
    aval = ctx.out_avals[0]
    return [ctx.emit(f"stablehlo.broadcast_in_dim {x}, dims = {list(broadcast_dimensions)} : "
                     f"({x.type}) -> {tensor_type(aval)}", aval)]


def transpose(ctx, x, permutation):
    permutation = [int(p) for p in permutation]
    if permutation == list(range(len(permutation))):
        return x
    aval = x.aval.update(shape=tuple(x.aval.shape[p] for p in permutation))
    return ctx.emit(f"stablehlo.transpose {x}, dims = {permutation} : ({x.type}) -> "
                    f"{tensor_type(aval)}", aval)


def reshape(ctx, x, shape):
    shape = tuple(shape)
    if x.aval.shape == shape:
        return x
    aval = x.aval.update(shape=shape)
    return ctx.emit(f"stablehlo.reshape {x} : ({x.type}) -> {tensor_type(aval)}", aval)


def _reshape(ctx, args, *, new_sizes, dimensions=None):
    x = args[0] if dimensions is None else transpose(ctx, args[0], dimensions)
    return [reshape(ctx, x, ctx.out_avals[0].shape)]


def _squeeze(ctx, args, *, dimensions):
    return [reshape(ctx, args[0], ctx.out_avals[0].shape)]


def _transpose(ctx, args, *, permutation):
    return [transpose(ctx, args[0], permutation)]


def _rev(ctx, args, *, dimensions):
    (x,) = args
    if not dimensions:
        return [x]
    return [ctx.emit(f"stablehlo.reverse {x}, dims = {[int(d) for d in dimensions]} : "
                     f"{x.type}", x.aval)]


def slice_(ctx, x, starts, limits, strides=None):
    strides = strides or (1,) * len(starts)
    aval = x.aval.update(shape=tuple(-(-(l - s) // st) for s, l, st in zip(starts, limits, strides)))
    ranges = ", ".join(f"{s}:{l}:{st}" for s, l, st in zip(starts, limits, strides))
    return ctx.emit(f"stablehlo.slice {x} [{ranges}] : ({x.type}) -> {tensor_type(aval)}", aval)


def _slice(ctx, args, *, start_indices, limit_indices, strides=None):
    return [slice_(ctx, args[0], start_indices, limit_indices, strides)]


def _pad(ctx, args, *, padding_config):
    x, value = args
    aval = ctx.out_avals[0]
    lo, hi, interior = ([int(c[k]) for c in padding_config] for k in range(3))
    return [ctx.emit(f"stablehlo.pad {x}, {value}, low = {lo}, high = {hi}, "
                     f"interior = {interior} : ({x.type}, {value.type}) -> "
                     f"{tensor_type(aval)}", aval)]


def concatenate(ctx, parts, dimension):
    """`parts` joined along `dimension` (the one part itself when there is only one)."""
    if len(parts) == 1:
        return parts[0]
    shape = list(parts[0].aval.shape)
    shape[dimension] = sum(p.aval.shape[dimension] for p in parts)
    aval = parts[0].aval.update(shape=tuple(shape))
    names = ", ".join(p.name for p in parts)
    types = ", ".join(p.type for p in parts)
    return ctx.emit(f"stablehlo.concatenate {names}, dim = {dimension} : ({types}) -> "
                    f"{tensor_type(aval)}", aval)


def _concatenate(ctx, args, *, dimension):
    return [concatenate(ctx, args, dimension)]


for _name, _rule in (("iota", _iota), ("broadcast_in_dim", _broadcast_in_dim),
                     ("reshape", _reshape), ("squeeze", _squeeze), ("transpose", _transpose),
                     ("rev", _rev), ("slice", _slice), ("pad", _pad),
                     ("concatenate", _concatenate)):
    STABLEHLO[PRIMITIVES[_name]] = _rule
