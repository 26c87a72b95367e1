"""`kiln.scipy.stats.pareto`: the pareto distribution as `jax.scipy.stats.pareto` has it (logpdf,
pdf, logsf, sf, cdf, logcdf, ppf; defined in `_continuous`, whose docstring describes them)."""
from ._continuous import (pareto_logpdf as logpdf, pareto_pdf as pdf, pareto_logsf as logsf,
    pareto_sf as sf, pareto_cdf as cdf, pareto_logcdf as logcdf, pareto_ppf as ppf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "logsf", "sf", "cdf", "logcdf", "ppf"]
user_facing_names(globals())
del user_facing_names
