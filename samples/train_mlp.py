"""Train a small MLP classifier with kiln, the way a JAX user writes it, and plot its loss.

    python samples/train_mlp.py [--steps 300] [--out loss_curve.png]

The data are two interleaved spirals (made here, no download). The model is an MLP with tanh
layers and a softmax cross-entropy loss; `kiln.jit(kiln.value_and_grad(loss))` gives the loss
and its gradients in one compiled call, and `kiln.example_libraries.optimizers.adam` updates the
parameters, exactly as with JAX. The loss curve is written as a PNG (samples/png.py).
"""
import argparse
import os
import sys

import numpy as np

import kiln
import kiln.numpy as jnp
from kiln import random
from kiln.example_libraries import optimizers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from png import line_chart  # noqa: E402

SIZES = (2, 64, 64, 2)


def spirals(key, n=256):
    """Two spirals of `n` points each: (points f32[2n, 2], labels i32[2n])."""
    t = jnp.linspace(0.25, 3.0, n)
    noise = 0.05 * random.normal(key, (2, n, 2))
    arms = [jnp.stack([t * jnp.cos(2.5 * t + phase), t * jnp.sin(2.5 * t + phase)], axis=1)
            for phase in (0.0, jnp.pi)]
    points = jnp.concatenate([arms[0] + noise[0], arms[1] + noise[1]]) / 3.0
    labels = jnp.concatenate([jnp.zeros(n, jnp.int32), jnp.ones(n, jnp.int32)])
    return points, labels


def init_params(key, sizes=SIZES):
    keys = random.split(key, len(sizes) - 1)
    return [(random.normal(k, (m, n)) * jnp.sqrt(1.0 / m), jnp.zeros(n))
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def predict(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss(params, x, labels):
    logits = predict(params, x)
    return -jnp.mean(jnp.take_along_axis(kiln.nn.log_softmax(logits), labels[:, None], axis=1))


def accuracy(params, x, labels):
    return jnp.mean(jnp.argmax(predict(params, x), axis=1) == labels)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", default="loss_curve.png")
    args = parser.parse_args(argv)
    data_key, init_key = random.split(random.PRNGKey(0))
    x, labels = spirals(data_key)
    opt_init, opt_update, get_params = optimizers.adam(0.01)

    @kiln.jit
    def step(i, state, x, labels):
        value, grads = kiln.value_and_grad(loss)(get_params(state), x, labels)
        return value, opt_update(i, grads, state)

    state = opt_init(init_params(init_key))
    losses = []
    for i in range(args.steps):
        value, state = step(i, state, x, labels)
        losses.append(float(value))
    final = get_params(state)
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f} after {args.steps} steps; "
          f"accuracy {float(accuracy(final, x, labels)):.2f}")
    line_chart(args.out, losses)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
