"""`kiln.scipy.special`'s integrals of Gaussians and of oscillating functions: wofz, erfcx,
fresnel, sici and owens_t. Complex values are carried as (real, imaginary) pairs of real
arrays, so the same code runs on every backend and differentiates as real arithmetic.

- wofz: Weideman's rational approximation of the Faddeeva function (SIAM J. Numer. Anal. 31,
  1994) with 40 terms, for Im z >= 0: w(z) = 2 p(Z) / (L - iz)**2 + (1/sqrt(pi)) / (L - iz),
  Z = (L + iz) / (L - iz), where p's coefficients come from a discrete Fourier transform of
  exp(-t**2) (L**2 + t**2) at t = L tan(theta / 2) (computed once, in NumPy, at import).
  Below the real axis, w(z) = 2 exp(-z**2) - w(-z). float16 arguments are computed in float32.
- erfcx: `exp(x**2) erfc(x)` for real x < 2, Laplace's continued fraction beyond; for complex
  x, erfcx(x) = w(ix), through wofz (as JAX).
- fresnel: the power series for |x| <= 1.5; beyond, C + iS = (1 + i)/2 (1 - exp(i pi x**2 / 2)
  w((1 + i) sqrt(pi) x / 2)), through wofz, with x**2 reduced modulo 4 exactly so that the
  phase keeps its accuracy for large x.
- sici: the power series for |x| <= 4; beyond, E1(ix) = -Ci(x) + i (Si(x) - pi/2) by the
  continued fraction E1(z) = exp(-z) / (z + 1 - 1/(z + 3 - 4/(z + 5 - ...))), evaluated from
  its 40th level back in a `lax.fori_loop`.
- owens_t: 24-point Gauss-Legendre quadrature of T(h, a) = exp(-h**2/2) / (2 pi)
  int_0^a exp(-h**2 x**2 / 2) / (1 + x**2) dx for |a| <= 1, cut at x = 9 / |h| where the
  integrand has fallen below 1e-17 of its peak; for |a| > 1, Owen's identity
  T(h, a) = Q(h)/2 + Q(ah)/2 - Q(h) Q(ah) - T(ah, 1/a) with Q(x) = ndtr(-x).
"""
import math

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..numpy._core import promote_args_inexact
from ._special import _ndtr, _reject_complex
from ._special_series import _f

__all__ = ["wofz", "erfcx", "fresnel", "sici", "owens_t"]

_SQRT_PI = math.sqrt(math.pi)


# ---------------------------------------------------------------- complex pairs

def _cmul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


def _cdiv(ar, ai, br, bi):
    """(ar + i ai) / (br + i bi) by Smith's algorithm (no overflow in |b|**2)."""
    wide = lax.abs(br) >= lax.abs(bi)
    big = jnp.where(wide, br, bi)
    small = jnp.where(wide, bi, br)
    big = jnp.where(big == 0, 1, big)
    r = small / big
    d = big + small * r
    re = jnp.where(wide, ar + ai * r, ar * r + ai) / d
    im = jnp.where(wide, ai - ar * r, ai * r - ar) / d
    return re, im


# ---------------------------------------------------------------- wofz

_WEIDEMAN_N = 40


def _weideman_coefficients(n):
    m = 2 * n
    k = np.arange(-m + 1, m)
    length = math.sqrt(n / math.sqrt(2))
    t = length * np.tan(k * np.pi / (2 * m))
    f = np.concatenate([[0.0], np.exp(-t ** 2) * (length ** 2 + t ** 2)])
    a = np.real(np.fft.fft(np.fft.fftshift(f))) / (2 * m)
    return length, tuple(float(c) for c in a[n:0:-1])


_WEIDEMAN_L, _WEIDEMAN_A = _weideman_coefficients(_WEIDEMAN_N)


def _w_upper(x, y):
    """w(x + iy) for y >= 0, as a pair."""
    # L - iz = (L + y) - ix and L + iz = (L - y) + ix.
    dr, di = _WEIDEMAN_L + y, -x
    zr, zi = _cdiv(_WEIDEMAN_L - y, x, dr, di)
    pr, pi = jnp.zeros_like(x), jnp.zeros_like(x)
    for c in _WEIDEMAN_A:
        pr, pi = _cmul(pr, pi, zr, zi)
        pr = pr + c
    qr, qi = _cdiv(pr, pi, dr, di)
    qr, qi = _cdiv(2 * qr + 1 / _SQRT_PI, 2 * qi, dr, di)
    return qr, qi


def _wofz_pair(x, y):
    """w(x + iy) anywhere, as a pair."""
    below = y < 0
    sx = jnp.where(below, -x, x)
    sy = jnp.where(below, -y, y)
    wr, wi = _w_upper(sx, sy)
    # 2 exp(-z**2) - w(-z) for y < 0; exp(-z**2) = exp(y**2 - x**2) (cos 2xy - i sin 2xy).
    ye = jnp.where(below, y, 0)
    mag = 2 * lax.exp((ye - x) * (ye + x))
    phase = 2 * x * ye
    er, ei = mag * lax.cos(phase), -mag * lax.sin(phase)
    # JAX doubles exp(-z**2) as a complex product, 2 * (inf + inf i) = NaN + NaN i: where
    # exp(-z**2) overflows off the imaginary axis, w is NaN + NaN i there too.
    overflow = (mag == np.inf) & (phase != 0)
    er = jnp.where(overflow, np.nan, er)
    ei = jnp.where(overflow, np.nan, ei)
    return jnp.where(below, er - wr, wr), jnp.where(below, ei - wi, wi)


def wofz(z):
    """The Faddeeva function w(z) = exp(-z**2) erfc(-iz), complex-valued (complex64 for
    float16 and float32 arguments, as JAX's complex promotion gives) and, as in JAX, never
    weakly typed."""
    z, = promote_args_inexact("wofz", z)
    z = lax.convert_element_type(z, np.float32 if z.dtype == np.float16 else z.dtype)
    if jnp.iscomplexobj(z):
        x, y = lax.real(z), lax.imag(z)
    else:
        x, y = z, jnp.zeros_like(z)
    wr, wi = _wofz_pair(x, y)
    return lax.complex(wr, wi)


# ---------------------------------------------------------------- erfcx

_ERFCX_SWITCH = 2.0


def erfcx(x):
    """The scaled complementary error function exp(x**2) erfc(x); w(ix) for complex x. As in
    JAX, the result is never weakly typed."""
    x, = promote_args_inexact("erfcx", x)
    x = lax.convert_element_type(x, x.dtype)
    if jnp.iscomplexobj(x):
        wr, wi = _wofz_pair(-lax.imag(x), lax.real(x))
        return lax.complex(wr, wi)
    big = x >= _ERFCX_SWITCH
    xd = jnp.where(big, 0, x)
    direct = lax.exp(xd * xd) * lax.erfc(xd)
    xb = jnp.where(big, x, 2 * _ERFCX_SWITCH)
    frac = xb
    for k in range(60, 0, -1):
        frac = xb + (k / 2) / frac
    by_fraction = 1 / (_SQRT_PI * frac)
    return jnp.where(big, by_fraction, direct)


# ---------------------------------------------------------------- Fresnel integrals

_FRESNEL_SWITCH = 1.5


def _fresnel_series(x):
    """S(x), C(x) for |x| <= 1.5: sum over n of (-1)**(n//2) t**n x / (n! (2n + 1)),
    t = pi x**2 / 2; even n make C, odd n make S."""
    t = (math.pi / 2) * x * x
    term = x
    c, s = x, jnp.zeros_like(x)
    for n in range(1, 32):
        term = term * t / n
        signed = term / (2 * n + 1) if (n // 2) % 2 == 0 else -term / (2 * n + 1)
        if n % 2:
            s = s + signed
        else:
            c = c + signed
    return s, c


def _mod_4(v):
    return v - 4 * lax.round(v / 4, lax.RoundingMethod.TO_NEAREST_EVEN)


def _square_mod_4(x):
    """x**2 reduced modulo 4 without rounding error in the reduction: with n = round(x) and
    f = x - n, n**2 = parity(n)**2 (mod 4) and 2 n f is exact (n f has no more significant bits
    than x), so only f**2 and the final sum round."""
    n = lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
    f = x - n
    parity = n - 2 * lax.round(n / 2, lax.RoundingMethod.TO_NEAREST_EVEN)
    return parity * parity + _mod_4(2 * n * f) + f * f


def fresnel(x):
    """The Fresnel integrals (S(x), C(x)) = int_0^x (sin, cos)(pi t**2 / 2) dt, real x."""
    x, = promote_args_inexact("fresnel", x)
    _reject_complex("fresnel", x)
    ax = lax.abs(x)
    small = ax <= _FRESNEL_SWITCH
    s_small, c_small = _fresnel_series(jnp.where(small, x, 0))
    # Beyond 1 / (pi eps) the integrals are 1/2 to the last bit.
    huge = ax > 1 / (math.pi * float(jnp.finfo(x.dtype).eps))
    xb = jnp.where(small | huge | jnp.isnan(x), 2 * _FRESNEL_SWITCH, ax)
    scale = _SQRT_PI / 2 * xb
    wr, wi = _w_upper(scale, scale)
    theta = (math.pi / 2) * _square_mod_4(xb)
    er, ei = _cmul(lax.cos(theta), lax.sin(theta), wr, wi)
    qr, qi = 1 - er, -ei
    c_big = jnp.where(huge, 0.5, (qr - qi) / 2)
    s_big = jnp.where(huge, 0.5, (qr + qi) / 2)
    sign = jnp.where(x < 0, -1, 1).astype(x.dtype)
    s = jnp.where(small, s_small, sign * s_big)
    c = jnp.where(small, c_small, sign * c_big)
    nan = jnp.isnan(x)
    return jnp.where(nan, x, s), jnp.where(nan, x, c)


# ---------------------------------------------------------------- sine and cosine integrals

_SICI_SWITCH = 4.0
_SICI_LEVELS = 40
_EULER_GAMMA = 0.5772156649015329


def _sici_series(x):
    """Si(x) and Ci(x) - gamma - log(x) for |x| <= 4: the sums over odd (Si) and even
    (Ci) n >= 1 of (-1)**(n//2) x**n / (n n!)."""
    term = x
    si, ci = x, jnp.zeros_like(x)
    for n in range(2, 34):
        term = term * x / n
        if n % 2:
            si = si + (term / n if (n // 2) % 2 == 0 else -term / n)
        else:
            ci = ci + (term / n if (n // 2) % 2 == 0 else -term / n)
    return si, ci


def _sici_fraction(x):
    """Si(x) - pi/2 and -Ci(x) for x > 4, from E1(ix)'s continued fraction."""
    def body(i, carry):
        tr, ti = carry
        k = _f(_SICI_LEVELS - i, x)
        qr, qi = _cdiv(k * k, jnp.zeros_like(x), tr, ti)
        return 2 * k - 1 - qr, x - qi
    tr, ti = lax.fori_loop(0, _SICI_LEVELS, body,
                           (jnp.full_like(x, 2 * _SICI_LEVELS + 1), x))
    er, ei = _cdiv(lax.cos(x), -lax.sin(x), tr, ti)
    return ei, er


def sici(x):
    """The sine and cosine integrals (Si(x), Ci(x)), real x; Ci(x) = Ci(|x|) for x < 0
    (the real part, as SciPy)."""
    x, = promote_args_inexact("sici", x)
    _reject_complex("sici", x)
    ax = lax.abs(x)
    small = ax <= _SICI_SWITCH
    xs = jnp.where(small, ax, 1)
    si_s, ci_s = _sici_series(xs)
    ci_s = ci_s + _EULER_GAMMA + lax.log(xs)
    finite = ax < np.inf
    xb = jnp.where(small | ~finite, 2 * _SICI_SWITCH, ax)
    si_b, ci_b = _sici_fraction(xb)
    si = jnp.where(small, si_s, jnp.where(finite, math.pi / 2 + si_b, math.pi / 2))
    ci = jnp.where(small, ci_s, jnp.where(finite, -ci_b, 0))
    ci = jnp.where(x == 0, -np.inf, ci)
    si = jnp.where(x < 0, -si, jnp.where(x == 0, x, si))
    nan = jnp.isnan(x)
    return jnp.where(nan, x, si), jnp.where(nan, x, ci)


# ---------------------------------------------------------------- Owen's T

_OWENS_NODES, _OWENS_WEIGHTS = (tuple(float(v) for v in arr)
                                for arr in np.polynomial.legendre.leggauss(24))
_OWENS_CUT = 9.0


def _owens_t_unit(h, a):
    """T(h, a) for h >= 0 and 0 <= a <= 1 by Gauss-Legendre on [0, min(a, 9 / h)]."""
    upper = jnp.where(h * a > _OWENS_CUT, _OWENS_CUT / jnp.where(h > 0, h, 1), a)
    half = upper / 2
    h2 = h * h / 2
    total = jnp.zeros_like(h)
    for node, weight in zip(_OWENS_NODES, _OWENS_WEIGHTS):
        t = half * (node + 1)
        total = total + weight * lax.exp(-h2 * t * t) / (1 + t * t)
    return lax.exp(-h2) / (2 * math.pi) * half * total


def owens_t(h, a):
    """Owen's T function (1/2pi) int_0^a exp(-h**2 (1 + x**2) / 2) / (1 + x**2) dx."""
    h, a = promote_args_inexact("owens_t", h, a)
    _reject_complex("owens_t", h)
    h, a = jnp.broadcast_arrays(h, a)
    ah, aa = lax.abs(h), lax.abs(a)
    big = aa > 1
    aa_ok = jnp.where(big, aa, 1)
    # For |a| > 1, T(h, a) comes from T(|ah|, 1/|a|); h == 0 there means ah == 0 (a may be inf).
    h_far = jnp.where(ah == 0, 0, aa_ok * ah)
    # T(h, 0) = 0 and T(inf, a) = 0: the quadrature gets finite stand-ins there.
    h_unit = jnp.where(big, h_far, ah)
    unit = _owens_t_unit(jnp.where(h_unit < np.inf, h_unit, 0), jnp.where(big, 1 / aa_ok, aa))
    q_h = _ndtr(-ah)
    q_far = _ndtr(-h_far)
    value = jnp.where(big, q_h / 2 + q_far / 2 - q_h * q_far - unit, unit)
    value = jnp.where(ah == np.inf, 0, value)
    value = jnp.where(a < 0, -value, value)
    return jnp.where(jnp.isnan(h) | jnp.isnan(a), np.nan, value)
