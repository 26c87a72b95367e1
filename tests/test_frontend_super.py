"""`super()` without arguments in methods kiln specialises (jaxopt's solvers call
`super().update(...)` inside a jitted `update`): the class the method was defined in and its
first argument, as Python finds them. Expected values: Python running the same methods."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.errors import CompileError


class Base:
    def __init__(self, scale):
        self.scale = scale

    def update(self, x, shift):
        return x * self.scale + shift

    @classmethod
    def make(cls, x):
        return x + cls.offset()

    @classmethod
    def offset(cls):
        return 1.0


class Child(Base):
    def update(self, x):
        return super().update(x, 1.0) * 2

    @classmethod
    def make(cls, x):
        return super().make(x) * 3


class GrandChild(Child):
    def update(self, x):
        return super().update(x) + 100

    @classmethod
    def offset(cls):
        return 10.0


def bare_super(x):
    return super().__init__(x)


def test_super_in_jitted_methods_matches_python():
    x = np.arange(3.0, dtype=np.float32)
    for obj in (Child(2.0), GrandChild(2.0)):
        want = obj.update(x)
        np.testing.assert_array_equal(np.asarray(kiln.jit(obj.update)(jnp.asarray(x))), want)
    np.testing.assert_array_equal(np.asarray(kiln.jit(GrandChild.make)(jnp.asarray(x))),
                                  GrandChild.make(x))   # cls is GrandChild: offset 10
    g = kiln.grad(lambda v: GrandChild(3.0).update(v).sum())(jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(g), [6.0, 6.0, 6.0])


def test_super_outside_a_method_is_a_located_error():
    with pytest.raises(CompileError) as e:
        kiln.jit(bare_super)(1.0)
    assert "super() without arguments works only in a method" in str(e.value)
    assert "return super().__init__(x)" in str(e.value)
