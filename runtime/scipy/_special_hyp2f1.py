"""`kiln.scipy.special.hyp2f1`: the Gauss hypergeometric function 2F1(a, b; c; x), real
arguments, by JAX's algorithm (Pearson, Olver and Porter 2014), so its special cases are JAX's:

- 1 where x == 0, or a or b is 0 (c not 0); inf where c is a non-positive integer, where x > 1,
  and at x == 1 when c - a - b <= 0; Gauss's Gamma-function value at x == 1 otherwise;
  (1 - x)**-a where b == c and (1 - x)**-b where a == c (x < 1);
- Euler's transformation (1 - x)**(c - a - b) 2F1(c - a, c - b; c; x) where c - a - b <= -1;
- otherwise the Taylor series (at most 250 terms, to float precision), the terminating
  polynomial where a or b is a non-positive integer, and for 0.9 < x < 1 with c - a - b an
  integer the digamma series of Abramowitz and Stegun 15.3.10-12.

One addition: for x < -1/2 (where JAX's series converges slowly, and diverges below -1) kiln
applies Pfaff's transformation 2F1(a, b; c; x) = (1 - x)**-a 2F1(a, c - b; c; x / (x - 1))
first, with a terminating parameter in front when there is one. Each loop is a
`lax.while_loop` over the whole array that stops when every element has converged; an element
stops adding terms when it has.
"""
import numpy as np

from .. import lax
from .. import numpy as jnp
from ..numpy._core import promote_args_inexact
from ._special import _reject_complex, digamma, gamma

__all__ = ["hyp2f1"]

_TERMS = 250


def _eps(x):
    return jnp.finfo(x.dtype).eps


def _near_integer(v, eps):
    return lax.abs(v - lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN)) < eps


def _masked_loop(active, body, state):
    """Run `body(state) -> (state, active)` while any element is active; inactive elements keep
    their state."""
    def step(carry):
        state, active = carry
        new, still = body(state)
        kept = tuple(jnp.where(active, n, o) for n, o in zip(new, state))
        return kept, active & still

    return lax.while_loop(lambda carry: jnp.any(carry[1]), step, (state, active))[0]


def _series(a, b, c, x, active):
    """The Taylor series, to float precision or 250 terms."""
    rtol = _eps(x)

    def body(state):
        total, k, term = state
        total = total + term
        term = term * (a + k - 1) * (b + k - 1) / (c + k - 1) / k * x
        k = k + 1
        return (total, k, term), (k < _TERMS) & (lax.abs(term) > rtol * lax.abs(total))
    zero, one = jnp.zeros_like(x), jnp.ones_like(x)
    return _masked_loop(active, body, (zero, one, one))[0]


def _terminal(a, b, c, x, active):
    """The polynomial of a non-positive integer a or b (the one of larger magnitude, unless
    c is a non-positive integer it would pass)."""
    ib = lax.round(b, lax.RoundingMethod.TO_NEAREST_EVEN)
    c_pole = (c % 1 == 0) & (c <= 0) & (c > b)
    swap = (b < a) & (lax.abs(b - ib) < 50 * _eps(x)) & ~c_pole
    a, b = jnp.where(swap, b, a), jnp.where(swap, a, b)
    n = jnp.where(active, lax.abs(a), 0)

    def body(state):
        total, term, i = state
        term = term * -(n - i + 1) / (c + i - 1) * (b + i - 1) / i * x
        return (total + term, term, i + 1), i + 1 <= n
    one = jnp.ones_like(x)
    return _masked_loop(active & (n >= 1), body, (one, one, one))[0]


def _digamma_sum(a, b, c, x, active):
    """2F1 for x near 1 with c - a - b an integer (Abramowitz and Stegun 15.3.10-12)."""
    rtol = _eps(x)
    d = c - a - b
    s = 1 - x
    rd = lax.round(d, lax.RoundingMethod.TO_NEAREST_EVEN)
    up = rd >= 0
    e = jnp.where(up, d, -d)
    d1, d2 = jnp.where(up, d, 0), jnp.where(up, 0, d)
    ard = jnp.where(active, lax.abs(rd), 0)
    log_s = lax.log(jnp.where(active, s, 1))
    y = (digamma(jnp.ones_like(x)) + digamma(1 + e) - digamma(a + d1) - digamma(b + d1)
         - log_s) / gamma(e + 1)
    p = (a + d1) * (b + d1) * s / gamma(e + 2)

    def body(state):
        y, p, q, t = state
        r = digamma(1 + t) + digamma(1 + t + e) - digamma(a + t + d1) - digamma(b + t + d1) \
            - log_s
        q = p * r
        y = y + q
        p = p * s * (a + t + d1) / (t + 1) * (b + t + d1) / (t + 1 + e)
        t = t + 1
        return (y, p, q, t), (t < _TERMS) & (lax.abs(q) >= rtol * lax.abs(y))
    y = _masked_loop(active, body, (y, p, y, jnp.ones_like(x)))[0]

    def finite_body(state):
        y1, p, t = state
        p = p * s * (a + t + d2) * (b + t + d2) / (1 - e + t)
        t = t + 1
        return (y1 + p / t, p / t, t), t + 1 < ard
    one = jnp.ones_like(x)
    y1 = _masked_loop(active & (ard > 1), finite_body, (one, one, jnp.zeros_like(x)))[0]
    gc = gamma(c)
    y1 = y1 * gamma(e) * gc / (gamma(a + d1) * gamma(b + d1))
    y2 = y * gc / (gamma(a + d2) * gamma(b + d2))
    y2 = jnp.where(ard % 2 == 1, -y2, y2)
    q = s ** rd
    mixed = jnp.where(rd > 0, y2 * q + y1, y2 + y1 * q)
    return jnp.where(rd == 0, y * gc / (gamma(a) * gamma(b)), mixed)


def _terminal_or_series(a, b, c, x, active):
    """JAX's choice among the series, the digamma sum and the polynomial."""
    eps = 50 * _eps(x)
    d = c - a - b
    neg_int = ((a <= 0) & _near_integer(a, eps)) | ((b <= 0) & _near_integer(b, eps))
    near_one = (x > 0.9) & ~neg_int
    digamma_sum = near_one & _near_integer(d, eps)
    polynomial = ~near_one & neg_int
    plain = active & ~digamma_sum & ~polynomial
    x_near = jnp.where(digamma_sum, x, 0.95)
    return jnp.where(digamma_sum, _digamma_sum(a, b, c, x_near, active & digamma_sum),
                     jnp.where(polynomial, _terminal(a, b, c, x, active & polynomial),
                               _series(a, b, c, x, plain)))


def _pfaff_or_direct(a, b, c, x, active):
    """2F1 for x < 1 by the series family, through Pfaff's transformation where x < -1/2."""
    eps = 50 * _eps(x)
    pfaff = x < -0.5
    b_ends = (b <= 0) & _near_integer(b, eps) & ~((a <= 0) & _near_integer(a, eps))
    first, second = jnp.where(b_ends, b, a), jnp.where(b_ends, a, b)
    x_direct = jnp.where(pfaff, 0, x)
    x_pfaff = jnp.where(pfaff, x, -1)
    direct = _terminal_or_series(a, b, c, x_direct, active & ~pfaff)
    z = x_pfaff / (x_pfaff - 1)
    transformed = (1 - x_pfaff) ** -first * _terminal_or_series(first, c - second, c, z,
                                                                active & pfaff)
    return jnp.where(pfaff, transformed, direct)


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function 2F1(a, b; c; x) for real arguments (JAX's algorithm;
    see the module docstring)."""
    a, b, c, x = promote_args_inexact("hyp2f1", a, b, c, x)
    _reject_complex("hyp2f1", a)
    a, b, c, x = jnp.broadcast_arrays(a, b, c, x)
    eps = 50 * _eps(x)
    d = c - a - b
    s = 1 - x
    ca, cb = c - a, c - b
    one = (x == 0) | (((a == 0) | (b == 0)) & (c != 0))
    pole = (c == 0) | ((c < 0) & (c % 1 == 0))
    euler = (d <= -1) & ~(~_near_integer(d, eps) & (s < 0))
    inf_at_one = (d <= 0) & (x == 1)
    power_a, power_b = (x < 1) & (b == c), (x < 1) & (a == c)
    branch = jnp.select(
        [one, pole, euler, inf_at_one, power_a, power_b, x > 1, x == 1],
        [0, 1, 2, 1, 3, 4, 1, 5], 6)
    below_one = (branch == 2) | (branch == 6)
    x_series = jnp.where(below_one, x, 0.5)
    s_series = 1 - x_series
    series = _pfaff_or_direct(jnp.where(branch == 2, ca, a), jnp.where(branch == 2, cb, b), c,
                              x_series, below_one)
    series = jnp.where(branch == 2, s_series ** d * series, series)
    s_power = jnp.where((branch == 3) | (branch == 4), s, 1)
    power = s_power ** -jnp.where(branch == 3, a, b)
    d_gauss = jnp.where(branch == 5, d, 1)
    gauss = gamma(c) * gamma(d_gauss) / (gamma(ca) * gamma(cb))
    values = [jnp.ones_like(x), jnp.full_like(x, np.inf), series, power, power, gauss, series]
    return lax.select_n(branch, *values)
