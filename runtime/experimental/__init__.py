"""`kiln.experimental`, as far as kiln has JAX's `jax.experimental`: `multihost_utils`, the
helpers for programs run as several processes (docs/distributed.md), and `io_callback`, a
host callback with effects (docs/differences.md)."""
from . import multihost_utils
from ..callbacks import io_callback

__all__ = ["multihost_utils", "io_callback"]
