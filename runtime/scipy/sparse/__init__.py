"""`kiln.scipy.sparse`: `linalg`, the iterative solvers `jax.scipy.sparse` has."""
from . import linalg  # noqa: F401

__all__ = ["linalg"]
