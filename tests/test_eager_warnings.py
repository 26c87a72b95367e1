"""Eager operations give IEEE results without NumPy's RuntimeWarnings, as JAX's do, whatever
the user's warning filters (pytest's per-test filters, `simplefilter("error")`); the user's own
NumPy keeps its warnings; debug_nans/debug_infs still raise, on every eager path."""
import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp

CASES = {
    "array / 0": lambda np_: np_.array(1.0) / 0,
    "0 / 0": lambda np_: np_.array(0.0) / np_.array(0.0),
    "same-shape divide": lambda np_: np_.array([1.0, 0.0]) / np_.array([0.0, 0.0]),
    "log(0)": lambda np_: np_.log(0.0),
    "sqrt(-1)": lambda np_: np_.sqrt(-1.0),
    "exp overflow": lambda np_: np_.exp(np_.array([1000.0, 0.0])),
    "multiply overflow": lambda np_: np_.array(3e38) * 10,
    "inf - inf": lambda np_: np_.array(np.inf) - np.inf,
    "arccos(2)": lambda np_: np_.arccos(2.0),
    "power(0, -1)": lambda np_: np_.power(0.0, -1.0),
    "remainder(1, 0)": lambda np_: np_.remainder(1.0, 0.0),
    "int floor_divide by 0": lambda np_: np_.array([1, 2]) // 0,
    "mean of empty": lambda np_: np_.mean(np_.zeros((0,))),
    "full beyond float32": lambda np_: np_.full((2,), 1e300),
    "at set beyond float32": lambda np_: np_.zeros(2).at[0].set(1e300),
    "astype nan to int": lambda np_: np_.array([np.nan, 1.0]).astype(np_.int32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_results_are_silent_and_match_jax(name):
    want = np.asarray(CASES[name](jjnp))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = CASES[name](jnp)
    np.testing.assert_array_equal(np.asarray(got), want)
    assert got.dtype == want.dtype


def test_transformed_functions_run_eagerly_are_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = kiln.grad(jnp.log)(0.0)
        v = kiln.vmap(lambda x: 1 / x)(jnp.array([0.0, 1.0]))
        t = kiln.jvp(jnp.sqrt, (0.0,), (1.0,))[1]
    assert float(g) == float(jax.grad(jjnp.log)(0.0)) == np.inf
    assert float(t) == float(jax.jvp(jjnp.sqrt, (0.0,), (1.0,))[1]) == np.inf
    np.testing.assert_array_equal(v, [np.inf, 1.0])


def test_the_users_numpy_keeps_its_warnings():
    jnp.log(0.0)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        np.log(np.zeros(1))


@pytest.mark.parametrize("op", [lambda x, y: x / y, jnp.divide, lambda x, y: (x - y) * np.inf])
def test_debug_nans_after_the_eager_fast_path_is_warm(op):
    one, zero = jnp.ones(3), jnp.zeros(3)
    op(one, one), op(one, one)        # the fast path's cache is filled
    with kiln.debug_nans(True):
        with pytest.raises(FloatingPointError, match="nan"):
            op(zero, zero)
    with kiln.debug_infs(True):
        with pytest.raises(FloatingPointError, match="inf"):
            one / zero
    assert np.isnan(op(zero, zero)).all()
