"""StableHLO rules of `qr` (compiler/primitives/qr.py) and `hessenberg` (schur.py). StableHLO
has no QR operation (JAX calls LAPACK's geqrf and orgqr through custom calls, which a PJRT
plug-in need not have), so the factorisation is LAPACK's Householder algorithm written as two
`stablehlo.while` loops over plain operations, on the whole batch at once:

- geqrf, one column j per trip: with alpha = R[j, j] and xnorm the norm below it, the
  reflector H = I - tau v v^H has beta = -sign(re alpha) |(alpha, xnorm)|,
  tau = (beta - alpha) / beta and v = (1, x / (alpha - beta)) (larfg's conventions, so R's
  diagonal has LAPACK's signs); when xnorm and im alpha are zero, tau = 0 and H = I. H^H is
  applied to the columns right of j; column j becomes (beta, 0, ...).
- orgqr: Q starts as the identity's first m (full) or k columns and takes H_j Q for
  j = k-1 down to 0.

The reduced R of a tall matrix is R's first n rows. An empty matrix gives the identity's
columns and a zero R, as the reference. `householder_qr` is also the last step of svd
(lower_svd.py).

`hessenberg` is LAPACK's gehd2 with the same reflectors: for column j, the larfg reflector H
of the part below the subdiagonal is applied from the right to the columns after j, then H^H
from the left to the rows after j; column j keeps beta on the subdiagonal and the reflector
below it, and tau goes into `taus` (gehrd's packed form, with its signs).
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .lower_decompositions import conj, real, imag, triangle_mask
from .lower_lu import pick, total
from .lower_structural import iota, slice_, transpose

_I32 = np.dtype(np.int32)


def _times(ctx, x, y):
    return ctx.binary("stablehlo.multiply", x, y)


def reflect(ctx, h, v, tau, lead, nb):
    """h - tau v (v^H h): a reflector applied to the columns of h (batch, m, c)."""
    shape = h.aval.shape
    vv = ctx.broadcast(v, shape, lead + [nb])
    w = total(ctx, _times(ctx, conj(ctx, vv), h), nb)                  # (batch, c)
    tw = _times(ctx, ctx.broadcast(tau, w.aval.shape, lead), w)
    return ctx.binary("stablehlo.subtract", h, _times(ctx, vv, ctx.broadcast(tw, shape,
                                                                             lead + [nb + 1])))


def householder(ctx, col, rows, j, dtype):
    """(v, tau, beta) of larfg for the part of `col` (batch, m) from row j down."""
    complex_ = dtype.kind == "c"
    jm = ctx.broadcast(j, col.aval.shape)
    zero = ctx.scalar_like(0, col)
    alpha = pick(ctx, col, ctx.compare("EQ", rows, jm), col.aval.ndim - 1)
    tail = ctx.select(ctx.compare("GT", rows, jm), col, zero)
    sq = lambda x: _times(ctx, x, x)
    if complex_:
        mag = ctx.binary("stablehlo.add", sq(real(ctx, tail)), sq(imag(ctx, tail)))
        ar, ai = real(ctx, alpha), imag(ctx, alpha)
    else:
        mag, ar, ai = sq(tail), alpha, None
    xnorm2 = total(ctx, mag, col.aval.ndim - 1)
    norm2 = ctx.binary("stablehlo.add", sq(ar), xnorm2)
    if complex_:
        norm2 = ctx.binary("stablehlo.add", norm2, sq(ai))
    norm = ctx.unary("stablehlo.sqrt", norm2)
    beta = ctx.select(ctx.compare("GE", ar, ctx.scalar_like(0, ar)),
                      ctx.unary("stablehlo.negate", norm), norm)
    trivial = ctx.compare("EQ", xnorm2, ctx.scalar_like(0, xnorm2))
    if complex_:
        trivial = ctx.binary("stablehlo.and", trivial,
                             ctx.compare("EQ", ai, ctx.scalar_like(0, ai)))
        beta_c = ctx.binary("stablehlo.complex", beta, ctx.scalar_like(0, beta), alpha.aval)
    else:
        beta_c = beta
    one = ctx.scalar_like(1, alpha)
    tau = ctx.select(trivial, ctx.scalar_like(0, alpha), ctx.binary(
        "stablehlo.divide", ctx.binary("stablehlo.subtract", beta_c, alpha), beta_c))
    scale = ctx.select(trivial, one, ctx.binary(
        "stablehlo.divide", one, ctx.binary("stablehlo.subtract", alpha, beta_c)))
    lead = list(range(col.aval.ndim - 1))
    v = _times(ctx, tail, ctx.broadcast(scale, col.aval.shape, lead))
    v = ctx.select(ctx.compare("EQ", rows, jm), ctx.scalar_like(1, v), v)
    return v, tau, ctx.select(trivial, alpha, beta_c)


def householder_qr(ctx, a, full_matrices):
    """[q, r] of `a` (batch, m, n): LAPACK's geqrf and orgqr as `stablehlo.while` loops."""
    *batch, m, n = a.aval.shape
    nb, k = len(batch), min(m, n)
    q_aval = a.aval.update(shape=tuple(batch) + (m, m if full_matrices else k))
    r_aval = a.aval.update(shape=tuple(batch) + (m if full_matrices else k, n))
    lead = list(range(nb))
    dtype = a.aval.dtype
    eye = ctx.convert(triangle_mask(ctx, q_aval.shape, "EQ"), dtype)
    if a.aval.size == 0:
        return [eye, ctx.splat(0, r_aval)]
    mat = a.aval.update(dtype=_I32)
    rows, cols = iota(ctx, mat, nb), iota(ctx, mat, nb + 1)
    col_rows = iota(ctx, mat.update(shape=tuple(batch) + (m,)), nb)
    vs_aval = a.aval.update(shape=tuple(batch) + (m, k))
    taus_aval = a.aval.update(shape=tuple(batch) + (k,))
    vs_cols = iota(ctx, vs_aval.update(dtype=_I32), nb + 1)
    tau_cols = iota(ctx, taus_aval.update(dtype=_I32), nb)
    start = [ctx.constant(0, _I32), a, ctx.splat(0, vs_aval), ctx.splat(0, taus_aval)]
    avals = [v.aval for v in start]

    def factor_cond(b):
        return [ctx.compare("LT", b[0], ctx.constant(k, _I32))]

    def factor_step(b):
        j, r, vs, taus = b
        jm = ctx.broadcast(j, mat.shape)
        at_j = ctx.compare("EQ", cols, jm)
        col = pick(ctx, r, at_j, nb + 1)
        v, tau, beta = householder(ctx, col, col_rows, j, dtype)
        reflected = reflect(ctx, r, v, conj(ctx, tau), lead, nb)
        new_col = ctx.select(ctx.compare("EQ", rows, jm),
                             ctx.broadcast(beta, mat.shape, lead), ctx.splat(0, a.aval))
        new_col = ctx.select(ctx.compare("LT", rows, jm), r, new_col)
        r = ctx.select(ctx.compare("GT", cols, jm), reflected, ctx.select(at_j, new_col, r))
        vs = ctx.select(ctx.compare("EQ", vs_cols, ctx.broadcast(j, vs_aval.shape)),
                        ctx.broadcast(v, vs_aval.shape, lead + [nb]), vs)
        taus = ctx.select(ctx.compare("EQ", tau_cols, ctx.broadcast(j, taus_aval.shape)),
                          ctx.broadcast(tau, taus_aval.shape, lead), taus)
        return [ctx.binary("stablehlo.add", j, ctx.constant(1, _I32)), r, vs, taus]
    _, r, vs, taus = ctx.generic("stablehlo.while", start, avals,
                                 [(avals, factor_cond), (avals, factor_step)])

    q = form_q(ctx, vs, taus, eye)
    if r_aval.shape != r.aval.shape:
        r = slice_(ctx, r, [0] * (nb + 2), r_aval.shape)
    return [q, r]


def form_q(ctx, vs, taus, q):
    """H_0 H_1 ... H_(k-1) q (orgqr), H_j = I - taus[j] v_j v_j^H with v_j the column j of
    vs (batch, m, k): the reflectors applied from the last to the first."""
    nb = vs.aval.ndim - 2
    lead = list(range(nb))
    vs_cols = iota(ctx, vs.aval.update(dtype=_I32), nb + 1)
    tau_cols = iota(ctx, taus.aval.update(dtype=_I32), nb)

    def form_step(b):
        j, q = b
        v = pick(ctx, vs, ctx.compare("EQ", vs_cols, ctx.broadcast(j, vs.aval.shape)), nb + 1)
        tau = pick(ctx, taus, ctx.compare("EQ", tau_cols, ctx.broadcast(j, taus.aval.shape)),
                   nb)
        return [ctx.binary("stablehlo.subtract", j, ctx.constant(1, _I32)),
                reflect(ctx, q, v, tau, lead, nb)]
    start = [ctx.constant(vs.aval.shape[-1] - 1, _I32), q]
    avals = [v.aval for v in start]
    return ctx.generic("stablehlo.while", start, avals, [
        (avals, lambda b: [ctx.compare("GE", b[0], ctx.constant(0, _I32))]),
        (avals, form_step)])[1]


def _qr(ctx, args, *, full_matrices):
    return householder_qr(ctx, args[0], full_matrices)


def transposed(ctx, x):
    """The transpose over the trailing two axes."""
    nb = x.aval.ndim - 2
    return transpose(ctx, x, list(range(nb)) + [nb + 1, nb])


def adjoint(ctx, x):
    """The conjugate transpose over the trailing two axes."""
    return conj(ctx, transposed(ctx, x))


def gehrd(ctx, a):
    """[h, taus] of `a` (batch, n, n): gehd2's packed Hessenberg form (module docstring)."""
    *batch, n, _ = a.aval.shape
    taus_aval = a.aval.update(shape=tuple(batch) + (max(n - 1, 0),))
    nb, lead, dtype = len(batch), list(range(len(batch))), a.aval.dtype
    if a.aval.size == 0 or n < 2:
        return [a, ctx.splat(0, taus_aval)]
    mat = a.aval.update(dtype=_I32)
    rows, cols = iota(ctx, mat, nb), iota(ctx, mat, nb + 1)
    col_rows = iota(ctx, mat.update(shape=tuple(batch) + (n,)), nb)
    tau_cols = iota(ctx, taus_aval.update(dtype=_I32), nb)
    one = ctx.constant(1, _I32)

    def step(b):
        j, h, taus = b
        j1 = ctx.binary("stablehlo.add", j, one)
        jm, j1m = ctx.broadcast(j, mat.shape), ctx.broadcast(j1, mat.shape)
        at_j = ctx.compare("EQ", cols, jm)
        v, tau, beta = householder(ctx, pick(ctx, h, at_j, nb + 1), col_rows, j1, dtype)
        right = adjoint(ctx, reflect(ctx, adjoint(ctx, h), v, conj(ctx, tau), lead, nb))
        both = reflect(ctx, right, v, conj(ctx, tau), lead, nb)
        new_col = ctx.select(ctx.compare("GT", rows, j1m), ctx.broadcast(v, mat.shape, lead + [nb]),
                             h)
        new_col = ctx.select(ctx.compare("EQ", rows, j1m), ctx.broadcast(beta, mat.shape, lead),
                             new_col)
        h = ctx.select(ctx.compare("GT", cols, jm), both, ctx.select(at_j, new_col, h))
        taus = ctx.select(ctx.compare("EQ", tau_cols, ctx.broadcast(j, taus_aval.shape)),
                          ctx.broadcast(tau, taus_aval.shape, lead), taus)
        return [j1, h, taus]
    start = [ctx.constant(0, _I32), a, ctx.splat(0, taus_aval)]
    avals = [v.aval for v in start]
    _, h, taus = ctx.generic("stablehlo.while", start, avals, [
        (avals, lambda b: [ctx.compare("LT", b[0], ctx.constant(n - 1, _I32))]),
        (avals, step)])
    return [h, taus]


def _hessenberg(ctx, args):
    return gehrd(ctx, args[0])


STABLEHLO[PRIMITIVES["qr"]] = _qr
STABLEHLO[PRIMITIVES["hessenberg"]] = _hessenberg
