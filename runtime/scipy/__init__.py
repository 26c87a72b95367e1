"""`kiln.scipy`: the parts of SciPy that JAX provides (`kiln.scipy.special`,
`kiln.scipy.stats`, `kiln.scipy.linalg`), written over `kiln.numpy` and `kiln.lax`."""
from . import linalg, special, stats  # noqa: F401

__all__ = ["linalg", "special", "stats"]
