"""StableHLO rule of `eigh` (compiler/primitives/eigh.py), and the Jacobi sweeps that `svd`
(lower_svd.py) shares. StableHLO has no eigensolver (JAX calls LAPACK's syevd/heevd through a
custom call, which a PJRT plug-in need not have), so the decomposition is the cyclic Jacobi
method written as two nested `stablehlo.while` loops of plain operations, on the whole batch
at once:

- a sweep is the m - 1 rounds of the round-robin (circle) ordering, m = n rounded up to even
  (an odd n gets one index of zeros, which never rotates), so every pair meets once per
  sweep and the m / 2 pairs of one round are disjoint. The matrix is carried in the round's
  arrangement, where index k pairs with h + k (h = m / 2): a round slices the two halves,
  rotates them with elementwise operations, and moves the indices to the next round's places
  with slices and one concatenation (the first index stays, the others move one step around
  the circle; after m - 1 rounds they are back). A round is O(n^2) work, a sweep O(n^3);
- each pair (p, q) takes the rotation of Golub and Van Loan's sym.schur2:
  theta = (a_qq - a_pp) / (2 |a_pq|), t = sign(theta) / (|theta| + sqrt(theta^2 + 1)),
  c = 1 / sqrt(t^2 + 1), s = t c (t = 0 where a_pq = 0), J[p, q] = u = s a_pq / |a_pq|,
  J[q, p] = -conj(u), J[p, p] = J[q, q] = c; A becomes J^H A J (the rotated pairs' entries
  set to exactly zero) and V becomes V J, each touching only the pairs' rows and columns;
- sweeps go on while some matrix has off(A) > eps ||A||_F (off: the Frobenius norm of the
  off-diagonal part), at most `MAX_SWEEPS` times (Jacobi converges quadratically: about 6
  sweeps for a random 40 x 40 matrix).

Only the triangle `lower` names is read, and the real part of the diagonal. The eigenvalues
are A's diagonal, sorted ascending by `stablehlo.sort` with V's columns; the eigenvectors'
signs (phases) are the iteration's, not LAPACK's (the reference's follow no rule that could be
reproduced). A matrix with a NaN or an infinity gives NaN; an empty one gives zeros.
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .lower_decompositions import any_true, conj, real, triangle_mask
from .lower_linalg import dot
from .lower_lu import total
from .lower_qr import adjoint, transposed
from .lower_sorting import sort
from .lower_structural import concatenate, iota, reshape, slice_

_I32 = np.dtype(np.int32)
MAX_SWEEPS = 30


def matmul(ctx, x, y, transpose_x=False):
    """x @ y (or x^T @ y) over the trailing two axes, batched over the leading ones."""
    nb = x.aval.ndim - 2
    batch = list(range(nb))
    lc = nb if transpose_x else nb + 1
    rows = x.aval.shape[nb + 1] if transpose_x else x.aval.shape[nb]
    aval = x.aval.update(shape=x.aval.shape[:nb] + (rows, y.aval.shape[-1]))
    return dot(ctx, x, y, ([lc], [nb]), (batch, batch), aval)


def magnitude2(ctx, x):
    """|x|^2, real."""
    if x.aval.dtype.kind == "c":
        x = ctx.unary("stablehlo.abs", x, x.aval.update(dtype=np.dtype(
            f"f{x.aval.dtype.itemsize // 2}")))
    return ctx.binary("stablehlo.multiply", x, x)


def _times(ctx, *xs):
    out = xs[0]
    for x in xs[1:]:
        out = ctx.binary("stablehlo.multiply", out, x)
    return out


def _cut(ctx, x, axis, start, stop):
    """x[..., start:stop, ...] along `axis`."""
    starts, limits = [0] * x.aval.ndim, list(x.aval.shape)
    starts[axis], limits[axis] = start, stop
    return slice_(ctx, x, starts, limits)


def halves(ctx, x, axis):
    """The two halves of x along `axis` (of even length): the pairs' p and q sides."""
    h = x.aval.shape[axis] // 2
    return _cut(ctx, x, axis, 0, h), _cut(ctx, x, axis, h, 2 * h)


def _next_round(ctx, p, q, axis):
    """The halves p and q joined along `axis` with their indices in the next round's places:
    the first stays, the others move one step around the circle ([p0, q0, p1 .. p(h-2) |
    q1 .. q(h-1), p(h-1)])."""
    h = p.aval.shape[axis]
    if h < 2:
        return concatenate(ctx, [p, q], axis)
    pieces = [(p, 0, 1), (q, 0, 1), (p, 1, h - 1), (q, 1, h), (p, h - 1, h)]
    return concatenate(ctx, [_cut(ctx, x, axis, a, b) for x, a, b in pieces if b > a], axis)


def diagonal(ctx, x, offset=0, length=None):
    """x[..., k, offset + k] for k < length (all of the main diagonal by default): a strided
    slice of the flattened matrix."""
    *lead, rows, cols = x.aval.shape
    length = min(rows, cols) if length is None else length
    flat = reshape(ctx, x, tuple(lead) + (rows * cols,))
    nb = len(lead)
    return slice_(ctx, flat, [0] * nb + [offset], lead + [offset + (length - 1) * (cols + 1) + 1],
                  [1] * nb + [cols + 1])


def _rotations(ctx, dp, dq, apq):
    """(c, u) per pair from its a_pp, a_qq (real) and a_pq: Golub and Van Loan's rotation
    [[c, u], [-conj(u), c]] that zeroes a_pq (c = 1, u = 0 where a_pq = 0)."""
    size = ctx.unary("stablehlo.sqrt", magnitude2(ctx, apq))
    one, zero = ctx.scalar_like(1, dp), ctx.scalar_like(0, dp)
    theta = ctx.binary("stablehlo.divide", ctx.binary("stablehlo.subtract", dq, dp),
                       ctx.binary("stablehlo.add", size, size))
    root = ctx.unary("stablehlo.sqrt", ctx.binary("stablehlo.add", _times(ctx, theta, theta),
                                                  one))
    t = ctx.binary("stablehlo.divide", ctx.select(
        ctx.compare("GE", theta, zero), one, ctx.unary("stablehlo.negate", one)),
        ctx.binary("stablehlo.add", ctx.unary("stablehlo.abs", theta), root))
    none = ctx.compare("EQ", size, zero)
    t = ctx.select(none, zero, t)
    c = ctx.unary("stablehlo.rsqrt", ctx.binary("stablehlo.add", _times(ctx, t, t), one))
    phase = ctx.binary("stablehlo.divide", apq, ctx.convert(ctx.select(none, one, size),
                                                            apq.aval.dtype))
    u = _times(ctx, ctx.convert(_times(ctx, t, c), apq.aval.dtype), phase)
    return ctx.convert(c, apq.aval.dtype), u


def rotate(ctx, x, c, u, keep=None):
    """x with each pair (k, h + k) of its rows rotated by its (c, u), then moved to the next
    round's places: row p becomes c x_p - conj(u) x_q and row q becomes u x_p + c x_q, which
    is J^T x (J^H x with conj(u) in place of u). `keep`, when given, is a pair of masks over
    the two rotated halves: the entries where they are false become zero."""
    nb = c.aval.ndim - 1
    top, bottom = halves(ctx, x, nb)
    c, u = (ctx.broadcast(p, top.aval.shape, list(range(nb + 1))) for p in (c, u))
    mul = lambda a, b: ctx.binary("stablehlo.multiply", a, b)
    p = ctx.binary("stablehlo.subtract", mul(c, top), mul(conj(ctx, u), bottom))
    q = ctx.binary("stablehlo.add", mul(u, top), mul(c, bottom))
    if keep:
        zero = ctx.splat(0, p.aval)
        p, q = ctx.select(keep[0], p, zero), ctx.select(keep[1], q, zero)
    return _next_round(ctx, p, q, nb)


def _padded(ctx, x, axis):
    """x with one more index along `axis`, of zeros."""
    shape = list(x.aval.shape)
    shape[axis] = 1
    return concatenate(ctx, [x, ctx.splat(0, x.aval.update(shape=tuple(shape)))], axis)


def sweeps(ctx, x, axes, stats, apply, unconverged, vectors):
    """(x, v) after Jacobi sweeps over the pairs of x's n rows (and columns too, when `axes`
    names both trailing axes). x is carried in the round's arrangement, where row k pairs
    with row h + k (h = m / 2, m = n rounded up to even: an odd n gets one index of zeros
    along `axes`, which never rotates). Each round takes (a_pp, a_qq, a_pq) = stats(ctx, x),
    one per pair, makes their rotations, and sets x = apply(ctx, x, c, u) and, when
    `vectors`, V^T = J^T V^T (v starts as the identity), each with its rows moved to the
    next round's places (`rotate`: only rows are rotated, since a concatenation of rows
    fuses with the rotation where one of columns does not). After the m - 1 rounds of a
    sweep every pair has met once and the indices are back in their places. Sweeps go on
    while `unconverged(ctx, x)` (bool per matrix) holds for some matrix, at most
    MAX_SWEEPS."""
    n, nb = x.aval.shape[axes[0]], x.aval.ndim - 2
    if n % 2:
        for axis in axes:
            x = _padded(ctx, x, axis)
    m = n + n % 2
    zero = ctx.constant(0, _I32)
    carried = [x] + ([eye_like(ctx, x.aval.update(shape=x.aval.shape[:nb] + (m, m)))]
                     if vectors else [])

    def one_round(b):
        r, x, *vt = b
        c, u = _rotations(ctx, *stats(ctx, x))
        x = apply(ctx, x, c, u)
        vt = [rotate(ctx, w, c, u) for w in vt]
        return [ctx.binary("stablehlo.add", r, ctx.constant(1, _I32)), x] + vt

    def sweep(b):
        k, *mats = b
        start = [zero] + mats
        avals = [s.aval for s in start]
        out = ctx.generic("stablehlo.while", start, avals, [
            (avals, lambda c: [ctx.compare("LT", c[0], ctx.constant(m - 1, _I32))]),
            (avals, one_round)])
        return [ctx.binary("stablehlo.add", k, ctx.constant(1, _I32))] + out[1:]

    def going(b):
        bad = unconverged(ctx, b[1])
        if nb:
            bad = any_true(ctx, bad, list(range(nb)))
        return [ctx.binary("stablehlo.and", bad,
                           ctx.compare("LT", b[0], ctx.constant(MAX_SWEEPS, _I32)))]

    start = [zero] + carried
    avals = [s.aval for s in start]
    x, *vt = ctx.generic("stablehlo.while", start, avals, [(avals, going), (avals, sweep)])[1:]
    for axis in axes:
        x = _cut(ctx, x, axis, 0, n)
    return x, (transposed(ctx, _cut(ctx, _cut(ctx, vt[0], nb, 0, n), nb + 1, 0, n))
               if vectors else None)


def eye_like(ctx, aval):
    return ctx.convert(triangle_mask(ctx, aval.shape, "EQ"), aval.dtype)


def not_finite(ctx, a):
    """bool per matrix: a NaN or an infinity somewhere in it."""
    size = magnitude2(ctx, a)
    diff = ctx.binary("stablehlo.subtract", size, size)
    nd = a.aval.ndim
    return any_true(ctx, ctx.compare("NE", diff, diff), [nd - 2, nd - 1])


def nan_where(ctx, bad, x):
    """x, NaN in the matrices (leading index) where `bad` holds."""
    nb = bad.aval.ndim
    return ctx.select(ctx.broadcast(bad, x.aval.shape, list(range(nb))),
                      ctx.splat(np.nan, x.aval), x)


def sort_columns(ctx, keys, mats):
    """[keys sorted ascending (stable) over the last axis] + each of mats (batch, r, n) with its
    columns in the same order."""
    nb = keys.aval.ndim - 1
    out = sort(ctx, [keys], dimension=nb)
    for m in mats:
        wide = ctx.broadcast(keys, m.aval.shape, list(range(nb)) + [nb + 1])
        out.append(sort(ctx, [wide, m], dimension=nb + 1)[1])
    return out


def _off_diagonal_large(ctx, a):
    nb = a.aval.ndim - 2
    sq = magnitude2(ctx, a)
    eye = triangle_mask(ctx, a.aval.shape, "EQ")
    off = total(ctx, total(ctx, ctx.select(eye, ctx.scalar_like(0, sq), sq), nb + 1), nb)
    fro = total(ctx, total(ctx, sq, nb + 1), nb)
    eps = float(np.finfo(sq.aval.dtype).eps)
    return ctx.compare("GT", off, _times(ctx, fro, ctx.scalar_like(eps * eps, fro)))


def _hermitian(ctx, a, lower):
    """The Hermitian matrix of a's `lower` (or upper) triangle and its diagonal's real part."""
    a = ctx.select(triangle_mask(ctx, a.aval.shape, "GE" if lower else "LE"), a,
                   adjoint(ctx, a))
    if a.aval.dtype.kind != "c":
        return a
    return ctx.select(triangle_mask(ctx, a.aval.shape, "EQ"),
                      ctx.convert(real(ctx, a), a.aval.dtype), a)


def _pair_entries(ctx, x):
    """(a_pp, a_qq, a_pq) of each pair (k, h + k) of the Hermitian x, the diagonal real."""
    nb = x.aval.ndim - 2
    h = x.aval.shape[-1] // 2
    diag = diagonal(ctx, x)
    dp, dq = halves(ctx, real(ctx, diag) if diag.aval.dtype.kind == "c" else diag, nb)
    return dp, dq, diagonal(ctx, x, h, h)


def _unpaired(ctx, shape):
    """Masks over the two halves (rows k and h + k, columns already in the next round's
    places) of the entries that are not the rotated pairs' a_pq, a_qp: row k's partner
    h + k is now column 1 (k = 0) or h + k - 1, row h + k's partner k is column 0 (k = 0),
    2h - 1 (k = h - 1) or k + 1."""
    nb, h = len(shape) - 2, shape[-1] // 2
    ints = ctx.out_avals[0].update(shape=(h, 2 * h), dtype=_I32, weak_type=False)
    row, col = iota(ctx, ints, 0), iota(ctx, ints, 1)
    k = lambda v: ctx.scalar_like(v, row)
    first = ctx.compare("EQ", row, k(0))
    p_partner = ctx.select(first, k(1), ctx.binary("stablehlo.add", row, k(h - 1)))
    q_partner = ctx.select(first, k(0), ctx.select(ctx.compare("EQ", row, k(h - 1)), k(2 * h - 1),
                                                   ctx.binary("stablehlo.add", row, k(1))))
    halves_shape = shape[:nb] + (h, 2 * h)
    return [ctx.broadcast(ctx.compare("NE", col, partner), halves_shape, [nb, nb + 1])
            for partner in (p_partner, q_partner)]


def _two_sided(ctx, x, c, u):
    """J^H x J for the round's rotations, the rotated pairs' entries set to exactly zero:
    J^H (J^H x)^H, as x and the result are Hermitian."""
    cu = conj(ctx, u)
    x = adjoint(ctx, rotate(ctx, x, c, cu))
    return rotate(ctx, x, c, cu, _unpaired(ctx, x.aval.shape))


def _eigh(ctx, args, *, lower):
    (a,) = args
    v_aval, w_aval = ctx.out_avals
    if a.aval.size == 0:
        return [ctx.splat(0, v_aval), ctx.splat(0, w_aval)]
    *batch, n, _ = a.aval.shape
    nb = len(batch)
    a = _hermitian(ctx, a, lower)
    x, v = sweeps(ctx, a, (nb, nb + 1), _pair_entries, _two_sided, _off_diagonal_large, True)
    w = diagonal(ctx, x)
    w, v = sort_columns(ctx, real(ctx, w) if w.aval.dtype.kind == "c" else w, [v])
    bad = not_finite(ctx, a)
    return [nan_where(ctx, bad, v), nan_where(ctx, bad, w)]


STABLEHLO[PRIMITIVES["eigh"]] = _eigh
