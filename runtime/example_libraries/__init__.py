"""`kiln.example_libraries`: JAX's small example libraries (`optimizers`), on kiln."""
from . import optimizers  # noqa: F401

__all__ = ["optimizers"]
