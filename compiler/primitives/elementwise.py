"""Elementwise primitives: unary math, binary arithmetic, comparisons, bit operations,
fused multiply-add, select_n, clamp, and dtype conversion.

All operands of an n-ary elementwise primitive share one shape (rank-0 operands broadcast) and (except shifts' and
select_n's predicate) one dtype: broadcasting and promotion happen above, in `kiln.numpy` and
`kiln.lax`. The result is weakly typed only when every operand is. Integer semantics follow XLA,
not NumPy: `div` truncates towards zero, `rem` takes the dividend's sign, division by zero gives
-1 (`div`) and the dividend (`rem`), shifts by the bit width or more give 0 (or the sign fill).

Each declaration is followed by its derivative rules (`_deriv`: JAX's `defjvp` partials, one line
per primitive; `_linear`; or `_zero_derivative` for piecewise-constant and integer-only ones),
with JAX's conventions at the points where a function is not differentiable.
"""
import fractions
import functools
import importlib
import math

import numpy as np

from ..ir.abstract import ShapedArray
from ..ir.ssa import Literal
from ..ir import dtypes
from . import emit as E
from . import batching as B
from .core import (register, check_same_dtypes, check_same_shapes, check_dtype_kinds, type_error,
                   elementwise_shape, JVP, VJP, BATCH)
from .rule_forms import tangent_rule, cotangent_rule

FLOAT = "f"
INEXACT = "fc"
INT = "iu"
INT_BOOL = "iub"
NUMBER = "iufc"
ANY = "biufc"
REAL_NUMBER = "iuf"
ORDERED = "biuf"

_KIND_TEXT = {
    FLOAT: "subtypes of floating",
    INEXACT: "subtypes of floating, complexfloating",
    INT: "subtypes of integer",
    INT_BOOL: "subtypes of integer, bool",
    NUMBER: "subtypes of integer, floating, complexfloating",
    ANY: "any dtype",
    REAL_NUMBER: "subtypes of integer, floating",
    ORDERED: "subtypes of integer, floating, bool",
    "c": "subtypes of complexfloating",
}


def _same(aval):
    return aval.dtype


def _to_bool(aval):
    return dtypes.bool_


def _to_real(aval):
    return np.dtype(aval.dtype.char.lower()) if aval.dtype.kind == "c" else aval.dtype


def _real_of_complex(aval):
    return {np.dtype(np.complex64): dtypes.float32,
            np.dtype(np.complex128): dtypes.float64}.get(aval.dtype, aval.dtype)


def unary(name, np_fn, kinds, out_dtype=_same, keep_weak=True):
    """Factory: a one-operand elementwise primitive."""
    def abstract_eval(x, **params):
        check_dtype_kinds(name, x, kinds, _KIND_TEXT[kinds])
        return ShapedArray(x.shape, out_dtype(x), x.weak_type and keep_weak)
    return register(name, abstract_eval, np_fn)


def nary(name, np_fn, kinds, out_dtype=_same, arity=2):
    """Factory: an n-operand elementwise primitive with equal shapes and dtypes."""
    def abstract_eval(*avals, **params):
        if len(avals) != arity:
            raise type_error(name, f"takes {arity} operands, got {len(avals)}")
        for i, a in enumerate(avals):  # JAX checks each position's kind, then equality
            check_dtype_kinds(name, a, kinds, _KIND_TEXT[kinds], position=i)
        check_same_dtypes(name, avals)
        check_same_shapes(name, avals)
        out = out_dtype(avals[0])
        weak = all(a.weak_type for a in avals) and out != dtypes.bool_
        return ShapedArray(elementwise_shape(avals), out, weak)
    return register(name, abstract_eval, np_fn)


# ------------------------------------------------------------------------ derivative rules

def _deriv(prim, *partials):
    """Factory: JVP and VJP rules of an elementwise primitive from its partial derivatives,
    JAX's `defjvp` style. `partials[i](g, *operands, out, **params)` is the tangent that operand
    i's tangent `g` (broadcast to the output's shape) contributes: a map that is linear in `g`
    and elementwise, so it is its own transpose (JAX's plain transpose, no conjugation, for
    complex values) and the VJP applies it to the cotangent. A partial of None, or one that
    returns None, is a zero derivative (integer exponents, `integer_pow(x, 0)`)."""
    def jvp(primals, tangents, out, **params):
        shape = E.aval(out).shape
        terms = [p(E.broadcast_to(t, shape), *primals, out, **params)
                 for p, t in zip(partials, tangents) if p is not None and t is not None]
        terms = [t for t in terms if t is not None]
        return functools.reduce(E.add, terms) if terms else None

    def vjp(ct, primals, out, **params):
        return [_unbroadcast(p(ct, *primals, out, **params), x)
                if p is not None and _takes_ct(x) else None for p, x in zip(partials, primals)]

    JVP[prim] = tangent_rule(jvp)
    VJP[prim] = cotangent_rule(vjp)


def _linear(prim, forward, transpose):
    """Factory: rules of a one-operand linear primitive (`real`, `conj`, ...): the tangent is
    `forward(t, x)`, the cotangent `transpose(ct, x)` (JAX's transpose rule)."""
    JVP[prim] = tangent_rule(
        lambda primals, tangents, out, **params: forward(tangents[0], *primals))
    VJP[prim] = cotangent_rule(lambda ct, primals, out, **params: [transpose(ct, *primals)])


def _zero_derivative(*prims):
    for prim in prims:
        prim.zero_derivative = True


def _takes_ct(x):
    """Whether an operand can receive a cotangent (literals and integer values cannot)."""
    return E.is_float(x) and not isinstance(x, (Literal, bool, int, float, complex))


def _unbroadcast(ct, x):
    """A cotangent of the output's shape, summed to a rank-0 operand's shape."""
    return None if ct is None else E.sum_to_shape(ct, E.aval(x).shape)


# ------------------------------------------------------------------------------ unary math

def _round(x, rounding_method=0):
    if x.dtype.kind != "f":
        return x
    if rounding_method == 1:  # TO_NEAREST_EVEN
        return np.round(x)
    # Half away from zero, exactly: compare the fraction (adding 0.5 first would round
    # 0.49999997 up) and keep the sign of zero.
    t = np.trunc(x)
    return np.copysign(np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t), x).astype(x.dtype)


def _sign(x):
    if x.dtype.kind == "u":
        return (x > 0).astype(x.dtype)
    if x.dtype.kind == "c":  # x / |x| in double precision: no overflow for tiny or huge x
        z = x.astype(np.complex128)
        a = np.abs(z)
        return np.where(a == 0, 0, z / np.where(a == 0, 1, a)).astype(x.dtype)
    if x.dtype.kind == "f":
        return np.where(x == 0, x, np.sign(x))  # sign(-0.0) is -0.0, as in XLA
    return np.sign(x)


def _rsqrt(x):
    return (np.asarray(1, x.dtype) / np.sqrt(x)).astype(x.dtype)


def _cbrt(x):
    # NumPy's float32 cbrt is off by an ulp on exact cubes (cbrt(27) = 2.9999998); XLA's is not.
    return np.cbrt(x.astype(np.float64)).astype(x.dtype)


def _digamma(x):
    # XLA: NaN at the poles 0, -1, -2, ... (scipy gives -inf at 0).
    pole = (x <= 0) & (x == np.floor(x))
    return np.where(pole, np.asarray(np.nan, x.dtype), _special("psi")(x))


def _logistic(x):
    if x.dtype.kind == "c":  # scipy's expit is real-only
        return (1 / (1 + np.exp(-x))).astype(x.dtype)
    return _special("expit")(x)


def _special(name):
    """A scipy.special ufunc, imported on first use (keeps `import kiln` fast)."""
    fn = None

    def impl(x):
        nonlocal fn
        if fn is None:
            fn = getattr(importlib.import_module("scipy.special"), name)
        return fn(x).astype(x.dtype, copy=False)
    impl.__name__ = name
    return impl


def _population_count(x):
    bits = x.dtype.itemsize * 8
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    count = np.zeros(x.shape, dtype=x.dtype)
    for i in range(bits):
        count += ((u >> np.asarray(i, u.dtype)) & np.asarray(1, u.dtype)).astype(x.dtype)
    return count


def _clz(x):
    bits = x.dtype.itemsize * 8
    u = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    out = np.full(x.shape, bits, dtype=np.int64)
    for i in range(bits):  # highest set bit wins
        out = np.where((u >> np.uint64(i)) & np.uint64(1), bits - 1 - i, out)
    return out.astype(x.dtype)


def _in_double(fn):
    """`fn` computed in float64 for narrower real floats, rounded once to the operand's
    dtype. NumPy's own float32 loops of the transcendental functions are 1-3 ulp off and pick
    different code on AVX-512 and AVX2 machines; widened, the reference backend (and so eager
    operations) gives the correctly rounded result almost always, as the compiled code does,
    the same bits on every machine. Complex operands keep NumPy's loops: the compiled code
    evaluates complex functions by their float32 formulas, which the oracle must follow."""
    def impl(x):
        if x.dtype.kind == "f" and x.dtype.itemsize < 8:
            return fn(x.astype(np.float64)).astype(x.dtype)
        return fn(x)
    impl.__name__ = fn.__name__
    return impl


def _not(x):
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


neg = unary("neg", np.negative, NUMBER)
sign = unary("sign", _sign, NUMBER)
floor = unary("floor", np.floor, FLOAT)
ceil = unary("ceil", np.ceil, FLOAT)
round_ = unary("round", _round, FLOAT)
is_finite = unary("is_finite", np.isfinite, FLOAT, _to_bool, keep_weak=False)
exp = unary("exp", _in_double(np.exp), INEXACT)
exp2 = unary("exp2", _in_double(np.exp2), INEXACT)
log = unary("log", _in_double(np.log), INEXACT)
log1p = unary("log1p", _in_double(np.log1p), INEXACT)
expm1 = unary("expm1", _in_double(np.expm1), INEXACT)
tanh = unary("tanh", _in_double(np.tanh), INEXACT)
logistic = unary("logistic", _logistic, INEXACT)
sin = unary("sin", _in_double(np.sin), INEXACT)
cos = unary("cos", _in_double(np.cos), INEXACT)
tan = unary("tan", _in_double(np.tan), INEXACT)
asin = unary("asin", _in_double(np.arcsin), INEXACT)
acos = unary("acos", _in_double(np.arccos), INEXACT)
atan = unary("atan", _in_double(np.arctan), INEXACT)
sinh = unary("sinh", _in_double(np.sinh), INEXACT)
cosh = unary("cosh", _in_double(np.cosh), INEXACT)
asinh = unary("asinh", _in_double(np.arcsinh), INEXACT)
acosh = unary("acosh", _in_double(np.arccosh), INEXACT)
atanh = unary("atanh", _in_double(np.arctanh), INEXACT)
sqrt = unary("sqrt", np.sqrt, INEXACT)
rsqrt = unary("rsqrt", _rsqrt, INEXACT)
cbrt = unary("cbrt", _cbrt, FLOAT)
abs_ = unary("abs", np.abs, NUMBER, _to_real)
not_ = unary("not", _not, INT_BOOL)
population_count = unary("population_count", _population_count, INT)
clz = unary("clz", _clz, INT)
erf = unary("erf", _special("erf"), FLOAT)
erfc = unary("erfc", _special("erfc"), FLOAT)
erf_inv = unary("erf_inv", _special("erfinv"), FLOAT)
lgamma = unary("lgamma", _special("gammaln"), FLOAT)
digamma = unary("digamma", _digamma, FLOAT)
real = unary("real", np.real, "c", _real_of_complex)
imag = unary("imag", np.imag, "c", _real_of_complex)
square = unary("square", np.square, NUMBER)
copy_p = unary("copy", np.copy, ANY)

# Derivatives, as JAX defines them (jax/_src/lax/lax.py, special.py), reusing the output where
# JAX does: `out` is the primal result. At non-differentiable points: abs'(0) = 1, sqrt'(0) = inf.
_zero_derivative(sign, floor, ceil, round_, is_finite, not_, population_count, clz)
_deriv(neg, lambda g, x, out: E.neg(g))
_deriv(copy_p, lambda g, x, out: g)
_deriv(exp, lambda g, x, out: E.mul(g, out))
_deriv(exp2, lambda g, x, out: E.mul(E.mul(g, out), math.log(2)))
_deriv(log, lambda g, x, out: E.div(g, x))
_deriv(log1p, lambda g, x, out: E.div(g, E.add(x, 1)))
_deriv(expm1, lambda g, x, out: E.mul(g, E.add(out, 1)))
_deriv(tanh, lambda g, x, out: E.mul(E.add(g, E.mul(g, out)), E.sub(1, out)))
_deriv(logistic, lambda g, x, out: E.mul(g, E.mul(out, E.sub(1, out))))
_deriv(sin, lambda g, x, out: E.mul(g, E.cos(x)))
_deriv(cos, lambda g, x, out: E.neg(E.mul(g, E.sin(x))))
_deriv(tan, lambda g, x, out: E.mul(g, E.add(1, E.square(out))))
_deriv(asin, lambda g, x, out: E.mul(g, E.rsqrt(E.sub(1, E.square(x)))))
_deriv(acos, lambda g, x, out: E.mul(g, E.neg(E.rsqrt(E.sub(1, E.square(x))))))
_deriv(atan, lambda g, x, out: E.div(g, E.add(1, E.square(x))))
_deriv(sinh, lambda g, x, out: E.mul(g, E.cosh(x)))
_deriv(cosh, lambda g, x, out: E.mul(g, E.sinh(x)))
_deriv(asinh, lambda g, x, out: E.mul(g, E.rsqrt(E.add(E.square(x), 1))))
_deriv(acosh, lambda g, x, out: E.mul(g, E.rsqrt(E.sub(E.square(x), 1))))
_deriv(atanh, lambda g, x, out: E.mul(E.div(1, E.add(1, x)), E.div(g, E.sub(1, x))))
_deriv(sqrt, lambda g, x, out: E.mul(g, E.div(0.5, out)))
_deriv(rsqrt, lambda g, x, out: E.mul(g, E.mul(-0.5, E.div(out, x))))
_deriv(cbrt, lambda g, x, out: E.mul(g, E.mul(1 / 3, E.integer_pow(out, y=-2))))
_deriv(square, lambda g, x, out: E.mul(g, E.mul(2, x)))
_deriv(erf, lambda g, x, out: E.mul(E.mul(g, E.exp(E.neg(E.square(x)))), 2 / math.sqrt(math.pi)))
_deriv(erfc, lambda g, x, out: E.mul(E.mul(g, E.exp(E.neg(E.square(x)))), -2 / math.sqrt(math.pi)))
_deriv(erf_inv, lambda g, x, out: E.mul(E.mul(g, E.exp(E.square(out))), math.sqrt(math.pi) / 2))
_deriv(lgamma, lambda g, x, out: E.mul(g, E.digamma(x)))
_deriv(digamma, lambda g, x, out: E.mul(g, _trigamma(x)))


def _abs_jvp(primals, tangents, out):
    (x,), (t,) = primals, tangents
    if E.aval(x).dtype.kind != "c":
        return E.select(E.ge(x, 0), t, E.neg(t))
    return E.real(E.mul(t, _conj_over_abs(x, out)))


def _abs_vjp(ct, primals, out):
    (x,) = primals
    if E.aval(x).dtype.kind != "c":
        return [E.select(E.ge(x, 0), ct, E.neg(ct))]
    # real's transpose, then mul's
    return [E.mul(E.convert(ct, E.aval(x).dtype, False), _conj_over_abs(x, out))]


def _conj_over_abs(x, out):
    """conj(x) / |x| for complex x, 0 at 0 (JAX's abs JVP divides by |x| with 0 replaced by 1,
    |x| converted to x's dtype strongly typed, as JAX's convert_element_type does)."""
    r = E.convert(out, E.aval(x).dtype, False)
    return E.div(E.conj(x), E.select(E.eq(r, 0), 1, r))


JVP[abs_] = tangent_rule(_abs_jvp)
VJP[abs_] = cotangent_rule(_abs_vjp)

# real/imag/conj/complex transpose as JAX's: real -> complex(ct, 0), imag -> complex(0, -ct),
# with JAX's strongly typed zero (so the cotangent of a weak complex input is strong, as in JAX).
def _strong_zero(ct):
    return E.scalar(0, ShapedArray((), E.aval(ct).dtype))


_linear(real, lambda t, x: E.real(t), lambda ct, x: E.complex(ct, _strong_zero(ct)))
_linear(imag, lambda t, x: E.imag(t), lambda ct, x: E.complex(_strong_zero(ct), E.neg(ct)))


# digamma's derivative is trigamma, psi'(x), which kiln has no primitive for (JAX calls
# polygamma(1, x)): it is composed here from primitives, so it can be differentiated again.
_TRIGAMMA_SHIFT = 6
# B_2k, the Bernoulli numbers in psi'(z) ~ 1/z + 1/(2 z^2) + sum_k B_2k / z^(2k+1) (z -> inf).
_TRIGAMMA_SERIES = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)


def _trigamma(x):
    """psi'(x), to a few ulps: reflection psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x) below 1/2,
    the recurrence psi'(y) = 1/y^2 + psi'(y + 1) up to y + 6, then the asymptotic series."""
    reflect = E.lt(x, 0.5)
    y = E.select(reflect, E.sub(1, x), x)
    total = None
    for k in range(_TRIGAMMA_SHIFT):
        term = E.integer_pow(E.add(y, k), y=-2) if k else E.integer_pow(y, y=-2)
        total = term if total is None else E.add(total, term)
    z = E.add(y, _TRIGAMMA_SHIFT)
    r = E.div(1, z)
    w = E.square(r)
    series = E.mul(w, _TRIGAMMA_SERIES[-1])  # Horner in w = 1/z^2
    for b in reversed(_TRIGAMMA_SERIES[1:-1]):
        series = E.mul(w, E.add(series, b))
    series = E.add(series, _TRIGAMMA_SERIES[0])
    tail = E.add(r, E.mul(w, E.add(0.5, E.mul(r, series))))
    direct = E.add(total, tail)
    # The reflected branch sees 1/4 where it is not taken, so neither branch (nor its
    # derivative) produces infinities that a select would turn into NaN cotangents.
    xr = E.select(reflect, x, 0.25)
    s = E.sin(E.mul(E.sub(xr, E.round(xr)), math.pi))
    return E.select(reflect, E.sub(E.div(math.pi ** 2, E.square(s)), direct), direct)


def _integer_pow_eval(x, *, y):
    check_dtype_kinds("integer_pow", x, NUMBER, _KIND_TEXT[NUMBER])
    if not isinstance(y, int):
        raise TypeError(f"integer_pow: exponent must be a Python int, got {y!r}")
    if y < 0 and x.dtype.kind in "iu":
        raise TypeError(f"Integers cannot be raised to negative powers, got "
                        f"integer_pow({x.dtype}[{','.join(map(str, x.shape))}], {y})")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _integer_pow(x, *, y):
    # Repeated squaring, as XLA expands integer_pow: same rounding as the compiled code.
    if y == 0:
        return np.ones_like(x)
    base, acc, n = x, None, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else acc * base
        n >>= 1
        if n:
            base = base * base
    return (np.asarray(1, x.dtype) / acc).astype(x.dtype) if y < 0 else acc.astype(x.dtype)


integer_pow = register("integer_pow", _integer_pow_eval, _integer_pow)


def _integer_pow_partial(g, x, out, *, y):
    if y == 0:
        return None
    if y == 1:
        return g
    return E.mul(g, E.mul(y, x if y == 2 else E.integer_pow(x, y=y - 1)))


_deriv(integer_pow, _integer_pow_partial)


# ----------------------------------------------------------------------------- binary math

def _int_div(a, b):
    if a.dtype.kind not in "iu":
        return np.true_divide(a, b).astype(a.dtype)
    safe_b = np.where(b == 0, 1, b).astype(a.dtype)
    q = np.floor_divide(a, safe_b)
    if a.dtype.kind == "i":
        fix = (np.remainder(a, safe_b) != 0) & ((a < 0) != (safe_b < 0))
        q = q + fix.astype(a.dtype)
    return np.where(b == 0, np.asarray(-1).astype(a.dtype), q).astype(a.dtype)


def _rem(a, b):
    if a.dtype.kind not in "iu":
        return np.fmod(a, b)
    safe_b = np.where(b == 0, 1, b).astype(a.dtype)
    return np.where(b == 0, a, np.fmod(a, safe_b)).astype(a.dtype)


def _pow_eval(x, y):
    """JAX's rule: an inexact base; an exponent of the same dtype or of any integer dtype."""
    check_dtype_kinds("pow", x, INEXACT, _KIND_TEXT[INEXACT], position=0)
    check_dtype_kinds("pow", y, NUMBER, _KIND_TEXT[NUMBER], position=1)
    if x.dtype != y.dtype and y.dtype.kind not in "iu":
        raise TypeError("the first argument to pow must have an inexact dtype (float or "
                        "complex), and the second argument must have an inexact or integer "
                        "dtype, and two inexact dtypes must match, but got "
                        f"{x.dtype} and {y.dtype} respectively.")
    check_same_shapes("pow", (x, y))
    return ShapedArray(elementwise_shape((x, y)), x.dtype, x.weak_type and y.weak_type)


def _pow(a, b):
    b = b.astype(a.dtype, copy=False)
    if a.dtype.kind != "f":
        return np.power(a, b)
    # NumPy takes x ** 0.5 for sqrt(x) when the exponent is a scalar or broadcast, but
    # pow(-inf, 0.5) is inf and pow(-0.0, 0.5) is 0.0: the exponent goes in as a real array.
    shape = np.broadcast_shapes(a.shape, b.shape)
    a, b = (np.array(np.broadcast_to(v, shape), ndmin=1) for v in (a, b))
    if a.dtype.itemsize < 8:
        # NumPy's float32 power can be 1 ulp off; XLA's is correctly rounded (but for rare ties).
        out = np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    else:
        out = np.power(a, b)
    return out.reshape(shape)


def _atan2(y, x):
    if y.dtype.kind != "c":
        return np.arctan2(y, x)
    # The complex continuation XLA uses: -i log((x + iy) / sqrt(x^2 + y^2)).
    return (-1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y))).astype(y.dtype)


def _max(a, b):
    out = np.maximum(a, b)
    if a.dtype.kind == "f":  # XLA: max(-0.0, 0.0) is 0.0 on either side (NumPy picks b)
        out = np.where((a == b) & ~np.signbit(a), a, out)
    return out


def _min(a, b):
    out = np.minimum(a, b)
    if a.dtype.kind == "f":  # XLA: min(0.0, -0.0) is -0.0 on either side
        out = np.where((a == b) & np.signbit(a), a, out)
    return out


def _bits_of(dtype):
    return dtype.itemsize * 8


def _unsigned(dtype):
    return np.dtype(f"u{dtype.itemsize}")


def _shift_left(a, b):
    bits = _bits_of(a.dtype)
    u = a.view(_unsigned(a.dtype)) if a.dtype.kind == "i" else a
    s = b.astype(np.int64)
    out = np.where((s < 0) | (s >= bits), 0, u << np.clip(s, 0, bits - 1).astype(u.dtype))
    return out.astype(u.dtype).view(a.dtype)


def _shift_right_logical(a, b):
    bits = _bits_of(a.dtype)
    u = a.view(_unsigned(a.dtype))
    s = b.astype(np.int64)
    out = np.where((s < 0) | (s >= bits), 0, u >> np.clip(s, 0, bits - 1).astype(u.dtype))
    return out.astype(u.dtype).view(a.dtype)


def _shift_right_arithmetic(a, b):
    bits = _bits_of(a.dtype)
    signed = np.dtype(f"i{a.dtype.itemsize}")
    v = a.view(signed)
    s = np.clip(b.astype(np.int64), 0, bits - 1).astype(signed)
    s = np.where((b.astype(np.int64) < 0) | (b.astype(np.int64) >= bits), bits - 1, s).astype(signed)
    return (v >> s).astype(signed).view(a.dtype)


def _shift_eval(name):
    def abstract_eval(a, b):
        for i, x in enumerate((a, b)):
            check_dtype_kinds(name, x, INT, _KIND_TEXT[INT], position=i)
        check_same_dtypes(name, (a, b))
        check_same_shapes(name, (a, b))
        return ShapedArray(elementwise_shape((a, b)), a.dtype, a.weak_type and b.weak_type)
    return abstract_eval


def _bitwise(np_bool_fn, np_int_fn):
    def impl(a, b):
        return np_bool_fn(a, b) if a.dtype == np.bool_ else np_int_fn(a, b)
    return impl


def _nextafter(a, b):
    return np.nextafter(a, b)


_COMPLEX_OF = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128,
               dtypes.complex64: dtypes.complex64, dtypes.complex128: dtypes.complex128}


def _check_complex_part(name, aval, what, position=None):
    """complex/conj take float32/float64 (and conj complex) operands, as in JAX."""
    if aval.dtype not in _COMPLEX_OF or (what == _REAL_PARTS and aval.dtype.kind == "c"):
        at = "" if position is None else f" at position {position}"
        raise type_error(name, f"does not accept dtype {aval.dtype}{at}. Accepted dtypes{at} "
                               f"are subtypes of {what}.")


_REAL_PARTS = "float32, float64"


def _complex_eval(x, y):
    for i, a in enumerate((x, y)):
        _check_complex_part("complex", a, _REAL_PARTS, position=i)
    check_same_dtypes("complex", (x, y))
    check_same_shapes("complex", (x, y))
    return ShapedArray(elementwise_shape((x, y)), _COMPLEX_OF[x.dtype],
                       x.weak_type and y.weak_type)


def _complex(a, b):
    # Parts assigned, not a + 1j * b: that multiplies 0 by b, and complex(0, inf) is not NaN.
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), _COMPLEX_OF[a.dtype])
    out.real, out.imag = a, b
    return out


def _conj_eval(x):
    _check_complex_part("conj", x, "float32, complexfloating, float64")
    return ShapedArray(x.shape, _COMPLEX_OF[x.dtype], x.weak_type)


def _conj(x):
    return np.conj(x).astype(_COMPLEX_OF[x.dtype], copy=False)


add = nary("add", np.add, NUMBER)
sub = nary("sub", np.subtract, NUMBER)
mul = nary("mul", np.multiply, NUMBER)
div = nary("div", _int_div, NUMBER)
rem = nary("rem", _rem, REAL_NUMBER)
pow_ = register("pow", _pow_eval, _pow)
max_ = nary("max", _max, ANY)
min_ = nary("min", _min, ANY)
atan2 = nary("atan2", _atan2, INEXACT)
nextafter = nary("nextafter", _nextafter, FLOAT)
and_ = nary("and", _bitwise(np.logical_and, np.bitwise_and), INT_BOOL)
or_ = nary("or", _bitwise(np.logical_or, np.bitwise_or), INT_BOOL)
xor = nary("xor", _bitwise(np.logical_xor, np.bitwise_xor), INT_BOOL)
complex_ = register("complex", _complex_eval, _complex)
conj = register("conj", _conj_eval, _conj)
shift_left = register("shift_left", _shift_eval("shift_left"), _shift_left)
shift_right_logical = register("shift_right_logical", _shift_eval("shift_right_logical"),
                               _shift_right_logical)
shift_right_arithmetic = register("shift_right_arithmetic", _shift_eval("shift_right_arithmetic"),
                                  _shift_right_arithmetic)

eq = nary("eq", np.equal, ANY, _to_bool)
ne = nary("ne", np.not_equal, ANY, _to_bool)
lt = nary("lt", np.less, ORDERED, _to_bool)
le = nary("le", np.less_equal, ORDERED, _to_bool)
gt = nary("gt", np.greater, ORDERED, _to_bool)
ge = nary("ge", np.greater_equal, ORDERED, _to_bool)

_zero_derivative(and_, or_, xor, shift_left, shift_right_logical, shift_right_arithmetic,
                 eq, ne, lt, le, gt, ge)
_deriv(add, lambda g, x, y, out: g, lambda g, x, y, out: g)
_deriv(sub, lambda g, x, y, out: g, lambda g, x, y, out: E.neg(g))
_deriv(mul, lambda g, x, y, out: E.mul(g, y), lambda g, x, y, out: E.mul(x, g))
_deriv(div, lambda g, x, y, out: E.div(g, y),
       lambda g, x, y, out: E.mul(E.mul(E.neg(g), x), E.integer_pow(y, y=-2)))
# rem(x, y) = x - trunc(x / y) * y
_deriv(rem, lambda g, x, y, out: g, lambda g, x, y, out: E.mul(E.neg(g), _trunc(E.div(x, y))))
_deriv(atan2, lambda g, x, y, out: E.mul(g, E.div(y, E.add(E.square(x), E.square(y)))),
       lambda g, x, y, out: E.mul(g, E.div(E.neg(x), E.add(E.square(x), E.square(y)))))
# Ties give each side half (JAX's _balanced_eq); a NaN output gives neither anything.
_deriv(max_, lambda g, x, y, out: E.mul(g, _balanced_eq(x, out, y)),
       lambda g, x, y, out: E.mul(g, _balanced_eq(y, out, x)))
_deriv(min_, lambda g, x, y, out: E.mul(g, _balanced_eq(x, out, y)),
       lambda g, x, y, out: E.mul(g, _balanced_eq(y, out, x)))
# nextafter(x, y) is x moved by one ulp: JAX has no rule; kiln differentiates it as x.
_deriv(nextafter, lambda g, x, y, out: g, None)


def _trunc(q):
    return E.mul(E.sign(q), E.floor(E.abs(q)))


def _balanced_eq(x, out, y):
    """1 where x is the result, 1/2 where y is too, else 0 (weakly typed like the result, as
    JAX's ones and zeros like it are)."""
    a = E.aval(out)
    return E.div(E.convert(E.eq(x, out), a.dtype, a.weak_type),
                 E.add(E.convert(E.eq(y, out), a.dtype, a.weak_type), 1))


def _pow_dbase(g, x, y, out):
    """y x^(y-1); 0 where an integer exponent is 0 (so d/dx x^0 = 0 at x = 0, as in JAX)."""
    if E.aval(y).dtype.kind in "iu":
        yf = E.convert(y, E.aval(x).dtype)
        return E.mul(g, E.select(E.eq(y, 0), 0, E.mul(_replace_zero(yf), E.pow_(x, E.sub(yf, 1)))))
    return E.mul(g, E.mul(y, E.pow_(x, E.sub(y, 1))))


def _replace_zero(x):
    return E.select(E.eq(x, 0), 1, x)


# d/dy x^y = log(x) x^y, taken as 0 at x = 0 (JAX's convention).
_deriv(pow_, _pow_dbase, lambda g, x, y, out: E.mul(g, E.mul(E.log(_replace_zero(x)), out)))


def _complex_jvp(primals, tangents, out):
    parts = [E.scalar(0, E.aval(x)) if t is None else t for x, t in zip(primals, tangents)]
    return E.broadcast_to(E.complex(*parts), E.aval(out).shape)


def _complex_vjp(ct, primals, out):
    x, y = primals
    return [_unbroadcast(E.real(ct), x), _unbroadcast(E.neg(E.imag(ct)), y)]


JVP[complex_] = tangent_rule(_complex_jvp)
VJP[complex_] = cotangent_rule(_complex_vjp)
# conj's transpose: conj for a complex operand, the real part for a real one.
_linear(conj, lambda t, x: E.conj(t),
        lambda ct, x: E.conj(ct) if E.aval(x).dtype.kind == "c" else E.real(ct))


# ------------------------------------------------------------------------- fused multiply-add

def _two_sum(a, b):
    """(s, e) with s = fl(a + b) and s + e == a + b exactly (Knuth), barring overflow."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _add_round_to_odd(a, b):
    """a + b rounded to odd (finite operands): exact when representable, else the neighbour
    whose last bit is odd (truncate towards zero, then set the last bit)."""
    s, e = _two_sum(a, b)
    inexact = e != 0
    towards_zero = inexact & ((s < 0) != (e < 0))
    int_t = np.dtype(f"i{s.dtype.itemsize}")
    bits = s.view(int_t) - towards_zero.astype(int_t)
    return (bits | inexact.astype(int_t)).view(s.dtype)


def _fma_via_f64(a, b, c):
    """float16/float32: the product is exact in float64 (48 <= 53 bits), and a float64 sum
    rounded to odd, then rounded to the operands' type, is rounded once (53 >= 24 + 2 bits)."""
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = c.astype(np.float64)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(p) & np.isfinite(c64)
        odd = _add_round_to_odd(np.where(finite, p, 0.0), np.where(finite, c64, 0.0))
        return np.where(finite, odd, p + c64).astype(a.dtype)


_VELTKAMP = float(2 ** 27 + 1)  # splits a float64 into two 26-bit halves


def _split(x):
    t = _VELTKAMP * x
    hi = t - (t - x)
    return hi, x - hi


def _fma_f64(a, b, c):
    """float64: Dekker's exact product, an exact sum and a sum rounded to odd (Boldo and
    Melquiond's emulated FMA) where no step can overflow or lose bits to underflow; a zero
    operand needs no emulation; the few other elements (huge or tiny magnitudes, infinities,
    NaN) are computed exactly with rationals."""
    a, b, c = np.broadcast_arrays(a, b, c)
    with np.errstate(all="ignore"):
        p = a * b
        (ah, al), (bh, bl) = _split(a), _split(b)
        pe = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        h, t = _two_sum(c, p)
        out = h + _add_round_to_odd(t, pe)
        big, tiny = 2.0 ** 990, 2.0 ** -960
        safe = ((np.abs(a) < big) & (np.abs(b) < big) & (np.abs(c) < big) & (np.abs(p) < big)
                & (np.abs(p) > tiny) & (np.abs(out) > tiny))
        zero_product = (a == 0) | (b == 0)
        out = np.where(zero_product, p + c, np.where(c == 0, p, out))
    rest = ~(safe | zero_product | (c == 0))
    if rest.any():
        out[rest] = _fma_rationals(a[rest], b[rest], c[rest])
    return out


def _fma_scalar(a, b, c):
    """a * b + c rounded once, for Python floats, through exact rationals."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c
    if not math.isfinite(c):
        return c
    exact = fractions.Fraction(a) * fractions.Fraction(b) + fractions.Fraction(c)
    if exact == 0:  # nonzero a * b cancelled by c: +0
        return 0.0
    try:
        return float(exact)  # correctly rounded
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


_fma_rationals = np.frompyfunc(_fma_scalar, 3, 1)


def _fma(a, b, c):
    """IEEE fusedMultiplyAdd: a * b + c with a single rounding."""
    return _fma_f64(a, b, c) if a.dtype == np.float64 else _fma_via_f64(a, b, c)


# a * b + c rounded once. Private: JAX's lax has no fused multiply-add, but XLA's CPU compiler
# contracts a multiply feeding an add into one, and `kiln.random` reproduces JAX's bits with it.
fma = nary("fma", _fma, FLOAT, arity=3)
_deriv(fma, lambda g, a, b, c, out: E.mul(g, b), lambda g, a, b, c, out: E.mul(a, g),
       lambda g, a, b, c, out: g)


# ------------------------------------------------------------------- select_n and clamp

def _select_n_eval(which, *cases):
    if not cases:
        raise TypeError("select must have at least one case")
    shapes = {c.shape for c in cases if c.shape}  # rank-0 cases broadcast, as kiln's
    if len(shapes) > 1:                             # elementwise primitives do
        raise TypeError("select cases must have the same shapes, got ["
                        + ", ".join(str(c.shape) for c in cases) + "].")
    shape = elementwise_shape(cases)
    if which.shape and which.shape != shape:
        raise TypeError(f"select `which` must be scalar or have the same shape as cases, got "
                        f"`which` shape {which.shape} but case shape {shape}.")
    check_same_dtypes("select_n", cases)
    if which.dtype.kind not in "biu":
        raise TypeError(f"select `which` must be boolean or integer type, got {which.dtype}.")
    if which.dtype == dtypes.bool_ and len(cases) > 2:
        raise TypeError("select with boolean `which` cannot have > 2 cases.")
    return ShapedArray(shape, cases[0].dtype, all(c.weak_type for c in cases))


def _select_n(which, *cases):
    if len(cases) == 1:
        return cases[0]
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0])
    # Out-of-range indices pick the nearest case (XLA leaves them undefined). np.choose is
    # limited to 32 cases, so index a stack instead.
    cases = np.broadcast_arrays(*cases)
    idx = np.broadcast_to(np.clip(which, 0, len(cases) - 1), cases[0].shape).astype(np.intp)
    return np.take_along_axis(np.stack(cases), idx[None], 0)[0]


select_n = register("select_n", _select_n_eval, _select_n)


def _select_n_jvp(primals, tangents, out):
    shape = E.aval(out).shape
    zero = E.scalar(0, E.aval(next(t for t in tangents if t is not None)))  # JAX's zeros
    return E.select_n(primals[0], *[zero if t is None else E.broadcast_to(t, shape)
                                    for t in tangents[1:]])


def _select_n_vjp(ct, primals, out):
    """Each case gets the cotangent where it was chosen (JAX's transpose); selecting with the
    same `which` keeps out-of-range indices on the case the forward pass took."""
    which, cases = primals[0], primals[1:]
    zero = E.zeros_like(ct) if E.aval(ct).dtype.kind == "O" else E.scalar(0, E.aval(ct))
    return [None] + [
        _unbroadcast(E.select_n(which, *[ct if j == i else zero for j in range(len(cases))]), c)
        if _takes_ct(c) else None for i, c in enumerate(cases)]


JVP[select_n] = tangent_rule(_select_n_jvp)
VJP[select_n] = cotangent_rule(_select_n_vjp)


def _clamp_eval(lo, x, hi):
    for name, bound in (("min", lo), ("max", hi)):
        if bound.shape and bound.shape != x.shape:
            raise TypeError(f"clamp requires {name}.shape == operand.shape or {name}.shape == "
                            f"(), got {name}.shape={bound.shape}, operand.shape={x.shape}.")
    check_same_dtypes("clamp", (lo, x, hi))
    return ShapedArray(x.shape, x.dtype, lo.weak_type and x.weak_type and hi.weak_type)


clamp = register("clamp", _clamp_eval, lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi))
# JAX's convention: at a bound (x == lo or x == hi) no operand gets the derivative.
_deriv(clamp, lambda g, lo, x, hi, out: E.select(E.and_(E.gt(lo, x), E.lt(lo, hi)), g, 0),
       lambda g, lo, x, hi, out: E.select(E.and_(E.gt(x, lo), E.lt(x, hi)), g, 0),
       lambda g, lo, x, hi, out: E.select(E.lt(hi, x), g, 0))


# -------------------------------------------------------------------------- conversions

def _convert_eval(x, *, new_dtype, weak_type=False):
    return ShapedArray(x.shape, new_dtype, weak_type)


def _convert(x, *, new_dtype, weak_type=False):
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        x = np.real(x)  # as XLA, also for bool: 1j converts to False
    if new_dtype == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and new_dtype.kind in "iu":
        # XLA: NaN -> 0, out-of-range values saturate.
        info = np.iinfo(new_dtype)
        with np.errstate(all="ignore"):
            y = np.where(np.isnan(x), 0, np.clip(np.trunc(x), info.min, info.max))
            return np.where(y >= float(info.max), info.max,
                            np.where(y <= float(info.min), info.min,
                                     y.astype(new_dtype))).astype(new_dtype)
    return x.astype(new_dtype)


convert_element_type = register("convert_element_type", _convert_eval, _convert)


def _convert_jvp(primals, tangents, out, *, new_dtype, weak_type=False):
    """Converting to an integer or bool type ends the derivative; complex -> real keeps the
    real part of the tangent, real -> complex makes it complex (as the conversion does)."""
    if not E.is_float(E.aval(out)):
        return None
    return E.convert(tangents[0], new_dtype, weak_type)


def _convert_vjp(ct, primals, out, *, new_dtype, weak_type=False):
    (x,) = primals
    if not (_takes_ct(x) and E.is_float(E.aval(out))):
        return [None]
    return [E.cast_like(ct, x)]


JVP[convert_element_type] = tangent_rule(_convert_jvp)
VJP[convert_element_type] = cotangent_rule(_convert_vjp)


def _bitcast_eval(x, *, new_dtype):
    new_dtype = np.dtype(new_dtype)
    if x.dtype != new_dtype and {"b", "c"} & {x.dtype.kind, new_dtype.kind}:
        raise TypeError(f"lax.bitcast_convert_type does not support bool or complex values "
                        f"unless the operand and destination types match. Got operand "
                        f"dtype={x.dtype}, new_dtype={new_dtype!r}. Consider using the "
                        f"arr.view() method instead.")
    a, b = x.dtype.itemsize * 8, new_dtype.itemsize * 8
    if a == b:
        shape = x.shape
    elif a > b:
        shape = x.shape + (a // b,)
    else:
        last = x.shape[-1] if x.shape else 1
        if last * a != b:
            raise ValueError(f"Attempting to convert array of shape {x.shape} from {x.dtype} "
                             f"of size {a} bits to {new_dtype} of size {b}, bits but "
                             f"{last} * {a} != {b}")
        shape = x.shape[:-1]
    return ShapedArray(shape, new_dtype, False)


def _bitcast(x, *, new_dtype):
    a, b = x.dtype.itemsize, new_dtype.itemsize
    x = np.ascontiguousarray(x).reshape(x.shape)  # ascontiguousarray makes 0-d arrays 1-d
    if a == b:
        return x.view(new_dtype)
    if a > b:  # view a trailing unit axis: NumPy cannot change the itemsize of a 0-d array
        return x.reshape(x.shape + (1,)).view(new_dtype)
    return x.view(new_dtype).reshape(x.shape[:-1])


bitcast_convert_type = register("bitcast_convert_type", _bitcast_eval, _bitcast)
_zero_derivative(bitcast_convert_type)


def _bitcast_batch(args, dims, *, new_dtype):
    """The batch axis first: a changed item size only adds or removes the last axis."""
    x = B.moveaxis(args[0], dims[0], 0)
    return E.bitcast_convert_type(x, new_dtype=new_dtype), 0


BATCH[bitcast_convert_type] = _bitcast_batch


# Every primitive of this family (registered first of all families); all but bitcasts batch
# alike.
from .core import PRIMITIVES as _ALL  # noqa: E402
NAMES = tuple(_ALL)
BATCH[select_n] = B.elementwise_rule(select_n, scalar_positions=(0,))
BATCH[clamp] = B.elementwise_rule(clamp, scalar_positions=(0, 2))
for _name in NAMES:
    if _ALL[_name] not in BATCH:
        BATCH[_ALL[_name]] = B.elementwise_rule(_ALL[_name])
