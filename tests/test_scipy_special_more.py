"""Tests for `kiln.scipy.special`'s series, continued-fraction and closed-form functions
(gammainc ... dawsn, beta ... bernoulli) against `scipy.special` in float64, eagerly and under
`jit`, with derivatives checked against closed forms or SciPy's finite differences."""
import numpy as np
import pytest
import scipy.special as sps

import kiln
import kiln.numpy as jnp
from kiln.scipy import special

RNG = np.random.default_rng(0)
N = 40
POS = RNG.uniform(0.1, 30, N)
POS2 = RNG.uniform(0.1, 30, N)
X = RNG.uniform(0, 40, N)
U = RNG.uniform(0, 1, N)
REAL = RNG.uniform(-30, 30, N)

# name -> (arguments, scipy reference, float32 rtol)
CASES = {
    "gammainc": ((POS, X), sps.gammainc, 2e-5),
    "gammaincc": ((POS, X), sps.gammaincc, 5e-5),
    "betainc": ((POS, POS2, U), sps.betainc, 5e-4),
    "zeta": ((POS / 3 + 1.1, POS2), sps.zeta, 5e-5),
    "expn": ((np.floor(POS / 5), X / 4), sps.expn, 2e-5),
    "exp1": ((X / 4,), sps.exp1, 2e-5),
    "expi": ((np.concatenate([REAL, 2.5 * POS]),), sps.expi, 2e-5),
    "i0e": ((REAL * 2,), sps.i0e, 2e-6),
    "i1e": ((REAL * 2,), sps.i1e, 2e-6),
    "i0": ((REAL,), sps.i0, 1e-5),
    "i1": ((REAL,), sps.i1, 1e-5),
    "erfcx": ((np.concatenate([REAL / 5, POS * 3]),), sps.erfcx, 2e-6),
    "dawsn": ((REAL,), sps.dawsn, 2e-6),
    "spence": ((np.concatenate([X / 8, X * 3, [0.0, 0.5, 1.5, 2.0, 1e6]]),), sps.spence, 2e-6),
    "betaln": ((POS, POS2), sps.betaln, 5e-5),
    "beta": ((POS / 3 - 2, POS2 / 3), sps.beta, 2e-5),
    "factorial": ((POS - 1,), sps.factorial, 2e-5),
    "comb": ((POS, POS2), sps.comb, 2e-5),
    "poch": ((POS / 3, POS2 / 5), sps.poch, 2e-5),
    "boxcox": ((POS, REAL / 10), sps.boxcox, 2e-6),
    "boxcox1p": ((POS, REAL / 10), sps.boxcox1p, 2e-6),
}


def _check(actual, expected, rtol, dtype):
    actual = np.asarray(actual)
    assert actual.dtype == dtype
    np.testing.assert_allclose(actual, np.asarray(expected, np.float64).astype(dtype),
                               rtol=rtol, atol=1e-30, equal_nan=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_scipy_float32(name):
    args, ref, rtol = CASES[name]
    args32 = [a.astype(np.float32) for a in args]
    expected = ref(*[a.astype(np.float64) for a in args32])
    _check(getattr(special, name)(*args32), expected, rtol, np.float32)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc", "betainc", "zeta", "expn", "expi",
                                  "i0e", "i1e", "erfcx", "dawsn", "spence"])
def test_against_scipy_float64(name):
    args, ref, _ = CASES[name]
    with kiln.enable_x64(True):
        _check(getattr(special, name)(*args), ref(*args), 1e-11, np.float64)


@pytest.mark.parametrize("name", ["gammainc", "betainc", "zeta", "expi", "i1e", "dawsn",
                                  "spence"])
def test_jit_matches_eager(name):
    args, _, _ = CASES[name]
    args = [jnp.asarray(a[:5], jnp.float32) for a in args]
    f = getattr(special, name)
    np.testing.assert_allclose(kiln.jit(f)(*args), f(*args), rtol=1e-6)


def test_edges():
    nan, inf = np.nan, np.inf
    np.testing.assert_array_equal(special.gammainc(jnp.array([1., 0., 2., -1., 2.]),
                                                   jnp.array([0., 3., inf, 1., -1.])),
                                  [0, 1, 1, nan, nan])
    np.testing.assert_array_equal(special.gammaincc(2., jnp.array([0., inf])), [1, 0])
    np.testing.assert_array_equal(special.betainc(2., 3., jnp.array([0., 1., 1.5])),
                                  [0, 1, nan])
    np.testing.assert_array_equal(special.zeta(jnp.array([1., 0.5, 2.]), jnp.array([1., 1., 0.])),
                                  [inf, nan, inf])
    np.testing.assert_array_equal(special.exp1(jnp.array([0., inf, -1.])), [inf, 0, nan])
    np.testing.assert_array_equal(special.expi(jnp.array([0., nan])), [-inf, nan])
    np.testing.assert_array_equal(special.factorial(jnp.array([-1.])), [0])
    np.testing.assert_array_equal(special.comb(3., jnp.array([4., -1.])), [0, 0])
    np.testing.assert_array_equal(special.spence(jnp.array([-1., inf, nan])), [nan, nan, nan])


def test_polygamma():
    n = np.array([0, 1, 2, 3, 5], np.int32)
    x = np.array([0.5, 2.0, 3.5, 10.0, 1.5], np.float32)
    _check(special.polygamma(n, x), sps.polygamma(n, x.astype(np.float64)), 2e-5, np.float32)
    with pytest.raises(ValueError, match="must be of integer type"):
        special.polygamma(1.0, x)


def test_multigammaln_and_bernoulli():
    a = np.array([2.5, 4.0, 10.0], np.float32)
    _check(special.multigammaln(a, 3), sps.multigammaln(a.astype(np.float64), 3), 1e-6,
           np.float32)
    np.testing.assert_allclose(special.bernoulli(12), sps.bernoulli(12), rtol=1e-7)
    assert special.bernoulli(0).shape == (1,)
    with pytest.raises(ValueError, match="non-negative"):
        special.bernoulli(-1)


def test_refusals():
    with pytest.raises(NotImplementedError, match="exact=True"):
        special.factorial(3, exact=True)
    with pytest.raises(NotImplementedError, match="Hurwitz"):
        special.zeta(2.0)
    with pytest.raises(ValueError, match="complex"):
        special.gammainc(1j, 1.0)


def test_gradients():
    x = jnp.linspace(0.5, 12, 6, dtype=jnp.float32)
    xs = np.asarray(x, np.float64)
    g = kiln.grad(lambda x: special.gammainc(2.5, x).sum())(x)
    np.testing.assert_allclose(g, np.exp(-xs) * xs ** 1.5 / sps.gamma(2.5), rtol=1e-4,
                               atol=1e-7)
    g = kiln.jit(kiln.grad(lambda a: special.gammaincc(a, 3.0).sum()))(x)
    fd = (sps.gammaincc(xs + 1e-5, 3.0) - sps.gammaincc(xs - 1e-5, 3.0)) / 2e-5
    np.testing.assert_allclose(g, fd, rtol=2e-3, atol=1e-5)
    u = x / 13
    us = np.asarray(u, np.float64)
    g = kiln.grad(lambda u: special.betainc(2., 3., u).sum())(u)
    np.testing.assert_allclose(g, us * (1 - us) ** 2 / sps.beta(2, 3), rtol=1e-4)
    g = kiln.grad(lambda x: special.i0e(x).sum())(x - 6)
    z = xs - 6
    np.testing.assert_allclose(g, sps.i1e(z) - np.sign(z) * sps.i0e(z), rtol=1e-4, atol=1e-7)
    g = kiln.grad(lambda x: special.expi(x).sum())(x)
    np.testing.assert_allclose(g, np.exp(xs) / xs, rtol=1e-4)
    g = kiln.grad(lambda x: special.dawsn(x).sum())(x - 6)
    np.testing.assert_allclose(g, 1 - 2 * z * sps.dawsn(z), rtol=1e-4, atol=1e-6)
    g = kiln.grad(lambda x: special.spence(x).sum())(x / 4)
    np.testing.assert_allclose(g, np.log(xs / 4) / (1 - xs / 4), rtol=1e-4)


def test_zeta_at_negative_q_for_whole_x():
    # SciPy's and JAX's recurrence: the terms with q + k < 0 added to zeta(x, q + ceil(-q))
    x = np.array([2, 3, 2.5, 2, 4, 2, 5], np.float32)
    q = np.array([-1.5, -2.5, -1.5, 1.5, -0.3, -3., -4.25], np.float32)
    want = sps.zeta(x.astype(np.float64), q.astype(np.float64))
    for f in (special.zeta, kiln.jit(special.zeta)):
        np.testing.assert_allclose(f(x, q), want, rtol=1e-4)
    np.testing.assert_allclose(special.polygamma(1, np.float32(-1.5)),
                               sps.polygamma(1, -1.5), rtol=1e-5)


def test_float16_series_match_jax():
    # float16's range would end the sums in NaN; like XLA, kiln computes these in float32.
    jax = pytest.importorskip("jax")
    js = jax.scipy.special
    h = np.float16
    a, b = np.array([0.5, 2, 10, 3.5], h), np.array([0.5, 3, 2, 40], h)
    x = np.array([0.5, 0.3, 0.9, 0.05], h)
    for got, want in ((special.betainc(a, b, x), js.betainc(a, b, x)),
                      (special.zeta(a + 1.5, b), js.zeta(a + 1.5, b)),
                      (special.polygamma(np.array([0, 1, 2, 3]), b),
                       js.polygamma(np.array([0, 1, 2, 3]), b))):
        assert got.dtype == want.dtype == h
        np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                                   rtol=2e-3, atol=1e-6)
