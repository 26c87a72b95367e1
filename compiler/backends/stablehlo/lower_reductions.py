"""StableHLO rules of the reductions family (compiler/primitives/reductions.py): the monoid
reductions as `stablehlo.reduce`, argmax/argmin as a two-operand reduce over (value, index)
with JAX's comparator (NaN wins, the first index on ties), and the cumulative ops as
`stablehlo.reduce_window` over a window as long as the axis, padded on one side (JAX's CPU
lowering)."""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from ...ir.abstract import ShapedArray
from .types import tensor_type

_MONOID = {
    "reduce_sum": ("stablehlo.add", lambda d: 0),
    "reduce_prod": ("stablehlo.multiply", lambda d: 1),
    "reduce_max": ("stablehlo.maximum", lambda d: -np.inf if d.kind in "fc" else
                   (False if d.kind == "b" else np.iinfo(d).min)),
    "reduce_min": ("stablehlo.minimum", lambda d: np.inf if d.kind in "fc" else
                   (True if d.kind == "b" else np.iinfo(d).max)),
    "reduce_and": ("stablehlo.and", lambda d: True if d.kind == "b" else
                   (np.iinfo(d).max if d.kind == "u" else -1)),
    "reduce_or": ("stablehlo.or", lambda d: 0),
    "reduce_xor": ("stablehlo.xor", lambda d: 0),
}
_CUMULATIVE = {"cumsum": "reduce_sum", "cumprod": "reduce_prod", "cummax": "reduce_max",
               "cummin": "reduce_min"}


def scalar(dtype):
    return ShapedArray((), np.dtype(dtype), False)


def dense_array(values):
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in values) if values else "") + ">"


def _identity(ctx, name, dtype):
    return ctx.constant(_MONOID[name][1](np.dtype(dtype)), dtype)


def _monoid(name):
    op = _MONOID[name][0]

    def rule(ctx, args, *, axes):
        (x,) = args
        init = _identity(ctx, name, x.aval.dtype)
        return ctx.generic("stablehlo.reduce", [x, init], ctx.out_avals,
                           [([init.aval, init.aval], lambda b: [ctx.binary(op, *b)])],
                           f"dimensions = {dense_array(axes)}")
    return rule


def arg_best(ctx, x, axis, index_dtype, direction):
    """The index along `axis` of x's largest ("GT") or smallest ("LT") element: JAX's
    comparator (a NaN wins, the first index on ties)."""
    dtype = x.aval.dtype
    index_aval = x.aval.update(dtype=np.dtype(index_dtype), weak_type=False)
    index = ctx.emit(f"stablehlo.iota dim = {axis} : {tensor_type(index_aval)}", index_aval)
    init_v = _identity(ctx, "reduce_min" if direction == "LT" else "reduce_max", dtype)
    init_i = ctx.constant(0, index_dtype)

    def body(b):
        a, ai, c, ci = b
        better = ctx.compare(direction, a, c)
        if dtype.kind == "f":
            better = ctx.binary("stablehlo.or", better, ctx.compare("NE", a, a))
        tie = ctx.binary("stablehlo.and", ctx.compare("EQ", a, c),
                         ctx.compare("LT", ai, ci))
        pick_i = ctx.binary("stablehlo.or", better, tie)
        return [ctx.select(better, a, c), ctx.select(pick_i, ai, ci)]
    shape = tuple(d for i, d in enumerate(x.aval.shape) if i != axis)
    out_i = index_aval.update(shape=shape)
    outs = ctx.generic("stablehlo.reduce", [x, index, init_v, init_i],
                       [out_i.update(dtype=dtype), out_i],
                       [([scalar(dtype), scalar(index_dtype), scalar(dtype),
                          scalar(index_dtype)], body)],
                       f"dimensions = {dense_array([axis])}")
    return outs[1]


def _arg(direction):
    def rule(ctx, args, *, axes, index_dtype):
        return [arg_best(ctx, args[0], axes[0], index_dtype, direction)]
    return rule


def _window_attrs(shape, axis, reverse):
    n = len(shape)
    size = shape[axis]
    window = [size if d == axis else 1 for d in range(n)]
    edge = (0, size - 1) if reverse else (size - 1, 0)
    pad = [edge if d == axis else (0, 0) for d in range(n)]
    rows = ", ".join(f"[{lo}, {hi}]" for lo, hi in pad)
    ones = [1] * n
    return (f"base_dilations = {dense_array(ones)}, padding = dense<[{rows}]> : "
            f"tensor<{n}x2xi64>, window_dilations = {dense_array(ones)}, "
            f"window_dimensions = {dense_array(window)}, window_strides = {dense_array(ones)}")


def _logaddexp(ctx, a, b):
    big = ctx.binary("stablehlo.maximum", a, b)
    diff = ctx.binary("stablehlo.subtract", a, b)
    nan = ctx.compare("NE", diff, diff)
    term = ctx.unary("stablehlo.log_plus_one", ctx.unary("stablehlo.exponential", ctx.unary(
        "stablehlo.negate", ctx.unary("stablehlo.abs", diff))))
    return ctx.select(nan, ctx.binary("stablehlo.add", a, b), ctx.binary("stablehlo.add", big, term))


def _cumulative(name):
    def rule(ctx, args, *, axis, reverse=False):
        (x,) = args
        if x.aval.size == 0:
            return [x]
        dtype = x.aval.dtype
        if name == "cumlogsumexp":
            init, combine = ctx.constant(-np.inf, dtype), lambda b: [_logaddexp(ctx, *b)]
        else:
            reduction = _CUMULATIVE[name]
            init = _identity(ctx, reduction, dtype)
            combine = lambda b: [ctx.binary(_MONOID[reduction][0], *b)]
        return ctx.generic("stablehlo.reduce_window", [x, init], ctx.out_avals,
                           [([scalar(dtype), scalar(dtype)], combine)],
                           _window_attrs(x.aval.shape, axis, reverse))
    return rule


for _name in _MONOID:
    STABLEHLO[PRIMITIVES[_name]] = _monoid(_name)
STABLEHLO[PRIMITIVES["argmax"]] = _arg("GT")
STABLEHLO[PRIMITIVES["argmin"]] = _arg("LT")
for _name in list(_CUMULATIVE) + ["cumlogsumexp"]:
    STABLEHLO[PRIMITIVES[_name]] = _cumulative(_name)
