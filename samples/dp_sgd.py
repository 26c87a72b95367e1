"""Differentially private SGD, in the style of JAX's differentially_private_sgd example:
per-example gradients with `kiln.vmap(kiln.grad(...))`, each clipped to an l2 norm, summed,
noised with Gaussian noise scaled to the clipping norm, and averaged, on synthetic data.

    python samples/dp_sgd.py [--steps 200] [--batch 64] [--clip 1.0] [--noise 1.1]

The data are two classes of 2-D points on either side of a line, with label noise; the model
is a stax MLP (Dense, Tanh, Dense, LogSoftmax) trained with `optimizers.sgd`. One private
step is one `kiln.jit`-compiled function: vmap over the batch of the gradient of one
example's loss (each example as a batch of one, as the JAX example does), the clipping, the
noise from `kiln.random.normal`, and the update. The script prints the loss before and after,
the training accuracy, and the largest per-example gradient norm after clipping.
"""
import argparse

import numpy as np

import kiln
import kiln.numpy as jnp
from kiln import random
from kiln.example_libraries import optimizers, stax
from kiln.tree_util import tree_flatten, tree_unflatten

init_net, predict = stax.serial(stax.Dense(16), stax.Tanh, stax.Dense(2), stax.LogSoftmax)


def points(seed, n):
    """`n` points f32[n, 2] and one-hot labels f32[n, 2]."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    label = (x[:, 0] + 0.5 * x[:, 1] > 0.2) ^ (rng.random(n) < 0.05)
    return x, np.eye(2, dtype=np.float32)[label.astype(int)]


def loss(params, x, y):
    return -jnp.mean(jnp.sum(predict(params, x) * y, axis=-1))


def clipped_grad(params, l2_norm_clip, x, y):
    """One example's gradient, scaled down to the l2 norm `l2_norm_clip` if above it."""
    grads = kiln.grad(loss)(params, x[None], y[None])
    leaves, tree = tree_flatten(grads)
    norm = jnp.sqrt(sum(jnp.sum(g ** 2) for g in leaves))
    divisor = jnp.maximum(norm / l2_norm_clip, 1.0)
    return tree_unflatten(tree, [g / divisor for g in leaves])


def private_grad(params, x, y, rng, l2_norm_clip, noise_multiplier):
    """The noised mean of the clipped per-example gradients."""
    per_example = kiln.vmap(clipped_grad, in_axes=(None, None, 0, 0))(params, l2_norm_clip, x, y)
    leaves, tree = tree_flatten(per_example)
    keys = random.split(rng, len(leaves))
    noised = [(g.sum(0) + l2_norm_clip * noise_multiplier * random.normal(k, g.shape[1:]))
              / x.shape[0] for k, g in zip(keys, leaves)]
    return tree_unflatten(tree, noised)


def per_example_norms(params, l2_norm_clip, x, y):
    """The l2 norm of every example's clipped gradient."""
    grads = kiln.vmap(clipped_grad, in_axes=(None, None, 0, 0))(params, l2_norm_clip, x, y)
    return jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1)
                        for g in tree_flatten(grads)[0]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--noise", type=float, default=1.1)
    parser.add_argument("--lr", type=float, default=0.25)
    args = parser.parse_args(argv)

    x, y = points(0, 1024)
    key = random.key(0)
    key, init_key = random.split(key)
    _, params = init_net(init_key, (-1, 2))
    opt_init, opt_update, get_params = optimizers.sgd(args.lr)
    state = opt_init(params)

    @kiln.jit
    def private_step(i, state, rng, xb, yb):
        grads = private_grad(get_params(state), xb, yb, rng, args.clip, args.noise)
        return opt_update(i, grads, state)

    total = kiln.jit(loss)
    before = float(total(params, x, y))
    rng = np.random.default_rng(1)
    for i in range(args.steps):
        key, step_key = random.split(key)
        idx = rng.integers(0, len(x), args.batch)
        state = private_step(i, state, step_key, x[idx], y[idx])
    params = get_params(state)
    after = float(total(params, x, y))
    accuracy = np.mean(np.argmax(np.asarray(predict(params, x)), 1) == np.argmax(y, 1))
    norms = np.asarray(kiln.jit(per_example_norms)(params, args.clip, x[:256], y[:256]))
    print(f"loss {before:.4f} -> {after:.4f} after {args.steps} private steps")
    print(f"train accuracy {accuracy:.3f}")
    print(f"largest clipped per-example gradient norm {norms.max():.6f} (clip {args.clip})")


if __name__ == "__main__":
    main()
