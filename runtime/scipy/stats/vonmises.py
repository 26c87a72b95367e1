"""`kiln.scipy.stats.vonmises`: the vonmises distribution as `jax.scipy.stats.vonmises` has it
(logpdf, pdf; defined in `_more`, whose docstring describes them)."""
from ._more import (vonmises_logpdf as logpdf, vonmises_pdf as pdf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpdf", "pdf"]
user_facing_names(globals())
del user_facing_names
