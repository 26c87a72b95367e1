"""pmap (issue 17): kiln's replicas beside JAX's pmap on the same number of host devices.

`run.py` starts both with 8 CPU devices (KILN_NUM_CPU_DEVICES, XLA's host device count flag)
before either is imported.

- per-call overhead: 8 replicas of `x + 1` on 8 floats each;
- psum across 8 replicas of 8 floats (the collective's exchange and its barriers);
- compute-bound: a chain of four 1024x1024 float32 matmuls per replica on 2 devices, beside
  the same two chains on 1 device (one pmap call per chain), and JAX's pmap on 2 devices;
  once as the machine comes (a device's matmuls use every core), and once with one core per
  device (pmap_cores.py, in a fresh process), where 2 devices should take half the time.
"""
import json
import os
import subprocess
import sys

import numpy as np

from harness import Case, Measured

CHAIN = 4
N = 1024


def chain(jnp):
    def f(a, b):
        for _ in range(CHAIN):
            a = jnp.tanh(a @ b)
        return a
    return f


def chain_inputs():
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((2, N, N)) / np.sqrt(N)).astype(np.float32)
    b = (rng.standard_normal((2, N, N)) / np.sqrt(N)).astype(np.float32)
    return a, b


def one_core_per_device():
    """pmap_cores.py's seconds, run in a fresh process with one thread per device."""
    here = os.path.dirname(os.path.abspath(__file__))
    from pmap_cores import ENVIRONMENT
    done = subprocess.run([sys.executable, os.path.join(here, "pmap_cores.py")],
                          env={**os.environ, **ENVIRONMENT}, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


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
    a, b = chain_inputs()
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
    ] + _one_core_cases()


def _one_core_cases():
    t = one_core_per_device()
    jax2, jax1 = t.get("jax 2 devices"), t.get("jax 1 device")
    speedup = t["kiln 1 device"] / t["kiln 2 devices"]
    return [
        Case("pmap", f"{CHAIN} matmuls 1024^2 f32 per replica, 2 devices, 1 core each",
             Measured(t["kiln 2 devices"]), None, jax2 and Measured(jax2),
             note=f"{speedup:.2f}x faster than 1 device; fresh process, KILN_NUM_THREADS=1"),
        Case("pmap", f"{CHAIN} matmuls 1024^2 f32 x2, 1 device, 1 core",
             Measured(t["kiln 1 device"]), None, jax1 and Measured(jax1),
             note="the row above's work on one device"),
    ]
