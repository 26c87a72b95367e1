"""`kiln.lax`'s special functions: JAX's lax names over the one implementation each has in
`kiln.scipy.special` (and `kiln.random`'s gamma-draw derivative), with lax's operand rules:
floating operands of one dtype (a weakly typed scalar takes the other operand's dtype), no
promotion, rank-0 operands broadcast.

- igamma / igammac: `gammainc` / `gammaincc`; igamma_grad_a: dP(a, x)/da, the gamma draws'
  implicit derivative times dP/dx; random_gamma_grad: dx/da of a Gamma(a) draw x at fixed
  CDF (`kiln.random.gamma`'s reparameterisation derivative).
- betainc, zeta (Hurwitz), bessel_i0e, bessel_i1e: the scipy functions; polygamma(m, x) with
  m of x's float dtype (NaN where m is not a non-negative whole number).

Derivatives: kiln differentiates through these functions' series and continued fractions
(JAX's lax rules differentiate igamma in a with igamma_grad_a; the values agree to the
series' accuracy)."""
from ..array import to_array
from ._ops import (_broadcast_ones, convert_element_type, eq, exp, full_like, lgamma, log, mul,
                   neg, select, sub)

__all__ = ["bessel_i0e", "bessel_i1e", "betainc", "igamma", "igamma_grad_a", "igammac",
           "polygamma", "random_gamma_grad", "zeta"]


def _floats(name, *xs):
    """lax's rule: every operand floating, all of one dtype (weak scalars take it)."""
    arrs = [to_array(x, f"lax.{name}") for x in xs]
    strong = [a.dtype for a in arrs if not a.weak_type]
    target = strong[0] if strong else arrs[0].dtype
    arrs = [convert_element_type(a, target) if a.weak_type and a.dtype.kind == target.kind
            else a for a in arrs]
    for i, a in enumerate(arrs):
        if a.dtype.kind != "f":
            where = "" if len(arrs) == 1 else f" at position {i}"
            raise TypeError(f"{name} does not accept dtype {a.dtype}{where}. Accepted dtypes"
                            f"{where} are subtypes of floating.")
    if len({a.dtype for a in arrs}) > 1:
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{', '.join(str(a.dtype) for a in arrs)}.")
    return _broadcast_ones(name, arrs)


def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    from ..scipy.special import gammainc
    return gammainc(*_floats("igamma", a, x))


def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    from ..scipy.special import gammaincc
    return gammaincc(*_floats("igammac", a, x))


def random_gamma_grad(a, x):
    """dx/da for a Gamma(a, 1) draw x, holding its CDF value P(a, x) fixed."""
    from .._random import gamma_sample_grad
    return gamma_sample_grad(*_floats("random_gamma_grad", a, x))


def igamma_grad_a(a, x):
    """dP(a, x)/da: -(dx/da at fixed P) * dP/dx, with dP/dx = x**(a-1) exp(-x) / Gamma(a)."""
    from .._random import gamma_sample_grad
    a, x = _floats("igamma_grad_a", a, x)
    one, zero = full_like(a, 1), full_like(a, 0)
    density = exp(sub(sub(mul(sub(a, one), log(x)), x), lgamma(a)))
    return select(eq(x, zero), zero, mul(neg(gamma_sample_grad(a, x)), density))  # 0 at x = 0


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    from ..scipy.special import betainc as scipy_betainc
    return scipy_betainc(*_floats("betainc", a, b, x))


def zeta(x, q):
    """The Hurwitz zeta function sum((k + q)**-x)."""
    from ..scipy.special import zeta as scipy_zeta
    return scipy_zeta(*_floats("zeta", x, q))


def polygamma(m, x):
    """The m-th derivative of digamma; `m` has x's floating dtype, as in JAX's lax."""
    from ..scipy._special_series import polygamma_of_float
    return polygamma_of_float(*_floats("polygamma", m, x))


def bessel_i0e(x):
    """exp(-|x|) I_0(x)."""
    from ..scipy.special import i0e
    return i0e(*_floats("bessel_i0e", x))


def bessel_i1e(x):
    """exp(-|x|) I_1(x)."""
    from ..scipy.special import i1e
    return i1e(*_floats("bessel_i1e", x))
