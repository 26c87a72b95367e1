"""Record JAX 0.10.2's results for the cases of `tests/static_args_programs.py` as goldens for
`tests/test_static_args.py` (kiln itself never imports jax).

Run with an interpreter that has jax==0.10.2, from the repository root:

    /path/to/jax-env/bin/python tests/goldens/make_static_args_goldens.py

The programs import `kiln.numpy as jnp`; here that name is JAX's `jax.numpy`, so the same source
runs on JAX. It writes `tests/goldens/static_args_jax_0_10_2.json`: case name -> the case's
results as nested lists (float32 values, x64 off).
"""
import json
import os
import sys
import types

import jax
import jax.numpy
from jax import dtypes

assert jax.__version__ == "0.10.2", jax.__version__
shim = types.ModuleType("kiln")
shim.numpy = jax.numpy
sys.modules["kiln"] = shim
sys.modules["kiln.numpy"] = jax.numpy
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import static_args_programs as programs  # noqa: E402

goldens = {case[0]: programs.run(jax, dtypes.float0, case) for case in programs.CASES}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static_args_jax_0_10_2.json")
with open(path, "w") as f:   # one case a line
    f.write("{\n" + ",\n".join(f" {json.dumps(name)}: {json.dumps(goldens[name])}"
                                for name in sorted(goldens)) + "\n}\n")
print(f"wrote {len(goldens)} cases to {path}")
