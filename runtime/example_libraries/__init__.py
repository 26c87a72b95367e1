"""`kiln.example_libraries`: JAX's small example libraries (`optimizers`, `stax`), on kiln."""
from . import optimizers, stax  # noqa: F401

__all__ = ["optimizers", "stax"]
