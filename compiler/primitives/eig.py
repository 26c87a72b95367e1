"""eig: the eigendecomposition of a general square matrix, JAX's `lax.linalg.eig` primitive.

`eig(a, compute_left_eigenvectors, compute_right_eigenvectors)` of an (..., n, n) matrix gives
`w` (..., n), the eigenvalues, then `vl` and `vr` (..., n, n), the left and right
eigenvectors in their columns, each only when asked for; every result is complex (complex64
for float32 and complex64 matrices). LAPACK's geev, as JAX on CPU: the eigenvalues in
LAPACK's order, each eigenvector of unit 2-norm with its largest component real. The NumPy
definition calls SciPy's geev (through `scipy.linalg.eig`; CuPy arrays, the CUDA backend's,
go through the host, as JAX's GPU default does); a matrix LAPACK fails to converge
on gives NaN in every result, as JAX.

Derivatives are JAX's for the eigenvalues alone: with V the right eigenvectors,
dw = diag(V^-1 dA V) (the JVP binds eig again for V when the primal did not ask for it, and
inverts V through `lu`); the VJP is its transpose, V^-T diag(wbar) V^T, whose real part is
the cotangent of a real matrix. Eigenvectors' derivatives (JAX's `enable_eigvec_derivs`) are
not provided: a NotImplementedError, as JAX's default.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from .core import register, JVP, VJP, BATCH
from .decompositions import array_module, check_inexact, matmul, matrix_batch_rule, solve, t
from .eigh import _diagonal, _diagonal_matrix
from .lu import _factors, _permutation_matrix
from .rule_forms import tangent_rule, cotangent_rule


def complex_dtype(dtype):
    dtype = np.dtype(dtype)
    return dtype if dtype.kind == "c" else np.dtype(np.complex64 if dtype == np.float32
                                                    else np.complex128)


def _eig_eval(a, *, compute_left_eigenvectors, compute_right_eigenvectors):
    check_inexact("eig", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"The input to eig must be a square matrix. Got shape "
                         f"{tuple(a.shape)[-2:]}.")
    dtype = complex_dtype(a.dtype)
    count = int(compute_left_eigenvectors) + int(compute_right_eigenvectors)
    return (ShapedArray(a.shape[:-1], dtype),) + (ShapedArray(a.shape, dtype),) * count


def _eig(a, *, compute_left_eigenvectors, compute_right_eigenvectors):
    xp = array_module(a)
    if xp is not np:   # CuPy arrays (the CUDA backend): LAPACK on the host, as JAX on GPU
        outs = _eig(xp.asnumpy(a), compute_left_eigenvectors=compute_left_eigenvectors,
                    compute_right_eigenvectors=compute_right_eigenvectors)
        return tuple(xp.asarray(x) for x in outs)
    import scipy.linalg
    dtype = complex_dtype(a.dtype)
    w = np.zeros(a.shape[:-1], dtype)
    vl, vr = np.zeros(a.shape, dtype), np.zeros(a.shape, dtype)
    for i in np.ndindex(a.shape[:-2] if a.size else (0,)):
        try:
            with np.errstate(all="ignore"):
                w[i], vl[i], vr[i] = scipy.linalg.eig(a[i], left=True, right=True,
                                                      check_finite=False)
        except (np.linalg.LinAlgError, ValueError):   # no convergence, non-finite input
            w[i], vl[i], vr[i] = np.nan, np.nan, np.nan
    return ((w,) + ((vl,) if compute_left_eigenvectors else ())
            + ((vr,) if compute_right_eigenvectors else ()))


eig = register("eig", _eig_eval, _eig, multiple_results=True)


def inverse(v):
    """v^-1 through `lu`: U^-1 L^-1 P."""
    lu_value, _, permutation = E.lu(v)
    L, U = _factors(lu_value)
    p = _permutation_matrix(permutation, E.aval(v).dtype)
    la = solve(L, p, left_side=True, lower=True, unit_diagonal=True)
    return solve(U, la, left_side=True, lower=False)


def _refuse_vectors(params):
    if params["compute_left_eigenvectors"] or params["compute_right_eigenvectors"]:
        raise NotImplementedError(
            "The derivatives of eigenvectors from eig are not implemented in kiln (JAX's "
            "enable_eigvec_derivs); differentiate the eigenvalues alone (compute_left_"
            "eigenvectors=False, compute_right_eigenvectors=False, or jnp.linalg.eigvals).")


def _right_vectors(a):
    return E.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True)[1]


def _eig_jvp(primals, tangents, outs, **params):
    _refuse_vectors(params)
    (a,), (da,) = primals, tangents
    v = _right_vectors(a)
    dtype = E.aval(v).dtype
    return [_diagonal(matmul(matmul(inverse(v), E.convert(da, dtype)), v))]


def _eig_vjp(ct, primals, outs, **params):
    _refuse_vectors(params)
    (a,), (wb,) = primals, ct
    if wb is None:
        return [None]
    v = _right_vectors(a)
    dtype = E.aval(v).dtype
    g = matmul(matmul(t(inverse(v)), _diagonal_matrix(wb, dtype)), t(v))
    return [g if E.aval(a).dtype.kind == "c" else E.real(g)]


JVP[eig] = tangent_rule(_eig_jvp)
VJP[eig] = cotangent_rule(_eig_vjp)
BATCH[eig] = matrix_batch_rule(eig)
