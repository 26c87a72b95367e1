"""Staticness of the transforms' arguments outside `jit` (runtime/staging.py, `static_mask`).

JAX traces only what it differentiates: outside `jit`, the other arguments of `grad`,
`value_and_grad`, `vjp` and `jvp` (Python bools, ints, strings, floats; int primals, whose
tangents are float0), and the unmapped non-array arguments of `vmap`, are concrete, so a flag
can be `keepdims`, choose branches of different shapes, index a Python tuple or name a mode. The expected values are JAX 0.10.2's, recorded by
`tests/goldens/make_static_args_goldens.py` from the programs in `static_args_programs.py`.
"""
import json
import logging
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln.compiler.errors import ConcretizationError

import static_args_programs as programs
from static_args_programs import X, T, keepdims_sum, keepdims_out, by_mode

with open(os.path.join(os.path.dirname(__file__), "goldens", "static_args_jax_0_10_2.json")) as f:
    GOLDENS = json.load(f)


def _close(got, want):
    """Nested results equal to the golden's within float32 rounding."""
    try:
        want_array = np.asarray(want, np.float64)
    except ValueError:   # ragged: a tuple of results of different shapes
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w)
        return
    np.testing.assert_allclose(np.asarray(got, np.float64), want_array, rtol=2e-6, atol=1e-6)


def test_every_case_has_a_golden():
    assert sorted(c[0] for c in programs.CASES) == sorted(GOLDENS)


@pytest.mark.parametrize("case", programs.CASES, ids=[c[0] for c in programs.CASES])
def test_matches_jax(case):
    _close(programs.run(kiln, kiln.ad.float0, case), GOLDENS[case[0]])


def test_output_shape_follows_the_flag():
    out, pullback = kiln.vjp(keepdims_out, X, True)
    assert out.shape == (1, 3)
    assert pullback(jnp.ones((1, 3)))[1].dtype == kiln.ad.float0
    assert kiln.vjp(keepdims_out, X, False)[0].shape == (3,)
    assert kiln.jvp(keepdims_out, (X, False), (T, np.zeros((), kiln.ad.float0)))[1].shape == (3,)


def test_linearize_takes_static_int_primals():
    out, f_jvp = kiln.linearize(keepdims_out, X, True)
    assert out.shape == (1, 3)
    np.testing.assert_allclose(f_jvp(T, np.zeros((), kiln.ad.float0)), [[1.0, 0.0, -5.5]])


def test_static_values_key_the_cache_with_their_type():
    def f(x, n):
        return jnp.sum(x) * len(str(n))   # True -> "True", 1 -> "1": equal in Python
    g = kiln.grad(f)
    np.testing.assert_allclose(g(X, True), np.full(X.shape, 4.0))
    np.testing.assert_allclose(g(X, 1), np.full(X.shape, 1.0))
    np.testing.assert_allclose(g(X, 10), np.full(X.shape, 2.0))


def _compiles(caplog, monkeypatch, run):
    monkeypatch.setenv("KILN_LOG_COMPILES", "1")
    with caplog.at_level(logging.WARNING, logger="kiln"):
        caplog.clear()
        run()
    return [r.getMessage() for r in caplog.records if "compiling" in r.getMessage()]


def test_a_float_the_function_only_computes_with_is_traced(caplog, monkeypatch):
    def scaled(x, rate):
        return jnp.sum(x * rate)
    g = kiln.grad(scaled)
    rates = (0.1, 0.2, 0.3, 0.4)
    results = []
    logs = _compiles(caplog, monkeypatch, lambda: results.extend(g(X, r) for r in rates))
    assert len(logs) == 1, logs   # one derivative serves every rate
    for r, got in zip(rates, results):
        np.testing.assert_allclose(got, np.full(X.shape, r, np.float32))


def test_a_float_the_function_needs_is_static_by_value(caplog, monkeypatch):
    def head(x, length):
        return jnp.sum(x[:, :int(length)] ** 2)
    g = kiln.grad(head)
    results = []
    logs = _compiles(caplog, monkeypatch,
                     lambda: results.extend([g(X, 1.0), g(X, 1.0), g(X, 2.0)]))
    # The traced try (which needs int(length)), then one specialisation per value.
    assert logs == ["kiln: compiling grad_head for f32[2,3], f32[]",
                    "kiln: compiling grad_head for f32[2,3]",
                    "kiln: compiling grad_head for f32[2,3]"]
    for length, got in zip((1, 1, 2), results):
        want = np.where(np.arange(3) < length, 2 * X, 0)
        np.testing.assert_allclose(got, want)


def test_conditional_on_a_traced_float_compiles():
    # kiln compiles `a if rate > 0 else b` on a traced value (JAX would need it concrete).
    def clipped(x, rate):
        return jnp.sum(x) * rate if rate > 0 else jnp.sum(x * x)
    g = kiln.grad(clipped)
    np.testing.assert_allclose(g(X, 0.5), np.full(X.shape, 0.5))
    np.testing.assert_allclose(g(X, -2.0), 2 * X)


def test_differentiating_a_python_float_argument_still_traces_it():
    def f(x, scale):
        return jnp.sum(x) * scale ** 2
    np.testing.assert_allclose(kiln.grad(f, argnums=1)(X, 3.0), 2 * 3.0 * X.sum(), rtol=1e-6)
    np.testing.assert_allclose(kiln.grad(f, argnums=(0, 1))(X, 3.0)[0], np.full(X.shape, 9.0))


def test_unhashable_static_values_run_uncached():
    class Config:
        __hash__ = None

        def __init__(self, keep):
            self.keep = keep

    def f(x, config):
        return jnp.sum(jnp.sum(x * x, axis=0, keepdims=config.keep))
    g = kiln.grad(f)
    np.testing.assert_allclose(g(X, Config(True)), 2 * X)
    np.testing.assert_allclose(g(X, Config(False)), 2 * X)


@pytest.mark.parametrize("call", [
    lambda: kiln.vjp(by_mode, X, "max"),
    lambda: kiln.jvp(by_mode, (X, "max"), (T, "max")),
], ids=["vjp", "jvp"])
def test_string_primals_are_rejected_as_in_jax(call):
    # JAX 0.10.2: TypeError "Argument 'max' of type <class 'str'> is not a valid JAX type".
    with pytest.raises(TypeError, match=r"of type <class 'str'> is not a valid kiln type"):
        call()


def test_inside_jit_the_arguments_stay_traced():
    with pytest.raises(ConcretizationError, match="static_argnums"):
        kiln.jit(kiln.grad(keepdims_sum))(X, True)
    want = GOLDENS["grad_keepdims_sum_True"]
    _close(kiln.jit(kiln.grad(keepdims_sum), static_argnums=1)(X, True).tolist(), want)
    # A Python literal inside the jitted function is a static value of the inner grad.
    _close(kiln.jit(lambda x: kiln.grad(keepdims_sum)(x, True))(X).tolist(), want)
    _close(kiln.jit(lambda x: kiln.vjp(keepdims_out, x, True)[1](jnp.ones((1, 3)))[0])(X)
           .tolist(), (2 * X).tolist())


def test_make_ir_shows_the_static_specialisation():
    kept, dropped = (str(kiln.make_ir(kiln.grad(keepdims_sum))(X, flag)) for flag in (True, False))
    for text in (kept, dropped):   # the flag is no input: it was specialised away
        assert text.startswith("def grad_keepdims_sum(x: 'f32[2,3]', const"), text
        assert "flag" not in text.splitlines()[0]
    assert "f32[1,3]" in kept and "f32[1,3]" not in dropped


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), keep=st.booleans(),
       data=st.data())
def test_keepdims_and_axis_static_over_shapes(shape, keep, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 7

    def f(x, axis, keep):
        return jnp.sum(jnp.sum(x * x, axis=axis, keepdims=keep))
    np.testing.assert_allclose(kiln.grad(f)(x, axis, keep), 2 * x, rtol=1e-6)
    v, g = kiln.value_and_grad(f)(x, axis, keep=keep)
    np.testing.assert_allclose(v, np.sum(x * x), rtol=1e-5)
    np.testing.assert_allclose(g, 2 * x, rtol=1e-6)
