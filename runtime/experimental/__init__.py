"""`kiln.experimental`, as far as kiln has JAX's `jax.experimental`: `multihost_utils`, the
helpers for programs run as several processes (docs/distributed.md)."""
from . import multihost_utils

__all__ = ["multihost_utils"]
