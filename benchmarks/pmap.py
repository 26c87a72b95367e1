"""pmap (issue 17): kiln's replicas beside JAX's pmap on the same number of host devices.

`run.py` starts both with 8 CPU devices (KILN_NUM_CPU_DEVICES, XLA's host device count flag)
before either is imported.

- per-call overhead: 8 replicas of `x + 1` on 8 floats each;
- psum across 8 replicas of 8 floats (the collective's exchange and its barriers);
- compute-bound: a chain of four 1024x1024 float32 matmuls per replica on 2 devices, beside
  the same two chains on 1 device (one pmap call per chain), and JAX's pmap on 2 devices.
"""
import numpy as np

from harness import Case

CHAIN = 4
N = 1024


def chain(jnp):
    def f(a, b):
        for _ in range(CHAIN):
            a = jnp.tanh(a @ b)
        return a
    return f


def increment(x):
    return x + 1


def cases(jax=None):
    import kiln
    from kiln import lax

    def total(x):
        return lax.psum(x, "i")

    small = np.ones((8, 8), np.float32)
    k_inc, k_sum = kiln.pmap(increment), kiln.pmap(total, axis_name="i")
    j_inc = j_sum = j_chain2 = None
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((2, N, N)) / np.sqrt(N)).astype(np.float32)
    b = (rng.standard_normal((2, N, N)) / np.sqrt(N)).astype(np.float32)
    if jax:
        fi, fs = jax.pmap(increment), jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")
        fc = jax.pmap(chain(jax.numpy))
        j_inc = lambda: fi(small)  # noqa: E731
        j_sum = lambda: fs(small)  # noqa: E731
        j_chain2 = lambda: fc(a, b)  # noqa: E731
    import kiln.numpy as knp
    k_chain = kiln.pmap(chain(knp))
    k_chain2 = lambda: k_chain(a, b)  # noqa: E731

    def k_chain1():   # the same two chains on one device
        return [k_chain(a[i:i + 1], b[i:i + 1]) for i in range(2)]
    return [
        Case("pmap", "pmap x+1, 8 replicas x 8 floats", lambda: k_inc(small), None, j_inc,
             note="per-call overhead"),
        Case("pmap", "pmap psum, 8 replicas x 8 floats", lambda: k_sum(small), None, j_sum),
        Case("pmap", f"{CHAIN} matmuls 1024^2 f32 per replica, 2 devices", k_chain2, None,
             j_chain2),
        Case("pmap", f"{CHAIN} matmuls 1024^2 f32 x2, 1 device", k_chain1, None, None,
             note="the 2-device row's work on one device"),
    ]
