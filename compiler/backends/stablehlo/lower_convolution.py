"""StableHLO rule of `conv_general_dilated` (compiler/primitives/convolution.py): one
`stablehlo.convolution` in JAX's pretty form, its dimension numbers spelled per axis
(`[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]`), with strides, padding (negative crops),
dilations and feature/batch groups; no precision_config (see docs/stablehlo.md). Operands are
converted to the result's dtype first (preferred_element_type, as the reference does); boolean
operands convolve as integers and compare with zero. An empty operand or result is zeros."""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .types import tensor_type


def _spec(spec, first, second):
    """`[b, f, 0, 1]`: the role of each axis of a tensor laid out as `spec` says."""
    names = {int(spec[0]): first, int(spec[1]): second}
    names.update({int(a): str(k) for k, a in enumerate(spec[2:])})
    return "[" + ", ".join(names[p] for p in range(len(spec))) + "]"


def _conv(ctx, args, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
          feature_group_count, batch_group_count, precision=None, preferred_element_type=None):
    aval = ctx.out_avals[0]
    work = np.dtype(np.int32) if aval.dtype == np.bool_ else aval.dtype
    out_aval = aval.update(dtype=work)
    if any(a.aval.size == 0 for a in args) or aval.size == 0:
        return [ctx.splat(0, aval)]
    lhs, rhs = (ctx.convert(a, work) for a in args)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    ints = lambda v: [int(x) for x in v]
    pad = ", ".join(f"[{int(lo)}, {int(hi)}]" for lo, hi in padding)
    window = (f"stride = {ints(window_strides)}, pad = [{pad}], lhs_dilate = "
              f"{ints(lhs_dilation)}, rhs_dilate = {ints(rhs_dilation)}")
    out = ctx.emit(
        f"stablehlo.convolution({lhs}, {rhs}) dim_numbers = {_spec(lhs_spec, 'b', 'f')}x"
        f"{_spec(rhs_spec, 'o', 'i')}->{_spec(out_spec, 'b', 'f')}, window = {{{window}}} "
        f"{{batch_group_count = {int(batch_group_count)} : i64, feature_group_count = "
        f"{int(feature_group_count)} : i64}} : ({lhs.type}, {rhs.type}) -> "
        f"{tensor_type(out_aval)}", out_aval)
    if aval.dtype == np.bool_:
        out = ctx.compare("NE", out, ctx.scalar_like(0, out))
    return [out]


STABLEHLO[PRIMITIVES["conv_general_dilated"]] = _conv
