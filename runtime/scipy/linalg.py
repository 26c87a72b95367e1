"""`kiln.scipy.linalg`: SciPy's linear algebra as JAX has it (`jax.scipy.linalg`), every name
of JAX 0.10.2's list.

Written over `kiln.lax.linalg` and `kiln.numpy` (docs/linalg.md). `_linalg`: cholesky,
cho_factor, cho_solve, solve_triangular, lu (P, L, U or PL, U), lu_factor, lu_solve, qr (modes
'full', 'economic', 'r'), svd, eigh (eigenvalues only or with vectors; no generalised
problem), det, inv, solve (assume_a 'gen', or 'pos'/'sym'/'her' through Cholesky), polar
(through the SVD), block_diag, toeplitz. `_linalg_functions`: expm (JAX's Padé scaling and
squaring), expm_frechet, schur, hessenberg, rsf2csf, sqrtm, funm, solve_sylvester,
eigh_tridiagonal (eigenvalues only, as JAX), qr_multiply (no pivoting). `_linalg_special`: the
special matrices (circulant, companion, convolution_matrix, dft, fiedler, fiedler_companion,
hadamard, hankel, helmert, hilbert, invhilbert, invpascal, leslie, pascal). Like JAX's, the
`overwrite_*` and `check_finite` arguments are accepted and ignored.

(The names are defined in those private modules, with the helpers they use, which stay out of
this namespace; `__all__` lists them.)
"""
from ._linalg import *  # noqa: F401,F403
from ._linalg_functions import *  # noqa: F401,F403
from ._linalg_special import *  # noqa: F401,F403
from . import _linalg, _linalg_functions, _linalg_special

__all__ = _linalg.__all__ + _linalg_functions.__all__ + _linalg_special.__all__
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names

from ..eager_tiers import tier_names  # noqa: E402

# Eager calls of `block_diag`, which only places blocks, compile once a signature repeats
# (eager_tiers.py), with the eager bits. The factorisations and matrix functions JAX jits
# (lu, expm, polar, hessenberg, ...) round otherwise when compiled and stay eager
# (docs/performance.md).
tier_names(globals(), {"block_diag": ()})
del tier_names

from ..eager_tiers import tier_composites  # noqa: E402

# The others run as one unit from the second eager call of a signature, with the eager bits
# (eager_tiers.composite).
tier_composites(globals())
del tier_composites
