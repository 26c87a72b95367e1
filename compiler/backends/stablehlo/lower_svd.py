"""StableHLO rule of `svd` (compiler/primitives/svd.py) for real matrices. StableHLO has no SVD
operation (JAX calls LAPACK's gesdd through a custom call, which a PJRT plug-in need not have),
so the decomposition is one-sided Jacobi (Hestenes) of plain operations, on the whole batch at
once, for a matrix with at least as many rows as columns (a wide one is transposed first, and
u and vt trade places):

- the sweeps of lower_jacobi.py, with each round's rotations taken from the Gram matrix
  G = X^T X of the current columns and applied to the columns only: X becomes X J, V
  becomes V J. Sweeps go on while some pair of columns has
  g_ij^2 > (sqrt(m) eps)^2 g_ii g_jj (LAPACK gesvj's tolerance), at most MAX_SWEEPS times;
- the singular values are the columns' norms, sorted descending with X's and V's columns;
- u is the Householder QR of the sorted X (lower_qr.py) with each column's sign set so that
  R's diagonal is not negative: the columns of X over their norms where those are not zero,
  completed to an orthonormal basis (all of it with `full_matrices`).

The singular vectors' signs are the iteration's, not gesdd's. A matrix with a NaN or an
infinity gives NaN; an empty one gives zeros and the identity's columns, as the reference.
Complex matrices are a located error.
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .lower_decompositions import any_true, triangle_mask
from .lower_jacobi import (eye_like, matmul, nan_where, not_finite, real_only, sort_columns,
                           swap_last, sweeps)
from .lower_lu import pick, total
from .lower_qr import householder_qr


def _unorthogonal(ctx, x, m):
    """bool per matrix: some pair of x's columns is further from orthogonal than gesvj's
    tolerance."""
    nb = x.aval.ndim - 2
    g = matmul(ctx, x, x, transpose_x=True)
    eye = triangle_mask(ctx, g.aval.shape, "EQ")
    d = pick(ctx, g, eye, nb + 1)
    lead = list(range(nb))
    dd = ctx.binary("stablehlo.multiply", ctx.broadcast(d, g.aval.shape, lead + [nb]),
                    ctx.broadcast(d, g.aval.shape, lead + [nb + 1]))
    tol = float(np.sqrt(m) * np.finfo(x.aval.dtype).eps)
    bad = ctx.compare("GT", ctx.binary("stablehlo.multiply", g, g),
                      ctx.binary("stablehlo.multiply", dd, ctx.scalar_like(tol * tol, dd)))
    return any_true(ctx, ctx.binary("stablehlo.and", bad, ctx.unary("stablehlo.not", eye)),
                    [nb, nb + 1])


def _tall(ctx, x, full_matrices, compute_uv):
    """(s, u, v) of x (batch, m, n), m >= n: s descending, u (m, m or n), v (n, n)."""
    *batch, m, n = x.aval.shape
    nb = len(batch)
    v0 = eye_like(ctx, x.aval.update(shape=tuple(batch) + (n, n))) if compute_uv else None
    x, v = sweeps(ctx, x, v0, n, lambda x: matmul(ctx, x, x, transpose_x=True),
                  lambda x, j, rnd: matmul(ctx, x, j), lambda x: _unorthogonal(ctx, x, m))
    norms = ctx.unary("stablehlo.sqrt", total(
        ctx, ctx.binary("stablehlo.multiply", x, x), nb))
    keys = ctx.unary("stablehlo.negate", norms)
    if not compute_uv:
        return ctx.unary("stablehlo.negate", sort_columns(ctx, keys, [])[0]), None, None
    keys, x, v = sort_columns(ctx, keys, [x, v])
    q, r = householder_qr(ctx, x, full_matrices)
    diag = pick(ctx, r, triangle_mask(ctx, r.aval.shape, "EQ"), nb + 1)
    one = ctx.scalar_like(1, diag)
    sign = ctx.select(ctx.compare("LT", diag, ctx.scalar_like(0, diag)),
                      ctx.unary("stablehlo.negate", one), one)
    u = ctx.binary("stablehlo.multiply", q, ctx.broadcast(sign, q.aval.shape,
                                                          list(range(nb)) + [nb + 1]))
    return ctx.unary("stablehlo.negate", keys), u, v


def _svd(ctx, args, *, full_matrices, compute_uv):
    (a,) = args
    avals = ctx.out_avals
    real_only(ctx, a)
    if a.aval.size == 0:
        return [ctx.splat(0, avals[0])] + [eye_like(ctx, o) for o in avals[1:]]
    m, n = a.aval.shape[-2:]
    wide = m < n
    s, u, v = _tall(ctx, swap_last(ctx, a) if wide else a, full_matrices, compute_uv)
    bad = not_finite(ctx, a)
    if not compute_uv:
        return [nan_where(ctx, bad, s)]
    u, vt = (v, swap_last(ctx, u)) if wide else (u, swap_last(ctx, v))
    return [nan_where(ctx, bad, x) for x in (s, u, vt)]


STABLEHLO[PRIMITIVES["svd"]] = _svd
