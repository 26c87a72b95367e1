"""`kiln.scipy.stats.laplace`: the laplace distribution as `jax.scipy.stats.laplace` has it
(logpdf, pdf, cdf; defined in `_continuous`, whose docstring describes them)."""
from ._continuous import (  # noqa: F401
    laplace_logpdf as logpdf, laplace_pdf as pdf, laplace_cdf as cdf)
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "cdf"]
user_facing_names(globals())
del user_facing_names
