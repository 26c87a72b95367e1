"""The rest of `kiln.lax.linalg` (`__all__`, re-exported there): functions JAX 0.10.2 has beside
the decomposition primitives, written over `kiln.numpy` and `kiln.lax` loops, so they run
eagerly, under `jit`, `vmap` and differentiation (derivatives through the loops).

- `geqrf(a)` (not a public name of JAX's `lax.linalg`, so not of kiln's either; it serves
  `jnp.linalg.qr(mode="raw")`): Householder QR as LAPACK's geqrf leaves it: R on and above the diagonal, the
  reflectors' tails below it, and their scalars `taus`. Column i's reflector follows LAPACK's
  larfg: beta = -sign(re a_ii) |(a_ii, a_i+1.., i)|, tau = (beta - a_ii) / beta (complex:
  conj-adjusted), v = (1, x / (a_ii - beta)); H_i^H is applied to the columns on its right.
  `jnp.linalg.qr(mode="raw")` returns (geqrf's matrix transposed, taus), as NumPy and JAX do.
- `householder_product(a, taus)`: Q = H_0 H_1 ... H_k-1 (its first n columns), built by
  applying the reflectors to the identity from the last one (LAPACK's orgqr).
- `ormqr(a, taus, c, left, transpose)`: Q C, Q^H C, C Q or C Q^H without forming Q.
- `lu_pivots_to_permutation(pivots, permutation_size)`: the swaps applied to range(size).
- `symmetric_product(a, c, alpha, beta, symmetrize_output)`: alpha A A^T + beta C.
- `tridiagonal_solve(dl, d, du, b, perturb_singular)`: LAPACK gtsv's elimination with
  partial pivoting between neighbouring rows (a row swap adds a second superdiagonal), as a
  `lax.scan` down the rows, then back substitution as a reverse scan. A zero pivot gives
  NaN for that system (LAPACK's info > 0, as JAX); with `perturb_singular` pivots smaller
  than eps * max|U| are replaced by it first.
- `cholesky_update(r, w)`: the upper factor of R^T R + w w^T by one Givens-like sweep.
- `tridiagonal(a, lower)`: LAPACK sytrd/hetrd's Householder reduction of a Hermitian matrix
  to tridiagonal form, (arr, d, e, taus) in its packed layout, as sytd2's unblocked loop (a
  `fori_loop` over the columns: larfg's reflector, then the two-sided update of the trailing
  block); `lower=False` reduces the matrix reversed in both axes. Its input passes through
  the `no_derivative` primitive: JAX defines no derivative, so differentiating raises.
"""
import numpy as np

from .. import numpy as jnp
from ..dispatch import bind
from ..compiler.primitives import PRIMITIVES as P
from ..compiler.primitives.core import check_dtype_kinds
from . import _control_flow as _control
from ._ops import dynamic_index_in_dim

__all__ = ["cholesky_update", "householder_product", "lu_pivots_to_permutation", "ormqr",
           "symmetric_product", "tridiagonal", "tridiagonal_solve"]


def _check_rank(name, x, position, rank, exact=False):
    if (x.ndim != rank) if exact else (x.ndim < rank):
        what = "exactly" if exact else "at least"
        raise ValueError(f"Input {position} to {name} must have a rank of {what} {rank}, but "
                         f"got shape={tuple(x.shape)}")


def _inexact(name, *xs):
    xs = [jnp.asarray(x) for x in xs]
    for k, x in enumerate(xs):
        check_dtype_kinds(name, x, "fc", "subtypes of floating, complexfloating", position=k)
    return xs


def _column(a, i):
    """Column i (traced or static) of the trailing two axes: (..., m)."""
    return dynamic_index_in_dim(a, i, axis=a.ndim - 1, keepdims=False)


def _reflector_vector(a, i):
    """v_i = (0 .. 0, 1, a[i+1:, i]) of the reflectors stored below a's diagonal."""
    rows = jnp.arange(a.shape[-2])
    col = _column(a, i)
    return jnp.where(rows > i, col, jnp.where(rows == i, 1, 0).astype(a.dtype))


def _apply_left(v, tau, c):
    """(I - tau v v^H) c, batched (v: (..., m), tau: (...), c: (..., m, p))."""
    w = jnp.einsum("...m,...mp->...p", jnp.conj(v), c)
    return c - tau[..., None, None] * v[..., :, None] * w[..., None, :]


def _apply_right(v, tau, c):
    """c (I - tau v v^H), batched (c: (..., p, m))."""
    w = jnp.einsum("...pm,...m->...p", c, v)
    return c - tau[..., None, None] * w[..., :, None] * jnp.conj(v)[..., None, :]


def _larfg(x, p):
    """LAPACK larfg's reflector for the column x (..., m) that keeps rows above `p` (traced or
    static), and zeroes the rows below it: (v, tau, top), v (..., m) zero above p and 1 at p,
    and the value `top` (...) row p takes (beta, or x[p] where H is the identity, tau 0)."""
    rows = jnp.arange(x.shape[-1])
    real = jnp.finfo(x.dtype).dtype
    alpha = jnp.sum(jnp.where(rows == p, x, 0), axis=-1)
    tail = jnp.where(rows > p, x, 0)
    xnorm = jnp.sqrt(jnp.sum(jnp.abs(tail) ** 2, axis=-1))
    re, im = jnp.real(alpha), jnp.imag(alpha)
    identity = (xnorm == 0) & (im == 0)
    norm = jnp.sqrt(re ** 2 + im ** 2 + xnorm ** 2)
    beta = jnp.where(re >= 0, -norm, norm).astype(real)
    safe = jnp.where(identity, 1, beta)
    if jnp.iscomplexobj(x):
        tau = ((safe - re) / safe - 1j * im / safe).astype(x.dtype)
    else:
        tau = ((safe - alpha) / safe).astype(x.dtype)
    scale = 1 / jnp.where(identity, 1, alpha - safe.astype(x.dtype))
    tau = jnp.where(identity, 0, tau)
    unit = jnp.where(rows == p, 1, 0).astype(x.dtype)
    v = jnp.where(rows > p, x * scale[..., None], unit)
    v = jnp.where(identity[..., None], unit, v)
    return v, tau, jnp.where(identity, alpha, beta.astype(x.dtype))


def geqrf(a):
    """(a', taus): LAPACK geqrf's Householder QR of `a` (..., m, n) (module docstring)."""
    (a,) = _inexact("geqrf", a)
    _check_rank("geqrf", a, 0, 2)
    m, n = a.shape[-2:]
    k = min(m, n)
    rows, cols = jnp.arange(m), jnp.arange(n)

    def column(i, carry):
        a, taus = carry
        x = _column(a, i)
        v, tau, top = _larfg(x, i)
        trailing = _apply_left(v, jnp.conj(tau), a)
        a = jnp.where(cols > i, trailing, a)
        new_col = jnp.where(rows > i, v, jnp.where(rows == i, top[..., None], x))
        a = jnp.where(cols == i, new_col[..., :, None], a)
        taus = jnp.where(jnp.arange(k) == i, tau[..., None], taus)
        return a, taus
    taus = jnp.zeros(a.shape[:-2] + (k,), a.dtype)
    return _control.fori_loop(0, k, column, (a, taus))


def householder_product(a, taus):
    """Q = H_0 ... H_k-1 of the reflectors below `a`'s diagonal (..., m, n), `taus` (..., k):
    an (..., m, n) matrix with orthonormal columns (LAPACK's orgqr)."""
    a, taus = _inexact("householder_product", a, taus)
    _check_rank("householder_product", a, 0, 2)
    m, n = a.shape[-2:]
    k = taus.shape[-1]
    if m < n or k > n or taus.shape[:-1] != a.shape[:-2]:
        raise ValueError("householder_product requires a [..., m, n] matrix with m >= n and "
                         f"taus [..., k] with k <= n, got {tuple(a.shape)} and "
                         f"{tuple(taus.shape)}")
    q = jnp.broadcast_to(jnp.eye(m, n, dtype=a.dtype), a.shape)

    def step(j, q):
        i = k - 1 - j
        tau = dynamic_index_in_dim(taus, i, axis=taus.ndim - 1, keepdims=False)
        return _apply_left(_reflector_vector(a, i), tau, q)
    return _control.fori_loop(0, k, step, q)


def ormqr(a, taus, c, *, left=True, transpose=False):
    """Q C (left), C Q, or with Q^H (`transpose`), Q = H_0 ... H_k-1 from `a` and `taus`
    (the reflectors as geqrf leaves them), without forming Q."""
    a, taus, c = _inexact("ormqr", a, taus, c)
    if not a.dtype == taus.dtype == c.dtype:
        raise TypeError(f"lax.ormqr requires arguments to have the same dtypes, got "
                        f"{a.dtype}, {taus.dtype}, {c.dtype}.")
    k = taus.shape[-1]
    # left: Q C = H_0 (H_1 (... H_k-1 C)); Q^H C applies H_0^H first. right: C Q applies H_0
    # first; C Q^H applies H_k-1^H first.
    first_to_last = left == transpose

    def step(j, c):
        i = j if first_to_last else k - 1 - j
        tau = dynamic_index_in_dim(taus, i, axis=taus.ndim - 1, keepdims=False)
        tau = jnp.conj(tau) if transpose else tau
        v = _reflector_vector(a, i)
        return _apply_left(v, tau, c) if left else _apply_right(v, tau, c)
    return _control.fori_loop(0, k, step, c)


def lu_pivots_to_permutation(pivots, permutation_size):
    """The permutation of range(permutation_size) that `pivots` (..., k) int32 (LU's row
    swaps: row i with row pivots[i], in turn) makes."""
    pivots = jnp.asarray(pivots)
    if pivots.dtype != np.int32:
        check_dtype_kinds("lu_pivots_to_permutation", pivots, "", "subtypes of int32", position=0)
    _check_rank("lu_pivots_to_permutation", pivots, 0, 1)
    k = pivots.shape[-1]
    if permutation_size < k:
        raise ValueError(f"Output permutation size {permutation_size} has to exceed the "
                         f"trailing dimension of the pivots. Got pivots size {k}")
    index = jnp.arange(permutation_size, dtype=np.int32)
    perm = jnp.broadcast_to(index, pivots.shape[:-1] + (permutation_size,))

    def swap(i, perm):
        j = dynamic_index_in_dim(pivots, i, axis=pivots.ndim - 1, keepdims=True)
        here = dynamic_index_in_dim(perm, i, axis=perm.ndim - 1, keepdims=True)
        there = jnp.take_along_axis(perm, j, axis=-1)
        perm = jnp.where(index == i, there, perm)
        return jnp.where(index == j, here, perm)
    return _control.fori_loop(0, k, swap, perm)


def symmetric_product(a_matrix, c_matrix, *, alpha=1.0, beta=0.0, symmetrize_output=False):
    """alpha A A^T + beta C (A (..., m, n), C (..., m, m)); with `symmetrize_output` the upper
    triangle is the transpose of the lower one."""
    a, c = _inexact("symmetric_product", a_matrix, c_matrix)
    out = alpha * jnp.matmul(a, jnp.swapaxes(a, -1, -2)) + beta * c
    if symmetrize_output:
        lower = jnp.tril(out)
        out = lower + jnp.swapaxes(jnp.tril(out, -1), -1, -2)
    return out.astype(jnp.result_type(a, c))


def tridiagonal(a, *, lower=True):
    """(arr, d, e, taus): LAPACK sytrd/hetrd's reduction of the Hermitian `a` (..., n, n),
    read from the triangle `lower` names (module docstring)."""
    (a,) = _inexact("tridiagonal", a)
    if a.ndim < 2:
        raise TypeError(f"Input 0 to tridiagonal must have rank at least 2, but got "
                        f"shape={tuple(a.shape)}")
    n = a.shape[-1]
    if a.shape[-2] != n or n == 0:
        raise ValueError(f"The input to tridiagonal must be a square matrix. Got shape "
                         f"{tuple(a.shape[-2:])}.")
    a = bind(P["no_derivative"], a, name="tridiagonal")   # JAX defines no derivative
    if not lower:   # the upper triangle is the lower one of the matrix reversed both ways
        arr, d, e, taus = _tridiagonal_lower(jnp.flip(a, (-2, -1)))
        return jnp.flip(arr, (-2, -1)), jnp.flip(d, -1), jnp.flip(e, -1), jnp.flip(taus, -1)
    return _tridiagonal_lower(a)


def _tridiagonal_lower(a):
    n = a.shape[-1]
    rows = jnp.arange(n)
    below = rows[:, None] > rows[None, :]
    strict = jnp.where(below, a, 0)
    w = strict + jnp.conj(jnp.swapaxes(strict, -1, -2)) + jnp.real(
        jnp.where(rows[:, None] == rows[None, :], a, 0)).astype(a.dtype)
    real = jnp.finfo(a.dtype).dtype

    def step(i, carry):
        w, tails, e, taus = carry
        v, tau, top = _larfg(_column(w, i), i + 1)
        p = jnp.where(rows > i, tau[..., None] * jnp.einsum("...mn,...n->...m", w, v), 0)
        alpha = -0.5 * tau * jnp.sum(jnp.conj(p) * v, axis=-1)
        y = p + alpha[..., None] * v
        w = w - v[..., :, None] * jnp.conj(y)[..., None, :] - y[..., :, None] * jnp.conj(
            v)[..., None, :]
        tails = jnp.where(rows == i, v[..., :, None], tails)
        e = jnp.where(rows[:-1] == i, jnp.real(top)[..., None].astype(real), e)
        taus = jnp.where(rows[:-1] == i, tau[..., None], taus)
        return w, tails, e, taus
    batch = a.shape[:-2]
    w, tails, e, taus = _control.fori_loop(0, n - 1, step, (
        w, jnp.zeros_like(a), jnp.zeros(batch + (n - 1,), real),
        jnp.zeros(batch + (n - 1,), a.dtype)))
    d = jnp.real(jnp.diagonal(w, axis1=-2, axis2=-1)).astype(real)
    sub = rows[:, None] == rows[None, :] + 1
    e_full = jnp.concatenate([e, jnp.zeros(batch + (1,), real)], axis=-1)
    arr = jnp.where(rows[:, None] > rows[None, :] + 1, tails, a)
    arr = jnp.where(sub, e_full[..., None, :].astype(a.dtype), arr)
    arr = jnp.where(rows[:, None] == rows[None, :], d[..., None, :].astype(a.dtype), arr)
    return arr, d, e, taus


def tridiagonal_solve(dl, d, du, b, *, perturb_singular=False):
    """X with A X = B for the tridiagonal A: dl[i] = A[i, i-1] (dl[0] = 0), d[i] = A[i, i],
    du[i] = A[i, i+1] (du[m-1] = 0); b (..., m, n)."""
    dl, d, du, b = _inexact("tridiagonal_solve", dl, d, du, b)
    _check_rank("tridiagonal_solve", b, 3, 2)
    m = d.shape[-1]
    for k, v in enumerate((dl, d, du)):
        if v.shape != b.shape[:-1]:
            raise ValueError(f"tridiagonal_solve: input {k} must have shape "
                             f"{tuple(b.shape[:-1])} (b's without its last axis), got "
                             f"{tuple(v.shape)}")
    if m == 0:
        return b
    rows = [jnp.moveaxis(x, -1, 0) for x in (dl, d, du)]
    rhs = jnp.moveaxis(b, -2, 0)
    if m == 1:
        return jnp.where(d[..., None] == 0, jnp.nan, b / d[..., None])

    def eliminate(row, nxt):
        cd, cdu, cb = row
        dl1, d1, du1, b1 = nxt
        swap = jnp.abs(cd) < jnp.abs(dl1)
        keep_fact = dl1 / jnp.where(swap, 1, cd)
        swap_fact = cd / jnp.where(swap, dl1, 1)
        out_row = (jnp.where(swap, dl1, cd), jnp.where(swap, d1, cdu),
                   jnp.where(swap, du1, 0), jnp.where(swap[..., None], b1, cb))
        new_row = (jnp.where(swap, cdu - swap_fact * d1, d1 - keep_fact * cdu),
                   jnp.where(swap, -swap_fact * du1, du1),
                   jnp.where(swap[..., None], cb - swap_fact[..., None] * b1,
                             b1 - keep_fact[..., None] * cb))
        return new_row, out_row
    first = (rows[1][0], rows[2][0], rhs[0])
    last, (ud, udu, udu2, ub) = _control.scan(
        eliminate, first, (rows[0][1:], rows[1][1:], rows[2][1:], rhs[1:]))
    ud = jnp.concatenate([ud, last[0][None]])
    udu = jnp.concatenate([udu, last[1][None]])
    udu2 = jnp.concatenate([udu2, jnp.zeros_like(last[1])[None]])
    ub = jnp.concatenate([ub, last[2][None]])
    if perturb_singular:   # tiny pivots become eps * max|U|, keeping their sign
        scale = jnp.finfo(d.dtype).eps * jnp.max(
            jnp.maximum(jnp.maximum(jnp.abs(ud), jnp.abs(udu)), jnp.abs(udu2)), axis=0)
        tiny = jnp.abs(ud) < scale
        ud = jnp.where(tiny, jnp.where(jnp.real(ud) < 0, -scale, scale).astype(ud.dtype), ud)
    singular = jnp.any(ud == 0, axis=0)   # LAPACK's info > 0: the system's result is NaN

    def substitute(carry, row):
        x1, x2 = carry
        rd, rdu, rdu2, rb = row
        x = (rb - rdu[..., None] * x1 - rdu2[..., None] * x2) / rd[..., None]
        return (x, x1), x
    zero = jnp.zeros_like(rhs[0])
    _, xs = _control.scan(substitute, (zero, zero), (ud, udu, udu2, ub), reverse=True)
    xs = jnp.where(singular[None, ..., None], jnp.nan, xs)
    return jnp.moveaxis(xs, 0, -2)


def cholesky_update(r_matrix, w_vector):
    """The upper Cholesky factor of R^T R + w w^T, R upper triangular (n, n), w (n,)."""
    r, w = _inexact("cholesky_update", r_matrix, w_vector)
    _check_rank("cholesky_update", r, 0, 2, exact=True)
    _check_rank("cholesky_update", w, 1, 1, exact=True)
    n = r.shape[-1]
    if r.shape != (n, n) or w.shape != (n,):
        raise ValueError("cholesky_update requires a square (n, n) matrix and an (n,) vector, "
                         f"got {tuple(r.shape)} and {tuple(w.shape)}")
    index = jnp.arange(n)

    def step(k, carry):
        r, w = carry
        row = dynamic_index_in_dim(r, k, axis=0, keepdims=False)
        rkk = jnp.sum(jnp.where(index == k, row, 0))
        wk = jnp.sum(jnp.where(index == k, w, 0))
        rr = jnp.sqrt(rkk * rkk + wk * wk)
        c, s = rr / rkk, wk / rkk
        after = index > k
        new_row = jnp.where(after, (row + s * w) / c, jnp.where(index == k, rr, row))
        w = jnp.where(after, c * w - s * new_row, w)
        r = jnp.where((index == k)[:, None], new_row[None, :], r)
        return r, w
    return _control.fori_loop(0, n, step, (r, w))[0]
