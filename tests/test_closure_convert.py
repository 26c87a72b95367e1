"""`kiln.closure_convert` against JAX 0.10.2: the traced values a function closes over are
hoisted out as explicit constants, so that a `custom_vjp` given them as arguments (JAX's
pattern, the fixed-point example of JAX's custom-derivatives notebook) differentiates with
respect to closed-over values; untraced closures and integer values give no constants."""
from functools import partial

import numpy as np
import pytest

import kiln
import kiln.numpy as knp

jax = pytest.importorskip("jax")
jnp = jax.numpy


def fixed_point_api(api, np_):
    """The notebook's `fixed_point` (a custom_vjp with the implicit-function-theorem rule)
    and a Newton square root whose update closes over its scale, closure-converted, written
    once for kiln and for JAX (`api`: kiln or jax; `np_`: its numpy)."""

    @partial(api.custom_vjp, nondiff_argnums=(0,))
    def fixed_point(f, a, x_guess):
        def cond_fun(carry):
            x_prev, x = carry
            return np_.abs(x_prev - x) > 1e-6

        def body_fun(carry):
            _, x = carry
            return x, f(a, x)

        _, x_star = api.lax.while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
        return x_star

    def fixed_point_fwd(f, a, x_init):
        x_star = fixed_point(f, a, x_init)
        return x_star, (a, x_star)

    def rev_iter(f, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = api.vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    def fixed_point_rev(f, res, x_star_bar):
        a, x_star = res
        _, vjp_a = api.vjp(lambda a: f(a, x_star), a)
        a_bar, = vjp_a(fixed_point(partial(rev_iter, f), (a, x_star, x_star_bar),
                                   x_star_bar))
        return a_bar, api.tree_util.tree_map(np_.zeros_like, x_star)

    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)

    def scaled_sqrt(a, scale):
        """sqrt(scale * a) by Newton's method; the update closes over `a` and `scale`."""
        def update(x):
            return 0.5 * (x + scale * a / x)
        converted, consts = api.closure_convert(update, a)
        return fixed_point(lambda packed, x: converted(x, *packed), tuple(consts), a)

    return scaled_sqrt


KILN_SQRT = fixed_point_api(kiln, knp)
JAX_SQRT = fixed_point_api(jax, jnp)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_fixed_point_gradients_reach_closed_over_values(argnums):
    for a, scale in [(2.0, 1.0), (3.0, 0.5)]:
        got = kiln.grad(KILN_SQRT, argnums=argnums)(a, scale)
        want = jax.grad(JAX_SQRT, argnums=argnums)(a, scale)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    exact = 0.5 * np.sqrt(scale / a), 0.5 * np.sqrt(a / scale)
    got = kiln.jit(kiln.grad(KILN_SQRT, argnums=(0, 1)))(a, scale)
    np.testing.assert_allclose(np.asarray(got), exact, rtol=1e-5)
    np.testing.assert_allclose(float(KILN_SQRT(a, scale)), np.sqrt(a * scale), rtol=1e-6)


def test_second_derivative_through_the_rule():
    got = kiln.grad(kiln.grad(KILN_SQRT, argnums=1), argnums=1)(2.0, 1.0)
    want = jax.grad(jax.grad(JAX_SQRT, argnums=1), argnums=1)(2.0, 1.0)
    np.testing.assert_allclose(float(got), float(want), rtol=1e-4)


def consts_of(api, np_, transform, w, n):
    """The constants' shapes and dtypes of a function closing over a float vector `w` and an
    int `n`, converted inside `transform` (jit, grad, jvp)."""
    found = []

    def outer(w, n):
        def f(y):
            return np_.sin(w * y).sum() + n
        converted, consts = api.closure_convert(f, np_.ones(3, np_.float32))
        found.append([(tuple(c.shape), np.dtype(c.dtype)) for c in consts])
        return converted(np_.ones(3, np_.float32), *consts)
    transform(api, outer)(w, n)
    return found[-1]


TRANSFORMS = {
    "jit": lambda api, f: api.jit(f),
    "grad": lambda api, f: api.grad(f),
    "jvp": lambda api, f: lambda w, n: api.jvp(lambda w_: f(w_, n), (w,), (w,)),
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_constants_are_jax_s(transform):
    w = np.linspace(0.1, 0.3, 3).astype(np.float32)
    got = consts_of(kiln, knp, TRANSFORMS[transform], w, np.int32(2))
    want = consts_of(jax, jnp, TRANSFORMS[transform], w, np.int32(2))
    assert got == want == [((3,), np.dtype(np.float32))]


def test_untraced_closures_give_no_constants():
    w = knp.arange(3.0)

    def f(y):
        return y * w
    converted, consts = kiln.closure_convert(f, knp.ones(3))
    jconverted, jconsts = jax.closure_convert(lambda y: y * jnp.arange(3.0), jnp.ones(3))
    assert consts == [] and jconsts == []
    np.testing.assert_array_equal(np.asarray(converted(knp.full(3, 2.0))),
                                  np.asarray(jconverted(jnp.full(3, 2.0))))

    @kiln.jit
    def only_static(x):
        converted, consts = kiln.closure_convert(lambda y: y * 2.0 + w, x)
        assert consts == []
        return converted(x)
    np.testing.assert_array_equal(np.asarray(only_static(knp.ones(3))), [2.0, 3.0, 4.0])


def test_converted_function_checks_its_arguments_and_its_constants():
    @kiln.jit
    def wrong_structure(x, w):
        converted, consts = kiln.closure_convert(lambda y: y * w, x)
        return converted((x, x), *consts)
    with pytest.raises(TypeError, match="same pytree structure as the example arguments"):
        wrong_structure(1.0, 2.0)

    @kiln.jit
    def other_constants(x, w):
        converted, consts = kiln.closure_convert(lambda y: y * w, x)
        return converted(x, w + 1.0)
    with pytest.raises(TypeError, match="across a custom_vjp or custom_jvp boundary"):
        other_constants(1.0, 2.0)
