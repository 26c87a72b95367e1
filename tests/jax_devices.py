"""Results computed by JAX 0.10.2 with eight CPU devices, in a subprocess (JAX fixes its device
count once it starts): the tests that compare placements and shardings with JAX's call
`jax_results(module, expression)`, or `jax_script(where, script)` for a whole program."""
import json
import os
import subprocess
import sys

import pytest

_PROGRAM = """
import json, sys
import jax
jax.config.update('jax_num_cpu_devices', 8)
sys.path.insert(0, {tests!r})
import {module} as t
print(json.dumps({expression}))
"""


def jax_results(module, expression):
    """The JSON value of `expression` (which reads `jax` and the test module `module` as `t`)
    evaluated by JAX on eight CPU devices; skips the test without JAX."""
    pytest.importorskip("jax")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    program = _PROGRAM.format(tests=os.path.dirname(__file__), module=module,
                              expression=expression)
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def jax_script(where, script):
    """The JSON that the JAX program `script` writes to the path in its `sys.argv[1]`, run
    with eight CPU devices in the directory `where`; skips the test without JAX."""
    pytest.importorskip("jax")
    (where / "run.py").write_text(script)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(where / "run.py"), str(where / "out.json")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((where / "out.json").read_text())
