"""`kiln.scipy.special.bessel_jn`: Bessel functions of the first kind J_0 .. J_v at real z, by
Miller's backward recurrence as JAX computes them (Zhang and Jin's BJNDD).

Starting from J_{n_iter+1} = 0 and J_{n_iter} = 1e-16, the recurrence
J_{k-1} = 2 k J_k / z - J_{k+1} runs down to k = 0 in a reverse `lax.scan` over the whole
array (JAX vmaps a scalar scan; the lanes are independent either way), and the values are
normalised by J_0 + 2 (J_2 + J_4 + ...) = 1. `n_iter` bounds the accuracy: JAX's rule of
thumb asks for the smallest n with 0.5 log10(6.28 + n) - n log10(1.36 + |z| / n) > 20.
Reverse mode differentiates through the scan, as in JAX (which has no closed-form rule)."""
import operator

from .. import lax
from .. import numpy as jnp
from ..numpy._core import promote_dtypes_inexact
from ._special import _const

__all__ = ["bessel_jn"]


def bessel_jn(z, *, v, n_iter=50):
    """J_0(z) .. J_v(z) stacked along a new leading axis: shape (v + 1, *z.shape)."""
    z, = promote_dtypes_inexact(jnp.asarray(z))
    if jnp.issubdtype(z.dtype, jnp.complexfloating):
        raise ValueError("complex input not supported.")
    v = operator.index(v)
    n_iter = int(n_iter)

    def step(carry, k):
        f0, f1, total = carry
        f = 2.0 * (k + 1.0) * f1 / z - f0
        total = jnp.where(jnp.mod(k, 2) == 0, total + 2.0 * f, total)
        return (f1, f, total), f

    zero = jnp.zeros_like(z)
    init = (zero, zero + _const(z, 1e-16), zero)
    (_, _, total), values = lax.scan(step, init, lax.iota(z.dtype, n_iter + 1), reverse=True)
    return values[:v + 1] / (total - values[0])
