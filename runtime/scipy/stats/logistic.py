"""`kiln.scipy.stats.logistic`: the logistic distribution as `jax.scipy.stats.logistic` has it
(logpdf, pdf, cdf, sf, ppf, isf; defined in `_continuous`, whose docstring describes them)."""
from ._continuous import (logistic_logpdf as logpdf, logistic_pdf as pdf, logistic_cdf as cdf,
    logistic_sf as sf, logistic_ppf as ppf, logistic_isf as isf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "cdf", "sf", "ppf", "isf"]
user_facing_names(globals())
del user_facing_names
