"""StableHLO rule of `dot_general` (compiler/primitives/linalg.py): one
`stablehlo.dot_general` with its batch and contracting dimensions, operands converted to the
result's dtype first (kiln's mixed-dtype rule); boolean operands contract as integers and
compare with zero (or-of-ands). In a module whose compiler provides kiln's matrix-product
handlers (`ctx.dots`, pjrt/ffi_dot.py) a float product with a row and a column dimension and
one contracting dimension at least is a `stablehlo.custom_call` of the handler for its dtype
and operand form instead (`custom_dot`), with row-major layouts: its operands transposed where
their dimensions are in no order a form reads, and reshaped to (batch,) rows x contraction
(or its transpose), the result reshaped back."""
import math

import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .lower_structural import reshape, transpose
from .types import tensor_type


def dot(ctx, lhs, rhs, contracting, batching, aval):
    """One `stablehlo.dot_general` of `aval` with (lhs, rhs) contracting and batch dims."""
    (lc, rc), (lb, rb) = contracting, batching
    dims = []
    if lb:
        dims.append(f"batching_dims = {list(map(int, lb))} x {list(map(int, rb))}")
    dims.append(f"contracting_dims = {list(map(int, lc))} x {list(map(int, rc))}")
    return ctx.emit(f"stablehlo.dot_general {lhs}, {rhs}, {', '.join(dims)} : "
                    f"({lhs.type}, {rhs.type}) -> {tensor_type(aval)}", aval)


def _layout(rank):
    return f"dense<{list(range(rank - 1, -1, -1))}> : tensor<{rank}xindex>"


def _form(lhs, rhs, contracting, batching):
    """(lhs permutation, rhs permutation, lhs transposed, rhs transposed) that bring the
    operands to the handlers' forms [batch..., rows, contraction...] or [batch...,
    contraction..., rows] (lhs; the rhs's with columns), needing the fewest transposes: the
    contracting pairs in their order, or sorted by either side's dimensions."""
    (lc, rc), (lb, rb) = ([list(map(int, d)) for d in pair] for pair in (contracting, batching))
    lfree = [d for d in range(lhs.aval.ndim) if d not in lb + lc]
    rfree = [d for d in range(rhs.aval.ndim) if d not in rb + rc]
    best = None
    for pairs in (list(zip(lc, rc)), sorted(zip(lc, rc)), sorted(zip(lc, rc), key=lambda p: p[1])):
        ls, rs = [p[0] for p in pairs], [p[1] for p in pairs]
        for ta in (False, True):
            for tb in (False, True):
                lp = lb + (ls + lfree if ta else lfree + ls)
                rp = rb + (rfree + rs if tb else rs + rfree)
                moved = (lp != sorted(lp)) + (rp != sorted(rp))
                if best is None or moved < best[0]:
                    best = (moved, lp, rp, ta, tb)
    return best[1:]


def custom_dot(ctx, lhs, rhs, contracting, batching, aval):
    """The `stablehlo.custom_call` of kiln's handler for this product, or None where
    `ctx.dots` has no handler of its dtype or the product is not matrix-shaped (each operand
    with a free dimension, one contracting dimension at least). Batch dimensions become one
    leading dimension of rank-3 operands, free and contracting dimensions one each (a
    transpose first where they are not in order), and the result is reshaped back."""
    (lc, _), (lb, _) = contracting, batching
    shared = len(lb) + len(lc)     # the batch and contracting dimensions of either operand
    if (aval.dtype, False, False) not in ctx.dots or not len(lc) or \
            shared in (lhs.aval.ndim, rhs.aval.ndim):
        return None
    lp, rp, ta, tb = _form(lhs, rhs, contracting, batching)
    name = ctx.dots[(aval.dtype, ta, tb)]
    size = lambda x, dims: math.prod(x.aval.shape[d] for d in dims)
    batch = [size(lhs, lb)] if len(lb) else []
    nl = len(lb) + (len(lc) if ta else lhs.aval.ndim - shared)   # where the second group
    nr = len(lb) + (rhs.aval.ndim - shared if tb else len(lc))   # of dimensions starts
    lhs = reshape(ctx, transpose(ctx, lhs, lp), batch + [size(lhs, lp[len(lb):nl]),
                                                         size(lhs, lp[nl:])])
    rhs = reshape(ctx, transpose(ctx, rhs, rp), batch + [size(rhs, rp[len(lb):nr]),
                                                         size(rhs, rp[nr:])])
    rows, cols = lhs.aval.shape[-1 if ta else -2], rhs.aval.shape[-2 if tb else -1]
    flat = aval.update(shape=tuple(batch + [rows, cols]))
    layout = _layout(len(flat.shape))
    out = ctx.emit(f"stablehlo.custom_call @{name}({lhs}, {rhs}) {{api_version = 4 : i32, "
                   f"backend_config = {{}}, operand_layouts = [{layout}, {layout}], "
                   f"result_layouts = [{layout}]}} : ({lhs.type}, {rhs.type}) -> "
                   f"{tensor_type(flat)}", flat)
    return reshape(ctx, out, aval.shape)


def _dot_general(ctx, args, *, dimension_numbers, precision=None, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    aval = ctx.out_avals[0]
    work = np.dtype(np.int32) if aval.dtype == np.bool_ else aval.dtype
    lhs, rhs = (ctx.convert(a, work) for a in args)
    work_aval = aval.update(dtype=work)
    out = custom_dot(ctx, lhs, rhs, (lc, rc), (lb, rb), work_aval) or \
        dot(ctx, lhs, rhs, (lc, rc), (lb, rb), work_aval)
    if aval.dtype == np.bool_:
        out = ctx.compare("NE", out, ctx.scalar_like(0, out))
    return [out]


STABLEHLO[PRIMITIVES["dot_general"]] = _dot_general
