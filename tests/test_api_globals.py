"""Writes to globals in jitted code (`global g; g = value`): kiln assigns the value each call
computed after the call, as an effect (JAX leaks a tracer into `g` instead)."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.errors import CompileError

LAST = None
COUNT = 0
ACC = None


def _remember(x):
    global LAST, COUNT
    y = jnp.sin(x) * 2
    LAST = {"y": y, "tag": "sin"}   # a pytree with a traced and a static leaf
    COUNT += 1                      # read, then written: the next call specialises again
    return y + 1


def test_global_written_after_each_call():
    f = kiln.jit(_remember)
    for v in (0.5, 1.5):
        out = f(jnp.full(3, v))
        np.testing.assert_allclose(LAST["y"], np.full(3, 2 * np.sin(v)), rtol=1e-6)
        np.testing.assert_allclose(out, LAST["y"] + 1, rtol=1e-6)
        assert LAST["tag"] == "sin" and isinstance(LAST["y"], kiln.Array)
    assert COUNT == 2


def _accumulate(x):
    global ACC
    ACC = ACC + x
    helper = ACC * 1           # a read after the write sees the new value
    return helper.sum()


def test_read_after_write_and_accumulation():
    global ACC
    ACC = jnp.zeros(2)
    f = kiln.jit(_accumulate)
    assert [float(f(jnp.ones(2))) for _ in range(3)] == [2.0, 4.0, 6.0]
    np.testing.assert_array_equal(ACC, [3.0, 3.0])


def _in_branch(x):
    global LAST
    if x.sum() > 0:
        LAST = x
    return x


def test_write_under_traced_branch_is_refused():
    with pytest.raises(CompileError, match="inside a loop or branch on traced values"):
        kiln.jit(_in_branch)(jnp.ones(2))


def _for_grad(x):
    global LAST
    LAST = x
    return x.sum()


def test_traced_write_under_grad_is_refused():
    with pytest.raises(CompileError, match="assigning a traced value to global 'LAST' is "
                                           "supported in functions compiled by kiln.jit"):
        kiln.grad(_for_grad)(jnp.ones(2))


DEPTH = 0
SEEN = []


def _counting(x):
    """JAX's jax-primitives page's tracing helper: a call depth kept in a global."""
    global DEPTH
    DEPTH = DEPTH + 1
    SEEN.append(DEPTH)
    y = jnp.sin(x) * x
    DEPTH = DEPTH - 1
    return y


def _outer(x):
    global DEPTH
    DEPTH = DEPTH + 1
    y = _counting(x)
    DEPTH = DEPTH - 1
    return y


def test_static_writes_under_transforms():
    """Static values written under grad / jvp / vmap (and inside a jit): assigned as the
    specialisation runs, and read back by the code specialised after them."""
    x = np.float32(0.5)
    want = np.cos(x) * x + np.sin(x)
    for f in (kiln.grad(_outer), kiln.jit(kiln.grad(_outer)),
              lambda x: kiln.jvp(_outer, (x,), (np.float32(1.),))[1],
              lambda x: kiln.vmap(kiln.grad(_outer))(jnp.full((2,), x))[0]):
        SEEN.clear()
        np.testing.assert_allclose(f(x), want, rtol=1e-6)
        assert DEPTH == 0 and SEEN and all(d == 2 for d in SEEN), SEEN
