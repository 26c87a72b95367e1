"""flax.linen on kiln: tests/compat_programs/flax_linen.py (an MLP and a CNN with BatchNorm
and Dropout trained by a jitted optax step over a flax TrainState, Embed under grad, jit, vmap,
nn.scan, nn.remat, nn.vmap, lazy_init) run under KILN_AS_JAX=1 and on JAX 0.10.2, in two
subprocesses at once; every value must agree.

flax and optax are not kiln's dependencies. The test finds them on the path, or in the
directories `KILN_COMPAT_LIBS` lists (os.pathsep-separated, e.g. a scratch directory made with
`pip install --target DIR flax msgpack rich PyYAML treescope optax chex`), and is skipped
only when they cannot be imported."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

PROGRAM = pathlib.Path(__file__).parent / "compat_programs" / "flax_linen.py"
LIBS = [p for p in os.environ.get("KILN_COMPAT_LIBS", "").split(os.pathsep) if p]
sys.path.extend(p for p in LIBS if p not in sys.path)
WHY = ("{} is not importable: install it (and flax's other dependencies) into a directory with "
       "`pip install --target DIR flax msgpack rich PyYAML treescope optax chex` and set "
       "KILN_COMPAT_LIBS=DIR")
pytest.importorskip("flax", reason=WHY.format("flax"))
pytest.importorskip("optax", reason=WHY.format("optax"))
pytest.importorskip("jax", reason="JAX 0.10.2 is the oracle these values are compared with")


def _start(as_jax):
    env = dict(os.environ)
    env.pop("KILN_AS_JAX", None)
    if as_jax:
        env["KILN_AS_JAX"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(LIBS + [p for p in [env.get("PYTHONPATH")] if p])
    return subprocess.Popen([sys.executable, str(PROGRAM)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _results(proc):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return json.loads(out)


def test_flax_linen_program_matches_jax():
    on_kiln, on_jax = _start(True), _start(False)
    got, want = _results(on_kiln), _results(on_jax)
    assert sorted(got) == sorted(want)
    for name, values in want.items():
        assert len(got[name]) == len(values), name
        for g, w in zip(got[name], values):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5, err_msg=name)
    assert got["cnn_losses"][-1] < got["cnn_losses"][0]
