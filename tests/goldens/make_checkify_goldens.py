"""Record JAX 0.10.2's outcomes for the cases of `tests/checkify_cases.py` as goldens for
`tests/test_checkify.py` (running JAX's eager checkify in the suite would take longer than
the whole of kiln's side).

Run with an interpreter that has jax==0.10.2, from the repository root:

    .venv/bin/python tests/goldens/make_checkify_goldens.py

It writes `tests/goldens/checkify_jax_0_10_2.json`: case name -> [kind, message, output leaves]
(`checkify_cases.outcome`; float32 values, x64 off).
"""
import json
import os
import sys
import types

import jax
from jax.experimental import checkify

assert jax.__version__ == "0.10.2", jax.__version__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import checkify_cases as cases  # noqa: E402

ns = types.SimpleNamespace(jax=jax, jnp=jax.numpy, lax=jax.lax, checkify=checkify)
goldens = {name: cases.outcome(ns, case) for name, case in cases.CASES.items()}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkify_jax_0_10_2.json")
with open(path, "w") as f:   # one case a line
    f.write("{\n" + ",\n".join(f" {json.dumps(name)}: {json.dumps(goldens[name])}"
                                for name in sorted(goldens)) + "\n}\n")
print(f"wrote {len(goldens)} cases to {path}")
