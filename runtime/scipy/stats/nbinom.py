"""`kiln.scipy.stats.nbinom`: the nbinom distribution as `jax.scipy.stats.nbinom` has it (logpmf,
pmf; defined in `_discrete`, whose docstring describes them)."""
from ._discrete import (nbinom_logpmf as logpmf, nbinom_pmf as pmf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpmf", "pmf"]
user_facing_names(globals())
del user_facing_names
