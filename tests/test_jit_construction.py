"""Making a jit object is cheap: without static or donated arguments it reads no signature,
the signature of a plain function is read once per code object (fresh closures and lambdas of
one code share it), and the checks JAX makes at `jit` time still happen."""
import functools
import inspect

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import staging


@pytest.fixture
def signature_calls(monkeypatch):
    calls = []
    real = inspect.signature

    def counting(fun, *a, **kw):
        calls.append(fun)
        return real(fun, *a, **kw)
    monkeypatch.setattr(inspect, "signature", counting)
    staging._PARAMETERS.clear()
    return calls


def _make(k):
    def scaled(x, n):
        return x * k * n
    return scaled


def test_plain_jit_reads_no_signature(signature_calls):
    f = kiln.jit(_make(2))
    assert not signature_calls
    np.testing.assert_allclose(f(jnp.ones(2), 3.0), 6 * np.ones(2))


def test_closures_of_one_code_read_it_once(signature_calls):
    for k in (2, 3, 4):
        f = kiln.jit(_make(k), static_argnames="n")
        assert float(f(jnp.ones(()), n=5)) == 5 * k
    assert len(signature_calls) == 1


def test_checks_at_jit_time_still_made():
    with pytest.raises(ValueError, match="only accepts 2 positional arguments"):
        kiln.jit(_make(2), static_argnums=4)
    with pytest.raises(ValueError, match="invalid argnames"):
        kiln.jit(_make(2), static_argnames="m")
    with pytest.raises(ValueError, match="only accepts 2 positional arguments"):
        kiln.jit(_make(2), donate_argnums=3)


def test_a_wrapper_is_checked_against_the_function_it_wraps():
    inner = _make(2)

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        return inner(*args, **kwargs)
    with pytest.raises(ValueError, match="invalid argnames"):
        kiln.jit(wrapper, static_argnames="m")
    f = kiln.jit(wrapper, static_argnums=1)
    assert float(f(jnp.ones(()), 3)) == 6
    assert f._static.names == {"n"}


def test_input_names_come_from_the_signature_when_needed():
    f = kiln.jit(lambda weights, bias: weights + bias)
    text = f.lower(jnp.ones(2), jnp.ones(2)).as_text()
    assert "weights" in text and "bias" in text
