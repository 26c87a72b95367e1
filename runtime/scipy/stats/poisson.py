"""`kiln.scipy.stats.poisson`: the poisson distribution as `jax.scipy.stats.poisson` has it
(logpmf, pmf, cdf; defined in `_discrete`, whose docstring describes them)."""
from ._discrete import (  # noqa: F401
    poisson_logpmf as logpmf, poisson_pmf as pmf, poisson_cdf as cdf)
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpmf", "pmf", "cdf"]
user_facing_names(globals())
del user_facing_names
