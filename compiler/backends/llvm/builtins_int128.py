"""The compiler-rt builtins for 128-bit integers on x86-64, in LLVM IR (see builtins.py).

x86-64 adds, shifts, compares and multiplies `i128` values inline, but LLVM calls compiler-rt
for the rest: division and remainder (`__udivti3`, `__umodti3`, `__divti3`, `__modti3`), the
signed multiply that reports overflow (`__muloti4`, for `llvm.smul.with.overflow.i128`), and
conversions between `i128` and float or double (`__floattisf`, `__floattidf`,
`__floatuntisf`, `__floatuntidf`, `__fixsfti`, `__fixdfti`, `__fixunssfti`, `__fixunsdfti`).
kiln's dtypes are at most 64 bits wide, so its code contains no `i128` operation today; these
are defined so that a lowering that needs one (a 64x64 -> 128-bit product, say) runs instead of
stopping at the unresolved-symbol check (object_symbols.py).

Every function computes only with operations x86-64 has instructions for (a call to itself
would never return), with compiler-rt's semantics:
- division is shift-and-subtract over the quotient's bits; a divisor of zero is undefined
  behaviour, as in C (here: an all-ones quotient, the dividend as remainder); signed
  division truncates towards zero and the remainder takes the dividend's sign;
- `__muloti4(a, b, int *overflow)` returns the wrapped product and sets `*overflow` to 1 when
  the exact product does not fit in 128 bits, else 0;
- integer -> float rounds to nearest even, once: the top 64 bits of the magnitude with a
  sticky bit for the rest, converted by the 64-bit instruction (which rounds at bit 53 or
  24, far above the sticky bit), scaled by an exact power of two;
- float -> integer truncates towards zero; out of range (and NaN) saturates: signed to the
  minimum or maximum by the sign bit, unsigned to 0 for negative operands and all ones above.
"""
import llvmlite.ir as ir

from . import ltypes as T
from .calls import intrinsic
from .loops import counted_loop

I128 = ir.IntType(128)
_FLOAT_TYPES = {"sf": ir.FloatType(), "df": ir.DoubleType()}
# Nothing kiln emits calls these today: compile them without optimisation (`optnone`, which
# needs `noinline`, also selects their instructions with FastISel), which keeps the runtime
# library's compile time (once per process without the disk cache) within about 20 ms of
# what it is without them.
QUICK_ATTRIBUTES = ("nounwind", "noinline", "optnone")
_FLOAT_FORMATS = {"sf": (23, 127), "df": (52, 1023)}   # significand bits, exponent bias


def _c(value, ty=I128):
    return ir.Constant(ty, value)


def _function(module, name, ret, args):
    function = ir.Function(module, ir.FunctionType(ret, args), name)
    for attribute in QUICK_ATTRIBUTES:
        function.attributes.add(attribute)
    return function, ir.IRBuilder(function.append_basic_block("entry"))


def _ctlz(b, x):
    return intrinsic(b, "ctlz", [x, ir.Constant(T.I1, 0)])


def _udivmod(b, n, d):
    """(quotient, remainder) of unsigned i128 values: the divisor shifted to the dividend's
    leading bit, then one quotient bit per step."""
    shift = b.sub(_ctlz(b, d), _ctlz(b, n))
    small = b.icmp_unsigned("<", n, d)
    steps = b.select(small, _c(0, T.I64), b.add(b.trunc(shift, T.I64), _c(1, T.I64)))
    d_shifted = b.shl(d, b.select(small, _c(0), shift))

    def step(b2, i, carried):
        q, rem, dd = carried
        fits = b2.icmp_unsigned(">=", rem, dd)
        q = b2.or_(b2.shl(q, _c(1)), b2.zext(fits, I128))
        rem = b2.select(fits, b2.sub(rem, dd), rem)
        return q, rem, b2.lshr(dd, _c(1))
    q, rem, _ = counted_loop(b, steps, step, (_c(0), n, d_shifted), "bit")
    return q, rem


def _sign_and_magnitude(b, a):
    sign = b.ashr(a, _c(127))
    return sign, b.sub(b.xor(a, sign), sign)


def _apply_sign(b, value, sign):
    return b.sub(b.xor(value, sign), sign)


def _emit_division(module):
    def unsigned(name, pick):
        function, b = _function(module, name, I128, [I128, I128])
        b.ret(_udivmod(b, *function.args)[pick])

    def signed(name, pick):
        function, b = _function(module, name, I128, [I128, I128])
        sign_a, a = _sign_and_magnitude(b, function.args[0])
        sign_b, d = _sign_and_magnitude(b, function.args[1])
        result = _udivmod(b, a, d)[pick]
        b.ret(_apply_sign(b, result, b.xor(sign_a, sign_b) if pick == 0 else sign_a))
    unsigned("__udivti3", 0)
    unsigned("__umodti3", 1)
    signed("__divti3", 0)
    signed("__modti3", 1)


def _emit_muloti4(module):
    """The exact product of the magnitudes from four 64x64 -> 128-bit products (magnitudes
    are at most 2**127, so its high half cannot wrap); it fits when its high half is zero and
    its low half is at most 2**127 - 1 (2**127 for a negative product)."""
    function, b = _function(module, "__muloti4", I128, [I128, I128, T.PTR])
    a, c, overflow = function.args
    sign_a, ma = _sign_and_magnitude(b, a)
    sign_c, mc = _sign_and_magnitude(b, c)
    low = [b.zext(b.trunc(x, T.I64), I128) for x in (ma, mc)]
    high = [b.lshr(x, _c(64)) for x in (ma, mc)]
    ll, lh, hl, hh = (b.mul(x, y) for x in (low[0], high[0]) for y in (low[1], high[1]))
    middle = b.add(b.lshr(ll, _c(64)), b.and_(lh, _c((1 << 64) - 1)))
    middle = b.add(middle, b.and_(hl, _c((1 << 64) - 1)))
    upper = b.add(b.add(b.lshr(lh, _c(64)), b.lshr(hl, _c(64))), b.lshr(middle, _c(64)))
    upper = b.add(upper, hh)
    magnitude = b.or_(b.shl(middle, _c(64)), b.and_(ll, _c((1 << 64) - 1)))
    negative = b.icmp_unsigned("!=", b.xor(sign_a, sign_c), _c(0))
    limit = b.select(negative, _c(1 << 127), _c((1 << 127) - 1))
    overflows = b.or_(b.icmp_unsigned("!=", upper, _c(0)),
                      b.icmp_unsigned(">", magnitude, limit))
    b.store(b.zext(overflows, T.I32), overflow)
    b.ret(b.mul(a, c))


def _unsigned_to_float(b, magnitude, ty, significand, bias):
    """The float nearest to the unsigned i128 `magnitude` (the module docstring)."""
    width = b.sub(_c(128), _ctlz(b, magnitude))
    shift = b.select(b.icmp_unsigned(">", width, _c(64)), b.sub(width, _c(64)), _c(0))
    top = b.lshr(magnitude, shift)
    rest = b.sub(b.shl(_c(1), shift), _c(1))
    sticky = b.zext(b.icmp_unsigned("!=", b.and_(magnitude, rest), _c(0)), I128)
    rounded = b.uitofp(b.trunc(b.or_(top, sticky), T.I64), ty)
    bits = T.I32 if isinstance(ty, ir.FloatType) else T.I64
    scale = b.shl(b.add(b.trunc(shift, bits), ir.Constant(bits, bias)),
                  ir.Constant(bits, significand))
    return b.fmul(rounded, b.bitcast(scale, ty))


def _emit_to_float(module):
    for suffix, ty in _FLOAT_TYPES.items():
        significand, bias = _FLOAT_FORMATS[suffix]
        function, b = _function(module, f"__floatunti{suffix}", ty, [I128])
        b.ret(_unsigned_to_float(b, function.args[0], ty, significand, bias))
        function, b = _function(module, f"__floatti{suffix}", ty, [I128])
        sign, magnitude = _sign_and_magnitude(b, function.args[0])
        value = _unsigned_to_float(b, magnitude, ty, significand, bias)
        b.ret(b.select(b.icmp_unsigned("!=", sign, _c(0)), b.fneg(value), value))


def _truncated(b, x, ty, significand, bias):
    """(sign bit as i1, exponent as i128 (unbiased), |x| truncated to an unsigned i128 where
    the exponent is below 128)."""
    bits = T.I32 if isinstance(ty, ir.FloatType) else T.I64
    raw = b.zext(b.bitcast(x, bits), I128)
    total = bits.width
    negative = b.icmp_unsigned("!=", b.lshr(raw, _c(total - 1)), _c(0))
    exponent_mask = (1 << (total - 1 - significand)) - 1
    exponent = b.sub(b.and_(b.lshr(raw, _c(significand)), _c(exponent_mask)), _c(bias))
    value = b.or_(b.and_(raw, _c((1 << significand) - 1)), _c(1 << significand))
    down = b.lshr(value, b.select(b.icmp_signed("<", exponent, _c(significand)),
                                  b.sub(_c(significand), exponent), _c(0)))
    up = b.shl(value, b.select(b.icmp_signed(">", exponent, _c(significand)),
                               b.sub(exponent, _c(significand)), _c(0)))
    magnitude = b.select(b.icmp_signed("<", exponent, _c(significand)), down, up)
    return negative, exponent, magnitude


def _emit_from_float(module):
    for suffix, ty in _FLOAT_TYPES.items():
        significand, bias = _FLOAT_FORMATS[suffix]
        function, b = _function(module, f"__fixuns{suffix}ti", I128, [ty])
        negative, exponent, magnitude = _truncated(b, function.args[0], ty, significand, bias)
        below = b.or_(negative, b.icmp_signed("<", exponent, _c(0)))
        above = b.icmp_signed(">=", exponent, _c(128))
        b.ret(b.select(below, _c(0), b.select(above, _c((1 << 128) - 1), magnitude)))

        function, b = _function(module, f"__fix{suffix}ti", I128, [ty])
        negative, exponent, magnitude = _truncated(b, function.args[0], ty, significand, bias)
        saturated = b.select(negative, _c(1 << 127), _c((1 << 127) - 1))
        value = b.select(negative, b.sub(_c(0), magnitude), magnitude)
        value = b.select(b.icmp_signed(">=", exponent, _c(128)), saturated, value)
        b.ret(b.select(b.icmp_signed("<", exponent, _c(0)), _c(0), value))


NAMES = ("__udivti3", "__umodti3", "__divti3", "__modti3", "__muloti4",
         *(f"__float{u}ti{s}" for u in ("", "un") for s in _FLOAT_TYPES),
         *(f"__fix{u}{s}ti" for u in ("", "uns") for s in _FLOAT_TYPES))


def emit(module):
    """Define every builtin of `NAMES` in llvmlite.ir `module` (external linkage)."""
    _emit_division(module)
    _emit_muloti4(module)
    _emit_to_float(module)
    _emit_from_float(module)
