"""Batched matrix products in several memory layouts, kiln.jit (the LLVM backend) beside NumPy
and jax.jit: 64 float32 products of 256^3 (2.1 GFLOP) with the batch first (the reference
layout), on the lhs's axis 1, last in one or both operands (`vmap` with `in_axes=(2, 0)`,
`(2, 2)`), and a product whose lhs free axes lie on both sides of its contraction
(`einsum('ikb,kn->ibn')`). kiln's kernels read every one of these in place through the
operands' strides (lower_linalg.plan_blas); `vmap` with `in_axes=(2, None)` moves the batch
to the front first (one transposed copy of the lhs). NumPy: `np.matmul` on the transposed
views, or `np.einsum`.
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
    out = []
    for name, make, args, numpy in rows:
        k = kiln.jit(make(knp, kiln.vmap))
        kargs = [knp.asarray(x) for x in args]
        np.testing.assert_allclose(np.asarray(k(*kargs)), numpy(), rtol=2e-3, atol=2e-3)
        j = None
        if jax:
            jf = jax.jit(make(jax.numpy, jax.vmap))
            jargs = [jax.device_put(x) for x in args]
            j = (lambda jf=jf, jargs=jargs: jf(*jargs))
        out.append(Case("layouts", f"64 x f32 256^3, {name}", lambda k=k, a=kargs: k(*a), numpy,
                        j, note="2.1 GFLOP"))
    return out
