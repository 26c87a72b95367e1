"""Tests for `kiln.scipy.stats`' distributions beyond `norm` against `scipy.stats` (float64
references, float32 results), with a `jit` and a `grad` check."""
import numpy as np
import pytest
import scipy.stats as sst

import kiln
import kiln.numpy as jnp
from kiln.scipy import stats

RNG = np.random.default_rng(2)
X = RNG.uniform(-3, 6, 24).astype(np.float32)
Q = np.concatenate([RNG.uniform(0, 1, 10), [0.0, 1.0]]).astype(np.float32)
K = np.concatenate([np.arange(-1, 9), [2.5]]).astype(np.float32)

# name -> (scipy distribution, shape parameters, loc, scale)
CONTINUOUS = {
    "expon": (sst.expon, (), 0.5, 2.0),
    "laplace": (sst.laplace, (), 0.5, 2.0),
    "logistic": (sst.logistic, (), 0.5, 2.0),
    "cauchy": (sst.cauchy, (), 0.5, 2.0),
    "uniform": (sst.uniform, (), -1.0, 4.0),
    "t": (sst.t, (3.5,), 0.5, 2.0),
    "chi2": (sst.chi2, (3.0,), -0.5, 1.5),
    "gamma": (sst.gamma, (2.5,), -0.5, 1.5),
    "beta": (sst.beta, (2.0, 3.5), -1.0, 5.0),
    "pareto": (sst.pareto, (2.5,), -1.0, 1.5),
}
CASES = [(name, method) for name in sorted(CONTINUOUS)
         for method in getattr(stats, name).__all__]


@pytest.mark.parametrize("name,method", CASES)
def test_continuous_against_scipy(name, method):
    ref, shapes, loc, scale = CONTINUOUS[name]
    arg = Q if method in ("ppf", "isf") else X
    if name == "cauchy" and method in ("ppf", "isf"):
        arg = Q[:-2]      # tan(pi / 2) is finite in float32, as in JAX
    got = getattr(getattr(stats, name), method)(arg, *shapes, loc, scale)
    with np.errstate(all="ignore"):
        expected = getattr(ref, method)(arg.astype(np.float64), *shapes, loc, scale)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-4, atol=1e-6)


# name -> (scipy distribution, shape parameters, loc)
DISCRETE = {
    "poisson": (sst.poisson, (2.5,), 0.0),
    "bernoulli": (sst.bernoulli, (0.3,), 0.0),
    "geom": (sst.geom, (0.3,), 1.0),
    "binom": (sst.binom, (6.0, 0.3), 0.0),
    "nbinom": (sst.nbinom, (3.5, 0.4), 1.0),
}


@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_discrete_against_scipy(name):
    ref, shapes, loc = DISCRETE[name]
    mod = getattr(stats, name)
    for method in ("logpmf", "pmf"):
        with np.errstate(all="ignore"):
            expected = getattr(ref, method)(K.astype(np.float64), *shapes, loc)
        np.testing.assert_allclose(getattr(mod, method)(K, *shapes, loc), expected,
                                   rtol=1e-5, atol=1e-7)
    if name in ("poisson", "bernoulli"):
        np.testing.assert_allclose(mod.cdf(K, *shapes), ref.cdf(K, *shapes), rtol=1e-5)


def test_bernoulli_ppf():
    np.testing.assert_array_equal(stats.bernoulli.ppf(np.array([0., 0.5, 0.7, 1.0, 1.5]), 0.4),
                                  [0, 0, 1, 1, np.nan])


def test_multivariate_normal():
    a = RNG.normal(size=(3, 3))
    cov = (a @ a.T + np.eye(3)).astype(np.float32)
    mean = RNG.normal(size=3).astype(np.float32)
    x = RNG.normal(size=(5, 3)).astype(np.float32)
    expected = sst.multivariate_normal(mean, cov).logpdf(x)
    np.testing.assert_allclose(stats.multivariate_normal.logpdf(x, mean, cov), expected,
                               rtol=1e-5)
    np.testing.assert_allclose(stats.multivariate_normal.pdf(x[0], mean, cov),
                               np.exp(expected[0]), rtol=1e-5)
    np.testing.assert_allclose(stats.multivariate_normal.logpdf(x, mean, np.float32(2.0)),
                               sst.multivariate_normal(mean, 2.0).logpdf(x), rtol=1e-5)
    with pytest.raises(ValueError, match="incompatible shapes"):
        stats.multivariate_normal.logpdf(x, mean, np.eye(2, dtype=np.float32))


def test_dirichlet():
    alpha = np.array([2., 3., 1.5], np.float32)
    x = RNG.dirichlet(alpha, 4).T.astype(np.float32)
    x64 = x / x.sum(0, dtype=np.float64)
    np.testing.assert_allclose(stats.dirichlet.logpdf(x, alpha),
                               sst.dirichlet(alpha).logpdf(x64), rtol=1e-4)
    np.testing.assert_allclose(stats.dirichlet.pdf(x[:2], alpha),
                               sst.dirichlet(alpha).pdf(x64), rtol=1e-4)
    assert stats.dirichlet.logpdf(np.array([0.5, 0.6, 0.1], np.float32), alpha) == -np.inf


def test_jit_and_grad():
    x = jnp.asarray(X[X > 0.5])
    f = kiln.jit(lambda x: stats.gamma.cdf(x, 2.5) + stats.t.logpdf(x, 3.0))
    np.testing.assert_allclose(f(x), sst.gamma.cdf(x, 2.5) + sst.t.logpdf(x, 3.0), rtol=1e-5)
    g = kiln.grad(lambda x: jnp.sum(stats.gamma.cdf(x, 2.5)))(x)
    np.testing.assert_allclose(g, sst.gamma.pdf(np.asarray(x, np.float64), 2.5), rtol=1e-4)
    g = kiln.grad(lambda m: stats.poisson.logpmf(3.0, m))(2.0)
    np.testing.assert_allclose(g, 3.0 / 2.0 - 1.0, rtol=1e-6)
