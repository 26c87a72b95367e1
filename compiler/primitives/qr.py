"""qr: Householder QR decomposition, JAX's `lax.linalg.qr` primitive (without pivoting).

`qr(a, full_matrices)` of an (..., m, n) matrix gives q (..., m, m) and r (..., m, n) with
`full_matrices`, else q (..., m, k) and r (..., k, n), k = min(m, n): LAPACK's geqrf then
orgqr/ungqr, so the signs are LAPACK's (R's diagonal may be negative), as NumPy's and JAX's
on CPU. The NumPy definition is `np.linalg.qr`, which CuPy also provides (cuSOLVER).

Derivatives are JAX's: for m >= n, with A = dX R^-1 and C = Q^H A,
do = tril(C, -1) - tril(C, -1)^H (plus the imaginary part of C's diagonal), dQ = Q (do - C) + A
and dR = (C - do) R; for a wide matrix (m < n) the square block X1 = Q R1 takes that rule and
R2 = Q^H X2 gives dR2 = dQ^H X2 + Q^H dX2. The VJP is the transpose of that linear map. The
full-matrices factorisation of a tall matrix (m > n) has no derivative here (JAX's uses a
further construction, arXiv 2409.13374): a NotImplementedError.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from .core import register, JVP, VJP, BATCH
from .decompositions import (array_module, check_inexact, h, masked, matmul,
                             matrix_batch_rule, solve, t)
from .rule_forms import tangent_rule, cotangent_rule


def _shapes(shape, full_matrices):
    *batch, m, n = shape
    k = m if full_matrices else min(m, n)
    return tuple(batch) + (m, k), tuple(batch) + (k, n)


def _qr_eval(a, *, full_matrices):
    check_inexact("qr", a)
    if a.ndim < 2:
        raise TypeError(f"Input 0 to qr must have rank at least 2, but got shape={tuple(a.shape)}")
    q, r = _shapes(a.shape, full_matrices)
    return ShapedArray(q, a.dtype), ShapedArray(r, a.dtype)


def _qr(a, *, full_matrices):
    xp = array_module(a)
    q_shape, r_shape = _shapes(a.shape, full_matrices)
    if a.size == 0:
        m = a.shape[-2]
        eye = xp.eye(m, q_shape[-1], dtype=a.dtype)
        return (xp.broadcast_to(eye, q_shape).copy(), xp.zeros(r_shape, a.dtype))
    q, r = xp.linalg.qr(a, mode="complete" if full_matrices else "reduced")
    return q.astype(a.dtype), r.astype(a.dtype)


qr = register("qr", _qr_eval, _qr, multiple_results=True)


def _slice_last(x, start, stop):
    a = E.aval(x)
    nd = a.ndim
    return E.slice_(x, start_indices=(0,) * (nd - 1) + (start,),
                    limit_indices=tuple(a.shape[:-1]) + (stop,), strides=None)


def _diagonal_imaginary(c, n):
    """I * (c - real(c)): the imaginary part of c's diagonal (zero for real c)."""
    if E.aval(c).dtype.kind != "c":
        return None
    return masked(E.sub(c, E.convert(E.real(c), E.aval(c).dtype)), np.eye(n))


def _thin_jvp(q, r, dx):
    n = E.aval(r).shape[-1]
    a = solve(r, dx)
    c = matmul(h(q), a)
    lower = masked(c, np.tril(np.ones((n, n)), -1))
    do = E.sub(lower, h(lower))
    imaginary = _diagonal_imaginary(c, n)
    if imaginary is not None:
        do = E.add(do, imaginary)
    return E.add(matmul(q, E.sub(do, c)), a), matmul(E.sub(c, do), r)


def _thin_vjp(q, r, qb, rb):
    """The transpose of `_thin_jvp` in dx, at cotangents qb (of dq) and rb (of dr)."""
    n = E.aval(r).shape[-1]
    rbt = matmul(rb, t(r))
    cb = E.sub(rbt, matmul(t(q), qb))
    dob = E.sub(matmul(t(q), qb), rbt)
    imaginary = _diagonal_imaginary(dob, n)
    if imaginary is not None:
        cb = E.add(cb, imaginary)
    cb = E.add(cb, masked(E.sub(dob, h(dob)), np.tril(np.ones((n, n)), -1)))
    conj_q = E.conj(q) if E.aval(q).dtype.kind == "c" else q
    ab = E.add(qb, matmul(conj_q, cb))
    return solve(r, ab, transpose_a=True)


def _no_derivative(a, full_matrices):
    m, n = E.aval(a).shape[-2:]
    if full_matrices and m > n:
        raise NotImplementedError(
            "kiln has no derivative of qr with full_matrices=True for a tall matrix "
            f"({m} x {n}); use full_matrices=False (jnp.linalg.qr(..., mode='reduced'))")


def _qr_jvp(primals, tangents, outs, *, full_matrices):
    (x,), (dx,) = primals, tangents
    _no_derivative(x, full_matrices)
    q, r = outs
    m, n = E.aval(x).shape[-2:]
    if m >= n:
        return list(_thin_jvp(q, r, dx))
    dq, dr1 = _thin_jvp(q, _slice_last(r, 0, m), _slice_last(dx, 0, m))
    x2, dx2 = _slice_last(x, m, n), _slice_last(dx, m, n)
    dr2 = E.add(matmul(h(dq), x2), matmul(h(q), dx2))
    return [dq, E.concatenate(dr1, dr2, dimension=E.aval(x).ndim - 1)]


def _qr_vjp(ct, primals, outs, *, full_matrices):
    (x,), (q, r) = primals, outs
    _no_derivative(x, full_matrices)
    qb, rb = (E.instantiate(c, E.aval(v)) for c, v in zip(ct, outs))
    m, n = E.aval(x).shape[-2:]
    if m >= n:
        return [_thin_vjp(q, r, qb, rb)]
    x2 = _slice_last(x, m, n)
    rb1, rb2 = _slice_last(rb, 0, m), _slice_last(rb, m, n)
    w = matmul(rb2, t(x2))                   # the cotangent of h(dq)
    qb = E.add(qb, h(w))
    dx1 = _thin_vjp(q, _slice_last(r, 0, m), qb, rb1)
    conj_q = E.conj(q) if E.aval(q).dtype.kind == "c" else q
    dx2 = matmul(conj_q, rb2)
    return [E.concatenate(dx1, dx2, dimension=E.aval(x).ndim - 1)]


JVP[qr] = tangent_rule(_qr_jvp)
VJP[qr] = cotangent_rule(_qr_vjp)
BATCH[qr] = matrix_batch_rule(qr)
