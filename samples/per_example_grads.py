"""Per-example gradients: `kiln.jit(kiln.vmap(kiln.grad(loss), in_axes=(None, 0, 0)))`.

    python samples/per_example_grads.py

The gradient of a linear model's squared error for every example of a batch at once (the
building block of differentially private SGD, or of per-example gradient norms), checked
against a loop of single-example gradients and against the formula.
"""
import numpy as np

import kiln
import kiln.numpy as jnp
from kiln import random


def loss(w, x, y):
    return (jnp.dot(x, w) - y) ** 2


def main():
    kw, kx, ky = random.split(random.PRNGKey(1), 3)
    w = random.normal(kw, (5,))
    xs = random.normal(kx, (8, 5))
    ys = random.normal(ky, (8,))
    per_example = kiln.jit(kiln.vmap(kiln.grad(loss), in_axes=(None, 0, 0)))
    grads = per_example(w, xs, ys)
    looped = np.stack([np.asarray(kiln.grad(loss)(w, xs[i], ys[i])) for i in range(8)])
    formula = 2 * (np.asarray(xs) @ np.asarray(w) - np.asarray(ys))[:, None] * np.asarray(xs)
    np.testing.assert_allclose(np.asarray(grads), looped, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(grads), formula, rtol=1e-5, atol=1e-6)
    norms = jnp.linalg.norm(grads, axis=1)
    print("per-example gradients:", grads.shape)
    print("their norms:", np.round(np.asarray(norms), 3))
    print("clipped mean gradient:",
          np.round(np.asarray(jnp.mean(grads / jnp.maximum(norms, 1.0)[:, None], axis=0)), 3))


if __name__ == "__main__":
    main()
