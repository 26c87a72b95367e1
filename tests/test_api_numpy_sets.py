"""kiln.numpy's set operations, differences, correlations and histograms against NumPy
(and JAX where `size=` padding is JAX's own), eagerly and under jit, with grad where
differentiable."""
import jax
import jax.numpy as J
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp

RNG = np.random.default_rng(0)
X = np.array([3, 1, 2, 3, 1, 7, 0], np.int32)


def close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), **kw)


def test_unique_family():
    for got, want in zip(jnp.unique(X, True, True, True), np.unique(X, True, True, True)):
        np.testing.assert_array_equal(got, want)
    m = np.array([[1, 2], [1, 2], [0, 5]])
    for got, want in zip(jnp.unique(m, axis=0, return_inverse=True, return_counts=True),
                         np.unique(m, axis=0, return_inverse=True, return_counts=True)):
        np.testing.assert_array_equal(got, want)
    f = np.array([np.nan, 1., np.nan, 0.])
    np.testing.assert_array_equal(jnp.unique(f), np.unique(f))
    np.testing.assert_array_equal(jnp.unique(np.zeros(0, np.int32)), np.zeros(0))
    for kw in ({"size": 8, "fill_value": -1}, {"size": 8, "return_counts": True},
               {"size": 3, "return_index": True, "return_inverse": True}):
        want = J.unique(X, **kw)
        for got in (jnp.unique(X, **kw), kiln.jit(lambda x: jnp.unique(x, **kw))(X)):
            for g, w in zip(jax_leaves(got), jax_leaves(want)):
                np.testing.assert_array_equal(g, w)
    r = jnp.unique_all(X)
    np.testing.assert_array_equal(r.counts, np.unique_counts(X).counts)
    np.testing.assert_array_equal(r.inverse_indices, np.unique_all(X).inverse_indices)
    np.testing.assert_array_equal(jnp.unique_values(X), J.unique_values(X))
    np.testing.assert_array_equal(jnp.unique_inverse(X).inverse_indices,
                                  np.unique_inverse(X).inverse_indices)


def jax_leaves(x):
    return list(x) if isinstance(x, tuple) else [x]


def test_set_operations():
    b = np.array([7, 3, 9, 3], np.int32)
    np.testing.assert_array_equal(jnp.isin(X, b), np.isin(X, b))
    np.testing.assert_array_equal(jnp.isin(X, b, invert=True), np.isin(X, b, invert=True))
    for name in ("union1d", "setdiff1d", "setxor1d", "intersect1d"):
        np.testing.assert_array_equal(getattr(jnp, name)(X, b), getattr(np, name)(X, b))
    for got, want in zip(jnp.intersect1d(X, b, return_indices=True),
                         np.intersect1d(X, b, return_indices=True)):
        np.testing.assert_array_equal(got, want)
    for name in ("union1d", "setdiff1d"):
        f = kiln.jit(lambda x, y: getattr(jnp, name)(x, y, size=6, fill_value=-2))
        np.testing.assert_array_equal(f(X, b), getattr(J, name)(X, b, size=6, fill_value=-2))
    np.testing.assert_array_equal(jnp.setdiff1d(X, b, size=6), J.setdiff1d(X, b, size=6))


@pytest.mark.parametrize("n,m", [(5, 3), (3, 5), (4, 4), (1, 3), (6, 1)])
def test_convolve_correlate(n, m):
    a, v = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(m).astype(np.float32)
    for mode in ("full", "same", "valid"):
        close(jnp.convolve(a, v, mode), np.convolve(a, v, mode), rtol=1e-5, atol=1e-6)
        close(jnp.correlate(a, v, mode), np.correlate(a, v, mode), rtol=1e-5, atol=1e-6)
        ac, vc = (a + 1j * a[::-1]).astype(np.complex64), (v - 2j * v).astype(np.complex64)
        close(jnp.correlate(ac, vc, mode), np.correlate(ac, vc, mode), rtol=1e-5, atol=1e-5)


def test_convolve_jit_grad_and_errors():
    a, v = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    close(kiln.jit(lambda a, v: jnp.convolve(a, v, "same"))(a, v), np.convolve(a, v, "same"),
          rtol=1e-5, atol=1e-6)
    close(kiln.grad(lambda a: jnp.correlate(a, v, "full").sum())(a), np.full(6, v.sum()),
          rtol=1e-5)
    with pytest.raises(ValueError, match="1-dimensional"):
        jnp.convolve(np.ones((2, 2)), v)
    with pytest.raises(ValueError, match="mode must be one of"):
        jnp.convolve(a, v, "nope")


def test_differences_and_integrals():
    x = RNG.standard_normal((3, 6)).astype(np.float32)
    close(jnp.diff(x, 2, axis=1, prepend=0.), np.diff(x, 2, axis=1, prepend=0.), rtol=1e-6)
    np.testing.assert_array_equal(jnp.diff(x > 0), np.diff(x > 0))
    close(jnp.ediff1d(x, to_end=np.array([1., 2.]), to_begin=5.),
          np.ediff1d(x, to_end=[1., 2.], to_begin=5.), rtol=1e-6)
    for g, w in zip(jnp.gradient(x, 0.5), np.gradient(x, 0.5)):
        close(g, w, rtol=1e-6)
    xs = np.cumsum(RNG.random(6)).astype(np.float32)
    close(jnp.gradient(x, 1.0, xs)[1], np.gradient(x, 1.0, xs)[1], rtol=1e-4)
    close(jnp.trapezoid(x, dx=0.3), np.trapezoid(x, dx=0.3), rtol=1e-6)
    close(jnp.trapezoid(x, xs), np.trapezoid(x, xs), rtol=1e-5)
    close(kiln.jit(jnp.trapezoid)(x), np.trapezoid(x), rtol=1e-6)
    close(kiln.grad(lambda y: jnp.trapezoid(y, xs))(x[0]),
          jax.grad(lambda y: J.trapezoid(y, xs))(x[0]), rtol=1e-5)
    ph = np.cumsum(RNG.standard_normal(20) * 2).astype(np.float32)
    close(jnp.unwrap(ph), np.unwrap(ph), atol=1e-5)


def test_cov_corrcoef():
    x = RNG.standard_normal((3, 6)).astype(np.float32)
    close(jnp.cov(x), np.cov(x), rtol=1e-5)
    close(jnp.cov(x, rowvar=False, ddof=0), np.cov(x, rowvar=False, ddof=0), rtol=1e-4,
          atol=1e-6)
    fw, aw = np.array([1, 2, 1, 3, 1, 1]), RNG.random(6)
    close(jnp.cov(x, fweights=fw, aweights=aw.astype(np.float32)),
          np.cov(x, fweights=fw, aweights=aw), rtol=1e-4)
    close(jnp.corrcoef(x), np.corrcoef(x), rtol=1e-5)
    close(kiln.jit(jnp.corrcoef)(x[0], x[1]), np.corrcoef(x[0], x[1]), rtol=1e-5)


def test_bincount_digitize():
    x = RNG.integers(0, 6, 20).astype(np.int32)
    w = RNG.random(20).astype(np.float32)
    np.testing.assert_array_equal(jnp.bincount(x), np.bincount(x))
    close(jnp.bincount(x, w, minlength=9), np.bincount(x, w, minlength=9), rtol=1e-6)
    np.testing.assert_array_equal(kiln.jit(lambda x: jnp.bincount(x, length=4))(x),
                                  J.bincount(x, length=4))
    b = np.array([0., 1., 2.5, 4.])
    v = RNG.random(10).astype(np.float32) * 5
    np.testing.assert_array_equal(jnp.digitize(v, b), np.digitize(v, b))
    np.testing.assert_array_equal(jnp.digitize(v, b[::-1], right=True),
                                  np.digitize(v, b[::-1], right=True))
    # Values on the edges, where `right` decides, in both directions and dtypes JAX takes.
    for dtype in (np.float16, np.float32):
        edges = np.array([-1.5, 0.5, 0.5, 1.0], dtype)
        on = np.array([0.5, -1.5, 2, 0.3, 1.0, -3], dtype)
        for bins in (edges, edges[::-1]):
            for right in (False, True):
                want = np.digitize(on, bins, right=right)
                np.testing.assert_array_equal(jnp.digitize(on, bins, right=right), want)
                np.testing.assert_array_equal(J.digitize(on, bins, right=right), want)
    with pytest.raises(TypeError, match="integer type"):
        jnp.bincount(w)


def test_histograms():
    d = RNG.standard_normal(100).astype(np.float32)
    y = RNG.standard_normal(100).astype(np.float32)
    for args, kw in [((7,), {}), ((np.array([-1., 0., 0.5, 3.]),),
                                  {"weights": np.abs(d), "density": True}),
                     ((5,), {"range": (-1, 1)})]:
        for g, w in zip(jnp.histogram(d, *args, **kw), np.histogram(d, *args, **kw)):
            close(g, w, rtol=1e-5, atol=1e-5)
    close(jnp.histogram_bin_edges(d, 4), np.histogram_bin_edges(d, 4), rtol=1e-5, atol=1e-5)
    for kw in ({"bins": (3, 4)}, {"bins": 3, "density": True}):
        for g, w in zip(jnp.histogram2d(d, y, **kw), np.histogram2d(d, y, **kw)):
            close(g, w, rtol=1e-4, atol=1e-6)
    s = np.stack([d, y, d * y], 1)
    g, ge = jnp.histogramdd(s, bins=(2, 3, 2))
    w, we = np.histogramdd(s, bins=(2, 3, 2))
    close(g, w)
    # JAX counts in int32 without weights or density (NumPy in float64)
    assert g.dtype == jnp.histogram2d(d, y)[0].dtype == np.int32
    assert jnp.histogram2d(d, y, density=True)[0].dtype == np.float32
    close(kiln.jit(lambda d: jnp.histogram(d, 5, range=(-1., 1.))[0])(d),
          np.histogram(d, 5, range=(-1, 1))[0])


def test_index_and_count_dtypes_match_jax_under_x64(x64):
    x = np.array([0.5, 0, 2.0, 0.5, 0], np.float32)
    with jax.enable_x64(True):
        for fn in (lambda m: m.unique_inverse(x).inverse_indices,
                   lambda m: m.unique_counts(x).counts, lambda m: m.unique_all(x).indices,
                   lambda m: m.unique(x[:0], return_index=True, return_inverse=True,
                                      return_counts=True)[1:],
                   lambda m: m.bincount(np.array([1, 2, 2], np.int32)),
                   lambda m: m.histogram2d(x, x, bins=3)[0]):
            for got, want in zip(*(jax.tree.leaves(fn(m)) for m in (jnp, J))):
                assert got.dtype == want.dtype == np.int64
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_interp():
    xp = np.sort(RNG.random(8)).astype(np.float32)
    fp = RNG.random(8).astype(np.float32)
    q = (RNG.random(12) * 1.4 - 0.2).astype(np.float32)
    close(jnp.interp(q, xp, fp), np.interp(q, xp, fp), rtol=1e-5)
    close(jnp.interp(q, xp, fp, left=-1, right=2), np.interp(q, xp, fp, left=-1, right=2),
          rtol=1e-5)
    close(jnp.interp(q * 3, xp, fp, period=1.0), np.interp(q * 3, xp, fp, period=1.0),
          rtol=1e-4, atol=1e-5)
    close(kiln.jit(lambda q: jnp.interp(q, xp, fp))(q), np.interp(q, xp, fp), rtol=1e-5)
    # JAX's promotion: x with xp, fp on its own; float16 stays float16.
    h = np.float16
    for args in ((q.astype(h), xp.astype(h), fp.astype(h)), (q.astype(h), xp, fp.astype(h)),
                 (0.5, xp.astype(h), fp.astype(h)), (q, xp, fp.astype(h))):
        got, want = jnp.interp(*args), J.interp(*args)
        assert got.dtype == want.dtype
        close(got, want, rtol=1e-3)
    with pytest.raises(ValueError, match="complex x values not supported"):
        jnp.interp(q + 1j, xp, fp)
    i = np.clip(np.searchsorted(xp, q[2:10], side="right"), 1, 7)
    close(kiln.grad(lambda q: jnp.interp(q, xp, fp).sum())(q[2:10]),
          np.where((q[2:10] < xp[0]) | (q[2:10] > xp[-1]), 0,
                   (fp[i] - fp[i - 1]) / (xp[i] - xp[i - 1])), rtol=1e-4)
