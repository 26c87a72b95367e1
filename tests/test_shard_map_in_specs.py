"""Over a mesh whose axes are all Explicit and all manual, an explicit `in_specs` entry must
be the spec of its argument's type (JAX 0.10.2's ValueError), eagerly and under `jit`; over
Auto axes, or manual over some axes only, shard_map cuts the argument as `in_specs` says.
Compared with JAX run in a subprocess (tests/jax_programs.py)."""
import numpy as np
import pytest

import kiln
from kiln.sharding import PartitionSpec as P

from jax_programs import jax_output, kiln_output

PROGRAM = """
P = jax.P
Auto = jax.sharding.AxisType.Auto
line = jax.make_mesh((2,), ("i",))
grid = jax.make_mesh((2, 2), ("i", "j"))
placed = jax.device_put(jnp.arange(6.), jax.NamedSharding(line, P("i")))
cases = [("plain", line, np.arange(6.)), ("auto", jax.make_mesh((2,), ("i",), (Auto,)),
                                          np.arange(6.)), ("placed", line, placed)]
for name, mesh, arg in cases:
    for spec in (P("i"), P(), P(None)):
        out = P("i") if spec == P("i") else P()
        for wrap in (lambda g: g, jax.jit):
            try:
                r = wrap(jax.shard_map(lambda x: x * 2, mesh=mesh, in_specs=spec,
                                       out_specs=out))(arg)
                print(name, spec, "ok", np.asarray(r).tolist())
            except ValueError as e:
                print(name, spec, "refused", "does not match the specs of the input" in str(e))
partial = jax.shard_map(lambda x: x * 2, mesh=grid, in_specs=P("i"), out_specs=P("i"),
                        axis_names={"i"})
print(np.asarray(partial(np.arange(4.))).tolist())
with jax.set_mesh(line):
    try:
        jax.shard_map(lambda x: x, in_specs=P("i"), out_specs=P("i"))(np.arange(4.))
    except ValueError as e:
        print("current mesh refused", "does not match" in str(e))
"""


def test_in_specs_must_match_types_over_explicit_axes_as_jax(capsys):
    expected = jax_output(PROGRAM)
    assert "plain P('i',) refused True" in expected and "auto P('i',) ok" in expected
    assert kiln_output(PROGRAM, capsys) == expected


def test_in_specs_mismatch_message():
    mesh = kiln.make_mesh((2, 2), ("x", "y"))
    with pytest.raises(ValueError, match=r"in_specs passed to shard_map: P\('x', None\) does "
                       r"not match the specs of the input: P\(None, None\) for arg: "
                       r"f32\[4,2\]\..*kiln.reshard"):
        kiln.shard_map(lambda x: x, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(
            np.ones((4, 2), np.float32))
