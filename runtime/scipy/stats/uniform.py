"""`kiln.scipy.stats.uniform`: the uniform distribution as `jax.scipy.stats.uniform` has it
(logpdf, pdf, cdf, ppf; defined in `_continuous`, whose docstring describes them)."""
from ._continuous import (uniform_logpdf as logpdf, uniform_pdf as pdf, uniform_cdf as cdf,
    uniform_ppf as ppf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf", "cdf", "ppf"]
user_facing_names(globals())
del user_facing_names
