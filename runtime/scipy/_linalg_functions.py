"""kiln.scipy.linalg's matrix functions and Schur-based solvers, over kiln.numpy and the
decomposition primitives: expm (JAX's Padé scaling and squaring), expm_frechet, schur,
hessenberg, rsf2csf, sqrtm, funm, solve_sylvester, eigh_tridiagonal and qr_multiply.

The triangular recurrences (sqrtm, funm, solve_sylvester, rsf2csf) loop in Python over the
matrix's static size: they compile to straight-line code, one step per column (or per
rotation), which suits the small matrices they are used on."""
import numpy as np

from .. import lax
from .. import numpy as jnp
from ..array import to_array
from ..lax import linalg as lax_linalg
from ..numpy._core import promote_dtypes_inexact

__all__ = ["expm", "expm_frechet", "schur", "hessenberg", "rsf2csf", "sqrtm", "funm",
           "solve_sylvester", "eigh_tridiagonal", "qr_multiply"]

# JAX's Padé tables: (maxnorm, switch points, orders) per precision
_PADE = {
    64: (5.371920351148152, (1.495585217958292e-002, 2.539398330063230e-001,
                             9.504178996162932e-001, 2.097847961257068e+000), (3, 5, 7, 9, 13)),
    32: (3.925724783138660, (4.258730016922831e-001, 1.880152677804762e+000), (3, 5, 7)),
}
_COEFFICIENTS = {
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
        3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
         129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
         40840800., 960960., 16380., 182., 1.),
}


def _square(name, a):
    a, = promote_dtypes_inexact(to_array(a, name))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"Expected A to be a (batched) square matrix, got A.shape={a.shape}.")
    return a


def _pade(order):
    """U, V of the Padé approximant of `order` (odd and even parts), as JAX's."""
    b = _COEFFICIENTS[order]

    def uv(a):
        eye = jnp.eye(a.shape[-1], dtype=a.dtype)
        a2 = a @ a
        if order < 13:
            powers = [eye, a2]
            while len(powers) <= order // 2:
                powers.append(powers[-1] @ a2)
            u = a @ sum(b[2 * k + 1] * p for k, p in enumerate(powers))
            v = sum(b[2 * k] * p for k, p in enumerate(powers))
            return u, v
        a4 = a2 @ a2
        a6 = a4 @ a2
        u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
                 + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
            + b[0] * eye
        return u, v
    return uv


def _expm_2d(a, upper_triangular, max_squarings):
    bits = 64 if np.dtype(a.dtype) in (np.float64, np.complex128) else 32
    maxnorm, conds, orders = _PADE[bits]
    norm = jnp.linalg.norm(a, 1)
    squarings = jnp.maximum(0, jnp.floor(jnp.log2(norm / maxnorm)))
    scaled = a / (2 ** squarings).astype(a.dtype)
    index = jnp.digitize(norm, jnp.array(conds, norm.dtype))
    u, v = lax.switch(index, [_pade(order) for order in orders], scaled)
    p, q = u + v, v - u
    r = (lax_linalg.triangular_solve(q, p, left_side=True, lower=False) if upper_triangular
         else jnp.linalg.solve(q, p))

    def step(c, i):
        return jnp.where(i < squarings, c @ c, c), None
    r, _ = lax.scan(step, r, jnp.arange(max_squarings, dtype=squarings.dtype))
    return jnp.where(squarings > max_squarings, jnp.full_like(r, np.nan), r)


def expm(A, *, upper_triangular=False, max_squarings=16):  # noqa: N803
    a = _square("expm", A)
    f = lambda m: _expm_2d(m, upper_triangular, max_squarings)  # noqa: E731
    return jnp.vectorize(f, signature="(n,n)->(n,n)")(a) if a.ndim > 2 else f(a)


def expm_frechet(A, E, *, method=None, compute_expm=True):  # noqa: N803
    """(expm(A), L(A, E)), or L alone: the Fréchet derivative of expm at A in direction E,
    read off the exponential of the block matrix [[A, E], [0, A]]."""
    a, e = promote_dtypes_inexact(to_array(A, "expm_frechet"), to_array(E, "expm_frechet"))
    if a.ndim != 2 or a.shape[0] != a.shape[1] or e.shape != a.shape:
        raise ValueError("expected A and E to be square matrices of the same shape")
    n = a.shape[0]
    block = jnp.block([[a, e], [jnp.zeros_like(a), a]])
    big = expm(block)
    frechet = big[:n, n:]
    return (big[:n, :n], frechet) if compute_expm else frechet


def schur(a, output="real"):
    if output not in ("real", "complex"):
        raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got {output=}.")
    a, = promote_dtypes_inexact(to_array(a, "schur"))
    if output == "complex" and not jnp.iscomplexobj(a):
        a = a.astype(jnp.result_type(a.dtype, np.complex64))
    return lax_linalg.schur(a)


def hessenberg(a, *, calc_q=False, overwrite_a=False, check_finite=True):
    """H, and Q with a = Q H Q^H when `calc_q`: gehrd's packed result, its reflectors applied
    to the identity one at a time."""
    a, = promote_dtypes_inexact(to_array(a, "hessenberg"))
    packed, taus = lax_linalg.hessenberg(a)
    n = a.shape[-1]
    h = jnp.triu(packed, -1)
    if not calc_q:
        return h
    q = jnp.broadcast_to(jnp.eye(n, dtype=a.dtype), a.shape)
    rows = jnp.arange(n)
    for k in range(n - 2):
        below = jnp.where(rows > k + 1, packed[..., :, k], 0)
        v = jnp.where(rows == k + 1, 1, below).astype(a.dtype)
        tau = taus[..., k, None, None]
        w = q @ v[..., :, None]
        q = q - tau * w @ jnp.conj(v)[..., None, :]
    return h, q


def rsf2csf(T, Z, check_finite=True):  # noqa: N803
    """The complex Schur form of a real one: Givens rotations zero each 2x2 block's
    subdiagonal (SciPy's algorithm, the block's eigenvalues through eigvals)."""
    t, z = promote_dtypes_inexact(to_array(T, "rsf2csf"), to_array(Z, "rsf2csf"))
    dtype = jnp.result_type(t.dtype, np.complex64)
    t, z = t.astype(dtype), z.astype(dtype)
    n = t.shape[-1]
    eps = np.finfo(dtype).eps
    for m in range(n - 1, 0, -1):
        sub = t[m, m - 1]
        mu = jnp.linalg.eigvals(t[m - 1:m + 1, m - 1:m + 1]) - t[m, m]
        r = jnp.sqrt(jnp.abs(mu[0]) ** 2 + jnp.abs(sub) ** 2).astype(dtype)
        c, s = mu[0] / r, sub / r
        g = jnp.stack([jnp.stack([jnp.conj(c), s]), jnp.stack([-s, c])])
        gh = jnp.conj(g.T)
        rotated = t.at[m - 1:m + 1, m - 1:].set(g @ t[m - 1:m + 1, m - 1:])
        rotated = rotated.at[:m + 1, m - 1:m + 1].set(rotated[:m + 1, m - 1:m + 1] @ gh)
        turned = z.at[:, m - 1:m + 1].set(z[:, m - 1:m + 1] @ gh)
        block = jnp.abs(sub) > eps * (jnp.abs(t[m - 1, m - 1]) + jnp.abs(t[m, m]))
        t = jnp.where(block, rotated, t).at[m, m - 1].set(0)
        z = jnp.where(block, turned, z)
    return t, z


def _complex_schur(a):
    a = a.astype(jnp.result_type(a.dtype, np.complex64))
    return lax_linalg.schur(a)


def sqrtm(A, blocksize=1):  # noqa: N803
    """The principal square root through the complex Schur form (Björck and Hammarling):
    each column of the triangular root solves one triangular system."""
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    a = _square("sqrtm", A)
    t, z = _complex_schur(a)
    n = a.shape[-1]
    d = jnp.sqrt(jnp.diagonal(t))
    u = jnp.diag(d)
    for j in range(1, n):
        lhs = u[:j, :j] + d[j] * jnp.eye(j, dtype=u.dtype)
        column = lax_linalg.triangular_solve(lhs, t[:j, j:j + 1], left_side=True, lower=False)
        u = u.at[:j, j].set(column[:, 0])
    return z @ u @ jnp.conj(z.T)


def funm(A, func, disp=True):  # noqa: N803
    """func(A) through the Schur form made complex (rsf2csf) and Parlett's recurrence
    (distinct eigenvalues assumed), complex as JAX's; with `disp=False`, also SciPy's error
    estimate."""
    a = _square("funm", A)
    t, z = rsf2csf(*lax_linalg.schur(a))
    n = a.shape[-1]
    f = jnp.diag(func(jnp.diagonal(t)))
    for p in range(1, n):
        for i in range(n - p):
            j = i + p
            s = t[i, j] * (f[j, j] - f[i, i])
            if p > 1:
                s = s + t[i, i + 1:j] @ f[i + 1:j, j] - f[i, i + 1:j] @ t[i + 1:j, j]
            f = f.at[i, j].set(s / (t[j, j] - t[i, i]))
    out = z @ f @ jnp.conj(z.T)
    if disp:
        return out
    diag = jnp.diagonal(t)
    gaps = jnp.abs(diag[:, None] - diag[None, :]) + jnp.eye(n) * jnp.inf
    tol = np.finfo(out.real.dtype).eps
    smallest = jnp.min(gaps) if n > 1 else jnp.inf
    smallest = jnp.where(smallest == 0, tol, smallest)
    err = jnp.minimum(1, jnp.maximum(tol, tol / smallest * jnp.linalg.norm(jnp.triu(t, 1), 1)))
    return out, jnp.where(jnp.any(jnp.isinf(out)), np.inf, err)


def solve_sylvester(A, B, C, *, method="schur", tol=1e-8):  # noqa: N803
    """X with A X + X B = C (Bartels and Stewart): A = U R U^H and B = V S V^H (complex
    Schur forms), then R Y + Y S = U^H C V one column of Y at a time, X = U Y V^H; NaN when
    some eigenvalues of A and -B are within `tol`, as JAX."""
    if method != "schur":
        raise ValueError(f"kiln.scipy.linalg.solve_sylvester has method 'schur' only, not "
                         f"{method!r}")
    a, b, c = promote_dtypes_inexact(*(to_array(x, "solve_sylvester") for x in (A, B, C)))
    r, u = _complex_schur(a)
    s, v = _complex_schur(b)
    f = jnp.conj(u.T) @ c.astype(r.dtype) @ v
    m, n = c.shape
    y = jnp.zeros((m, n), r.dtype)
    for k in range(n):
        rhs = f[:, k:k + 1] - y[:, :k] @ s[:k, k:k + 1]
        lhs = r + s[k, k] * jnp.eye(m, dtype=r.dtype)
        y = y.at[:, k].set(lax_linalg.triangular_solve(lhs, rhs, left_side=True,
                                                       lower=False)[:, 0])
    x = u @ y @ jnp.conj(v.T)
    if not jnp.iscomplexobj(c):
        x = x.real
    close = jnp.any(jnp.abs(jnp.diagonal(r)[:, None] + jnp.diagonal(s)[None, :]) < tol)
    return jnp.where(close, jnp.full_like(x, np.nan), x)


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None,
                     max_eigvals=None, tol=None):
    """The eigenvalues (ascending) of the symmetric tridiagonal matrix with diagonal d and
    off-diagonal e, through eigh of the dense matrix; eigenvectors are not provided, as in
    JAX."""
    if not eigvals_only:
        raise NotImplementedError("Calculation of eigenvectors is not implemented")
    if select != "a":
        raise NotImplementedError(f"kiln's eigh_tridiagonal has select='a' only, not "
                                  f"{select!r}")
    d, e = promote_dtypes_inexact(to_array(d, "eigh_tridiagonal"),
                                  to_array(e, "eigh_tridiagonal"))
    dense = jnp.diag(d) + jnp.diag(e, 1) + jnp.diag(jnp.conj(e), -1)
    return jnp.linalg.eigvalsh(dense).astype(d.real.dtype)


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False):
    """(Q @ c or c @ Q, R) of the economic QR of `a`, as SciPy's (c a vector for 'left' is a
    column)."""
    if pivoting:
        raise NotImplementedError("kiln's qr_multiply has no pivoting")
    if mode not in ("left", "right"):
        raise ValueError(f"mode must be 'left' or 'right', got {mode!r}")
    a, c = promote_dtypes_inexact(to_array(a, "qr_multiply"), to_array(c, "qr_multiply"))
    q, r = lax_linalg.qr(a, full_matrices=False)
    if conjugate:
        q = jnp.conj(q)
    if mode == "left":
        return q @ c, r
    return c @ q, r
