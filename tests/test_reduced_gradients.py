"""The gradient for an input reduced over a mesh axis (`P(..., reduced={"X"})`) is typed
unreduced over it, as in JAX 0.10.2 (compared with JAX run in a subprocess:
tests/jax_programs.py): eagerly, under `jit`, inside a `scan` body (where JAX's sharding-AD
page asserts it) and through a shard_map whose in_spec is reduced; the values, resharded to a
plain spec, are JAX's."""
from jax_programs import jax_output, kiln_output

PROGRAM = """
P = jax.P
mesh = jax.make_mesh((2,), ("X",))
with jax.set_mesh(mesh):
    x = jax.device_put(jnp.arange(8 * 4.).reshape(8, 4) / 10., P("X", None))
    w = jax.device_put(jnp.arange(4 * 2.).reshape(4, 2) / 10., P(None, None))
    w_r = jax.reshard(w, P(None, None, reduced={"X"}))

    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)
    for grad in (jax.grad(loss), jax.jit(jax.grad(loss))):
        dw = grad(w_r, x)
        print(jax.typeof(dw), np.round(np.asarray(jax.reshard(dw, P())), 4).tolist())

    def inner(w, x):
        return jnp.sum(jnp.tanh(x @ jax.reshard(w, P(None, None, reduced={"X"}))) ** 2)
    print(jax.typeof(jax.jit(jax.grad(inner))(w, x)))

    layer = jax.shard_map(lambda x, w: jnp.tanh(x @ w),
                          in_specs=(P("X", None), P(None, None, reduced={"X"})),
                          out_specs=P("X", None))
    dw = jax.grad(lambda w, x: jnp.sum(layer(x, w) ** 2))(w_r, x)
    print(jax.typeof(dw), np.round(np.asarray(jax.reshard(dw, P())), 4).tolist())

    @jax.jit
    def step(ws, xs):
        def micro(acc, x_mb):
            grads = jax.grad(loss)(ws, x_mb)
            assert jax.typeof(grads).sharding.spec.unreduced == {"X"}
            return acc + grads, None
        acc = jax.reshard(jnp.zeros_like(ws), P(unreduced={"X"}))
        acc, _ = lax.scan(micro, acc, xs)
        return jax.reshard(ws, P()) - 0.01 * jax.reshard(acc, P())
    xs = jax.device_put(jnp.ones((3, 2, 4)), P(None, "X", None))
    new = step(w_r, xs)
    print(jax.typeof(new), np.round(np.asarray(new), 4).tolist())
"""


def test_gradients_of_reduced_inputs_match_jax(capsys):
    expected = jax_output(PROGRAM)
    assert expected.startswith("f32[4,2]{U:X}")
    assert kiln_output(PROGRAM, capsys) == expected
