"""The implementation of `kiln.random`'s distributions that are transformations of its basic
samplers (uniform, normal, exponential, gamma, rademacher): cauchy, lognormal, pareto,
weibull_min, rayleigh, maxwell, double_sided_maxwell, geometric, chisquare, f, t, triangular.

Each follows JAX 0.10.2's formula step by step, with the same key splits, and computes `log`,
`log1p` and `exp` with `_random`'s copies of XLA's CPU kernels. For the same key, rayleigh,
geometric, chisquare, t and triangular give JAX's float32 bits exactly. cauchy (XLA's `tan`),
weibull_min (XLA's `pow`), lognormal, pareto, maxwell, double_sided_maxwell and f agree
with JAX to an ulp or two (relative differences below 1e-6): XLA fuses or contracts some of
their steps in ways kiln does not reproduce yet.
"""
import numpy as np

from . import lax
from .array import to_array
from .numpy._core import broadcast_shapes
from . import _random as R
from .sharding_types import out_sharding_keyword

__all__ = ["cauchy", "lognormal", "pareto", "weibull_min", "rayleigh", "maxwell",
           "double_sided_maxwell", "geometric", "chisquare", "f", "t", "triangular"]


def _params(name, dtype, *params):
    return [lax.convert_element_type(to_array(p, name), dtype) for p in params]


def _param_shape(name, shape, *params):
    if shape is None:
        return broadcast_shapes(*(np.shape(p) for p in params))
    shape = R._shape(shape)
    R._check_shape(name, shape, *(np.shape(p) for p in params))
    return shape


@out_sharding_keyword
def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy samples: tan(pi * (u - 1/2)) for u uniform in [eps, 1)."""
    base, _ = R._check_key("cauchy", key)
    dtype = R._float_dtype("cauchy", dtype)
    u = R._uniform(base, R._shape(shape), dtype, np.finfo(dtype).eps, 1.)
    return lax.tan(lax.mul(R._c(np.pi, dtype), lax.sub(u, R._c(0.5, dtype))))


@out_sharding_keyword
def lognormal(key, sigma=np.float32(1), shape=None, dtype=None):
    """exp(sigma * N(0, 1)) samples."""
    base, _ = R._check_key("lognormal", key)
    dtype = R._float_dtype("lognormal", dtype)
    shape = _param_shape("lognormal", shape, sigma)
    (sigma,) = _params("lognormal", dtype, sigma)
    return R._exp(lax.mul(R._normal(base, shape, dtype), R._bcast_to(sigma, shape)))


@out_sharding_keyword
def pareto(key, b, shape=None, dtype=None):
    """Pareto(b) samples: exp(E / b) for E standard exponential."""
    base, _ = R._check_key("pareto", key)
    dtype = R._float_dtype("pareto", dtype)
    shape = _param_shape("pareto", shape, b)
    (b,) = _params("pareto", dtype, b)
    return R._exp(lax.div(R._exponential(base, shape, dtype), R._bcast_to(b, shape)))


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull samples by the inverse CDF: scale * (-log1p(-u)) ** (1 / concentration)."""
    base, _ = R._check_key("weibull_min", key)
    dtype = R._float_dtype("weibull_min", dtype)
    shape = R._shape(shape)
    scale, concentration = _params("weibull_min", dtype, scale, concentration)
    u = R._uniform(base, shape, dtype, 0., 1.)
    e = lax.neg(R._log1p(lax.neg(u)))
    out_shape = broadcast_shapes(shape, concentration.shape, scale.shape)
    power = lax.pow(R._bcast_to(e, out_shape),
                    R._bcast_to(lax.div(R._c(1.0, dtype), concentration), out_shape))
    return lax.mul(power, R._bcast_to(scale, out_shape))


@out_sharding_keyword
def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh samples: scale * sqrt(-2 log u)."""
    base, _ = R._check_key("rayleigh", key)
    dtype = R._float_dtype("rayleigh", dtype)
    shape = _param_shape("rayleigh", shape, scale)
    (scale,) = _params("rayleigh", dtype, scale)
    u = R._uniform(base, shape, dtype, 0., 1.)
    return lax.mul(R._bcast_to(scale, shape), lax.sqrt(lax.mul(R._log(u), R._c(-2, dtype))))


@out_sharding_keyword
def maxwell(key, shape=(), dtype=None):
    """Maxwell samples: the norm of three standard normals (a row sum of squares)."""
    base, _ = R._check_key("maxwell", key)
    dtype = R._float_dtype("maxwell", dtype)
    n = R._normal(base, R._shape(shape) + (3,), dtype)
    return lax.sqrt(R._row_sum(lax.mul(n, n)))


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Maxwell samples with a random sign, scaled and shifted."""
    base, _ = R._check_key("double_sided_maxwell", key)
    dtype = R._float_dtype("double_sided_maxwell", dtype)
    params = broadcast_shapes(np.shape(loc), np.shape(scale))
    shape = (R._shape(shape) or params) + params
    k_max, k_sign = R._split2(base)
    m = maxwell(k_max, shape, dtype)
    sign = R.rademacher(k_sign, shape, dtype)
    loc, scale = _params("double_sided_maxwell", dtype, loc, scale)
    return lax.add(lax.mul(lax.mul(sign, m), R._bcast_to(scale, shape)),
                   R._bcast_to(loc, shape))


@out_sharding_keyword
def geometric(key, p, shape=None, dtype=None):
    """The number of Bernoulli(p) trials up to the first success: floor(log u / log1p(-p)) + 1."""
    base, _ = R._check_key("geometric", key)
    p = to_array(p, "geometric")
    if p.dtype.kind not in "f":
        p = lax.convert_element_type(p, R._float_dtype("geometric", None))
    out_dtype = np.dtype(dtype) if dtype is not None else \
        np.dtype(np.int64 if R.dtypes.x64_enabled() else np.int32)
    shape = _param_shape("geometric", shape, p)
    u = R._uniform(base, shape, p.dtype, 0., 1.)
    u = lax.select(lax.eq(u, R._c(0, p.dtype)), R._bcast_to(R._c(1, p.dtype), shape), u)
    ratio = lax.div(R._log(u), R._bcast_to(R._log1p(lax.neg(p)), shape))
    return lax.convert_element_type(lax.add(lax.floor(ratio), R._c(1, p.dtype)), out_dtype)


@out_sharding_keyword
def chisquare(key, df, shape=None, dtype=None):
    """Chi-square(df) samples: 2 * Gamma(df / 2), drawn in log space."""
    base, _ = R._check_key("chisquare", key)
    dtype = R._float_dtype("chisquare", dtype)
    shape = _param_shape("chisquare", shape, df)
    return _chisquare(base, df, shape, dtype)


def _chisquare(keys, df, shape, dtype):
    (df,) = _params("chisquare", dtype, df)
    two = R._c(2, dtype)
    log_g = R._gamma(keys, lax.div(df, two), shape, dtype, log_space=True)
    return lax.mul(R._exp_smooth(log_g), two)


@out_sharding_keyword
def f(key, dfnum, dfden, shape=None, dtype=None):
    """F(dfnum, dfden) samples: the ratio of two scaled chi-square draws."""
    base, _ = R._check_key("f", key)
    dtype = R._float_dtype("f", dtype)
    shape = _param_shape("f", shape, dfnum, dfden)
    dfnum, dfden = _params("f", dtype, dfnum, dfden)
    k_den, k_num = R._split2(base)
    num = lax.div(_chisquare(k_num, dfnum, shape, dtype), R._bcast_to(dfnum, shape))
    den = lax.div(_chisquare(k_den, dfden, shape, dtype), R._bcast_to(dfden, shape))
    return lax.div(num, den)


@out_sharding_keyword
def t(key, df, shape=None, dtype=None):
    """Student's t(df) samples: N * sqrt((df / 2) / Gamma(df / 2))."""
    base, _ = R._check_key("t", key)
    dtype = R._float_dtype("t", dtype)
    shape = _param_shape("t", shape, df)
    (df,) = _params("t", dtype, df)
    k_n, k_g = R._split2(base)
    n = R._normal(k_n, shape, dtype)
    half = R._bcast_to(lax.div(df, R._c(2, dtype)), shape)
    g = R._gamma(k_g, half, shape, dtype, log_space=False)
    return lax.mul(n, lax.sqrt(lax.div(half, g)))


@out_sharding_keyword
def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular(left, mode, right) samples by the inverse CDF."""
    base, _ = R._check_key("triangular", key)
    dtype = R._float_dtype("triangular", dtype)
    shape = _param_shape("triangular", shape, left, mode, right)
    left, mode, right = (R._bcast_to(v, shape)
                         for v in _params("triangular", dtype, left, mode, right))
    fc = lax.div(lax.sub(mode, left), lax.sub(right, left))
    u = R._uniform(base, shape, dtype, 0., 1.)
    out1 = lax.add(left, lax.sqrt(lax.mul(lax.mul(u, lax.sub(right, left)),
                                          lax.sub(mode, left))))
    out2 = lax.sub(right, lax.sqrt(lax.mul(lax.mul(lax.sub(R._c(1, dtype), u),
                                                   lax.sub(right, left)),
                                           lax.sub(right, mode))))
    return lax.select(lax.lt(u, fc), out1, out2)
