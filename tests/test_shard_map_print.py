"""Python's `print` of a traced value at the top level of a shard_map body prints once, as
JAX 0.10.2's eager shard_map prints its values: a block per device of the mesh, in mesh
order, each under `On cpu:N at mesh coordinates (i, j,) = (...)`, and static text at every
call. The same program's output is compared with JAX's, run in a subprocess with eight CPU
devices; kiln prints the values the same way under `jit` (where JAX prints tracers)."""
import linecache
import os
import subprocess
import sys

import numpy as np

import kiln
from kiln import lax
from kiln.sharding import AxisType, PartitionSpec as P

PROGRAM = """
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


mesh = make_mesh((2, 2), ("i", "j"), (AxisType.Auto, AxisType.Auto))
out = shard_map(body, mesh=mesh, in_specs=P("i", "j"), out_specs=P("i", "j"))(
    np.arange(8.).reshape(2, 4))
print(np.asarray(out).tolist())
line = make_mesh((4,), ("i",), (AxisType.Auto,))
rows = shard_map(row, mesh=line, in_specs=P("i"), out_specs=P("i"))
rows(np.arange(8))
rows(np.arange(8) * 3)
"""


def _jax_output():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    env.pop("KILN_AS_JAX", None)
    script = ("import numpy as np, jax, jax.numpy as jnp\nfrom jax import lax, make_mesh, "
              "shard_map\nfrom jax.sharding import AxisType, PartitionSpec as P\n" + PROGRAM)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _kiln_output(capsys, wrap):
    import kiln.numpy as jnp
    names = dict(np=np, jnp=jnp, lax=lax, AxisType=AxisType, P=P, make_mesh=kiln.make_mesh,
                 shard_map=lambda f, **kw: wrap(kiln.shard_map(f, **kw)))
    name = "<shard_map print program>"   # its source, for kiln to read
    linecache.cache[name] = (len(PROGRAM), None, PROGRAM.splitlines(True), name)
    capsys.readouterr()
    exec(compile(PROGRAM, name, "exec"), names)
    return capsys.readouterr().out


def test_print_in_a_shard_map_body_matches_jax(capsys):
    expected = _jax_output()
    assert "On cpu:3 at mesh coordinates (i, j,) = (1, 1):\n[[6. 7.]]\n|n|3\n" in expected
    assert _kiln_output(capsys, lambda g: g) == expected
    # Under jit kiln prints the values the same way (JAX prints its tracers there), and
    # static text once, while tracing, as JAX.
    static = "static only (1, 2)\n"
    assert _kiln_output(capsys, kiln.jit) == static + expected.replace(static, "", 1)


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
