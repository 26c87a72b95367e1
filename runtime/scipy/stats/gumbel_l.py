"""`kiln.scipy.stats.gumbel_l`: the left-skewed Gumbel distribution as `jax.scipy.stats.gumbel_l`
has it (logpdf, pdf, logcdf, cdf, ppf, sf, logsf; defined in `_gumbel`, whose docstring
describes them)."""
from ._gumbel import (gumbel_l_logpdf as logpdf, gumbel_l_pdf as pdf,  # noqa: F401
    gumbel_l_logcdf as logcdf, gumbel_l_cdf as cdf, gumbel_l_ppf as ppf,
    gumbel_l_sf as sf, gumbel_l_logsf as logsf)
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "logcdf", "cdf", "ppf", "sf", "logsf"]
user_facing_names(globals())
del user_facing_names
