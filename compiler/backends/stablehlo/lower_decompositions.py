"""StableHLO rules of `cholesky` and `triangular_solve` (compiler/primitives/decompositions.py).

- `cholesky`: `stablehlo.cholesky` with `lower = true` (it reads the lower triangle, as the
  primitive does), the strict upper triangle then set to zero. The reference gives a matrix
  full of NaN where LAPACK's potrf fails (a diagonal pivot that is not positive, or NaN);
  XLA's factor of such a matrix has a NaN, or a diagonal entry that is not positive, so
  the lower triangle of each matrix with either becomes NaN (its upper one stays zero).
- `triangular_solve`: `stablehlo.triangular_solve` with `left_side`, `lower`,
  `unit_diagonal` and transpose_a/conjugate_a as NO_TRANSPOSE, TRANSPOSE or ADJOINT
  (a conjugated, untransposed complex matrix is conjugated first).

Batch axes are the operations' own. An empty operand gives zeros.
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .lower_reductions import scalar, dense_array
from .lower_structural import iota


def triangle_mask(ctx, shape, compare):
    """bool[shape]: where row `compare` column holds, over the trailing two axes."""
    aval = ctx.out_avals[0].update(shape=tuple(shape), dtype=np.dtype(np.int32), weak_type=False)
    nd = len(shape)
    return ctx.compare(compare, iota(ctx, aval, nd - 2), iota(ctx, aval, nd - 1))


def _part(op):
    def part(ctx, x):
        dtype = np.dtype(f"f{x.aval.dtype.itemsize // 2}")
        return ctx.unary(op, x, x.aval.update(dtype=dtype))
    return part


real, imag = _part("stablehlo.real"), _part("stablehlo.imag")


def conj(ctx, x):
    """The complex conjugate (x itself when real)."""
    if x.aval.dtype.kind != "c":
        return x
    return ctx.binary("stablehlo.complex", real(ctx, x), ctx.unary("stablehlo.negate",
                                                                   imag(ctx, x)), x.aval)


def any_true(ctx, pred, axes):
    false = ctx.constant(False, np.bool_)
    aval = pred.aval.update(shape=tuple(d for i, d in enumerate(pred.aval.shape)
                                        if i not in axes))
    (out,) = ctx.generic("stablehlo.reduce", [pred, false], [aval],
                         [([scalar(np.bool_)] * 2, lambda b: [ctx.binary("stablehlo.or", *b)])],
                         f"dimensions = {dense_array(axes)}")
    return out


def _cholesky(ctx, args):
    (a,) = args
    aval = ctx.out_avals[0]
    if aval.size == 0:
        return [ctx.splat(0, aval)]
    (l,) = ctx.generic("stablehlo.cholesky", [a], [aval], [], "lower = true")
    nd = aval.ndim
    lower = triangle_mask(ctx, aval.shape, "GE")
    zero = ctx.splat(0, aval)
    l = ctx.select(lower, l, zero)
    diag = real(ctx, l) if aval.dtype.kind == "c" else l
    positive = ctx.compare("GT", diag, ctx.scalar_like(0, diag))
    eye = triangle_mask(ctx, aval.shape, "EQ")
    bad_diag = ctx.binary("stablehlo.and", eye, ctx.unary("stablehlo.not", positive))
    nan = ctx.compare("NE", l, l)
    bad = any_true(ctx, ctx.binary("stablehlo.or", bad_diag, nan), [nd - 2, nd - 1])
    bad = ctx.broadcast(bad, aval.shape, list(range(nd - 2)))
    nan_below = ctx.select(lower, ctx.splat(np.nan, aval), zero)
    return [ctx.select(bad, nan_below, l)]


_TRANSPOSE = {(False, False): "NO_TRANSPOSE", (True, False): "TRANSPOSE",
              (True, True): "ADJOINT", (False, True): "NO_TRANSPOSE"}


def _triangular_solve(ctx, args, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    a, b = args
    aval = ctx.out_avals[0]
    if aval.size == 0:
        return [ctx.splat(0, aval)]
    complex_ = a.aval.dtype.kind == "c"
    conjugate = bool(conjugate_a) and complex_
    if conjugate and not transpose_a:
        a = conj(ctx, a)
    mode = _TRANSPOSE[(bool(transpose_a), conjugate and bool(transpose_a))]
    flag = lambda v: "true" if v else "false"
    attrs = (f"left_side = {flag(left_side)}, lower = {flag(lower)}, transpose_a = "
             f"#stablehlo<transpose {mode}>, unit_diagonal = {flag(unit_diagonal)}")
    return ctx.generic("stablehlo.triangular_solve", [a, b], [aval], [], attrs)


STABLEHLO[PRIMITIVES["cholesky"]] = _cholesky
STABLEHLO[PRIMITIVES["triangular_solve"]] = _triangular_solve
