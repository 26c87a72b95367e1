"""Programs whose non-differentiated arguments JAX keeps concrete outside `jit`, and the cases
that call them, shared by `tests/test_static_args.py` (on kiln) and
`tests/goldens/make_static_args_goldens.py` (on JAX 0.10.2, which records the goldens; there
`kiln.numpy` is JAX's `jax.numpy`).

Each case is `(name, api, function, differentiated (or, for vmap, mapped) argument, static
positional arguments, static keyword arguments)`; `run(ad, float0, case)` calls the API of `ad` (the `kiln` or `jax`
module) the way the case says and returns its results as nested lists.
"""
import numpy as np

import kiln.numpy as jnp

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], np.float32)
T = np.array([[1.0, 0.5, -1.0], [0.0, 2.0, 1.0]], np.float32)


def keepdims_sum(x, flag):
    """A bool flag as `keepdims`: the intermediate's shape depends on it."""
    return jnp.sum(jnp.sum(x * x, axis=0, keepdims=flag) * jnp.arange(3.0))


def keepdims_out(x, flag):
    """A bool flag as `keepdims` of the result: the output's shape depends on it."""
    return jnp.sum(x * x, axis=0, keepdims=flag)


def shape_branch(x, flag):
    """`if flag:` choosing branches of different shapes."""
    if flag:
        y = jnp.outer(x[0], x[1])
    else:
        y = x * 2.0
    return jnp.sum(jnp.sin(y))


def tuple_index(xs, i):
    """`xs[i]` on a Python tuple of arrays, `i` an int."""
    return jnp.sum(xs[i] ** 2)


def by_mode(x, mode="sum"):
    """A string argument choosing the computation."""
    return jnp.sum(x) if mode == "sum" else jnp.max(x)


def positive_rate(x, rate):
    """A Python float whose value the function needs (`if rate > 0`)."""
    return jnp.sum(x) * rate if rate > 0 else jnp.sum(jnp.cos(x))


CASES = [
    *[(f"{api}_{fn.__name__}_{flag}", api, fn, "x", (flag,), {})
      for api in ("grad", "value_and_grad", "vjp", "jvp")
      for fn in (keepdims_sum, keepdims_out, shape_branch) for flag in (True, False)
      if not (fn is keepdims_out and api in ("grad", "value_and_grad"))],
    *[(f"{api}_tuple_index_{i}", api, tuple_index, "pair", (i,), {})
      for api in ("grad", "value_and_grad", "vjp", "jvp") for i in (0, 1)],
    *[(f"{api}_by_mode_{mode}", api, by_mode, "x", (mode,), {})
      for api in ("grad", "value_and_grad") for mode in ("sum", "max")],
    *[(f"{api}_by_mode_keyword_{mode}", api, by_mode, "x", (), {"mode": mode})
      for api in ("grad", "value_and_grad") for mode in ("sum", "max")],
    *[(f"grad_positive_rate_{rate}", "grad", positive_rate, "x", (rate,), {})
      for rate in (0.5, -1.0)],
    # vmap: unmapped arguments (in_axes None) that are not arrays stay concrete too.
    *[(f"vmap_{fn.__name__}_{value}", "vmap", fn, which, (value,), {})
      for fn, which, values in ((keepdims_out, "x", (True, False)),
                                (shape_branch, "x", (True, False)),
                                (tuple_index, "pair", (0, 1)),
                                (by_mode, "x", ("sum", "max")))
      for value in values],
]


def _tolist(tree):
    if isinstance(tree, (tuple, list)):
        return [_tolist(t) for t in tree]
    return np.asarray(tree).tolist()


def run(ad, float0, case):
    """The results of `case` under `ad` (kiln or jax), as nested lists."""
    _, api, fn, which, args, kwargs = case
    primal = (X, X * 3) if which == "pair" else X
    tangent = (T, T * 2) if which == "pair" else T
    if api == "grad":
        return _tolist(ad.grad(fn)(primal, *args, **kwargs))
    if api == "value_and_grad":
        return _tolist(ad.value_and_grad(fn)(primal, *args, **kwargs))
    if api == "vjp":
        out, pullback = ad.vjp(fn, primal, *args)
        return _tolist((out, pullback(jnp.ones_like(out) * 1.5)[0]))
    if api == "vmap":
        in_axes = ((0, 0) if which == "pair" else 0,) + (None,) * len(args)
        return _tolist(ad.vmap(fn, in_axes=in_axes)(primal, *args))
    if api == "jvp":
        return _tolist(ad.jvp(fn, (primal, *args), (tangent, *[np.zeros((), float0)] * len(args))))
    raise ValueError(f"unknown api {api!r}")
