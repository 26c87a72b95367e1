"""Derivatives that JAX defines by custom JVPs rather than by differentiating the formula:
`logaddexp` / `logaddexp2` (weights exp(x - out), so 1/2 each where x == y, and +inf taken as
0 inside the weights), `relu` (0 at 0) and `relu6` (0 at 0 and at 6), and `softplus`, which is
`logaddexp(x, 0)` (1/2 at 0). Without those rules, `max`/`abs` give 0 for logaddexp at a tie,
which stopped the Gaussian-process example of JAX from learning. References: NumPy formulas
in float64, and values recorded from JAX 0.10.2 for the infinite cases."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kiln
import kiln.numpy as jnp
from kiln import nn

SETTINGS = settings(max_examples=20, deadline=None)

# small whole numbers, so that ties (x == y, x == 0, x == 6) are common
_ELEMENTS = st.sampled_from([-7.0, -1.0, 0.0, 1.0, 2.0, 6.0, 7.0])


def _pairs():
    shapes = hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=4)
    return shapes.flatmap(lambda s: st.tuples(hnp.arrays(np.float32, s, elements=_ELEMENTS),
                                              hnp.arrays(np.float32, s, elements=_ELEMENTS)))


def _grads(fn, x, y):
    return kiln.grad(lambda a, b: jnp.sum(fn(a, b)), argnums=(0, 1))(x, y)


@SETTINGS
@given(_pairs(), st.booleans())
def test_logaddexp_gradient_weights(xy, jitted):
    x, y = xy
    g = kiln.jit(_grads, static_argnums=0) if jitted else _grads
    gx, gy = g(jnp.logaddexp, x, y)
    out = np.logaddexp(x.astype(np.float64), y.astype(np.float64))
    np.testing.assert_allclose(gx, np.exp(x - out), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gy, np.exp(y - out), rtol=1e-6, atol=1e-7)
    gx2, gy2 = g(jnp.logaddexp2, x, y)
    out2 = np.logaddexp2(x.astype(np.float64), y.astype(np.float64))
    np.testing.assert_allclose(gx2, np.exp2(x - out2), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gy2, np.exp2(y - out2), rtol=1e-6, atol=1e-7)


def test_logaddexp_ties_and_infinities_match_jax():
    # Recorded from JAX 0.10.2.
    assert float(kiln.grad(lambda x: jnp.logaddexp(x, 0.))(0.)) == 0.5
    assert float(kiln.grad(nn.softplus)(0.)) == 0.5
    assert float(kiln.grad(lambda x: jnp.logaddexp(x, x))(1.)) == 1.0
    assert float(kiln.grad(lambda x: jnp.logaddexp(x, -jnp.inf))(1.)) == 1.0
    np.testing.assert_allclose(kiln.grad(lambda x: jnp.logaddexp(x, jnp.inf))(1.), np.e,
                               rtol=1e-6)
    out, tangent = kiln.jvp(jnp.logaddexp, (1., 2.), (1., 1.))
    np.testing.assert_allclose(tangent, 1.0, rtol=1e-6)
    assert tangent.dtype == np.float32 and tangent.weak_type


@pytest.mark.parametrize("shape", [(), (0,), (1,), (3, 4)])
def test_relu_relu6_derivative_at_kinks(shape):
    x = np.resize(np.array([-1., 0., 2., 6., 7.], np.float32), shape)
    for fn, lo, hi in ((nn.relu, 0, np.inf), (nn.relu6, 0, 6)):
        expected = ((x > lo) & (x < hi)).astype(np.float32)
        if x.ndim == 1:
            np.testing.assert_array_equal(kiln.vmap(kiln.grad(fn))(x), expected)
        np.testing.assert_array_equal(kiln.grad(lambda v: fn(v).sum())(x), expected)
        np.testing.assert_array_equal(
            kiln.jit(kiln.grad(lambda v: fn(v).sum()))(x), expected)
        _, t = kiln.jvp(fn, (x,), (np.ones_like(x),))
        np.testing.assert_array_equal(t, expected)
    assert nn.relu(np.array([1, -2], np.int32)).dtype == np.int32
    assert float(kiln.grad(kiln.grad(nn.relu))(1.)) == 0.0
