"""Batched matrix products in several memory layouts, kiln.jit (the LLVM backend) beside NumPy
and jax.jit: 64 float32 products of 256^3 (2.1 GFLOP) with the batch first (the reference
layout), on the lhs's axis 1, last in one or both operands (`vmap` with `in_axes=(2, 0)`,
`(2, 2)`), and a product whose lhs free axes lie on both sides of its contraction
(`einsum('ikb,kn->ibn')`). kiln's kernels read every one of these in place through the
operands' strides (lower_linalg.plan_blas), `vmap` with `in_axes=(2, None)` through the
transpose vmap's rule makes (lower_linalg.read_transposes). Two more rows: 32 complex64
products of 128^3 (0.54 GFLOP) with the batch last in both operands
(copied once for BLAS's cgemm), and, on the PJRT backend (XLA's CPU plug-in, kiln's FFI
handlers), `einsum('aib,abn->in')` of 32 x 512 x 16 by 32 x 16 x 512 (rows between the two
contracting dimensions: the handler sums over one pair; 0.27 GFLOP). NumPy: `np.matmul` on
the transposed views, or `np.einsum`.
"""
import numpy as np

from harness import Case


def cases(jax=None):
    import kiln
    import kiln.numpy as knp

    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape, np.float32)
    first, axis1, last = f32(64, 256, 256), f32(256, 64, 256), f32(256, 256, 64)
    rhs_first, rhs_last, w = f32(64, 256, 256), f32(256, 256, 64), f32(256, 256)
    rows = [  # name, function of (jnp, vmap), operands, NumPy
        ("batch first", lambda jnp, vmap: lambda a, b: a @ b, (first, rhs_first),
         lambda: first @ rhs_first),
        ("vmap, batch on lhs axis 1", lambda jnp, vmap: vmap(lambda a, b: a @ b, in_axes=(1, 0)),
         (axis1, rhs_first), lambda: axis1.transpose(1, 0, 2) @ rhs_first),
        ("vmap, batch last in the lhs", lambda jnp, vmap: vmap(lambda a, b: a @ b,
                                                                 in_axes=(2, 0)),
         (last, rhs_first), lambda: last.transpose(2, 0, 1) @ rhs_first),
        ("vmap, batch last in both", lambda jnp, vmap: vmap(lambda a, b: a @ b, in_axes=(2, 2)),
         (last, rhs_last), lambda: last.transpose(2, 0, 1) @ rhs_last.transpose(2, 0, 1)),
        ("vmap, batch last in the lhs, rhs unbatched",
         lambda jnp, vmap: vmap(lambda a, b: a @ b, in_axes=(2, None)), (last, w),
         lambda: last.transpose(2, 0, 1) @ w),
        ("einsum ikb,kn->ibn", lambda jnp, vmap: lambda a, b: jnp.einsum("ikb,kn->ibn", a, b),
         (last, w), lambda: np.einsum("ikb,kn->ibn", last, w)),
    ]
    c64 = (rng.standard_normal((128, 128, 32)) + 1j * rng.standard_normal((128, 128, 32)))
    c64, c64_rhs = c64.astype(np.complex64), c64.transpose(1, 0, 2).astype(np.complex64)
    rows.append(("c64 128^3 x 32, vmap, batch last in both",
                 lambda jnp, vmap: vmap(lambda a, b: a @ b, in_axes=(2, 2)), (c64, c64_rhs),
                 lambda: c64.transpose(2, 0, 1) @ c64_rhs.transpose(2, 0, 1)))
    split, split_rhs = f32(32, 512, 16), f32(32, 16, 512)
    rows.append(("pjrt, einsum aib,abn->in (32 x 512 x 16 x 512)",
                 lambda jnp, vmap: lambda a, b: jnp.einsum("aib,abn->in", a, b),
                 (split, split_rhs), lambda: np.einsum("aib,abn->in", split, split_rhs)))
    try:
        device = kiln.devices("pjrt")[0]
    except RuntimeError as e:
        print(f"  layouts, pjrt row: skipped ({e})")
        rows.pop()
    out = []
    for name, make, args, numpy in rows:
        pjrt = name.startswith("pjrt")
        k = kiln.jit(make(knp, kiln.vmap), backend="pjrt" if pjrt else None)
        kargs = [kiln.device_put(x, device) if pjrt else knp.asarray(x) for x in args]
        np.testing.assert_allclose(np.asarray(k(*kargs)), numpy(), rtol=2e-3, atol=2e-3)
        j = None
        if jax:
            jf = jax.jit(make(jax.numpy, jax.vmap))
            jargs = [jax.device_put(x) for x in args]
            j = (lambda jf=jf, jargs=jargs: jf(*jargs))
        title = name if name.startswith(("c64", "pjrt")) else f"64 x f32 256^3, {name}"
        out.append(Case("layouts", title, lambda k=k, a=kargs: k(*a), numpy, j,
                        note="0.27 GFLOP" if pjrt else "0.54 GFLOP" if name.startswith("c64")
                        else "2.1 GFLOP"))
    return out
