"""`kiln.scipy.stats.gumbel_r`: the right-skewed Gumbel distribution as `jax.scipy.stats.gumbel_r`
has it (logpdf, pdf, logcdf, cdf, ppf, sf, logsf; defined in `_gumbel`, whose docstring
describes them)."""
from ._gumbel import (gumbel_r_logpdf as logpdf, gumbel_r_pdf as pdf,  # noqa: F401
    gumbel_r_logcdf as logcdf, gumbel_r_cdf as cdf, gumbel_r_ppf as ppf,
    gumbel_r_sf as sf, gumbel_r_logsf as logsf)
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "logcdf", "cdf", "ppf", "sf", "logsf"]
user_facing_names(globals())
del user_facing_names
