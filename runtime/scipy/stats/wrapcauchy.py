"""`kiln.scipy.stats.wrapcauchy`: the wrapcauchy distribution as `jax.scipy.stats.wrapcauchy` has it
(logpdf, pdf; defined in `_more`, whose docstring describes them)."""
from ._more import (wrapcauchy_logpdf as logpdf, wrapcauchy_pdf as pdf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf"]
user_facing_names(globals())
del user_facing_names
