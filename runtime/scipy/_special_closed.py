"""`kiln.scipy.special`'s functions with closed forms over `lgamma`, `log` and `exp`: beta,
betaln, factorial, comb, poch, boxcox, boxcox1p, multigammaln, bernoulli.

`betaln` is `lgamma(a) + lgamma(b) - lgamma(a + b)` (JAX uses a correction series for large
arguments; kiln loses a few digits there). `bernoulli(n)` is computed exactly with Python
fractions when `n` is known and returned in the default float dtype (JAX sums a zeta series,
which is off in the last digits)."""
import fractions
import math
import operator

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..compiler.ir import dtypes
from ..numpy._core import promote_args_inexact
from ._special import _const, _reject_complex, gammasgn

__all__ = ["beta", "betaln", "factorial", "comb", "poch", "boxcox", "boxcox1p",
           "multigammaln", "bernoulli"]


def betaln(a, b):
    """`log|B(a, b)|`, the log of the absolute value of the Beta function."""
    a, b = promote_args_inexact("betaln", a, b)
    return lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)


def beta(a, b):
    """The Beta function `Gamma(a) Gamma(b) / Gamma(a + b)` (real arguments)."""
    a, b = promote_args_inexact("beta", a, b)
    _reject_complex("beta", a)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * lax.exp(betaln(a, b))


def factorial(n, exact=False):
    """`n!` as `Gamma(n + 1)`, 0 for negative `n` (`exact=True` is not supported, as in JAX)."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n, = promote_args_inexact("factorial", n)
    return jnp.where(n < 0, 0, lax.exp(lax.lgamma(n + 1)))


def comb(N, k, *, repetition=False):
    """The number of combinations of `N` things taken `k` at a time, through `gammaln`;
    0 outside 0 <= k <= N. With `repetition=True`, combinations with replacement."""
    N, k = promote_args_inexact("comb", N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), 1.0, comb(N + k - 1, k))
    valid = (k >= 0) & (k <= N) & (N >= 0)
    n_ok = jnp.where(valid, N, 0.0)
    k_ok = jnp.where(valid, k, 0.0)
    log_c = lax.lgamma(n_ok + 1) - lax.lgamma(k_ok + 1) - lax.lgamma(n_ok - k_ok + 1)
    return jnp.where(valid, lax.exp(log_c), 0.0)


def poch(z, m):
    """The Pochhammer symbol `Gamma(z + m) / Gamma(z)` (real arguments); 1 where m == 0."""
    z, m = promote_args_inexact("poch", z, m)
    if dtypes.is_complex(z.dtype):
        raise ValueError("kiln.scipy.special.poch does not support complex-valued inputs.")
    from ._special import gamma
    return jnp.where(m == 0.0, _const(z, 1), gamma(z + m) / gamma(z))


def _box_cox(name, x, lmbda, log_fn):
    x, lmbda = promote_args_inexact(name, x, lmbda)
    zero = lmbda == 0
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    logx = log_fn(x)
    return jnp.where(zero, logx, jnp.expm1(safe * logx) / safe)


def boxcox(x, lmbda):
    """The Box-Cox transform `(x**lmbda - 1) / lmbda`, `log(x)` where lmbda == 0."""
    return _box_cox("boxcox", x, lmbda, jnp.log)


def boxcox1p(x, lmbda):
    """`boxcox(1 + x, lmbda)`, accurate for small `x`."""
    return _box_cox("boxcox1p", x, lmbda, jnp.log1p)


def multigammaln(a, d):
    """The log of the multivariate Gamma function of dimension `d` (a concrete int)."""
    d = int(d)
    a, d_ = promote_args_inexact("multigammaln", a, d)
    constant = _const(a, 0.25) * d_ * (d_ - _const(a, 1)) * lax.log(_const(a, np.pi))
    halves = jnp.arange(d, dtype=d_.dtype) / _const(a, 2)
    terms = lax.lgamma(jnp.expand_dims(a, -1) - halves)
    return jnp.sum(terms, axis=-1) + constant


def _bernoulli_numbers(n):
    """B_0 .. B_n as exact fractions (B_1 = -1/2), by the Akiyama-Tanigawa recurrence."""
    out, row = [], []
    for m in range(n + 1):
        row.append(fractions.Fraction(1, m + 1))
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
        out.append(row[0])
    if n >= 1:
        out[1] = -out[1]
    return out


def bernoulli(n):
    """The Bernoulli numbers B_0 .. B_n (`n` a concrete non-negative int)."""
    n = operator.index(n)
    if n < 0:
        raise ValueError("n must be a non-negative integer.")
    values = [float(b) for b in _bernoulli_numbers(n)]
    return jnp.asarray(np.asarray(values, dtypes.default_float()))


# (2j)! / B_2j for j = 1, 2, ...: the Euler-Maclaurin coefficients `zeta` uses.
EULER_MACLAURIN = [float(math.factorial(j) / b)
                   for j, b in enumerate(_bernoulli_numbers(26)) if j >= 2 and j % 2 == 0]
