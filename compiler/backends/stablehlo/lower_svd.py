"""StableHLO rule of `svd` (compiler/primitives/svd.py). StableHLO has no SVD operation (JAX
calls LAPACK's gesdd through a custom call, which a PJRT plug-in need not have), so the
decomposition is one-sided Jacobi (Hestenes) of plain operations, on the whole batch at once,
for a matrix with at least as many rows as columns (a wide one is conjugate-transposed first,
and u and vt trade places):

- the sweeps of lower_jacobi.py over the pairs of columns, carried as the rows of X^T: each
  pair's rotation is taken from its entries of the Gram matrix G = X^H X (g_pp, g_qq, g_pq:
  sums over the two columns, O(m) each) and applied to those two columns only: X becomes
  X J, V becomes V J. Sweeps go on while some pair of columns has
  |g_ij| > sqrt(m) eps sqrt(g_ii g_jj) (LAPACK gesvj's tolerance), at most MAX_SWEEPS times;
- the singular values are the columns' norms, sorted descending with X's and V's columns;
- u is the Householder QR of the sorted X (lower_qr.py) with each column's sign set so that
  R's (real) diagonal is not negative: the columns of X over their norms where those are not
  zero, completed to an orthonormal basis (all of it with `full_matrices`).

The singular vectors' signs (phases) are the iteration's, not gesdd's. A matrix with a NaN or
an infinity gives NaN; an empty one gives zeros and the identity's columns, as the reference.
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .lower_decompositions import any_true, conj, real, triangle_mask
from .lower_jacobi import (eye_like, halves, magnitude2, matmul, nan_where, not_finite, rotate,
                           sort_columns, sweeps)
from .lower_lu import pick, total
from .lower_qr import adjoint, householder_qr, transposed


def _gram(ctx, x):
    """X^H X."""
    return matmul(ctx, conj(ctx, x), x, transpose_x=True)


def _column_pairs(ctx, xt):
    """(g_pp, g_qq, g_pq) of each pair of columns (k, h + k) of X, from xt = X^T."""
    nb = xt.aval.ndim - 2
    p, q = halves(ctx, xt, nb)
    return (total(ctx, magnitude2(ctx, p), nb + 1), total(ctx, magnitude2(ctx, q), nb + 1),
            total(ctx, ctx.binary("stablehlo.multiply", conj(ctx, p), q), nb + 1))


def _one_sided(ctx, xt, c, u):
    """(X J)^T = J^T X^T: the round's rotations of the pairs of X's columns."""
    return rotate(ctx, xt, c, u)


def _unorthogonal(ctx, x, m):
    """bool per matrix: some pair of x's columns is further from orthogonal than gesvj's
    tolerance."""
    nb = x.aval.ndim - 2
    g2 = magnitude2(ctx, _gram(ctx, x))
    eye = triangle_mask(ctx, g2.aval.shape, "EQ")
    d = ctx.unary("stablehlo.sqrt", pick(ctx, g2, eye, nb + 1))
    lead = list(range(nb))
    dd = ctx.binary("stablehlo.multiply", ctx.broadcast(d, g2.aval.shape, lead + [nb]),
                    ctx.broadcast(d, g2.aval.shape, lead + [nb + 1]))
    tol = float(np.sqrt(m) * np.finfo(g2.aval.dtype).eps)
    bad = ctx.compare("GT", g2, ctx.binary("stablehlo.multiply", dd,
                                           ctx.scalar_like(tol * tol, dd)))
    return any_true(ctx, ctx.binary("stablehlo.and", bad, ctx.unary("stablehlo.not", eye)),
                    [nb, nb + 1])


def _tall(ctx, x, full_matrices, compute_uv):
    """(s, u, v) of x (batch, m, n), m >= n: s descending, u (m, m or n), v (n, n)."""
    *batch, m, n = x.aval.shape
    nb = len(batch)
    xt, v = sweeps(ctx, transposed(ctx, x), (nb,), _column_pairs, _one_sided,
                   lambda ctx, xt: _unorthogonal(ctx, transposed(ctx, xt), m), compute_uv)
    x = transposed(ctx, xt)
    norms = ctx.unary("stablehlo.sqrt", total(ctx, magnitude2(ctx, x), nb))
    keys = ctx.unary("stablehlo.negate", norms)
    if not compute_uv:
        return ctx.unary("stablehlo.negate", sort_columns(ctx, keys, [])[0]), None, None
    keys, x, v = sort_columns(ctx, keys, [x, v])
    q, r = householder_qr(ctx, x, full_matrices)
    diag = pick(ctx, r, triangle_mask(ctx, r.aval.shape, "EQ"), nb + 1)
    diag = real(ctx, diag) if diag.aval.dtype.kind == "c" else diag   # larfg's beta is real
    one = ctx.scalar_like(1, diag)
    sign = ctx.select(ctx.compare("LT", diag, ctx.scalar_like(0, diag)),
                      ctx.unary("stablehlo.negate", one), one)
    u = ctx.binary("stablehlo.multiply", q, ctx.broadcast(ctx.convert(sign, q.aval.dtype),
                                                          q.aval.shape, list(range(nb)) + [nb + 1]))
    return ctx.unary("stablehlo.negate", keys), u, v


def _svd(ctx, args, *, full_matrices, compute_uv):
    (a,) = args
    avals = ctx.out_avals
    if a.aval.size == 0:
        return [ctx.splat(0, avals[0])] + [eye_like(ctx, o) for o in avals[1:]]
    m, n = a.aval.shape[-2:]
    wide = m < n
    s, u, v = _tall(ctx, adjoint(ctx, a) if wide else a, full_matrices, compute_uv)
    bad = not_finite(ctx, a)
    if not compute_uv:
        return [nan_where(ctx, bad, s)]
    u, vt = (v, adjoint(ctx, u)) if wide else (u, adjoint(ctx, v))
    return [nan_where(ctx, bad, x) for x in (s, u, vt)]


STABLEHLO[PRIMITIVES["svd"]] = _svd
