"""The implementation of `kiln.scipy.stats.norm`: its public names (`__all__`, re-exported there)
and the helpers they use. `kiln.scipy.stats.norm`'s docstring describes them."""
import numpy as np

from ... import lax
from ... import numpy as jnp
from ...array import to_array
from ...numpy._core import promote_args_inexact
from .. import special
from .._special import _const

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "ppf", "sf", "logsf", "isf"]

_LOG_2PI = 2 * np.pi


def logpdf(x, loc=0, scale=1):
    """Log of the normal density at `x`."""
    x, loc, scale = promote_args_inexact("norm.logpdf", x, loc, scale)
    scale_sqrd = lax.square(scale)
    log_normalizer = lax.log(lax.mul(_const(x, _LOG_2PI), scale_sqrd))
    quadratic = lax.div(lax.square(lax.sub(x, loc)), scale_sqrd)
    return lax.div(lax.add(log_normalizer, quadratic), _const(x, -2))


def pdf(x, loc=0, scale=1):
    """The normal density at `x`."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    x, loc, scale = promote_args_inexact("norm.cdf", x, loc, scale)
    return special.ndtr(lax.div(lax.sub(x, loc), scale))


def logcdf(x, loc=0, scale=1):
    """log P(X <= x), accurate in the left tail."""
    x, loc, scale = promote_args_inexact("norm.logcdf", x, loc, scale)
    return special.log_ndtr(lax.div(lax.sub(x, loc), scale))


def ppf(q, loc=0, scale=1):
    """The quantile function (inverse of `cdf`)."""
    return jnp.asarray(special.ndtri(q) * scale + loc, float)


def logsf(x, loc=0, scale=1):
    """log P(X > x), accurate in the right tail."""
    x, loc, scale = promote_args_inexact("norm.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def sf(x, loc=0, scale=1):
    """The survival function P(X > x)."""
    x, loc, scale = promote_args_inexact("norm.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def isf(q, loc=0, scale=1):
    """The inverse survival function."""
    q = to_array(q, "norm.isf")
    return ppf(lax.sub(_const(q, 1), q), loc, scale)
