"""Tests for `kiln.numpy.polyfit` against NumPy (float64) and JAX (result structure), eagerly,
under `jit` and with a gradient."""
import jax.numpy as jjnp
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp

X = np.linspace(0, 3, 9).astype(np.float32)
Y = (X ** 2 - 2 * X + 0.3 + 0.1 * np.sin(7 * X)).astype(np.float32)
YS = np.stack([Y, 2 * Y + 1], 1)
W = np.linspace(1, 2, 9).astype(np.float32)


@pytest.mark.parametrize("deg", [0, 1, 3])
@pytest.mark.parametrize("y", [Y, YS], ids=["1d", "2d"])
def test_against_numpy(deg, y):
    np.testing.assert_allclose(jnp.polyfit(X, y, deg), np.polyfit(X, y, deg), rtol=2e-4,
                               atol=2e-5)
    np.testing.assert_allclose(jnp.polyfit(X, y, deg, w=W), np.polyfit(X, y, deg, w=W),
                               rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("kw", [dict(full=True), dict(cov=True), dict(cov="unscaled")])
@pytest.mark.parametrize("y", [Y, YS], ids=["1d", "2d"])
def test_extra_results_as_jax(kw, y):
    got, expected = jnp.polyfit(X, y, 2, **kw), jjnp.polyfit(X, y, 2, **kw)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-6)


def test_jit_grad_and_errors():
    f = kiln.jit(lambda x, y: jnp.polyfit(x, y, 2))
    np.testing.assert_allclose(f(X, Y), np.polyfit(X, Y, 2), rtol=2e-4, atol=2e-5)
    # the fit is linear in y: d(sum(c))/dy is the sum of the rows of the pseudo-inverse
    g = kiln.grad(lambda y: jnp.sum(jnp.polyfit(X, y, 2)))(Y)
    np.testing.assert_allclose(g, np.linalg.pinv(np.vander(X.astype(np.float64), 3)).sum(0),
                               rtol=1e-3, atol=1e-5)
    with pytest.raises(TypeError, match="same length"):
        jnp.polyfit(X, Y[:4], 1)
    with pytest.raises(ValueError, match="deg >= 0"):
        jnp.polyfit(X, Y, -1)
