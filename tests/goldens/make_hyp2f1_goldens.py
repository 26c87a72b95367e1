"""Record JAX 0.10.2's `jax.scipy.special.hyp2f1` values and gradients as goldens for
`tests/test_scipy_special_hyp2f1.py` (JAX takes seconds to compile its hyp2f1 and minutes of a
loaded machine for its gradient, so the test reads these instead).

Run with an interpreter that has jax==0.10.2, from the repository root:

    /path/to/jax-env/bin/python tests/goldens/make_hyp2f1_goldens.py

It writes `tests/goldens/hyp2f1_jax_0_10_2.json`: "args" (a, b, c, x: a random grid and the
special cases of JAX's algorithm, as float64), "float32" and "float64" (JAX's values for the
arguments rounded to that dtype; inf as the string "inf"), and "grad" (points (a, b, c, x) with
JAX's float32 gradient in all four).
"""
import json
import os

import jax
import numpy as np

assert jax.__version__ == "0.10.2", jax.__version__
jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(11)
N = 300
GRID = [RNG.uniform(-3, 5, N), RNG.uniform(-3, 5, N), RNG.uniform(0.2, 8, N),
        RNG.uniform(-0.5, 0.9, N)]
# x == 0, c a pole, a a non-positive integer, b == c, x == 1 both ways, x near 1 with c - a - b
# an integer (the digamma sum) and not, the Euler transformation, x > 1.
SPECIAL = np.array([[1, 1, 2, 0], [2, 3, -1, 0.3], [-2, 2.5, 3, 0.7], [0, 1, 2, 0.2],
                    [1, 2, 2, 1], [1.5, 2, 4.5, 1], [2, 1, 1, 0.95], [1, 3, 3, 0.97],
                    [-3, 2, 3.5, 0.93], [0.5, 0.5, 1.5, 0.3], [1, 2, 2, 1.5], [1, 1, 2, 0.95],
                    [2.5, 1.5, 2, 0.6], [-4, -2, -3, 0.5]]).T
ARGS = [np.concatenate([g, s]) for g, s in zip(GRID, SPECIAL)]
GRAD_POINTS = [(1.5, 2.0, 3.2, 0.3), (1.5, 2.0, 3.2, -0.3), (1.5, 2.0, 3.2, 0.6)]


def _values(dtype):
    out = np.asarray(jax.scipy.special.hyp2f1(*[a.astype(dtype) for a in ARGS]), np.float64)
    return [v if np.isfinite(v) else str(v) for v in out.tolist()]


grad = jax.grad(jax.scipy.special.hyp2f1, argnums=(0, 1, 2, 3))
goldens = {"args": [a.tolist() for a in ARGS], "float32": _values(np.float32),
           "float64": _values(np.float64),
           "grad": [[list(p), [float(g) for g in grad(*map(np.float32, p))]]
                    for p in GRAD_POINTS]}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hyp2f1_jax_0_10_2.json")
with open(path, "w") as f:
    json.dump(goldens, f)
