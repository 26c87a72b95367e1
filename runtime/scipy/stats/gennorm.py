"""`kiln.scipy.stats.gennorm`: the gennorm distribution as `jax.scipy.stats.gennorm` has it
(cdf, logpdf, pdf; defined in `_more`, whose docstring describes them)."""
from ._more import (gennorm_cdf as cdf, gennorm_logpdf as logpdf, gennorm_pdf as pdf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["cdf", "logpdf", "pdf"]
user_facing_names(globals())
del user_facing_names
