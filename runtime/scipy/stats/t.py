"""`kiln.scipy.stats.t`: the t distribution as `jax.scipy.stats.t` has it (logpdf, pdf; defined in
`_continuous`, whose docstring describes them)."""
from ._continuous import (t_logpdf as logpdf, t_pdf as pdf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf"]
user_facing_names(globals())
del user_facing_names
