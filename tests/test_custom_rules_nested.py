"""A custom function called inside its own rule (JAX's external-callbacks guide: `jv` over a
pure_callback whose JVP calls `jv`): derivatives of every order use the user's rules, under
jit, vmap and with traced non-differentiable arguments."""
import functools
import re

import numpy as np
import pytest
import scipy.special

import kiln
import kiln.numpy as jnp


def _jv(v, z):
    res = kiln.ShapeDtypeStruct(jnp.shape(z), jnp.float32)
    return kiln.pure_callback(lambda v, z: scipy.special.jv(v, z).astype(np.float32), res, v,
                              z, vmap_method="broadcast_all")


jv = kiln.custom_jvp(_jv, nondiff_argnums=(0,))


@jv.defjvp
def _jv_jvp(v, primals, tangents):
    z, = primals
    z_dot, = tangents
    return jv(v, z), z_dot * 0.5 * (jv(v - 1, z) - jv(v + 1, z))


def _jv_second(v, z):   # d2/dz2 J_v = (J_{v-2} - 2 J_v + J_{v+2}) / 4
    return 0.25 * (scipy.special.jv(v - 2, z) - 2 * scipy.special.jv(v, z)
                   + scipy.special.jv(v + 2, z))


def _jv_third(v, z):
    return 0.125 * (scipy.special.jv(v - 3, z) - 3 * scipy.special.jv(v - 1, z)
                    + 3 * scipy.special.jv(v + 1, z) - scipy.special.jv(v + 3, z))


def test_hessian_through_a_rule_that_calls_its_function():
    np.testing.assert_allclose(kiln.hessian(jv, argnums=1)(3, 2.0), _jv_second(3, 2.0),
                               rtol=1e-5)
    third = kiln.jacfwd(kiln.jacfwd(kiln.jacfwd(jv, argnums=1), argnums=1), argnums=1)
    np.testing.assert_allclose(third(3, 2.0), _jv_third(3, 2.0), rtol=1e-5)


def test_jit_vmap_second_derivative_with_a_traced_nondiff_argument():
    z = np.array([1.0, 2.0, 3.0], np.float32)
    d2 = kiln.jit(kiln.vmap(kiln.grad(kiln.grad(jv, argnums=1), argnums=1), in_axes=(None, 0)))
    np.testing.assert_allclose(d2(3, z), _jv_second(3, z), rtol=1e-5)


@kiln.custom_jvp
def _g(x):
    return jnp.exp(x)


@_g.defjvp
def _g_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = _g(x)
    return y, 3 * y * t   # not exp's derivative: every order must come from this rule


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_every_order_uses_the_rule(order):
    f = _g
    for _ in range(order):
        f = kiln.grad(f)
    want = 3.0 ** order * np.exp(0.5)
    np.testing.assert_allclose(f(0.5), want, rtol=1e-5)
    np.testing.assert_allclose(kiln.jit(f)(0.5), want, rtol=1e-5)
    xs = np.array([0.5, 1.0], np.float32)
    np.testing.assert_allclose(kiln.vmap(f)(xs), 3.0 ** order * np.exp(xs), rtol=1e-5)


def test_custom_vjp_whose_fwd_calls_the_function():
    f = kiln.custom_vjp(lambda x: jnp.sin(x))
    f.defvjp(lambda x: (f(x), x), lambda x, g: (2 * g * jnp.cos(x),))
    np.testing.assert_allclose(kiln.grad(f)(1.0), 2 * np.cos(1.0), rtol=1e-6)
    np.testing.assert_allclose(kiln.grad(kiln.grad(f))(1.0), -2 * np.sin(1.0), rtol=1e-6)
    xs = np.array([0.3, 1.0], np.float32)
    np.testing.assert_allclose(kiln.vmap(kiln.grad(kiln.grad(f)))(xs), -2 * np.sin(xs),
                               rtol=1e-6)


def _deferred(text):
    return re.search(r"custom_jvp_call\([^)]*jvp=\d+, call=", text) is not None


def test_rules_are_specialised_only_for_derivatives():
    # JAX traces a rule only when it differentiates; a module-level rule is deferred
    text = str(kiln.make_ir(_g)(0.5))
    assert _deferred(text) and "_g_jvp" not in text and "mul(3.0" not in text
    assert "mul(3.0" in str(kiln.make_ir(kiln.grad(_g))(0.5))

    def k(x, w):
        @kiln.custom_jvp
        def scaled(x):
            return w * x

        @scaled.defjvp
        def scaled_jvp(primals, tangents):   # closes over the traced `w`
            return scaled(primals[0]), w * tangents[0]
        return scaled(x)
    text = str(kiln.make_ir(k)(1.0, 2.0))   # so its rule is specialised with the call
    assert "jvp=scaled_jvp" in text and not _deferred(text.split("jvp=scaled_jvp")[1])
    assert kiln.grad(k)(1.0, 3.0) == 3.0


def _scaled_sin(a, x):
    @kiln.custom_jvp
    def g(x):
        return jnp.sin(x)

    @g.defjvp
    def g_jvp(primals, tangents):
        y = g(primals[0])
        return y, a * y * tangents[0]   # `a`: a traced value the rule closes over
    return g(x)


def test_rule_of_a_local_function_closing_over_a_traced_value():
    d1 = kiln.grad(_scaled_sin, argnums=1)
    d2 = kiln.jit(kiln.grad(d1, argnums=1))
    np.testing.assert_allclose(d1(2.0, 0.5), 2.0 * np.sin(0.5), rtol=1e-6)
    np.testing.assert_allclose(d2(2.0, 0.5), 4.0 * np.sin(0.5), rtol=1e-6)
    np.testing.assert_allclose(kiln.grad(kiln.grad(d1, argnums=1), argnums=1)(2.0, 0.5),
                               8.0 * np.sin(0.5), rtol=1e-6)


@functools.partial(kiln.custom_vjp, nondiff_argnums=(0,))
def _apply(f, x):
    return f(x)


_apply.defvjp(lambda f, x: (f(x), x), lambda f, x, g: (kiln.vjp(f, x)[1](g)[0],))


def _closing_custom_jvp(w):
    @kiln.custom_jvp
    def f(x):
        return w * x * x

    @f.defjvp
    def f_jvp(p, t):
        return f(p[0]), 2 * w * p[0] * t[0]
    return f(2.0)


def test_a_differentiated_value_closed_over_by_a_custom_rule_is_an_error():
    """Its derivative would be dropped (0.0 before); JAX raises UnexpectedTracerError."""
    jax = pytest.importorskip("jax")
    with pytest.raises(kiln.compiler.errors.CompileError,
                       match=r"custom_vjp function closes over 'w', a value being "
                             r"differentiated(.|\n)*Pass 'w' to the custom_vjp function as an "
                             r"argument") as info:
        kiln.grad(lambda w: _apply(lambda x: w * x * x, 2.0))(3.0)
    assert "_apply(lambda x: w * x * x, 2.0)" in str(info.value)   # the line, with a caret
    for transform in (kiln.grad, kiln.jacfwd):
        with pytest.raises(kiln.compiler.errors.CompileError, match="custom_jvp function "
                                                                     "closes over 'w'"):
            transform(_closing_custom_jvp)(3.0)
    def theirs(w):
        f = jax.custom_vjp(lambda x: w * x)
        f.defvjp(lambda x: (f(x), None), lambda _, g: (w * g,))
        return f(2.0)
    with pytest.raises(jax.errors.UnexpectedTracerError):
        jax.grad(theirs)(3.0)
    # not differentiated, or not read by the function: fine
    assert kiln.grad(lambda x: _apply(lambda y: 3.0 * y * y, x))(2.0) == 12.0
    assert float(_closing_custom_jvp(3.0)) == 12.0
