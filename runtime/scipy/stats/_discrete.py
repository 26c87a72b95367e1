"""The implementation of `kiln.scipy.stats`' discrete and multivariate distributions
(poisson, bernoulli, geom, binom, nbinom, multivariate_normal, dirichlet), as JAX has them:
each function is `<distribution>_<method>`, re-exported as `<method>` by the distribution's
module. Mass functions are -inf (mass 0) off the support, including at non-integer `k`."""
import numpy as np

from ... import lax
from ... import numpy as jnp
from ...numpy._core import check_arraylike, promote_args_inexact, promote_dtypes_inexact
from .. import special
from ..linalg import cholesky, solve_triangular

_NEG_INF = -np.inf


def _integer(k):
    return k == lax.floor(k)


# ----------------------------------------------------------------------------- poisson

def poisson_logpmf(k, mu, loc=0):
    k, mu, loc = promote_args_inexact("poisson.logpmf", k, mu, loc)
    k = k - loc
    value = special.xlogy(k, mu) - mu - lax.lgamma(k + 1)
    return jnp.where((k >= 0) & _integer(k), value, _NEG_INF)


def poisson_pmf(k, mu, loc=0):
    return lax.exp(poisson_logpmf(k, mu, loc))


def poisson_cdf(k, mu, loc=0):
    k, mu, loc = promote_args_inexact("poisson.cdf", k, mu, loc)
    k = k - loc
    return jnp.where(k >= 0, special.gammaincc(lax.floor(jnp.maximum(k, 0)) + 1, mu), 0)


# --------------------------------------------------------------------------- bernoulli

def bernoulli_logpmf(k, p, loc=0):
    k, p, loc = promote_args_inexact("bernoulli.logpmf", k, p, loc)
    k = k - loc
    return jnp.where(k == 0, lax.log1p(-p), jnp.where(k == 1, lax.log(p), _NEG_INF))


def bernoulli_pmf(k, p, loc=0):
    return lax.exp(bernoulli_logpmf(k, p, loc))


def bernoulli_cdf(k, p):
    k, p = promote_args_inexact("bernoulli.cdf", k, p)
    return jnp.where(k < 0, 0, jnp.where(k < 1, 1 - p, 1))


def bernoulli_ppf(q, p):
    q, p = promote_args_inexact("bernoulli.ppf", q, p)
    return jnp.where((q < 0) | (q > 1), np.nan, jnp.where(q <= 1 - p, 0, 1))


# -------------------------------------------------------------------------------- geom

def geom_logpmf(k, p, loc=0):
    k, p, loc = promote_args_inexact("geom.logpmf", k, p, loc)
    k = k - loc
    value = special.xlog1py(k - 1, -p) + lax.log(p)
    return jnp.where((k >= 1) & _integer(k), value, _NEG_INF)


def geom_pmf(k, p, loc=0):
    return lax.exp(geom_logpmf(k, p, loc))


# ------------------------------------------------------------------------ binom, nbinom

def binom_logpmf(k, n, p, loc=0):
    k, n, p, loc = promote_args_inexact("binom.logpmf", k, n, p, loc)
    k = k - loc
    log_comb = lax.lgamma(n + 1) - lax.lgamma(k + 1) - lax.lgamma(n - k + 1)
    value = log_comb + special.xlogy(k, p) + special.xlog1py(n - k, -p)
    return jnp.where((k >= 0) & (k <= n) & _integer(k), value, _NEG_INF)


def binom_pmf(k, n, p, loc=0):
    return lax.exp(binom_logpmf(k, n, p, loc))


def nbinom_logpmf(k, n, p, loc=0):
    k, n, p, loc = promote_args_inexact("nbinom.logpmf", k, n, p, loc)
    k = k - loc
    log_comb = lax.lgamma(k + n) - lax.lgamma(n) - lax.lgamma(k + 1)
    value = log_comb + n * lax.log(p) + special.xlog1py(k, -p)
    return jnp.where((k >= 0) & _integer(k), value, _NEG_INF)


def nbinom_pmf(k, n, p, loc=0):
    return lax.exp(nbinom_logpmf(k, n, p, loc))


# ---------------------------------------------------------------- multivariate normal

def multivariate_normal_logpdf(x, mean, cov, allow_singular=None):
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    check_arraylike("multivariate_normal.logpdf", x, mean, cov)
    x, mean, cov = promote_dtypes_inexact(x, mean, cov)
    log_2pi = np.log(2 * np.pi)
    if not mean.shape:
        return -0.5 * (x - mean) ** 2 / cov - 0.5 * (log_2pi + lax.log(cov))
    n = mean.shape[-1]
    y = x - mean
    if not cov.shape:
        return -0.5 * jnp.sum(y * y, -1) / cov - n / 2 * (log_2pi + lax.log(cov))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal.logpdf got incompatible shapes: mean "
                         f"{mean.shape}, cov {cov.shape}")
    chol = cholesky(cov, lower=True)
    batch = jnp.broadcast_shapes(y.shape[:-1], chol.shape[:-2])
    z = solve_triangular(jnp.broadcast_to(chol, batch + (n, n)),
                         jnp.broadcast_to(y, batch + (n,))[..., None], lower=True)[..., 0]
    log_det = jnp.sum(lax.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), -1)
    return -0.5 * jnp.sum(z * z, -1) - n / 2 * log_2pi - log_det


def multivariate_normal_pdf(x, mean, cov):
    return lax.exp(multivariate_normal_logpdf(x, mean, cov))


# --------------------------------------------------------------------------- dirichlet

def dirichlet_logpdf(x, alpha):
    check_arraylike("dirichlet.logpdf", x, alpha)
    x, alpha = promote_dtypes_inexact(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    if x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError(f"`x` must have either the same number of entries as `alpha` or one "
                         f"entry fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
    if x.shape[0] != alpha.shape[0]:
        x = jnp.concatenate([x, (1 - jnp.sum(x, 0))[None]], 0)
    a = alpha.reshape(alpha.shape + (1,) * (x.ndim - 1))
    normalizer = jnp.sum(lax.lgamma(alpha)) - lax.lgamma(jnp.sum(alpha))
    value = jnp.sum(special.xlogy(a - 1, x), 0) - normalizer
    on_simplex = jnp.all(x >= 0, 0) & (lax.abs(jnp.sum(x, 0) - 1) < 1e-5)
    return jnp.where(on_simplex, value, _NEG_INF)


def dirichlet_pdf(x, alpha):
    return lax.exp(dirichlet_logpdf(x, alpha))
