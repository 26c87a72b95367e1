"""`kiln.lax.linalg`: JAX's primitive-level linear algebra (`cholesky`, `eig`, `eigh`,
`hessenberg`, `lu`, `qr`, `schur`, `svd`, `triangular_solve`).

Each function converts its operands and binds one primitive (compiler/primitives/:
decompositions.py, lu.py, qr.py, eig.py, eigh.py, schur.py, svd.py); `cholesky` and `eigh`
first symmetrise their input ((x + x^H) / 2) unless `symmetrize_input=False`, as JAX's do;
`svd` returns (u, s, vh), as JAX 0.10.2's. The other names of JAX's `lax.linalg`
(householder_product, tridiagonal, tridiagonal_solve, ...) do not exist yet (docs/linalg.md).

(The names are defined in `_linalg`, with the helpers they use, which stay out of this
namespace; `__all__` lists them.)
"""
from ._linalg import *  # noqa: F401,F403
from ._linalg import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
