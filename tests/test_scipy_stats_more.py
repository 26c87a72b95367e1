"""Tests for `kiln.scipy.stats`' gennorm, multinomial, truncnorm, vonmises, wrapcauchy and
betabinom against `jax.scipy.stats` (JAX 0.10.2): every method JAX has, over points inside and
outside the support and invalid parameters, float32 and float64, sizes 0 and 1, under `jit`,
`grad` and `vmap`; JAX's error for non-integer multinomial counts."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.scipy import stats

jax = pytest.importorskip("jax")
import jax.scipy.stats as jstats  # noqa: E402

RNG = np.random.default_rng(3)
X = np.concatenate([RNG.uniform(-4, 7, 20), [0.0, -1.5, 6.5, 2 * np.pi]])

# name -> (points, parameter sets: each a tuple broadcast against the points)
CASES = {
    "gennorm": (X, [(0.7,), (2.0,), (3.5,)]),
    "truncnorm": (X, [(-1.0, 2.0), (0.5, 3.0), (-3.0, -0.5), (1.0, 1.0), (-0.5, 2.0, 0.5, 2.0),
                      (-2.0, 9.0, -1.0, 0.5)]),
    "vonmises": (X, [(0.5,), (4.0,), (0.0,), (-1.0,)]),
    "wrapcauchy": (X, [(0.3,), (0.9,), (0.0,), (1.5,)]),
    "betabinom": (np.arange(-2.0, 9.0), [(6.0, 2.0, 3.5), (0.0, 1.0, 1.0), (4.0, 0.5, 0.5),
                                          (5.0, 1.0, 2.0, 1.0), (-1.0, 1.0, 1.0),
                                          (3.0, -1.0, 1.0)]),
}
METHODS = [(name, method) for name in sorted(CASES) for method in getattr(jstats, name).__dict__
           if method in getattr(stats, name).__all__]


def _close(got, want, rtol=2e-5):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=1e-6)


def test_methods_are_jaxs():
    for name in CASES:
        jax_methods = {m for m in dir(getattr(jstats, name)) if not m.startswith("_")}
        assert set(getattr(stats, name).__all__) == jax_methods
    assert {m for m in dir(jstats.multinomial) if not m.startswith("_")} == \
        set(stats.multinomial.__all__)


def _jax_fun(name, method):
    """JAX's function, compiled whole (one compile, not one per operation); JAX 0.10.2's
    jitted `pdf`s return garbage where the log density is NaN, so those run op by op."""
    fun = getattr(getattr(jstats, name), method)
    return fun if method == "pdf" else jax.jit(fun)


@pytest.mark.parametrize("name,method", METHODS)
def test_against_jax(name, method):
    points, params = CASES[name]
    kfun, jfun = getattr(getattr(stats, name), method), _jax_fun(name, method)
    for p in params:
        _close(kfun(points.astype(np.float32), *p), jfun(points.astype(np.float32), *p))
    for shape in ((0,), (1,), (2, 3)):     # shapes, and a parameter array broadcast
        pts = points[:int(np.prod(shape))].astype(np.float32).reshape(shape)
        _close(kfun(pts, *params[0]), jfun(pts, *params[0]))
    with jax.enable_x64(True), kiln.enable_x64(True):
        jfun = _jax_fun(name, method)
        # float64 (kiln's betaln is good to about 1e-6 there)
        _close(kfun(points, *params[0]), jfun(points, *params[0]), rtol=2e-6)


def test_transforms_against_jax():
    x = np.float32(0.7)
    for name, method in (("gennorm", "logpdf"), ("truncnorm", "logcdf"),
                         ("vonmises", "logpdf"), ("wrapcauchy", "logpdf")):
        params = CASES[name][1][0]
        kfun = getattr(getattr(stats, name), method)
        jfun = jax.jit(getattr(getattr(jstats, name), method))
        _close(kiln.jit(kfun)(x, *params), jfun(x, *params))
        _close(kiln.grad(kfun)(x, *params), jax.grad(jfun)(x, *params), rtol=1e-4)
        pts = X[:5].astype(np.float32) / 3 + 0.5
        _close(kiln.vmap(lambda v: kfun(v, *params))(pts),
               jax.vmap(lambda v: jfun(v, *params))(pts))
    k = np.arange(6.0, dtype=np.float32)
    _close(kiln.jit(stats.betabinom.pmf)(k, 5.0, 2.0, 3.0), jstats.betabinom.pmf(k, 5.0, 2.0, 3.0))
    _close(kiln.grad(stats.betabinom.logpmf, argnums=2)(np.float32(2), 5.0, 2.0, 3.0),
           jax.grad(jstats.betabinom.logpmf, argnums=2)(np.float32(2), 5.0, 2.0, 3.0), 1e-4)


def test_multinomial_against_jax():
    p = np.array([0.2, 0.5, 0.3], np.float32)
    for x, n in (([1, 2, 1], 4), ([0, 0, 3], 3), ([1, 1, 1], 4), ([[1, 2, 1], [2, 2, 0]], 4)):
        x = np.array(x, np.int32)
        for fn in ("logpmf", "pmf"):
            _close(getattr(stats.multinomial, fn)(x, n, p),
                   getattr(jstats.multinomial, fn)(x, n, p))
    x = np.array([1, 2, 1], np.int32)
    _close(kiln.jit(stats.multinomial.logpmf)(x, 4, p), jstats.multinomial.logpmf(x, 4, p))
    _close(kiln.grad(stats.multinomial.logpmf, argnums=2)(x, 4, p),
           jax.grad(jstats.multinomial.logpmf, argnums=2)(x, 4, p))
    xs = np.array([[1, 2, 1], [2, 2, 0], [4, 0, 0]], np.int32)
    _close(kiln.vmap(stats.multinomial.pmf, (0, None, None))(xs, 4, p),
           jax.vmap(jstats.multinomial.pmf, (0, None, None))(xs, 4, p))
    with pytest.raises(ValueError) as want:
        jstats.multinomial.logpmf(np.array([1.0, 2.0]), 3, p[:2])
    with pytest.raises(ValueError) as got:
        stats.multinomial.logpmf(np.array([1.0, 2.0]), 3, p[:2])
    assert str(got.value) == str(want.value)
    assert jnp.isfinite(stats.multinomial.logpmf(x, 4, p))
