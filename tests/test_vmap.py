"""`kiln.vmap` against a Python loop over the examples (issue 5, first part): the batching
rules (elementwise, reductions, cumulative ops, shape ops, dot_general), the loop fallback
for every other primitive, Python control flow on values, composition with jit and grad."""
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax

EXAMPLES = settings(max_examples=15, deadline=None)


def loop(f, xs, in_axis=0):
    return np.stack([np.asarray(f(jnp.asarray(x))) for x in np.moveaxis(np.asarray(xs), in_axis, 0)])


FUNCS = {
    "elementwise": lambda x: jnp.sin(x) * 2.0 + x * x - jnp.exp(-x),
    "where": lambda x: jnp.where(x > 0, x, 0.1 * x),
    "reductions": lambda x: jnp.sum(x) + jnp.max(x) * jnp.mean(x),
    "cumsum": lambda x: jnp.cumsum(x[::-1]),
    "reshape_transpose": lambda x: jnp.reshape(x, (-1,))[::2].sum() + x.T.sum(),
    "matmul": lambda x: x @ jnp.arange(float(x.shape[-1])),
    "sort_fallback": lambda x: jnp.sort(x) * jnp.argsort(x),
    "indexing_fallback": lambda x: x[..., 0] + x.at[..., 0].set(1.0).sum(),
    "python_if": lambda x: jnp.sin(x) if x.sum() > 0 else x * 3.0,
}


@pytest.mark.parametrize("name", sorted(FUNCS))
@EXAMPLES
@given(batch=st.integers(1, 4), n=st.integers(1, 4), axis=st.sampled_from([0, 1, -1]),
       seed=st.integers(0, 1000))
def test_vmap_equals_the_loop(name, batch, n, axis, seed):
    f = FUNCS[name]
    shape = [n, 2]
    shape.insert(axis % 3, batch)
    xs = np.random.RandomState(seed).randn(*shape).astype(np.float32)
    want = loop(f, xs, axis % 3)
    np.testing.assert_allclose(np.asarray(kiln.vmap(f, in_axes=axis)(xs)), want, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(np.asarray(kiln.jit(kiln.vmap(f, in_axes=axis))(xs)), want,
                               rtol=1e-5, atol=1e-5)


@EXAMPLES
@given(b=st.integers(1, 3), m=st.integers(1, 3), k=st.integers(1, 3), n=st.integers(1, 3),
       which=st.sampled_from(["lhs", "rhs", "both"]))
def test_dot_general_stays_one_dot_general(b, m, k, n, which):
    rng = np.random.RandomState(0)
    a = rng.randn(b, m, k).astype(np.float32) if which != "rhs" else rng.randn(m, k).astype(
        np.float32)
    c = rng.randn(b, k, n).astype(np.float32) if which != "lhs" else rng.randn(k, n).astype(
        np.float32)
    axes = {"lhs": (0, None), "rhs": (None, 0), "both": (0, 0)}[which]
    got = kiln.vmap(jnp.matmul, in_axes=axes)(a, c)
    want = np.stack([(a[i] if axes[0] == 0 else a) @ (c[i] if axes[1] == 0 else c)
                     for i in range(b)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    ir = str(kiln.make_ir(kiln.vmap(jnp.matmul, in_axes=axes))(a, c))
    assert ir.count("dot_general(") == 1 and "scan(" not in ir


def test_seed_examples():
    def predict(params, x):
        w, b = params
        return jnp.tanh(x @ w + b)
    rng = np.random.RandomState(1)
    params = (rng.randn(3, 4).astype(np.float32), rng.randn(4).astype(np.float32))
    batch = rng.randn(6, 3).astype(np.float32)
    a = kiln.vmap(partial(predict, params))(batch)
    b = kiln.vmap(predict, in_axes=(None, 0))(params, batch)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(a), loop(partial(predict, params), batch),
                               rtol=1e-5, atol=1e-6)

    def loss(params, x, y):
        return jnp.sum((predict(params, x) - y) ** 2)
    ys = rng.randn(6, 4).astype(np.float32)
    per_example = kiln.jit(kiln.vmap(kiln.grad(loss), in_axes=(None, 0, 0)))(params, batch, ys)
    for i in range(6):
        g = kiln.grad(loss)(params, batch[i], ys[i])
        np.testing.assert_allclose(np.asarray(per_example[0][i]), np.asarray(g[0]),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(per_example[1][i]), np.asarray(g[1]),
                                   rtol=1e-5, atol=1e-6)


def test_python_while_on_values_inside_vmap_and_vmap_of_grad():
    def grow(x):
        while jnp.sum(x) < 10.0:
            x = x * 1.5
        return x
    xs = np.abs(np.random.RandomState(2).randn(4, 3)).astype(np.float32) + 0.1
    np.testing.assert_allclose(np.asarray(kiln.vmap(grow)(xs)), loop(grow, xs), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(kiln.jit(kiln.vmap(grow))(xs)), loop(grow, xs),
                               rtol=1e-6)

    def smooth(x):
        if jnp.sum(x) > 2.0:
            return jnp.sum(jnp.sin(x))
        return jnp.sum(x * x)
    g = kiln.vmap(kiln.grad(smooth))(xs)
    np.testing.assert_allclose(np.asarray(g), loop(kiln.grad(smooth), xs), rtol=1e-5)


def test_axes_nesting_and_kwargs():
    xs = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    assert kiln.vmap(lambda x: x.sum(), in_axes=2)(xs).shape == (4,)
    assert kiln.vmap(lambda x: x * 2, out_axes=1)(xs).shape == (3, 2, 4)
    assert kiln.vmap(lambda x: 1.0, axis_size=3)(None if False else xs[0]).shape == (3,)
    both = kiln.vmap(kiln.vmap(lambda a, b: a * b))(xs, xs)
    np.testing.assert_allclose(np.asarray(both), xs * xs)
    out = kiln.vmap(lambda x, *, scale: x * scale)(xs, scale=np.ones(2, np.float32))
    np.testing.assert_allclose(np.asarray(out), xs)
    d = kiln.vmap(lambda p: p["a"] + p["b"], in_axes=({"a": 0, "b": None},))(
        {"a": xs, "b": np.ones(4, np.float32)})
    np.testing.assert_allclose(np.asarray(d), xs + 1)


def test_bad_axes_are_value_errors_naming_the_arguments():
    with pytest.raises(ValueError, match="(?s)inconsistent sizes.*shape \\(3,\\).*shape \\(4,\\)"):
        kiln.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="along axis 2"):
        kiln.vmap(lambda a: a, in_axes=2)(np.ones((3, 2)))
    with pytest.raises(ValueError, match="len\\(in_axes\\)=1, len\\(args\\)=2"):
        kiln.vmap(lambda a, b: a, in_axes=(0,))(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="mapped output but out_axes is None"):
        kiln.vmap(lambda a: a, out_axes=None)(np.ones(3))
    with pytest.raises(TypeError, match="in_axes must be an int"):
        kiln.vmap(lambda a: a, in_axes="x")
    with pytest.raises(ValueError, match="at least one non-None"):
        kiln.vmap(lambda a: a, in_axes=None)(np.ones(3))


def test_lax_control_flow_batches_through_the_loop_fallback():
    def f(x):
        return lax.fori_loop(0, 3, lambda i, v: v * jnp.cos(v), x) + lax.cond(
            x[0] > 0, jnp.sin, jnp.cos, x)
    xs = np.random.RandomState(3).randn(5, 2).astype(np.float32)
    np.testing.assert_allclose(np.asarray(kiln.vmap(f)(xs)), loop(f, xs), rtol=1e-5)
