"""The implementation of `kiln.scipy.linalg`: its public names (`__all__`, re-exported
there) and the helpers they use. `kiln.scipy.linalg`'s docstring describes them."""
import numpy as np

from ..array import to_array
from ..lax import linalg as lax_linalg
from ..numpy import _creation, _linalg, _shape, _ufuncs
from ..numpy import _linalg_solvers as solvers
from ..numpy._core import promote_dtypes_inexact
from ..numpy._functional import vectorize

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular", "lu", "lu_factor",
           "lu_solve", "qr", "svd", "eigh", "det", "inv", "solve", "polar", "block_diag",
           "toeplitz"]


def _inexact(name, *xs):
    return promote_dtypes_inexact(*(to_array(x, name) for x in xs))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """SciPy's cholesky as JAX defines it: the factor of the triangle named by `lower`, the
    input not symmetrised (unlike `jnp.linalg.cholesky`), so that derivatives are JAX's."""
    a, = _inexact("jax.scipy.linalg.cholesky", a)
    L = lax_linalg.cholesky(a if lower else solvers._h(a), symmetrize_input=False)
    return L if lower else solvers._h(L)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = c_and_lower
    c, b = _inexact("cho_solve", c, b)
    vector = b.ndim == c.ndim - 1
    if vector:
        b = _shape.expand_dims(b, -1)
    # c c^H = a (lower) or c^H c = a (upper): two triangular solves
    y = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower,
                                    conjugate_a=not lower)
    x = lax_linalg.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower,
                                    conjugate_a=lower)
    return x[..., 0] if vector else x


_TRANS = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
          2: (True, True), "C": (True, True)}


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    if trans not in _TRANS:
        raise ValueError(f"Invalid 'trans' value {trans!r}; use 0, 1, 2, 'N', 'T' or 'C'")
    a, b = _inexact("solve_triangular", a, b)
    transpose, conjugate = _TRANS[trans]
    vector = b.ndim == a.ndim - 1
    if vector:
        b = _shape.expand_dims(b, -1)
    x = lax_linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=transpose,
                                    conjugate_a=conjugate, unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def _lower_upper(lu_value):
    m, n = lu_value.shape[-2:]
    k = min(m, n)
    l = _shape.tril(lu_value[..., :, :k], -1) + _creation.eye(m, k, dtype=lu_value.dtype)
    return l, _shape.triu(lu_value[..., :k, :])


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    a, = _inexact("lu", a)
    lu_value, _, permutation = lax_linalg.lu(a)
    l, u = _lower_upper(lu_value)
    m = a.shape[-2]
    p = _ufuncs.equal(_shape.expand_dims(permutation, -1),
                      _creation.arange(m, dtype=permutation.dtype)).astype(a.dtype)
    p = _shape.swapaxes(p, -1, -2)   # a = P L U
    return (_linalg.matmul(p, l), u) if permute_l else (p, l, u)


def lu_factor(a, overwrite_a=False, check_finite=True):
    a, = _inexact("lu_factor", a)
    lu_value, pivots, _ = lax_linalg.lu(a)
    return lu_value, pivots


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    lu_value, pivots = lu_and_piv
    lu_value, b = _inexact("lu_solve", lu_value, b)
    if trans not in _TRANS:
        raise ValueError(f"Invalid 'trans' value {trans!r}; use 0, 1 or 2")
    m = lu_value.shape[-1]
    permutation = _permutation(pivots, m)
    vector = b.ndim == lu_value.ndim - 1
    if vector:
        b = _shape.expand_dims(b, -1)
    p = _ufuncs.equal(_shape.expand_dims(permutation, -1),
                      _creation.arange(m, dtype=permutation.dtype)).astype(b.dtype)
    transpose, conjugate = _TRANS[trans]
    if not transpose:   # P^T L U x = b
        y = lax_linalg.triangular_solve(lu_value, _linalg.matmul(p, b), left_side=True,
                                        lower=True, unit_diagonal=True)
        x = lax_linalg.triangular_solve(lu_value, y, left_side=True, lower=False)
    else:               # op(U) op(L) P x = b
        y = lax_linalg.triangular_solve(lu_value, b, left_side=True, lower=False,
                                        transpose_a=True, conjugate_a=conjugate)
        y = lax_linalg.triangular_solve(lu_value, y, left_side=True, lower=True,
                                        unit_diagonal=True, transpose_a=True,
                                        conjugate_a=conjugate)
        x = _linalg.matmul(_shape.swapaxes(p, -1, -2), y)
    return x[..., 0] if vector else x


def _permutation(pivots, m):
    """The permutation LAPACK-style pivots apply to range(m) (static loop over the swaps)."""
    perm = _shape.broadcast_to(_creation.arange(m, dtype=pivots.dtype), pivots.shape[:-1] + (m,))
    rows = _creation.arange(m, dtype=pivots.dtype)
    for i in range(pivots.shape[-1]):
        j = _shape.expand_dims(pivots[..., i], -1)
        here, there = perm[..., i:i + 1], _shape.take_along_axis(perm, j, axis=-1)
        perm = _ufuncs.where(rows == i, there, _ufuncs.where(rows == j, here, perm))
    return perm


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    if pivoting:
        raise NotImplementedError("kiln.scipy.linalg.qr has no column pivoting yet")
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    a, = _inexact("qr", a)
    q, r = lax_linalg.qr(a, full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    a, = _inexact("svd", a)
    return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True):  # noqa: A002
    if b is not None or eigvals is not None:
        raise NotImplementedError("kiln.scipy.linalg.eigh has no generalised problem (b) and "
                                  "no eigvals subset yet")
    a, = _inexact("eigh", a)
    v, w = lax_linalg.eigh(a, lower=lower)
    return w if eigvals_only else (w, v)


def det(a, overwrite_a=False, check_finite=True):
    return solvers.det(a)


def inv(a, overwrite_a=False, check_finite=True):
    return solvers.inv(a)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"assume_a must be 'gen', 'sym', 'her' or 'pos', got {assume_a!r}")
    a, b = _inexact("solve", a, b)
    if assume_a == "pos":
        return cho_solve(cho_factor(a, lower=lower), b)
    vector = b.ndim == a.ndim - 1
    x = solvers.solve(a, _shape.expand_dims(b, -1) if vector else b)
    return x[..., 0] if vector else x


def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None):
    """(u, p) with a = u p (side='right') or p u (side='left'), u unitary, p Hermitian
    positive semi-definite: through `lax.linalg.qdwh` (method 'qdwh', JAX's default; a tall
    matrix with side 'right', a wide one with side 'left', vectorised over the batch;
    `max_iterations` is not passed on, as in JAX 0.10.2) or through the SVD ('svd')."""
    a = to_array(a, "polar")
    if a.ndim < 2:
        raise ValueError("The input `a` must be at least a 2-D array.")
    if side not in ("right", "left"):
        raise ValueError("The argument `side` must be either 'right' or 'left'.")
    a, = _inexact("polar", a)
    if method == "qdwh":
        return _polar_qdwh(a, side, eps)
    if method != "svd":
        raise ValueError(f"Unknown polar decomposition method {method}.")
    w, s, vh = lax_linalg.svd(a, full_matrices=False)
    u = _linalg.matmul(w, vh)
    if side == "right":
        p = _linalg.matmul(solvers._h(vh) * _shape.expand_dims(s, -2).astype(a.dtype), vh)
    else:
        p = _linalg.matmul(w * _shape.expand_dims(s, -2).astype(a.dtype), solvers._h(w))
    return u, p


def _polar_qdwh(a, side, eps):
    m, n = a.shape[-2:]
    if not ((m >= n and side == "right") or (m < n and side == "left")):
        raise NotImplementedError("method='qdwh' only supports mxn matrices where m < n where "
                                  "side='right' and m >= n side='left', got "
                                  f"{tuple(a.shape[-2:])} with side={side!r}")
    flip = side == "left"
    x = solvers._h(a) if flip else a

    def one(x):
        return tuple(lax_linalg.qdwh(x, eps=eps)[:2])
    u, p = vectorize(one, signature="(m,n)->(m,n),(n,n)")(x) if x.ndim > 2 else one(x)
    return (solvers._h(u), solvers._h(p)) if flip else (u, p)


def block_diag(*arrs):
    if not arrs:
        return _creation.zeros((1, 0))
    mats = [_shape.atleast_2d(to_array(x, "block_diag")) for x in arrs]
    mats = promote_dtypes_inexact(*mats) if any(
        np.dtype(m.dtype).kind in "fc" for m in mats) else mats
    rows = sum(m.shape[0] for m in mats)
    cols = sum(m.shape[1] for m in mats)
    out, r, c = _creation.zeros((rows, cols), mats[0].dtype), 0, 0
    for m in mats:
        out = out.at[r:r + m.shape[0], c:c + m.shape[1]].set(m)
        r, c = r + m.shape[0], c + m.shape[1]
    return out


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column c and first row r (r[0] ignored; r = conj(c)
    when omitted), c and r flattened as SciPy does."""
    c = _shape.ravel(to_array(c, "toeplitz"))
    r = _ufuncs.conj(c) if r is None else _shape.ravel(to_array(r, "toeplitz"))
    if np.dtype(c.dtype) != np.dtype(r.dtype):
        c, r = promote_dtypes_inexact(c, r)
    n, m = c.shape[0], r.shape[0]
    diff = _shape.expand_dims(_creation.arange(n), -1) - _creation.arange(m)
    from_c = c[_ufuncs.clip(diff, 0, max(n - 1, 0))]
    from_r = r[_ufuncs.clip(-diff, 0, max(m - 1, 0))]
    return _ufuncs.where(diff >= 0, from_c, from_r)
