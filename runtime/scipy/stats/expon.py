"""`kiln.scipy.stats.expon`: the expon distribution as `jax.scipy.stats.expon` has it (logpdf, pdf,
cdf, logcdf, sf, logsf, ppf; defined in `_continuous`, whose docstring describes them)."""
from ._continuous import (expon_logpdf as logpdf, expon_pdf as pdf, expon_cdf as cdf,
    expon_logcdf as logcdf, expon_sf as sf, expon_logsf as logsf, expon_ppf as ppf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]
user_facing_names(globals())
del user_facing_names
