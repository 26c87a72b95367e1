"""Fast where users live (issue 16): small and medium products inside deep models and loops,
and a busy machine. kiln beside JAX, both under `jit`.

- MLP 784-512-512-10 batch-128 SGD step while two other processes spin on the machine's
  cores. The competitors are started by the row itself (`busy`) and stopped after it; each
  is bounded in time (it exits by itself after `BUSY_LIMIT` seconds) so an interrupted
  benchmark leaves nothing running.
- deep narrow MLP (64 wide, batch 8, contiguous parameters) `jit(grad)` at depths 4, 16, 64
  and 128: the run time and the first call (specialise, compile, run).
- RNN as `lax.scan` over T=200 steps, batch 8, `jit(grad)`, widths 16, 64 and 256.
"""
import contextlib
import subprocess
import sys
import time

import numpy as np

from harness import Case
from cpu import Fresh, deep_loss, sgd_step
from vmap import _data as mlp_data

DEPTHS = (4, 16, 64, 128)
WIDTHS = (16, 64, 256)
DEEP_WIDTH, DEEP_BATCH = 64, 8
STEPS, RNN_BATCH = 200, 8
BUSY_LIMIT = 120.0   # seconds a competitor spins at most
SETTLE = 1.0         # seconds between starting the competitors and measuring
SPIN = f"import time\nend = time.monotonic() + {BUSY_LIMIT}\nwhile time.monotonic() < end: pass\n"


@contextlib.contextmanager
def busy(processes=2):
    """`processes` competing processes spinning on the cores while the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(processes)]
    try:
        time.sleep(SETTLE)   # the competitors start and take the cores
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def deep_params(jnp, depth):
    rng = np.random.default_rng(depth)
    ws = rng.standard_normal((depth, DEEP_WIDTH, DEEP_WIDTH), np.float32) / np.sqrt(DEEP_WIDTH)
    bs = rng.standard_normal((depth, DEEP_WIDTH), np.float32) * 0.1
    x = rng.standard_normal((DEEP_BATCH, DEEP_WIDTH), np.float32)
    return [(jnp.asarray(w), jnp.asarray(b)) for w, b in zip(ws, bs)], jnp.asarray(x)


def rnn_loss(jnp, lax):
    def loss(params, xs):
        w, u, b = params

        def step(h, x):
            h = jnp.tanh(h @ w + x @ u + b)
            return h, h
        h, hs = lax.scan(step, jnp.zeros((xs.shape[1], w.shape[0]), xs.dtype), xs)
        return jnp.sum(hs ** 2)
    return loss


def rnn_data(jnp, width):
    rng = np.random.default_rng(width)
    w = rng.standard_normal((width, width), np.float32) / np.sqrt(width)
    u = rng.standard_normal((width, width), np.float32) / np.sqrt(width)
    b = rng.standard_normal(width, np.float32) * 0.1
    xs = rng.standard_normal((STEPS, RNN_BATCH, width), np.float32)
    return tuple(map(jnp.asarray, (w, u, b))), jnp.asarray(xs)


def cases(jax=None):
    import kiln
    import kiln.numpy as knp
    from kiln import lax as klax
    from kiln.tree_util import tree_map

    def kjit(f):
        return kiln.jit(f, backend="llvm")

    mlp_params, mx, my = mlp_data()
    kp = tree_map(knp.asarray, mlp_params)
    k_step = kjit(sgd_step(kiln, knp))
    j_step = None
    if jax:
        jp = jax.tree_util.tree_map(jax.numpy.asarray, mlp_params)
        f_step = jax.jit(sgd_step(jax, jax.numpy))
        j_step = lambda: f_step(jp, mx, my)  # noqa: E731
    rows = [Case("small", "MLP SGD step, 2 busy processes", lambda: k_step(kp, mx, my), None,
                 j_step, note="two competitors spin on the 2 cores", context=busy)]

    fresh = Fresh()
    for depth in DEPTHS:
        kparams, kx = deep_params(knp, depth)
        k_deep = kjit(kiln.grad(deep_loss(knp)))
        j_deep = j_first = None
        if jax:
            jparams, jx = deep_params(jax.numpy, depth)
            f_deep = jax.jit(jax.grad(deep_loss(jax.numpy)))
            j_deep = lambda f=f_deep, p=jparams, x=jx: f(p, x)  # noqa: E731
            j_first = lambda p=jparams, x=jx: jax.jit(jax.grad(deep_loss(jax.numpy)))(p, x)  # noqa: E731

        def k_first(p=kparams, x=kx):
            c = fresh()
            return kjit(kiln.grad(lambda p, x: deep_loss(knp)(p, x) + c))(p, x)
        rows.append(Case("small", f"jit(grad) deep MLP 64x{depth} b8", lambda f=k_deep, p=kparams,
                         x=kx: f(p, x), None, j_deep))
        rows.append(Case("small", f"deep MLP 64x{depth} b8: first call (compile)", k_first, None,
                         j_first, note="a fresh jit each call, run included"))

    for width in WIDTHS:
        kparams, kxs = rnn_data(knp, width)
        k_rnn = kjit(kiln.grad(rnn_loss(knp, klax)))
        j_rnn = None
        if jax:
            jparams, jxs = rnn_data(jax.numpy, width)
            f_rnn = jax.jit(jax.grad(rnn_loss(jax.numpy, jax.lax)))
            j_rnn = lambda f=f_rnn, p=jparams, x=jxs: f(p, x)  # noqa: E731
        rows.append(Case("small", f"jit(grad) RNN scan T=200 b8 width {width}",
                         lambda f=k_rnn, p=kparams, x=kxs: f(p, x), None, j_rnn))
    return rows
