"""`kiln.scipy`: the parts of SciPy that JAX provides (`kiln.scipy.special`,
`kiln.scipy.stats`, `kiln.scipy.linalg`, `kiln.scipy.signal`, `kiln.scipy.optimize`), written
over `kiln.numpy` and `kiln.lax`."""
from . import linalg, optimize, signal, special, stats  # noqa: F401

__all__ = ["linalg", "optimize", "signal", "special", "stats"]
