"""`kiln.scipy.stats.chi2`: the chi2 distribution as `jax.scipy.stats.chi2` has it (logpdf, pdf,
cdf, logcdf, sf, logsf; defined in `_continuous`, whose docstring describes them)."""
from ._continuous import (chi2_logpdf as logpdf, chi2_pdf as pdf, chi2_cdf as cdf,
    chi2_logcdf as logcdf, chi2_sf as sf, chi2_logsf as logsf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
user_facing_names(globals())
del user_facing_names
