"""Tests for `kiln.scipy.special`'s wofz, fresnel, sici, owens_t and hyp1f1 against
`scipy.special` in float32 and float64 over wide argument ranges, edge values, `jit`/`vmap`
against eager, and derivatives against closed forms (and JAX's, for wofz's complex gradient)."""
import numpy as np
import pytest
import scipy.special as sps

import kiln
import kiln.numpy as jnp
from kiln.scipy import special

RNG = np.random.default_rng(7)
SIGNS = RNG.choice([-1.0, 1.0], 300)
WIDE = np.concatenate([RNG.uniform(-10, 10, 300), SIGNS * np.exp(RNG.uniform(-9, 11, 300))])
Z = np.concatenate([RNG.uniform(-30, 30, 300) + 1j * SIGNS * np.exp(RNG.uniform(-8, 2.5, 300)),
                    RNG.uniform(-5, 5, 300) + 1j * RNG.uniform(-5, 5, 300)])
H = np.concatenate([RNG.uniform(-3, 3, 200), RNG.uniform(0, 12, 200),
                    np.exp(RNG.uniform(-10, 3, 200))])
A = np.concatenate([SIGNS[:200] * np.exp(RNG.uniform(-5, 5, 200)), RNG.uniform(0, 2, 200),
                    np.exp(RNG.uniform(-8, 8, 200))])
KA, KB, KX = RNG.uniform(0, 20, 300), RNG.uniform(0.1, 20, 300), RNG.uniform(-60, 60, 300)

TOL = {np.float32: 2e-6, np.float64: 1e-12}


def _close(actual, expected, dtype, rtol, atol=0.0):
    actual = np.asarray(actual)
    assert actual.dtype == dtype
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fresnel_and_sici(dtype):
    with kiln.enable_x64(dtype == np.float64):
        x = WIDE.astype(dtype)
        s, c = special.fresnel(x)
        ref_s, ref_c = sps.fresnel(x.astype(np.float64))
        # SciPy's own large-x branch is good to ~1e-11 in float64.
        rtol = max(TOL[dtype], 5e-11 if dtype == np.float64 else 0)
        _close(s, ref_s, dtype, rtol)
        _close(c, ref_c, dtype, rtol)
        si, ci = special.sici(x)
        ref_si, ref_ci = sps.sici(x.astype(np.float64))
        _close(si, ref_si, dtype, TOL[dtype])
        # Ci has zeros: compare to the absolute accuracy of the terms summed.
        _close(ci, ref_ci, dtype, TOL[dtype], atol=4 * TOL[dtype])


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_wofz(dtype):
    with kiln.enable_x64(dtype == np.complex128):
        z = Z.astype(dtype)
        expected = sps.wofz(z.astype(np.complex128))
        finite = np.abs(expected) < (1e30 if dtype == np.complex64 else 1e300)
        actual = np.asarray(special.wofz(z))
        assert actual.dtype == dtype
        # Below the real axis the 2 exp(-z**2) term's phase 2xy carries the input's rounding.
        rtol = 2e-5 if dtype == np.complex64 else 1e-12
        np.testing.assert_allclose(actual[finite], expected[finite], rtol=rtol)
        real = np.asarray(special.wofz(np.real(z)[:50]))
        np.testing.assert_allclose(real, sps.wofz(np.real(z)[:50].astype(np.float64) + 0j),
                                   rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_owens_t(dtype):
    with kiln.enable_x64(dtype == np.float64):
        h, a = H.astype(dtype), A.astype(dtype)
        expected = sps.owens_t(h.astype(np.float64), a.astype(np.float64))
        tiny = 1e-30 if dtype == np.float32 else 1e-290
        rtol = 2e-5 if dtype == np.float32 else 1e-12
        _close(special.owens_t(h, a), expected, dtype, rtol, atol=tiny)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hyp1f1(dtype):
    with kiln.enable_x64(dtype == np.float64):
        a, b, x = (v.astype(dtype) for v in (KA, KB, KX))
        expected = sps.hyp1f1(*(v.astype(np.float64) for v in (a, b, x)))
        # x < 0 with a > b sums an alternating series (cancellation): checked separately.
        clean = ((x >= 0) | (b >= a)) & (np.abs(expected) < (1e36 if dtype == np.float32
                                                              else 1e300))
        actual = np.asarray(special.hyp1f1(a, b, x))
        assert actual.dtype == dtype
        np.testing.assert_allclose(actual[clean], expected[clean],
                                   rtol=2e-5 if dtype == np.float32 else 1e-12)
        if dtype == np.float64:
            np.testing.assert_allclose(actual[~clean], expected[~clean], rtol=1e-7)


def test_edges():
    nan, inf = np.nan, np.inf
    x = jnp.array([-inf, 0.0, inf, nan])
    si, ci = special.sici(x)
    np.testing.assert_array_equal(si, np.float32([-np.pi / 2, 0, np.pi / 2, nan]))
    np.testing.assert_array_equal(ci, [0, -inf, 0, nan])
    s, c = special.fresnel(x)
    np.testing.assert_array_equal(s, [-0.5, 0, 0.5, nan])
    np.testing.assert_array_equal(c, [-0.5, 0, 0.5, nan])
    np.testing.assert_allclose(special.owens_t(jnp.array([0.0, 0.0, 1.0, 2.0, nan, inf]),
                                               jnp.array([1.0, inf, -inf, 0.0, 1.0, 0.5])),
                               [0.125, 0.25, -sps.owens_t(1.0, inf), 0.0, nan, 0.0], rtol=1e-6)
    np.testing.assert_allclose(
        special.hyp1f1(jnp.array([-1.0, 1.0, 0.0, 0.0, -2.0, 2.0, -3.0]),
                       jnp.array([-2.0, -1.0, 0.0, -1.0, -2.0, 3.0, 2.0]),
                       jnp.array([1.0, 1.0, 1.0, 1.0, -1.0, -100.0, -50.0])),
        [1.5, inf, 1.0, 1.0, 0.5, sps.hyp1f1(2.0, 3.0, -100.0), sps.hyp1f1(-3, 2, -50)],
        rtol=1e-6)
    np.testing.assert_array_equal(special.wofz(jnp.array([0.0])), [1.0 + 0j])
    with pytest.raises(ValueError, match="complex"):
        special.sici(1j)


def test_jit_and_vmap_match_eager():
    x = jnp.asarray(np.array([-7.0, -2.5, 0.3, 1.2, 3.9, 4.1, 12.0, 50.0], np.float32))
    a = jnp.asarray(np.array([0.2, -0.9, 1.5, 3.0, -7.0, 0.5, 1.0, 20.0], np.float32))
    np.testing.assert_allclose(kiln.jit(special.sici)(x)[1], special.sici(x)[1], rtol=1e-6)
    np.testing.assert_allclose(kiln.vmap(special.fresnel)(x)[0], special.fresnel(x)[0],
                               rtol=1e-6)
    np.testing.assert_allclose(kiln.jit(kiln.vmap(special.owens_t))(x / 3, a),
                               special.owens_t(x / 3, a), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(kiln.jit(special.hyp1f1)(a + 8, a * a + 1, x),
                               special.hyp1f1(a + 8, a * a + 1, x), rtol=1e-6)
    z = lambda v: special.wofz(v)  # noqa: E731
    np.testing.assert_allclose(kiln.jit(z)(x + 1j * a), special.wofz(x + 1j * a), rtol=1e-6)


def _sici_si(x):
    return special.sici(x)[0].sum()


def _sici_ci(x):
    return special.sici(x)[1].sum()


def _fresnel_s(x):
    return special.fresnel(x)[0].sum()


def _fresnel_c(x):
    return special.fresnel(x)[1].sum()


def _owens(h, a):
    return special.owens_t(h, a).sum()


def _hyp1f1(a, b, x):
    return special.hyp1f1(a, b, x).sum()


def _wofz_real(z):
    return jnp.real(special.wofz(z)).sum()


def test_gradients():
    x = jnp.asarray(np.array([-7.0, -2.5, 0.3, 1.2, 3.9, 4.1, 12.0, 50.0], np.float32))
    xs = np.asarray(x, np.float64)
    np.testing.assert_allclose(kiln.grad(_sici_si)(x), np.sin(xs) / xs, atol=3e-7)
    np.testing.assert_allclose(kiln.grad(_sici_ci)(x), np.cos(xs) / xs, atol=3e-7)
    np.testing.assert_allclose(kiln.grad(_fresnel_s)(x), np.sin(np.pi * xs ** 2 / 2), atol=3e-7)
    np.testing.assert_allclose(kiln.jit(kiln.grad(_fresnel_c))(x), np.cos(np.pi * xs ** 2 / 2),
                               atol=3e-7)
    h = x / 3
    a = jnp.asarray(np.array([0.2, -0.9, 1.5, 3.0, -7.0, 0.5, 1.0, 20.0], np.float32))
    hs, as_ = xs / 3, np.asarray(a, np.float64)
    gh, ga = kiln.grad(_owens, argnums=(0, 1))(h, a)
    np.testing.assert_allclose(ga, np.exp(-hs ** 2 * (1 + as_ ** 2) / 2)
                               / (2 * np.pi * (1 + as_ ** 2)), rtol=1e-5, atol=1e-9)
    # dT/dh = -phi(h) erf(a h / sqrt(2)) / 2
    np.testing.assert_allclose(gh, -np.exp(-hs ** 2 / 2) / np.sqrt(2 * np.pi)
                               * sps.erf(as_ * hs / np.sqrt(2)) / 2, rtol=1e-5, atol=1e-8)
    ka, kb, kx = (jnp.asarray(np.array(v, np.float32)) for v in
                  ([1.5, 0.5, 3.0], [2.5, 1.5, 4.0], [3.0, -2.0, 10.0]))
    ga, gb, gx = kiln.grad(_hyp1f1, argnums=(0, 1, 2))(ka, kb, kx)
    kas, kbs, kxs = (np.asarray(v, np.float64) for v in (ka, kb, kx))
    np.testing.assert_allclose(gx, kas / kbs * sps.hyp1f1(kas + 1, kbs + 1, kxs), rtol=1e-5)
    eps = 1e-6
    fd_a = (sps.hyp1f1(kas + eps, kbs, kxs) - sps.hyp1f1(kas - eps, kbs, kxs)) / (2 * eps)
    fd_b = (sps.hyp1f1(kas, kbs + eps, kxs) - sps.hyp1f1(kas, kbs - eps, kxs)) / (2 * eps)
    np.testing.assert_allclose(ga, fd_a, rtol=1e-4)
    np.testing.assert_allclose(gb, fd_b, rtol=1e-4)
    z = jnp.asarray(np.array([1 + 1j, -2 + 0.5j, 3 - 2j, 0.1 + 0.1j, 10 + 1j], np.complex64))
    zs = np.asarray(z, np.complex128)
    # JAX's convention: grad of Re(g(z)) for holomorphic g is g'(z) (as jax.grad gives it),
    # with w'(z) = -2 z w(z) + 2i / sqrt(pi).
    expected = -2 * zs * sps.wofz(zs) + 2j / np.sqrt(np.pi)
    np.testing.assert_allclose(kiln.grad(_wofz_real)(z), expected, rtol=2e-5, atol=1e-6)


# ------------------------------------------- complex arguments (and float16 wofz) against JAX

_NAN, _INF = np.nan, np.inf
# A box around the origin, then the negative real axis approached from both sides (the branch
# cut of loggamma, with a signed zero), poles and their neighbourhoods, large |z|, NaN and inf.
ZC = np.concatenate([
    RNG.uniform(-8, 8, 40) + 1j * RNG.uniform(-8, 8, 40),
    [-2.5 + 1e-9j, -2.5 - 1e-9j, -3.7 + 0j, complex(-3.7, -0.0), -0.5 + 0j, -1 + 1e-6j,
     -1 - 1e-6j, 0j, -1 + 0j, -3 + 0j, 1 + 0j, 2 + 0j, 0.5 + 0j, 1e3 + 1e3j, -40.5 + 3j,
     150 + 0.5j, -150.5 + 1j, 30 + 1j, -30 + 1j, -1 - 30j, -30j, complex(_NAN, 1),
     complex(1, _NAN), complex(_INF, 0), complex(1, _INF)]])


def _match_jax(got, want, rtol, atol):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol)
    # NaN and inf where JAX has them, part by part.
    np.testing.assert_array_equal(got[~finite].real, want[~finite].real)
    np.testing.assert_array_equal(got[~finite].imag, want[~finite].imag)


@pytest.mark.parametrize("name", ["gamma", "loggamma", "erfcx"])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_arguments_match_jax(name, dtype):
    jax = pytest.importorskip("jax")
    z = ZC.astype(dtype)
    with kiln.enable_x64(dtype == np.complex128), jax.enable_x64(dtype == np.complex128):
        jax_fn = jax.jit(getattr(jax.scipy.special, name))  # JAX's eager calls take seconds
        want = jax_fn(z)
        rtol, atol = (2e-5, 1e-6) if dtype == np.complex64 else (1e-12, 1e-14)
        fn = getattr(special, name)
        _match_jax(fn(z), want, rtol, atol)
        _match_jax(kiln.jit(fn)(z), want, rtol, atol)
        # Batched: loggamma's while_loop then runs until every lane has shifted enough.
        _match_jax(kiln.vmap(fn)(z.reshape(5, -1)), np.asarray(want).reshape(5, -1), rtol,
                   atol)
        # A Python complex is weak in both; neither result is weakly typed.
        scalar = fn(0.3 - 2j)
        assert not scalar.weak_type
        assert complex(scalar) == pytest.approx(
            complex(jax_fn(0.3 - 2j)), rel=rtol)


def _re_gamma(z):
    return jnp.real(special.gamma(z)).sum()


def _re_loggamma(z):
    return jnp.real(special.loggamma(z)).sum()


def _re_erfcx(z):
    return jnp.real(special.erfcx(z)).sum()


def test_complex_derivatives_match_jax():
    jax = pytest.importorskip("jax")
    js, jjnp = jax.scipy.special, jax.numpy
    z = np.array([0.7 + 0.3j, -1.5 + 0.2j, 2 - 3j, -0.3 - 0.1j, -4.2 + 1e-3j, 9 + 5j],
                 np.complex64)
    # JAX's convention (kiln's too): grad of Re(g(z)) for holomorphic g is g'(z).
    for kiln_fn, jax_fn in ((_re_gamma, js.gamma), (_re_erfcx, js.erfcx)):
        want = jax.jit(jax.grad(lambda v: jjnp.real(jax_fn(v)).sum()))(z)  # noqa: B023
        np.testing.assert_allclose(kiln.grad(kiln_fn)(z), want, rtol=5e-5, atol=1e-6)
    # JAX's loggamma shifts with a while_loop, so only forward mode is defined there; kiln
    # reverses the loop, and agrees with JAX's tangent.
    want = jax.jit(lambda v: jax.jvp(js.loggamma, (v,), (jjnp.ones_like(v),))[1])(z)
    np.testing.assert_allclose(kiln.grad(_re_loggamma)(z), want, rtol=5e-5, atol=1e-6)
    np.testing.assert_allclose(kiln.jit(kiln.grad(_re_loggamma))(z), want, rtol=5e-5,
                               atol=1e-6)


def test_wofz_of_float16_is_complex64_like_jax():
    jax = pytest.importorskip("jax")
    x = np.array([-3.0, -0.5, 0.0, 1.0, 2.5, 30.0], np.float16)
    want = np.asarray(jax.scipy.special.wofz(x))
    got = np.asarray(special.wofz(x))
    assert got.dtype == want.dtype == np.complex64
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(kiln.jit(special.wofz)(x)), want, rtol=2e-6,
                               atol=1e-7)
