"""The compiler-rt builtins LLVM's x86-64 code generator calls for kiln's dtypes, in LLVM IR.

Where a CPU has no instruction for an operation, LLVM's instruction selector emits a call to a
compiler-rt builtin instead. For kiln's dtypes on x86-64 (LLVM 22) those are the float16
conversions:
- `half __truncdfhf2(double)`: every double -> float16 rounding (x86 has an instruction for it
  only with AVX512-FP16), e.g. `x.astype(float16)` of a float64 array, and float16 `fma`, which
  kiln computes in double precision and rounds once;
- `half __truncsfhf2(float)` and `float __extendhfsf2(half)`: float <-> float16 on CPUs without
  F16C (x86-64-v2 and older), for every float16 operation (LLVM computes float16 arithmetic in
  float there);
- `double __extendhfdf2(half)`: float16 -> double (LLVM 22 widens through float instead, exactly;
  defined for completeness of the conversions);
- `float __powisf2(float, i32)`, `double __powidf2(double, i32)`: `llvm.powi` (kiln's lowerings
  do not use it today): compiler-rt's repeated squaring, `1 / x**-n` for negative `n`;
- the 128-bit integer helpers (builtins_int128.py).
MCJIT resolves calls only against the objects it loaded and the libraries of the process, and
no library of a Python process reliably defines these (libgcc defines some of them since
GCC 12, with the ABI of its own version), so kiln defines them itself: `emit(module)` adds them
to the runtime library's builtins object (rtlib.py, loaded into the JIT before the first
compiled function that calls one) and to the `kiln_runtime.o` of every `kiln compile` library
(aot/native.py). One definition,
in IR that the LLVM kiln already runs compiles for whichever target it is asked for, serves
both; C would need a C compiler at run time, which the JIT does not.

Each function is compiler-rt's algorithm (`fp_trunc_impl.inc`, `fp_extend_impl.inc`), written
on the integer bits, branch-free: rounding to nearest even straight from the source format (so
double -> float16 rounds once, never through float), subnormal results and operands, overflow
to infinity, and NaNs kept quiet or signalling as compiler-rt does: a narrowing sets the quiet
bit and keeps the payload's top bits, a widening keeps the quiet bit as it is and the payload.
Their arguments and results are `half`, as in LLVM's libcalls (float16 travels in XMM
registers, the x86-64 ABI of `_Float16`).

`NAMES` lists the symbols defined here and in builtins_int128.py.
"""
import llvmlite.ir as ir

from . import builtins_int128
from . import ltypes as T
from .calls import intrinsic
from .loops import counted_loop


class _Format:
    """An IEEE binary format: total bits, significand bits (without the implicit one), and the
    LLVM float type of its values."""

    def __init__(self, bits, significand, float_type):
        self.bits = bits
        self.significand = significand
        self.exponent = bits - 1 - significand
        self.int = ir.IntType(bits)
        self.float = float_type
        self.inf_exp = (1 << self.exponent) - 1
        self.bias = self.inf_exp >> 1
        self.min_normal = 1 << significand
        self.significand_mask = self.min_normal - 1
        self.infinity = self.inf_exp << significand
        self.sign_mask = 1 << (bits - 1)
        self.abs_mask = self.sign_mask - 1
        self.quiet = 1 << (significand - 1)
        self.nan_code = self.quiet - 1


HALF = _Format(16, 10, ir.HalfType())
SINGLE = _Format(32, 23, ir.FloatType())
DOUBLE = _Format(64, 52, ir.DoubleType())

# symbol -> (source format, destination format)
TRUNCATIONS = {"__truncdfhf2": (DOUBLE, HALF), "__truncsfhf2": (SINGLE, HALF)}
EXTENSIONS = {"__extendhfsf2": (HALF, SINGLE), "__extendhfdf2": (HALF, DOUBLE)}
POWERS = {"__powisf2": SINGLE, "__powidf2": DOUBLE}
NAMES = (*TRUNCATIONS, *EXTENSIONS, *POWERS, *builtins_int128.NAMES)


def emit(module):
    """Define every builtin of `NAMES` in llvmlite.ir `module` (external linkage)."""
    for name, (src, dst) in TRUNCATIONS.items():
        _define(module, name, src, dst, _truncate)
    for name, (src, dst) in EXTENSIONS.items():
        _define(module, name, src, dst, _extend)
    for name, fmt in POWERS.items():
        _define_power(module, name, fmt.float)
    builtins_int128.emit(module)


def _define_power(module, name, ty):
    """`ty name(ty a, i32 n)`: compiler-rt's `__powi?f2`: r = 1; for each bit of |n| from the
    lowest, r *= a where it is set, then a *= a; 1 / r for negative n."""
    function = ir.Function(module, ir.FunctionType(ty, [ty, T.I32]), name)
    for attribute in builtins_int128.QUICK_ATTRIBUTES:   # (unused by kiln's code too)
        function.attributes.add(attribute)
    a, n = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))

    def step(b2, i, carried):
        r, base, rest = carried
        odd = b2.trunc(rest, T.I1)
        r = b2.select(odd, b2.fmul(r, base), r)
        return r, b2.fmul(base, base), b2.sdiv(rest, ir.Constant(T.I32, 2))
    r, _, _ = counted_loop(b, 32, step, (ir.Constant(ty, 1.0), a, n), "bit")
    negative = b.icmp_signed("<", n, ir.Constant(T.I32, 0))
    b.ret(b.select(negative, b.fdiv(ir.Constant(ty, 1.0), r), r))


def _define(module, name, src, dst, body):
    function = ir.Function(module, ir.FunctionType(dst.float, [src.float]), name)
    function.attributes.add("nounwind")
    b = ir.IRBuilder(function.append_basic_block("entry"))
    b.ret(b.bitcast(body(b, b.bitcast(function.args[0], src.int), src, dst), dst.float))


def _c(fmt, value):
    return ir.Constant(fmt.int, value)


def _round_nearest_even(b, fmt, result, rest, halfway):
    """`result` plus one where the discarded bits `rest` are above `halfway`, or at it with
    `result` odd (both integers of `fmt`)."""
    above = b.icmp_unsigned(">", rest, halfway)
    tie = b.icmp_unsigned("==", rest, halfway)
    odd = b.and_(result, _c(fmt, 1))
    up = b.select(above, _c(fmt, 1), b.select(tie, odd, _c(fmt, 0)))
    return b.add(result, up)


def _truncate(b, a, src, dst):
    """The `dst` bits nearest to the `src` value with bits `a` (compiler-rt's
    fp_trunc_impl.inc), computed in `src`'s integer width."""
    drop = src.significand - dst.significand
    round_mask, halfway = (1 << drop) - 1, 1 << (drop - 1)
    underflow = (src.bias + 1 - dst.bias) << src.significand
    overflow = (src.bias + dst.inf_exp - dst.bias) << src.significand
    a_abs = b.and_(a, _c(src, src.abs_mask))
    sign = b.and_(a, _c(src, src.sign_mask))
    # A normal result: shift the significand, rebias the exponent, round.
    in_range = b.icmp_unsigned("<", b.sub(a_abs, _c(src, underflow)),
                               b.sub(a_abs, _c(src, overflow)))
    shifted = b.sub(b.lshr(a_abs, _c(src, drop)),
                    _c(src, (src.bias - dst.bias) << dst.significand))
    normal = _round_nearest_even(b, src, shifted, b.and_(a_abs, _c(src, round_mask)),
                                 _c(src, halfway))
    # NaN: quiet, with the payload's top bits.
    payload = b.and_(b.lshr(b.and_(a_abs, _c(src, src.nan_code)), _c(src, drop)),
                     _c(src, dst.nan_code))
    nan = b.or_(_c(src, (dst.inf_exp << dst.significand) | dst.quiet), payload)
    # A subnormal result (or zero): denormalise with a sticky bit, then round.
    exponent = b.lshr(a_abs, _c(src, src.significand))
    shift = b.sub(_c(src, src.bias - dst.bias + 1), exponent)
    too_small = b.icmp_unsigned(">", shift, _c(src, src.significand))
    shift = b.select(too_small, _c(src, src.significand), shift)
    significand = b.or_(b.and_(a, _c(src, src.significand_mask)), _c(src, src.min_normal))
    sticky = b.zext(b.icmp_unsigned("!=", b.shl(significand, b.sub(_c(src, src.bits), shift)),
                                    _c(src, 0)), src.int)
    denormal = b.or_(b.lshr(significand, shift), sticky)
    tiny = _round_nearest_even(b, src, b.lshr(denormal, _c(src, drop)),
                               b.and_(denormal, _c(src, round_mask)), _c(src, halfway))
    tiny = b.select(too_small, _c(src, 0), tiny)
    is_nan = b.icmp_unsigned(">", a_abs, _c(src, src.infinity))
    overflows = b.icmp_unsigned(">=", a_abs, _c(src, overflow))
    result = b.select(in_range, normal, b.select(is_nan, nan, b.select(
        overflows, _c(src, dst.infinity), tiny)))
    result = b.or_(result, b.lshr(sign, _c(src, src.bits - dst.bits)))
    return b.trunc(result, dst.int)


def _extend(b, a, src, dst):
    """The `dst` bits of the `src` value with bits `a`, exactly (compiler-rt's
    fp_extend_impl.inc), computed in `dst`'s integer width."""
    widen = dst.significand - src.significand
    a = b.zext(a, dst.int)
    a_abs = b.and_(a, _c(dst, src.abs_mask))
    sign = b.and_(a, _c(dst, src.sign_mask))
    rebias = (dst.bias - src.bias) << dst.significand
    is_normal = b.icmp_unsigned("<", b.sub(a_abs, _c(dst, src.min_normal)),
                                _c(dst, src.infinity - src.min_normal))
    normal = b.add(b.shl(a_abs, _c(dst, widen)), _c(dst, rebias))
    # Infinity or NaN: the quiet bit and the payload move up unchanged.
    special = b.or_(_c(dst, dst.infinity), b.shl(b.and_(a_abs, _c(dst, src.quiet | src.nan_code)),
                                                 _c(dst, widen)))
    # A subnormal operand: normalise it (its leading one becomes the implicit bit).
    ctlz = intrinsic(b, "ctlz", [a_abs, ir.Constant(ir.IntType(1), 0)])
    scale = b.sub(ctlz, _c(dst, dst.bits - 1 - src.significand))
    subnormal = b.xor(b.shl(a_abs, b.add(scale, _c(dst, widen))), _c(dst, dst.min_normal))
    exponent = b.sub(_c(dst, dst.bias - src.bias + 1), scale)
    subnormal = b.or_(subnormal, b.shl(exponent, _c(dst, dst.significand)))
    is_zero = b.icmp_unsigned("==", a_abs, _c(dst, 0))
    is_special = b.icmp_unsigned(">=", a_abs, _c(dst, src.infinity))
    result = b.select(is_normal, normal, b.select(is_special, special, b.select(
        is_zero, _c(dst, 0), subnormal)))
    return b.or_(result, b.shl(sign, _c(dst, dst.bits - src.bits)))
