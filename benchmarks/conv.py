"""Convolutional workloads: a ResNet basic block and a stax CNN training step, kiln beside JAX.

The block is NHWC 32x32x32x64: two 3x3 convolutions ("SAME", 64 -> 64 features), a relu
between them, the residual and a final relu; 2 x 2.4 GFLOP forward, 6 x 2.4 GFLOP for
`grad` of its sum (each convolution's input and kernel gradients are convolutions too). The
CNN step is samples/mnist_cnn.py's network (two convolutions with max pooling, a dense layer)
on a batch of 128 16x16 images, one adam update under `jit`. NumPy has no convolution, so
those columns are empty.
"""
import functools
import os
import sys

import numpy as np

from harness import Case

DN = ("NHWC", "HWIO", "NHWC")
BLOCK_GFLOP = 2 * 32 * 32 * 32 * 9 * 64 * 64 / 1e9   # one convolution


def block(lax, np_, x, w1, w2):
    conv = functools.partial(lax.conv_general_dilated, window_strides=(1, 1), padding="SAME",
                             dimension_numbers=DN)
    h = np_.maximum(conv(x, w1), 0)
    return np_.maximum(conv(h, w2) + x, 0)


def _block_cases(jax):
    import kiln
    import kiln.numpy as knp
    from kiln import lax as klax
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 32, 32, 64), np.float32)
    w1, w2 = (rng.standard_normal((3, 3, 64, 64), np.float32) * 0.05 for _ in range(2))
    k_fwd = kiln.jit(lambda x, a, b: block(klax, knp, x, a, b))
    k_bwd = kiln.jit(kiln.grad(lambda x, a, b: knp.sum(block(klax, knp, x, a, b)),
                               argnums=(0, 1, 2)))
    j_fwd = j_bwd = None
    if jax:
        jnp, jlax = jax.numpy, jax.lax
        f = jax.jit(lambda x, a, b: block(jlax, jnp, x, a, b))
        g = jax.jit(jax.grad(lambda x, a, b: jnp.sum(block(jlax, jnp, x, a, b)),
                             argnums=(0, 1, 2)))
        np.testing.assert_allclose(np.asarray(k_fwd(x, w1, w2)), np.asarray(f(x, w1, w2)),
                                   rtol=1e-3, atol=1e-3)
        j_fwd, j_bwd = (lambda: f(x, w1, w2)), (lambda: g(x, w1, w2))
    name = "ResNet basic block NHWC 32x32x32x64"
    return [
        Case("conv", f"{name}: forward", lambda: k_fwd(x, w1, w2), None, j_fwd,
             note=f"{2 * BLOCK_GFLOP:.1f} GFLOP"),
        Case("conv", f"{name}: grad (forward + backward)", lambda: k_bwd(x, w1, w2), None,
             j_bwd, note=f"{6 * BLOCK_GFLOP:.1f} GFLOP"),
    ]


def _cnn_step(lib, stax, optimizers, jit, value_and_grad, jnp):
    from mnist_cnn import SIZE, CLASSES, digits
    init, apply = stax.serial(
        stax.Conv(8, (3, 3), padding="SAME"), stax.Relu, stax.MaxPool((2, 2), (2, 2)),
        stax.Conv(16, (3, 3), padding="SAME"), stax.Relu, stax.MaxPool((2, 2), (2, 2)),
        stax.Flatten, stax.Dense(CLASSES), stax.LogSoftmax)
    images, labels = digits(0, 128)
    _, params = init(lib.random.PRNGKey(0), (128, SIZE, SIZE, 1))
    opt_init, opt_update, get_params = optimizers.adam(3e-3)

    def loss(p, x, y):
        return -jnp.mean(jnp.take_along_axis(apply(p, x), y[:, None], axis=1))

    @jit
    def update(opt_state, x, y):
        _, grads = value_and_grad(loss)(get_params(opt_state), x, y)
        return opt_update(0, grads, opt_state)
    state = opt_init(params)
    return lambda: update(state, images, labels)


def cases(jax=None):
    import kiln
    import kiln.numpy as knp
    from kiln.example_libraries import optimizers, stax
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "samples"))
    k_step = _cnn_step(kiln, stax, optimizers, kiln.jit, kiln.value_and_grad, knp)
    j_step = None
    if jax:
        from jax.example_libraries import optimizers as jopt, stax as jstax
        j_step = _cnn_step(jax, jstax, jopt, jax.jit, jax.value_and_grad, jax.numpy)
    return _block_cases(jax) + [
        Case("conv", "stax CNN adam step, batch 128 of 16x16", k_step, None, j_step,
             note="samples/mnist_cnn.py's network"),
    ]
