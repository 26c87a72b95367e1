"""Batching workloads: per-example gradients with `jit(vmap(grad(loss)))`, beside JAX and a
hand-written NumPy version.

The model is the 784-512-512-10 tanh MLP at batch 128. Per-example gradients are one weight
gradient per example: 128 x (784x512 + 512x512 + 512x10) floats, about 340 MB of float32
output per call, so the workload is bound by writing that memory (each gradient is an outer
product: 2 flops per output element, about 85 MFLOP in all). At this machine's ~37 GB/s
write bandwidth that is about 9 ms; JAX spends most of its ~195 ms in page faults from a
fresh 340 MB allocation per call. The NumPy column is the same computation written with
`einsum` by hand (the issue's target to aim for).
"""
import numpy as np

from harness import Case

SIZES = (784, 512, 512, 10)
BATCH = 128


def make_loss(jnp):
    """The MLP's mean squared error, written against `jnp` (kiln's or JAX's NumPy)."""
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = params[-1]
        return jnp.mean((h @ w + b - y) ** 2)
    return loss


def per_example_grads_numpy(params, x, y):
    """Per-example gradients of the mean squared error by hand, batched with einsum."""
    hs = [x]
    for w, b in params[:-1]:
        hs.append(np.tanh(hs[-1] @ w + b))
    w, b = params[-1]
    err = hs[-1] @ w + b - y
    delta = err * np.float32(2 / err.shape[-1])
    grads = []
    for i in range(len(params) - 1, -1, -1):
        w, _ = params[i]
        grads.append((np.einsum("bi,bj->bij", hs[i], delta), delta))
        if i:
            delta = (delta @ w.T) * (1 - hs[i] * hs[i])
    return grads[::-1]


def output_bytes():
    n = sum(a * b + b for a, b in zip(SIZES[:-1], SIZES[1:]))
    return BATCH * n * 4


def _data():
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((a, b), np.float32) * np.float32(a ** -0.5),
               np.zeros(b, np.float32)) for a, b in zip(SIZES[:-1], SIZES[1:])]
    x = rng.standard_normal((BATCH, SIZES[0]), np.float32)
    y = rng.standard_normal((BATCH, SIZES[-1]), np.float32)
    return params, x, y


def cases(jax=None):
    import kiln
    import kiln.numpy as knp
    from kiln.tree_util import tree_map
    from autodiff import _check

    params, x, y = _data()
    kp, kx, ky = tree_map(knp.asarray, (params, x, y))
    want = per_example_grads_numpy(params, x, y)
    loss_kiln = make_loss(knp)
    k_jit = kiln.jit(kiln.vmap(kiln.grad(loss_kiln), in_axes=(None, 0, 0)))
    k_eager = kiln.vmap(kiln.grad(loss_kiln), in_axes=(None, 0, 0))
    _check(k_jit(kp, kx, ky), want)
    j_jit = None
    if jax:
        jp, jx, jy = jax.tree_util.tree_map(jax.numpy.asarray, (params, x, y))
        jf = jax.jit(jax.vmap(jax.grad(make_loss(jax.numpy)), in_axes=(None, 0, 0)))
        _check(jf(jp, jx, jy), want)
        j_jit = lambda: jf(jp, jx, jy)                                    # noqa: E731
    mb = output_bytes() / 1e6
    name = f"per-example grads, MLP {'-'.join(map(str, SIZES))}, batch {BATCH}"
    return [
        Case("vmap", f"jit(vmap(grad)) {name}", lambda: k_jit(kp, kx, ky),
             lambda: per_example_grads_numpy(params, x, y), j_jit,
             note=f"{mb:.0f} MB of gradients per call; NumPy: einsum by hand"),
        Case("vmap", f"vmap(grad) {name}, no jit", lambda: k_eager(kp, kx, ky),
             lambda: per_example_grads_numpy(params, x, y), None,
             note="kiln: batched derivative compiled once, reference backend"),
    ]
