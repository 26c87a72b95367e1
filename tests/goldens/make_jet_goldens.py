"""Record JAX 0.10.2's Taylor series for the cases of `tests/jet_cases.py` as goldens for
`tests/test_jet.py` (JAX's jet runs eagerly, primitive by primitive: live, it would take longer
than the whole of kiln's side).

Run with an interpreter that has jax==0.10.2, from the repository root:

    .venv/bin/python tests/goldens/make_jet_goldens.py

It writes `tests/goldens/jet_jax_0_10_2.json`: name -> {"out": output, "series": [terms]}
(float32 values as nested lists, x64 off):

  case:<name>   jet of CASES[name] at X, series terms(4)
  two_args      jet of two_args at (X, Y), series (terms(3), terms(3, seed=2))
  one_series    the same with zeros for Y's series
  jet2_exp_log  jet2 (unscaled coefficients) of CASES["exp_log"] at X, terms(3)
  grad_term     {"out": grad of the sum of term 2 of CASES["tanh_chain"]'s jet (terms(3)) at X}
"""
import json
import os
import sys

import jax
import numpy as np
from jax.experimental.jet import jet, jet2

assert jax.__version__ == "0.10.2", jax.__version__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jet_cases import CASES, X, Y, terms, two_args  # noqa: E402

np_, lax_ = jax.numpy, jax.lax


def record(result):
    out, series = result
    return {"out": np.asarray(out).tolist(), "series": [np.asarray(t).tolist() for t in series]}


goldens = {f"case:{name}": record(jet(case(np_, lax_), (X,), (terms(4),)))
           for name, case in CASES.items()}
goldens["two_args"] = record(jet(two_args(np_, lax_), (X, Y), (terms(3), terms(3, seed=2))))
goldens["one_series"] = record(jet(two_args(np_, lax_), (X, Y),
                                   (terms(3), [np.zeros(4, np.float32)] * 3)))
goldens["jet2_exp_log"] = record(jet2(CASES["exp_log"](np_, lax_), (X,), (terms(3),)))
chain = CASES["tanh_chain"](np_, lax_)
goldens["grad_term"] = {"out": np.asarray(jax.grad(
    lambda x: jet(chain, (x,), (terms(3),))[1][1].sum())(X)).tolist()}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jet_jax_0_10_2.json")
with open(path, "w") as f:   # one case a line
    f.write("{\n" + ",\n".join(f" {json.dumps(name)}: {json.dumps(goldens[name])}"
                                for name in sorted(goldens)) + "\n}\n")
print(f"wrote {len(goldens)} cases to {path}")
