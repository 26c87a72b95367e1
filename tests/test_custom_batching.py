"""Tests for `kiln.custom_batching` against `jax.custom_batching` (JAX 0.10.2): the rule is
called under `vmap` (with JAX's `axis_size` and `in_batched`), alone, under `jit`, nested and
over closed-over values; the function itself runs unbatched and under `jvp`/`grad`;
`sequential_vmap`; JAX's errors."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import custom_batching

jax = pytest.importorskip("jax")
import jax.custom_batching as jcustom_batching  # noqa: E402
import jax.numpy as jjnp  # noqa: E402

X = np.linspace(0, 1, 6, dtype=np.float32).reshape(3, 2)
Y = np.float32(2.0)


def _pair(make):
    return make(custom_batching, jnp), make(jcustom_batching, jjnp)


def _sin_with_cos_rule(cb, np_, seen=None):
    @cb.custom_vmap
    def f(x, y):
        return np_.sin(x) + y

    @f.def_vmap
    def rule(axis_size, in_batched, xs, ys):
        if seen is not None:
            seen.append((axis_size, in_batched))
        # a batched form that differs from the body's, so a test sees the rule ran
        return np_.cos(xs) + ys, in_batched[0] or in_batched[1]
    return f


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_rule_under_vmap_as_jax():
    seen, jseen = [], []
    kf = _sin_with_cos_rule(custom_batching, jnp, seen)
    jf = _sin_with_cos_rule(jcustom_batching, jjnp, jseen)
    _close(kf(X[0], Y), jf(X[0], Y))
    _close(kiln.jit(kf)(X[0], Y), jf(X[0], Y))
    for axes in ((0, None), (1, None), (None, 0)):
        args = (X, Y) if axes[1] is None else (X[0], X[:, :1])
        want = jax.vmap(jf, axes)(*args)
        _close(kiln.vmap(kf, axes)(*args), want)
        _close(kiln.jit(kiln.vmap(kf, axes))(*args), want)
    assert [s for s in seen if s[0] == 3][:1] == [(3, [True, False])]
    assert seen[0] == jseen[0] and isinstance(seen[0][1], list)
    nested = jax.vmap(jax.vmap(jf, (0, None)), (1, None))(X, Y)
    _close(kiln.vmap(kiln.vmap(kf, (0, None)), (1, None))(X, Y), nested)
    empty = np.zeros((0, 2), np.float32)
    assert kiln.vmap(kf, (0, None))(empty, Y).shape == jax.vmap(jf, (0, None))(empty, Y).shape


def test_unbatched_outputs_and_pytrees():
    def make(cb, np_):
        @cb.custom_vmap
        def f(pair):
            return {"sum": pair[0] + pair[1], "const": np_.float32(1.0)}

        @f.def_vmap
        def rule(axis_size, in_batched, pair):
            assert in_batched == [(True, False)]
            out = {"sum": pair[0] * 10 + pair[1], "const": np_.float32(axis_size)}
            return out, {"sum": True, "const": False}
        return f
    kf, jf = _pair(make)
    got, want = kiln.vmap(kf, ((0, None),))((X, Y)), jax.vmap(jf, ((0, None),))((X, Y))
    _close(got["sum"], want["sum"])
    _close(got["const"], want["const"])


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_unbatched_call_runs_the_function_on_each_backend(backend):
    kf = _sin_with_cos_rule(custom_batching, jnp)
    _close(kiln.jit(kf, backend=backend)(X, Y), np.sin(X) + Y)
    _close(kiln.jit(kiln.vmap(kf, (0, None)), backend=backend)(X, Y), np.cos(X) + Y)


def test_derivatives_differentiate_the_function():
    kf, jf = _pair(_sin_with_cos_rule)
    t = np.ones(2, np.float32)
    k_out, k_tan = kiln.jvp(lambda x: kf(x, Y), (X[0],), (t,))
    j_out, j_tan = jax.jvp(lambda x: jf(x, Y), (X[0],), (t,))
    _close(k_out, j_out)
    _close(k_tan, j_tan)
    _close(kiln.grad(lambda x: kf(x, Y).sum())(X[0]), np.cos(X[0]))   # JAX has no VJP here
    _close(kiln.jit(kiln.grad(lambda x: kf(x, Y).sum()))(X[0]), np.cos(X[0]))
    # through a batched call (the rule's derivative) and batched derivatives (the function's)
    _close(kiln.grad(lambda x: kiln.vmap(kf, (0, None))(x, Y).sum())(X), -np.sin(X))
    _close(kiln.jit(kiln.vmap(kiln.grad(lambda x: kf(x, Y).sum())))(X), np.cos(X))


def test_closed_over_traced_values():
    def outer(cb, np_):
        def g(x, scale):
            @cb.custom_vmap
            def f(x):
                return x * scale

            @f.def_vmap
            def rule(axis_size, in_batched, xs):
                return xs * scale + 1.0, True
            return f(x)
        return g
    kg, jg = _pair(outer)
    want = jax.jit(jax.vmap(jg, (0, None)))(X, Y)
    _close(kiln.jit(kiln.vmap(kg, (0, None)))(X, Y), want)
    _close(kiln.jit(lambda x, s: kiln.vmap(lambda r: kg(r, s))(x))(X, Y), want)


def test_sequential_vmap_as_jax():
    ks = custom_batching.sequential_vmap(lambda a, b: jnp.sum(a) * b)
    js = jcustom_batching.sequential_vmap(lambda a, b: jjnp.sum(a) * b)
    _close(kiln.vmap(ks, (0, None))(X, Y), jax.vmap(js, (0, None))(X, Y))
    _close(kiln.jit(kiln.vmap(ks))(X, X[:, 0]), jax.vmap(js)(X, X[:, 0]))
    _close(ks(X[0], Y), js(X[0], Y))


def test_errors_as_jax():
    for cb in (custom_batching, jcustom_batching):
        bare = cb.custom_vmap(lambda x: x)
        with pytest.raises(AttributeError, match="No batching rule defined for custom_vmap "
                                                 "function <lambda> using def_vmap"):
            bare(X)

    def bad(cb, np_):
        @cb.custom_vmap
        def f(x):
            return x

        @f.def_vmap
        def wrong_rule(axis_size, in_batched, xs):
            return (xs, xs), True
        return f
    kf, jf = _pair(bad)
    with pytest.raises(ValueError) as want:
        jax.vmap(jf)(X)
    with pytest.raises(ValueError) as got:
        kiln.vmap(kf)(X)
    assert str(got.value) == str(want.value)
