"""`kiln.scipy.stats.truncnorm`: the truncnorm distribution as `jax.scipy.stats.truncnorm`
has it (cdf, logcdf, logpdf, logsf, pdf, sf; defined in `_more`, whose docstring describes them)."""
from ._more import (truncnorm_cdf as cdf, truncnorm_logcdf as logcdf,  # noqa: F401
                    truncnorm_logpdf as logpdf, truncnorm_logsf as logsf,
                    truncnorm_pdf as pdf, truncnorm_sf as sf)
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]
user_facing_names(globals())
del user_facing_names
