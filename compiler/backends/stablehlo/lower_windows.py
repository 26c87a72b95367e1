"""StableHLO rules of the window family (compiler/primitives/windows.py).

The operand is first padded with the reduction's identity by one `stablehlo.pad` (interior
padding for the base dilation, negative padding crops, as the reference pads before it
crops); then:

- `reduce_window_sum/max/min`: one `stablehlo.reduce_window` over the padded operand.
- `select_and_gather_add` and `select_and_scatter_add`: each window's selected element is
  found by one `stablehlo.reduce_window` over (value, position in the padded operand, payload)
  triples whose comparator is a total order: a NaN first, then the larger (`ge`) or smaller
  (`le`) value, then the first position: the reference's argmax/argmin over the window, so
  that ties, NaNs and padding cells pick what it picks, window dilation included.
  - gather: the payload is the tangent (0 in the padding), and the result is the selected
    payload.
  - scatter: the payload is the operand's flat position (-1 in the padding), and each source
    element is added there by a `stablehlo.scatter` (a padding cell's -1 is dropped).

A result with no element is the identity (zeros for the select primitives).
"""
import numpy as np

from ...ir.abstract import ShapedArray
from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from ...primitives.windows import identity
from .lower_reductions import scalar, dense_array, _MONOID
from .lower_structural import iota, reshape
from .types import tensor_type

_I64 = np.dtype(np.int64)


def _pad(ctx, x, fill, padding, dilation):
    lo = [int(p[0]) for p in padding]
    hi = [int(p[1]) for p in padding]
    interior = [int(d) - 1 for d in dilation]
    shape = tuple(max(0, (n - 1) * i + n if n else 0) + a + b
                  for n, a, b, i in zip(x.aval.shape, lo, hi, interior))
    if (lo, hi) == ([0] * len(lo), [0] * len(hi)) and not any(interior):
        return x
    aval = x.aval.update(shape=shape)
    return ctx.emit(f"stablehlo.pad {x}, {fill}, low = {lo}, high = {hi}, interior = "
                    f"{interior} : ({x.type}, {fill.type}) -> {tensor_type(aval)}", aval)


def _window_attrs(window_dimensions, window_strides, window_dilation):
    n = len(window_dimensions)
    ones = [1] * n
    zeros = ", ".join(["[0, 0]"] * n)
    pad = f"dense<[{zeros}]> : tensor<{n}x2xi64>" if n else "dense<> : tensor<0x2xi64>"
    return (f"base_dilations = {dense_array(ones)}, padding = {pad}, window_dilations = "
            f"{dense_array(window_dilation)}, window_dimensions = "
            f"{dense_array(window_dimensions)}, window_strides = {dense_array(window_strides)}")


def _reduce(kind):
    op = _MONOID[f"reduce_{kind}"][0]

    def rule(ctx, args, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        (x,) = args
        aval = ctx.out_avals[0]
        dtype = x.aval.dtype
        fill = identity(kind, dtype)
        if aval.size == 0:
            return [ctx.splat(fill, aval)]
        init = ctx.constant(fill, dtype)
        padded = _pad(ctx, x, init, padding, base_dilation)
        if kind != "sum" and dtype == np.bool_:
            op_ = "stablehlo.or" if kind == "max" else "stablehlo.and"
        else:
            op_ = op
        return ctx.generic("stablehlo.reduce_window", [padded, init], [aval],
                           [([scalar(dtype)] * 2, lambda b: [ctx.binary(op_, *b)])],
                           _window_attrs(window_dimensions, window_strides, window_dilation))
    return rule


def _iota(ctx, shape):
    """The flat position of each element of an array of `shape`, as int64."""
    size = int(np.prod(shape, dtype=np.int64))
    flat = ShapedArray((size,), _I64, False)
    return reshape(ctx, iota(ctx, flat, 0), shape)


def _selected(ctx, operand, payload, payload_fill, out_shape, select_prim, window_dimensions,
              window_strides, padding, window_dilation):
    """Per window (`out_shape` of them), the payload at the element the reference selects."""
    dtype = operand.aval.dtype
    kind = "max" if select_prim == "ge" else "min"
    ones = [1] * operand.aval.ndim
    value = _pad(ctx, operand, ctx.constant(identity(kind, dtype), dtype), padding, ones)
    pay = _pad(ctx, payload, ctx.constant(payload_fill, payload.aval.dtype), padding, ones)
    pos = _iota(ctx, value.aval.shape)
    out = ShapedArray(tuple(out_shape), dtype, False)
    direction = "GT" if select_prim == "ge" else "LT"

    def better(b):
        a, ap, apay, c, cp, cpay = b
        if dtype.kind == "f":
            a_nan, c_nan = ctx.compare("NE", a, a), ctx.compare("NE", c, c)
            strict = ctx.binary("stablehlo.or", ctx.compare(direction, a, c), ctx.binary(
                "stablehlo.and", a_nan, ctx.unary("stablehlo.not", c_nan)))
            same = ctx.binary("stablehlo.or", ctx.compare("EQ", a, c),
                              ctx.binary("stablehlo.and", a_nan, c_nan))
        else:
            strict, same = ctx.compare(direction, a, c), ctx.compare("EQ", a, c)
        first = ctx.binary("stablehlo.and", same, ctx.compare("LT", ap, cp))
        pick = ctx.binary("stablehlo.or", strict, first)
        return [ctx.select(pick, a, c), ctx.select(pick, ap, cp), ctx.select(pick, apay, cpay)]
    inits = [ctx.constant(identity(kind, dtype), dtype),
             ctx.constant(np.iinfo(_I64).max, _I64),
             ctx.constant(payload_fill, payload.aval.dtype)]
    avals = [out, out.update(dtype=_I64), out.update(dtype=payload.aval.dtype)]
    outs = ctx.generic("stablehlo.reduce_window", [value, pos, pay] + inits, avals,
                       [([scalar(dtype), scalar(_I64), scalar(payload.aval.dtype)] * 2, better)],
                       _window_attrs(window_dimensions, window_strides, window_dilation))
    return outs[2]


def _gather(ctx, args, *, select_prim, **params):
    tangents, operand = args
    aval = ctx.out_avals[0]
    if aval.size == 0:
        return [ctx.splat(0, aval)]
    return [_selected(ctx, operand, tangents, 0, aval.shape, select_prim, **params)]


def _scatter(ctx, args, *, select_prim, **params):
    source, operand = args
    aval = ctx.out_avals[0]
    if source.aval.size == 0 or aval.size == 0:
        return [ctx.splat(0, aval)]
    chosen = _selected(ctx, operand, _iota(ctx, operand.aval.shape), -1, source.aval.shape,
                       select_prim, **params)
    k = source.aval.size
    indices = reshape(ctx, chosen, (k, 1))
    updates = reshape(ctx, source, (k,))
    flat = ctx.splat(0, aval.update(shape=(aval.size,)))
    s = scalar(aval.dtype)
    attrs = ("indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<"
             "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
             "index_vector_dim = 1>, unique_indices = false")
    (out,) = ctx.generic("stablehlo.scatter", [flat, indices, updates], [flat.aval],
                         [([s, s], lambda b: [ctx.binary("stablehlo.add", *b)])], attrs)
    return [reshape(ctx, out, aval.shape)]


for _kind in ("sum", "max", "min"):
    STABLEHLO[PRIMITIVES[f"reduce_window_{_kind}"]] = _reduce(_kind)
STABLEHLO[PRIMITIVES["select_and_gather_add"]] = _gather
STABLEHLO[PRIMITIVES["select_and_scatter_add"]] = _scatter
