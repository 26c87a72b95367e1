"""`kiln.scipy.stats.binom`: the binom distribution as `jax.scipy.stats.binom` has it (logpmf, pmf;
defined in `_discrete`, whose docstring describes them)."""
from ._discrete import (binom_logpmf as logpmf, binom_pmf as pmf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpmf", "pmf"]
user_facing_names(globals())
del user_facing_names
