"""`kiln.scipy.linalg`: SciPy's linear algebra as JAX has it (`jax.scipy.linalg`), a first part.

Written over `kiln.lax.linalg` and `kiln.numpy` (docs/linalg.md): cholesky, cho_factor,
cho_solve, solve_triangular, lu (P, L, U or PL, U), lu_factor, lu_solve, qr (modes 'full',
'economic', 'r'), svd, eigh (eigenvalues only or with vectors; no generalised problem), det,
inv, solve (assume_a 'gen', or 'pos'/'sym'/'her' through Cholesky), polar (through the SVD),
block_diag, toeplitz. Like JAX's, the `overwrite_*` and `check_finite` arguments are accepted
and ignored. The rest of JAX's list (expm, expm_frechet, sqrtm, schur, hessenberg, funm,
the special matrices, ...) does not exist yet.

(The names are defined in `_linalg`, with the helpers they use, which stay out of this
namespace; `__all__` lists them.)
"""
from ._linalg import *  # noqa: F401,F403
from ._linalg import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
