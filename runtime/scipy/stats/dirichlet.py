"""`kiln.scipy.stats.dirichlet`: the dirichlet distribution as `jax.scipy.stats.dirichlet` has it
(logpdf, pdf; defined in `_discrete`, whose docstring describes them)."""
from ._discrete import (dirichlet_logpdf as logpdf, dirichlet_pdf as pdf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf"]
user_facing_names(globals())
del user_facing_names
