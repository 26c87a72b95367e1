"""Train a small convolutional network with `kiln.example_libraries.stax`, as JAX's MNIST
example does, on a synthetic MNIST-like set (made here, no download).

    python samples/mnist_cnn.py [--steps 200] [--examples 1024] [--batch 128]

The images are 16x16 grey "digits": each of the 10 classes is a fixed random stroke pattern,
drawn at a random shift with noise, so a classifier must learn shapes that move. The network
is stax's serial(Conv, Relu, MaxPool, Conv, Relu, MaxPool, Flatten, Dense, LogSoftmax), the
update `kiln.jit` of adam's step over `kiln.grad` of the cross-entropy: convolutions, max
pooling and their gradients all run as compiled native code.
"""
import argparse
import time

import numpy as np

import kiln
import kiln.numpy as jnp
from kiln import random
from kiln.example_libraries import optimizers, stax

SIZE, CLASSES = 16, 10


def digits(seed, n):
    """`n` images f32[n, SIZE, SIZE, 1] and labels i32[n]."""
    rng = np.random.default_rng(seed)
    strokes = np.random.default_rng(1234).random((CLASSES, 10, 10)) > 0.6   # class templates
    labels = rng.integers(0, CLASSES, n)
    images = 0.3 * rng.standard_normal((n, SIZE, SIZE)).astype(np.float32)
    for k, (label, dy, dx) in enumerate(zip(labels, *rng.integers(0, SIZE - 10 + 1, (2, n)))):
        images[k, dy:dy + 10, dx:dx + 10] += strokes[label]
    return images[..., None], labels.astype(np.int32)


init_net, apply_net = stax.serial(
    stax.Conv(8, (3, 3), padding="SAME"), stax.Relu, stax.MaxPool((2, 2), (2, 2)),
    stax.Conv(16, (3, 3), padding="SAME"), stax.Relu, stax.MaxPool((2, 2), (2, 2)),
    stax.Flatten, stax.Dense(CLASSES), stax.LogSoftmax)


def loss(params, images, labels):
    logp = apply_net(params, images)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def accuracy(params, images, labels):
    return jnp.mean(jnp.argmax(apply_net(params, images), axis=1) == labels)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--examples", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()

    images, labels = digits(0, args.examples)
    _, params = init_net(random.PRNGKey(0), (args.batch, SIZE, SIZE, 1))
    opt_init, opt_update, get_params = optimizers.adam(3e-3)

    @kiln.jit
    def update(i, opt_state, x, y):
        value, grads = kiln.value_and_grad(loss)(get_params(opt_state), x, y)
        return opt_update(i, grads, opt_state), value

    state = opt_init(params)
    batches = args.examples // args.batch
    start, first = time.perf_counter(), None
    for i in range(args.steps):
        b = i % batches
        sl = slice(b * args.batch, (b + 1) * args.batch)
        state, value = update(i, state, images[sl], labels[sl])
        first = float(value) if first is None else first
    seconds = time.perf_counter() - start
    acc = float(kiln.jit(accuracy)(get_params(state), images, labels))
    print(f"loss {first:.3f} -> {float(value):.3f} after {args.steps} steps "
          f"({seconds:.1f} s, first step compiles)")
    print(f"train accuracy {acc:.3f} on {args.examples} images")


if __name__ == "__main__":
    main()
