"""`nonlocal` in compiled functions, as Python runs it while JAX traces: a nested function's
writes reach the enclosing function's variable; a function defined outside writes its closure
cell while kiln specialises (once, as JAX's trace does: optax's cosine_decay_schedule does
this). Expected values recorded with JAX 0.10.2; a traced value that would outlive the call
is refused, with the line."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.errors import CompileError


def make_scaler():
    n = 3

    def scale(x):
        nonlocal n
        n = float(n)   # optax's schedules turn an int into a float this way
        return x * n
    return scale


def summed(x):
    total = 0.0

    def add(v):
        nonlocal total
        total = total + v
    for i in range(3):
        add(x * i)
    return total


def counted(x):
    count = 0

    def bump():
        nonlocal count
        count += 1
        return count
    bump()
    bump()
    return x + count


def make_leaky():
    seen = None

    def remember(x):
        nonlocal seen
        seen = x
        return x
    return remember


def in_traced_loop(x):
    total = x

    def add(v):
        nonlocal total
        total = total + v
    while x.sum() < 10:
        add(x)
        x = x * 2
    return x


def test_closure_cell_written_while_specialising():
    scale = make_scaler()
    out = kiln.jit(scale)(jnp.ones(2))
    np.testing.assert_array_equal(np.asarray(out), [3.0, 3.0])
    assert scale.__closure__[0].cell_contents == 3.0
    assert type(scale.__closure__[0].cell_contents) is float   # as after JAX's trace


def test_nested_function_writes_the_enclosing_local():
    # JAX 0.10.2: jit(summed)(ones(2)) = [3, 3]; grad of its sum = [3, 3]
    np.testing.assert_array_equal(np.asarray(kiln.jit(summed)(jnp.ones(2))), [3.0, 3.0])
    g = kiln.grad(lambda x: summed(x).sum())(jnp.ones(2))
    np.testing.assert_array_equal(np.asarray(g), [3.0, 3.0])
    # JAX 0.10.2: jit(counted)(1.0) = 3.0, vmap(counted)(ones(2)) = [3, 3]
    assert float(kiln.jit(counted)(1.0)) == 3.0
    np.testing.assert_array_equal(np.asarray(kiln.vmap(counted)(jnp.ones(2))), [3.0, 3.0])


def test_traced_value_that_would_outlive_the_call_is_refused():
    with pytest.raises(CompileError) as e:
        kiln.jit(make_leaky())(1.0)
    message = str(e.value)
    assert "assigning nonlocal 'seen'" in message and "would outlive the call" in message
    assert "seen = x" in message and "Return the new value instead" in message


def test_traced_value_inside_a_traced_loop_is_refused():
    with pytest.raises(CompileError) as e:
        kiln.jit(in_traced_loop)(jnp.ones(2))
    message = str(e.value)
    assert "assigning nonlocal 'total' a traced value inside a loop or branch" in message
    assert "total = total + v" in message
