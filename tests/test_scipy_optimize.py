"""kiln.scipy.optimize.minimize against JAX's (same algorithm and line search) and SciPy's:
under x64 the iterates and counts are JAX's (to rounding), in float32 the solutions agree;
eagerly and under jit; argument errors."""
import jax
import jax.numpy as jnp
import jax.scipy.optimize as JO
import numpy as np
import pytest
import scipy.optimize as SO

import kiln
import kiln.numpy as knp
import kiln.scipy.optimize as KO

METHODS = ["BFGS", "l-bfgs-experimental-do-not-rely-on-this"]
A = np.array([[3., 1., 0.], [1., 4., 1.], [0., 1., 2.]])
B = np.array([1., -2., 3.])


def rosenbrock(np_):
    return lambda x: np_.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def quadratic(np_):
    return lambda x, a, b: 0.5 * x @ a @ x - b @ x


@pytest.fixture
def jax_x64(x64):
    with jax.enable_x64(True):
        yield


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("problem", ["rosenbrock", "quadratic"])
def test_matches_jax_under_x64(jax_x64, method, problem):
    if problem == "rosenbrock":
        x0, args = np.array([-1.2, 1., 0.5, 2.]), ()
        got = KO.minimize(rosenbrock(knp), x0, method=method)
        want = JO.minimize(rosenbrock(jnp), x0, method=method)
    else:
        x0, args = np.zeros(3), (A, B)
        got = KO.minimize(quadratic(knp), x0, args, method=method)
        want = JO.minimize(quadratic(jnp), x0, args, method=method)
    assert type(got).__name__ == "OptimizeResults" and got._fields == want._fields
    for name in ("success", "status", "nit", "nfev", "njev"):
        assert int(getattr(got, name)) == int(getattr(want, name)), name
    for name in ("x", "fun", "jac"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-9,
                                   atol=1e-12, err_msg=name)
    if method == "BFGS":
        np.testing.assert_allclose(got.hess_inv, want.hess_inv, rtol=1e-8, atol=1e-12)
    else:
        assert got.hess_inv is None
    if bool(want.success):  # a converged run reaches SciPy's minimum
        f = rosenbrock(np) if problem == "rosenbrock" else quadratic(np)
        np.testing.assert_allclose(got.x, SO.minimize(f, x0, args, method="BFGS").x,
                                   atol=2e-5)


@pytest.mark.parametrize("method", METHODS)
def test_float32_quadratic_and_jit(method):
    x0 = np.zeros(3, np.float32)
    a, b = A.astype(np.float32), B.astype(np.float32)
    solve = kiln.jit(lambda x: KO.minimize(quadratic(knp), x, (a, b), method=method))
    got = solve(x0)
    want = JO.minimize(quadratic(jnp), x0, (a, b), method=method)
    assert got.x.dtype == np.float32 and got.nit.dtype == want.nit.dtype
    np.testing.assert_allclose(got.x, np.linalg.solve(A, B), atol=2e-5)
    np.testing.assert_allclose(got.x, want.x, atol=2e-5)
    np.testing.assert_allclose(got.fun, want.fun, rtol=1e-6)
    assert abs(int(got.nit) - int(want.nit)) <= 1
    eager = KO.minimize(quadratic(knp), x0, (a, b), method=method)
    np.testing.assert_allclose(eager.x, got.x, atol=1e-6)


def test_options_and_errors():
    x0 = np.array([-1.2, 1.], np.float32)
    r = KO.minimize(rosenbrock(knp), x0, method="bfgs", options={"maxiter": 3})
    assert int(r.nit) == 3 and int(r.status) == 1 and not bool(r.success)
    with pytest.raises(TypeError, match="must be a tuple"):
        KO.minimize(rosenbrock(knp), x0, [1.], method="BFGS")
    with pytest.raises(ValueError, match="Method nelder-mead not recognized"):
        KO.minimize(rosenbrock(knp), x0, method="nelder-mead")
