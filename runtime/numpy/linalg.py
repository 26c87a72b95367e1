"""`kiln.numpy.linalg`: norms, decompositions, solvers and the array-API linear-algebra helpers.

`norm`, `vector_norm` and `matrix_norm` are written over `kiln.numpy` reductions and ufuncs,
with JAX's dtypes (`norm` promotes to inexact and returns real values; `vector_norm` keeps
integer inputs integral for ord 1 and +-inf, and promotes to inexact for other p, as NumPy
does, where JAX returns meaningless integers); matrix norms of ord 2, -2 and 'nuc' take the
singular values. The decompositions and solvers (cholesky, qr, eig, eigvals, eigh, eigvalsh,
svd, svdvals, solve, inv, det, slogdet, pinv, lstsq, matrix_rank, cond, matrix_power,
multi_dot, tensorsolve, tensorinv) are `_linalg_solvers`' (docs/linalg.md); qr's mode='raw'
is `lax.linalg.geqrf`'s result, transposed as NumPy's. The remaining functions (matmul, tensordot, vecdot, outer, cross, diagonal, trace,
matrix_transpose) are the array-API forms of their `kiln.numpy` namesakes.

(The names are defined in `_linalg_namespace`, with the helpers they use, which stay out of
this namespace; `__all__` lists them.)"""
from ._linalg_namespace import *  # noqa: F401,F403
from ._linalg_namespace import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names

from ..eager_tiers import tier_names  # noqa: E402

# Eager calls of the eigensolvers compile once a signature repeats (eager_tiers.py), with
# JAX's static parameters: they call the same LAPACK routines eagerly and compiled, and so give
# the same bits. The others (inv, solve, det, cholesky, qr, svd-based, norm) round otherwise
# when compiled and stay eager (docs/performance.md).
tier_names(globals(), {"eigh": ("UPLO", "symmetrize_input"),
                       "eigvalsh": ("UPLO", "symmetrize_input"), "eigvals": ()})
del tier_names

from ..eager_tiers import tier_composites  # noqa: E402

# The others run as one unit from the second eager call of a signature, with the eager bits
# (eager_tiers.composite).
tier_composites(globals())
del tier_composites
