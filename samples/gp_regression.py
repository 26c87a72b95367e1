"""Gaussian-process regression: an RBF kernel's log length scale, log amplitude and log noise
fitted by gradient descent on the negative log marginal likelihood, under jit(grad), then the
posterior mean at test points (cholesky and solve_triangular).

The same code runs on JAX: `run(jax, jax.numpy, jax.scipy.linalg)` (tests/test_samples.py
compares the two); `python samples/gp_regression.py` runs it on kiln.
"""
import numpy as np


def data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-3, 3, n)).astype(np.float32)
    y = (np.sin(2 * x) + 0.1 * rng.normal(size=n)).astype(np.float32)
    return x, y, np.linspace(-3, 3, 7).astype(np.float32)


def run(api, jnp, linalg, steps=60, rate=0.02):
    x, y, xs = data()

    def kernel(params, a, b):
        length, amplitude = jnp.exp(params[0]), jnp.exp(params[1])
        return amplitude * jnp.exp(-0.5 * ((a[:, None] - b[None, :]) / length) ** 2)

    def loss(params):
        k = kernel(params, x, x) + (jnp.exp(params[2]) + 1e-4) * jnp.eye(x.shape[0])
        lower = linalg.cholesky(k, lower=True)
        alpha = linalg.solve_triangular(lower, y, lower=True)
        return 0.5 * jnp.sum(alpha ** 2) + jnp.sum(jnp.log(jnp.diagonal(lower)))

    def predict(params):
        k = kernel(params, x, x) + (jnp.exp(params[2]) + 1e-4) * jnp.eye(x.shape[0])
        lower = linalg.cholesky(k, lower=True)
        alpha = linalg.solve_triangular(lower, y, lower=True)
        beta = linalg.solve_triangular(lower, alpha, lower=True, trans=1)
        return kernel(params, xs, x) @ beta

    step = api.jit(api.grad(loss))
    params = jnp.zeros(3, jnp.float32)
    for _ in range(steps):
        params = params - rate * step(params)
    return np.asarray(params), float(loss(params)), np.asarray(api.jit(predict)(params))


if __name__ == "__main__":
    import kiln
    import kiln.numpy as knp
    import kiln.scipy.linalg as kla
    params, nll, mean = run(kiln, knp, kla)
    print("log length, amplitude, noise:", np.round(params, 3))
    print("negative log likelihood:", round(nll, 3))
    print("posterior mean:", np.round(mean, 3))
