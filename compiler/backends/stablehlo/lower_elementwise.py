"""StableHLO rules of the elementwise family (compiler/primitives/elementwise.py): math,
comparisons, bit operations, select_n, clamp, conversions and bitcasts.

Rank-0 operands broadcast to the result's shape first (kiln's elementwise primitives take
them; StableHLO's do not). Special functions are `chlo` operations, as JAX emits them (every
PJRT plug-in that compiles JAX's modules decomposes them). Semantics that StableHLO leaves to
the implementation are written out as kiln's reference defines them: float -> integer
conversion (NaN to 0, saturation), `fma` as a multiply feeding an add (what JAX's code is, and
what XLA contracts), unsigned `sign`, `integer_pow` by repeated squaring, out-of-range
`select_n` cases (the nearest).
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .types import tensor_type

_UNARY = {
    "neg": "stablehlo.negate", "floor": "stablehlo.floor", "ceil": "stablehlo.ceil",
    "is_finite": "stablehlo.is_finite", "exp": "stablehlo.exponential",
    "log": "stablehlo.log", "log1p": "stablehlo.log_plus_one",
    "expm1": "stablehlo.exponential_minus_one", "tanh": "stablehlo.tanh",
    "logistic": "stablehlo.logistic", "sin": "stablehlo.sine", "cos": "stablehlo.cosine",
    "sqrt": "stablehlo.sqrt", "rsqrt": "stablehlo.rsqrt", "cbrt": "stablehlo.cbrt",
    "abs": "stablehlo.abs", "not": "stablehlo.not", "population_count": "stablehlo.popcnt",
    "clz": "stablehlo.count_leading_zeros", "real": "stablehlo.real", "imag": "stablehlo.imag",
}
_CHLO_UNARY = {
    "tan": "chlo.tan", "asin": "chlo.asin", "acos": "chlo.acos", "atan": "chlo.atan",
    "sinh": "chlo.sinh", "cosh": "chlo.cosh", "asinh": "chlo.asinh", "acosh": "chlo.acosh",
    "atanh": "chlo.atanh", "erf": "chlo.erf", "erfc": "chlo.erfc", "erf_inv": "chlo.erf_inv",
    "lgamma": "chlo.lgamma", "digamma": "chlo.digamma",
}
_BINARY = {
    "add": "stablehlo.add", "sub": "stablehlo.subtract", "mul": "stablehlo.multiply",
    "div": "stablehlo.divide", "rem": "stablehlo.remainder", "max": "stablehlo.maximum",
    "min": "stablehlo.minimum", "atan2": "stablehlo.atan2", "and": "stablehlo.and",
    "or": "stablehlo.or", "xor": "stablehlo.xor", "shift_left": "stablehlo.shift_left",
    "shift_right_logical": "stablehlo.shift_right_logical",
    "shift_right_arithmetic": "stablehlo.shift_right_arithmetic",
    "complex": "stablehlo.complex",
}
_COMPARE = {"eq": "EQ", "ne": "NE", "lt": "LT", "le": "LE", "gt": "GT", "ge": "GE"}


def operands(ctx, args, shape=None):
    """`args` broadcast to the result's shape (rank-0 operands are)."""
    shape = ctx.out_avals[0].shape if shape is None else shape
    return [ctx.broadcast(a, shape) for a in args]


def _unary(op):
    def rule(ctx, args, **params):
        (x,) = operands(ctx, args)
        return [ctx.unary(op, x, ctx.out_avals[0])]
    return rule


def _chlo(op):
    def rule(ctx, args, **params):
        (x,) = operands(ctx, args)
        aval = ctx.out_avals[0]
        return [ctx.emit(f"{op} {x} : {x.type} -> {tensor_type(aval)}", aval)]
    return rule


def _binary(op):
    def rule(ctx, args, **params):
        a, b = operands(ctx, args)
        return [ctx.binary(op, a, b, ctx.out_avals[0])]
    return rule


def _compare(direction):
    def rule(ctx, args, **params):
        shape = ctx.out_avals[0].shape
        a, b = operands(ctx, args, shape)
        return [ctx.compare(direction, a, b)]
    return rule


def _identity(ctx, args, **params):
    return list(args)


def _sign(ctx, args):
    (x,) = operands(ctx, args)
    if x.aval.dtype.kind != "u":
        return [ctx.unary("stablehlo.sign", x)]
    zero = ctx.scalar_like(0, x)
    return [ctx.select(ctx.compare("EQ", x, zero), zero, ctx.scalar_like(1, x))]


def _round(ctx, args, rounding_method=0):
    (x,) = operands(ctx, args)
    op = "stablehlo.round_nearest_even" if rounding_method == 1 else "stablehlo.round_nearest_afz"
    return [ctx.unary(op, x)]


def _exp2(ctx, args):
    (x,) = operands(ctx, args)
    log2 = ctx.scalar_like(np.log(2), x)
    return [ctx.unary("stablehlo.exponential", ctx.binary("stablehlo.multiply", log2, x))]


def _square(ctx, args):
    (x,) = operands(ctx, args)
    return [ctx.binary("stablehlo.multiply", x, x)]


def _integer_pow(ctx, args, *, y):
    (x,) = operands(ctx, args)
    if y == 0:
        return [ctx.scalar_like(1, x)]
    base, acc, n = x, None, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else ctx.binary("stablehlo.multiply", acc, base)
        n >>= 1
        if n:
            base = ctx.binary("stablehlo.multiply", base, base)
    if y < 0:
        acc = ctx.binary("stablehlo.divide", ctx.scalar_like(1, x), acc)
    return [acc]


def _pow(ctx, args):
    a, b = operands(ctx, args)
    return [ctx.binary("stablehlo.power", a, ctx.convert(b, a.aval.dtype))]


def _nextafter(ctx, args):
    a, b = operands(ctx, args)
    aval = ctx.out_avals[0]
    return [ctx.emit(f"chlo.next_after {a}, {b} : {a.type}, {b.type} -> {tensor_type(aval)}",
                     aval)]


def _conj(ctx, args):
    (x,) = operands(ctx, args)
    aval = ctx.out_avals[0]
    if x.aval.dtype.kind != "c":
        return [ctx.convert(x, aval.dtype)]
    re = ctx.unary("stablehlo.real", x, ctx.out_avals[0].update(dtype=np.dtype(
        f"f{aval.dtype.itemsize // 2}")))
    im = ctx.unary("stablehlo.imag", x, re.aval)
    return [ctx.binary("stablehlo.complex", re, ctx.unary("stablehlo.negate", im), aval)]


def _fma(ctx, args):
    a, b, c = operands(ctx, args)
    return [ctx.binary("stablehlo.add", ctx.binary("stablehlo.multiply", a, b), c)]


def _select_n(ctx, args):
    which, *cases = args
    shape = ctx.out_avals[0].shape
    cases = operands(ctx, cases, shape)
    if len(cases) == 1:
        return cases
    which = ctx.broadcast(which, shape)
    if which.aval.dtype == np.bool_:
        return [ctx.select(which, cases[1], cases[0])]
    out = cases[0]
    for i, case in enumerate(cases[1:], 1):   # which >= i picks case i or a later one
        out = ctx.select(ctx.compare("GE", which, ctx.scalar_like(i, which)), case, out)
    return [out]


def _clamp(ctx, args):
    lo, x, hi = operands(ctx, args)
    return [ctx.emit(f"stablehlo.clamp {lo}, {x}, {hi} : {x.type}", x.aval)]


def convert(ctx, x, dtype):
    """`x` converted to `dtype` with the reference backend's semantics (module docstring)."""
    dtype = np.dtype(dtype)
    src = x.aval.dtype
    if src == dtype:
        return x
    if src.kind == "c" and dtype.kind != "c":
        x = ctx.unary("stablehlo.real", x, x.aval.update(dtype=np.dtype(f"f{src.itemsize // 2}")))
        src = x.aval.dtype
    if dtype == np.bool_:
        return ctx.compare("NE", x, ctx.scalar_like(0, x))
    if src.kind == "f" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        out = ctx.convert(x, dtype)
        nan = ctx.compare("NE", x, x)
        high = ctx.compare("GE", x, ctx.scalar_like(float(info.max), x))
        low = ctx.compare("LE", x, ctx.scalar_like(float(info.min), x))
        out = ctx.select(low, ctx.scalar_like(info.min, out), out)
        out = ctx.select(high, ctx.scalar_like(info.max, out), out)
        return ctx.select(nan, ctx.scalar_like(0, out), out)
    return ctx.convert(x, dtype)


def _convert(ctx, args, *, new_dtype, weak_type=False):
    return [convert(ctx, args[0], new_dtype)]


def _bitcast(ctx, args, *, new_dtype):
    (x,) = args
    aval = ctx.out_avals[0]
    return [ctx.emit(f"stablehlo.bitcast_convert {x} : ({x.type}) -> {tensor_type(aval)}", aval)]


for _name, _op in _UNARY.items():
    STABLEHLO[PRIMITIVES[_name]] = _unary(_op)
for _name, _op in _CHLO_UNARY.items():
    STABLEHLO[PRIMITIVES[_name]] = _chlo(_op)
for _name, _op in _BINARY.items():
    STABLEHLO[PRIMITIVES[_name]] = _binary(_op)
for _name, _direction in _COMPARE.items():
    STABLEHLO[PRIMITIVES[_name]] = _compare(_direction)
for _name in ("copy", "stop_gradient", "no_derivative", "name"):
    STABLEHLO[PRIMITIVES[_name]] = _identity


def _sharding_constraint(ctx, args, *, mesh, devices, spec):
    """`sdy.sharding_constraint` (Shardy) or GSPMD's `@Sharding` custom call, as JAX writes
    them, in a module partitioned over the constraint's mesh; the value itself in any other
    module (one device, replicas), where there is nothing to partition."""
    from .module import hlo_sharding, sdy_sharding
    (x,) = args
    where = ctx.partitioning
    if where is None:
        return [x]
    names = tuple(n for n, _ in mesh)
    if (names, tuple(s for _, s in mesh), tuple(devices)) != \
            (where.axis_names, where.sizes, where.device_ids):
        raise ctx.error(f"with_sharding_constraint over the mesh {dict(mesh)} of devices "
                        f"{list(devices)} inside a function partitioned over the mesh "
                        f"{dict(zip(where.axis_names, where.sizes))} of devices "
                        f"{list(where.device_ids)}: kiln partitions a call over one mesh; "
                        f"constrain with a NamedSharding over the call's mesh")
    dims = [tuple(names.index(n) for n in axes) for axes in spec]
    if where.shardy:
        return [ctx.emit(f"sdy.sharding_constraint {x} {sdy_sharding(names, dims)} : {x.type}",
                         x.aval)]
    return [ctx.emit(f'stablehlo.custom_call @Sharding({x}) {{backend_config = "", '
                     f'mhlo.sharding = "{hlo_sharding(where.sizes, dims)}"}} : ({x.type}) -> '
                     f'{x.type}', x.aval)]


STABLEHLO[PRIMITIVES["sharding_constraint"]] = _sharding_constraint
for _name, _rule in (("sign", _sign), ("round", _round), ("exp2", _exp2), ("square", _square),
                     ("integer_pow", _integer_pow), ("pow", _pow), ("nextafter", _nextafter),
                     ("conj", _conj), ("fma", _fma), ("select_n", _select_n),
                     ("clamp", _clamp), ("convert_element_type", _convert),
                     ("bitcast_convert_type", _bitcast)):
    STABLEHLO[PRIMITIVES[_name]] = _rule
