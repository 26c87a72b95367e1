"""lu: LU decomposition with partial pivoting, JAX's `lax.linalg.lu` primitive.

`lu(a)` of an (..., m, n) matrix gives three results, as JAX's: `lu` (..., m, n), the unit
lower factor L below the diagonal and U on and above it; `pivots` (..., min(m, n)) int32, row
i swapped with row pivots[i] in turn (LAPACK's getrf, 0-based); and `permutation` (..., m)
int32, those swaps applied to range(m), so that a[permutation] = L @ U. The pivot of a column
is its first entry of largest |re| + |im| (LAPACK's i?amax); a singular matrix factors without
error (zeros on U's diagonal), as in JAX.

The NumPy definition eliminates column by column over the whole batch at once with NumPy
only, so that the CUDA backend's per-primitive path runs it on CuPy arrays too. NumPy arrays
of LAPACK's types whose entries are all finite take LAPACK's getrf through SciPy instead, one
call per matrix, as the LLVM backend and JAX's CPU kernel do (`decompositions.on_lapack`: not
for large batches of small matrices): the elimination in Python cost 20x JAX's eager
factorisation of an 8x8 matrix. Where a NaN or infinity is present the loop runs: OpenBLAS's
pivot search among NaNs (i?amax) depends on its vector kernel, the dtype and the column's
length, where the loop's rule (the first NaN, as NumPy's argmax) is the one every kiln backend
follows.

Derivatives: only `lu` carries one (the integer results have none). The JVP is JAX's: with
x = P dA (P the permutation as a matrix), la = L^-1 x and lau = la U^-1 (L and U padded to
square with the identity), lu_dot = L tril(lau, -1) + triu(lau) U. The VJP is its transpose.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from .core import register, JVP, VJP, BATCH
from .decompositions import (array_module, check_inexact, masked, matmul, matrix_batch_rule,
                             lapack_routine, on_lapack,
                             solve, t)
from .rule_forms import tangent_rule, cotangent_rule


def _lu_eval(a):
    check_inexact("lu", a)
    if a.ndim < 2:
        raise TypeError(f"Input 0 to lu must have rank at least 2, but got shape={tuple(a.shape)}")
    *batch, m, n = a.shape
    batch = tuple(batch)
    i32 = np.dtype(np.int32)
    return (ShapedArray(a.shape, a.dtype), ShapedArray(batch + (min(m, n),), i32),
            ShapedArray(batch + (m,), i32))


def _lu(a):
    if on_lapack(a) and np.isfinite(a).all():
        return _getrf(a)
    xp = array_module(a)
    *batch, m, n = a.shape
    k = min(m, n)
    count = int(np.prod(batch, dtype=np.int64))
    x = a.reshape(count, m, n).copy()
    rows = xp.arange(count)
    pivots = xp.zeros((count, k), np.int32)
    perm = xp.tile(xp.arange(m, dtype=np.int32), (count, 1))
    if count == 1 and xp is np:
        _lu_one(x[0], pivots[0], perm[0])
        return (x.reshape(a.shape), pivots.reshape(tuple(batch) + (k,)),
                perm.reshape(tuple(batch) + (m,)))
    with np.errstate(all="ignore"):
        for j in range(k):
            column = x[:, j:, j]
            p = j + xp.argmax(xp.abs(column.real) + xp.abs(column.imag), axis=1)
            pivots[:, j] = p
            _swap(x, rows, j, p)
            _swap(perm, rows, j, p)
            pivot = x[:, j, j][:, None]
            factor = xp.where(pivot != 0, x[:, j + 1:, j] / pivot, x[:, j + 1:, j])
            x[:, j + 1:, j] = factor
            x[:, j + 1:, j + 1:] -= factor[:, :, None] * x[:, j, j + 1:][:, None, :]
    return (x.reshape(a.shape), pivots.reshape(tuple(batch) + (k,)),
            perm.reshape(tuple(batch) + (m,)))


def _getrf(a):
    """`_lu` by LAPACK's getrf through SciPy, one call per matrix (its pivots are 0-based),
    `permutation` from its pivots."""
    getrf = lapack_routine("getrf", a.dtype)
    *batch, m, n = a.shape
    batch, k = tuple(batch), min(m, n)
    matrices = a.reshape(-1, m, n)
    count = matrices.shape[0]
    x = np.empty_like(matrices)
    pivots = np.empty((count, k), np.int32)
    perm = np.empty((count, m), np.int32)
    with np.errstate(all="ignore"):
        for i in range(count):
            x[i], piv, _ = getrf(matrices[i])   # info > 0 (singular) is no error
            pivots[i] = piv
            order = list(range(m))
            for j, p in enumerate(piv.tolist()):
                order[j], order[p] = order[p], order[j]
            perm[i] = order
    return x.reshape(a.shape), pivots.reshape(batch + (k,)), perm.reshape(batch + (m,))


def _lu_one(x, pivots, perm):
    """`_lu`'s elimination of one matrix `x` (m, n) in place, with its `pivots` and `perm`:
    the same operations on each element, without the batch's index arrays (the same bits;
    a real column's |re| + |im| is its |re|)."""
    m, n = x.shape
    real = x.dtype.kind != "c"
    with np.errstate(all="ignore"):
        for j in range(min(m, n)):
            column = x[j:, j]
            p = j + int(np.argmax(np.abs(column) if real else
                                  np.abs(column.real) + np.abs(column.imag)))
            pivots[j] = p
            if p != j:
                x[[j, p]] = x[[p, j]]
                perm[[j, p]] = perm[[p, j]]
            pivot = x[j, j]
            below = x[j + 1:, j]
            factor = np.where(pivot != 0, below / pivot, below)
            x[j + 1:, j] = factor
            x[j + 1:, j + 1:] -= factor[:, None] * x[j, j + 1:][None, :]


def _swap(x, rows, j, p):
    """Swap entry (or row) j with entry p[b] of each matrix b of the batch."""
    mine, theirs = x[:, j].copy(), x[rows, p].copy()
    x[:, j] = theirs
    x[rows, p] = mine


lu = register("lu", _lu_eval, _lu, multiple_results=True)


def _factors(lu_value):
    """L (m x m) and U (n x n), each padded to square with the identity."""
    a = E.aval(lu_value)
    *batch, m, n = a.shape
    k = min(m, n)
    nd = len(a.shape)
    zero = E.scalar(0, a)
    left = E.slice_(lu_value, start_indices=(0,) * nd, limit_indices=tuple(batch) + (m, k),
                    strides=None)
    left = masked(left, np.tril(np.ones((m, k)), -1))
    left = E.pad(left, zero, padding_config=((0, 0, 0),) * (nd - 1) + ((0, m - k, 0),))
    L = E.add(left, np.broadcast_to(np.eye(m, dtype=a.dtype), a.shape[:-2] + (m, m)).copy())
    right = E.slice_(lu_value, start_indices=(0,) * nd, limit_indices=tuple(batch) + (k, n),
                     strides=None)
    right = masked(right, np.triu(np.ones((k, n))))
    right = E.pad(right, zero, padding_config=((0, 0, 0),) * (nd - 2) + ((0, n - k, 0), (0, 0, 0)))
    u_eye = np.diag((np.arange(n) >= k).astype(a.dtype))
    U = E.add(right, np.broadcast_to(u_eye, a.shape[:-2] + (n, n)).copy())
    return L, U


def _permutation_matrix(permutation, dtype):
    """P with P[..., i, j] = (permutation[..., i] == j), so that P @ a = a[permutation]."""
    a = E.aval(permutation)
    m = a.shape[-1]
    shape = a.shape + (m,)
    rows = E.broadcast_in_dim(permutation, shape=shape, broadcast_dimensions=tuple(range(a.ndim)))
    cols = E.iota(dtype=a.dtype, shape=shape, dimension=a.ndim)
    return E.convert(E.eq(rows, cols), dtype)


def _lu_jvp(primals, tangents, outs):
    (da,), (lu_value, _, permutation) = tangents, outs
    L, U = _factors(lu_value)
    x = matmul(_permutation_matrix(permutation, E.aval(lu_value).dtype), da)
    la = solve(L, x, left_side=True, lower=True, unit_diagonal=True)
    lau = solve(U, la, left_side=False, lower=False)
    m, n = E.aval(lau).shape[-2:]
    lower = masked(lau, np.tril(np.ones((m, n)), -1))
    upper = masked(lau, np.triu(np.ones((m, n))))
    return [E.add(matmul(L, lower), matmul(upper, U)), None, None]


def _lu_vjp(ct, primals, outs):
    lu_value, _, permutation = outs
    g = ct[0]
    if g is None:
        return [None]
    L, U = _factors(lu_value)
    m, n = E.aval(lu_value).shape[-2:]
    lau_bar = E.add(masked(matmul(t(L), g), np.tril(np.ones((m, n)), -1)),
                    masked(matmul(g, t(U)), np.triu(np.ones((m, n)))))
    la_bar = solve(U, lau_bar, left_side=False, lower=False, transpose_a=True)
    x_bar = solve(L, la_bar, left_side=True, lower=True, unit_diagonal=True, transpose_a=True)
    return [matmul(t(_permutation_matrix(permutation, E.aval(lu_value).dtype)), x_bar)]


JVP[lu] = tangent_rule(_lu_jvp)
VJP[lu] = cotangent_rule(_lu_vjp)
BATCH[lu] = matrix_batch_rule(lu)
