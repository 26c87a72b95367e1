"""StableHLO rule of `dot_general` (compiler/primitives/linalg.py): one
`stablehlo.dot_general` with its batch and contracting dimensions, operands converted to the
result's dtype first (kiln's mixed-dtype rule); boolean operands contract as integers and
compare with zero (or-of-ands)."""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
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


def _dot_general(ctx, args, *, dimension_numbers, precision=None, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    aval = ctx.out_avals[0]
    work = np.dtype(np.int32) if aval.dtype == np.bool_ else aval.dtype
    lhs, rhs = (ctx.convert(a, work) for a in args)
    out = dot(ctx, lhs, rhs, (lc, rc), (lb, rb), aval.update(dtype=work))
    if aval.dtype == np.bool_:
        out = ctx.compare("NE", out, ctx.scalar_like(0, out))
    return [out]


STABLEHLO[PRIMITIVES["dot_general"]] = _dot_general
