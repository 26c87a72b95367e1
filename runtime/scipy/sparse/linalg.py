"""`kiln.scipy.sparse.linalg`: the iterative solvers `cg`, `gmres` and `bicgstab` of
`jax.scipy.sparse.linalg`, for a matrix or a linear function over pytrees.

Each solver is a `lax.while_loop` (so it compiles under `jit`) wrapped in
`lax.custom_linear_solve`, which gives JAX's derivatives: `cg` differentiates by solving
again with the same operator (it is symmetric for real operands), `gmres` and `bicgstab`
by solving with the transposed operator. `_krylov` has the conjugate gradient and BiCGSTAB
iterations, `_gmres` the restarted GMRES.

(The names are defined in `_api`; `__all__` lists them.)"""
from ._api import *  # noqa: F401,F403
from ._api import __all__  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
