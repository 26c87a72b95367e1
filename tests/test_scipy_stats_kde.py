"""kiln.scipy.stats' gumbel_l, gumbel_r, gaussian_kde, mode, rankdata and sem against JAX
0.10.2's: values, dtypes and errors, eagerly and under jit, grad and vmap (and against SciPy
where the two agree, which is quicker than JAX's compiles)."""
import numpy as np
import pytest
import scipy.stats

import kiln
from kiln.scipy import stats

jax = pytest.importorskip("jax")
import jax.scipy.stats as jstats  # noqa: E402

RNG = np.random.default_rng(1)


def close(got, want, tol=2e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("name", ["gumbel_l", "gumbel_r"])
def test_gumbel_matches_jax(name):
    ours, theirs = getattr(stats, name), getattr(jstats, name)
    x = np.linspace(-4, 6, 11, dtype=np.float32)
    scale = np.array([[2.0], [0.5], [-1.0]], np.float32)     # -1: NaN but in ppf
    for method in ("logpdf", "pdf", "logcdf", "cdf", "sf", "logsf"):
        want = getattr(getattr(scipy.stats, name), method)(x, 0.5, scale).astype(np.float32)
        close(getattr(ours, method)(x, 0.5, scale), want, 1e-4)
    close(ours.logsf(x, 0.5, 2.0), theirs.logsf(x, 0.5, 2.0))
    p = np.array([0.0, 1e-6, 0.2, 0.5, 0.9, 1.0, 1.5], np.float32)
    close(ours.ppf(p, 1.0, scale), theirs.ppf(p, 1.0, scale), 1e-4)
    close(ours.cdf(3), theirs.cdf(3))                         # integers promote to float
    close(kiln.jit(ours.logpdf)(x, 1.0, 2.0), theirs.logpdf(x, 1.0, 2.0))
    close(kiln.vmap(kiln.grad(ours.logcdf))(x[:4]), jax.vmap(jax.grad(theirs.logcdf))(x[:4]), 1e-4)


def test_mode_matches_jax():
    a = RNG.integers(0, 4, (5, 6)).astype(np.float32)
    a[0, :2] = np.nan
    for axis, keepdims in ((0, False), (-1, True), (None, False), (None, True)):
        got, want = stats.mode(a, axis, keepdims=keepdims), jstats.mode(a, axis, keepdims=keepdims)
        close(got.mode, want.mode)
        close(got.count, want.count)
    ints = RNG.integers(0, 3, (4, 7))
    close(kiln.jit(lambda a: stats.mode(a, 1).mode)(ints), jstats.mode(ints, 1).mode)
    close(stats.mode(3).count, jstats.mode(3).count)
    close(stats.mode(np.zeros((0, 2))).mode, jstats.mode(np.zeros((0, 2))).mode)
    with pytest.raises(ValueError, match="Illegal nan_policy value 'skip'"):
        stats.mode(a, nan_policy="skip")
    with pytest.raises(NotImplementedError, match="`nan_policy` of omit is not implemented"):
        stats.mode(a, nan_policy="omit")
    with pytest.raises(NotImplementedError, match="outside of the `mode` function"):
        stats.mode(a, nan_policy="raise")


def test_rankdata_matches_jax():
    a = RNG.integers(0, 4, (4, 6)).astype(np.float32)
    with_nan = a.copy()
    with_nan[2, 3] = np.nan
    for method in ("average", "min", "max", "dense", "ordinal"):
        close(stats.rankdata(a, method), scipy.stats.rankdata(a, method).astype(np.float32))
        close(stats.rankdata(with_nan, method, axis=1),
              scipy.stats.rankdata(with_nan, method, axis=1).astype(np.float32))
    close(stats.rankdata(with_nan, "dense", axis=1), jstats.rankdata(with_nan, "dense", axis=1))
    close(stats.rankdata(with_nan), jstats.rankdata(with_nan))
    close(kiln.jit(lambda a: stats.rankdata(a, "average", axis=0))(a),
          jstats.rankdata(a, "average", axis=0))


def test_rankdata_and_sem_errors_and_sem_values():
    with pytest.raises(ValueError, match="unknown method 'mean'"):
        stats.rankdata(np.ones(2), "mean")
    with pytest.raises(NotImplementedError, match="outside of the `rankdata` function"):
        stats.rankdata(np.ones(2), nan_policy="raise")
    with pytest.raises(TypeError, match="rankdata requires ndarray or scalar arguments"):
        stats.rankdata([1, 2])
    a = RNG.normal(size=(4, 5)).astype(np.float32)
    a[1, 2] = np.nan
    for axis, policy, keepdims in ((0, "propagate", False), (1, "omit", True),
                                   (None, "omit", False), (None, "propagate", True)):
        close(stats.sem(a, axis, nan_policy=policy, keepdims=keepdims),
              jstats.sem(a, axis, nan_policy=policy, keepdims=keepdims))
    close(stats.sem(a[0], ddof=0), jstats.sem(a[0], ddof=0))
    close(kiln.grad(lambda a: stats.sem(a, 0).sum())(a[0]),
          jax.grad(lambda a: jstats.sem(a, 0).sum())(a[0]))
    with pytest.raises(ValueError, match="raise is not supported"):
        stats.sem(a, nan_policy="raise")


def test_gaussian_kde_matches_jax():
    data = RNG.normal(size=(2, 30)).astype(np.float32)
    weights = RNG.uniform(0.5, 1.5, 30).astype(np.float32)
    points = RNG.normal(size=(2, 7)).astype(np.float32)
    def jkde(*args):       # JAX's estimator built under one jit, not operation by operation
        return jax.jit(lambda d, w: jstats.gaussian_kde(d, *args, weights=w))(data, weights)

    for bw in ("silverman", 0.4, lambda kde: kde.neff ** -0.2):
        close(stats.gaussian_kde(data, bw, weights).covariance, jkde(bw).covariance, 1e-4)
    ours, theirs = stats.gaussian_kde(data, None, weights), jkde(None)
    for field in ("neff", "dataset", "weights", "covariance", "inv_cov"):
        close(getattr(ours, field), getattr(theirs, field), 1e-4)
    for method in ("evaluate", "pdf", "logpdf", "__call__"):
        close(getattr(ours, method)(points), getattr(theirs, method)(points), 1e-4)
    close(ours.evaluate(points[:, 0]), theirs.evaluate(points[:, 0]), 1e-4)
    close(ours.integrate_gaussian(np.zeros(2, np.float32), np.eye(2, dtype=np.float32)),
          jax.jit(lambda k: k.integrate_gaussian(np.zeros(2, np.float32),
                                                 np.eye(2, dtype=np.float32)))(theirs))
    other_data = RNG.normal(size=(2, 12)).astype(np.float32)
    close(ours.integrate_kde(stats.gaussian_kde(other_data)),
          jax.jit(lambda k, o: k.integrate_kde(jstats.gaussian_kde(o)))(theirs, other_data))
    one = stats.gaussian_kde(data[0])
    close(one.integrate_box_1d(-0.5, 1.0), jstats.gaussian_kde(data[0]).integrate_box_1d(-0.5, 1.0))
    assert (one.d, one.n) == (1, 30)
    # resample: kiln.random gives JAX's bits for the same key
    close(ours.resample(kiln.random.key(3), (4,)), theirs.resample(jax.random.key(3), (4,)), 1e-4)
    # a pytree: into jit, and the density differentiable in the points
    close(kiln.jit(lambda kde, x: kde.logpdf(x))(ours, points), theirs.logpdf(points), 1e-4)
    close(kiln.grad(lambda x: stats.gaussian_kde(data).logpdf(x).sum())(points),
          jax.jit(jax.grad(lambda x: jstats.gaussian_kde(data).logpdf(x).sum()))(points),
          1e-4)


def test_gaussian_kde_errors_are_jaxs():
    data = RNG.normal(size=(2, 10))
    kde = stats.gaussian_kde(data)
    cases = [
        (ValueError, "should have multiple elements", lambda: stats.gaussian_kde(np.ones(1))),
        (NotImplementedError, "does not support complex data",
         lambda: stats.gaussian_kde(data + 1j)),
        (ValueError, "should be of length n", lambda: stats.gaussian_kde(data, weights=np.ones(3))),
        (ValueError, "should be one-dimensional",
         lambda: stats.gaussian_kde(data, weights=np.ones((10, 2)))),
        (ValueError, "`bw_method` should be 'scott', 'silverman', a scalar, or a callable",
         lambda: stats.gaussian_kde(data, "wide")),
        (ValueError, "points have dimension 3, dataset has dimension 2",
         lambda: kde.evaluate(np.ones((3, 4)))),
        (NotImplementedError, "does not support complex coordinates",
         lambda: kde.logpdf(np.ones((2, 2)) * 1j)),
        (ValueError, "mean does not have dimension 2", lambda: kde.integrate_gaussian(np.ones(3), np.eye(2))),
        (ValueError, "covariance does not have dimension 2",
         lambda: kde.integrate_gaussian(np.ones(2), np.eye(3))),
        (ValueError, r"integrate_box_1d\(\) only handles 1D pdfs", lambda: kde.integrate_box_1d(0, 1)),
        (ValueError, "must be scalars", lambda: stats.gaussian_kde(data[0]).integrate_box_1d([0], 1)),
        (ValueError, "KDEs are not the same dimensionality",
         lambda: kde.integrate_kde(stats.gaussian_kde(data[0]))),
        (NotImplementedError, "use `integrate_box_1d`", lambda: kde.integrate_box([0, 0], [1, 1])),
        (NotImplementedError, "dynamically changing the bandwidth", lambda: kde.set_bandwidth(0.3)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()
