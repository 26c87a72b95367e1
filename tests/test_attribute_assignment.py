"""`obj.name = value` in compiled code: done at specialisation, as Python (and JAX's tracing)
does it. Arrays may go into objects the function made; an array stored into an object that
outlives the call, or inside a traced branch or loop, is a located CompileError."""
import dataclasses

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.errors import CompileError


class Counter:
    def __init__(self, x):
        self.x = x
        self.n = 0

    def inc(self):
        self.n += 1
        return self.x + self.n


def twice_incremented(x):
    c = Counter(x)
    c.inc()
    c.scale = c.x * 2.0          # an array into an object the function made
    return c.inc() + c.scale


def test_objects_made_in_the_function_can_be_changed():
    x = np.arange(3.0, dtype=np.float32)
    np.testing.assert_allclose(kiln.jit(twice_incremented)(x), x + 2 + 2 * x)
    np.testing.assert_allclose(kiln.grad(lambda v: twice_incremented(v).sum())(x),
                               np.full(3, 3.0))


class StaticCounter:
    def __init__(self):
        self.n = 0

    def count(self):
        self.n += 1
        return self.n


def test_a_static_attribute_of_self_is_set_while_specialising():
    # stateful-computations.md: the side effect happens once, as in JAX (prints 1, 1, 1).
    counter = StaticCounter()
    fast = kiln.jit(counter.count)
    assert [int(fast()) for _ in range(3)] == [1, 1, 1]
    assert counter.n == 1


@kiln.tree_util.register_dataclass
@dataclasses.dataclass
class State:
    step: object
    w: object


def advance(s):
    s.step = s.step + 1     # the argument is rebuilt around traced values: a new object
    s.w = s.w * 2
    return s


def test_a_pytree_argument_can_be_changed_and_returned():
    s = State(np.int32(0), np.ones(2, np.float32))
    out = kiln.jit(advance)(s)
    assert int(out.step) == 1 and np.array_equal(out.w, [2.0, 2.0])
    assert s.step == 0 and np.array_equal(s.w, [1.0, 1.0])   # the caller's object is unchanged
    real = State(np.float32(0), s.w)
    np.testing.assert_allclose(kiln.grad(lambda t: advance(t).w.sum())(real).w, [2.0, 2.0])


class Box:
    value = None


BOX = Box()


def stores_into_global(x):
    BOX.value = x * 2
    return x


def stores_under_traced_if(x):
    b = Box()
    if x.sum() > 0:
        b.value = x
    return x


@pytest.mark.parametrize("fn,text", [
    (stores_into_global, "existed before the compiled function was called"),
    (stores_under_traced_if, "inside a loop or branch on traced values"),
])
def test_arrays_that_would_escape_are_refused(fn, text):
    with pytest.raises(CompileError) as info:
        kiln.jit(fn)(jnp.ones(2))
    assert text in str(info.value) and "attribute 'value'" in str(info.value)
    assert BOX.value is None
