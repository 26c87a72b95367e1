"""shard_map with `unreduced` and `reduced` in its specs, against JAX 0.10.2 run in a
subprocess (tests/jax_programs.py): an argument whose in_spec is unreduced or reduced has
that type in the body (`f32[]{U:i}`, `f32[4]{R:i}`), and summing an unreduced one over its
axes gives its value; `pcast(x, a, to="unreduced")` types a partial result so, and a result
whose out_spec is unreduced is the sum of the devices' values, typed unreduced; reshard,
`jit` and `grad` go through it with JAX's values."""
from jax_programs import jax_output, kiln_output

PROGRAM = """
P = jax.P
mesh = jax.make_mesh((2,), ("i",))
with jax.set_mesh(mesh):
    x_sharded = jax.device_put(jnp.arange(8.), P("i"))
    x_replicated = jnp.arange(4.)
    x_unreduced = jnp.einsum("i,i->", x_sharded, x_sharded, out_sharding=P(unreduced={"i"}))
    x_reduced = jax.reshard(x_replicated, P(reduced={"i"}))
    print(jax.typeof(x_unreduced), jax.typeof(x_reduced), x_reduced)

    def f(a, b, c, d):
        print(jax.typeof(a), jax.typeof(b), jax.typeof(c), jax.typeof(d))
        print(sorted(jax.typeof(c).manual_axis_type.unreduced),
              sorted(jax.typeof(d).manual_axis_type.reduced))
        return a, lax.psum(c, "i") * jnp.ones(4)
    g = jax.shard_map(f, in_specs=(P("i"), P(), P(unreduced={"i"}), P(reduced={"i"})),
                      out_specs=(P("i"), P()))
    for h in (g, jax.jit(g)):
        print([np.asarray(r).tolist() for r in h(x_sharded, x_replicated, x_unreduced,
                                                 x_reduced)])

    a = jax.device_put(jnp.arange(4.).reshape(2, 2), P(None, "i"))
    b = jax.device_put(jnp.arange(4., 8.).reshape(2, 2), P("i", None))

    def partial_product(a, b):
        out = lax.pcast(a @ b, "i", to="unreduced")
        print("inside", jax.typeof(out))
        return out
    matmul = jax.shard_map(partial_product, in_specs=(P(None, "i"), P("i", None)),
                           out_specs=P(None, None, unreduced={"i"}))
    c = matmul(a, b)
    print(jax.typeof(c), c.sharding.spec)
    print(np.asarray(jax.reshard(c, P(None, None))).tolist())

    def loss(a, b):
        return jnp.sum(jax.reshard(matmul(a, b), P(None, None)) ** 2)
    da, db = jax.jit(jax.grad(loss, argnums=(0, 1)))(a, b)
    print(jax.typeof(da), jax.typeof(db), np.asarray(da).tolist(), np.asarray(db).tolist())
    da, db = jax.grad(loss, argnums=(0, 1))(a, b)
    print(np.asarray(da).tolist(), np.asarray(db).tolist())
"""


def test_unreduced_and_reduced_specs_match_jax(capsys):
    expected = jax_output(PROGRAM)
    assert "f32[]{U:i} f32[4]{R:i}" in expected and "inside f32[2,2]{U:i}" in expected
    assert kiln_output(PROGRAM, capsys) == expected
