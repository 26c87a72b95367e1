"""Complex numbers (complex64, complex128) in the LLVM backend: their register form, and the
complex forms of the elementwise lowerings.

Representation. In memory a complex number is NumPy's: two float32 (float64), the real part
first. In registers it is the literal struct `{float, float}` (`{double, double}`;
ltypes.reg_type), the same type as in memory. So loads, stores, `select`, loop phis and copies
move complex values like any other scalar, and every lowering that only moves elements (views,
pad, concatenate, gather and scatter, dynamic slices, control flow, sort's records, copies)
works on them unchanged. The rules here take a value apart (`extractvalue`) and build their
result (`insertvalue`); LLVM's instcombine splits loads and stores of these padding-free
structs into their two fields and folds each extract of an insert, so after optimisation a
fused loop computes on plain floats and vectorises as a real one does (its loads and stores
become interleaving shuffles).

Semantics are the reference backend's (NumPy's, which calls the C library's complex functions):
- add, sub, neg, conj per part; mul as NumPy computes it on FMA hosts (re = fma(ar, br, -ai bi),
  im = fma(ar, bi, ai br)); div is NumPy's Smith algorithm step for step (a zero divisor
  divides each part by 0);
- abs is hypot without overflow or underflow (inf when a part is infinite, even beside NaN);
  sign is z / |z| computed as the reference does (in double, 0 at 0);
- exp, log, sqrt, sin, cos, tan, sinh, cosh, tanh and the inverse functions asin, acos, atan,
  asinh, acosh, atanh follow C99's definitions and special values (glibc's choices, which
  NumPy returns), the inverse sine and cosine by Hull, Fairgrieve and Tang's algorithm:
  complex64 is computed in double and rounded once, complex128 with scaling or asymptotic
  forms where an intermediate could overflow or underflow, on mathlib's vectorisable real
  functions;
  expm1, log1p, exp2, logistic, rsqrt and pow are NumPy's formulas over those (pow: 1 at a
  zero exponent, 0 or NaN at a zero base, integral exponents below 100 in magnitude by repeated
  multiplication, otherwise exp(b log a));
- integer_pow is repeated squaring in the reference's order;
- eq/ne compare both parts; max/min (also clamp, reduce_max/min, cummax/cummin, scatter_max/min)
  use NumPy's lexicographic order, in which an operand with a NaN part wins;
- convert_element_type to a real, integer or bool type takes the real part (NumPy and XLA do);
  from one, the imaginary part is +0;
- reductions, scans and scatters add per part (sums reassociate, as real float sums do) and
  multiply with the textbook product, unfused, as NumPy's reduce, accumulate and `at` loops do
  (they differ from its elementwise product where a part overflows).
- atan2 of complex operands is the reference's formula, -i log((x + iy) / sqrt(x^2 + y^2)),
  step by step.
Primitives whose complex form is not here (anything that is not elementwise or listed in
MOVES) are refused by `lowers` (codegen's check_lowerable), so `kiln.jit` runs such a function
on the reference backend.
"""
import math

import numpy as np
import llvmlite.ir as ir

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM_SCALAR
from . import ltypes as T
from .mathlib import _Code, _Val, _SPECS, _sincos

F64 = ir.DoubleType()
LN2 = math.log(2)
PI_HI, PI_LO = math.pi, 1.2246467991473532e-16   # pi = PI_HI + PI_LO to about 2^-106
INF, NAN = float("inf"), float("nan")
EPS = 2.0 ** -52   # double's epsilon (everything here that needs it computes in double)

# Non-elementwise primitives whose lowerings handle complex operands: they move elements
# (views, copies, indexing, control flow, sort's records, tapes' records, which add complex
# values as pairs of floats), or combine them with the helpers below (reductions, scans,
# scatters, dot_general).
MOVES = frozenset({
    "fusion", "broadcast_in_dim", "transpose", "reshape", "squeeze", "slice", "rev", "pad",
    "concatenate", "iota", "bitcast_convert_type", "gather", "scatter", "scatter_add",
    "scatter_mul", "scatter_min", "scatter_max", "dynamic_slice", "dynamic_update_slice",
    "cond", "while_loop", "scan", "custom_jvp_call", "custom_vjp_call", "custom_vmap_call",
    "remat", "linear_solve", "root",
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "cumsum", "cumprod", "cummax",
    "cummin", "dot_general", "sort", "tape_push", "tape_pop", "debug_print",
    "pure_callback", "io_callback", "debug_callback", "ffi_call", "ffi_call_effect",
    "psum", "all_gather", "psum_scatter", "ppermute", "all_to_all", "fft",
    "cholesky", "triangular_solve", "lu", "qr", "eigh", "eig", "svd",
    "schur", "hessenberg"})   # (LAPACK's and BLAS's complex routines)


def lowers(eqn):
    """Whether the backend lowers `eqn` with complex operands or results."""
    name = eqn.prim.name
    return name in MOVES or name in _RULES or name in _SAME


# ----------------------------------------------------------------------- register form

def part_dtype(dtype):
    """float32 for complex64, float64 for complex128."""
    return np.dtype(f"f{np.dtype(dtype).itemsize // 2}")


def parts(builder, z):
    return builder.extract_value(z, 0), builder.extract_value(z, 1)


def pack(builder, re, im):
    ty = ir.LiteralStructType([re.type, re.type])
    return builder.insert_value(builder.insert_value(ir.Constant(ty, ir.Undefined), re, 0),
                                im, 1)


def _code(builder, ty, single=False):
    """The emitter of arithmetic in `ty`; `single`: double arithmetic for a complex64 result,
    whose mathlib functions are the variants float32 functions use ("fd": shorter
    polynomials, a smaller reduction table)."""
    return _Code(builder, ty, "fd" if single else "d" if ty == F64 else "f")


def _call(g, name, *args):
    """mathlib's function `name` at g's type and accuracy (inlined for "fd")."""
    if g.acc == "fd":
        return _SPECS[name][0](g, *args)
    return g.call(name, *args)


def _sin_cos(g, y):
    """(sin y, cos y), in double from one argument reduction (sin(+-0) = +-0)."""
    if g.acc == "f":   # float: mathlib's float32 functions (each reduces in double)
        return g.call("sin", y), g.call("cos", y)
    s, c = _sincos(g, y)
    return g.select(y.eq(0.0), y, s), c


def _vals(g, builder, z):
    """The parts of complex register value `z` as `g`'s _Vals (widened to g's type)."""
    return tuple(_Val(g, p if p.type == g.ty else builder.fpext(p, g.ty))
                 for p in parts(builder, z))


def _narrow(builder, re, im, ty):
    """The values of _Vals `re`, `im`, rounded to the part type `ty`."""
    return tuple(v if v.type == ty else builder.fptrunc(v, ty) for v in (re.v, im.v))


def _result(builder, re, im, ty):
    """Pack _Vals (narrowed to the part type `ty`)."""
    return pack(builder, *_narrow(builder, re, im, ty))


def _rule(fn, wide=False):
    """The scalar rule computing `fn(g, *operands, **params) -> (re, im)` on _Val pairs: in the
    part type, or in double when `wide` (complex64's transcendental functions)."""
    def rule(ctx, builder, args, in_avals, out_aval, **params):
        ty = T.reg_type(part_dtype(out_aval.dtype))
        g = _code(builder, F64, ty != F64) if wide else _code(builder, ty)
        zs = [_vals(g, builder, z) for z in args]
        return _result(builder, *fn(g, *zs, **params), ty)
    return rule


# ------------------------------------------------------------------------- arithmetic

def _add(g, a, b):
    return a[0] + b[0], a[1] + b[1]


def _sub(g, a, b):
    return a[0] - b[0], a[1] - b[1]


def _neg(g, a):
    return -a[0], -a[1]


def _mul(g, a, b):
    (ar, ai), (br, bi) = a, b
    return g.fma(ar, br, -(ai * bi)), g.fma(ar, bi, ai * br)


def _mul_plain(g, a, b):
    """The textbook product, unfused (NumPy's pow, reductions, scans and `at` loops)."""
    (ar, ai), (br, bi) = a, b
    return ar * br - ai * bi, ar * bi + ai * br


def _div(g, a, b):
    """Smith's algorithm, exactly as NumPy's complex division (NaN divisors take the second
    branch, as NumPy's `>=` does)."""
    (ar, ai), (br, bi) = a, b
    abr, abi = br.abs(), bi.abs()
    first = abr >= abi
    rat = g.select(first, bi / br, br / bi)
    scl = 1.0 / g.select(first, br + bi * rat, bi + br * rat)
    re = g.select(first, (ar + ai * rat) * scl, (ar * rat + ai) * scl)
    im = g.select(first, (ai - ar * rat) * scl, (ai * rat - ar) * scl)
    zero = abr.eq(0.0) & abi.eq(0.0)
    return g.select(zero, ar / abr, re), g.select(zero, ai / abr, im)


def _one(g):
    return g.f(1.0), g.f(0.0)


def _reciprocal(g, a):
    return _div(g, _one(g), a)


def _square(g, a):
    return _mul(g, a, a)


def _integer_pow(g, a, y):
    """Repeated squaring in the reference's order; 1 / z^|y| for negative y."""
    if y == 0:
        return _one(g)
    base, acc, n = a, None, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else _mul(g, acc, base)
        n >>= 1
        if n:
            base = _mul(g, base, base)
    return _reciprocal(g, acc) if y < 0 else acc


def _select(g, cond, a, b):
    return g.select(cond, a[0], b[0]), g.select(cond, a[1], b[1])


# ------------------------------------------------------------------- abs and sign

SCALE_LIMIT, SCALE_DOWN, SCALE_UP = 2.0 ** 500, 2.0 ** -600, 2.0 ** 600


def _scaling(g, a):
    """(factor, root of its inverse) bringing a magnitude `a` into [2^-500, 2^500] (1 inside):
    multiplied by the factor, squares neither overflow nor underflow; a square root of the
    scaled value times the second number is that of the original."""
    big, small = a > SCALE_LIMIT, a < 1 / SCALE_LIMIT
    factor = g.select(big, SCALE_DOWN, g.select(small, SCALE_UP, 1.0))
    root = g.select(big, SCALE_UP ** 0.5, g.select(small, SCALE_DOWN ** 0.5, 1.0))
    return factor, root


def _isinf(x):
    return x.abs().eq(INF)


def _isfinite(x):
    return x.abs() < INF


def _hypot(g, x, y):
    """sqrt(x^2 + y^2) in double without overflow or underflow, correctly rounded but in rare
    cases: the square root of the rounded sum, corrected by the residual (a^2 + b^2 - h^2) / 2h
    (a = max(|x|, |y|), b = min; squares split exactly with fma, a^2 - h^2 exact); inf when
    either is infinite (even beside a NaN), else NaN with a NaN."""
    ax, ay = x.abs(), y.abs()
    larger = ax >= ay
    factor, _ = _scaling(g, ax.max(ay))
    a, b = g.select(larger, ax, ay) * factor, g.select(larger, ay, ax) * factor
    aa, bb = a * a, b * b
    h = g.fma(a, a, bb).sqrt()
    hh = h * h
    residual = ((aa - hh) + bb) + ((g.fma(a, a, -aa) + g.fma(b, b, -bb)) - g.fma(h, h, -hh))
    h = g.select(h > 0.0, h + residual / (2.0 * h), h) / factor
    return g.select(_isinf(x) | _isinf(y), INF, h)


def _abs(ctx, builder, args, in_avals, out_aval):
    g = _code(builder, F64)
    x, y = _vals(g, builder, args[0])
    h = _hypot(g, x, y).v
    ty = T.reg_type(out_aval.dtype)
    return h if ty == F64 else builder.fptrunc(h, ty)


def _sign(g, a):
    """z / |z| as the reference computes it: a complex division by (|z|, 0) in double (so an
    infinite part gives NaNs), 0 where |z| = 0."""
    x, y = a
    m = _hypot(g, x, y)
    rat = 0.0 / m
    scl = 1.0 / (m + 0.0 * rat)
    re, im = (x + y * rat) * scl, (y - x * rat) * scl
    zero = m.eq(0.0)
    return g.select(zero, 0.0, re), g.select(zero, 0.0, im)


# ------------------------------------------------------------------ exp and log

HALF_EXP = 700.0   # above this, exp(x) is taken as exp(x/2)^2 (exp(x) alone may overflow)


def _may_overflow(g):
    """Whether double intermediates may overflow where the result does not: not for a
    complex64 result (g's "fd"), which overflows long before."""
    return g.acc != "fd"


def _exp_times(g, x, c, s):
    """(e^x c, e^x s, e^x) without spurious overflow where e^x alone overflows (complex128)."""
    e = _call(g, "exp", x)
    if not _may_overflow(g):
        return e * c, e * s, e
    h = _call(g, "exp", x * 0.5)
    half = x > HALF_EXP
    return (g.select(half, (h * c) * h, e * c), g.select(half, (h * s) * h, e * s), e)


def _exp(g, a):
    """C99 cexp: e^x (cos y, sin y); (e^x, y) at y = 0; (inf, NaN) and (0, +-0) at x = +-inf
    beside an infinite or NaN y."""
    x, y = a
    s, c = _sin_cos(g, y)
    re, im, e = _exp_times(g, x, c, s)
    at_zero = y.eq(0.0)
    re, im = g.select(at_zero, e, re), g.select(at_zero, y, im)
    edge = _isinf(x) & ~_isfinite(y)
    positive = x > 0.0
    re = g.select(edge, g.select(positive, INF, 0.0), re)
    im = g.select(edge, g.select(positive, y - y, g.f(0.0).copysign(y)), im)
    return re, im


def _x2y2m1(g, a, b):
    """a^2 + b^2 - 1 without cancellation near the unit circle: the squares split exactly
    (fma), a^2 - 1 exact there, the rest summed with an exact two-sum."""
    ah = a * a
    al = g.fma(a, a, -ah)
    bh = b * b
    bl = g.fma(b, b, -bh)
    s, e = g.two_sum(ah - 1.0, bh)
    return s + (e + (al + bl))


def _log_abs(g, x, y):
    """log |x + iy| in double: near |z| = 1, log1p of x^2 + y^2 - 1 (`_x2y2m1`); elsewhere
    log(a) + log1p((b/a)^2)/2 with a = max(|x|, |y|), b = min."""
    ax, ay = x.abs(), y.abs()
    larger = ax >= ay
    a, b = g.select(larger, ax, ay), g.select(larger, ay, ax)
    near = 0.5 * _call(g, "log1p", _x2y2m1(g, a, b))
    r = b / a
    far = _call(g, "log", a) + 0.5 * _call(g, "log1p", r * r)
    out = g.select((a >= 0.5) & (a <= 2.0), near, far)
    out = g.select(x.eq(0.0) & y.eq(0.0), -INF, out)
    return g.select(_isinf(x) | _isinf(y), INF, out)


def _log(g, a):
    x, y = a
    return _log_abs(g, x, y), _call(g, "atan2", y, x)


def _sqrt(g, a):
    """C99 csqrt (glibc's algorithm): t = sqrt((|x| + |z|) / 2) on scaled parts, then
    (t, y / 2t) for x > 0 and (|y| / 2t, +-t) otherwise; special values as C99."""
    x, y = a
    factor, root = _scaling(g, x.abs().max(y.abs()))
    xs, ys = x * factor, y * factor
    d = g.fma(xs, xs, ys * ys).sqrt()
    t = (0.5 * (d + xs.abs())).sqrt()
    q = 0.5 * (ys / t)
    positive = xs > 0.0
    re = g.select(positive, t, q.abs()) * root
    im = (g.select(positive, q, t) * root).copysign(y)
    zero = x.eq(0.0) & y.eq(0.0)
    re, im = g.select(zero, 0.0, re), g.select(zero, y, im)
    y_nan = y.isnan()
    inf_x = _isinf(x)
    re = g.select(inf_x, g.select(positive, x, g.select(y_nan, y, 0.0)), re)
    im = g.select(inf_x, g.select(positive, g.select(y_nan, y, g.f(0.0).copysign(y)),
                                  g.f(INF).copysign(y)), im)
    inf_y = _isinf(y)
    return g.select(inf_y, INF, re), g.select(inf_y, y, im)


# ------------------------------------------------------- hyperbolic and circular

def _half_exp_times(g, x, value):
    """value * e^|x| / 2 without spurious overflow: (value h) (h/2), h = e^(|x|/2) (value,
    a sine or cosine, may be subnormal: it is not halved first)."""
    h = _call(g, "exp", x.abs() * 0.5)
    return (value * h) * (h * 0.5)


def _sinh_or_cosh(g, a, is_sinh):
    """C99 csinh / ccosh with glibc's special values:
    sinh(x + iy) = (sinh x cos y, cosh x sin y), cosh(x + iy) = (cosh x cos y, sinh x sin y),
    where sinh and cosh overflow (|x| > HALF_EXP) through `_half_exp_times`."""
    x, y = a
    sh, ch = _call(g, "sinh", x), _call(g, "cosh", x)
    s, c = _sin_cos(g, y)
    sign = g.f(1.0).copysign(x)
    first, second = (sh, ch) if is_sinh else (ch, sh)
    first_sign, second_sign = (sign, 1.0) if is_sinh else (1.0, sign)
    re, im = first * c, second * s
    if _may_overflow(g):
        big = x.abs() > HALF_EXP
        re = g.select(big, _half_exp_times(g, x, c * first_sign), re)
        im = g.select(big, _half_exp_times(g, x, s * second_sign), im)
    im = g.select(y.eq(0.0), y * second_sign, im)    # +-0, also where cosh x is inf
    return _hyperbolic_edges(g, x, y, c, s, re, im, is_sinh)


def _hyperbolic_edges(g, x, y, c, s, re, im, is_sinh):
    """The special values of csinh/ccosh where x or y is not finite (glibc's table)."""
    inf, nan = INF, NAN
    y_finite, y_zero = _isfinite(y), y.eq(0.0)
    sign = g.f(1.0).copysign(x)
    x_zero = x.eq(0.0)
    # x finite, y inf or NaN
    if is_sinh:
        re_a, im_a = g.select(x_zero, x, nan), g.f(nan)
    else:
        re_a, im_a = g.f(nan), g.select(x_zero, 0.0, nan)
    # x infinite: y finite nonzero, y zero, y inf or NaN
    big_re = g.f(inf).copysign(c) * (sign if is_sinh else 1.0)
    big_im = g.f(inf).copysign(s) * (1.0 if is_sinh else sign)
    zero_re = x if is_sinh else g.f(inf)
    zero_im = y if is_sinh else y * sign
    re_b = g.select(y_finite, g.select(y_zero, zero_re, big_re), inf)
    im_b = g.select(y_finite, g.select(y_zero, zero_im, big_im), y - y)
    # x NaN
    re_c, im_c = g.f(nan), g.select(y_zero, y, nan)
    x_finite = _isfinite(x)
    x_inf = _isinf(x)
    re = g.select(x_finite, g.select(y_finite, re, re_a), g.select(x_inf, re_b, re_c))
    im = g.select(x_finite, g.select(y_finite, im, im_a), g.select(x_inf, im_b, im_c))
    return re, im


def _sinh(g, a):
    return _sinh_or_cosh(g, a, True)


def _cosh(g, a):
    return _sinh_or_cosh(g, a, False)


TANH_BIG = 354.0   # beyond, tanh x rounds to +-1 and sinh^2 x overflows


def _tanh(g, a):
    """C99 ctanh (glibc's algorithm): (sinh x cosh x, sin y cos y) / (sinh^2 x + cos^2 y);
    for |x| > TANH_BIG (+-1, 4 sin y cos y e^-2|x|)."""
    x, y = a
    sh, ch = _call(g, "sinh", x), _call(g, "cosh", x)
    s, c = _sin_cos(g, y)
    den = g.select(sh.abs() > c.abs() * EPS, sh * sh + c * c, c * c)
    re, im = (sh * ch) / den, (s * c) / den
    big = x.abs() > TANH_BIG
    tail = _call(g, "exp", -x.abs())
    one = g.f(1.0).copysign(x)
    re = g.select(big, one, re)
    im = g.select(big, ((4.0 * s * c) * tail) * tail, im)
    # not finite: x infinite; else y zero (x NaN); else NaN (x kept where it is zero)
    y_small = _isfinite(y) & (y.abs() > 1.0)
    inf_im = g.select(y_small, g.f(0.0).copysign(s * c), g.f(0.0).copysign(y))
    re_e = g.select(_isinf(x), one, g.select(y.eq(0.0), x, g.select(x.eq(0.0), x, NAN)))
    im_e = g.select(_isinf(x), inf_im, g.select(y.eq(0.0), y, NAN))
    finite = _isfinite(x) & _isfinite(y)
    return g.select(finite, re, re_e), g.select(finite, im, im_e)


def _rotated(fn):
    """f(z) = -i h(iz) (sin from sinh, tan from tanh); `_cos`: cos(z) = cosh(iz)."""
    def circular(g, a):
        x, y = a
        re, im = fn(g, (-y, x))
        return im, -re
    return circular


def _sin(g, a):
    """-i sinh(iz), but for glibc's csin(+-inf or NaN +- i inf) = (NaN, +inf), which breaks
    the identity's sign (C99 leaves it unspecified)."""
    x, y = a
    re, im = _rotated(_sinh)(g, a)
    return re, g.select(_isinf(y) & ~_isfinite(x), INF, im)


def _cos(g, a):
    x, y = a
    return _cosh(g, (-y, x))


# ------------------------------------------------------------------ inverse functions

B_CROSSOVER, A_CROSSOVER = 0.6417, 1.5
HALF_PI = math.pi / 2


def _asin_acos_parts(g, x, y):
    """For the magnitudes x, y of a number's parts: (the real part of its arcsine, the real
    part of its arccosine, the magnitude of both imaginary parts), by Hull, Fairgrieve and
    Tang's algorithm (ACM TOMS 23, 1997): with r = |z + 1|, s = |z - 1|, A = (r + s)/2, the
    real parts are asin(x/A) and acos(x/A), or forms of atan without cancellation where x/A
    nears 1, and the imaginary part is log(A + sqrt(A^2 - 1)), through log1p of A - 1 summed
    without cancellation near A = 1. Outside [2^-500, 2^500] (where squares overflow or
    underflow) the paper's asymptotic forms."""
    xp1, xm1 = x + 1.0, x - 1.0
    yy = y * y
    r = g.fma(xp1, xp1, yy).sqrt()
    s = g.fma(xm1, xm1, yy).sqrt()
    a = 0.5 * (r + s)
    b = x / a
    apx = a + x
    below = x <= 1.0
    # the real parts where b is near 1
    d = g.select(below, (0.5 * apx * (yy / (r + xp1) + (s - xm1))).sqrt(),
                 y * (0.5 * (apx / (r + xp1) + apx / (s + xm1))).sqrt())
    use_b = b <= B_CROSSOVER
    re_asin = g.select(use_b, _call(g, "asin", b), _call(g, "atan", x / d))
    re_acos = g.select(use_b, _call(g, "acos", b), _call(g, "atan", d / x))
    am1 = 0.5 * (yy / (r + xp1) + g.select(below, yy / (s - xm1), s + xm1))
    im = g.select(a <= A_CROSSOVER, _call(g, "log1p", am1 + (am1 * (a + 1.0)).sqrt()),
                  _call(g, "log", a + g.fma(a, a, -1.0).sqrt()))
    safe = ((x > 1 / SCALE_LIMIT) & (x < SCALE_LIMIT) & (y > 1 / SCALE_LIMIT)
            & (y < SCALE_LIMIT))
    edge = _asin_acos_edges(g, x, y, xp1, xm1)
    return tuple(g.select(safe, main, other)
                 for main, other in zip((re_asin, re_acos, im), edge))


def _asin_acos_edges(g, x, y, xp1, xm1):
    """`_asin_acos_parts` where x or y is zero, tiny or huge: the paper's cases, first match
    wins: y negligible beside |x - 1|; y tiny (x near 1); y huge beside x; x > 1; x tiny."""
    log_y = LN2 + _call(g, "log", y)
    cases = []
    # y negligible: the real line (x < 1 inside, x >= 1 on the cut)
    inside = x < 1.0
    fits = xm1 < 2.0 ** 1000 / xp1
    root = (xp1 * xm1).sqrt()
    cases.append((y <= EPS * xm1.abs(), (
        g.select(inside, _call(g, "asin", x), HALF_PI),
        g.select(inside, _call(g, "acos", x), g.select(fits, y / root, y / x)),
        g.select(inside, y / (xp1 * (1.0 - x)).sqrt(),
                 g.select(fits, _call(g, "log1p", xm1 + root), LN2 + _call(g, "log", x))))))
    t = y.sqrt()
    cases.append((y <= 1 / SCALE_LIMIT, (HALF_PI - t, t, t)))
    cases.append((EPS * y - 1.0 >= x, (x / y, g.f(HALF_PI), log_y)))
    q = x / y
    cases.append((x > 1.0, (_call(g, "atan", q), _call(g, "atan", y / x),
                            log_y + 0.5 * _call(g, "log1p", q * q))))
    h = g.fma(y, y, 1.0).sqrt()
    out = (x / h, g.f(HALF_PI), 0.5 * _call(g, "log1p", 2.0 * y * (y + h)))
    for cond, values in reversed(cases):
        out = tuple(g.select(cond, v, o) for v, o in zip(values, out))
    return out


# C99's values where a part is infinite or NaN (Annex G; glibc's choices where it leaves a
# sign unspecified): `_finite_or(g, z, main, edge)` picks `edge` there.

def _finite_or(g, a, main, edge):
    finite = _isfinite(a[0]) & _isfinite(a[1])
    return tuple(g.select(finite, m, e) for m, e in zip(main, edge))


def _asinh_edge(g, x, y):
    """casinh where x or y is not finite."""
    x_nan, x_inf, y_inf = x.isnan(), _isinf(x), _isinf(y)
    zero = g.f(0.0).copysign(y)
    im_y_inf = g.select(x_nan, NAN, g.select(x_inf, math.pi / 4, HALF_PI)).copysign(y)
    im_x_edge = g.select((x_inf & _isfinite(y)) | (x_nan & y.eq(0.0)), zero, NAN)
    re = g.select(y_inf, g.f(INF).copysign(x), g.select(x_inf | x_nan, x, NAN))
    im = g.select(y_inf, im_y_inf, g.select(x_inf | x_nan, im_x_edge, NAN))
    return re, im


def _asin(g, a):
    """Where a part is NaN: (x, y) for x = 0, (NaN, +-inf) beside an infinity, else NaN;
    otherwise -i asinh(iz) (its edge values included)."""
    x, y = a
    re, _, im = _asin_acos_parts(g, x.abs(), y.abs())
    h_re, h_im = _asinh_edge(g, -y, x)
    nan = x.isnan() | y.isnan()
    inf = _isinf(x) | _isinf(y)
    e_re = g.select(nan, g.select(x.eq(0.0), x, NAN), h_im)
    e_im = g.select(nan, g.select(inf, g.f(INF).copysign(y), NAN), -h_re)
    return _finite_or(g, a, (re.copysign(x), im.copysign(y)), (e_re, e_im))


def _acos(g, a):
    """C99 cacos; where a part is not finite, (pi/2 - Im w, Re w) with w = asinh(iz)."""
    x, y = a
    _, re, im = _asin_acos_parts(g, x.abs(), y.abs())
    re = g.select(x.signbit(), (PI_HI - re) + PI_LO, re)
    w_re, w_im = _asinh_edge(g, -y, x)
    return _finite_or(g, a, (re, im.copysign(-y)), (HALF_PI - w_im, w_re))


def _asinh(g, a):
    """asinh(z) = -i asin(iz)."""
    x, y = a
    re, _, im = _asin_acos_parts(g, y.abs(), x.abs())
    return _finite_or(g, a, (im.copysign(x), re.copysign(y)), _asinh_edge(g, x, y))


def _acosh(g, a):
    """acosh(z) = +-i acos(z), the sign giving a real part >= 0 (C99's branch)."""
    x, y = a
    re, im = _acos(g, a)
    neg = im.signbit()
    main = (g.select(neg, -im, im), g.select(neg, re, -re))
    x_nan, x_inf, y_inf = x.isnan(), _isinf(x), _isinf(y)
    angle = g.select(x_inf, g.select(x < 0.0, 3 * math.pi / 4, math.pi / 4), HALF_PI)
    im_y_inf = g.select(x_nan, NAN, angle.copysign(y))
    im_x_inf = g.select(_isfinite(y), g.select(x.signbit(), math.pi, 0.0).copysign(y), NAN)
    im_other = g.select(x.eq(0.0), HALF_PI, NAN)
    edge = (g.select(y_inf | x_inf, INF, NAN),
            g.select(y_inf, im_y_inf, g.select(x_inf, im_x_inf, im_other)))
    return _finite_or(g, a, main, edge)


def _atanh(g, a):
    """Kahan's form: (log1p(4x / ((1 - x)^2 + y^2)) / 4, atan2(2y, 1 - x^2 - y^2) / 2), the
    first as log(((1 + x)^2 + y^2) / ((1 - x)^2 + y^2)) / 4 where that ratio is below 1/2,
    the last difference without cancellation (`_x2y2m1`); x = +-1 beside a tiny y as
    (ln 2 - log|y|) / 2; huge parts asymptotically: (x / |z|^2, +-pi/2)."""
    x, y = a
    ax, ay = x.abs(), y.abs()
    xm1, xp1 = 1.0 - x, 1.0 + x
    den = g.fma(xm1, xm1, y * y)
    num = g.fma(xp1, xp1, y * y)
    ratio = num / den   # below 1/2 (x near -1), its log is accurate where log1p's argument is not
    re = 0.25 * g.select(ratio < 0.5, _call(g, "log", ratio), _call(g, "log1p", 4.0 * x / den))
    re = g.select(ax.eq(1.0) & (ay < 1 / SCALE_LIMIT),
                  (0.5 * (LN2 - _call(g, "log", ay))).copysign(x), re)
    im = 0.5 * _call(g, "atan2", 2.0 * y, -_x2y2m1(g, ax, ay))
    huge = ax.max(ay) >= SCALE_LIMIT
    h = _hypot(g, 0.5 * x, 0.5 * y)
    re = g.select(huge, x / h / h * 0.25, re)
    im = g.select(huge, g.f(HALF_PI).copysign(y), im)
    # not finite: y infinite; x infinite or zero (beside a NaN y); else NaN
    x_edge = _isinf(x) | x.eq(0.0)
    half_pi = g.f(HALF_PI).copysign(y)
    edge = (g.select(_isinf(y) | x_edge, g.f(0.0).copysign(x), NAN),
            g.select(_isinf(y), half_pi, g.select(x_edge & _isfinite(y), half_pi, NAN)))
    return _finite_or(g, a, (re, im), edge)


def _atan(g, a):
    """atan(z) = -i atanh(iz), but for C99's values where a part is not finite: x infinite;
    y infinite (NaN beside a NaN x); y zero (x NaN); else NaN."""
    x, y = a
    re, im = _atanh(g, (-y, x))
    zero = g.f(0.0).copysign(y)
    half_pi = g.f(HALF_PI).copysign(x)
    edge = (g.select(_isinf(x) | (_isinf(y) & ~x.isnan()), half_pi, NAN),
            g.select(_isinf(x) | _isinf(y) | y.eq(0.0), zero, NAN))
    return _finite_or(g, a, (im, -re), edge)


# ------------------------------------------------------------------ NumPy formulas

def _expm1(g, a):
    """NumPy's: (expm1(x) cos y - 2 sin^2(y/2), e^x sin y)."""
    x, y = a
    h = _call(g, "sin", y * 0.5)
    s, c = _sin_cos(g, y)
    return _call(g, "expm1", x) * c - 2.0 * h * h, _call(g, "exp", x) * s


def _log1p(g, a):
    """NumPy's: log(1 + z) with 1 + x rounded in the operand's type first."""
    x, y = a
    return x + 1.0, y


def _exp2(g, a):
    """NumPy's: exp(z ln 2), the product rounded in the operand's type."""
    x, y = a
    return x * LN2, y * LN2


def _steps(*steps):
    """A rule chaining NumPy's steps: each (fn, wide) runs on the previous step's result, in
    the part type or in double (`wide`), and rounds to the part type in between."""
    def rule(ctx, builder, args, in_avals, out_aval, **params):
        ty = T.reg_type(part_dtype(out_aval.dtype))
        z = args[0]
        for fn, wide in steps:
            g = _code(builder, F64, ty != F64) if wide else _code(builder, ty)
            z = _result(builder, *fn(g, _vals(g, builder, z)), ty)
        return z
    return rule


def _logistic_tail(g, a):
    """1 / (1 + e), 1 + e as NumPy adds (1 + 0i) (so -0 + 0 = +0)."""
    return _reciprocal(g, (a[0] + 1.0, a[1] + 0.0))


def _log1p_abs_arg(g, a):
    """(|w|, arg w) of w = 1 + z; |w| is rounded to the operand's type before its log, as
    NumPy's is (so it overflows there)."""
    x, y = a
    return _hypot(g, x, y), _call(g, "atan2", y, x)


def _log_of_real(g, a):
    return _call(g, "log", a[0]), a[1]


# ------------------------------------------------------------------------------- pow

def _pow(ctx, builder, args, in_avals, out_aval):
    """NumPy's complex power (its npy_cpow): 1 at a zero exponent; at a zero base 0 for a
    positive real exponent, else NaN; an integral real exponent n, |n| < 100, by repeated
    multiplication (`_small_power`); otherwise exp(b log a) as the C library's cpow: log and
    exp in double, each rounded to the operand type, the product in the operand type."""
    ty = T.reg_type(part_dtype(out_aval.dtype))
    a, b = args
    kind = in_avals[1].dtype.kind
    if kind != "c":   # an integer exponent
        b = pack(builder, (builder.sitofp if kind == "i" else builder.uitofp)(b, ty),
                 ir.Constant(ty, 0.0))
    g, w = _code(builder, ty), _code(builder, F64, ty != F64)
    za, (br, bi) = _vals(g, builder, a), _vals(g, builder, b)
    exponent = _mul_plain(g, (br, bi), _wide_step(g, w, _log, za))
    general = _wide_step(g, w, _exp, exponent)
    small = br.abs() < 100.0
    n = g.select(small, br, 0.0)
    out = _select(g, bi.eq(0.0) & small & n.eq(n.floor()), _small_power(g, za, n), general)
    zero_base = (g.select(br > 0.0, 0.0, NAN),) * 2
    out = _select(g, za[0].eq(0.0) & za[1].eq(0.0), zero_base, out)
    out = _select(g, br.eq(0.0) & bi.eq(0.0), _one(g), out)
    return pack(builder, out[0].v, out[1].v)


def _wide_step(g, w, fn, z):
    """`fn` (a function of the double emitter `w`) on the _Val pair `z` of the narrower
    emitter `g`, its result rounded back to g's type: a NumPy step computed in double."""
    b = g.b
    parts = [v.v if v.v.type == w.ty else b.fpext(v.v, w.ty) for v in z]
    out = fn(w, tuple(_Val(w, p) for p in parts))
    return tuple(_Val(g, v) for v in _narrow(b, *out, g.ty))


def _atan2(ctx, builder, args, in_avals, out_aval):
    """The reference's complex atan2(y, x), -i log((x + iy) / sqrt(x^2 + y^2)), step by step
    in the operands' type (products in NumPy's form, sqrt and log in double, rounded)."""
    ty = T.reg_type(part_dtype(out_aval.dtype))
    g, w = _code(builder, ty), _code(builder, F64, ty != F64)
    y, x = (_vals(g, builder, z) for z in args)
    num = _add(g, x, _mul(g, (g.f(0.0), g.f(1.0)), y))
    root = _wide_step(g, w, _sqrt, _add(g, _mul(g, x, x), _mul(g, y, y)))
    log = _wide_step(g, w, _log, _div(g, num, root))
    re, im = _mul(g, (g.f(-0.0), g.f(-1.0)), log)
    return pack(builder, re.v, im.v)


def _small_power(g, a, n):
    """a^n for an integral float n, |n| < 100, as NumPy: a, a*a, a*(a*a) for n = 1, 2, 3;
    otherwise a product over the bits of |n| starting from 1, inverted for negative n."""
    m = _Val(g, g.b.fptosi(n.abs().v, ir.IntType(32)))
    acc, p = _one(g), a
    for k in range(7):          # |n| < 100 < 2^7
        bit = _Val(g, g.b.trunc(g.b.lshr(m.v, ir.Constant(m.v.type, k)), ir.IntType(1)))
        acc = _select(g, bit, _mul_plain(g, acc, p), acc)
        p = _mul_plain(g, p, p)
    looped = _select(g, n < 0.0, _reciprocal(g, acc), acc)
    square = _mul_plain(g, a, a)
    out = _select(g, n.eq(3.0), _mul_plain(g, a, square), looped)
    out = _select(g, n.eq(2.0), square, out)
    return _select(g, n.eq(1.0), a, out)


# -------------------------------------------------------------- comparisons, max/min

def _eq(ctx, builder, args, in_avals, out_aval):
    (ar, ai), (br, bi) = (parts(builder, z) for z in args)
    return builder.and_(builder.fcmp_ordered("==", ar, br), builder.fcmp_ordered("==", ai, bi))


def _ne(ctx, builder, args, in_avals, out_aval):
    (ar, ai), (br, bi) = (parts(builder, z) for z in args)
    return builder.or_(builder.fcmp_unordered("!=", ar, br),
                       builder.fcmp_unordered("!=", ai, bi))


def _extremum(builder, a, b, op):
    """NumPy's complex maximum (op ">") or minimum ("<"): `a` if it has a NaN part or comes
    first in the lexicographic order (ties included), else `b`."""
    (ar, ai), (br, bi) = parts(builder, a), parts(builder, b)
    fo, fu = builder.fcmp_ordered, builder.fcmp_unordered
    no_nan_im = fo("ord", ai, bi)
    before = builder.or_(builder.and_(fo(op, ar, br), no_nan_im),
                         builder.and_(fo("==", ar, br), fo(op + "=", ai, bi)))
    keep = builder.or_(builder.or_(fu("uno", ar, ar), fu("uno", ai, ai)), before)
    return builder.select(keep, a, b)


def maximum(builder, a, b):
    return _extremum(builder, a, b, ">")


def minimum(builder, a, b):
    return _extremum(builder, a, b, "<")


def _max(ctx, builder, args, in_avals, out_aval):
    return maximum(builder, *args)


def _min(ctx, builder, args, in_avals, out_aval):
    return minimum(builder, *args)


def _clamp(ctx, builder, args, in_avals, out_aval):
    lo, x, hi = args
    return minimum(builder, maximum(builder, x, lo), hi)


# --------------------------------------------------- parts, construction, conversion

def _real(ctx, builder, args, in_avals, out_aval):
    return builder.extract_value(args[0], 0)


def _imag(ctx, builder, args, in_avals, out_aval):
    return builder.extract_value(args[0], 1)


def _complex(ctx, builder, args, in_avals, out_aval):
    return pack(builder, *args)


def _conj_rule(ctx, builder, args, in_avals, out_aval):
    """conj; of a float32/float64 operand, the complex number (x, +0) of its precision."""
    x = args[0]
    if in_avals[0].dtype.kind != "c":
        return pack(builder, x, ir.Constant(x.type, 0.0))
    re, im = parts(builder, x)
    return pack(builder, re, builder.fneg(im))


def convert(builder, x, src, dst, real_convert):
    """Conversions with a complex side (lower_elementwise.convert calls this with itself as
    `real_convert`): complex -> complex per part; complex -> anything through the real part;
    anything -> complex as (x, +0)."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src.kind == "c" and dst.kind == "c":
        re, im = parts(builder, x)
        a, b = part_dtype(src), part_dtype(dst)
        return pack(builder, real_convert(builder, re, a, b), real_convert(builder, im, a, b))
    if src.kind == "c":
        return real_convert(builder, builder.extract_value(x, 0), part_dtype(src), dst)
    re = real_convert(builder, x, src, part_dtype(dst))
    return pack(builder, re, ir.Constant(re.type, 0.0))


# ---------------------------------------------------------- combining (reductions)

def add(builder, a, b, flags=()):
    (ar, ai), (br, bi) = parts(builder, a), parts(builder, b)
    return pack(builder, builder.fadd(ar, br, flags=flags), builder.fadd(ai, bi, flags=flags))


def mul(builder, a, b):
    g = _code(builder, a.type.elements[0])
    re, im = _mul_plain(g, _vals(g, builder, a), _vals(g, builder, b))
    return pack(builder, re.v, im.v)


# Reductions' identities where they differ from the reference's fill value of an empty
# reduction: the fold of max (min) starts below (above) every value, -inf - inf i, so that a
# first element with real part -inf wins as it does in NumPy's fold.
FOLD_START = {"reduce_max": complex(-np.inf, -np.inf), "reduce_min": complex(np.inf, np.inf)}


def combine(name, builder, acc, x, flags=()):
    """A reduction's step on complex values (lower_fused, lower_reductions)."""
    if name == "reduce_sum":
        return add(builder, acc, x, flags)
    if name == "reduce_prod":
        return mul(builder, acc, x)
    return (maximum if name == "reduce_max" else minimum)(builder, acc, x)


# ---------------------------------------------------------------------- registration

_SAME = frozenset({"select_n", "copy", "stop_gradient", "no_derivative", "name",
                   "sharding_constraint",
                   "bitcast_convert_type",
                   "convert_element_type"})   # their real rules handle complex values

_RULES = {
    "add": _rule(_add), "sub": _rule(_sub), "mul": _rule(_mul), "div": _rule(_div),
    "neg": _rule(_neg), "square": _rule(_square), "integer_pow": _rule(_integer_pow),
    "abs": _abs, "sign": _rule(_sign, wide=True),
    "exp": _rule(_exp, wide=True), "log": _rule(_log, wide=True),
    "sqrt": _rule(_sqrt, wide=True),
    "sinh": _rule(_sinh, wide=True), "cosh": _rule(_cosh, wide=True),
    "tanh": _rule(_tanh, wide=True), "sin": _rule(_sin, wide=True),
    "cos": _rule(_cos, wide=True), "tan": _rule(_rotated(_tanh), wide=True),
    "expm1": _rule(_expm1), "log1p": _steps((_log1p, False), (_log1p_abs_arg, True), (_log_of_real, True)),
    "exp2": _steps((_exp2, False), (_exp, True)),
    "logistic": _steps((_neg, False), (_exp, True), (_logistic_tail, False)),
    "rsqrt": _steps((_sqrt, True), (_reciprocal, False)),
    "asin": _rule(_asin, wide=True), "acos": _rule(_acos, wide=True),
    "atan": _rule(_atan, wide=True), "asinh": _rule(_asinh, wide=True),
    "acosh": _rule(_acosh, wide=True), "atanh": _rule(_atanh, wide=True),
    "pow": _pow, "atan2": _atan2, "eq": _eq, "ne": _ne, "max": _max, "min": _min, "clamp": _clamp,
    "real": _real, "imag": _imag, "complex": _complex, "conj": _conj_rule,
}


def _has_complex(in_avals, out_aval):
    return out_aval.dtype.kind == "c" or any(a.dtype.kind == "c" for a in in_avals)


def _dispatch(real_rule, complex_rule):
    """A scalar rule running `complex_rule` when an operand or the result is complex."""
    def rule(ctx, builder, args, in_avals, out_aval, **params):
        chosen = complex_rule if _has_complex(in_avals, out_aval) else real_rule
        return chosen(ctx, builder, args, in_avals, out_aval, **params)
    return rule


def register():
    """Attach the complex forms to the primitives' scalar rules (lower_elementwise calls this
    once its real rules are registered)."""
    for name, rule in _RULES.items():
        prim = PRIMITIVES[name]
        real_rule = LLVM_SCALAR.get(prim)
        LLVM_SCALAR[prim] = rule if real_rule is None else _dispatch(real_rule, rule)
