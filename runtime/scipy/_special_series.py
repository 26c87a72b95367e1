"""`kiln.scipy.special`'s functions computed by series and continued fractions: gammainc,
gammaincc, betainc, zeta, polygamma, expn, exp1, expi, i0e, i1e, i0, i1, dawsn, spence.

Each runs a fixed number of terms (a `lax.fori_loop` where many are needed, so that `jit`
compiles a loop, not an unrolled sum) and picks between its branches with `jnp.where`, feeding
each branch a harmless argument where the other is chosen, so that derivatives stay finite
(reverse mode differentiates through the loops):
- gammainc/gammaincc: the power series of P(a, x) for x < a + 1, Lentz's continued fraction
  for Q(a, x) otherwise (each function computes its own side, so both tails are accurate).
- betainc: the continued fraction of I_x(a, b), with the symmetry I_x(a, b) = 1 - I_{1-x}(b, a)
  for x > (a + 1) / (a + b + 2).
- betainc and zeta (so polygamma too) compute float16 arguments in float32, as XLA does.
- zeta (Hurwitz): ten direct terms, then Euler-Maclaurin with Bernoulli numbers, as Cephes;
  polygamma(n, x) = (-1)**(n+1) n! zeta(n + 1, x), digamma for n == 0.
- expn/exp1: the series with digamma(n) for x <= 1, the continued fraction for x > 1;
  expi: the series `gamma + log|x| + sum(x**k / (k k!))` for 0 < x <= 40, the asymptotic
  series beyond, and -exp1(-x) for x < 0.
- i0e/i1e: the power series for |x| <= 20, Hankel's asymptotic series beyond.
- dawsn: `exp(-x**2) sum(x**(2k+1) / (k! (2k+1)))` for |x| <= 5, the asymptotic series beyond.
- spence(x) = Li2(1 - x): the series `sum(z**k / k**2)` on |z| <= 1/2, reached through
  Euler's reflection (0 <= x < 1/2) and Landen's identity, then the reflection (x > 3/2).
"""
import math

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..numpy._core import promote_args_inexact
from ._special import _reject_complex, _typed
from ._special_closed import EULER_MACLAURIN

__all__ = ["gammainc", "gammaincc", "betainc", "zeta", "polygamma", "expn", "exp1", "expi",
           "i0e", "i1e", "i0", "i1", "dawsn", "spence"]

_TERMS = 300          # loop length of the series and continued fractions below
_EULER_GAMMA = 0.5772156649015329


def _broadcast(*xs):
    return jnp.broadcast_arrays(*xs)


def _tiny_guard(v, tiny):
    """Lentz's guard: a denominator that vanished becomes `tiny`."""
    return jnp.where(lax.abs(v) < tiny, tiny, v)


def _f(i, like):
    """The loop index as a float of `like`'s dtype."""
    return lax.convert_element_type(i, like.dtype)


# ---------------------------------------------------------------- incomplete gamma

def _gamma_series(a, x):
    """P(a, x) by its power series (x > 0)."""
    def body(i, carry):
        term, total = carry
        term = term * x / (a + _f(i, a))
        return term, total + term
    first = 1 / a
    _, total = lax.fori_loop(1, _TERMS, body, (first, first))
    return total * lax.exp(a * lax.log(x) - x - lax.lgamma(a))


def _gamma_fraction(a, x):
    """Q(a, x) by Lentz's continued fraction (x > 0)."""
    tiny = _typed(np.finfo(a.dtype).tiny * 16, a.dtype)
    b = x + 1 - a
    d = 1 / _tiny_guard(b, tiny)

    def body(i, carry):
        b, c, d, h = carry
        fi = _f(i, a)
        an = -fi * (fi - a)
        b = b + 2
        d = 1 / _tiny_guard(an * d + b, tiny)
        c = _tiny_guard(b + an / c, tiny)
        return b, c, d, h * d * c
    _, _, _, h = lax.fori_loop(1, _TERMS, body, (b, 1 / tiny + 0 * b, d, d))
    return h * lax.exp(a * lax.log(x) - x - lax.lgamma(a))


def _incomplete_gamma(name, a, x, lower):
    a, x = promote_args_inexact(name, a, x)
    _reject_complex(name, a)
    a, x = _broadcast(a, x)
    series = x < a + 1
    xs = jnp.where(series, x, 1)
    xf = jnp.where(series, a + 2, x)
    xs = jnp.where(xs > 0, xs, 1)
    xf = jnp.where(xf > 0, xf, 1)
    a_ok = jnp.where(a > 0, a, 1)
    p = _gamma_series(a_ok, xs)
    q = _gamma_fraction(a_ok, xf)
    value = jnp.where(series, p, 1 - q) if lower else jnp.where(series, 1 - p, q)
    at_zero, at_inf = (0, 1) if lower else (1, 0)
    value = jnp.where(x == 0, at_zero,
                      jnp.where((x == np.inf) | (a == 0), at_inf, value))
    bad = (a < 0) | ((a == 0) & (x == 0)) | (a == np.inf) | (x < 0) | jnp.isnan(a) | jnp.isnan(x)
    return jnp.where(bad, np.nan, value)


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    return _incomplete_gamma("gammainc", a, x, True)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return _incomplete_gamma("gammaincc", a, x, False)


def _in_float32(fn, *args):
    """`fn(*args)`, computed in float32 and rounded back for float16 arguments (as XLA's
    kernels for these functions do): float16's range would end the sums early in NaN."""
    if args[0].dtype != np.float16:
        return fn(*args)
    return fn(*(v.astype(np.float32) for v in args)).astype(np.float16)


# ---------------------------------------------------------------- incomplete beta

def _beta_fraction(a, b, x):
    tiny = _typed(np.finfo(a.dtype).tiny * 16, a.dtype)
    qab, qap, qam = a + b, a + 1, a - 1
    d = 1 / _tiny_guard(1 - qab * x / qap, tiny)

    def body(m, carry):
        c, d, h = carry
        fm = _f(m, a)
        m2 = 2 * fm
        aa = fm * (b - fm) * x / ((qam + m2) * (a + m2))
        d = 1 / _tiny_guard(1 + aa * d, tiny)
        c = _tiny_guard(1 + aa / c, tiny)
        h = h * d * c
        aa = -(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2))
        d = 1 / _tiny_guard(1 + aa * d, tiny)
        c = _tiny_guard(1 + aa / c, tiny)
        return c, d, h * d * c
    _, _, h = lax.fori_loop(1, _TERMS, body, (jnp.ones_like(d), d, d))
    log_front = a * lax.log(x) + b * lax.log1p(-x) \
        - (lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b))
    return lax.exp(log_front) * h / a


def betainc(a, b, x):
    """The regularized incomplete Beta function I_x(a, b)."""
    a, b, x = promote_args_inexact("betainc", a, b, x)
    _reject_complex("betainc", a)
    return _in_float32(_betainc, *_broadcast(a, b, x))


def _betainc(a, b, x):
    inside = (x > 0) & (x < 1)
    flip = x > (a + 1) / (a + b + 2)
    x_in = jnp.where(inside, x, 0.5)
    a_ok, b_ok = jnp.where(a > 0, a, 1), jnp.where(b > 0, b, 1)
    direct = _beta_fraction(jnp.where(flip, b_ok, a_ok), jnp.where(flip, a_ok, b_ok),
                            jnp.where(flip, 1 - x_in, x_in))
    value = jnp.where(flip, 1 - direct, direct)
    value = jnp.where(x == 0, 0, jnp.where(x == 1, 1, value))
    bad = (a <= 0) | (b <= 0) | (x < 0) | (x > 1) | jnp.isnan(a) | jnp.isnan(b) | jnp.isnan(x)
    return jnp.where(bad, np.nan, value)


# ---------------------------------------------------------------- zeta and polygamma

def _hurwitz(s, q):
    """Hurwitz zeta for s > 1, q > 0 (Euler-Maclaurin after ten terms)."""
    total = jnp.zeros_like(s)
    for k in range(10):
        total = total + (q + k) ** -s
    w = q + 9
    b = w ** -s
    total = total + b * w / (s - 1) - _typed(0.5, s.dtype) * b
    a = jnp.ones_like(s)
    k = 0.0
    for coeff in EULER_MACLAURIN[:12]:
        a = a * (s + k)
        b = b / w
        total = total + a * b / _typed(coeff, s.dtype)
        k += 1
        a = a * (s + k)
        b = b / w
        k += 1
    return total


def zeta(x, q=None):
    """The Hurwitz zeta function sum((k + q)**-x), the Riemann zeta function when q is None
    (q defaults to 1). inf at x == 1 and at q = 0, -1, -2, ...; for q < 0 and a whole x, the
    series' first terms, (q + k)**-x for k < ceil(-q), added to zeta(x, q + ceil(-q)) (as
    SciPy and JAX); NaN for x < 1 and for q < 0 with x not whole."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to "
                                  "compute the Hurwitz Zeta function.")
    x, q = promote_args_inexact("zeta", x, q)
    _reject_complex("zeta", x)
    return _in_float32(_zeta, *_broadcast(x, q))


def _zeta(x, q):
    shifted = (x > 1) & (x == lax.floor(x)) & (q < 0) & (q != lax.floor(q))
    steps = jnp.where(shifted, lax.ceil(-q), 0)
    ok = ((x > 1) & (q > 0)) | shifted
    value = _hurwitz(jnp.where(ok, x, 2), jnp.where(ok, q + steps, 1))
    value = value + _leading_terms(jnp.where(shifted, x, 2), q, steps)
    pole = (x == 1) | ((x > 1) & (q <= 0) & (q == lax.floor(q)))
    return jnp.where(pole, np.inf, jnp.where(ok, value, np.nan))


def _leading_terms(x, q, steps):
    """sum over k < steps of (q + k)**-x (x whole, so a negative base is fine)."""
    def body(carry):
        k, total = carry
        return k + 1, total + jnp.where(k < steps, jnp.power(q + k, -x), 0)
    start = (jnp.zeros((), q.dtype), jnp.zeros_like(q))
    return lax.while_loop(lambda c: c[0] < jnp.max(steps, initial=0), body, start)[1]


def polygamma(n, x):
    """The n-th derivative of digamma (`n` of an integer dtype, as in JAX)."""
    n_dtype = jnp.result_type(n)
    if not jnp.issubdtype(n_dtype, jnp.integer):
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype "
                         f"{n_dtype}.")
    n, x = promote_args_inexact("polygamma", n, x)
    _reject_complex("polygamma", x)
    return polygamma_of_float(*_broadcast(n, x))


def polygamma_of_float(n, x):
    """polygamma for `n` already of x's float dtype and shape (`lax.polygamma`'s form): NaN
    where n is negative or not a whole number."""
    higher = n > 0
    n_ok = jnp.where(higher, n, 1)
    sign = jnp.where(lax.rem(n_ok, _typed(2, n.dtype)) == 0, -1, 1).astype(x.dtype)
    value = sign * lax.exp(lax.lgamma(n_ok + 1)) * zeta(n_ok + 1, x)
    bad = (n < 0) | (n != lax.floor(n))
    return jnp.where(bad, np.nan, jnp.where(higher, value, lax.digamma(x)))


# ---------------------------------------------------------------- exponential integrals

def _expn_series(n, x):
    """E_n(x) for 0 < x <= 1 (n >= 1): the series with the digamma term at k == n - 1."""
    nm1 = n - 1
    first = jnp.where(nm1 != 0, 1 / jnp.where(nm1 != 0, nm1, 1), -lax.log(x) - _EULER_GAMMA)
    psi = lax.digamma(n)

    def body(i, carry):
        fact, total = carry
        fi = _f(i, x)
        fact = fact * -x / fi
        at_pole = fi == nm1
        term = jnp.where(at_pole, fact * (psi - lax.log(x)), -fact / jnp.where(at_pole, 1,
                                                                                fi - nm1))
        return fact, total + term
    _, total = lax.fori_loop(1, 60, body, (jnp.ones_like(x), first))
    return total


def _expn_fraction(n, x):
    """E_n(x) for x > 1 by Lentz's continued fraction."""
    tiny = _typed(np.finfo(x.dtype).tiny * 16, x.dtype)
    b = x + n
    d = 1 / b

    def body(i, carry):
        b, c, d, h = carry
        fi = _f(i, x)
        an = -fi * (nm1 + fi)
        b = b + 2
        d = 1 / _tiny_guard(an * d + b, tiny)
        c = _tiny_guard(b + an / c, tiny)
        return b, c, d, h * d * c
    nm1 = n - 1
    _, _, _, h = lax.fori_loop(1, 200, body, (b, 1 / tiny + 0 * b, d, d))
    return h * lax.exp(-x)


def expn(n, x):
    """The generalized exponential integral E_n(x) = int_1^inf exp(-x t) / t**n dt."""
    n, x = promote_args_inexact("expn", n, x)
    _reject_complex("expn", x)
    n, x = _broadcast(n, x)
    return _expn(n, x)


def _expn(n, x):
    small = x <= 1
    n_ok = jnp.where(n >= 1, n, 1)
    xs = jnp.where(small & (x > 0), x, 0.5)
    xf = jnp.where(small, 2, x)
    value = jnp.where(small, _expn_series(n_ok, xs), _expn_fraction(n_ok, xf))
    at_zero = jnp.where(n > 1, 1 / jnp.where(n > 1, n - 1, 1), np.inf)
    value = jnp.where(n == 0, lax.exp(-x) / x, value)
    value = jnp.where(x == 0, jnp.where(n == 0, np.inf, at_zero), value)
    value = jnp.where(x == np.inf, 0, value)
    bad = (n < 0) | (x < 0) | (n != lax.floor(n)) | jnp.isnan(x) | jnp.isnan(n)
    return jnp.where(bad, np.nan, value)


def exp1(x):
    """The exponential integral E_1(x) = int_1^inf exp(-x t) / t dt (x >= 0)."""
    x, = promote_args_inexact("exp1", x)
    _reject_complex("exp1", x)
    return _expn(jnp.ones_like(x), x)


_EI_SWITCH = 40.0


def expi(x):
    """The exponential integral Ei(x) = -E_1(-x) (principal value for x > 0)."""
    x, = promote_args_inexact("expi", x)
    _reject_complex("expi", x)
    neg = x < 0
    series = (x > 0) & (x <= _EI_SWITCH)
    xs = jnp.where(series, x, 1)

    def body(k, carry):
        term, total = carry
        fk = _f(k, xs)
        term = term * xs / fk
        return term, total + term / fk
    _, s = lax.fori_loop(1, 120, body, (jnp.ones_like(xs), jnp.zeros_like(xs)))
    by_series = _EULER_GAMMA + lax.log(xs) + s
    xa = jnp.where(x > _EI_SWITCH, x, 2 * _EI_SWITCH)
    tail = jnp.zeros_like(xa)
    for k in range(30, -1, -1):
        tail = tail * (k + 1) / xa + 1
    asymptotic = lax.exp(xa) / xa * tail
    value = jnp.where(series, by_series, asymptotic)
    value = jnp.where(neg, -_expn(jnp.ones_like(x), jnp.where(neg, -x, 1)), value)
    value = jnp.where(x == 0, -np.inf, value)
    return jnp.where(jnp.isnan(x), np.nan, value)


# ---------------------------------------------------------------- modified Bessel functions

_BESSEL_SWITCH = 20.0


def _bessel_ie(order, x):
    """exp(-|x|) I_order(|x|) for order 0 or 1."""
    a = lax.abs(x)
    big = a > _BESSEL_SWITCH
    small = jnp.where(big, 0, a)
    q = (small / 2) ** 2
    term = jnp.ones_like(small) if order == 0 else small / 2
    total = term
    for k in range(1, 70):
        term = term * q / (k * (k + order))
        total = total + term
    by_series = total * lax.exp(-small)
    large = jnp.where(big, a, 2 * _BESSEL_SWITCH)
    mu = 4 * order * order
    coeffs = [1.0]
    for k in range(1, 16):
        coeffs.append(coeffs[-1] * -(mu - (2 * k - 1) ** 2) / (k * 8))
    tail = jnp.zeros_like(large)
    for c in reversed(coeffs):
        tail = tail / large + c
    by_asymptotic = tail / lax.sqrt(2 * math.pi * large)
    return jnp.where(big, by_asymptotic, by_series)


def i0e(x):
    """The exponentially scaled modified Bessel function of order 0: exp(-|x|) I_0(x)."""
    x, = promote_args_inexact("i0e", x)
    _reject_complex("i0e", x)
    return _bessel_ie(0, x)


def i1e(x):
    """The exponentially scaled modified Bessel function of order 1: exp(-|x|) I_1(x)."""
    x, = promote_args_inexact("i1e", x)
    _reject_complex("i1e", x)
    return lax.sign(x) * _bessel_ie(1, x)


def i0(x):
    """The modified Bessel function of the first kind, order 0."""
    x, = promote_args_inexact("i0", x)
    _reject_complex("i0", x)
    return lax.exp(lax.abs(x)) * _bessel_ie(0, x)


def i1(x):
    """The modified Bessel function of the first kind, order 1."""
    x, = promote_args_inexact("i1", x)
    _reject_complex("i1", x)
    return lax.sign(x) * lax.exp(lax.abs(x)) * _bessel_ie(1, x)


# ---------------------------------------------------------------- Dawson

_DAWSON_SWITCH = 5.0


def dawsn(x):
    """Dawson's integral exp(-x**2) int_0^x exp(t**2) dt."""
    x, = promote_args_inexact("dawsn", x)
    _reject_complex("dawsn", x)
    big = lax.abs(x) > _DAWSON_SWITCH
    xs = jnp.where(big, 0, x)
    x2 = xs * xs
    power = xs
    total = xs
    for k in range(1, 90):
        power = power * x2 / k
        total = total + power / (2 * k + 1)
    by_series = lax.exp(-x2) * total
    xb = jnp.where(big, x, 2 * _DAWSON_SWITCH)
    inv = 1 / (2 * xb * xb)
    tail = jnp.zeros_like(xb)
    for k in range(20, 0, -1):
        tail = (tail + 1) * (2 * k - 1) * inv
    by_asymptotic = (1 + tail) / (2 * xb)
    return jnp.where(big, by_asymptotic, by_series)


# ---------------------------------------------------------------- Spence's function

_PI2_6 = math.pi ** 2 / 6


def _li2_series(z):
    """Li2(z) = sum(z**k / k**2) for |z| <= 1/2."""
    power = z
    total = z
    for k in range(2, 64):
        power = power * z
        total = total + power / (k * k)
    return total


def spence(x):
    """Spence's function int_1^x log(t) / (1 - t) dt = Li2(1 - x), for 0 <= x < inf."""
    x, = promote_args_inexact("spence", x)
    _reject_complex("spence", x)
    near_one = (x >= 0.5) & (x <= 1.5)
    small = x < 0.5
    mid = (x > 1.5) & (x <= 2)
    # 1/2 <= x <= 3/2: the series at z = 1 - x.
    direct = _li2_series(jnp.where(near_one, 1 - x, 0))
    # 0 <= x < 1/2: Li2(1 - x) = pi**2/6 - log(x) log(1 - x) - Li2(x).
    xs = jnp.where(small & (x > 0), x, 0.25)
    reflected = _PI2_6 - lax.log(xs) * lax.log1p(-xs) - _li2_series(xs)
    reflected = jnp.where(x == 0, _PI2_6, reflected)
    # x > 3/2: Li2(1 - x) = -Li2((x - 1) / x) - log(x)**2 / 2, and for x > 2
    # Li2((x - 1) / x) = pi**2/6 + log1p(-1/x) log(x) - Li2(1/x).
    xl = jnp.where(x > 1.5, x, 4)
    log_x = lax.log(xl)
    inner = jnp.where(mid, _li2_series(jnp.where(mid, (xl - 1) / xl, 0)),
                      _PI2_6 + lax.log1p(-1 / xl) * log_x - _li2_series(1 / xl))
    landen = -inner - log_x * log_x / 2
    value = jnp.where(near_one, direct, jnp.where(small, reflected, landen))
    return jnp.where((x < 0) | (x == np.inf) | jnp.isnan(x), np.nan, value)
