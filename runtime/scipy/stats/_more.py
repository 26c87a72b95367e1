"""The implementation of `kiln.scipy.stats`' gennorm, multinomial, truncnorm, vonmises,
wrapcauchy and betabinom, with JAX's methods and conventions: each function is
`<distribution>_<method>`, re-exported as `<method>` by the distribution's module.

- gennorm (standard, shape `beta`): log density `log(beta / 2) - lgamma(1 / beta) - |x|^beta`;
  cdf `(1 + sign(x) P(1 / beta, |x|^beta)) / 2` with `P` the regularised lower incomplete gamma.
- multinomial: `lgamma(n + 1) + sum(xlogy(x, p) - lgamma(x + 1))` over the last axis, -inf
  unless the counts (all of them, as JAX sums them) add up to `n`; `x` and `n` must be integers.
- truncnorm (normal with `loc`, `scale`, truncated to standardised `[a, b]`): the normal density
  over the mass of `[a, b]`, computed in the tail it lies in (or as 1 minus both tails when it
  straddles 0) to keep precision; logcdf switches to `log1p(-sf)` near 1; NaN where `a >= b`.
- vonmises: `kappa (cos x - 1) - log(2 pi i0e(kappa))`, NaN for `kappa <= 0`.
- wrapcauchy: `log(1 - c^2) - log(2 pi) - log(1 + c^2 - 2 c cos x)` on `[0, 2 pi]`, -inf
  outside, NaN unless `0 < c < 1`.
- betabinom: `-log1p(n) - betaln(n - y + 1, y + 1) + betaln(y + a, n - y + b) - betaln(a, b)`
  at `y = floor(k) - loc`, with JAX's support conditions (NaN for `n < 0`, `a <= 0` or
  `b <= 0`).
"""
import numpy as np

from ... import lax
from ... import numpy as jnp
from ...numpy._core import promote_args_inexact, promote_args_numeric
from .. import special
from . import _norm

# ------------------------------------------------------------------------------ gennorm


def gennorm_logpdf(x, beta):
    x, beta = promote_args_inexact("gennorm.logpdf", x, beta)
    return lax.log(0.5 * beta) - lax.lgamma(1 / beta) - lax.abs(x) ** beta


def gennorm_pdf(x, beta):
    return lax.exp(gennorm_logpdf(x, beta))


def gennorm_cdf(x, beta):
    x, beta = promote_args_inexact("gennorm.cdf", x, beta)
    return 0.5 * (1 + lax.sign(x) * lax.igamma(1 / beta, lax.abs(x) ** beta))


# -------------------------------------------------------------------------- multinomial

def multinomial_logpmf(x, n, p):
    p, = promote_args_inexact("multinomial.logpmf", p)
    x, n = promote_args_numeric("multinomial.logpmf", x, n)
    if not jnp.issubdtype(x.dtype, np.integer):
        raise ValueError("x and n must be of integer type; got "
                         f"x.dtype={x.dtype}, n.dtype={n.dtype}")
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    value = special.gammaln(n + 1) + jnp.sum(special.xlogy(x, p) - special.gammaln(x + 1),
                                             axis=-1)
    return jnp.where(jnp.sum(x) == n, value, -np.inf)


def multinomial_pmf(x, n, p):
    return lax.exp(multinomial_logpmf(x, n, p))


# ---------------------------------------------------------------------------- truncnorm

def _log_sub(log_x, log_y):
    """log(exp(log_x) - exp(log_y))."""
    return special.logsumexp(jnp.stack([log_x, log_y]), axis=0,
                             b=jnp.stack([jnp.ones_like(log_x), -jnp.ones_like(log_y)]))


def _log_mass(a, b):
    """log of the standard normal's mass on [a, b]."""
    a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
    right = a > 0                      # both in the right tail: mirror into the left one
    left_end, right_end = jnp.where(right, -b, a), jnp.where(right, -a, b)
    tail = _log_sub(special.log_ndtr(right_end), special.log_ndtr(left_end))
    central = lax.log1p(-special.ndtr(a) - special.ndtr(-b))
    return jnp.where(~((b <= 0) | right), central, tail)


def truncnorm_logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logpdf", x, a, b, loc, scale)
    value = _norm.logpdf(x, loc, scale) - _log_mass(a, b)
    z = (x - loc) / scale
    value = jnp.where((z < a) | (z > b), -np.inf, value)
    return jnp.where(a >= b, np.nan, value)


def truncnorm_pdf(x, a, b, loc=0, scale=1):
    return lax.exp(truncnorm_logpdf(x, a, b, loc, scale))


def truncnorm_logcdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logcdf", x, a, b, loc, scale)
    x, a, b = jnp.broadcast_arrays(x, a, b)
    z = (x - loc) / scale
    total = _log_mass(a, b)
    below, above = _log_mass(a, z) - total, _log_mass(z, b) - total
    value = jnp.select([z >= b, z <= a, below > -0.1, z > a],
                       [0, -np.inf, lax.log1p(-lax.exp(above)), below])
    return jnp.where(a >= b, np.nan, value)


def truncnorm_cdf(x, a, b, loc=0, scale=1):
    return lax.exp(truncnorm_logcdf(x, a, b, loc, scale))


def truncnorm_logsf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logsf", x, a, b, loc, scale)
    return truncnorm_logcdf(-x, -b, -a, -loc, scale)


def truncnorm_sf(x, a, b, loc=0, scale=1):
    return lax.exp(truncnorm_logsf(x, a, b, loc, scale))


# ------------------------------------------------------------------- vonmises, wrapcauchy

def vonmises_logpdf(x, kappa):
    x, kappa = promote_args_inexact("vonmises.logpdf", x, kappa)
    value = kappa * (jnp.cos(x) - 1) - jnp.log(2 * np.pi * lax.bessel_i0e(kappa))
    return jnp.where(kappa > 0, value, np.nan)


def vonmises_pdf(x, kappa):
    return lax.exp(vonmises_logpdf(x, kappa))


def wrapcauchy_logpdf(x, c):
    x, c = promote_args_inexact("wrapcauchy.logpdf", x, c)
    value = (jnp.log(1 - c * c) - jnp.log(2 * np.pi)
             - jnp.log(1 + c * c - 2 * c * jnp.cos(x)))
    value = jnp.where((x >= 0) & (x <= 2 * np.pi), value, -np.inf)
    return jnp.where((c > 0) & (c < 1), value, np.nan)


def wrapcauchy_pdf(x, c):
    return lax.exp(wrapcauchy_logpdf(x, c))


# ---------------------------------------------------------------------------- betabinom

def betabinom_logpmf(k, n, a, b, loc=0):
    k, n, a, b, loc = promote_args_inexact("betabinom.logpmf", k, n, a, b, loc)
    y = lax.floor(k) - loc
    log_comb = -(lax.log1p(n) + special.betaln(n - y + 1, y + 1))
    value = log_comb + special.betaln(y + a, n - y + b) - special.betaln(a, b)
    value = jnp.where((y == 0) & (n == 0), 0.0, value)
    value = jnp.where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, value)
    return jnp.where((n < 0) | (a <= 0) | (b <= 0), np.nan, value)


def betabinom_pmf(k, n, a, b, loc=0):
    return lax.exp(betabinom_logpmf(k, n, a, b, loc))
