"""`kiln.scipy.stats`: statistical distributions as `jax.scipy.stats` has them; each
distribution is a sub-module (`kiln.scipy.stats.norm`)."""
from . import norm  # noqa: F401

__all__ = ["norm"]
