"""Functions compiled ahead of time by `make aot-sample` (samples/aot_c/README.md) and called
from C by main.c: a small MLP's forward pass (a matmul through BLAS, tanh) and a loop whose
trip count depends on the values (a Python `while` on a traced value)."""
import kiln.numpy as jnp


def predict(params, x):
    """A two-layer perceptron: tanh hidden layer, linear output."""
    (w1, b1), (w2, b2) = params
    hidden = jnp.tanh(x @ w1 + b1)
    return hidden @ w2 + b2


def collatz_steps(n):
    """How many Collatz steps take each element of `n` to 1 (a data-dependent `while`)."""
    steps = jnp.zeros_like(n)
    while jnp.any(n != 1):
        done = n == 1
        n = jnp.where(done, n, jnp.where(n % 2 == 0, n // 2, 3 * n + 1))
        steps = steps + jnp.where(done, 0, 1)
    return steps
