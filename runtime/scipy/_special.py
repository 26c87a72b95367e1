"""The implementation of `kiln.scipy.special`: its public names (`__all__`, re-exported there)
and the helpers they use. `kiln.scipy.special`'s docstring describes them."""
import math

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..array import to_array
from ..compiler.ir import dtypes
from ..numpy._core import check_arraylike, promote_args_inexact
from .. import nn as _nn
from ..nn import logsumexp

__all__ = ["erf", "erfc", "erfinv", "expit", "logit", "gammaln", "loggamma", "digamma",
           "gamma", "gammasgn", "xlogy", "xlog1py", "entr", "rel_entr", "kl_div", "ndtr",
           "ndtri", "log_ndtr", "logsumexp", "softmax", "log_softmax"]

_PY_SCALAR = {"i": int, "f": float, "c": complex}


def _const(x, value):
    """JAX's `lax._const`: a Python scalar (weak) next to a weak rank-0 `x`, otherwise a strong
    constant of `x`'s dtype."""
    if x.weak_type and x.ndim == 0:
        return _PY_SCALAR[x.dtype.kind](value)
    return to_array(np.asarray(value, x.dtype))


def _typed(value, dtype):
    """A strong rank-0 constant of `dtype` (JAX's `np.float32(value)` constants)."""
    return to_array(np.asarray(value, dtype))


def _reject_complex(name, x):
    if dtypes.is_complex(x.dtype):
        raise ValueError(f"{name} does not support complex-valued inputs.")


# --------------------------------------------------------------- thin wrappers over lax

def erf(x):
    """The error function."""
    x, = promote_args_inexact("erf", x)
    return lax.erf(x)


def erfc(x):
    """The complementary error function `1 - erf(x)`."""
    x, = promote_args_inexact("erfc", x)
    return lax.erfc(x)


def erfinv(x):
    """The inverse of `erf` on (-1, 1)."""
    x, = promote_args_inexact("erfinv", x)
    return lax.erf_inv(x)


def expit(x):
    """The logistic sigmoid `1 / (1 + exp(-x))`."""
    x, = promote_args_inexact("expit", x)
    return lax.logistic(x)


def logit(x):
    """`log(x / (1 - x))`, the inverse of `expit`."""
    x, = promote_args_inexact("logit", x)
    return lax.log(lax.div(x, lax.sub(_const(x, 1), x)))


def gammaln(x):
    """`log|Gamma(x)|`."""
    x, = promote_args_inexact("gammaln", x)
    return lax.lgamma(x)


def digamma(x):
    """The logarithmic derivative of Gamma."""
    x, = promote_args_inexact("digamma", x)
    return lax.digamma(x)


# ----------------------------------------------------------------------------- Gamma

def gammasgn(x):
    """The sign of Gamma(x): NaN at poles and NaN inputs, -1 for `-0.0`."""
    x, = promote_args_inexact("gammasgn", x)
    _reject_complex("gammasgn", x)
    floor_x = lax.floor(x)
    x_negative = x < 0
    is_nan = (x_negative & (x == floor_x)) | jnp.isnan(x)
    is_neg = (x_negative & (floor_x % 2 != 0)) | ((x == 0) & jnp.signbit(x))
    return jnp.where(is_nan, _typed(np.nan, x.dtype),
                     jnp.where(is_neg, _typed(-1.0, x.dtype), _typed(1.0, x.dtype)))


def gamma(x):
    """The Gamma function: `gammasgn(x) * exp(gammaln(x))` for real arguments; for complex
    ones `exp` of the Lanczos log Gamma below, NaN + NaN j at the poles (as JAX)."""
    x, = promote_args_inexact("gamma", x)
    if dtypes.is_complex(x.dtype):
        return _complex_gamma(x)
    return gammasgn(x) * lax.exp(lax.lgamma(x))


def loggamma(x):
    """The principal branch of log Gamma: NaN for real x <= 0; for complex arguments the
    analytic continuation with its one branch cut on the negative real axis (SciPy's)."""
    x, = promote_args_inexact("loggamma", x)
    if dtypes.is_complex(x.dtype):
        return _complex_loggamma_principal(x)
    return jnp.where(x > 0, lax.lgamma(x), jnp.nan)


# Lanczos' approximation with g = 7 and 9 coefficients (GSL's lanczos_7_c, as JAX uses):
# Gamma(z + 1) ~ sqrt(2 pi) t**(z + 1/2) exp(-t) A(z), t = z + g + 1/2,
# A(z) = c0 + sum_k c_k / (z + k).
_LANCZOS_G = 7.0
_LANCZOS_COEFFS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028,
                   771.32342877765313, -176.61502916214059, 12.507343278686905,
                   -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)


def _complex_poles(z):
    """Where complex `z` is NaN (either part) or a pole of Gamma (0, -1, -2, ...)."""
    re = lax.real(z)
    return jnp.isnan(z) | ((lax.imag(z) == 0) & (re == lax.floor(re)) & (re <= 0))


def _complex_nan(z):
    return jnp.full(z.shape, complex(np.nan, np.nan), z.dtype)


def _complex_loggamma(z):
    """log Gamma(z) by Lanczos for Re z >= 1/2 and by reflection,
    log pi - log sin(pi z) - log Gamma(1 - z), left of it (branches as JAX's)."""
    reflect = lax.real(z) < 0.5
    zz = jnp.where(reflect, 1.0 - z, z) - 1.0
    ag = _typed(_LANCZOS_COEFFS[0], z.dtype)
    for k, c in enumerate(_LANCZOS_COEFFS[1:], start=1):
        ag = ag + _typed(c, z.dtype) / (zz + _typed(k, z.dtype))
    t = zz + _typed(_LANCZOS_G + 0.5, z.dtype)
    log_lanczos = (_typed(0.5 * np.log(2.0 * np.pi), z.dtype) + (zz + 0.5) * jnp.log(t) - t
                   + jnp.log(ag))
    # Outside the reflection branch sin(pi z) may be 0 (z = 1, 2, ...); 1/2 keeps that
    # unused branch, and so its derivative, finite.
    z_safe = jnp.where(reflect, z, jnp.full_like(z, 0.5))
    reflected = (_typed(np.log(np.pi), z.dtype) - jnp.log(jnp.sin(np.pi * z_safe))
                 - log_lanczos)
    return jnp.where(reflect, reflected, log_lanczos)


def _complex_gamma(z):
    bad = _complex_poles(z)
    z_safe = jnp.where(bad, jnp.ones_like(z), z)
    return jnp.where(bad, _complex_nan(z), jnp.exp(_complex_loggamma(z_safe)))


def _complex_loggamma_principal(z):
    """SciPy's branch of log Gamma: shift z right by n = max(0, ceil(1/2 - Re z)),
    log Gamma(z) = log Gamma(z + n) - sum_{k<n} log(z + k), so the only cut is the one of
    log on the negative real axis. The sum runs in a `while_loop` until the largest n."""
    bad = _complex_poles(z)
    z_safe = jnp.where(bad, jnp.ones_like(z), z)
    n = jnp.maximum(0, jnp.ceil(0.5 - lax.real(z_safe)).astype(int))

    def more(state):
        return jnp.any(state[0] < n)

    def step(state):
        k, total = state
        live = k < n
        zk = jnp.where(live, z_safe + k, jnp.ones_like(z_safe))
        return k + 1, total + jnp.where(live, jnp.log(zk), jnp.zeros_like(total))

    _, shift = lax.while_loop(more, step, (0, jnp.zeros_like(z_safe)))
    return jnp.where(bad, _complex_nan(z), _complex_loggamma(z_safe + n) - shift)


# ------------------------------------------------------------------------ x log y family

def xlogy(x, y):
    """`x * log(y)`, 0 where x == 0 (unless y is NaN)."""
    x, y = promote_args_inexact("xlogy", x, y)
    x_ok = x != 0.
    return jnp.where(x_ok | jnp.isnan(y), lax.mul(x, lax.log(y)), jnp.zeros_like(x))


def xlog1py(x, y):
    """`x * log1p(y)`, 0 where x == 0 (unless y is NaN)."""
    x, y = promote_args_inexact("xlog1py", x, y)
    x_ok = x != 0.
    return jnp.where(x_ok | jnp.isnan(y), lax.mul(x, lax.log1p(y)), jnp.zeros_like(x))


def entr(x):
    """Elementwise entropy `-x log x`; -inf for x < 0, 0 at 0."""
    x, = promote_args_inexact("entr", x)
    _reject_complex("entr", x)
    return lax.select(lax.lt(x, _const(x, 0)), lax.full_like(x, -np.inf),
                      lax.neg(xlogy(x, x)))


def rel_entr(p, q):
    """Relative entropy `p log(p / q)`: 0 where p == 0 and q >= 0, inf where undefined."""
    p, q = promote_args_inexact("rel_entr", p, q)
    _reject_complex("rel_entr", p)
    zero = _const(p, 0.0)
    both_gt_zero = lax.bitwise_and(lax.gt(p, zero), lax.gt(q, zero))
    one_zero = lax.bitwise_and(lax.eq(p, zero), lax.ge(q, zero))
    safe_p = jnp.where(both_gt_zero, p, 1)
    safe_q = jnp.where(both_gt_zero, q, 1)
    log_val = lax.sub(xlogy(safe_p, safe_p), xlogy(safe_p, safe_q))
    return jnp.where(both_gt_zero, log_val, jnp.where(one_zero, zero, np.inf))


def kl_div(p, q):
    """Kullback-Leibler divergence term `p log(p / q) - p + q`."""
    p, q = promote_args_inexact("kl_div", p, q)
    _reject_complex("kl_div", p)
    return rel_entr(p, q) - p + q


# ------------------------------------------------------------------ the normal distribution

_NDTR_DTYPES = (dtypes.float32, dtypes.float64)
# log_ndtr uses a different formula on (-inf, lower], (lower, upper] and (upper, inf).
_LOG_NDTR_BOUNDS = {dtypes.float32: (-10, 5), dtypes.float64: (-20, 8)}


def _check_ndtr_dtype(dtype, suffix=", see docstring for supported types."):
    if dtype not in _NDTR_DTYPES:
        raise TypeError(f"x.dtype={np.dtype(dtype)} is not supported{suffix}")


def ndtr(x):
    """The standard normal CDF (float32 and float64 only, as JAX)."""
    x = jnp.asarray(x)
    _check_ndtr_dtype(x.dtype)
    return _ndtr(x)


def _ndtr(x):
    t = x.dtype.type
    half_sqrt_2 = _typed(t(0.5) * np.sqrt(2., dtype=t), x.dtype)
    w = x * half_sqrt_2
    z = lax.abs(w)
    y = lax.select(lax.lt(z, half_sqrt_2),
                   _typed(1., x.dtype) + lax.erf(w),
                   lax.select(lax.gt(w, _typed(0., x.dtype)),
                              _typed(2., x.dtype) - lax.erfc(z),
                              lax.erfc(z)))
    return _typed(0.5, x.dtype) * y


# Cephes' coefficients for ndtri (https://root.cern.ch/doc/v608/SpecFuncCephesInv_8cxx_source.html)
_NDTRI_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
             1.39312609387279679503E1, -1.23916583867381258016E0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
             -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
             1.59056225126211695515E1, -1.18331621121330003142E0)
_NDTRI_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
             4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
             -1.40256079171354495875E-1, -3.50424626827848203418E-2,
             -8.57456785154685413611E-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
             1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
             -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_NDTRI_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
             1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
             3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
             2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
             2.89247864745380683936E-6, 6.79019408009981274425E-9)


def _polyval(coeffs, x):
    """Horner's rule with static coefficients, highest degree first (as `jnp.polyval`)."""
    y = jnp.zeros_like(x)
    for c in coeffs:
        y = y * x + _typed(c, x.dtype)
    return y


def ndtri(p):
    """The inverse of `ndtr`: the standard normal quantile (float32 and float64 only)."""
    check_arraylike("ndtri", p)
    p = to_array(p, "ndtri")
    _check_ndtr_dtype(p.dtype)
    return _ndtri(p)


def _ndtri(p):
    dt = p.dtype
    t = dt.type

    def c(v):
        return _typed(v, dt)

    maybe_complement_p = jnp.where(p > c(-np.expm1(-2.)), c(1.) - p, p)
    # p == 0 would give NaNs below; any harmless value does (the result is replaced).
    sanitized_mcp = jnp.where(maybe_complement_p == c(0.), jnp.full(p.shape, t(0.5)),
                              maybe_complement_p)
    # p > exp(-2): x/sqrt(2pi) = w + w**3 P0(w**2)/Q0(w**2).
    w = sanitized_mcp - c(0.5)
    ww = lax.square(w)
    x_for_big_p = w + w * ww * (_polyval(_NDTRI_P0, ww) / _polyval(_NDTRI_Q0, ww))
    x_for_big_p = x_for_big_p * -c(np.sqrt(2. * np.pi))
    # p <= exp(-2): x = z - log(z)/z - (1/z) P(1/z) / Q(1/z), z = sqrt(-2 log p).
    z = lax.sqrt(c(-2.) * lax.log(sanitized_mcp))
    first_term = z - lax.log(z) / z
    x_for_small_p = first_term - _polyval(_NDTRI_P2, 1 / z) / _polyval(_NDTRI_Q2, 1 / z) / z
    x_otherwise = first_term - _polyval(_NDTRI_P1, 1 / z) / _polyval(_NDTRI_Q1, 1 / z) / z
    x = jnp.where(sanitized_mcp > c(np.exp(-2.)), x_for_big_p,
                  jnp.where(z >= c(8.0), x_for_small_p, x_otherwise))
    x = jnp.where(p > c(1. - np.exp(-2.)), x, -x)
    infinity = jnp.full(p.shape, t(np.inf))
    return jnp.where(p == c(0.0), -infinity, jnp.where(p == c(1.0), infinity, x))


def log_ndtr(x, series_order=3):
    """`log(ndtr(x))`, accurate far into both tails (float32 and float64 only).

    Right of the upper bound it uses `log(1 - ndtr(-x)) ~ -ndtr(-x)`; left of the lower bound
    an asymptotic series with `series_order` terms (0..30).
    """
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    x = jnp.asarray(x)
    _check_ndtr_dtype(x.dtype, ".")
    lower, upper = (_typed(b, x.dtype) for b in _LOG_NDTR_BOUNDS[x.dtype])
    x_gt_upper = lax.gt(x, upper)
    ndtr_res = _ndtr(jnp.where(x_gt_upper, -x, lax.max(x, lower)))
    return jnp.where(x_gt_upper, -ndtr_res,
                     jnp.where(lax.gt(x, lower), lax.log(ndtr_res),
                               _log_ndtr_lower(lax.min(x, lower), series_order)))


def _log_ndtr_lower(x, series_order):
    """Asymptotic expansion of log(ndtr(x)) for very negative x."""
    x_2 = lax.square(x)
    log_scale = _typed(-0.5, x.dtype) * x_2 - lax.log(-x) \
        - _typed(0.5 * np.log(2. * np.pi), x.dtype)
    return log_scale + lax.log(_log_ndtr_asymptotic_series(x, series_order))


def _log_ndtr_asymptotic_series(x, series_order):
    if series_order <= 0:
        return _typed(1, x.dtype)
    x_2 = lax.square(x)
    even_sum = jnp.zeros_like(x)
    odd_sum = jnp.zeros_like(x)
    x_2n = x_2
    for n in range(1, series_order + 1):
        y = _typed(_double_factorial(2 * n - 1, x.dtype), x.dtype) / x_2n
        if n % 2:
            odd_sum = odd_sum + y
        else:
            even_sum = even_sum + y
        x_2n = x_2n * x_2
    return _typed(1., x.dtype) + even_sum - odd_sum


def _double_factorial(n, dtype):
    """n!! as a finite value of `dtype`: clipped to the largest float, so that a term whose
    power of x overflows to inf contributes 0 (not inf/inf), as in JAX."""
    return min(math.prod(range(n, 1, -2)), float(np.finfo(dtype).max))


# ------------------------------------------------------------------ softmax and friends

def softmax(x, /, *, axis=None):
    """`exp(x) / sum(exp(x), axis)` (`kiln.nn.softmax` with SciPy's default axis=None)."""
    return _nn.softmax(x, axis=axis)


def log_softmax(x, /, *, axis=None):
    """`x - logsumexp(x, axis)` (`kiln.nn.log_softmax` with SciPy's default axis=None)."""
    return _nn.log_softmax(x, axis=axis)
