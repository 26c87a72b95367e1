"""kiln.experimental.hijax's VJPHiPrimitive (JAX's class-based custom derivatives) against
JAX 0.10.2 on the examples of JAX's custom-derivatives page: reverse-mode and forward-mode
rules, a rule that runs the primitive again (fixed points, second derivatives), pytrees of
types, Python `if` in the methods, vmap, and a missing rule."""
from collections import namedtuple
from functools import partial

import numpy as np
import pytest

import kiln
import kiln.numpy as kjnp
from kiln.experimental import hijax as khijax

jax = pytest.importorskip("jax")
import jax.experimental.hijax as jhijax  # noqa: E402

SIDES = [(kiln, kjnp, khijax), (jax, jax.numpy, jhijax)]
Point = namedtuple("Point", ["x", "y"])


def _classes(module, jnp, hijax):
    class Log1pExp(hijax.VJPHiPrimitive):   # forward and reverse rules
        def __init__(self, x_aval):
            self.in_avals, self.out_aval, self.params = (x_aval,), x_aval, {}
            super().__init__()

        def expand(self, x):
            return jnp.log(1. + jnp.exp(x))

        def vjp_fwd(self, nzs_in, x):
            return self(x), x

        def vjp_bwd_retval(self, x, g):
            return ((1 - 1 / (1 + jnp.exp(x))) * g,)

        def jvp(self, primals, tangents):
            (x,), (x_dot,) = primals, tangents
            return self(x), (1 - 1 / (1 + jnp.exp(x))) * x_dot

        def batch_dim_rule(self, axis_data, in_dims):   # JAX's vmap needs it; kiln's not
            return in_dims[0]

    class FixedPoint(hijax.VJPHiPrimitive):   # its backward rule runs another FixedPoint
        def __init__(self, a_aval, x_aval, *, f):
            self.in_avals, self.out_aval, self.params = (a_aval, x_aval), x_aval, dict(f=f)
            super().__init__()

        def expand(self, a, x_guess):
            def cond_fun(carry):
                x_prev, x = carry
                return jnp.abs(x_prev - x) > 1e-6

            def body_fun(carry):
                _, x = carry
                return x, self.f(a, x)
            return module.lax.while_loop(cond_fun, body_fun, (x_guess, self.f(a, x_guess)))[1]

        def vjp_fwd(self, nzs_in, a, x_guess):
            x_star = self(a, x_guess)
            return x_star, (a, x_star)

        def vjp_bwd_retval(self, res, x_star_bar):
            a, x_star = res
            _, vjp_a = module.vjp(lambda a: self.f(a, x_star), a)
            a_bar, = vjp_a(fixed_point(partial(rev_iter, self.f), (a, x_star, x_star_bar),
                                       x_star_bar))
            return a_bar, jnp.zeros_like(x_star)

    def rev_iter(f, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = module.vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    def fixed_point(f, a, x_guess):
        types = module.tree_util.tree_map(module.typeof, (a, x_guess))
        return FixedPoint(*types, f=f)(a, x_guess)

    def newton_sqrt(a):
        return fixed_point(lambda a, x: 0.5 * (x + a / x), a, a)

    class Branchy(hijax.VJPHiPrimitive):   # Python `if` on values in the methods
        def __init__(self, x_aval):
            self.in_avals, self.out_aval, self.params = (x_aval,), x_aval, {}
            super().__init__()

        def expand(self, x):
            if x > 0:
                return jnp.sin(x)
            return jnp.cos(x)

        def vjp_fwd(self, nzs_in, x):
            return self(x), x

        def vjp_bwd_retval(self, x, g):
            if x > 0:
                return (2 * g,)
            return (3 * g,)

    class OnPoints(hijax.VJPHiPrimitive):   # pytrees of types in and out
        def __init__(self, pt_aval):
            self.in_avals = (pt_aval,)
            self.out_aval = {"a": pt_aval.x, "b": (pt_aval.x, pt_aval.y)}
            self.params = {}
            super().__init__()

        def expand(self, pt):
            return {"a": pt.x ** 2, "b": (jnp.sin(pt.x), jnp.cos(pt.y))}

        def vjp_fwd(self, nzs_in, pt):
            return self(pt), pt

        def vjp_bwd_retval(self, pt, g):
            g = module.tree_util.tree_map(hijax.instantiate_zeros, g,
                                          is_leaf=lambda x: isinstance(x, hijax.Zero))
            x_bar = 2 * pt.x * g["a"] + jnp.cos(pt.x) * g["b"][0]
            return (Point(x_bar, -jnp.sin(pt.y) * g["b"][1]),)

    class Sin(hijax.VJPHiPrimitive):   # forward mode by lin / linearized
        def __init__(self, x_aval):
            self.in_avals, self.out_aval, self.params = (x_aval,), x_aval, {}
            super().__init__()

        def expand(self, x):
            return jnp.sin(x)

        def lin(self, nzs_in, x):
            return self(x), jnp.cos(x)

        def linearized(self, cos_x, x_dot):
            return cos_x * x_dot

    class Square(hijax.VJPHiPrimitive):   # no rules
        def __init__(self, x_aval):
            self.in_avals, self.out_aval, self.params = (x_aval,), x_aval, {}
            super().__init__()

        def expand(self, x):
            return x * x

    def call(cls):
        return lambda *args: cls(*[module.typeof(a) for a in args])(*args)
    return dict(log1pexp=call(Log1pExp), sqrt=newton_sqrt, branchy=call(Branchy),
                sin=call(Sin), square=call(Square),
                on_points=lambda pt: OnPoints(module.tree_util.tree_map(module.typeof, pt))(pt))


def _close(got, want):
    for a, b in zip(kiln.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-6, atol=1e-7)


def _both(run):
    (k, kf), (j, jf) = [(module, _classes(module, jnp, hijax)) for module, jnp, hijax in SIDES]
    _close(run(k, kf), run(j, jf))


def test_rules_give_jaxs_derivatives():
    _both(lambda m, f: (m.grad(f["log1pexp"])(100.), m.jit(m.grad(f["log1pexp"]))(3.),
                        m.jvp(f["log1pexp"], (100.,), (1.,)),
                        m.vmap(m.grad(f["log1pexp"]))(np.arange(3, dtype=np.float32))))
    assert float(kiln.grad(_classes(*SIDES[0])["log1pexp"])(100.)) == 1.0   # not nan


def test_a_rule_that_runs_the_primitive_again():
    _both(lambda m, f: (f["sqrt"](2.), m.grad(f["sqrt"])(2.), m.grad(m.grad(f["sqrt"]))(2.)))


def test_python_branches_pytrees_and_linearize():
    pt = Point(1., 2.)
    _both(lambda m, f: (m.grad(f["branchy"])(1.), m.grad(f["branchy"])(-1.),
                        f["on_points"](pt),
                        m.grad(lambda p: f["on_points"](p)["a"] + f["on_points"](p)["b"][0])(pt),
                        m.linearize(f["sin"], 3.)[1](1.), m.jit(f["square"])(3.)))


def test_a_missing_rule_is_an_error_when_a_derivative_needs_it():
    square = _classes(*SIDES[0])["square"]
    assert float(kiln.jit(square)(3.)) == 9.0
    with pytest.raises(NotImplementedError, match="for grad support, subclass Square must "
                                                  "implement `vjp_fwd`"):
        kiln.grad(square)(3.)
    with pytest.raises(AttributeError, match="should set `self.out_aval`"):
        class Bad(khijax.VJPHiPrimitive):
            def __init__(self):
                self.in_avals, self.params = (), {}
                super().__init__()
        Bad()
