"""kiln.experimental.ode.odeint against JAX 0.10.2's and against exact solutions: values, jit,
reverse-mode derivatives (the adjoint) with respect to the initial state, the parameters,
closed-over values and the times, pytree states, errors."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.experimental.ode import odeint

jax = pytest.importorskip("jax")
from jax.experimental.ode import odeint as their_odeint  # noqa: E402

TS = np.linspace(0.0, 2.0, 5).astype(np.float32)
Y0 = np.array([1.0, 2.0], np.float32)


def forced(np_):
    return lambda y, t, k: -k * y + np_.sin(t)


def test_exact_solution_and_dense_output():
    ts = np.linspace(0.0, 3.0, 13)
    with kiln.enable_x64(True):
        ys = odeint(lambda y, t: -y, np.float64(1.0), ts, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ys, np.exp(-ts), rtol=1e-8)


def test_values_and_jit_as_jax():
    mine = odeint(forced(knp), Y0, TS, 0.7)
    theirs = their_odeint(forced(jax.numpy), Y0, TS, 0.7)
    np.testing.assert_allclose(mine, theirs, rtol=2e-6)
    np.testing.assert_allclose(kiln.jit(lambda y, k: odeint(forced(knp), y, TS, k))(Y0, 0.7),
                               theirs, rtol=2e-6)


def test_derivatives_as_jax():
    def loss(odeint_, np_):
        return lambda y, k, ts: (odeint_(forced(np_), y, ts, k) ** 2).sum()
    mine = kiln.grad(loss(odeint, knp), argnums=(0, 1, 2))(Y0, 0.7, TS)
    theirs = jax.grad(loss(their_odeint, jax.numpy), argnums=(0, 1, 2))(Y0, 0.7, TS)
    for m, t in zip(mine, theirs):
        np.testing.assert_allclose(m, t, rtol=1e-4, atol=1e-5)
    # a value the dynamics close over gets its derivative too (JAX: closure_convert)
    closed = lambda odeint_: lambda w: odeint_(lambda y, t: -w * y, 1.0,  # noqa: E731
                                               np.array([0.0, 1.0], np.float32)).sum()
    np.testing.assert_allclose(kiln.grad(closed(odeint))(0.5), jax.grad(closed(their_odeint))(0.5),
                               rtol=1e-5)
    np.testing.assert_allclose(kiln.grad(closed(odeint))(0.5), -np.exp(-0.5), rtol=1e-5)


def test_pytree_state_as_jax():
    def pendulum(np_):
        def f(state, t, b, c):
            return {"th": state["om"], "om": -b * state["om"] - c * np_.sin(state["th"])}
        return f
    y0 = {"th": np.float32(np.pi - 0.1), "om": np.float32(0.0)}
    ts = np.linspace(0, 10, 11).astype(np.float32)
    mine = odeint(pendulum(knp), y0, ts, 0.25, 5.0)
    theirs = their_odeint(pendulum(jax.numpy), y0, ts, 0.25, 5.0)
    assert set(mine) == {"th", "om"} and mine["th"].shape == (11,)
    for key in mine:
        np.testing.assert_allclose(mine[key], theirs[key], rtol=1e-4, atol=1e-4)


def test_arguments_must_be_arrays():
    with pytest.raises(TypeError, match=r"^The contents of odeint \*args must be arrays or "
                                        r"scalars, but got abc\.$"):
        odeint(lambda y, t, s: y, Y0, TS, "abc")
