"""StableHLO rule of `eigh` (compiler/primitives/eigh.py), and the Jacobi sweeps that `svd`
(lower_svd.py) shares. StableHLO has no eigensolver (JAX calls LAPACK's syevd/heevd through a
custom call, which a PJRT plug-in need not have), so the decomposition is the cyclic Jacobi
method written as two nested `stablehlo.while` loops of plain operations, on the whole batch
at once:

- a sweep is the rounds of the round-robin ordering (n - 1 of them, n for odd n): in round r,
  index i pairs with (2r - i) mod (m - 1), r with m - 1 (m = n rounded up to even; an index
  paired with m - 1 = n of an odd n is left alone), so every pair meets once per sweep and
  the pairs of one round are disjoint;
- each pair (p, q), p < q, takes the rotation of Golub and Van Loan's sym.schur2:
  theta = (a_qq - a_pp) / (2 |a_pq|), t = sign(theta) / (|theta| + sqrt(theta^2 + 1)),
  c = 1 / sqrt(t^2 + 1), s = t c (t = 0 where a_pq = 0), J[p, q] = s a_pq / |a_pq|,
  J[q, p] = -conj(J[p, q]); the round's rotations form one matrix J, and A becomes J^H A J
  (the rotated pairs' entries set to exactly zero), V becomes V J, by
  `stablehlo.dot_general`;
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
from .lower_lu import pick, total
from .lower_qr import adjoint
from .lower_sorting import sort
from .lower_structural import iota

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


def _partners(ctx, r, n):
    """i32[n]: the index each index pairs with in round r of the round-robin ordering."""
    m = n + n % 2
    idx = iota(ctx, r.aval.update(shape=(n,)), 0)
    c = lambda v: ctx.broadcast(ctx.constant(v, _I32), (n,))
    rn = ctx.broadcast(r, (n,))
    twice = ctx.binary("stablehlo.add", rn, rn)
    other = ctx.binary("stablehlo.remainder", ctx.binary(
        "stablehlo.add", ctx.binary("stablehlo.subtract", twice, idx), c(m - 1)), c(m - 1))
    p = ctx.select(ctx.compare("EQ", idx, c(m - 1)), rn, other)
    p = ctx.select(ctx.compare("EQ", idx, rn), c(m - 1), p)
    return idx, ctx.select(ctx.compare("GE", p, c(n)), idx, p)


class Round:
    """The masks of one round over (batch, n, n): `eye` and `pair` (j is i's partner)."""

    def __init__(self, ctx, r, shape):
        n, nb = shape[-1], len(shape) - 2
        self.idx, self.partner = _partners(ctx, r, n)
        square = self.idx.aval.update(shape=(n, n))
        pair = ctx.compare("EQ", iota(ctx, square, 1), ctx.broadcast(self.partner, (n, n), [0]))
        self.pair = ctx.broadcast(pair, shape, [nb, nb + 1])
        self.eye = ctx.broadcast(triangle_mask(ctx, (n, n), "EQ"), shape, [nb, nb + 1])
        self.nb = nb

    def rotation(self, ctx, g):
        """J: the rotations that zero g[i, partner[i]] of the Hermitian g (batch, n, n)."""
        nb, shape = self.nb, g.aval.shape
        diag = pick(ctx, g, self.eye, nb + 1)
        d = real(ctx, diag) if g.aval.dtype.kind == "c" else diag
        off = pick(ctx, g, self.pair, nb + 1)
        size = ctx.unary("stablehlo.sqrt", magnitude2(ctx, off))
        d_partner = pick(ctx, ctx.broadcast(d, shape, list(range(nb)) + [nb + 1]), self.pair,
                         nb + 1)
        vec = d.aval.shape
        first = ctx.broadcast(ctx.compare("LT", self.idx, self.partner), vec, [nb])
        alone = ctx.broadcast(ctx.compare("EQ", self.idx, self.partner), vec, [nb])
        one, zero = ctx.scalar_like(1, d), ctx.scalar_like(0, d)
        lo, hi = ctx.select(first, d, d_partner), ctx.select(first, d_partner, d)
        theta = ctx.binary("stablehlo.divide", ctx.binary("stablehlo.subtract", hi, lo),
                           ctx.binary("stablehlo.add", size, size))
        root = ctx.unary("stablehlo.sqrt", ctx.binary("stablehlo.add", _times(ctx, theta, theta),
                                                      one))
        t = ctx.binary("stablehlo.divide", ctx.select(
            ctx.compare("GE", theta, zero), one, ctx.unary("stablehlo.negate", one)),
            ctx.binary("stablehlo.add", ctx.unary("stablehlo.abs", theta), root))
        skip = ctx.binary("stablehlo.or", alone, ctx.compare("EQ", size, zero))
        t = ctx.select(skip, zero, t)
        c = ctx.unary("stablehlo.rsqrt", ctx.binary("stablehlo.add", _times(ctx, t, t), one))
        s = _times(ctx, t, c)
        s = ctx.select(first, s, ctx.unary("stablehlo.negate", s))
        phase = ctx.binary("stablehlo.divide", off, ctx.convert(
            ctx.select(ctx.compare("EQ", size, zero), one, size), off.aval.dtype))
        s = _times(ctx, ctx.convert(s, g.aval.dtype), phase)
        rows = lambda x: ctx.broadcast(ctx.convert(x, g.aval.dtype), shape, list(range(nb + 1)))
        return ctx.select(self.eye, rows(c), ctx.select(self.pair, rows(s),
                                                        ctx.splat(0, g.aval)))


def sweeps(ctx, x, v, n, gram, apply, unconverged):
    """(x, v) after Jacobi sweeps over n-index pairs: each round takes J = rotation(gram(x)),
    x = apply(x, J, round), v = v J (v may be None); sweeps go on while
    `unconverged(x)` (bool per matrix) holds for some matrix, at most MAX_SWEEPS."""
    rounds = n - 1 + n % 2
    nb = x.aval.ndim - 2
    zero = ctx.constant(0, _I32)
    carried = [x] + ([v] if v is not None else [])

    def rotate(b):
        r, *mats = b
        g = gram(mats[0])
        rnd = Round(ctx, r, g.aval.shape)
        j = rnd.rotation(ctx, g)
        out = [apply(mats[0], j, rnd)] + [matmul(ctx, w, j) for w in mats[1:]]
        return [ctx.binary("stablehlo.add", r, ctx.constant(1, _I32))] + out

    def sweep(b):
        k, *mats = b
        start = [zero] + mats
        avals = [s.aval for s in start]
        out = ctx.generic("stablehlo.while", start, avals, [
            (avals, lambda c: [ctx.compare("LT", c[0], ctx.constant(rounds, _I32))]),
            (avals, rotate)])
        return [ctx.binary("stablehlo.add", k, ctx.constant(1, _I32))] + out[1:]

    def going(b):
        bad = unconverged(b[1])
        if nb:
            bad = any_true(ctx, bad, list(range(nb)))
        return [ctx.binary("stablehlo.and", bad,
                           ctx.compare("LT", b[0], ctx.constant(MAX_SWEEPS, _I32)))]

    start = [zero] + carried
    avals = [s.aval for s in start]
    out = ctx.generic("stablehlo.while", start, avals, [(avals, going), (avals, sweep)])
    return out[1], (out[2] if v is not None else None)


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


def _eigh(ctx, args, *, lower):
    (a,) = args
    v_aval, w_aval = ctx.out_avals
    if a.aval.size == 0:
        return [ctx.splat(0, v_aval), ctx.splat(0, w_aval)]
    *batch, n, _ = a.aval.shape
    nb = len(batch)
    a = _hermitian(ctx, a, lower)

    def apply(x, j, rnd):
        x = matmul(ctx, conj(ctx, j), matmul(ctx, x, j), transpose_x=True)
        rotated = ctx.binary("stablehlo.and", rnd.pair, ctx.unary("stablehlo.not", rnd.eye))
        return ctx.select(rotated, ctx.splat(0, x.aval), x)

    x, v = sweeps(ctx, a, eye_like(ctx, v_aval), n, lambda x: x, apply,
                  lambda x: _off_diagonal_large(ctx, x))
    w = pick(ctx, x, triangle_mask(ctx, x.aval.shape, "EQ"), nb + 1)
    w, v = sort_columns(ctx, real(ctx, w) if w.aval.dtype.kind == "c" else w, [v])
    bad = not_finite(ctx, a)
    return [nan_where(ctx, bad, v), nan_where(ctx, bad, w)]


STABLEHLO[PRIMITIVES["eigh"]] = _eigh
