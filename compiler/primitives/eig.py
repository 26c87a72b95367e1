"""eig: the eigendecomposition of a general square matrix, JAX's `lax.linalg.eig` primitive.

`eig(a, compute_left_eigenvectors, compute_right_eigenvectors)` of an (..., n, n) matrix gives
`w` (..., n), the eigenvalues, then `vl` and `vr` (..., n, n), the left and right
eigenvectors in their columns, each only when asked for; every result is complex (complex64
for float32 and complex64 matrices). LAPACK's geev, as JAX on CPU: the eigenvalues in
LAPACK's order, each eigenvector of unit 2-norm with its largest component real. The NumPy
definition calls SciPy's geev (through `scipy.linalg.eig`; CuPy arrays, the CUDA backend's,
go through the host, as JAX's GPU default does); a matrix LAPACK fails to converge
on gives NaN in every result, as JAX.

Derivatives are JAX's. For the eigenvalues alone, with V the right eigenvectors,
dw = diag(V^-1 dA V) (the JVP binds eig again for V when the primal did not ask for it, and
inverts V through `lu`); the VJP is its transpose, V^-T diag(wbar) V^T, whose real part is
the cotangent of a real matrix. Eigenvectors' derivatives need `enable_eigvec_derivs=True`
(JAX's opt-in: they assume distinct eigenvalues; without it a NotImplementedError, as JAX's).
They are JAX's first-order perturbation rule with geev's normalisation differentiated
(unit 2-norm, largest component real): with P = V^-1 dA V and F[i, j] = 1 / (w[j] - w[i])
off the diagonal, U = V (F * P) and dv_j = u_j + c_j v_j, c_j = -re(v_j^H u_j)
- i im(u[k_j, j]) / v[k_j, j], k_j the row of v_j's largest |component|; the left
eigenvectors are the right ones of A^H (eigenvalues conj(w), tangent dA^H). The VJP is that
map's transpose under JAX's pairing re sum(x * y).
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from .core import register, JVP, VJP, BATCH
from .decompositions import (array_module, check_inexact, h, matmul, matrix_batch_rule, solve,
                             t)
from .eigh import _diagonal, _diagonal_matrix, inverse_gaps
from .lu import _factors, _permutation_matrix
from .rule_forms import tangent_rule, cotangent_rule


def complex_dtype(dtype):
    dtype = np.dtype(dtype)
    return dtype if dtype.kind == "c" else np.dtype(np.complex64 if dtype == np.float32
                                                    else np.complex128)


def _eig_eval(a, *, compute_left_eigenvectors, compute_right_eigenvectors,
              enable_eigvec_derivs=False):
    check_inexact("eig", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"The input to eig must be a square matrix. Got shape "
                         f"{tuple(a.shape)[-2:]}.")
    dtype = complex_dtype(a.dtype)
    count = int(compute_left_eigenvectors) + int(compute_right_eigenvectors)
    return (ShapedArray(a.shape[:-1], dtype),) + (ShapedArray(a.shape, dtype),) * count


def _eig(a, *, compute_left_eigenvectors, compute_right_eigenvectors,
         enable_eigvec_derivs=False):
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
    """Whether eigenvectors are asked for; a NotImplementedError without JAX's opt-in."""
    vectors = params["compute_left_eigenvectors"] or params["compute_right_eigenvectors"]
    if vectors and not params.get("enable_eigvec_derivs", False):
        raise NotImplementedError(
            "Derivatives of non-symmetric eigenvectors are only valid under assumptions on the "
            "input that kiln cannot check (distinct eigenvalues, as JAX's enable_eigvec_derivs "
            "says). Pass enable_eigvec_derivs=True to kiln.lax.linalg.eig to opt in, or "
            "differentiate the eigenvalues alone (jnp.linalg.eigvals).")
    return vectors


def _right_vectors(a):
    return E.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True)[1]


def _column_sums(x):
    return E.reduce_sum(x, axes=(E.aval(x).ndim - 2,))


def _columns(c, like):
    """c (..., n) broadcast down the columns of a (..., n, n) matrix."""
    a = E.aval(like)
    return E.broadcast_in_dim(c, shape=a.shape, broadcast_dimensions=tuple(
        range(a.ndim - 2)) + (a.ndim - 1,))


def _largest(v):
    """The one-hot (..., n, n) mask of each column's first largest |component| (geev makes
    that component real), as v's dtype."""
    a = E.aval(v)
    nd = a.ndim
    k = E.argmax(E.abs(v), axes=(nd - 2,), index_dtype=np.dtype(np.int32))
    rows = E.iota(dtype=np.dtype(np.int32), shape=a.shape, dimension=nd - 2)
    return E.convert(E.eq(rows, _columns(k, v)), a.dtype)


def _vector_jvp(w, v, da):
    """(dw, dv) of right eigenvectors v (columns) of eigenvalues w for the tangent da."""
    p = matmul(matmul(inverse(v), da), v)
    u = matmul(v, E.mul(inverse_gaps(w, E.aval(w).dtype), p))
    mask = _largest(v)
    re = E.neg(E.real(_column_sums(E.mul(E.conj(v), u))))
    im = E.neg(E.div(E.imag(_column_sums(E.mul(mask, u))),
                     E.real(_column_sums(E.mul(mask, v)))))
    c = E.complex(re, im)
    return _diagonal(p), E.add(u, E.mul(v, _columns(c, v)))


def _vector_vjp(w, v, vb):
    """The transpose of `_vector_jvp`'s dv in da, at the cotangent vb (under re sum(x * y)):
    dv = u + v c gives ub = vb and cb = colsum(v * vb); c = complex(-re(r), -im(q) / nu)
    gives rb = -re(cb) and qb = -i im(cb) / nu for r = colsum(conj(v) u), q = colsum(m u);
    then ub += conj(v) rb + m qb, pb = F * (V^T ub), dab = V^-T pb V^T."""
    mask = _largest(v)
    cb = _column_sums(E.mul(v, vb))
    nu = E.real(_column_sums(E.mul(mask, v)))
    zero = E.mul(E.real(cb), E.scalar(0, E.real(cb)))
    rb = E.complex(E.neg(E.real(cb)), zero)
    qb = E.complex(zero, E.neg(E.div(E.imag(cb), nu)))
    ub = E.add(vb, E.add(E.mul(E.conj(v), _columns(rb, v)), E.mul(mask, _columns(qb, v))))
    pb = E.mul(inverse_gaps(w, E.aval(w).dtype), matmul(t(v), ub))
    return matmul(matmul(t(inverse(v)), pb), t(v))


def _complex_tangent(a, da):
    return E.convert(da, complex_dtype(E.aval(a).dtype))


def _eig_jvp(primals, tangents, outs, **params):
    vectors = _refuse_vectors(params)
    (a,), (da,) = primals, tangents
    da = _complex_tangent(a, da)
    if not vectors:
        v = _right_vectors(a)
        return [_diagonal(matmul(matmul(inverse(v), da), v))]
    w, v = outs[0], outs[-1] if params["compute_right_eigenvectors"] else _right_vectors(a)
    dw, dv = _vector_jvp(w, v, da)
    result = [dw]
    if params["compute_left_eigenvectors"]:
        result.append(_vector_jvp(E.conj(w), outs[1], h(da))[1])
    if params["compute_right_eigenvectors"]:
        result.append(dv)
    return result


def _eig_vjp(ct, primals, outs, **params):
    _refuse_vectors(params)
    (a,) = primals
    w = outs[0]
    wb = ct[0]
    vlb = ct[1] if params["compute_left_eigenvectors"] else None
    vrb = ct[-1] if params["compute_right_eigenvectors"] else None
    dtype = complex_dtype(E.aval(a).dtype)
    parts = []
    if wb is not None or vrb is not None:
        v = outs[-1] if params["compute_right_eigenvectors"] else _right_vectors(a)
        if wb is not None:
            parts.append(matmul(matmul(t(inverse(v)), _diagonal_matrix(wb, dtype)), t(v)))
        if vrb is not None:
            parts.append(_vector_vjp(w, v, vrb))
    if vlb is not None:   # vl = vectors of A^H: the transpose of X -> X^H is Y -> Y^H
        parts.append(h(_vector_vjp(E.conj(w), outs[1], vlb)))
    if not parts:
        return [None]
    g = parts[0]
    for part in parts[1:]:
        g = E.add(g, part)
    return [g if E.aval(a).dtype.kind == "c" else E.real(g)]


JVP[eig] = tangent_rule(_eig_jvp)
VJP[eig] = cotangent_rule(_eig_vjp)
BATCH[eig] = matrix_batch_rule(eig)
