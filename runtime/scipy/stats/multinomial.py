"""`kiln.scipy.stats.multinomial`: the multinomial distribution as
`jax.scipy.stats.multinomial` has it (logpmf, pmf; defined in `_more`, whose docstring
describes them)."""
from ._more import (multinomial_logpmf as logpmf, multinomial_pmf as pmf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpmf", "pmf"]
user_facing_names(globals())
del user_facing_names
