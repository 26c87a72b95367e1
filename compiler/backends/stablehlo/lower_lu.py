"""StableHLO rule of `lu` (compiler/primitives/lu.py): StableHLO has no LU operation (JAX
calls LAPACK's getrf through a custom call, which a PJRT plug-in need not have), so the
factorisation is a `stablehlo.while` over the columns, the reference's algorithm step for
step, on the whole batch at once:

- the pivot of column j is the first row i >= j of largest |re| + |im| (an argmax with JAX's
  comparator: a NaN wins, ties go to the first row);
- rows j and p swap in the matrix and in the permutation (rows are picked by masks, since
  each matrix of the batch has its own pivot);
- the entries below the pivot become the multipliers (left as they are under a zero pivot)
  and the trailing block takes the rank-1 update.

An empty matrix gives itself, no pivots and the identity permutation.
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .lower_reductions import arg_best, scalar, dense_array
from .lower_structural import iota

_I32 = np.dtype(np.int32)


def total(ctx, x, axis):
    """The sum of x over `axis`."""
    zero = ctx.constant(0, x.aval.dtype)
    shape = tuple(d for i, d in enumerate(x.aval.shape) if i != axis)
    s = scalar(x.aval.dtype)
    (out,) = ctx.generic("stablehlo.reduce", [x, zero], [x.aval.update(shape=shape)],
                         [([s, s], lambda b: [ctx.binary("stablehlo.add", *b)])],
                         f"dimensions = {dense_array([axis])}")
    return out


def pick(ctx, x, mask, axis):
    """The sum over `axis` of x where `mask` holds (one element: that element, exactly)."""
    return total(ctx, ctx.select(mask, x, ctx.scalar_like(0, x)), axis)


def _magnitude(ctx, x):
    if x.aval.dtype.kind != "c":
        return ctx.unary("stablehlo.abs", x)
    part = x.aval.update(dtype=np.dtype(f"f{x.aval.dtype.itemsize // 2}"))
    re, im = ctx.unary("stablehlo.real", x, part), ctx.unary("stablehlo.imag", x, part)
    return ctx.binary("stablehlo.add", ctx.unary("stablehlo.abs", re),
                      ctx.unary("stablehlo.abs", im))


def _lu(ctx, args):
    (a,) = args
    lu_aval, piv_aval, perm_aval = ctx.out_avals
    *batch, m, n = a.aval.shape
    nb, k = len(batch), min(m, n)
    perm0 = ctx.broadcast(iota(ctx, perm_aval.update(shape=(m,)), 0), perm_aval.shape, [nb])
    if a.aval.size == 0:
        return [a, ctx.splat(0, piv_aval), perm0]
    mat = a.aval
    rows = iota(ctx, mat.update(dtype=_I32), nb)
    cols = iota(ctx, mat.update(dtype=_I32), nb + 1)
    perm_rows = iota(ctx, perm_aval, nb)
    piv_cols = iota(ctx, piv_aval, nb)
    start = [ctx.constant(0, _I32), a, ctx.splat(0, piv_aval), perm0]
    avals = [v.aval for v in start]
    lead = list(range(nb))

    def cond(b):
        return [ctx.compare("LT", b[0], ctx.constant(k, _I32))]

    def step(b):
        j, x, piv, perm = b
        jm = ctx.broadcast(j, mat.shape)
        col = pick(ctx, x, ctx.compare("EQ", cols, jm), nb + 1)             # (batch, m)
        score = _magnitude(ctx, col)
        below = ctx.compare("GE", perm_rows, ctx.broadcast(j, perm_aval.shape))
        score = ctx.select(below, score, ctx.scalar_like(-1, score))
        p = arg_best(ctx, score, nb, _I32, "GT")                             # (batch,)
        piv = ctx.select(ctx.compare("EQ", piv_cols, ctx.broadcast(j, piv_aval.shape)),
                         ctx.broadcast(p, piv_aval.shape, lead), piv)
        at_j, at_p = ctx.compare("EQ", rows, jm), ctx.compare("EQ", rows, ctx.broadcast(
            p, mat.shape, lead))
        row_j, row_p = pick(ctx, x, at_j, nb), pick(ctx, x, at_p, nb)       # (batch, n)
        full = lambda r: ctx.broadcast(r, mat.shape, lead + [nb + 1])
        x = ctx.select(at_j, full(row_p), ctx.select(at_p, full(row_j), x))
        pj = ctx.compare("EQ", perm_rows, ctx.broadcast(j, perm_aval.shape))
        pp = ctx.compare("EQ", perm_rows, ctx.broadcast(p, perm_aval.shape, lead))
        v_j, v_p = pick(ctx, perm, pj, nb), pick(ctx, perm, pp, nb)
        perm = ctx.select(pj, ctx.broadcast(v_p, perm_aval.shape, lead),
                          ctx.select(pp, ctx.broadcast(v_j, perm_aval.shape, lead), perm))
        at_jc = ctx.compare("EQ", cols, jm)
        col = pick(ctx, x, at_jc, nb + 1)                                    # (batch, m)
        pivot = pick(ctx, row_p, ctx.compare("EQ", iota(ctx, row_p.aval.update(dtype=_I32), nb),
                                             ctx.broadcast(j, row_p.aval.shape)), nb)
        pivot_m = ctx.broadcast(pivot, col.aval.shape, lead)
        factor = ctx.select(ctx.compare("NE", pivot_m, ctx.scalar_like(0, pivot_m)),
                            ctx.binary("stablehlo.divide", col, pivot_m), col)
        factor_full = ctx.broadcast(factor, mat.shape, lead + [nb])
        update = ctx.binary("stablehlo.subtract", x, ctx.binary(
            "stablehlo.multiply", factor_full, full(row_p)))
        low = ctx.compare("GT", rows, jm)
        right = ctx.compare("GT", cols, jm)
        x = ctx.select(ctx.binary("stablehlo.and", low, right), update,
                       ctx.select(ctx.binary("stablehlo.and", low, at_jc), factor_full, x))
        return [ctx.binary("stablehlo.add", j, ctx.constant(1, _I32)), x, piv, perm]
    outs = ctx.generic("stablehlo.while", start, avals, [(avals, cond), (avals, step)])
    return outs[1:]


STABLEHLO[PRIMITIVES["lu"]] = _lu
