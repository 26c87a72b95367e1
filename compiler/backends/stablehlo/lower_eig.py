"""StableHLO rule of `eig` (compiler/primitives/eig.py). StableHLO has no eigensolver for
general matrices (JAX calls LAPACK's geev through a custom call, which a PJRT plug-in need not
have), so the decomposition is built from plain operations, on the whole batch at once:

- the complex Schur form A = Z T Z^H of lower_schur.py, in complex arithmetic also for a real
  matrix (single Wilkinson shifts); the eigenvalues are T's diagonal, in the iteration's
  order, not geev's;
- T's right eigenvectors by back substitution (LAPACK's trevc), one `stablehlo.while` over
  the rows from the last up, all eigenvectors at once: x_k has 1 in row k, 0 below, and
  x_jk = -(T x_k)_j / (t_jj - w_k) above, a divisor smaller than
  max(eps |w_k|, tiny n / eps) replaced by that bound, as trevc does; the right eigenvectors
  are Z X;
- the left ones are the right eigenvectors of A^H = Z T^H Z^H, the same back substitution on
  T^H with its rows and columns reversed (upper triangular again);
- each eigenvector is scaled as geev scales it: unit 2-norm, and its first component of
  largest magnitude real and positive.

A matrix with a NaN or an infinity, or one the iteration does not reduce within its cap,
gives NaN in every result, as JAX does when geev fails. For a real matrix the eigenvalues of
a complex pair are conjugate, and its real eigenvalues real, only to rounding.
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from ...primitives.eig import complex_dtype
from .lower_decompositions import conj, real, imag
from .lower_indexing import dynamic_slice, dynamic_update_slice
from .lower_jacobi import diagonal, eye_like, magnitude2, matmul, nan_where
from .lower_lu import pick, total
from .lower_qr import adjoint
from .lower_reductions import arg_best
from .lower_schur import schur_form, size
from .lower_structural import iota, reshape

_I32 = np.dtype(np.int32)


def _triangular_vectors(ctx, t, w):
    """The eigenvectors X (columns) of the upper triangular t (batch, n, n) with diagonal w:
    T X = X diag(w), X unit upper triangular."""
    *batch, n, _ = t.aval.shape
    nb, lead = len(batch), list(range(len(batch)))
    zero, one = ctx.constant(0, _I32), ctx.constant(1, _I32)
    mag = size(ctx, w)
    eps = float(np.finfo(mag.aval.dtype).eps)
    floor = ctx.binary("stablehlo.maximum", ctx.binary("stablehlo.multiply", mag,
                                                       ctx.scalar_like(eps, mag)),
                       ctx.scalar_like(float(np.finfo(mag.aval.dtype).tiny) * n / eps, mag))
    cols = iota(ctx, w.aval.update(dtype=_I32), nb)

    def step(b):
        j, x = b
        row = dynamic_slice(ctx, t, [zero] * nb + [j, zero], tuple(batch) + (1, n))
        r = reshape(ctx, matmul(ctx, row, x), w.aval.shape)
        tjj = pick(ctx, reshape(ctx, row, w.aval.shape), ctx.compare("EQ", cols, ctx.broadcast(
            j, cols.aval.shape)), nb)
        den = ctx.binary("stablehlo.subtract", ctx.broadcast(tjj, w.aval.shape, lead), w)
        small = ctx.compare("LT", size(ctx, den), floor)
        den = ctx.select(small, ctx.convert(floor, den.aval.dtype), den)
        new = ctx.unary("stablehlo.negate", ctx.binary("stablehlo.divide", r, den))
        old = reshape(ctx, dynamic_slice(ctx, x, [zero] * nb + [j, zero], tuple(batch) + (1, n)),
                      w.aval.shape)
        new = ctx.select(ctx.compare("GT", cols, ctx.broadcast(j, cols.aval.shape)), new, old)
        x = dynamic_update_slice(ctx, x, reshape(ctx, new, tuple(batch) + (1, n)),
                                 [zero] * nb + [j, zero])
        return [ctx.binary("stablehlo.subtract", j, one), x]
    start = [ctx.constant(n - 1, _I32), eye_like(ctx, t.aval)]
    avals = [v.aval for v in start]
    return ctx.generic("stablehlo.while", start, avals, [
        (avals, lambda b: [ctx.compare("GE", b[0], zero)]), (avals, step)])[1]


def _reversed(ctx, x, dims):
    return ctx.emit(f"stablehlo.reverse {x}, dims = {dims} : {x.type}", x.aval)


def _normalised(ctx, v):
    """v's columns over their 2-norms, each turned so that its first component of largest
    magnitude is real and positive (geev's scaling)."""
    nb = v.aval.ndim - 2
    lead = list(range(nb))
    sq = magnitude2(ctx, v)
    norm = ctx.unary("stablehlo.sqrt", total(ctx, sq, nb))
    v = ctx.binary("stablehlo.divide", v, ctx.broadcast(ctx.convert(norm, v.aval.dtype),
                                                        v.aval.shape, lead + [nb + 1]))
    biggest = arg_best(ctx, sq, nb, _I32, "GT")
    rows = iota(ctx, v.aval.update(dtype=_I32), nb)
    mask = ctx.compare("EQ", rows, ctx.broadcast(biggest, rows.aval.shape, lead + [nb + 1]))
    top = pick(ctx, v, mask, nb)
    top_size = size(ctx, top)
    phase = ctx.binary("stablehlo.divide", conj(ctx, top), ctx.convert(ctx.select(
        ctx.compare("EQ", top_size, ctx.scalar_like(0, top_size)), ctx.scalar_like(1, top_size),
        top_size), top.aval.dtype))
    v = ctx.binary("stablehlo.multiply", v, ctx.broadcast(phase, v.aval.shape, lead + [nb + 1]))
    on_real = ctx.binary("stablehlo.complex", real(ctx, v), ctx.splat(0, imag(ctx, v).aval),
                         v.aval)
    return ctx.select(mask, on_real, v)


def _eig(ctx, args, *, compute_left_eigenvectors, compute_right_eigenvectors,
         enable_eigvec_derivs=False):
    (a,) = args
    outs = ctx.out_avals
    *batch, n, _ = a.aval.shape
    nb = len(batch)
    if a.aval.size == 0:
        return [ctx.splat(0, o) for o in outs]
    a = ctx.convert(a, complex_dtype(a.aval.dtype))
    vectors = compute_left_eigenvectors or compute_right_eigenvectors
    if n == 1:
        w, z, bad = reshape(ctx, a, tuple(batch) + (1,)), eye_like(ctx, a.aval), None
        t = a
    else:
        t, z, bad = schur_form(ctx, a, vectors)
        w = diagonal(ctx, t)
    results = [w]
    if compute_left_eigenvectors:
        flip = [nb, nb + 1]
        y = _reversed(ctx, _triangular_vectors(ctx, _reversed(ctx, adjoint(ctx, t), flip),
                                               _reversed(ctx, conj(ctx, w), [nb])), flip)
        results.append(_normalised(ctx, matmul(ctx, z, y)))
    if compute_right_eigenvectors:
        results.append(_normalised(ctx, matmul(ctx, z, _triangular_vectors(ctx, t, w))))
    return results if bad is None else [nan_where(ctx, bad, x) for x in results]


STABLEHLO[PRIMITIVES["eig"]] = _eig
