"""`kiln.scipy.cluster`: `vq`, as `jax.scipy.cluster` has it."""
from . import vq  # noqa: F401

__all__ = ["vq"]
