"""`kiln.scipy.stats.cauchy`: the cauchy distribution as `jax.scipy.stats.cauchy` has it (logpdf,
pdf, cdf, logcdf, sf, logsf, ppf, isf; defined in `_continuous`, whose docstring describes
them)."""
from ._continuous import (cauchy_logpdf as logpdf, cauchy_pdf as pdf, cauchy_cdf as cdf,
    cauchy_logcdf as logcdf, cauchy_sf as sf, cauchy_logsf as logsf, cauchy_ppf as ppf,
    cauchy_isf as isf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]
user_facing_names(globals())
del user_facing_names
