"""`kiln.scipy`: the parts of SciPy that JAX provides (`kiln.scipy.special`,
`kiln.scipy.stats`, `kiln.scipy.linalg`, `kiln.scipy.signal`, `kiln.scipy.fft`,
`kiln.scipy.integrate`, `kiln.scipy.interpolate`, `kiln.scipy.ndimage`,
`kiln.scipy.cluster`), written over `kiln.numpy` and `kiln.lax`."""
from . import (cluster, fft, integrate, interpolate, linalg, ndimage, signal,  # noqa: F401
               special, stats)

__all__ = ["cluster", "fft", "integrate", "interpolate", "linalg", "ndimage", "signal",
           "special", "stats"]
