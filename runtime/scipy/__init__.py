"""`kiln.scipy`: the parts of SciPy that JAX provides (`kiln.scipy.special`,
`kiln.scipy.stats`, `kiln.scipy.linalg`, `kiln.scipy.signal`), written over `kiln.numpy`
and `kiln.lax`."""
from . import linalg, signal, special, stats  # noqa: F401

__all__ = ["linalg", "signal", "special", "stats"]
