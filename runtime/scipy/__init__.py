"""`kiln.scipy`: the parts of SciPy that JAX provides (`kiln.scipy.special`,
`kiln.scipy.stats`, `kiln.scipy.linalg`, `kiln.scipy.signal`, `kiln.scipy.optimize`,
`kiln.scipy.fft`, `kiln.scipy.integrate`, `kiln.scipy.interpolate`, `kiln.scipy.ndimage`,
`kiln.scipy.cluster`, `kiln.scipy.sparse`, `kiln.scipy.spatial`), written over `kiln.numpy`
and `kiln.lax`."""
from . import (cluster, fft, integrate, interpolate, linalg, ndimage, optimize,  # noqa: F401
               signal, sparse, spatial, special, stats)

__all__ = ["cluster", "fft", "integrate", "interpolate", "linalg", "ndimage", "optimize",
           "signal", "sparse", "spatial", "special", "stats"]
