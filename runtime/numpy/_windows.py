"""`kiln.numpy` window functions and the Bessel function they need: bartlett, blackman,
hamming, hanning, kaiser (NumPy's formulas, in the default float dtype) and i0.

`i0(x)` (the modified Bessel function of the first kind, order 0) sums its power series
`sum((x/2)**(2k) / (k!)**2)` (all terms positive: no cancellation) for |x| <= 15, and beyond
uses the asymptotic series `e**x / sqrt(2 pi x) * sum(((2k-1)!!)**2 / (k! (8x)**k))`; each
branch is fed a safe argument where the other is chosen, so derivatives stay finite.
"""
import math

import numpy as np

from ..compiler.ir import dtypes
from ._core import check_arraylike
from .. import numpy as jnp

__all__ = ["bartlett", "blackman", "hamming", "hanning", "kaiser", "i0"]

_SERIES_TERMS = 40
_ASYMPTOTIC = [1.0]
for _k in range(1, 10):
    _ASYMPTOTIC.append(_ASYMPTOTIC[-1] * (2 * _k - 1) ** 2 / (_k * 8))


def i0(x):
    """The modified Bessel function of the first kind, order 0."""
    check_arraylike("i0", x)
    x = jnp.asarray(x)
    if x.dtype.kind == "c":
        raise ValueError("i0 does not support complex input")
    if x.dtype.kind not in "f":
        x = x.astype(dtypes.default_float())
    a = jnp.abs(x)
    big = a > 15
    small = jnp.where(big, 0, a)
    q = (small / 2) ** 2
    term = jnp.ones_like(small)
    total = term
    for k in range(1, _SERIES_TERMS):
        term = term * q / (k * k)
        total = total + term
    large = jnp.where(big, a, 16)
    inv = 1 / large
    tail = jnp.zeros_like(large)
    for c in reversed(_ASYMPTOTIC):
        tail = tail * inv + c
    asym = jnp.exp(large) / jnp.sqrt(2 * math.pi * large) * tail
    return jnp.where(big, asym, total)


def _n(M, name):
    check_arraylike(name, M)
    M = int(M)
    return M, jnp.arange(1 - M, M, 2, dtype=dtypes.default_float())


def _cosine_window(M, name, a0, a1, a2=0.0):
    M, n = _n(M, name)
    if M <= 1:
        return jnp.ones(max(M, 0), dtypes.default_float())
    w = a0 + a1 * jnp.cos(np.pi * n / (M - 1))
    return w + a2 * jnp.cos(2 * np.pi * n / (M - 1)) if a2 else w


def bartlett(M):
    """The triangular window of `M` points."""
    M, n = _n(M, "bartlett")
    if M <= 1:
        return jnp.ones(max(M, 0), dtypes.default_float())
    return jnp.where(n <= 0, 1 + n / (M - 1), 1 - n / (M - 1))


def blackman(M):
    """The Blackman window of `M` points."""
    return _cosine_window(M, "blackman", 0.42, 0.5, 0.08)


def hamming(M):
    """The Hamming window of `M` points."""
    return _cosine_window(M, "hamming", 0.54, 0.46)


def hanning(M):
    """The Hann window of `M` points."""
    return _cosine_window(M, "hanning", 0.5, 0.5)


def kaiser(M, beta):
    """The Kaiser window of `M` points with shape parameter `beta`."""
    check_arraylike("kaiser", M, beta)
    M = int(M)
    dtype = dtypes.default_float()
    if M <= 1:
        return jnp.ones(max(M, 0), dtype)
    n = jnp.arange(0, M, dtype=dtype)
    alpha = (M - 1) / 2.0
    beta = jnp.asarray(beta, dtype)
    return i0(beta * jnp.sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(beta)
