"""`kiln.extend`, as far as kiln has JAX's `jax.extend`: `core`, for primitives defined by
users (docs/extend.md). JAX's other `jax.extend` modules reach its jaxprs, MLIR and XLA
backends, which kiln does not have."""
from . import core  # noqa: F401

__all__ = ["core"]
