"""StableHLO rules of control flow and of the primitives that hold a region to run once.

`cond` is a `stablehlo.case` on the index clamped to the branches (a boolean picks branch 0
for False); `while_loop` a `stablehlo.while` whose carry holds the constants too; `scan` a
`stablehlo.while` over (counter, constants, carry, scanned operands, stacked results) that
slices each step's operands and writes its results with dynamic slices (from the end when
`reverse`). `custom_jvp_call`, `custom_vjp_call` (their derivatives are already expanded by the
transforms), `remat`, `fusion`, `linear_solve` and `root` (their `solve` region) lower their
region in place.
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .lower_indexing import dynamic_slice, dynamic_update_slice
from .lower_structural import reshape


def _cond(ctx, args, *, branches):
    index, *operands = args
    i32 = np.dtype(np.int32)
    if index.aval.dtype != np.bool_:
        lo = ctx.constant(0, index.aval.dtype)
        hi = ctx.constant(len(branches) - 1, index.aval.dtype)
        index = ctx.emit(f"stablehlo.clamp {lo}, {index}, {hi} : {index.type}", index.aval)
    index = ctx.convert(index, i32)
    regions = [([], lambda b, br=br: ctx.lower_function(br, operands)) for br in branches]
    return ctx.generic("stablehlo.case", [index], ctx.out_avals, regions)


def _while(ctx, args, *, cond_fn, body_fn, num_consts):
    avals = [a.aval for a in args]
    consts_of = lambda block: block[:num_consts]
    outs = ctx.generic("stablehlo.while", list(args), avals, [
        (avals, lambda b: ctx.lower_function(cond_fn, b)),
        (avals, lambda b: consts_of(b) + ctx.lower_function(body_fn, b)),
    ])
    return outs[num_consts:]


def _scan(ctx, args, *, body, length, reverse=False, num_consts=0, num_carry=0):
    i32 = np.dtype(np.int32)
    n_in = len(args)
    ys_avals = [a.update(shape=(length,) + a.shape) for a in body.out_avals[num_carry:]]
    ys0 = [ctx.splat(0, a) for a in ys_avals]
    if length == 0:   # no step: the carry as given, empty results
        return list(args[num_consts:num_consts + num_carry]) + ys0
    start = [ctx.constant(0, i32)] + list(args) + ys0
    avals = [v.aval for v in start]

    def cond(b):
        return [ctx.compare("LT", b[0], ctx.constant(length, i32))]

    def step(b):
        i, rest = b[0], b[1:]
        consts, carry = rest[:num_consts], rest[num_consts:num_consts + num_carry]
        xs, ys = rest[num_consts + num_carry:n_in], rest[n_in:]
        at = ctx.binary("stablehlo.subtract", ctx.constant(length - 1, i32), i) if reverse else i
        zero = ctx.constant(0, i32)
        slices = []
        for x in xs:
            sl = dynamic_slice(ctx, x, [at] + [zero] * (x.aval.ndim - 1),
                               (1,) + x.aval.shape[1:])
            slices.append(reshape(ctx, sl, x.aval.shape[1:]))
        out = ctx.lower_function(body, list(consts) + list(carry) + slices)
        new_ys = []
        for acc, y in zip(ys, out[num_carry:]):
            row = reshape(ctx, y, (1,) + y.aval.shape)
            new_ys.append(dynamic_update_slice(ctx, acc, row, [at] + [zero] * y.aval.ndim))
        one = ctx.constant(1, i32)
        return ([ctx.binary("stablehlo.add", i, one)] + list(consts) + list(out[:num_carry])
                + list(xs) + new_ys)
    outs = ctx.generic("stablehlo.while", start, avals, [(avals, cond), (avals, step)])
    return outs[1 + num_consts:1 + num_consts + num_carry] + outs[1 + n_in:]


def _region(param):
    def rule(ctx, args, **params):
        return ctx.lower_function(params[param], list(args))
    return rule


STABLEHLO[PRIMITIVES["cond"]] = _cond
STABLEHLO[PRIMITIVES["while_loop"]] = _while
STABLEHLO[PRIMITIVES["scan"]] = _scan
STABLEHLO[PRIMITIVES["custom_jvp_call"]] = _region("call")
STABLEHLO[PRIMITIVES["custom_vjp_call"]] = _region("call")
STABLEHLO[PRIMITIVES["custom_vmap_call"]] = _region("call")
STABLEHLO[PRIMITIVES["user_primitive"]] = _region("call")
STABLEHLO[PRIMITIVES["remat"]] = _region("body")
STABLEHLO[PRIMITIVES["linear_solve"]] = _region("solve")
STABLEHLO[PRIMITIVES["root"]] = _region("solve")
STABLEHLO[PRIMITIVES["fusion"]] = _region("body")
