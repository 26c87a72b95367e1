"""`kiln.scipy.special.sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None)`: the spherical
harmonic Y_n^m(theta, phi) (SciPy's argument order: degree, order, colatitude, longitude), as
JAX computes it: the orthonormalised associated Legendre functions of cos(theta) up to the
static degree `n_max` (by default max(n), which needs a concrete `n`), read at (|m|, n) per
point (clipped to n_max), times exp(i |m| phi), with (-1)**m conj(.) for m < 0.

The Legendre table is built by the standard three-term recurrences over the static degrees
(Condon-Shortley phase included): P_m^m from sin(theta)**m, P_(m+1)^m = sqrt(2m + 3) cos P_m^m,
then P_l^m = a_lm (cos P_(l-1)^m - P_(l-2)^m / a_(l-1)m) with a_lm = sqrt((4l**2 - 1) /
(l**2 - m**2)). `diff_n` other than None or 0 is JAX's NotImplementedError.
"""
import math

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..compiler.errors import ConcretizationError
from ..dispatch import is_traced

__all__ = ["sph_harm_y"]


def _legendre_table(n_max, cos, sin):
    """[m][l] -> the orthonormalised P_l^m(cos) (zeros for m > l), each of cos's shape."""
    zero = jnp.zeros_like(cos)
    table = [[zero] * (n_max + 1) for _ in range(n_max + 1)]
    diagonal = jnp.full_like(cos, 1 / math.sqrt(4 * math.pi))
    for m in range(n_max + 1):
        if m:
            diagonal = -math.sqrt((2 * m + 1) / (2 * m)) * sin * diagonal
        table[m][m] = diagonal
        if m + 1 <= n_max:
            table[m][m + 1] = math.sqrt(2 * m + 3) * cos * diagonal
        for n in range(m + 2, n_max + 1):
            a = math.sqrt((4 * n * n - 1) / (n * n - m * m))
            a_prev = math.sqrt((4 * (n - 1) ** 2 - 1) / ((n - 1) ** 2 - m * m))
            table[m][n] = a * (cos * table[m][n - 1] - table[m][n - 2] / a_prev)
    return jnp.stack([jnp.stack(row) for row in table])


def _static_n_max(n, n_max):
    if n_max is not None:
        if is_traced(n_max):
            raise ConcretizationError("The `n_max` argument of `sph_harm_y` must be statically "
                                      "specified to use `sph_harm_y` within kiln "
                                      "transformations.")
        return int(n_max)
    if is_traced(n):
        raise ConcretizationError("sph_harm_y: n is traced, so its maximum is not known when "
                                  "the function compiles; pass n_max= (the largest degree) "
                                  "as a Python int")
    return int(np.max(np.asarray(n)))


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """Y_n^m(theta, phi) at each point (n, m, theta 1-D of one length; phi broadcasts)."""
    if diff_n not in (None, 0):
        raise NotImplementedError("The 'diff_n' argument to jax.scipy.special.sph_harm_y is "
                                  "not supported.")
    top = _static_n_max(n, n_max)
    theta = jnp.asarray(theta)
    if theta.ndim == 0:
        theta = theta[None]
    if not jnp.issubdtype(theta.dtype, jnp.inexact):
        theta = theta.astype(jnp.result_type(float))
    n, m = jnp.asarray(n), jnp.asarray(m)
    table = _legendre_table(top, jnp.cos(theta), jnp.sin(theta))
    points = jnp.arange(n.shape[0] if n.ndim else 1)
    order = lax.abs(m)
    value = table.at[order, n, points].get(mode="clip")
    angle = order * jnp.asarray(phi)
    harmonic = lax.complex(value * jnp.cos(angle), value * jnp.sin(angle))
    sign = jnp.where(order % 2 == 1, -1.0, 1.0).astype(value.dtype)
    return jnp.where(m < 0, sign * jnp.conjugate(harmonic), harmonic)
