"""erf_inv and digamma as straight-line LLVM IR (the C library has neither).

Both are evaluated in double precision and rounded to the operand's type, branch-free (selects
only), so that a loop around them can vectorise once the functions they call have vector
versions.

erf_inv(y): by symmetry on a = |y|. A first guess from Giles' single-precision approximation
(M. Giles, "Approximating the erfinv function", GPU Computing Gems, 2011), then two Newton
steps on erf(x) = a, using erfc(x) = 1 - a where a > 1/2 so that the tail keeps its relative
accuracy. a = 1 gives inf, a > 1 or NaN gives NaN.

digamma(x): the reflection psi(x) = psi(1 - x) - pi / tan(pi x) below 1/2 (with the argument
reduced exactly, x - round(x), before the tangent), the recurrence psi(y) = psi(y + n) -
sum_{k<n} 1/(y + k) up to y + 10, and the asymptotic series
    psi(z) ~ log z - 1/(2z) - sum_k B_2k / (2k z^2k)
at z >= 10.5. NaN at 0, -1, -2, ... (the reference's convention).
"""
import math as _m

import llvmlite.ir as ir

from .calls import intrinsic, c_function

DOUBLE = ir.DoubleType()

# Giles' approximation: erfinv(a) ~ a * p(w), w = -log((1 - a)(1 + a)), a polynomial in
# w - 2.5 for w < 5 and in sqrt(w) - 3 beyond (coefficients from the paper, highest first).
_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
            -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
         -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)

_DIGAMMA_SHIFT = 10
# B_2k / (2k) for k = 1..7: psi(z) ~ log z - 1/(2z) - sum_k c_k z^(-2k).
_DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)


class _F:
    """Double-precision arithmetic on llvmlite values, to keep the formulas readable."""

    def __init__(self, builder):
        self.b = builder

    def c(self, v):
        return ir.Constant(DOUBLE, float(v))

    def add(self, x, y):
        return self.b.fadd(x, y)

    def sub(self, x, y):
        return self.b.fsub(x, y)

    def mul(self, x, y):
        return self.b.fmul(x, y)

    def div(self, x, y):
        return self.b.fdiv(x, y)

    def lt(self, x, y):
        return self.b.fcmp_ordered("<", x, y)

    def le(self, x, y):
        return self.b.fcmp_ordered("<=", x, y)

    def eq(self, x, y):
        return self.b.fcmp_ordered("==", x, y)

    def sel(self, cond, x, y):
        return self.b.select(cond, x, y)

    def call(self, name, *args):
        if name in ("log", "exp", "sqrt", "fabs", "copysign", "round", "floor"):
            return intrinsic(self.b, name, list(args))
        return c_function(self.b, name, list(args), DOUBLE)

    def horner(self, coefficients, w):
        p = self.c(coefficients[0])
        for k in coefficients[1:]:
            p = self.add(self.mul(p, w), self.c(k))
        return p


def _in_double(builder, x, fn):
    if isinstance(x.type, ir.DoubleType):
        return fn(_F(builder), x)
    return builder.fptrunc(fn(_F(builder), builder.fpext(x, DOUBLE)), x.type)


def erf_inv(builder, y):
    return _in_double(builder, y, _erf_inv)


def _erf_inv(f, y):
    a = f.call("fabs", y)
    w = f.call("log", f.mul(f.sub(f.c(1), a), f.add(f.c(1), a)))
    w = f.sub(f.c(0), w)
    central = f.horner(_CENTRAL, f.sub(w, f.c(2.5)))
    tail = f.horner(_TAIL, f.sub(f.call("sqrt", w), f.c(3)))
    x = f.mul(a, f.sel(f.lt(w, f.c(5)), central, tail))
    upper = f.lt(f.c(0.5), a)
    one_minus_a = f.sub(f.c(1), a)
    slope = f.c(2 / _m.sqrt(_m.pi))
    for _ in range(2):
        residual = f.sel(upper, f.sub(one_minus_a, f.call("erfc", x)),
                         f.sub(f.call("erf", x), a))
        x = f.sub(x, f.div(residual, f.mul(slope, f.call("exp", f.sub(f.c(0), f.mul(x, x))))))
    x = f.sel(f.eq(a, f.c(1)), f.c(_m.inf), x)
    x = f.sel(f.le(a, f.c(1)), x, f.c(_m.nan))      # a > 1 or NaN
    x = f.sel(f.eq(a, f.c(0)), f.c(0), x)
    return f.call("copysign", x, y)


def digamma(builder, x):
    return _in_double(builder, x, _digamma)


def _digamma(f, x):
    reflect = f.lt(x, f.c(0.5))
    y = f.sel(reflect, f.sub(f.c(1), x), x)
    shift = None
    for k in range(_DIGAMMA_SHIFT):
        term = f.div(f.c(1), f.add(y, f.c(k)) if k else y)
        shift = term if shift is None else f.add(shift, term)
    z = f.add(y, f.c(_DIGAMMA_SHIFT))
    r2 = f.div(f.c(1), f.mul(z, z))
    series = f.mul(r2, f.horner(tuple(reversed(_DIGAMMA_SERIES)), r2))
    psi = f.sub(f.sub(f.sub(f.call("log", z), f.div(f.c(0.5), z)), series), shift)
    reduced = f.sub(x, f.call("round", x))
    cot = f.div(f.c(_m.pi), f.call("tan", f.mul(reduced, f.c(_m.pi))))
    out = f.sel(reflect, f.sub(psi, cot), psi)
    pole = f.b.and_(f.le(x, f.c(0)), f.eq(x, f.call("floor", x)))
    return f.sel(pole, f.c(_m.nan), out)
