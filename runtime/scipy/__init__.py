"""`kiln.scipy`: the parts of SciPy that JAX provides (`kiln.scipy.special`,
`kiln.scipy.stats`), written over `kiln.numpy` and `kiln.lax`."""
from . import special, stats  # noqa: F401

__all__ = ["special", "stats"]
