"""`kiln.lax.linalg`: JAX's primitive-level linear algebra (`cholesky`, `eig`, `eigh`,
`hessenberg`, `lu`, `qr`, `schur`, `svd`, `triangular_solve`).

Each function converts its operands and binds one primitive (compiler/primitives/:
decompositions.py, lu.py, qr.py, eig.py, eigh.py, schur.py, svd.py); `cholesky` and `eigh`
first symmetrise their input ((x + x^H) / 2) unless `symmetrize_input=False`, as JAX's do;
`svd` returns (u, s, vh), as JAX 0.10.2's. `householder_product`, `ormqr`,
`lu_pivots_to_permutation`, `symmetric_product`, `tridiagonal_solve`, `cholesky_update` and
`tridiagonal` are written over `kiln.numpy` and `kiln.lax` loops (`_linalg_more` describes
them), and so is `qdwh` (`_qdwh`). The enums `EigImplementation`, `EighImplementation` and
`SvdAlgorithm` are JAX's; `eig`, `eigh` and `svd` accept the choices JAX's CPU backend runs
and refuse the others with its errors (docs/linalg.md).

(The names are defined in `_linalg`, with the helpers they use, which stay out of this
namespace; `__all__` lists them.)
"""
from ._linalg import *  # noqa: F401,F403
from ._linalg import __all__ as _decompositions
from ._linalg_more import *  # noqa: F401,F403
from ._linalg_more import __all__ as _more
from ._qdwh import qdwh  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

__all__ = _decompositions + _more + ["qdwh"]
user_facing_names(globals())
del user_facing_names, _decompositions, _more
