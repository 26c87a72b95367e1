"""`kiln.numpy` polynomials as coefficient arrays, highest power first (NumPy's `poly1d`
convention): poly, polyadd, polysub, polymul, polydiv, polyder, polyint, polyval, polyfit.

`poly` of a square matrix builds its characteristic polynomial with the Faddeev-LeVerrier
recursion (matrix products and traces; JAX computes the eigenvalues first). `polyval` is
Horner's rule. `polymul` is `convolve`; `polydiv` is long division over the static lengths.
`polyfit` solves the column-scaled Vandermonde system with `linalg.lstsq` (through the SVD),
as NumPy and JAX do. `roots` is the eigenvalues of the companion matrix (`linalg.eigvals`),
complex whatever the roots are; it strips leading zeros (which needs a concrete array), or with
`strip_zeros=False` (usable under `jit`) gives NaN for the roots they would have added.
"""
import operator

import numpy as np

from ._core import check_arraylike
from ._linalg_solvers import inv, lstsq, eigvals
from ..compiler.errors import ConcretizationError
from .. import numpy as jnp

__all__ = ["poly", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint", "polyval",
           "polyfit", "roots"]


def _inexact(*xs):
    arrs = [jnp.asarray(x) for x in xs]
    dtype = jnp.result_type(*arrs, jnp.float32) if not any(a.dtype.kind in "fc"
                                                           for a in arrs) \
        else jnp.result_type(*arrs)
    return [a.astype(dtype) for a in arrs]


def _trim(p):
    """Without leading zeros (needs a concrete array)."""
    nz = [i for i, c in enumerate(list(p)) if c != 0]
    return p[nz[0]:] if nz else p[-1:]


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots (or a square matrix's
    characteristic polynomial)."""
    check_arraylike("poly", seq_of_zeros)
    (a,) = _inexact(seq_of_zeros)
    if a.ndim == 0:   # one root, as JAX reads a scalar
        a = jnp.reshape(a, (1,))
    if a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] > 0:
        n = a.shape[0]
        coeffs = [jnp.ones((), a.dtype)]
        m = jnp.zeros_like(a)
        eye = jnp.eye(n, dtype=a.dtype)
        for k in range(1, n + 1):
            m = a @ m + coeffs[-1] * eye
            coeffs.append(-jnp.trace(a @ m) / k)
        # complex, as JAX's (which takes the roots from eigvals)
        return jnp.stack(coeffs).astype(jnp.result_type(a.dtype, complex))
    if a.ndim != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    out = jnp.ones(1, a.dtype)
    for k in range(a.shape[0]):
        out = jnp.convolve(out, jnp.stack([jnp.ones((), a.dtype), -a[k]]))
    return out


def _aligned(name, a1, a2):
    check_arraylike(name, a1, a2)
    a, b = jnp.asarray(a1), jnp.asarray(a2)
    n = max(a.shape[0], b.shape[0])
    return jnp.pad(a, (n - a.shape[0], 0)), jnp.pad(b, (n - b.shape[0], 0))


def polyadd(a1, a2):
    """The sum of two polynomials."""
    a, b = _aligned("polyadd", a1, a2)
    return a + b


def polysub(a1, a2):
    """The difference of two polynomials."""
    a, b = _aligned("polysub", a1, a2)
    return a - b


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The product of two polynomials."""
    check_arraylike("polymul", a1, a2)
    a, b = _inexact(a1, a2)
    if trim_leading_zeros:
        a, b = _trim(a), _trim(b)
    if a.shape[0] == 0 or b.shape[0] == 0:
        return jnp.zeros(1, a.dtype)
    return jnp.convolve(a, b)


def polydiv(u, v, *, trim_leading_zeros=False):
    """(quotient, remainder) of the polynomial division `u / v`."""
    check_arraylike("polydiv", u, v)
    u, v = _inexact(u, v)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = 1.0 / v[0]
    q = jnp.zeros(max(m - n + 1, 1), u.dtype)
    r = u
    for k in range(0, m - n + 1):
        d = scale * r[k]
        q = q.at[k].set(d)
        r = r.at[k:k + n + 1].add(-d * v)
    if trim_leading_zeros:
        r = _trim(r)
    return q, r


def polyder(p, m=1):
    """The `m`-th derivative of a polynomial."""
    check_arraylike("polyder", p)
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    (p,) = _inexact(p)
    for _ in range(m):
        n = p.shape[0] - 1
        if n <= 0:
            return jnp.zeros(max(n, 0), p.dtype)
        p = p[:-1] * jnp.arange(n, 0, -1, dtype=p.dtype)
    return p


def polyint(p, m=1, k=None):
    """The `m`-th antiderivative, with integration constants `k` (zeros by default)."""
    check_arraylike("polyint", p)
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    (p,) = _inexact(p)
    ks = jnp.zeros(m, p.dtype) if k is None else \
        jnp.broadcast_to(jnp.asarray(k, p.dtype).ravel(), (m,)) if jnp.ndim(k) == 0 or \
        jnp.size(k) == 1 else jnp.asarray(k, p.dtype)
    if ks.shape[0] != m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    for i in range(m):
        n = p.shape[0]
        p = jnp.concatenate([p / jnp.arange(n, 0, -1, dtype=p.dtype), ks[i:i + 1]])
    return p


def polyval(p, x, *, unroll=16):
    """The polynomial `p` evaluated at `x` (Horner's rule)."""
    check_arraylike("polyval", p, x)
    p, x = jnp.asarray(p), jnp.asarray(x)
    dtype = jnp.result_type(p, x)
    p, x = p.astype(dtype), x.astype(dtype)
    y = jnp.zeros_like(x)
    for i in range(p.shape[0]):
        y = y * x + p[i]
    return y


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree `deg` through the points (x, y), highest power
    first; `y` may hold several data sets as columns. `full=True` adds (residuals, rank,
    singular values, rcond); `cov=True` adds the coefficients' covariance ("unscaled": not
    scaled by the residual variance)."""
    check_arraylike("polyfit", x, y)
    deg = operator.index(deg)
    if deg < 0:
        raise ValueError("expected deg >= 0")
    x, y = _inexact(x, y)
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.size == 0:
        raise TypeError("expected non-empty vector for x")
    if y.ndim not in (1, 2):
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")
    order = deg + 1
    if rcond is None:
        rcond = len(x) * float(np.finfo(x.dtype).eps)
    lhs = jnp.vander(x, order)
    rhs = y
    if w is not None:
        check_arraylike("polyfit", w)
        w, = _inexact(w)
        if w.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * w[:, None]
        rhs = rhs * (w if rhs.ndim == 1 else w[:, None])
    scale = jnp.sqrt(jnp.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = lstsq(lhs, rhs, rcond)
    c = (c.T / scale).T
    if full:
        return c, resids, rank, s, jnp.asarray(rcond)
    if not cov:
        return c
    base = inv(lhs.T @ lhs) / jnp.outer(scale, scale)
    if cov == "unscaled":
        fac = 1
    else:
        if len(x) <= order:
            raise ValueError("the number of data points must exceed order to scale the "
                             "covariance matrix")
        fac = resids / (len(x) - order)
        fac = fac[0] if y.ndim == 1 else fac
    return c, (base * fac if y.ndim == 1 else base[:, :, None] * fac)


def roots(p, *, strip_zeros=True):
    """The roots of the polynomial with coefficients `p` (highest power first)."""
    check_arraylike("roots", p)
    (p,) = _inexact(p)
    p = jnp.atleast_1d(p)
    if p.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    complex_dtype = jnp.result_type(p.dtype, jnp.complex64)
    if p.shape[0] < 2:
        return jnp.zeros((0,), complex_dtype)
    leading = jnp.where(jnp.all(p == 0), p.shape[0], jnp.argmin(p == 0))
    if not strip_zeros:
        return _roots_with_zeros(p, leading)
    try:
        leading = int(leading)
    except ConcretizationError as e:
        e.add_note("jnp.roots strips the leading zeros of a concrete array: under jit pass "
                   "strip_zeros=False (roots that leading zeros would add are then NaN)")
        raise
    return _companion_roots(p[leading:], complex_dtype)


def _companion_roots(p, complex_dtype):
    if p.shape[0] < 2:
        return jnp.zeros((0,), complex_dtype)
    a = jnp.diag(jnp.ones((p.shape[0] - 2,), p.dtype), -1)
    return eigvals(a.at[0, :].set(-p[1:] / p[0]))


def _roots_with_zeros(p, leading):
    """The roots of `p` with `leading` (traced) leading zeros: those rolled to the end, the
    zero roots they make sorted last and replaced by NaN."""
    n = p.shape[0]
    p = jnp.where(leading == n, jnp.ones((), p.dtype), p)
    found = _companion_roots(jnp.roll(p, -leading), jnp.result_type(p.dtype, jnp.complex64))
    found = found[jnp.argsort(found == 0, stable=True)]
    return jnp.where(jnp.arange(found.shape[0]) < found.shape[0] - leading, found,
                     complex(np.nan, np.nan))
