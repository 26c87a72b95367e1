"""`kiln.scipy.special`'s confluent hypergeometric function hyp1f1 = 1F1(a; b; x), real
arguments.

Kummer's series sum((a)_k / (b)_k x**k / k!) runs 500 terms in a `lax.fori_loop` (enough for
|x| up to about 300, where exp(|x|) nears float64's range). For x < 0 Kummer's transformation
1F1(a; b; x) = exp(x) 1F1(b - a; b; -x) turns the alternating series into one of positive terms
when b > a (so exp(-100) scale values keep their digits; the sum is rescaled as it runs so
that exp(x) times a sum beyond the float range stays finite), except where a is a non-positive
integer and the series is a polynomial that the transformation would not preserve for integer b.
Where b is a non-positive integer the result is inf unless a is a non-positive integer with
a >= b (the polynomial ends before the pole, as in SciPy); 1F1(0; b; x) = 1, including
b == 0 (JAX's convention).
"""
import math

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..numpy._core import promote_args_inexact
from ._special import _reject_complex
from ._special_series import _f

__all__ = ["hyp1f1"]

_HYP1F1_TERMS = 500


def _non_positive_integer(v):
    return (v <= 0) & (v == lax.floor(v))


_RESCALE = 2.0 ** 64


def _kummer_series(a, b, x):
    """sum((a)_k / (b)_k x**k / k!) as (sum * exp(-log_scale), log_scale): the running sum
    is divided by 2**64 whenever it passes 2**64, so that it stays finite while its scale
    does not (float32's range ends at exp(88)). A term with a + k == 0 ends the sum;
    b + k == 0 is guarded (the caller replaces poles)."""
    def body(k, carry):
        term, total, log_scale = carry
        fk = _f(k, x)
        den = b + fk
        den = jnp.where(den == 0, 1, den)
        term = term * (a + fk) * x / (den * (fk + 1))
        total = total + term
        big = lax.abs(total) > _RESCALE
        return (jnp.where(big, term / _RESCALE, term), jnp.where(big, total / _RESCALE, total),
                jnp.where(big, log_scale + _LOG_RESCALE, log_scale))
    one = jnp.ones_like(x)
    _, total, log_scale = lax.fori_loop(0, _HYP1F1_TERMS, body, (one, one, jnp.zeros_like(x)))
    return total, log_scale


_LOG_RESCALE = 64 * math.log(2)


def hyp1f1(a, b, x):
    """The confluent hypergeometric function 1F1(a; b; x) (Kummer's M), real arguments."""
    a, b, x = promote_args_inexact("hyp1f1", a, b, x)
    _reject_complex("hyp1f1", a)
    a, b, x = jnp.broadcast_arrays(a, b, x)
    polynomial = _non_positive_integer(a)
    pole = _non_positive_integer(b) & ~(polynomial & (a >= b))
    kummer = (x < 0) & ~polynomial
    b_ok = jnp.where(pole, 1, b)
    series, log_scale = _kummer_series(jnp.where(kummer, b_ok - a, a), b_ok,
                                       jnp.where(kummer, -x, x))
    value = series * lax.exp(log_scale + jnp.where(kummer, x, 0))
    value = jnp.where(pole, np.inf, value)
    return jnp.where(jnp.isnan(a) | jnp.isnan(b) | jnp.isnan(x), np.nan, value)
