"""eigh: the eigendecomposition of a Hermitian matrix, JAX's `lax.linalg.eigh` primitive.

`eigh(a, lower)` of an (..., n, n) matrix, reading only the triangle `lower` names, gives
`v` (..., n, n), the eigenvectors in its columns, and `w` (..., n), the eigenvalues in
ascending order, real (float32 for complex64). LAPACK's syevd/heevd, as JAX on CPU: the
eigenvectors' signs (phases) are LAPACK's. The NumPy definition calls SciPy's syevd/heevd on
each matrix (NumPy's `eigh` factors the transpose with the other triangle flag: the same
eigenvalues, other eigenvector signs than JAX's); on CuPy arrays (the CUDA backend) it is
`cupy.linalg.eigh` (cuSOLVER). A matrix LAPACK fails to converge on gives
NaN, as in JAX.

Derivatives are JAX's: with S = V^H dA V and F[i, j] = 1 / (w[j] - w[i]) off the diagonal (0
on it), dV = V (F * S) and dw = real(diag(S)); the VJP is its transpose,
V (F * (V^T Vbar) + diag(wbar)) V^T (conjugated where complex). Repeated eigenvalues make F
infinite: the eigenvectors' derivative is then inf/NaN (their basis is not unique), as in JAX,
while the eigenvalues' derivative stays finite. The tangent dA is used as it is: the
symmetrisation is `lax.linalg.eigh`'s (`symmetrize_input`, on by default).
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from .core import register, JVP, VJP, BATCH
from .decompositions import array_module, check_inexact, h, masked, matmul, matrix_batch_rule, t
from .rule_forms import tangent_rule, cotangent_rule


def real_dtype(dtype):
    dtype = np.dtype(dtype)
    return np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype


def _eigh_eval(a, *, lower):
    check_inexact("eigh", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError("Argument to symmetric eigendecomposition must have shape [..., n, n], "
                         f"got shape {tuple(a.shape)}")
    return ShapedArray(a.shape, a.dtype), ShapedArray(a.shape[:-1], real_dtype(a.dtype))


def _eigh(a, *, lower):
    xp = array_module(a)
    if a.size == 0:
        return xp.zeros(a.shape, a.dtype), xp.zeros(a.shape[:-1], real_dtype(a.dtype))
    try:
        if xp is not np:
            w, v = xp.linalg.eigh(a, UPLO="L" if lower else "U")
        else:   # NumPy's eigh factors the transpose (other signs): SciPy's syevd, as JAX
            w, v = _lapack(a, lower)
    except (np.linalg.LinAlgError, ValueError):   # no convergence, non-finite input: NaN
        return (xp.full(a.shape, np.nan, a.dtype),
                xp.full(a.shape[:-1], np.nan, real_dtype(a.dtype)))
    return v.astype(a.dtype), w.astype(real_dtype(a.dtype))


def _lapack(a, lower):
    import scipy.linalg
    w = np.empty(a.shape[:-1], real_dtype(a.dtype))
    v = np.empty(a.shape, a.dtype)
    for i in np.ndindex(a.shape[:-2]):
        w[i], v[i] = scipy.linalg.eigh(a[i], lower=lower, driver="evd", check_finite=False)
    return w, v


eigh = register("eigh", _eigh_eval, _eigh, multiple_results=True)


def inverse_gaps(w, dtype):
    """F: 1 / (w[j] - w[i]) off the diagonal, 0 on it, in `dtype` (eigh's, eig's and, of the
    squared singular values, svd's derivative rules)."""
    a = E.aval(w)
    n = a.shape[-1]
    shape = a.shape + (n,)
    batch = tuple(range(a.ndim - 1))
    rows = E.broadcast_in_dim(w, shape=shape, broadcast_dimensions=batch + (a.ndim - 1,))
    cols = E.broadcast_in_dim(w, shape=shape, broadcast_dimensions=batch + (a.ndim,))
    eye = np.broadcast_to(np.eye(n, dtype=a.dtype), shape).copy()
    f = E.sub(E.div(E.scalar(1, a), E.add(E.sub(cols, rows), eye)), eye)
    return E.convert(f, dtype)


def _diagonal_matrix(d, dtype):
    a = E.aval(d)
    n = a.shape[-1]
    full = E.broadcast_in_dim(E.convert(d, dtype), shape=a.shape + (n,),
                              broadcast_dimensions=tuple(range(a.ndim)))
    return masked(full, np.eye(n))


def _diagonal(x):
    n = E.aval(x).shape[-1]
    return E.reduce_sum(masked(x, np.eye(n)), axes=(E.aval(x).ndim - 1,))


def _eigh_jvp(primals, tangents, outs, *, lower):
    (da,), (v, w) = tangents, outs
    dtype = E.aval(v).dtype
    s = matmul(matmul(h(v), da), v)
    dv = matmul(v, E.mul(inverse_gaps(w, dtype), s))
    dw = _diagonal(s)
    return [dv, E.real(dw) if dtype.kind == "c" else dw]


def _eigh_vjp(ct, primals, outs, *, lower):
    v, w = outs
    vb, wb = ct
    dtype = E.aval(v).dtype
    terms = []
    if vb is not None:
        terms.append(E.mul(inverse_gaps(w, dtype), matmul(t(v), vb)))
    if wb is not None:
        terms.append(_diagonal_matrix(wb, dtype))
    if not terms:
        return [None]
    sb = terms[0] if len(terms) == 1 else E.add(*terms)
    conj_v = E.conj(v) if dtype.kind == "c" else v
    return [matmul(matmul(conj_v, sb), t(v))]


JVP[eigh] = tangent_rule(_eigh_jvp)
VJP[eigh] = cotangent_rule(_eigh_vjp)
BATCH[eigh] = matrix_batch_rule(eigh)
