"""svd: the singular value decomposition, JAX's `lax.linalg.svd` primitive.

`svd(a, full_matrices, compute_uv)` of an (..., m, n) matrix gives `s` (..., k), k = min(m, n),
the singular values in descending order (real: float32 for complex64), and with `compute_uv`
also `u` (..., m, m or k) and `vt` (..., n or k, n), so that a = u diag(s) vt. LAPACK's gesdd,
as JAX on CPU (the singular vectors' signs are gesdd's); the NumPy definition calls SciPy's
gesdd on each matrix, or `cupy.linalg.svd` (cuSOLVER) on CuPy arrays. A matrix gesdd fails on
gives NaN, as in JAX. An empty matrix gives the identity's columns as u and vt.

Derivatives are JAX's (`_svd_jvp_rule`), for reduced factors (`full_matrices=False`, or a
square matrix) or singular values alone, real and complex matrices: with dS = U^H dA V and
F[i, j] = 1 / (s[j]^2 - s[i]^2) off the diagonal, ds = re diag(dS),
dU = U (F * (dS S + (dS S)^H) + D) (D: i Im(dS[i, i]) / s[i] on the diagonal, zero for real
matrices; plus (I - U U^H) dA V / s for a tall matrix) and dV = V (F * (S dS + (S dS)^H))
(plus (I - V V^H) dA^H U / s for a wide one). The VJP is its transpose under JAX's pairing
re sum(x * y). Repeated singular values make F infinite (the vectors' derivative is inf/NaN,
the values' stays finite), as in JAX; full matrices with singular vectors of a non-square
matrix raise NotImplementedError, as in JAX.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from .core import register, JVP, VJP, BATCH
from .decompositions import (array_module, check_inexact, h, masked, matmul, matrix_batch_rule,
                             t)
from .eigh import inverse_gaps, real_dtype
from .rule_forms import tangent_rule, cotangent_rule


def shapes(shape, full_matrices):
    """The shapes of s, u and vt."""
    *batch, m, n = shape
    batch = tuple(batch)
    k = min(m, n)
    return (batch + (k,), batch + (m, m if full_matrices else k),
            batch + (n if full_matrices else k, n))


def _svd_eval(a, *, full_matrices, compute_uv):
    check_inexact("svd", a)
    if a.ndim < 2:
        raise TypeError(f"Input 0 to svd must have rank at least 2, but got shape={tuple(a.shape)}")
    s, u, vt = shapes(a.shape, full_matrices)
    values = ShapedArray(s, real_dtype(a.dtype))
    if not compute_uv:
        return (values,)
    return values, ShapedArray(u, a.dtype), ShapedArray(vt, a.dtype)


def _svd(a, *, full_matrices, compute_uv):
    xp = array_module(a)
    s_shape, u_shape, vt_shape = shapes(a.shape, full_matrices)
    s = xp.zeros(s_shape, real_dtype(a.dtype))
    u = xp.broadcast_to(xp.eye(*u_shape[-2:], dtype=a.dtype), u_shape).copy()
    vt = xp.broadcast_to(xp.eye(*vt_shape[-2:], dtype=a.dtype), vt_shape).copy()
    if a.size:
        if xp is not np:
            u, s, vt = xp.linalg.svd(a, full_matrices=full_matrices)
        else:
            _gesdd(a, full_matrices, s, u, vt)
    return (s, u, vt) if compute_uv else (s,)


def _gesdd(a, full_matrices, s, u, vt):
    import scipy.linalg
    for i in np.ndindex(a.shape[:-2]):
        try:
            u[i], s[i], vt[i] = scipy.linalg.svd(a[i], full_matrices=full_matrices,
                                                 lapack_driver="gesdd", check_finite=False)
        except (np.linalg.LinAlgError, ValueError):   # no convergence, non-finite input
            u[i], s[i], vt[i] = np.nan, np.nan, np.nan


svd = register("svd", _svd_eval, _svd, multiple_results=True)


def _check_derivative(a, full_matrices, compute_uv):
    m, n = E.aval(a).shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError("Singular value decomposition JVP not implemented for full "
                                  "matrices; use full_matrices=False")


def _like(x, y):
    """`x` (real) converted to `y`'s dtype (complex for a complex matrix)."""
    return E.convert(x, E.aval(y).dtype)


def _scale_columns(x, s):
    """x diag(s) (s: (..., k) over x's last axis)."""
    a = E.aval(x)
    return E.mul(x, _like(E.broadcast_in_dim(s, shape=a.shape, broadcast_dimensions=tuple(
        range(a.ndim - 2)) + (a.ndim - 1,)), x))


def _scale_rows(x, s):
    """diag(s) x."""
    a = E.aval(x)
    return E.mul(x, _like(E.broadcast_in_dim(s, shape=a.shape, broadcast_dimensions=tuple(
        range(a.ndim - 1))), x))


def _inverse(s):
    """1 / s, 0 where s is 0 (JAX's s_inv)."""
    zeros = E.convert(E.eq(s, E.scalar(0, s)), E.aval(s).dtype)
    return E.sub(E.div(E.scalar(1, s), E.add(s, zeros)), zeros)


def _diagonal(x):
    n = E.aval(x).shape[-1]
    return E.reduce_sum(masked(x, np.eye(n)), axes=(E.aval(x).ndim - 1,))


def _factors(a, outs, compute_uv):
    """s, U, V of the reduced factorisation (bound again when only s was asked for)."""
    if compute_uv:
        s, u, vt = outs
    else:
        s, u, vt = E.svd(a, full_matrices=False, compute_uv=True)
    return s, u, h(vt)


def _complex(a):
    return E.aval(a).dtype.kind == "c"


def _conj(x):
    return E.conj(x) if _complex(x) else x


def _svd_jvp(primals, tangents, outs, *, full_matrices, compute_uv):
    (a,), (da,) = primals, tangents
    _check_derivative(a, full_matrices, compute_uv)
    s, u, v = _factors(a, outs, compute_uv)
    ds_mat = matmul(matmul(h(u), da), v)
    ds = _diagonal(E.real(ds_mat) if _complex(a) else ds_mat)
    if not compute_uv:
        return [ds]
    f = inverse_gaps(E.mul(s, s), E.aval(a).dtype)
    dss = _scale_columns(ds_mat, s)
    sds = _scale_rows(ds_mat, s)
    inner = E.mul(f, E.add(dss, h(dss)))
    if _complex(a):   # D: i Im(dS[i, i]) / s[i]
        k = E.aval(s).shape[-1]
        half = masked(E.mul(E.scalar(0.5, ds_mat), E.sub(ds_mat, h(ds_mat))), np.eye(k))
        inner = E.add(inner, _scale_columns(half, _inverse(s)))
    du = matmul(u, inner)
    dv = matmul(v, E.mul(f, E.add(sds, h(sds))))
    m, n = E.aval(a).shape[-2:]
    if m > n:
        dav = matmul(da, v)
        du = E.add(du, _scale_columns(E.sub(dav, matmul(u, matmul(h(u), dav))), E.div(1, s)))
    if n > m:
        dau = matmul(h(da), u)
        dv = E.add(dv, _scale_columns(E.sub(dau, matmul(v, matmul(h(v), dau))), E.div(1, s)))
    return [ds, du, h(dv)]


def _svd_vjp(ct, primals, outs, *, full_matrices, compute_uv):
    """The transpose of `_svd_jvp` in dA, under JAX's pairing re sum(x * y): a C-linear
    X -> A X B transposes to Y -> A^T Y B^T, X -> X^H to Y -> Y^H, re to the complex
    embedding, and X -> (X - X^H) / 2 to itself."""
    (a,) = primals
    _check_derivative(a, full_matrices, compute_uv)
    s, u, v = _factors(a, outs, compute_uv)
    sb = ct[0]
    ub, vtb = (ct[1], ct[2]) if compute_uv else (None, None)
    k = E.aval(s).shape[-1]
    terms = [] if sb is None else [_like(_diagonal_matrix(sb, k), a)]
    f = None if ub is None and vtb is None else inverse_gaps(E.mul(s, s), E.aval(a).dtype)
    extra = []
    m, n = E.aval(a).shape[-2:]
    if ub is not None:
        inner = matmul(t(u), ub)                     # the cotangent of U^-1 dU
        y = E.mul(f, inner)
        terms.append(_scale_columns(E.add(y, h(y)), s))
        if _complex(a):
            diagonal = masked(E.mul(E.scalar(0.5, inner), E.sub(inner, E.conj(inner))),
                              np.eye(k))
            terms.append(_scale_columns(diagonal, _inverse(s)))
        if m > n:
            proj = E.sub(ub, matmul(_conj(u), matmul(t(u), ub)))
            extra.append(matmul(_scale_columns(proj, E.div(1, s)), t(v)))
    if vtb is not None:
        vb = h(vtb)
        w = E.mul(f, matmul(t(v), vb))
        terms.append(_scale_rows(E.add(w, h(w)), s))
        if n > m:
            proj = E.sub(vb, matmul(_conj(v), matmul(t(v), vb)))
            extra.append(h(matmul(_scale_columns(proj, E.div(1, s)), t(u))))
    if not terms and not extra:
        return [None]
    parts = ([matmul(matmul(_conj(u), _sum(terms)), t(v))] if terms else []) + extra
    return [_sum(parts)]


def _sum(xs):
    out = xs[0]
    for x in xs[1:]:
        out = E.add(out, x)
    return out


def _diagonal_matrix(d, k):
    a = E.aval(d)
    full = E.broadcast_in_dim(d, shape=a.shape + (k,), broadcast_dimensions=tuple(range(a.ndim)))
    return masked(full, np.eye(k))


JVP[svd] = tangent_rule(_svd_jvp)
VJP[svd] = cotangent_rule(_svd_vjp)
BATCH[svd] = matrix_batch_rule(svd)
