"""`kiln.scipy.stats.geom`: the geom distribution as `jax.scipy.stats.geom` has it (logpmf, pmf;
defined in `_discrete`, whose docstring describes them)."""
from ._discrete import (geom_logpmf as logpmf, geom_pmf as pmf)  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

__all__ = ["logpmf", "pmf"]
user_facing_names(globals())
del user_facing_names
