"""Every primitive is differentiable or says it has a zero derivative; the structural rules
(control flow, custom rules, rematerialisation, tapes) pass `check_grads` to second order.

The per-family rule tests are tests/test_ad_rules_{elementwise,structural,reductions}.py; the
program corpus is tests/test_ad_corpus.py.
"""
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.primitives import PRIMITIVES
from kiln.compiler.primitives.core import JVP, VJP, VJP_FORWARD
from kiln.test_util import check_grads

EXAMPLES = settings(max_examples=4, deadline=None)
pytestmark = pytest.mark.usefixtures("x64_module")

# The primitives whose reverse mode needs values from inside their regions (a user primitive's:
# the JVP rule it transposes, kiln.extend).
FORWARD_RULES = {"while_loop", "scan", "custom_vjp_call", "user_primitive"}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_every_primitive_has_jvp_and_vjp_rules_or_a_zero_derivative(name):
    prim = PRIMITIVES[name]
    derivative_tables = (JVP, VJP, VJP_FORWARD)
    if prim.zero_derivative:
        assert not any(prim in table for table in derivative_tables), name
        return
    assert callable(JVP.get(prim)), f"{name} has no JVP rule"
    assert callable(VJP.get(prim)), f"{name} has no VJP rule"
    assert (prim in VJP_FORWARD) == (name in FORWARD_RULES), name


def _vec(seed, n=3, lo=0.2, hi=1.0):
    return np.random.RandomState(seed).uniform(lo, hi, n)


def cond_fn(x, k):
    return lax.cond(k > 0, lambda v: jnp.sin(v) * v, lambda v: jnp.exp(v) * 2.0, x)


def switch_fn(x, k):
    return lax.switch(k, [jnp.sin, jnp.cos, lambda v: v * v * v], x)


def while_fn(x, k):
    def body(c):
        i, v = c
        return i + 1, v * 1.1 + jnp.sin(v) * 0.1
    return lax.while_loop(lambda c: jnp.sum(c[1]) < 4.0 + k, body, (0, x))[1]


def _while_trips(x, k):
    """while_fn's trip count, in NumPy (the loop's sum grows with every element of x)."""
    v, trips = np.asarray(x, np.float64), 0
    while v.sum() < 4.0 + k:
        v, trips = v * 1.1 + np.sin(v) * 0.1, trips + 1
    return trips


def scan_fn(x, k):
    def step(c, row):
        c = c * jnp.cos(row) + row * 0.5
        return c, c * c
    c, ys = lax.scan(step, x, jnp.outer(jnp.arange(1.0, 4.0), x) * 0.1 * (k + 1))
    return jnp.sum(c) + jnp.sum(ys)


def fori_fn(x, k):
    return lax.fori_loop(0, k + 2, lambda i, v: v * jnp.tanh(v + i), x)


@kiln.custom_jvp
def softplus(x):
    return jnp.log1p(jnp.exp(x))


@softplus.defjvp
def softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t / (1.0 + jnp.exp(-x))


def custom_jvp_fn(x, k):
    return softplus(x * (k + 1.0)) * x


@kiln.custom_vjp
def scaled_sin(x):
    return jnp.sin(x) * 3.0


scaled_sin.defvjp(lambda x: (scaled_sin(x), jnp.cos(x)), lambda c, g: (3.0 * c * g,))


def custom_vjp_fn(x, k):
    return jnp.sum(scaled_sin(x * (k + 1.0)))


def remat_fn(x, k):
    layer = kiln.checkpoint(lambda v: jnp.tanh(v * 1.3 + k) * v)
    return layer(layer(x))


CASES = {"cond": cond_fn, "switch": switch_fn, "while_loop": while_fn, "scan": scan_fn,
         "fori_loop": fori_fn, "custom_jvp": custom_jvp_fn, "remat": remat_fn}


@pytest.mark.parametrize("name", sorted(CASES))
@EXAMPLES
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(0, 2), n=st.sampled_from([1, 3]))
def test_structural_rules_to_second_order(name, seed, k, n):
    f = CASES[name]
    x = _vec(seed, n)
    if name == "while_loop":   # finite differences across a change of trip count are no test
        assume(_while_trips(x - 1e-2, k) == _while_trips(x + 1e-2, k))
    check_grads(lambda v: f(v, k), (x,), order=2, modes=("fwd", "rev"))
    check_grads(kiln.jit(lambda v: f(v, k)), (x,), order=2, modes=("fwd", "rev"))


@EXAMPLES
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(0, 2))
def test_custom_vjp_to_second_order_in_reverse_mode(seed, k):
    check_grads(lambda v: custom_vjp_fn(v, k), (_vec(seed),), order=2, modes=("rev",))
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        kiln.jvp(lambda v: custom_vjp_fn(v, k), (_vec(seed),), (_vec(seed),))


def test_custom_rules_are_what_gets_differentiated():
    @kiln.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), t[0] * 100.0))
    assert float(kiln.grad(f)(0.3)) == pytest.approx(100.0)
    assert float(kiln.jit(kiln.grad(f))(0.3)) == pytest.approx(100.0)
    g = kiln.custom_vjp(lambda x: x * 2.0)
    g.defvjp(lambda x: (x * 2.0, None), lambda r, ct: (ct * -1.0,))
    assert float(kiln.grad(g)(0.3)) == -1.0


def test_stop_gradient_has_zero_derivative():
    f = lambda x: x * lax.stop_gradient(x) + lax.stop_gradient(jnp.sin(x))  # noqa: E731
    assert float(kiln.grad(f)(2.0)) == 2.0
    assert float(kiln.grad(kiln.grad(f))(2.0)) == 0.0
    assert float(kiln.jvp(f, (2.0,), (1.0,))[1]) == 2.0
    i = lax.stop_gradient(jnp.arange(3))
    assert i.dtype == jnp.arange(3).dtype


@EXAMPLES
@given(seed=st.integers(0, 2**31 - 1))
def test_data_dependent_while_loop_reverses_through_a_tape_to_third_order(seed):
    x0 = float(_vec(seed, 1)[0])

    def grow(x):  # trip count depends on x: x * 1.5**n with n the first n past 10
        while x < 10.0:
            x = x * 1.5 + 0.01 * x * x
        return x
    check_grads(grow, (x0,), order=3, modes=("rev",))
    check_grads(grow, (x0,), order=2, modes=("fwd", "rev"))
    ir = str(kiln.make_ir(kiln.grad(grow))(x0))
    assert "tape_push" in ir and "tape_pop" in ir


def test_a_primitive_without_a_rule_is_a_located_compile_error():
    from kiln.compiler.errors import CompileError
    from kiln.compiler.primitives.core import Primitive
    from kiln.dispatch import bind
    unruly = Primitive("unruly", lambda x: x, lambda x: x)   # not registered: no rules

    def f(x):
        y = bind(unruly, x * 2.0)
        return y * y

    for transform in (kiln.grad, lambda g: (lambda x: kiln.jvp(g, (x,), (1.0,)))):
        with pytest.raises(CompileError) as e:
            transform(f)(1.0)
        msg = str(e.value)
        assert "cannot differentiate the primitive 'unruly'" in msg
        assert "test_ad_completeness.py" in msg and "y = bind(unruly, x * 2.0)" in msg
        assert "^" in msg and "stop_gradient" in msg
