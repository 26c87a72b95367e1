"""StableHLO rule of `schur` (compiler/primitives/schur.py), and the Schur form that `eig`
(lower_eig.py) shares. StableHLO has no such operation (JAX calls LAPACK's gees through a
custom call, which a PJRT plug-in need not have), so the decomposition is the Hessenberg QR
algorithm of LAPACK's lahqr written as `stablehlo.while` loops of plain operations, on the
whole batch at once:

- the matrix is reduced to Hessenberg form H = Q^H A Q (gehd2 and orgqr, lower_qr.py);
- a sweep first sets each negligible subdiagonal entry to zero (|h[k+1, k]| <= eps
  (|h[k, k]| + |h[k+1, k+1]|), or below tiny n / eps), then finds each matrix's last
  unreduced block [lo, hi] still to be split: at least 2 rows for complex matrices, 3 for
  real ones (whose 2 x 2 blocks are left for the end). It chases a bulge through that block
  with reflectors of r rows at k = lo .. hi - 1: the first reflector is the shift
  polynomial's first column, each later one zeroes the bulge below h[k, k - 1]. Complex
  matrices take single shifts (r = 2), Wilkinson's (the eigenvalue of the block's trailing
  2 x 2 matrix nearer its last diagonal entry); real ones take Francis double shifts
  (r = 3; the trailing 2 x 2 matrix's trace and determinant), so that they stay real. Every
  tenth sweep without a deflation at the bottom uses an exceptional shift instead (lahqr's
  0.75 |h[hi, hi - 1]|). Each reflector is applied to r whole rows and r whole columns of
  the matrix (and of Q, when the vectors are asked for), read and written with dynamic
  slices at k, so a step is O(r n) work per matrix and a sweep O(n^2); the loop over k runs
  over the union of the batch's blocks, a matrix whose block does not hold k taking the
  identity;
- sweeps go on while some matrix has a block left, at most `max_sweeps(n)` = 30 max(10, n)
  times (lahqr's cap); a matrix still unreduced then, or one with a NaN or an infinity,
  gives NaN in its results, as JAX does when gees fails;
- a real matrix's 2 x 2 blocks are then put in LAPACK's standard form by lanv2's rotation:
  equal diagonal entries and off-diagonal entries of opposite signs for a complex pair, an
  upper triangular block (split) for two real eigenvalues.

T is therefore upper triangular (complex) or quasi-triangular in LAPACK's standard form
(real), with A = Z T Z^H. The eigenvalues come in the iteration's order, not gees's, and the
Schur vectors' signs (phases) are the iteration's: a Schur form is unique only up to both.
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .lower_decompositions import any_true, conj, real, imag
from .lower_indexing import dynamic_slice, dynamic_update_slice
from .lower_jacobi import diagonal, eye_like, nan_where, not_finite
from .lower_lu import pick
from .lower_qr import adjoint, form_q, gehrd, householder, reflect
from .lower_reductions import dense_array, scalar
from .lower_structural import concatenate, iota, reshape, slice_

_I32 = np.dtype(np.int32)


def max_sweeps(n):
    return 30 * max(10, n)


def _fold(ctx, x, axes, op, init):
    """x reduced over `axes` with `op` (stablehlo.maximum, ...) from `init`; x itself when
    `axes` is empty."""
    if not axes:
        return x
    start = ctx.constant(init, x.aval.dtype)
    aval = x.aval.update(shape=tuple(d for i, d in enumerate(x.aval.shape) if i not in axes))
    (out,) = ctx.generic("stablehlo.reduce", [x, start], [aval],
                         [([scalar(x.aval.dtype)] * 2, lambda b: [ctx.binary(op, *b)])],
                         f"dimensions = {dense_array(axes)}")
    return out


def size(ctx, x):
    """|x|, real."""
    if x.aval.dtype.kind != "c":
        return ctx.unary("stablehlo.abs", x)
    return ctx.unary("stablehlo.abs", x, x.aval.update(dtype=np.dtype(
        f"f{x.aval.dtype.itemsize // 2}")))


def _ops(ctx):
    """Shorthands for elementwise arithmetic on Values of one type."""
    add = lambda a, b: ctx.binary("stablehlo.add", a, b)
    sub = lambda a, b: ctx.binary("stablehlo.subtract", a, b)
    mul = lambda a, b: ctx.binary("stablehlo.multiply", a, b)
    div = lambda a, b: ctx.binary("stablehlo.divide", a, b)
    return add, sub, mul, div


def at(ctx, vec, index):
    """vec[..., index] with one index per matrix (0 where it is out of range)."""
    nb = vec.aval.ndim - 1
    pos = iota(ctx, vec.aval.update(dtype=_I32), nb)
    return pick(ctx, vec, ctx.compare("EQ", pos, ctx.broadcast(index, vec.aval.shape,
                                                               list(range(nb)))), nb)


def _stack(ctx, parts):
    """(batch,) Values stacked along a new last axis."""
    nb = parts[0].aval.ndim
    return concatenate(ctx, [reshape(ctx, p, p.aval.shape + (1,)) for p in parts], nb)


def _deflate(ctx, h, n, smallest):
    """h with its negligible subdiagonal entries set to zero, and (lo, hi) per matrix: the
    last unreduced block of at least `smallest` rows (hi = -1 where there is none)."""
    *batch, m, _ = h.aval.shape
    nb, lead = len(batch), list(range(len(batch)))
    d = size(ctx, slice_(ctx, diagonal(ctx, h), [0] * (nb + 1), batch + [n]))
    s = size(ctx, diagonal(ctx, h, m, n - 1))                     # |h[k + 1, k]|
    eps = float(np.finfo(d.aval.dtype).eps)
    tiny = float(np.finfo(d.aval.dtype).tiny) * n / eps
    near = ctx.binary("stablehlo.add", slice_(ctx, d, [0] * (nb + 1), batch + [n - 1]),
                      slice_(ctx, d, [0] * nb + [1], batch + [n]))
    tol = ctx.binary("stablehlo.maximum", ctx.binary("stablehlo.multiply", near,
                                                     ctx.scalar_like(eps, near)),
                     ctx.scalar_like(tiny, near))
    split = ctx.compare("LE", s, tol)                              # (batch, n - 1)
    boolean = split.aval
    grid = h.aval.update(dtype=_I32)
    rows, cols = iota(ctx, grid, nb), iota(ctx, grid, nb + 1)
    below = ctx.compare("EQ", rows, ctx.binary("stablehlo.add", cols, ctx.scalar_like(1, cols)))
    wide = concatenate(ctx, [split, ctx.splat(False, boolean.update(
        shape=tuple(batch) + (m - n + 1,)))], nb)
    h = ctx.select(ctx.binary("stablehlo.and", below, ctx.broadcast(wide, h.aval.shape,
                                                                      lead + [nb + 1])),
                   ctx.splat(0, h.aval), h)
    pairs = grid.update(shape=tuple(batch) + (n, n - 1))
    ends, js = iota(ctx, pairs, nb), iota(ctx, pairs, nb + 1)
    after = ctx.binary("stablehlo.and", ctx.compare("LT", js, ends),
                       ctx.broadcast(split, pairs.shape, lead + [nb + 1]))
    start = _fold(ctx, ctx.select(after, ctx.binary("stablehlo.add", js, ctx.scalar_like(1, js)),
                                  ctx.scalar_like(0, js)), [nb + 1], "stablehlo.maximum", 0)
    e = iota(ctx, start.aval, nb)
    last = concatenate(ctx, [split, ctx.splat(True, boolean.update(shape=tuple(batch) + (1,)))],
                       nb)
    rows_in = ctx.binary("stablehlo.subtract", e, start)
    valid = ctx.binary("stablehlo.and", last, ctx.compare("GE", rows_in,
                                                          ctx.scalar_like(smallest - 1, e)))
    hi = _fold(ctx, ctx.select(valid, e, ctx.scalar_like(-1, e)), [nb], "stablehlo.maximum", -1)
    lo = pick(ctx, start, ctx.compare("EQ", e, ctx.broadcast(hi, e.aval.shape, lead)), nb)
    return h, lo, hi


def _wilkinson(ctx, a, b, c, d):
    """The eigenvalue of [[a, b], [c, d]] nearer d: d - bc / (p + r), p = (a - d) / 2,
    r = sqrt(p^2 + bc) with the sign that makes |p + r| the larger."""
    add, sub, mul, div = _ops(ctx)
    p = mul(sub(a, d), ctx.scalar_like(0.5, a))
    bc = mul(b, c)
    r = ctx.unary("stablehlo.sqrt", add(mul(p, p), bc))
    dot = add(mul(real(ctx, p), real(ctx, r)), mul(imag(ctx, p), imag(ctx, r)))
    r = ctx.select(ctx.compare("LT", dot, ctx.scalar_like(0, dot)),
                   ctx.unary("stablehlo.negate", r), r)
    den = add(p, r)
    none = ctx.compare("EQ", den, ctx.scalar_like(0, den))
    return ctx.select(none, d, sub(d, div(bc, ctx.select(none, ctx.scalar_like(1, den), den))))


def _shift_vector(ctx, h, n, lo, hi, exceptional):
    """The first column, from row lo, of the shift polynomial of each matrix's block: (r,)
    per matrix, r = 2 (complex: h - mu) or 3 (real: h^2 - (trace) h + det, over the entries'
    sum of magnitudes so that it cannot overflow)."""
    add, sub, mul, div = _ops(ctx)
    m = h.aval.shape[-1]
    nb = h.aval.ndim - 2
    d = diagonal(ctx, h)
    s, u = diagonal(ctx, h, m, m - 1), diagonal(ctx, h, 1, m - 1)
    one = ctx.scalar_like(1, lo)
    lo1, hi1 = ctx.binary("stablehlo.add", lo, one), ctx.binary("stablehlo.subtract", hi, one)
    h11, h12, h21, h22 = at(ctx, d, lo), at(ctx, u, lo), at(ctx, s, lo), at(ctx, d, lo1)
    ta, tb, tc, td = at(ctx, d, hi1), at(ctx, u, hi1), at(ctx, s, hi1), at(ctx, d, hi)
    if h.aval.dtype.kind == "c":
        odd = add(td, ctx.convert(mul(size(ctx, tc), ctx.scalar_like(0.75, size(ctx, tc))),
                                  td.aval.dtype))
        mu = ctx.select(exceptional, odd, _wilkinson(ctx, ta, tb, tc, td))
        return _stack(ctx, [sub(h11, mu), h21])
    h32 = at(ctx, s, lo1)
    below = at(ctx, s, ctx.binary("stablehlo.subtract", hi1, one))
    entries = [h11, h12, h21, h22, h32, ta, tb, tc, td, below]
    total = size(ctx, entries[0])
    for x in entries[1:]:
        total = add(total, size(ctx, x))
    scale = ctx.select(ctx.compare("EQ", total, ctx.scalar_like(0, total)),
                       ctx.scalar_like(1, total), total)
    h11, h12, h21, h22, h32, ta, tb, tc, td, below = (div(x, scale) for x in entries)
    trace, det = add(ta, td), sub(mul(ta, td), mul(tb, tc))
    e = add(size(ctx, tc), size(ctx, below))
    odd = add(mul(e, ctx.scalar_like(0.75, e)), td)
    trace = ctx.select(exceptional, add(odd, odd), trace)
    det = ctx.select(exceptional, add(mul(odd, odd), mul(mul(e, e), ctx.scalar_like(0.4375, e))),
                     det)
    first = add(sub(add(mul(h11, h11), mul(h12, h21)), mul(trace, h11)), det)
    return _stack(ctx, [first, mul(h21, sub(add(h11, h22), trace)), mul(h21, h32)])


def _bulge_step(ctx, k, h, z, lo, hi, on_block, x0):
    """One reflector of the sweep at k: (h, z) with rows and columns k .. k + r - 1 of h and
    columns of z (None: not asked for) reflected, in the matrices whose block holds k."""
    *batch, m, _ = h.aval.shape
    nb, lead, r = len(batch), list(range(len(batch))), x0.aval.shape[-1]
    zero, one = ctx.constant(0, _I32), ctx.constant(1, _I32)
    km1 = ctx.binary("stablehlo.subtract", k, one)
    kb = ctx.broadcast(k, lo.aval.shape)
    first = ctx.compare("EQ", kb, lo)
    on = ctx.binary("stablehlo.and", on_block, ctx.binary("stablehlo.and", ctx.compare(
        "GE", kb, lo), ctx.compare("LT", kb, hi)))
    rows = dynamic_slice(ctx, h, [zero] * nb + [k, zero], tuple(batch) + (r, m))
    col = reshape(ctx, dynamic_slice(ctx, rows, [zero] * (nb + 1) + [km1], tuple(batch) + (r, 1)),
                  x0.aval.shape)
    x = ctx.select(ctx.broadcast(first, x0.aval.shape, lead), x0, col)
    comp = iota(ctx, x0.aval.update(dtype=_I32), nb)
    inside = ctx.compare("LE", ctx.binary("stablehlo.add", comp, ctx.broadcast(k, comp.aval.shape)),
                         ctx.broadcast(hi, comp.aval.shape, lead))
    x = ctx.select(inside, x, ctx.splat(0, x.aval))
    v, tau, _ = householder(ctx, x, comp, zero, h.aval.dtype)
    tau = ctx.select(on, tau, ctx.scalar_like(0, tau))
    ctau = conj(ctx, tau)
    rows = reflect(ctx, rows, v, ctau, lead, nb)
    grid = rows.aval.update(dtype=_I32)
    bulge = ctx.binary("stablehlo.and", ctx.compare("GE", iota(ctx, grid, nb), ctx.scalar_like(
        1, iota(ctx, grid, nb))), ctx.compare("EQ", iota(ctx, grid, nb + 1), ctx.broadcast(
            km1, grid.shape)))
    chased = ctx.binary("stablehlo.and", on, ctx.unary("stablehlo.not", first))
    rows = ctx.select(ctx.binary("stablehlo.and", bulge, ctx.broadcast(chased, grid.shape, lead)),
                      ctx.splat(0, rows.aval), rows)
    h = dynamic_update_slice(ctx, h, rows, [zero] * nb + [k, zero])

    def right(x):
        starts = [zero] * (nb + 1) + [k]
        cols = dynamic_slice(ctx, x, starts, x.aval.shape[:-1] + (r,))
        cols = adjoint(ctx, reflect(ctx, adjoint(ctx, cols), v, ctau, lead, nb))
        return dynamic_update_slice(ctx, x, cols, starts)
    return right(h), (right(z) if z is not None else None)


def _sweeps(ctx, h, z, n, smallest):
    """(h, z, unconverged) after the QR sweeps of the module docstring."""
    *batch, m, _ = h.aval.shape
    nb, lead = len(batch), list(range(len(batch)))
    one = ctx.constant(1, _I32)
    h, lo, hi = _deflate(ctx, h, n, smallest)
    busy = lambda hi: ctx.compare("GE", hi, ctx.scalar_like(0, hi))
    start = [ctx.constant(0, _I32), h, lo, hi, ctx.splat(0, hi.aval)] + ([] if z is None else [z])

    def going(b):
        more = busy(b[3])
        more = any_true(ctx, more, lead) if nb else more
        return [ctx.binary("stablehlo.and", more, ctx.compare("LT", b[0], ctx.constant(
            max_sweeps(n), _I32)))]

    def sweep(b):
        count, h, lo, hi, its, *z = b
        on = busy(hi)
        ten = ctx.scalar_like(10, its)
        exceptional = ctx.binary("stablehlo.and", ctx.compare("GT", its, ctx.scalar_like(0, its)),
                                 ctx.compare("EQ", ctx.binary("stablehlo.remainder", its, ten),
                                             ctx.scalar_like(0, its)))
        x0 = _shift_vector(ctx, h, n, lo, hi, exceptional)
        first = _fold(ctx, ctx.select(on, lo, ctx.scalar_like(n, lo)), lead, "stablehlo.minimum",
                      n)
        last = _fold(ctx, ctx.select(on, hi, ctx.scalar_like(0, hi)), lead, "stablehlo.maximum",
                     0)
        inner = [first, h] + z
        avals = [v.aval for v in inner]

        def step(c):
            k, h, *z = c
            h, z1 = _bulge_step(ctx, k, h, z[0] if z else None, lo, hi, on, x0)
            return [ctx.binary("stablehlo.add", k, one), h] + ([z1] if z else [])
        _, h, *z = ctx.generic("stablehlo.while", inner, avals, [
            (avals, lambda c: [ctx.compare("LT", c[0], last)]), (avals, step)])
        h, lo2, hi2 = _deflate(ctx, h, n, smallest)
        its = ctx.select(ctx.compare("EQ", hi2, hi), ctx.binary(
            "stablehlo.add", its, ctx.scalar_like(1, its)), ctx.scalar_like(0, its))
        return [ctx.binary("stablehlo.add", count, one), h, lo2, hi2, its] + z
    avals = [v.aval for v in start]
    _, h, _, hi, _, *z = ctx.generic("stablehlo.while", start, avals,
                                     [(avals, going), (avals, sweep)])
    return h, (z[0] if z else None), busy(hi)


def _sign(ctx, x):
    """Fortran's SIGN(1, x): -1 below zero, else 1."""
    one = ctx.scalar_like(1, x)
    return ctx.select(ctx.compare("LT", x, ctx.scalar_like(0, x)), ctx.unary(
        "stablehlo.negate", one), one)


def _lanv2(ctx, a, b, c, d):
    """LAPACK's dlanv2, without branches: (a, b, c, d, cs, sn), the standard form of the
    real block [[a, b], [c, d]] = [[cs, -sn], [sn, cs]] [[a', b'], [c', d']] [[cs, sn],
    [-sn, cs]]."""
    add, sub, mul, div = _ops(ctx)
    sel, eq = ctx.select, lambda x, y: ctx.compare("EQ", x, y)
    both = lambda p, q: ctx.binary("stablehlo.and", p, q)
    neg, sqrt, absolute = (lambda x: ctx.unary("stablehlo.negate", x),
                           lambda x: ctx.unary("stablehlo.sqrt", x),
                           lambda x: ctx.unary("stablehlo.abs", x))
    k = lambda v: ctx.scalar_like(v, a)
    eps = float(np.finfo(a.aval.dtype).eps)
    hypot = lambda x, y: sqrt(add(mul(x, x), mul(y, y)))
    # the general case: real eigenvalues (z >= 4 eps) or a complex pair
    temp = sub(a, d)
    p = mul(temp, k(0.5))
    bcmax = ctx.binary("stablehlo.maximum", absolute(b), absolute(c))
    bcmis = mul(mul(ctx.binary("stablehlo.minimum", absolute(b), absolute(c)), _sign(ctx, b)),
                _sign(ctx, c))
    scale = ctx.binary("stablehlo.maximum", absolute(p), bcmax)
    zz = add(mul(div(p, scale), p), mul(div(bcmax, scale), bcmis))
    real_pair = ctx.compare("GE", zz, k(4 * eps))
    zr = add(p, mul(_sign(ctx, p), mul(sqrt(scale), sqrt(absolute(zz)))))
    tau_r = hypot(c, zr)
    real_case = (add(d, zr), sub(b, c), k(0), sub(d, mul(div(bcmax, zr), bcmis)),
                 div(zr, tau_r), div(c, tau_r))
    sigma = add(b, c)
    tau = hypot(sigma, temp)
    cs = sqrt(mul(k(0.5), add(k(1), div(absolute(sigma), tau))))
    sn = mul(neg(div(p, mul(tau, cs))), _sign(ctx, sigma))
    aa, bb = add(mul(a, cs), mul(b, sn)), add(mul(neg(a), sn), mul(b, cs))
    cc, dd = add(mul(c, cs), mul(d, sn)), add(mul(neg(c), sn), mul(d, cs))
    b2, c2 = add(mul(bb, cs), mul(dd, sn)), add(mul(neg(aa), sn), mul(cc, cs))
    mid = mul(k(0.5), add(add(mul(aa, cs), mul(cc, sn)), add(mul(neg(bb), sn), mul(dd, cs))))
    sab, sac = sqrt(absolute(b2)), sqrt(absolute(c2))
    root = mul(mul(sab, sac), _sign(ctx, c2))
    inv = ctx.unary("stablehlo.rsqrt", absolute(add(b2, c2)))
    cs1, sn1 = mul(sab, inv), mul(sac, inv)
    splits = both(both(ctx.compare("NE", c2, k(0)), ctx.compare("NE", b2, k(0))),
                  eq(_sign(ctx, b2), _sign(ctx, c2)))
    swaps = both(ctx.compare("NE", c2, k(0)), eq(b2, k(0)))
    complex_case = tuple(sel(splits, x, sel(swaps, y, w)) for x, y, w in zip(
        (add(mid, root), sub(b2, c2), k(0), sub(mid, root), sub(mul(cs, cs1), mul(sn, sn1)),
         add(mul(cs, sn1), mul(sn, cs1))),
        (mid, neg(c2), k(0), mid, neg(sn), cs),
        (mid, b2, c2, mid, cs, sn)))
    general = tuple(sel(real_pair, x, y) for x, y in zip(real_case, complex_case))
    # the special cases: already triangular, b = 0 (swap), already standard
    zero_c = eq(c, k(0))
    zero_b = eq(b, k(0))
    standard = both(eq(temp, k(0)), ctx.compare("NE", _sign(ctx, b), _sign(ctx, c)))
    keep = (a, b, c, d, k(1), k(0))
    swap = (d, neg(c), k(0), a, k(0), k(1))
    return tuple(sel(zero_c, x, sel(zero_b, y, sel(standard, x, w)))
                 for x, y, w in zip(keep, swap, general))


def _rotate(ctx, x, cs, sn, axis):
    """x's two entries p, q along `axis` replaced by cs p + sn q and cs q - sn p (cs, sn one
    per matrix)."""
    nb = cs.aval.ndim
    starts, limits = [0] * x.aval.ndim, list(x.aval.shape)
    limits[axis] = 1
    p = slice_(ctx, x, starts, limits)
    starts[axis], limits[axis] = 1, 2
    q = slice_(ctx, x, starts, limits)
    cs, sn = (ctx.broadcast(t, p.aval.shape, list(range(nb))) for t in (cs, sn))
    add, sub, mul, _ = _ops(ctx)
    return concatenate(ctx, [add(mul(cs, p), mul(sn, q)), sub(mul(cs, q), mul(sn, p))], axis)


def _standardise(ctx, h, z, n):
    """(h, z) with each 2 x 2 block of the real quasi-triangular h in lanv2's standard form:
    one rotation per block, of its two rows and columns (and z's columns)."""
    *batch, m, _ = h.aval.shape
    nb = len(batch)
    zero, one = ctx.constant(0, _I32), ctx.constant(1, _I32)
    start = [zero, h] + ([] if z is None else [z])
    avals = [v.aval for v in start]

    def step(b):
        k, h, *z = b
        block = dynamic_slice(ctx, h, [zero] * nb + [k, k], tuple(batch) + (2, 2))
        entry = lambda i, j: reshape(ctx, slice_(ctx, block, [0] * nb + [i, j], batch + [i + 1,
                                                                                       j + 1]),
                                     tuple(batch))
        a, b_, c, d, cs, sn = _lanv2(ctx, entry(0, 0), entry(0, 1), entry(1, 0), entry(1, 1))
        rows_at = [zero] * nb + [k, zero]
        rows = _rotate(ctx, dynamic_slice(ctx, h, rows_at, tuple(batch) + (2, m)), cs, sn, nb)
        h = dynamic_update_slice(ctx, h, rows, rows_at)
        cols_at = [zero] * (nb + 1) + [k]

        def columns(x):
            cols = dynamic_slice(ctx, x, cols_at, x.aval.shape[:-1] + (2,))
            return dynamic_update_slice(ctx, x, _rotate(ctx, cols, cs, sn, nb + 1), cols_at)
        h = columns(h)
        fixed = concatenate(ctx, [_stack(ctx, [a, b_]), _stack(ctx, [c, d])], nb)
        fixed = reshape(ctx, fixed, tuple(batch) + (2, 2))
        h = dynamic_update_slice(ctx, h, fixed, [zero] * nb + [k, k])
        return [ctx.binary("stablehlo.add", k, one), h] + [columns(x) for x in z]
    _, h, *z = ctx.generic("stablehlo.while", start, avals, [
        (avals, lambda b: [ctx.compare("LT", b[0], ctx.constant(n - 1, _I32))]), (avals, step)])
    return h, (z[0] if z else None)


def schur_form(ctx, a, vectors):
    """(t, z or None, bad) of `a` (batch, n, n), n >= 2: the Schur form (module docstring),
    and per matrix whether it failed (not finite, or not converged), where t and z are
    NaN."""
    *batch, n, _ = a.aval.shape
    nb = len(batch)
    bad = not_finite(ctx, a)
    a = ctx.select(ctx.broadcast(bad, a.aval.shape, list(range(nb))), ctx.splat(0, a.aval), a)
    packed, taus = gehrd(ctx, a)
    grid = a.aval.update(dtype=_I32)
    rows, cols = iota(ctx, grid, nb), iota(ctx, grid, nb + 1)
    h = ctx.select(ctx.compare("GE", ctx.binary("stablehlo.add", cols, ctx.scalar_like(1, cols)),
                               rows), packed, ctx.splat(0, a.aval))
    z = None
    if vectors:
        reflectors = ctx.select(ctx.compare("GT", rows, ctx.binary(
            "stablehlo.add", cols, ctx.scalar_like(1, cols))), packed, ctx.select(
                ctx.compare("EQ", rows, ctx.binary("stablehlo.add", cols, ctx.scalar_like(
                    1, cols))), ctx.splat(1, a.aval), ctx.splat(0, a.aval)))
        reflectors = slice_(ctx, reflectors, [0] * (nb + 2), batch + [n, n - 1])
        z = form_q(ctx, reflectors, taus, eye_like(ctx, a.aval))
    real_form = a.aval.dtype.kind != "c"
    if real_form:   # room for the reflectors of three rows at k = n - 2
        h = concatenate(ctx, [h, ctx.splat(0, a.aval.update(shape=tuple(batch) + (1, n)))], nb)
        h = concatenate(ctx, [h, ctx.splat(0, a.aval.update(shape=tuple(batch) + (n + 1, 1)))],
                        nb + 1)
        if z is not None:
            z = concatenate(ctx, [z, ctx.splat(0, a.aval.update(shape=tuple(batch) + (n, 1)))],
                            nb + 1)
    h, z, failed = _sweeps(ctx, h, z, n, 3 if real_form else 2)
    if real_form:
        h, z = _standardise(ctx, h, z, n)
        h = slice_(ctx, h, [0] * (nb + 2), batch + [n, n])
        z = slice_(ctx, z, [0] * (nb + 2), batch + [n, n]) if z is not None else None
    bad = ctx.binary("stablehlo.or", bad, failed)
    return nan_where(ctx, bad, h), (nan_where(ctx, bad, z) if z is not None else None), bad


def _schur(ctx, args, *, compute_schur_vectors):
    (a,) = args
    n = a.aval.shape[-1]
    if a.aval.size == 0:
        return [ctx.splat(0, o) for o in ctx.out_avals]
    if n == 1:
        return [a] + ([ctx.splat(1, a.aval)] if compute_schur_vectors else [])
    t, z, _ = schur_form(ctx, a, compute_schur_vectors)
    return [t] + ([z] if compute_schur_vectors else [])


STABLEHLO[PRIMITIVES["schur"]] = _schur
