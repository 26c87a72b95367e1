"""Python's `print` of a traced value at the top level of a shard_map body prints once, as
JAX 0.10.2's eager shard_map prints its values: a block per device of the mesh, in mesh
order, each under `On cpu:N at mesh coordinates (i, j,) = (...)`, and static text at every
call. The same program's output is compared with JAX's (tests/jax_programs.py); kiln prints
the values the same way under `jit` (where JAX prints tracers)."""
import numpy as np

import kiln
from kiln import lax
from kiln.sharding import AxisType, PartitionSpec as P

from jax_programs import jax_output, kiln_output

PROGRAM = """
AxisType, P = jax.sharding.AxisType, jax.P


def body(x):
    print("plain", x, "n", 3, sep="|")
    print("static only", x.shape)
    y = lax.psum(x, "i")
    print(f"summed {y}")
    print(jnp.sum(y), x.dtype)
    return x * 2


def row(x):
    print("BEFORE:\\n", x)
    return x


mesh = jax.make_mesh((2, 2), ("i", "j"), (AxisType.Auto, AxisType.Auto))
out = shard_map(body, mesh=mesh, in_specs=P("i", "j"), out_specs=P("i", "j"))(
    np.arange(8.).reshape(2, 4))
print(np.asarray(out).tolist())
line = jax.make_mesh((4,), ("i",), (AxisType.Auto,))
rows = shard_map(row, mesh=line, in_specs=P("i"), out_specs=P("i"))
rows(np.arange(8))
rows(np.arange(8) * 3)
"""


def test_print_in_a_shard_map_body_matches_jax(capsys):
    expected = jax_output("shard_map = jax.shard_map\n" + PROGRAM)
    assert "On cpu:3 at mesh coordinates (i, j,) = (1, 1):\n[[6. 7.]]\n|n|3\n" in expected
    assert kiln_output(PROGRAM, capsys, shard_map=kiln.shard_map) == expected
    # Under jit kiln prints the values the same way (JAX prints its tracers there), and
    # static text once, while tracing, as JAX.
    static = "static only (1, 2)\n"
    jitted = kiln_output(PROGRAM, capsys, shard_map=lambda f, **kw: kiln.jit(
        kiln.shard_map(f, **kw)))
    assert jitted == static + expected.replace(static, "", 1)


def test_print_inside_control_flow_of_a_body_prints_per_device(capsys):
    """Not every device need reach a print inside a `cond`, so it prints on each device that
    does, without gathering."""
    mesh = kiln.make_mesh((4,), ("i",), (AxisType.Auto,))

    def body(x):
        def loud(v):
            print("odd block", v)
            return v
        return lax.cond(x[0] % 2 == 1, loud, lambda v: v, x)
    capsys.readouterr()
    kiln.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i"))(np.array([0, 1, 2, 3]))
    lines = sorted(capsys.readouterr().out.splitlines())
    assert lines == ["odd block [1]", "odd block [3]"]
