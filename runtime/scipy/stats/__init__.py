"""`kiln.scipy.stats`: statistical distributions as `jax.scipy.stats` has them; each
distribution is a sub-module (`kiln.scipy.stats.norm`, `kiln.scipy.stats.gamma`, ...); and
JAX's `gaussian_kde` (`_kde`), `mode`, `rankdata` and `sem` (`_descriptive`)."""
from . import (norm, bernoulli, beta, binom, cauchy, chi2,  # noqa: F401
               dirichlet, expon, gamma, geom, laplace, logistic,
               multivariate_normal, nbinom, pareto, poisson, t, uniform,
               gennorm, multinomial, truncnorm, vonmises, wrapcauchy, betabinom, gumbel_l,
               gumbel_r)
from ._descriptive import mode, rankdata, sem  # noqa: F401
from ._kde import gaussian_kde  # noqa: F401

__all__ = ["norm", "bernoulli", "beta", "binom", "cauchy", "chi2", "dirichlet", "expon",
           "gamma", "geom", "laplace", "logistic", "multivariate_normal", "nbinom", "pareto",
           "poisson", "t", "uniform", "gennorm", "multinomial", "truncnorm", "vonmises",
           "wrapcauchy", "betabinom", "gumbel_l", "gumbel_r", "gaussian_kde", "mode",
           "rankdata", "sem"]

from ...wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
