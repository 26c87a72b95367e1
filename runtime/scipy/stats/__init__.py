"""`kiln.scipy.stats`: statistical distributions as `jax.scipy.stats` has them; each
distribution is a sub-module (`kiln.scipy.stats.norm`, `kiln.scipy.stats.gamma`, ...)."""
from . import (norm, bernoulli, beta, binom, cauchy, chi2,  # noqa: F401
               dirichlet, expon, gamma, geom, laplace, logistic,
               multivariate_normal, nbinom, pareto, poisson, t, uniform,
               gennorm, multinomial, truncnorm, vonmises, wrapcauchy, betabinom)

__all__ = ["norm", "bernoulli", "beta", "binom", "cauchy", "chi2", "dirichlet", "expon",
           "gamma", "geom", "laplace", "logistic", "multivariate_normal", "nbinom", "pareto",
           "poisson", "t", "uniform", "gennorm", "multinomial", "truncnorm", "vonmises",
           "wrapcauchy", "betabinom"]
