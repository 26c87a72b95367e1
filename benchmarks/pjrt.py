"""The pjrt backend (issue 19): kiln.jit(backend="pjrt") beside jax.jit on the CPU, both
running XLA's CPU compiler, kiln through the xla-cpu-pjrt plug-in.

Rows: dispatch of a small function on arguments already on the device (the call's overhead),
the MLP SGD step, a 1024^2 float32 matmul, a batch of 64 256^3 float32 products whose batch
is the lhs's second axis (`vmap` with `in_axes=(1, 0)`), a 512^3 complex64 matmul,
`x*x + x*2.0` on 5000x5000 float32 (run time,
where both run the same compiler, so the ratio is what kiln adds around it), and the time from
a new Python function to its first result for the MLP step and for a small elementwise
function (trace, lowering, XLA's compile and one run, for both; kiln's disk cache is off for
those rows, so that a later run of the suite, whose functions get the same constants, compiles
too). Skipped with the reason when no PJRT
plug-in is installed.
"""
import os
from unittest import mock

import numpy as np

from harness import Case
from cpu import Fresh, sgd_step
from vmap import _data as mlp_data


def cases(jax=None):
    import kiln
    import kiln.numpy as knp
    from kiln.tree_util import tree_map
    try:
        device = kiln.devices("pjrt")[0]
    except RuntimeError as e:
        print(f"  pjrt: skipped ({e})")
        return []

    def kjit(f):
        return kiln.jit(f, backend="pjrt")

    def put(x):
        return kiln.device_put(x, device)

    rng = np.random.default_rng(0)
    small = [rng.standard_normal(16, np.float32) for _ in range(2)]
    big = rng.standard_normal((5000, 5000), np.float32)
    a1024 = rng.standard_normal((1024, 1024), np.float32)
    b1024 = rng.standard_normal((1024, 1024), np.float32)
    lhs_b1 = rng.standard_normal((256, 64, 256), np.float32)    # the batch on axis 1
    rhs_b0 = rng.standard_normal((64, 256, 256), np.float32)
    c512 = [(rng.standard_normal((512, 512)) + 1j * rng.standard_normal((512, 512)))
            .astype(np.complex64) for _ in range(2)]
    params, mx, my = mlp_data()

    ks, kbig, ka, kb, kx, ky = map(put, (small, big, a1024, b1024, mx, my))
    kl, kr, kc = put(lhs_b1), put(rhs_b0), [put(c) for c in c512]
    kp = tree_map(put, params)
    k_small = kjit(lambda x, y: x * y + 1.0)
    k_step = kjit(sgd_step(kiln, knp))
    k_matmul = kjit(lambda a, b: a @ b)
    k_fused = kjit(lambda x: x * x + x * 2.0)
    k_batched = kjit(kiln.vmap(lambda a, b: a @ b, in_axes=(1, 0)))
    np.testing.assert_allclose(np.asarray(k_matmul(ka, kb)), a1024 @ b1024, rtol=1e-3,
                               atol=1e-3)
    fresh = Fresh()

    def k_step_compile():
        return kjit(sgd_step(kiln, knp, lr=0.01 + fresh()))(kp, kx, ky)

    def k_small_compile():
        c = fresh()
        return kjit(lambda x: knp.tanh(x) * 2.0 + x + c)(ks[0])

    j = {}
    if jax:
        jnp = jax.numpy
        js, jbig, ja, jb, jx, jy = map(jax.device_put, (small, big, a1024, b1024, mx, my))
        jl, jr, jc = jax.device_put(lhs_b1), jax.device_put(rhs_b0), jax.device_put(c512)
        jp = jax.tree_util.tree_map(jax.device_put, params)
        f_small = jax.jit(lambda x, y: x * y + 1.0)
        f_step = jax.jit(sgd_step(jax, jnp))
        f_matmul = jax.jit(lambda a, b: a @ b)
        f_fused = jax.jit(lambda x: x * x + x * 2.0)
        f_batched = jax.jit(jax.vmap(lambda a, b: a @ b, in_axes=(1, 0)))
        j = dict(
            small=lambda: f_small(*js), step=lambda: f_step(jp, jx, jy),
            matmul=lambda: f_matmul(ja, jb), fused=lambda: f_fused(jbig),
            batched=lambda: f_batched(jl, jr), complex=lambda: f_matmul(*jc),
            step_compile=lambda: jax.jit(sgd_step(jax, jnp, lr=0.01 + fresh()))(jp, jx, jy),
            small_compile=lambda: jax.jit(lambda x, c=fresh(): jnp.tanh(x) * 2.0 + x + c)(
                js[0]))
    return [
        Case("pjrt", "dispatch x*y+1 f32[16]", lambda: k_small(*ks), jax=j.get("small"),
             note="arguments on the device; call + block_until_ready"),
        Case("pjrt", "MLP SGD step 784-512-512-10", lambda: k_step(kp, kx, ky),
             jax=j.get("step")),
        Case("pjrt", "matmul f32 1024^3", lambda: k_matmul(ka, kb), jax=j.get("matmul")),
        Case("pjrt", "vmap matmul 64 x f32 256^3, batch on lhs axis 1",
             lambda: k_batched(kl, kr), jax=j.get("batched")),
        Case("pjrt", "matmul c64 512^3", lambda: k_matmul(*kc), jax=j.get("complex")),
        Case("pjrt", "x*x + x*2.0 f32[5000,5000]", lambda: k_fused(kbig), jax=j.get("fused")),
        Case("pjrt", "compile MLP step (fn -> first result)", k_step_compile,
             jax=j.get("step_compile"), note="trace + lower + XLA compile + one run",
             context=lambda: mock.patch.dict(os.environ, KILN_CACHE_DIR="0")),
        Case("pjrt", "first call of a new small jit (compile)", k_small_compile,
             jax=j.get("small_compile"), note="trace + lower + XLA compile + one run",
             context=lambda: mock.patch.dict(os.environ, KILN_CACHE_DIR="0")),
    ]

