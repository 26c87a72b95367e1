"""equinox, unchanged, under `KILN_AS_JAX=1`: tests/compat_programs/equinox_program.py runs once
on kiln and once on JAX 0.10.2, each in its own subprocess (at the same time), and their
results are compared. equinox is not one of kiln's dependencies: the test runs where it is
importable (installed, or on PYTHONPATH, which the subprocesses inherit) and skips otherwise."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

if importlib.util.find_spec("equinox") is None:
    pytest.skip("equinox is not installed (pip install equinox, or put it on PYTHONPATH)",
                allow_module_level=True)

PROGRAM = pathlib.Path(__file__).parent / "compat_programs" / "equinox_program.py"


def _start(as_jax):
    env = dict(os.environ)
    env.pop("KILN_AS_JAX", None)
    if as_jax:
        env["KILN_AS_JAX"] = "1"
    return subprocess.Popen([sys.executable, str(PROGRAM)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _results(process):
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    return json.loads(stdout.strip().splitlines()[-1])


def test_equinox_program_matches_jax():
    on_kiln, on_jax = _start(as_jax=True), _start(as_jax=False)
    kiln_out, jax_out = _results(on_kiln), _results(on_jax)
    assert sorted(kiln_out) == sorted(jax_out)
    assert kiln_out["error_if_raises"] is True and jax_out["error_if_raises"] is True
    assert kiln_out["jvp_nones"] == jax_out["jvp_nones"] == [True, True, True]
    for name in jax_out:
        if name not in ("error_if_raises", "jvp_nones"):
            np.testing.assert_allclose(kiln_out[name], jax_out[name], rtol=1e-5, atol=1e-6,
                                       err_msg=name)
