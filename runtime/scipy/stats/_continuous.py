"""The implementation of `kiln.scipy.stats`' univariate continuous distributions beyond `norm`
(expon, laplace, logistic, cauchy, uniform, t, chi2, gamma, beta, pareto), as JAX has them:
each function is `<distribution>_<method>`, re-exported as `<method>` by the distribution's
module. Densities are written on the standardised `y = (x - loc) / scale` and shifted by
`-log(scale)`; CDFs of the gamma and beta families are `kiln.scipy.special`'s `gammainc`,
`gammaincc` and `betainc`."""
import numpy as np

from ... import lax
from ... import numpy as jnp
from ...numpy._core import promote_args_inexact
from .. import special

_NEG_INF = -np.inf


def _std(name, x, *params, loc=0, scale=1):
    """The arguments promoted together, and y = (x - loc) / scale."""
    x, *params, loc, scale = promote_args_inexact(name, x, *params, loc, scale)
    return (x - loc) / scale, params, loc, scale


# ------------------------------------------------------------------------------- expon

def expon_logpdf(x, loc=0, scale=1):
    y, _, _, scale = _std("expon.logpdf", x, loc=loc, scale=scale)
    return jnp.where(y < 0, _NEG_INF, -y - lax.log(scale))


def expon_pdf(x, loc=0, scale=1):
    return lax.exp(expon_logpdf(x, loc, scale))


def expon_cdf(x, loc=0, scale=1):
    y, _, _, _ = _std("expon.cdf", x, loc=loc, scale=scale)
    return jnp.where(y < 0, 0, -lax.expm1(-y))


def expon_logcdf(x, loc=0, scale=1):
    y, _, _, _ = _std("expon.logcdf", x, loc=loc, scale=scale)
    return jnp.where(y < 0, _NEG_INF, lax.log(-lax.expm1(-jnp.maximum(y, 0))))


def expon_sf(x, loc=0, scale=1):
    return lax.exp(expon_logsf(x, loc, scale))


def expon_logsf(x, loc=0, scale=1):
    y, _, _, _ = _std("expon.logsf", x, loc=loc, scale=scale)
    return jnp.where(y < 0, 0, -y)


def expon_ppf(q, loc=0, scale=1):
    q, loc, scale = promote_args_inexact("expon.ppf", q, loc, scale)
    ok = (q >= 0) & (q <= 1)
    return jnp.where(ok, -lax.log1p(-q) * scale + loc, np.nan)


# ----------------------------------------------------------------------------- laplace

def laplace_logpdf(x, loc=0, scale=1):
    y, _, _, scale = _std("laplace.logpdf", x, loc=loc, scale=scale)
    return -lax.log(2 * scale) - lax.abs(y)


def laplace_pdf(x, loc=0, scale=1):
    return lax.exp(laplace_logpdf(x, loc, scale))


def laplace_cdf(x, loc=0, scale=1):
    y, _, _, _ = _std("laplace.cdf", x, loc=loc, scale=scale)
    half = 0.5 * lax.exp(-lax.abs(y))
    return jnp.where(y < 0, half, 1 - half)


# ---------------------------------------------------------------------------- logistic

def logistic_logpdf(x, loc=0, scale=1):
    y, _, _, scale = _std("logistic.logpdf", x, loc=loc, scale=scale)
    a = lax.abs(y)
    return -a - 2 * lax.log1p(lax.exp(-a)) - lax.log(scale)


def logistic_pdf(x, loc=0, scale=1):
    return lax.exp(logistic_logpdf(x, loc, scale))


def logistic_cdf(x, loc=0, scale=1):
    y, _, _, _ = _std("logistic.cdf", x, loc=loc, scale=scale)
    return lax.logistic(y)


def logistic_sf(x, loc=0, scale=1):
    y, _, _, _ = _std("logistic.sf", x, loc=loc, scale=scale)
    return lax.logistic(-y)


def logistic_ppf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("logistic.ppf", x, loc, scale)
    return special.logit(x) * scale + loc


def logistic_isf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("logistic.isf", x, loc, scale)
    return -special.logit(x) * scale + loc


# ------------------------------------------------------------------------------ cauchy

def cauchy_logpdf(x, loc=0, scale=1):
    y, _, _, scale = _std("cauchy.logpdf", x, loc=loc, scale=scale)
    return -lax.log(np.pi * scale) - lax.log1p(y * y)


def cauchy_pdf(x, loc=0, scale=1):
    return lax.exp(cauchy_logpdf(x, loc, scale))


def cauchy_cdf(x, loc=0, scale=1):
    y, _, _, _ = _std("cauchy.cdf", x, loc=loc, scale=scale)
    return 0.5 + lax.atan(y) / np.pi


def cauchy_logcdf(x, loc=0, scale=1):
    return lax.log(cauchy_cdf(x, loc, scale))


def cauchy_sf(x, loc=0, scale=1):
    y, _, _, _ = _std("cauchy.sf", x, loc=loc, scale=scale)
    return 0.5 - lax.atan(y) / np.pi


def cauchy_logsf(x, loc=0, scale=1):
    return lax.log(cauchy_sf(x, loc, scale))


def cauchy_ppf(q, loc=0, scale=1):
    q, loc, scale = promote_args_inexact("cauchy.ppf", q, loc, scale)
    ok = (q >= 0) & (q <= 1)
    return jnp.where(ok, loc + scale * lax.tan(np.pi * (q - 0.5)), np.nan)


def cauchy_isf(q, loc=0, scale=1):
    q, loc, scale = promote_args_inexact("cauchy.isf", q, loc, scale)
    ok = (q >= 0) & (q <= 1)
    return jnp.where(ok, loc + scale * lax.tan(np.pi * (0.5 - q)), np.nan)


# ----------------------------------------------------------------------------- uniform

def uniform_logpdf(x, loc=0, scale=1):
    y, _, _, scale = _std("uniform.logpdf", x, loc=loc, scale=scale)
    return jnp.where((y >= 0) & (y <= 1), -lax.log(scale), _NEG_INF)


def uniform_pdf(x, loc=0, scale=1):
    return lax.exp(uniform_logpdf(x, loc, scale))


def uniform_cdf(x, loc=0, scale=1):
    y, _, _, _ = _std("uniform.cdf", x, loc=loc, scale=scale)
    return jnp.clip(y, 0, 1)


def uniform_ppf(q, loc=0, scale=1):
    q, loc, scale = promote_args_inexact("uniform.ppf", q, loc, scale)
    return jnp.where((q >= 0) & (q <= 1), loc + q * scale, np.nan)


# ----------------------------------------------------------------------------------- t

def t_logpdf(x, df, loc=0, scale=1):
    y, (df,), _, scale = _std("t.logpdf", x, df, loc=loc, scale=scale)
    half = (df + 1) / 2
    return (lax.lgamma(half) - lax.lgamma(df / 2) - 0.5 * lax.log(df * np.pi)
            - half * lax.log1p(y * y / df) - lax.log(scale))


def t_pdf(x, df, loc=0, scale=1):
    return lax.exp(t_logpdf(x, df, loc, scale))


# ------------------------------------------------------------------------ gamma and chi2

def gamma_logpdf(x, a, loc=0, scale=1):
    y, (a,), _, scale = _std("gamma.logpdf", x, a, loc=loc, scale=scale)
    value = special.xlogy(a - 1, y) - y - lax.lgamma(a) - lax.log(scale)
    return jnp.where(y < 0, _NEG_INF, value)


def gamma_pdf(x, a, loc=0, scale=1):
    return lax.exp(gamma_logpdf(x, a, loc, scale))


def gamma_cdf(x, a, loc=0, scale=1):
    y, (a,), _, _ = _std("gamma.cdf", x, a, loc=loc, scale=scale)
    return special.gammainc(a, jnp.maximum(y, 0))


def gamma_logcdf(x, a, loc=0, scale=1):
    return lax.log(gamma_cdf(x, a, loc, scale))


def gamma_sf(x, a, loc=0, scale=1):
    y, (a,), _, _ = _std("gamma.sf", x, a, loc=loc, scale=scale)
    return special.gammaincc(a, jnp.maximum(y, 0))


def gamma_logsf(x, a, loc=0, scale=1):
    return lax.log(gamma_sf(x, a, loc, scale))


def _chi2(method, gamma_fn):
    """chi2's `method`: the gamma distribution's with a = df / 2 and twice the scale."""
    def fn(x, df, loc=0, scale=1):
        x, df, loc, scale = promote_args_inexact(f"chi2.{method}", x, df, loc, scale)
        return gamma_fn(x, df / 2, loc, 2 * scale)
    fn.__name__ = fn.__qualname__ = f"chi2_{method}"
    fn.__doc__ = f"The chi-squared distribution's {method} (the gamma distribution's)."
    return fn


chi2_logpdf = _chi2("logpdf", gamma_logpdf)
chi2_pdf = _chi2("pdf", gamma_pdf)
chi2_cdf = _chi2("cdf", gamma_cdf)
chi2_logcdf = _chi2("logcdf", gamma_logcdf)
chi2_sf = _chi2("sf", gamma_sf)
chi2_logsf = _chi2("logsf", gamma_logsf)


# -------------------------------------------------------------------------------- beta

def beta_logpdf(x, a, b, loc=0, scale=1):
    y, (a, b), _, scale = _std("beta.logpdf", x, a, b, loc=loc, scale=scale)
    value = (special.xlogy(a - 1, y) + special.xlog1py(b - 1, -y) - special.betaln(a, b)
             - lax.log(scale))
    return jnp.where((y < 0) | (y > 1), _NEG_INF, value)


def beta_pdf(x, a, b, loc=0, scale=1):
    return lax.exp(beta_logpdf(x, a, b, loc, scale))


def beta_cdf(x, a, b, loc=0, scale=1):
    y, (a, b), _, _ = _std("beta.cdf", x, a, b, loc=loc, scale=scale)
    return special.betainc(a, b, jnp.clip(y, 0, 1))


def beta_logcdf(x, a, b, loc=0, scale=1):
    return lax.log(beta_cdf(x, a, b, loc, scale))


def beta_sf(x, a, b, loc=0, scale=1):
    y, (a, b), _, _ = _std("beta.sf", x, a, b, loc=loc, scale=scale)
    return special.betainc(b, a, 1 - jnp.clip(y, 0, 1))


def beta_logsf(x, a, b, loc=0, scale=1):
    return lax.log(beta_sf(x, a, b, loc, scale))


# ------------------------------------------------------------------------------ pareto

def pareto_logpdf(x, b, loc=0, scale=1):
    y, (b,), _, scale = _std("pareto.logpdf", x, b, loc=loc, scale=scale)
    value = lax.log(b) - (b + 1) * lax.log(y) - lax.log(scale)
    return jnp.where(y < 1, _NEG_INF, value)


def pareto_pdf(x, b, loc=0, scale=1):
    return lax.exp(pareto_logpdf(x, b, loc, scale))


def pareto_logsf(x, b, loc=0, scale=1):
    y, (b,), _, _ = _std("pareto.logsf", x, b, loc=loc, scale=scale)
    return jnp.where(y < 1, 0, -b * lax.log(y))


def pareto_sf(x, b, loc=0, scale=1):
    return lax.exp(pareto_logsf(x, b, loc, scale))


def pareto_cdf(x, b, loc=0, scale=1):
    return -lax.expm1(pareto_logsf(x, b, loc, scale))


def pareto_logcdf(x, b, loc=0, scale=1):
    return lax.log1p(-pareto_sf(x, b, loc, scale))


def pareto_ppf(q, b, loc=0, scale=1):
    q, b, loc, scale = promote_args_inexact("pareto.ppf", q, b, loc, scale)
    ok = (q >= 0) & (q <= 1)
    return jnp.where(ok, scale * lax.exp(-lax.log1p(-q) / b) + loc, np.nan)
