"""Scalar lowerings of the elementwise primitives (the `LLVM_SCALAR` table).

    rule(ctx, builder, args, in_avals, out_aval, **params) -> llvmlite value

`args` are register values (i1 for bool, iN, half/float/double), one element of each operand;
the rule emits the instructions computing one element of the result at `builder`'s position.
Fused loops (lower_fused.py) call these for every equation of a group, so intermediates stay in
registers; nothing here touches memory or branches, so the loops around vectorise.

Semantics are the reference backend's (compiler/primitives/elementwise.py): XLA's integer
division (truncation; x / 0 = -1, x % 0 = x; INT_MIN / -1 = INT_MIN), shifts by the bit width
or more give 0 (the sign fill for arithmetic shifts), float -> int conversion truncates,
saturates and maps NaN to 0, max/min propagate NaN and order -0 below +0, `round` is half away
from zero or half to even per `rounding_method`.

Transcendental functions go through `math`, the single place that picks their implementation:
mathlib's vectorisable IR (accuracy in docs/llvm_math.md). Float16 math is computed in float32.
Complex operands and results go to the complex forms of the rules (lower_complex.py, registered
at the end of this module).
"""
import numpy as np
import llvmlite.ir as ir

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM_SCALAR
from . import ltypes as T
from .calls import intrinsic
from . import mathlib
from . import lower_complex

# ------------------------------------------------------------------------------ math

def math(builder, name, args):
    """`name` (exp, log, tanh, erf_inv, ...; `mathlib.NAMES`) applied to float scalars of one
    LLVM type: mathlib's branch-free IR, which the loop vectoriser inlines and vectorises.
    Float16 is computed in float32."""
    ty = args[0].type
    if isinstance(ty, ir.HalfType):
        wide = [builder.fpext(a, ir.FloatType()) for a in args]
        return builder.fptrunc(math(builder, name, wide), ty)
    return mathlib.emit(builder, name, args, ty)


# --------------------------------------------------------------------------- helpers

def _dtype(avals):
    return avals[0].dtype


def _zero(ty):
    return ir.Constant(ty, 0.0 if not isinstance(ty, ir.IntType) else 0)


def _float_const(ty, value):
    return ir.Constant(ty, float(value))


# max / min: (float intrinsic, bool operation, signed intrinsic, unsigned intrinsic)
_MAX = ("maximum", "or_", "smax", "umax")
_MIN = ("minimum", "and_", "smin", "umin")


def _extremum(ops, builder, a, b, dtype):
    """XLA's max/min: NaN wins and -0 < +0 for floats; `or`/`and` for bools."""
    fop, bop, sop, uop = ops
    if dtype.kind == "c":
        return (lower_complex.maximum if ops is _MAX else lower_complex.minimum)(builder, a, b)
    if dtype.kind == "b":
        return getattr(builder, bop)(a, b)
    return intrinsic(builder, {"f": fop, "i": sop, "u": uop}[dtype.kind], [a, b])


def max_value(builder, a, b, dtype):
    return _extremum(_MAX, builder, a, b, dtype)


def min_value(builder, a, b, dtype):
    return _extremum(_MIN, builder, a, b, dtype)


def _by_kind(float_fn, int_fn, uint_fn=None, bool_fn=None):
    """A rule choosing its emitter by the first operand's dtype kind."""
    table = {"f": float_fn, "i": int_fn, "u": uint_fn or int_fn, "b": bool_fn or uint_fn or int_fn}

    def rule(ctx, builder, args, in_avals, out_aval, **params):
        return table[_dtype(in_avals).kind](builder, *args)
    return rule


def _method(name, **kw):
    return lambda builder, *args: getattr(builder, name)(*args, **kw)


def _math_rule(name):
    def rule(ctx, builder, args, in_avals, out_aval, **params):
        return math(builder, name, args)
    return rule


# ------------------------------------------------------------------------ unary rules

def _sign(ctx, builder, args, in_avals, out_aval):
    (x,), kind = args, _dtype(in_avals).kind
    ty = x.type
    if kind == "f":  # sign(+-0) = +-0, sign(NaN) = NaN
        keep = builder.fcmp_unordered("==", x, _zero(ty))
        return builder.select(keep, x, intrinsic(builder, "copysign", [_float_const(ty, 1), x]))
    zero = ir.Constant(ty, 0)
    if kind == "u":
        return builder.zext(builder.icmp_unsigned("!=", x, zero), ty)
    above = builder.zext(builder.icmp_signed(">", x, zero), ty)
    return builder.sub(above, builder.zext(builder.icmp_signed("<", x, zero), ty))


def _round(ctx, builder, args, in_avals, out_aval, rounding_method=0):
    return intrinsic(builder, "roundeven" if int(rounding_method) == 1 else "round", args)


def _is_finite(ctx, builder, args, in_avals, out_aval):
    x = args[0]
    return builder.fcmp_ordered("<", intrinsic(builder, "fabs", [x]),
                                _float_const(x.type, np.inf))


def _abs(ctx, builder, args, in_avals, out_aval):
    kind = _dtype(in_avals).kind
    if kind == "f":
        return intrinsic(builder, "fabs", args)
    if kind == "i":
        return intrinsic(builder, "abs", [args[0], T.I1(0)], overloads=[args[0].type])
    return args[0]


def _clz(ctx, builder, args, in_avals, out_aval):
    return intrinsic(builder, "ctlz", [args[0], T.I1(0)], overloads=[args[0].type])


def _lgamma(ctx, builder, args, in_avals, out_aval):
    """log|Gamma(x)|; -inf at -inf, as the reference (scipy) has it (the C library: +inf)."""
    x = args[0]
    minus_inf = _float_const(x.type, -np.inf)
    return builder.select(builder.fcmp_ordered("==", x, minus_inf), minus_inf,
                          math(builder, "lgamma", args))


def _integer_pow(ctx, builder, args, in_avals, out_aval, y):
    """Repeated squaring in the reference's order (so float results match it exactly)."""
    x = args[0]
    is_float = _dtype(in_avals).kind == "f"
    mul = builder.fmul if is_float else builder.mul
    if y == 0:
        return ir.Constant(x.type, 1.0 if is_float else 1)
    base, acc, n = x, None, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else mul(acc, base)
        n >>= 1
        if n:
            base = mul(base, base)
    return builder.fdiv(_float_const(x.type, 1), acc) if y < 0 else acc


_UNARY = {
    "neg": _by_kind(_method("fneg"), _method("neg")),
    "sign": _sign,
    "floor": lambda ctx, b, args, ia, oa: intrinsic(b, "floor", args),
    "ceil": lambda ctx, b, args, ia, oa: intrinsic(b, "ceil", args),
    "round": _round,
    "is_finite": _is_finite,
    "abs": _abs,
    "not": lambda ctx, b, args, ia, oa: b.not_(args[0]),
    "population_count": lambda ctx, b, args, ia, oa: intrinsic(b, "ctpop", args),
    "clz": _clz,
    "square": _by_kind(lambda b, x: b.fmul(x, x), lambda b, x: b.mul(x, x)),
    "copy": lambda ctx, b, args, ia, oa: args[0],
    "stop_gradient": lambda ctx, b, args, ia, oa: args[0],
    "no_derivative": lambda ctx, b, args, ia, oa, **params: args[0],
    "name": lambda ctx, b, args, ia, oa, **params: args[0],
    "sharding_constraint": lambda ctx, b, args, ia, oa, **params: args[0],
    "integer_pow": _integer_pow,
    "lgamma": _lgamma,
}
for _name in ("exp", "exp2", "log", "log1p", "expm1", "tanh", "sin", "cos", "tan", "asin",
              "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "erf", "erfc",
              "erf_inv", "digamma", "logistic", "rsqrt", "cbrt"):
    _UNARY[_name] = _math_rule(_name)


# ----------------------------------------------------------------------- binary rules

def _int_div(builder, a, b, signed):
    """XLA's integer division: truncation, x / 0 = -1, INT_MIN / -1 = INT_MIN."""
    by_zero, safe = _safe_divisor(builder, a, b, signed)
    q = (builder.sdiv if signed else builder.udiv)(a, safe)
    return builder.select(by_zero, ir.Constant(a.type, -1), q)


def _int_rem(builder, a, b, signed):
    """Remainder with the dividend's sign; x % 0 = x; INT_MIN % -1 = 0."""
    by_zero, safe = _safe_divisor(builder, a, b, signed)
    r = (builder.srem if signed else builder.urem)(a, safe)
    return builder.select(by_zero, a, r)


def _safe_divisor(builder, a, b, signed):
    """(b == 0, b with 1 in place of the divisors that trap: 0, and -1 under INT_MIN)."""
    ty = a.type
    one = ir.Constant(ty, 1)
    by_zero = builder.icmp_unsigned("==", b, ir.Constant(ty, 0))
    safe = builder.select(by_zero, one, b)
    if signed:
        int_min = ir.Constant(ty, 1 << (ty.width - 1))
        overflowing = builder.and_(builder.icmp_unsigned("==", a, int_min),
                                   builder.icmp_signed("==", b, ir.Constant(ty, -1)))
        safe = builder.select(overflowing, one, safe)
    return by_zero, safe


def _pow(ctx, builder, args, in_avals, out_aval):
    """x ** y with y converted to x's type first; float32 computed in double (as the
    reference, which is correctly rounded)."""
    x, y = args
    if in_avals[1].dtype.kind != "f":
        y = _int_to_float(builder, y, in_avals[1].dtype, x.type)
    return math(builder, "pow", [x, y])


def _nextafter(ctx, builder, args, in_avals, out_aval):
    """The float after x towards y (NumPy's nextafter, subnormals included)."""
    x, y = args
    ty = x.type
    ity = ir.IntType(T.bits(in_avals[0].dtype))
    bits = builder.bitcast(x, ity)
    up = builder.add(bits, ir.Constant(ity, 1))
    down = builder.sub(bits, ir.Constant(ity, 1))
    # Away from zero when x and the direction agree in sign.
    toward_y_is_up = builder.icmp_unsigned("==", builder.fcmp_ordered("<", x, y),
                                           builder.fcmp_ordered(">", x, _zero(ty)))
    step = builder.bitcast(builder.select(toward_y_is_up, up, down), ty)
    tiny = intrinsic(builder, "copysign", [builder.bitcast(ir.Constant(ity, 1), ty), y])
    out = builder.select(builder.fcmp_ordered("==", x, _zero(ty)), tiny, step)
    out = builder.select(builder.fcmp_ordered("==", x, y), y, out)
    nan = builder.fcmp_unordered("uno", x, y)
    return builder.select(nan, builder.fadd(x, y), out)


def _shift(kind):
    """Shifts: amounts outside [0, bits) give 0, or the sign fill for an arithmetic shift."""
    def rule(ctx, builder, args, in_avals, out_aval):
        a, s = args
        ty = a.type
        width = ir.Constant(ty, ty.width)
        in_range = builder.icmp_unsigned("<", s, width)
        if kind == "ashr":
            return builder.ashr(a, builder.select(in_range, s, ir.Constant(ty, ty.width - 1)))
        shifted = builder.shl(a, s) if kind == "shl" else builder.lshr(a, s)
        return builder.select(in_range, shifted, ir.Constant(ty, 0))
    return rule


def _compare(op, float_unordered=False):
    def rule(ctx, builder, args, in_avals, out_aval):
        kind = _dtype(in_avals).kind
        if kind == "f":
            cmp = builder.fcmp_unordered if float_unordered else builder.fcmp_ordered
            return cmp(op, *args)
        return (builder.icmp_signed if kind == "i" else builder.icmp_unsigned)(op, *args)
    return rule


def _max(ctx, builder, args, in_avals, out_aval):
    return max_value(builder, *args, _dtype(in_avals))


def _min(ctx, builder, args, in_avals, out_aval):
    return min_value(builder, *args, _dtype(in_avals))


def _div(ctx, builder, args, in_avals, out_aval):
    kind = _dtype(in_avals).kind
    return builder.fdiv(*args) if kind == "f" else _int_div(builder, *args, kind == "i")


def _rem(ctx, builder, args, in_avals, out_aval):
    kind = _dtype(in_avals).kind
    return builder.frem(*args) if kind == "f" else _int_rem(builder, *args, kind == "i")


_BINARY = {
    "add": _by_kind(_method("fadd"), _method("add")),
    "sub": _by_kind(_method("fsub"), _method("sub")),
    "mul": _by_kind(_method("fmul"), _method("mul")),
    "div": _div,
    "rem": _rem,
    "pow": _pow,
    "max": _max,
    "min": _min,
    "atan2": _math_rule("atan2"),
    "nextafter": _nextafter,
    "and": lambda ctx, b, args, ia, oa: b.and_(*args),
    "or": lambda ctx, b, args, ia, oa: b.or_(*args),
    "xor": lambda ctx, b, args, ia, oa: b.xor(*args),
    "shift_left": _shift("shl"),
    "shift_right_logical": _shift("lshr"),
    "shift_right_arithmetic": _shift("ashr"),
    "eq": _compare("=="),
    "ne": _compare("!=", float_unordered=True),
    "lt": _compare("<"),
    "le": _compare("<="),
    "gt": _compare(">"),
    "ge": _compare(">="),
}


# -------------------------------------------------------- select, clamp, fma, conversions

def _select_n(ctx, builder, args, in_avals, out_aval):
    which, cases = args[0], args[1:]
    if len(cases) == 1:
        return cases[0]
    if in_avals[0].dtype.kind == "b":
        return builder.select(which, cases[1], cases[0])
    # Out-of-range indices take the nearest case, as the reference does.
    cmp = builder.icmp_signed if in_avals[0].dtype.kind == "i" else builder.icmp_unsigned
    out = cases[0]
    for i, case in enumerate(cases[1:], 1):
        out = builder.select(cmp(">=", which, ir.Constant(which.type, i)), case, out)
    return out


def _clamp(ctx, builder, args, in_avals, out_aval):
    lo, x, hi = args
    dtype = out_aval.dtype
    return min_value(builder, max_value(builder, x, lo, dtype), hi, dtype)


def _fma(ctx, builder, args, in_avals, out_aval):
    """`llvm.fma` (one rounding; vfmadd on x86). Float16 goes through double: the product of
    two halves is exact there, and rounding the double sum to half again cannot land on a
    half-way point the exact sum missed (that would take an addend below 2**-53 of the sum,
    beyond half's exponent range); through float it could."""
    ty = args[0].type
    if isinstance(ty, ir.HalfType):
        wide = [builder.fpext(a, ir.DoubleType()) for a in args]
        return builder.fptrunc(intrinsic(builder, "fma", wide), ty)
    return intrinsic(builder, "fma", args)


def _int_to_float(builder, x, dtype, ty):
    return (builder.sitofp if dtype.kind == "i" else builder.uitofp)(x, ty)


def convert(builder, x, src, dst):
    """Convert a register value of dtype `src` to dtype `dst` (the reference's semantics)."""
    src, dst = np.dtype(src), np.dtype(dst)
    ty = T.reg_type(dst)
    if src == dst:
        return x
    if "c" in (src.kind, dst.kind):
        return lower_complex.convert(builder, x, src, dst, convert)
    if dst.kind == "b":
        if src.kind == "f":
            return builder.fcmp_unordered("!=", x, _zero(x.type))
        return builder.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if src.kind == "f" and dst.kind == "f":
        return (builder.fpext if dst.itemsize > src.itemsize else builder.fptrunc)(x, ty)
    if src.kind == "f":  # truncate, saturate, NaN -> 0 (the .sat intrinsics do exactly this)
        name = "fptosi.sat" if dst.kind == "i" else "fptoui.sat"
        return intrinsic(builder, name, [x], ret=ty, overloads=[ty, x.type])
    if dst.kind == "f":
        return _int_to_float(builder, x, src, ty)
    if ty.width < x.type.width:
        return builder.trunc(x, ty)
    if ty.width == x.type.width:
        return x
    return (builder.sext if src.kind == "i" else builder.zext)(x, ty)


def _convert_element_type(ctx, builder, args, in_avals, out_aval, new_dtype, weak_type=False):
    return convert(builder, args[0], in_avals[0].dtype, new_dtype)


def _bitcast(ctx, builder, args, in_avals, out_aval, new_dtype):
    """Same-width bitcasts only; other widths change the shape and are copies (lower_structural)."""
    if in_avals[0].dtype == np.dtype(new_dtype):
        return args[0]
    return builder.bitcast(args[0], T.reg_type(new_dtype))


_OTHER = {
    "select_n": _select_n,
    "clamp": _clamp,
    "fma": _fma,
    "convert_element_type": _convert_element_type,
    "bitcast_convert_type": _bitcast,
}

SCALAR_RULES = {**_UNARY, **_BINARY, **_OTHER}
for _name, _rule in SCALAR_RULES.items():
    LLVM_SCALAR[PRIMITIVES[_name]] = _rule
lower_complex.register()
