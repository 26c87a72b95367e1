"""An MLP loss (784-512-512-10), for `kiln show`, `kiln compile` and the benchmarks.

    kiln show samples/mlp.py:loss \\
        --arg 'list[(f32[784,512],f32[512]),(f32[512,512],f32[512]),(f32[512,10],f32[10])]' \\
        --arg f32[128,784] --arg f32[128,10] --stage simplified

Run it (`python samples/mlp.py`) to evaluate the jitted loss on random parameters.
"""
import kiln
import kiln.numpy as jnp
from kiln import random

SIZES = (784, 512, 512, 10)


def loss(params, x, y):
    for W, b in params:                    # static pytree: unrolled at specialisation
        x = jnp.tanh(x @ W + b)
    return jnp.mean((x - y) ** 2)


def init_params(key, sizes=SIZES):
    """One (W, b) pair per layer, with 1/sqrt(fan_in) scaled normal weights."""
    keys = random.split(key, len(sizes) - 1)
    return [(random.normal(k, (m, n)) / jnp.sqrt(m), jnp.zeros(n))
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


if __name__ == "__main__":
    kx, ky, kp = random.split(random.PRNGKey(0), 3)
    params = init_params(kp)
    x = random.normal(kx, (128, SIZES[0]))
    y = random.normal(ky, (128, SIZES[-1]))
    print("loss:", kiln.jit(loss)(params, x, y))
