"""The implementation of `kiln.scipy.stats.gumbel_r` and `gumbel_l`, the right- and
left-skewed Gumbel (extreme value) distributions, with JAX's methods and conventions: each
function is `<distribution>_<method>`, re-exported as `<method>` by the distribution's module.

On the standardised `z = (x - loc) / scale`, gumbel_r has log density `-z - exp(-z)` and
log cdf `-exp(-z)`; gumbel_l is its mirror image, `z - exp(z)` and log sf `-exp(z)`. Every
method but `ppf` is NaN where `scale <= 0`; `ppf` is NaN outside `0 < p < 1` (the end points
included, as in JAX, where SciPy gives infinities).
"""
import numpy as np

from ... import lax
from ... import numpy as jnp
from ...nn import log1mexp
from ...numpy._core import promote_args_inexact
from ..special import xlog1py, xlogy


def _z(name, x, loc, scale):
    x, loc, scale = promote_args_inexact(name, x, loc, scale)
    return (x - loc) / scale, scale


def _scaled(scale, value):
    return jnp.where(scale > 0, value, np.nan)


def _quantile(name, p, loc, scale, standard):
    p, loc, scale = promote_args_inexact(name, p, loc, scale)
    return jnp.where((p > 0) & (p < 1), loc + scale * standard(p), np.nan)


# ----------------------------------------------------------------------------- gumbel_r

def gumbel_r_logpdf(x, loc=0, scale=1):
    z, scale = _z("gumbel_r.logpdf", x, loc, scale)
    return _scaled(scale, xlogy(-1, scale) - (z + lax.exp(-z)))


def gumbel_r_pdf(x, loc=0, scale=1):
    return lax.exp(gumbel_r_logpdf(x, loc, scale))


def gumbel_r_logcdf(x, loc=0, scale=1):
    z, scale = _z("gumbel_r.logcdf", x, loc, scale)
    return _scaled(scale, -lax.exp(-z))


def gumbel_r_cdf(x, loc=0, scale=1):
    return lax.exp(gumbel_r_logcdf(x, loc, scale))


def gumbel_r_sf(x, loc=0, scale=1):
    z, scale = _z("gumbel_r.sf", x, loc, scale)
    return _scaled(scale, 1 - lax.exp(-lax.exp(-z)))


def gumbel_r_logsf(x, loc=0, scale=1):
    z, scale = _z("gumbel_r.logsf", x, loc, scale)
    return _scaled(scale, log1mexp(lax.exp(-z)))


def gumbel_r_ppf(p, loc=0, scale=1):
    return _quantile("gumbel_r.ppf", p, loc, scale, lambda p: -lax.log(xlogy(-1, p)))


# ----------------------------------------------------------------------------- gumbel_l

def gumbel_l_logpdf(x, loc=0, scale=1):
    z, scale = _z("gumbel_l.logpdf", x, loc, scale)
    return _scaled(scale, xlogy(-1, scale) + (z - lax.exp(z)))


def gumbel_l_pdf(x, loc=0, scale=1):
    return lax.exp(gumbel_l_logpdf(x, loc, scale))


def gumbel_l_logcdf(x, loc=0, scale=1):
    z, scale = _z("gumbel_l.logcdf", x, loc, scale)
    return _scaled(scale, lax.log(-lax.expm1(-lax.exp(z))))


def gumbel_l_cdf(x, loc=0, scale=1):
    return lax.exp(gumbel_l_logcdf(x, loc, scale))


def gumbel_l_logsf(x, loc=0, scale=1):
    z, scale = _z("gumbel_l.logsf", x, loc, scale)
    return _scaled(scale, -lax.exp(z))


def gumbel_l_sf(x, loc=0, scale=1):
    return lax.exp(gumbel_l_logsf(x, loc, scale))


def gumbel_l_ppf(p, loc=0, scale=1):
    return _quantile("gumbel_l.ppf", p, loc, scale, lambda p: lax.log(xlog1py(-1, -p)))
