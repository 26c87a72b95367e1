"""`kiln.scipy.stats.multivariate_normal`: the multivariate normal distribution as
`jax.scipy.stats.multivariate_normal` has it (logpdf, pdf; defined in `_discrete`, whose
docstring describes them)."""
from ._discrete import (  # noqa: F401
    multivariate_normal_logpdf as logpdf, multivariate_normal_pdf as pdf)
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf"]
user_facing_names(globals())
del user_facing_names
