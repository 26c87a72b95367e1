"""`kiln.scipy.stats.gamma`: the gamma distribution as `jax.scipy.stats.gamma` has it (logpdf, pdf,
cdf, logcdf, sf, logsf; defined in `_continuous`, whose docstring describes them)."""
from ._continuous import (gamma_logpdf as logpdf, gamma_pdf as pdf, gamma_cdf as cdf,
    gamma_logcdf as logcdf, gamma_sf as sf, gamma_logsf as logsf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
user_facing_names(globals())
del user_facing_names
