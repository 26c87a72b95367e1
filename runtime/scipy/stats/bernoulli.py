"""`kiln.scipy.stats.bernoulli`: the bernoulli distribution as `jax.scipy.stats.bernoulli` has it
(logpmf, pmf, cdf, ppf; defined in `_discrete`, whose docstring describes them)."""
from ._discrete import (bernoulli_logpmf as logpmf, bernoulli_pmf as pmf, bernoulli_cdf as cdf,
    bernoulli_ppf as ppf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpmf", "pmf", "cdf", "ppf"]
user_facing_names(globals())
del user_facing_names
