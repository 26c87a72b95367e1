"""numpyro, unchanged, on kiln (KILN_AS_JAX=1) against the same program on JAX 0.10.2.

tests/compat_programs/numpyro_models.py runs in two subprocesses at once, one with `import
jax` answered by kiln and one on JAX; NUTS and HMC draws, SVI losses and parameters with an
AutoNormal guide (numpyro.optim with Trace_ELBO, optax with TraceGraph_ELBO), Predictive,
log_density, the provenance of `get_dependencies` and `get_model_relations` and the
distributions' samples and log densities are compared. Skipped
when numpyro is not importable (setup.cfg's `compat` extra installs it; it is not one of
kiln's dependencies); the subprocesses get the directory it was found in on their path. Also unit tests of what numpyro needed:
`kiln.api_util.flatten_fun` over `kiln.extend.linear_util`, `make_jaxpr`'s jaxpr layout and
`trace_state_clean` and a `class` statement in compiled code."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import api_util
from kiln.extend import linear_util as lu
from kiln.extend.core import Literal, primitives

PROGRAM = pathlib.Path(__file__).parent / "compat_programs" / "numpyro_models.py"


def _numpyro_dir():
    spec = importlib.util.find_spec("numpyro")
    if spec is None or spec.origin is None:
        pytest.skip("numpyro is not importable")
    return str(pathlib.Path(spec.origin).parent.parent)


def _start(as_jax, where):
    env = dict(os.environ)
    env.pop("KILN_AS_JAX", None)
    if as_jax:
        env["KILN_AS_JAX"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([where] + [p for p in
                                                   [env.get("PYTHONPATH")] if p])
    return subprocess.Popen([sys.executable, str(PROGRAM)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _result(proc):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return json.loads(out)


def test_numpyro_models_match_jax():
    where = _numpyro_dir()
    on_kiln, on_jax = _start(True, where), _start(False, where)
    got, want = _result(on_kiln), _result(on_jax)
    assert got.pop("jax_is") == "kiln" and want.pop("jax_is") == "jax"
    # Provenance is sets of names: equal. The draws and fits are float32 computations
    # whose last digits differ (reductions, exp/log); NUTS's trajectories amplify that.
    for exact in ("provenance", "dependencies", "relations", "nuts_steps"):
        assert got.pop(exact) == want.pop(exact), exact
    assert want["svi_losses"][-1] < want["svi_losses"][0]
    for name in sorted(want):
        loose = name.startswith(("nuts", "predictive_posterior"))
        _close(got[name], want[name], name, rtol=2e-3 if loose else 1e-4,
               atol=2e-3 if loose else 1e-5)


def _close(got, want, where, **tolerance):
    """Nested dicts and lists of numbers, compared leaf array by leaf array."""
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), where
        for k in want:
            _close(got[k], want[k], f"{where}[{k!r}]", **tolerance)
    elif isinstance(want, list) and want and isinstance(want[0], list) and \
            len({np.shape(w) for w in want}) > 1:   # parts of different shapes
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{where}[{i}]", **tolerance)
    else:
        np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float),
                                   err_msg=where, **tolerance)


def scaled_sum(x, y, *, scale):
    return {"s": (x + y["b"]) * scale, "n": x.shape[0]}


def test_flatten_fun_calls_through_the_tree_and_stores_the_output_tree():
    x, y = jnp.ones(3), {"b": jnp.arange(3.)}
    leaves, in_tree = kiln.tree_util.tree_flatten(((x, y), {"scale": 2.}))
    dbg = api_util.debug_info("test", scaled_sum, (x, y), {"scale": 2.})
    assert dbg.func_name == "scaled_sum" and dbg.arg_names == ("x", "y['b']", "scale")
    flat, out_tree = api_util.flatten_fun(lu.wrap_init(scaled_sum, debug_info=dbg), in_tree)
    with pytest.raises(lu.StoreException, match="Store empty"):
        out_tree()
    out = flat.call_wrapped(*leaves)
    assert kiln.tree_util.tree_unflatten(out_tree(), out)["n"] == 3
    np.testing.assert_array_equal(out[1], [2., 4., 6.])
    with pytest.raises(lu.StoreException, match="Store occupied"):
        flat.call_wrapped(*leaves)


def test_an_equal_store_takes_a_second_equal_value_only():
    """`transformation_with_aux2(use_eq_store=True)`, as JAX's: the same auxiliary output
    written twice is accepted, a different one is JAX's StoreException."""
    @lu.transformation_with_aux2
    def with_length(f, store, xs):
        out = f(xs)
        store.store(len(xs))
        return out
    for use_eq_store, message in ((True, "not-equal value"), (False, "Store occupied")):
        fun, length = with_length(lu.wrap_init(lambda xs: sum(xs)), use_eq_store=use_eq_store)
        assert fun.call_wrapped([1, 2]) == 3 and length() == 2
        if use_eq_store:
            assert fun.call_wrapped([3, 4]) == 7 and length() == 2
        with pytest.raises(lu.StoreException, match=message):
            fun.call_wrapped([1, 2, 3])


def test_flatten_fun_under_make_jaxpr_gives_a_jaxpr_layout():
    """What numpyro's provenance interpreter reads: invars without the closed-over values,
    equations with `primitive`, Literal operands, and outvars."""
    x, y = jnp.ones(3), {"b": jnp.arange(3.)}
    leaves, in_tree = kiln.tree_util.tree_flatten(((x, y), {"scale": 2.}))
    flat, out_tree = api_util.flatten_fun(
        lu.wrap_init(scaled_sum, debug_info=api_util.debug_info("t", scaled_sum, (), {})),
        in_tree)
    closed = kiln.make_jaxpr(flat.call_wrapped)(*leaves)
    jaxpr = closed.jaxpr
    assert [v.aval.shape for v in jaxpr.invars] == [(3,), (3,), ()]
    assert jaxpr.constvars == [] and len(jaxpr.outvars) == 2
    assert isinstance(jaxpr.outvars[0], Literal) and jaxpr.outvars[0].value == 3   # "n"
    used = [e.primitive for e in jaxpr.eqns]
    assert used[0] is primitives.add_p and used[-1] is primitives.mul_p
    assert out_tree() == kiln.tree_util.tree_structure({"s": 0, "n": 0})


def times_c(x):
    return x * C + 2.0


C = np.arange(3., dtype=np.float32)


def test_make_jaxpr_keeps_closed_over_values_out_of_invars():
    closed = kiln.make_jaxpr(times_c)(jnp.ones(3))
    jaxpr = closed.jaxpr
    assert len(jaxpr.invars) == 1 and len(jaxpr.constvars) == 1 and len(closed.consts) == 1
    mul, add = jaxpr.eqns
    assert mul.primitive is primitives.mul_p and mul.invars[1] is jaxpr.constvars[0]
    assert add.primitive is primitives.add_p and isinstance(add.invars[1], Literal)
    assert [a.shape for a in closed.in_avals] == [(3,)]


def is_clean(x):
    return kiln.core.trace_state_clean(), x


def test_trace_state_clean():
    assert kiln.core.trace_state_clean()
    assert not kiln.jit(is_clean)(1.)[0]
    assert not kiln.vmap(is_clean)(jnp.ones(2))[0].any()
    assert is_clean(1.)[0] is True


def test_call_primitives_are_never_in_kiln_ssa():
    for p in (primitives.call_p, primitives.closed_call_p, primitives.jit_p):
        with pytest.raises(NotImplementedError, match="kiln inlines such calls"):
            p.impl()
    assert primitives.while_p.name == "while_loop" and primitives.remat_p.name == "remat"


class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


def defines_a_class(x, offset):
    shift = 1.0

    class Shifted(Scaler):
        """A class statement in compiled code (numpyro's get_model_relations has one)."""
        def __call__(self, x):
            if isinstance(x, kiln.Array):    # traced: walked, as in JAX
                return super().__call__(x) + shift + offset
            return None

    return Shifted(2.0)(x)


def test_class_statement_in_compiled_code():
    x = jnp.arange(3.)
    want = x * 2.0 + 1.0 + 0.5
    np.testing.assert_allclose(kiln.jit(defines_a_class)(x, 0.5), want)
    np.testing.assert_allclose(kiln.grad(lambda x: defines_a_class(x, 0.5).sum())(x),
                               [2., 2., 2.])
    np.testing.assert_allclose(defines_a_class(x, 0.5), want)
