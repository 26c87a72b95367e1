"""kiln.debug.breakpoint and Python's breakpoint() inside compiled functions: a pdb session
with the function's variables at their run-time values (runtime/debugger.py)."""
import io
import sys

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp


def sin_times_cos(x):
    y, z = jnp.sin(x), jnp.cos(x)
    kiln.debug.breakpoint()
    return y * z


def scaled(x):
    scale = 3
    w = x * scale
    breakpoint()
    return w


def _session(monkeypatch, capsys, commands, fn, *args):
    monkeypatch.setattr(sys, "stdin", io.StringIO(commands))
    out = fn(*args)
    return out, capsys.readouterr().out


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_a_breakpoint_shows_run_time_values_at_every_call(monkeypatch, capsys, backend):
    f = kiln.jit(sin_times_cos, backend=backend)
    out, text = _session(monkeypatch, capsys, "p round(float(y), 5)\np round(float(z), 5)\nc\n", f, 2.0)
    assert f"test_debugger.py:{sin_times_cos.__code__.co_firstlineno + 2}" in text
    assert "locals: x, y, z" in text
    assert f"(Pdb) {round(np.sin(2.0), 5)}\n(Pdb) {round(np.cos(2.0), 5)}\n" in text
    np.testing.assert_allclose(out, np.sin(2.0) * np.cos(2.0), rtol=1e-6)
    _, text = _session(monkeypatch, capsys, "p float(x)\nc\n", f, 0.5)   # the next call's
    assert "0.5" in text


def test_python_breakpoint_sees_static_and_traced_variables(monkeypatch, capsys):
    out, text = _session(monkeypatch, capsys, "p scale\np w.tolist()\nc\n", kiln.jit(scaled),
                         jnp.arange(3.0))
    assert "\n(Pdb) 3\n" in text and "[0.0, 3.0, 6.0]" in text
    np.testing.assert_array_equal(out, [0.0, 3.0, 6.0])


def test_end_of_input_continues_and_the_switch_turns_it_off(monkeypatch, capsys):
    out, text = _session(monkeypatch, capsys, "", kiln.jit(scaled), jnp.ones(2))
    assert "Entering kiln's debugger" in text
    np.testing.assert_array_equal(out, [3.0, 3.0])
    monkeypatch.setenv("PYTHONBREAKPOINT", "0")
    kiln.clear_caches()
    _, text = _session(monkeypatch, capsys, "", kiln.jit(scaled), jnp.ones(3))
    assert "debugger" not in text


def test_under_vmap_it_stops_once_per_example(monkeypatch, capsys):
    out, text = _session(monkeypatch, capsys, "c\nc\n", kiln.jit(kiln.vmap(sin_times_cos)),
                         jnp.array([0.0, 1.0]))
    assert text.count("Entering kiln's debugger") == 2


def test_ordered_and_token_are_exclusive():
    def f(x):
        kiln.debug.breakpoint(ordered=True, token=x)
        return x
    with pytest.raises(ValueError, match="mutually exclusive"):
        kiln.jit(f)(1.0)
