"""kiln.scipy.linalg's special matrices: those built from array arguments (circulant,
companion, convolution_matrix, fiedler, fiedler_companion, hankel, leslie) are written over
kiln.numpy (they trace under jit and differentiate); those of a static size alone (dft,
hadamard, helmert, hilbert, invhilbert, pascal, invpascal) are computed on the host and
returned as arrays, in JAX's dtypes."""
import math

import numpy as np

from .. import numpy as jnp
from ..array import to_array
from ..numpy._core import promote_dtypes_inexact

__all__ = ["circulant", "companion", "convolution_matrix", "dft", "fiedler",
           "fiedler_companion", "hadamard", "hankel", "helmert", "hilbert", "invhilbert",
           "invpascal", "leslie", "pascal"]


def _vector(name, x):
    return jnp.ravel(to_array(x, name))


def _grid(n, m):
    return jnp.arange(n)[:, None], jnp.arange(m)[None, :]


def circulant(c):
    c = _vector("circulant", c)
    n = c.shape[0]
    i, j = _grid(n, n)
    return c[(i - j) % max(n, 1)]


def companion(a):
    a = _vector("companion", a)
    if a.shape[0] < 2:
        raise ValueError("The length of `a` must be at least 2.")
    n = a.shape[0] - 1
    first = -a[1:] / a[0]
    i, j = _grid(n, n)
    return jnp.where(i == 0, first[None, :], jnp.where(i == j + 1, 1, 0).astype(first.dtype))


def convolution_matrix(a, n, mode="full"):
    """The Toeplitz matrix T with T @ v = np.convolve(a, v, mode) for v of length n."""
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    a = _vector("convolution_matrix", a)
    m = a.shape[0]
    if n <= 0 or m == 0:
        raise ValueError("n must be positive and a must not be empty")
    full = m + n - 1
    start = {"full": 0, "same": (min(n, m) - 1) // 2, "valid": min(n, m) - 1}[mode]
    rows = {"full": full, "same": max(m, n), "valid": max(m, n) - min(m, n) + 1}[mode]
    i, j = _grid(rows, n)
    k = i + start - j
    return jnp.where((k >= 0) & (k < m), a[jnp.clip(k, 0, m - 1)], 0).astype(a.dtype)


def fiedler(a):
    a = _vector("fiedler", a)
    return jnp.abs(a[:, None] - a[None, :])


def fiedler_companion(a):
    a = _vector("fiedler_companion", a)
    if a.shape[0] < 1:
        raise ValueError("Leading coefficient is zero.")
    n = a.shape[0] - 1
    if n == 0:
        return jnp.zeros((0, 0), a.dtype)
    a = a / a[0]
    i, j = _grid(n, n)
    even = i % 2 == 0
    coefficient = lambda k: -a[jnp.minimum(k, n)]  # noqa: E731
    conditions = [(i == 0) & (j == 0), (i == 1) & (j == 0), (j == i + 1) & even,
                  (j == i + 2) & even, (j == i - 1) & even & (i >= 2),
                  (j == i - 2) & ~even & (i >= 3)]
    choices = [-a[1], 1, coefficient(i + 2), 1, coefficient(i + 1), 1]
    return jnp.select(conditions, [jnp.broadcast_to(jnp.asarray(c, a.dtype), (n, n))
                                   for c in choices], 0)


def hankel(c, r=None):
    c = _vector("hankel", c)
    r = jnp.zeros_like(c) if r is None else _vector("hankel", r)
    if np.dtype(c.dtype) != np.dtype(r.dtype):
        c, r = promote_dtypes_inexact(c, r)
    m, n = c.shape[0], r.shape[0]
    i, j = _grid(m, n)
    k = i + j
    return jnp.where(k < m, c[jnp.clip(k, 0, max(m - 1, 0))],
                     r[jnp.clip(k - m + 1, 0, max(n - 1, 0))])


def leslie(f, s):
    f, s = _vector("leslie", f), _vector("leslie", s)
    n = f.shape[0]
    if s.shape[0] != n - 1:
        raise ValueError("Incorrect lengths for f and s. The length of s must be one less "
                         "than the length of f.")
    f, s = promote_dtypes_inexact(f, s) if np.dtype(f.dtype) != np.dtype(s.dtype) else (f, s)
    i, j = _grid(n, n)
    below = jnp.where(i == j + 1, s[jnp.clip(j, 0, max(n - 2, 0))], 0)
    return jnp.where(i == 0, f[None, :], below).astype(f.dtype)


def _float():
    return jnp.zeros(()).dtype


def dft(n, scale=None, *, dtype=None):
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; {scale!r} is not valid.")
    k = np.arange(n)
    m = np.exp(-2j * np.pi * np.outer(k, k) / max(n, 1))
    m = m / {None: 1, "sqrtn": math.sqrt(max(n, 1)), "n": max(n, 1)}[scale]
    complex_default = jnp.result_type(_float(), np.complex64)
    return jnp.asarray(m, dtype or complex_default)


def hadamard(n, dtype=int):
    if n < 1 or n & (n - 1):
        raise ValueError("n must be an positive integer, and n must be a power of 2")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h, dtype)


def helmert(n, full=False):
    h = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    h[0], d[0] = 1, n
    h = h / np.sqrt(d)[:, None]
    return jnp.asarray(h if full else h[1:], _float())


def hilbert(n):
    i = np.arange(n)
    return jnp.asarray(1.0 / (i[:, None] + i[None, :] + 1), _float())


def invhilbert(n):
    """The exact inverse, from its closed form in integers, rounded once."""
    c = math.comb
    out = [[(-1) ** (i + j) * (i + j + 1) * c(n + i, n - j - 1) * c(n + j, n - i - 1)
            * c(i + j, i) ** 2 for j in range(n)] for i in range(n)]
    return jnp.asarray(np.array(out, dtype=np.float64).reshape(n, n), _float())


def _pascal_lower(n, sign):
    return np.array([[sign ** (i - j) * math.comb(i, j) if j <= i else 0 for j in range(n)]
                     for i in range(n)], dtype=np.float64).reshape(n, n)


def _kind(kind):
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"Expected kind to be 'symmetric', 'lower', or 'upper', got {kind!r}")
    return kind


def pascal(n, kind=None):
    kind, lower = _kind(kind), _pascal_lower(n, 1)
    out = {"lower": lower, "upper": lower.T, "symmetric": lower @ lower.T}[kind]
    return jnp.asarray(out, _float())


def invpascal(n, kind=None):
    kind, lower = _kind(kind), _pascal_lower(n, -1)
    out = {"lower": lower, "upper": lower.T, "symmetric": lower.T @ lower}[kind]
    return jnp.asarray(out, _float())
