"""Operations on arrays unreduced over a mesh axis (`out_sharding=P(..., unreduced={"X"})`)
follow JAX 0.10.2's rules, compared with JAX run in a subprocess (tests/jax_programs.py):
`add` of two unreduced over the same axes, `reduce_sum`, transposes, conversions and `where`
stay unreduced (eagerly and inside `jit`); `mul` by a Python scalar, `add` of an unreduced
and a plain operand, `mul` or `dot` of two unreduced are refused (JAX's ShardingTypeError;
kiln's ValueError); other operations raise NotImplementedError. Unreduced arrays print
without their value, as JAX's."""
from jax_programs import jax_output, kiln_output

PROGRAM = """
P = jax.P
mesh = jax.make_mesh((2,), ("X",))
with jax.set_mesh(mesh):
    a = jax.device_put(jnp.arange(4.).reshape(2, 2), P(None, "X"))
    b = jax.device_put(jnp.arange(4., 8.).reshape(2, 2), P("X", None))
    c = jnp.einsum("ij,jk->ik", a, b, out_sharding=P(None, None, unreduced={"X"}))
    c2 = jnp.einsum("ij,jk->ik", 2. * a, b, out_sharding=P(None, None, unreduced={"X"}))
    print(c)
    print(repr(c2))
    cases = {
        "add": lambda: c + c2, "lax.add": lambda: lax.add(c, c2), "sum": lambda: c.sum(),
        "sum0": lambda: jnp.sum(c, axis=0), "T": lambda: c.T,
        "astype": lambda: c.astype(jnp.float16), "where": lambda: jnp.where(True, c, c2),
        "cos": lambda: jnp.cos(c), "neg": lambda: -c, "sub": lambda: c - c2,
        "add scalar": lambda: c + 1.0, "add plain": lambda: jnp.add(c, jnp.ones((2, 2))),
        "mul scalar": lambda: c * 2.0, "mul both": lambda: c * c, "dot": lambda: c @ c,
    }
    for name, case in cases.items():
        try:
            print(name, jax.typeof(case()))
        except NotImplementedError:
            print(name, "not implemented")
        except Exception:
            print(name, "refused")
    print("jit", jax.typeof(jax.jit(lambda u, v: (u + v).sum(0))(c, c2)))
    print(np.asarray(jax.reshard(c + c2, P(None, None))).tolist())
"""


def test_unreduced_operations_match_jax(capsys):
    expected = jax_output(PROGRAM)
    assert "cos not implemented" in expected and "add f32[2,2]{U:X}" in expected
    assert kiln_output(PROGRAM, capsys) == expected
