"""StableHLO rule of `dot_general` (compiler/primitives/linalg.py): one
`stablehlo.dot_general` with its batch and contracting dimensions, operands converted to the
result's dtype first (kiln's mixed-dtype rule); boolean operands contract as integers and
compare with zero (or-of-ands). A 2-D float product (no batch dimensions, one contracting
dimension each) of a module whose compiler provides kiln's matrix-product handlers (`ctx.dots`,
pjrt/ffi_dot.py) is a `stablehlo.custom_call` of the handler for its dtype and operand form
instead, with row-major layouts."""
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


ROW_MAJOR = "dense<[1, 0]> : tensor<2xindex>"


def custom_dot(ctx, lhs, rhs, contracting, batching, aval):
    """The `stablehlo.custom_call` of kiln's handler for this product, or None where it is not
    a 2-D product of a dtype and form `ctx.dots` has."""
    (lc, rc), (lb, _) = contracting, batching
    if lb or len(lc) != 1 or lhs.aval.ndim != 2 or rhs.aval.ndim != 2:
        return None
    name = ctx.dots.get((aval.dtype, int(lc[0]) == 0, int(rc[0]) == 1))
    if name is None:
        return None
    return ctx.emit(f"stablehlo.custom_call @{name}({lhs}, {rhs}) {{api_version = 4 : i32, "
                    f"backend_config = {{}}, operand_layouts = [{ROW_MAJOR}, {ROW_MAJOR}], "
                    f"result_layouts = [{ROW_MAJOR}]}} : ({lhs.type}, {rhs.type}) -> "
                    f"{tensor_type(aval)}", aval)


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
