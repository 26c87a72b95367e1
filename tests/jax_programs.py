"""Running one program text on JAX 0.10.2 (in a subprocess with eight CPU devices, its
device count fixed once JAX starts) and on kiln (in the test process) and comparing what they
print. The program names `jax`, `jnp`, `lax` and `np`; on kiln they are `kiln`,
`kiln.numpy`, `kiln.lax` and NumPy."""
import linecache
import os
import subprocess
import sys

import numpy as np

import kiln
import kiln.numpy as kjnp
from kiln import lax as klax


def jax_output(program):
    """What `program` prints on JAX, with JAX's dtype names in types spelled as kiln's
    (`float32[` as `f32[`, also float16 and int32)."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    env.pop("KILN_AS_JAX", None)
    script = "import numpy as np, jax, jax.numpy as jnp\nfrom jax import lax\n" + program
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for jax_name, kiln_name in (("float32", "f32"), ("float16", "f16"), ("int32", "i32")):
        out = out.replace(jax_name + "[", kiln_name + "[")
    return out


def kiln_output(program, capsys, **names):
    """What `program` prints on kiln (`names`: more globals, or other values for its own)."""
    name = f"<program {abs(hash(program))}>"   # its source, for kiln to read
    linecache.cache[name] = (len(program), None, program.splitlines(True), name)
    scope = dict(np=np, jax=kiln, jnp=kjnp, lax=klax, **names)
    capsys.readouterr()
    exec(compile(program, name, "exec"), scope)
    return capsys.readouterr().out
