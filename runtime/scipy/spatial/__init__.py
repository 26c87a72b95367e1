"""`kiln.scipy.spatial`: `transform` (`Rotation`, `Slerp`), as `jax.scipy.spatial` has it."""
from . import transform  # noqa: F401

__all__ = ["transform"]
