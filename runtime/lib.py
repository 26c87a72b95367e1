"""`kiln.lib`, as JAX's `jax.lib` has it today: its version string `__version__` (kiln's).
JAX's `jax.lib.xla_client` and the rest of jaxlib are XLA's runtime, which kiln does not
have."""
from .version import __version__  # noqa: F401

__all__ = []
