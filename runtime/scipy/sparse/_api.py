"""The implementation of `kiln.scipy.sparse.linalg`: `cg`, `gmres`, `bicgstab` (JAX's
signatures, defaults and errors) over the iterations of `_krylov` and `_gmres`."""
import functools

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...array import Array
from ...tree_util import tree_leaves, tree_map, tree_structure
from ._gmres import CYCLES, gmres_solve
from ._krylov import bicgstab_solve, cg_solve
from ._trees import norm, raveler, size

__all__ = ["bicgstab", "cg", "gmres"]


def _identity(x):
    return x


def _square(shape):
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"linear operator must be a square matrix, but has shape: {shape}")


def _as_function(A):
    """A linear operator given as a function, an array or anything with `@`, as a function."""
    if callable(A):
        return A
    if isinstance(A, (np.ndarray, Array)):
        _square(A.shape)
        return functools.partial(jnp.dot, A, precision=lax.Precision.HIGHEST)
    if hasattr(A, "__matmul__"):
        _square(getattr(A, "shape", ()))
        return A.__matmul__
    raise TypeError(f"linear operator must be either a function or ndarray: {A}")


def _check_x0(b, x0, shapes=True):
    if tree_structure(x0) != tree_structure(b):
        raise ValueError(f"x0 and b must have matching tree structure: "
                         f"{tree_structure(x0)} vs {tree_structure(b)}")
    shape_x0 = [np.shape(leaf) for leaf in tree_leaves(x0)]
    shape_b = [np.shape(leaf) for leaf in tree_leaves(b)]
    if shapes and shape_x0 != shape_b:
        raise ValueError(f"arrays in x0 and b must have matching shapes: {shape_x0} vs "
                         f"{shape_b}")


def _operands(A, b, x0, M):
    b = tree_map(jnp.asarray, b)
    x0 = tree_map(jnp.zeros_like, b) if x0 is None else tree_map(jnp.asarray, x0)
    return _as_function(A), b, x0, _identity if M is None else _as_function(M)


def _krylov(iteration, A, b, x0, tol, atol, maxiter, M, symmetric):
    A, b, x0, M = _operands(A, b, x0, M)
    maxiter = 10 * size(b) if maxiter is None else maxiter
    _check_x0(b, x0)
    solve = functools.partial(iteration, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    real = symmetric and not any(jnp.iscomplexobj(leaf) for leaf in tree_leaves(b))
    return lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve, symmetric=real)


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve A x = b by conjugate gradients, for Hermitian positive definite `A` (a matrix
    or a linear function of pytrees like `b`). Stops when |b - A x| <= max(tol |b|, atol)
    or after `maxiter` steps (10 times b's size by default); `M` is a preconditioner
    approximating A's inverse. Returns (x, None), as JAX does."""
    return _krylov(cg_solve, A, b, x0, tol, atol, maxiter, M, symmetric=True), None


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve A x = b by BiCGSTAB for a general (non-symmetric) `A`; the arguments are as
    `cg`'s. Returns (x, None), as JAX does."""
    return _krylov(bicgstab_solve, A, b, x0, tol, atol, maxiter, M, symmetric=False), None


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
          solve_method="batched"):
    """Solve A x = b by restarted GMRES for a general `A`: `restart` Arnoldi steps a cycle,
    at most `maxiter` cycles (10 times b's size by default), until the preconditioned
    residual |M (b - A x)| is at most max(tol |b|, atol). `solve_method` is "batched"
    (least squares after each cycle) or "incremental" (Givens rotations, a cycle stops as
    soon as its residual is small enough). Returns (x, info), info -1 where x has NaNs,
    else 0, as JAX does."""
    A, b, x0, M = _operands(A, b, x0, M)
    n = size(b)
    maxiter = 10 * n if maxiter is None else maxiter
    restart = min(restart, n)
    _check_x0(b, x0, shapes=False)
    b_norm = norm(b)
    atol = jnp.maximum(tol * b_norm, atol)
    ptol = norm(M(b)) * jnp.minimum(1.0, atol / b_norm)
    if solve_method not in CYCLES:
        raise ValueError(f"invalid solve_method {solve_method}, must be either "
                         f"'incremental' or 'batched'")
    ravel, unravel = raveler(b)

    def solve(A, b):
        def flat(f):
            return lambda v: ravel(f(unravel(v)))
        return unravel(gmres_solve(flat(A), ravel(b), x0=ravel(x0), atol=atol, ptol=ptol,
                                   restart=restart, maxiter=maxiter, M=flat(M),
                                   cycle=CYCLES[solve_method]))

    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    return x, jnp.where(jnp.isnan(norm(x)), -1, 0)
