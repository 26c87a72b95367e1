"""StableHLO rule of `dot_general` (compiler/primitives/linalg.py): one
`stablehlo.dot_general` with its batch and contracting dimensions, operands converted to the
result's dtype first (kiln's mixed-dtype rule); boolean operands contract as integers and
compare with zero (or-of-ands). In a module whose compiler provides kiln's matrix-product
handlers (`ctx.dots`, pjrt/ffi_dot.py) a float or complex product with a row and a column
dimension and one contracting dimension at least is a `stablehlo.custom_call` of the handler
for its dtype and operand orders instead (`custom_dot`), with row-major layouts: each operand
reshaped to its batch, free and contracting dimensions (one each, in the order it stores them:
the handlers read any order through strides; without batch dimensions, one operand's free
dimensions before its contraction, or one contracting pair summed, may be read as the batch),
transposed first only where its dimensions are in no order a handler of the dtype reads, the
result reshaped back."""
import itertools
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


def _form(lhs, rhs, contracting, batching, forms):
    """(transposes, lhs permutation, rhs permutation, lhs order, rhs order) that bring the
    operands to one of `forms` (the (lhs order, rhs order) pairs of the handlers, ffi_dot.py:
    the lhs's batch `b`, free `i` and contracting `j` dimensions, the rhs's `b`, `j` and free
    `k`, each a group of whole dimensions in one of these orders), needing the fewest
    transposes: the contracting pairs in their order, or sorted by either side's dimensions.
    An operand without batch dimensions takes batch-first orders only (its batch is absent,
    or 1: `_split`)."""
    (lc, rc), (lb, rb) = ([list(map(int, d)) for d in pair] for pair in (contracting, batching))
    lfree = [d for d in range(lhs.aval.ndim) if d not in lb + lc]
    rfree = [d for d in range(rhs.aval.ndim) if d not in rb + rc]
    best = None
    for pairs in (list(zip(lc, rc)), sorted(zip(lc, rc)), sorted(zip(lc, rc), key=lambda p: p[1])):
        ls, rs = [p[0] for p in pairs], [p[1] for p in pairs]
        for lo, ro in forms:
            if (not lb and lo[0] != "b") or (not rb and ro[0] != "b"):
                continue
            lp = [d for c in lo for d in {"b": lb, "i": lfree, "j": ls}[c]]
            rp = [d for c in ro for d in {"b": rb, "j": rs, "k": rfree}[c]]
            moved = (lp != sorted(lp)) + (rp != sorted(rp))
            if best is None or moved < best[0]:
                best = (moved, lp, rp, lo, ro)
    return best


def _split(x, contracting):
    """(free dimensions before, free dimensions after) where `x` stores free, contracting and
    free dimensions, in that order and each group adjacent (its free dimensions are one group
    of columns only after a transpose, as vmap of `w @ y` with `y` batched on axis 0 gives);
    None otherwise."""
    c = sorted(map(int, contracting))
    if c != list(range(c[0], c[0] + len(c))) or c[0] == 0 or c[-1] == x.aval.ndim - 1:
        return None
    return list(range(c[0])), list(range(c[-1] + 1, x.aval.ndim))


def custom_dot(ctx, lhs, rhs, contracting, batching, aval):
    """The `stablehlo.custom_call` of kiln's handler for this product, or None where
    `ctx.dots` has no handler of its dtype or the product is not matrix-shaped (each operand
    with a free dimension, one contracting dimension at least). Each operand's batch, free
    and contracting dimensions become one dimension each of a rank-3 operand (rank 2 without
    batch dimensions) in the order of the handler's form (a transpose first only where no
    form reads them in place), and the (batch, rows, columns) result is reshaped back.
    Without batch dimensions, an operand whose free dimensions lie on both sides of its
    contraction (`_split`) instead has those before it read as a batch, the other operand's
    one matrix broadcast over it (a batch of 1): the lhs's rows after its contraction are
    then the rows of each product, stored transposed, which the packed kernel reads with a
    unit stride, and the result is in the product's order; the rhs's batch is transposed
    back to the product's order, which XLA folds into a transpose that follows it (vmap's,
    moving the batch to the front). (The lhs's rows after its contraction read as the
    batch, its last dimension, were packed element by element, slower than the transpose.)
    Without batch dimensions, a contraction over several dimensions whose groups are not
    adjacent (an operand's free dimensions between two contracting ones) may instead have
    one contracting pair read as a batch that the handler sums over (rank-3 operands, a
    rank-2 result): no transpose where that pair is what split them."""
    (lc, rc), (lb, rb) = contracting, batching
    forms = [(lo, ro) for (dtype, lo, ro) in ctx.dots if dtype == aval.dtype]
    shared = len(lb) + len(lc)     # the batch and contracting dimensions of either operand
    if not forms or not len(lc) or shared in (lhs.aval.ndim, rhs.aval.ndim):
        return None
    plans = [(_form(lhs, rhs, contracting, batching, forms), (list(lb), list(rb)), contracting)]
    for side, x in enumerate((lhs, rhs)):
        split = None if len(lb) else _split(x, contracting[side])
        if split:   # an operand's free dimensions before its contraction, read as a batch
            held = (split[0], []) if side == 0 else ([], split[0])
            plans.append((_form(lhs, rhs, contracting, held, forms), held, contracting))
    for pair in ([] if len(lb) or len(lc) < 2 else zip(lc, rc)):
        # one contracting pair read as a batch that the handler sums over: the rows between
        # two contracting dimensions need no transpose
        rest = tuple([d for d in dims if d != p] for dims, p in zip((lc, rc), pair))
        summed = ([pair[0]], [pair[1]])
        plans.append((_form(lhs, rhs, rest, summed, forms), summed, rest))
    ((_, lp, rp, lo, ro), (lbat, rbat), (lc, _)) = min(plans, key=lambda plan: plan[0][0])
    summing = len(lc) < len(contracting[0])
    lfree = [d for d in range(lhs.aval.ndim) if d not in map(int, contracting[0])]
    # where the dimensions read as a batch are in the product's result (lhs free, rhs free;
    # the rhs's are its first)
    held = [] if summing else [lfree.index(d) for d in lbat] + [len(lfree) + d for d in rbat]
    name = ctx.dots[(aval.dtype, lo, ro)]
    size = lambda x, dims: math.prod(x.aval.shape[d] for d in dims)
    drop = "" if lbat or rbat else "b"   # the handlers read rank-2 operands without a batch

    def grouped(x, permutation, order, free, batch):
        counts = {"b": len(batch), "j": len(lc), free: x.aval.ndim - len(batch) - len(lc)}
        ends = list(itertools.accumulate(counts[c] for c in order))
        shape = [size(x, permutation[end - counts[c]:end]) for c, end in zip(order, ends)
                 if c not in drop]
        return reshape(ctx, transpose(ctx, x, permutation), shape)
    lhs, rhs = grouped(lhs, lp, lo, "i", lbat), grouped(rhs, rp, ro, "k", rbat)
    lo, ro = lo.replace(drop, ""), ro.replace(drop, "")
    batch = [(lhs.aval.shape[lo.index("b")] if lbat else rhs.aval.shape[ro.index("b")])
             ] if not drop and not summing else []
    rows, cols = lhs.aval.shape[lo.index("i")], rhs.aval.shape[ro.index("k")]
    flat = aval.update(shape=tuple(batch + [rows, cols]))
    layouts = [_layout(x.aval.ndim) for x in (lhs, rhs)]
    out = ctx.emit(f"stablehlo.custom_call @{name}({lhs}, {rhs}) {{api_version = 4 : i32, "
                   f"backend_config = {{}}, operand_layouts = [{layouts[0]}, {layouts[1]}], "
                   f"result_layouts = [{_layout(len(flat.shape))}]}} : ({lhs.type}, "
                   f"{rhs.type}) -> {tensor_type(flat)}", flat)
    if len(lb) or not held:
        return reshape(ctx, out, aval.shape)
    # free dimensions read as a batch: the result's dimensions (the product's: lhs free, then
    # rhs free) are in the custom call's order, those first
    order = held + [d for d in range(len(aval.shape)) if d not in held]
    out = reshape(ctx, out, [aval.shape[d] for d in order])
    return transpose(ctx, out, [order.index(d) for d in range(len(order))])


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
