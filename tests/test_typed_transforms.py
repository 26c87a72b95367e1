"""Eager (outside `jit`) `grad`, `value_and_grad`, `jvp`, `vjp` and `vmap` of functions of arrays
placed over Explicit mesh axes give results placed as their types say, as `jit` does and as
JAX 0.10.2 does (compared with JAX run in a subprocess: tests/jax_programs.py)."""
from jax_programs import jax_output, kiln_output

PROGRAM = """
mesh = jax.make_mesh((2,), ("X",))
with jax.set_mesh(mesh):
    x = jax.device_put(jnp.arange(8 * 4.).reshape(8, 4), jax.P("X", None))
    w = jax.device_put(jnp.arange(4 * 2.).reshape(4, 2) / 10., jax.P(None, None))

    def loss(w, x):
        return jnp.sum((x @ w) ** 2)
    dw, dx = jax.grad(loss, argnums=(0, 1))(w, x)
    print(jax.typeof(dw), jax.typeof(dx), dx.sharding.spec, np.asarray(dx)[3].tolist())
    v, g = jax.value_and_grad(loss, argnums=1)(w, x)
    print(jax.typeof(v), jax.typeof(g), float(v))
    print(jax.typeof(jax.vmap(lambda r: r * 2)(x)), jax.typeof(jax.vmap(jnp.sum)(x)))
    p, t = jax.jvp(jnp.sin, (x,), (x,))
    print(jax.typeof(p), jax.typeof(t))
    y, f_vjp = jax.vjp(lambda x, w: jnp.sin(x) @ w, x, w)
    dx, dw = f_vjp(y)
    print(jax.typeof(y), jax.typeof(dx), jax.typeof(dw), np.asarray(dx)[5].tolist())
"""


def test_eager_transforms_place_typed_results_as_jax(capsys):
    expected = jax_output(PROGRAM)
    assert "f32[4,2] f32[8@X,4] P('X', None)" in expected
    assert kiln_output(PROGRAM, capsys) == expected
