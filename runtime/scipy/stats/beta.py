"""`kiln.scipy.stats.beta`: the beta distribution as `jax.scipy.stats.beta` has it (logpdf, pdf,
cdf, logcdf, sf, logsf; defined in `_continuous`, whose docstring describes them)."""
from ._continuous import (beta_logpdf as logpdf, beta_pdf as pdf, beta_cdf as cdf,
    beta_logcdf as logcdf, beta_sf as sf, beta_logsf as logsf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
user_facing_names(globals())
del user_facing_names
