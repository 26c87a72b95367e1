"""Batching control flow (issue 5, item 3): `cond`/`switch`, `while_loop` and `scan` under
`kiln.vmap`, eagerly, under `kiln.jit` and around `kiln.grad`, against a Python loop over the
examples; Python `if`/`while` on values inside vmapped functions; the shape of the batched
SSA (a batched predicate becomes a select, a batched loop stays one loop)."""
import numpy as np
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.tree_util import tree_leaves

EXAMPLES = settings(max_examples=12, deadline=None)
BATCH = st.integers(0, 4)


def _example(a, ax, i):
    if ax is None:
        return a
    if a.shape[ax] == 0:   # a batch of none: any example of the right type
        return np.ones(a.shape[:ax] + a.shape[ax + 1:], a.dtype)
    return np.take(a, i, axis=ax)


def loop(f, args, in_axes):
    """`f` called on each example and the results stacked (JAX's vmap semantics)."""
    n = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [tree_leaves(f(*[_example(a, ax, i) for a, ax in zip(args, in_axes)]))
            for i in range(max(n, 1))]
    return [np.stack([np.asarray(o[j]) for o in outs])[:n] for j in range(len(outs[0]))]


def check(f, *args, in_axes=0, rtol=1e-5):
    """vmap(f) and jit(vmap(f)) equal the loop over the examples."""
    in_axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    want = loop(f, args, in_axes)
    for batched in (kiln.vmap(f, in_axes=in_axes), kiln.jit(kiln.vmap(f, in_axes=in_axes))):
        got = tree_leaves(batched(*args))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.asarray(g).shape == w.shape and np.asarray(g).dtype == w.dtype
            np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=rtol)


def ir(f, *args, in_axes=0):
    return str(kiln.make_ir(kiln.vmap(f, in_axes=in_axes))(*args))


def randn(seed, *shape):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


# ---------------------------------------------------------------------------------- cond

def two_way(x):
    return lax.cond(jnp.sum(x) > 0, lambda v: jnp.sin(v) * 2.0, lambda v: jnp.cumsum(v, 0), x)


@EXAMPLES
@given(batch=BATCH, n=st.integers(0, 3), axis=st.integers(0, 2), seed=st.integers(0, 99))
def test_cond_with_a_batched_predicate_is_a_select(batch, n, axis, seed):
    shape = [n, 2]
    shape.insert(axis, batch)
    xs = randn(seed, *shape)
    check(two_way, xs, in_axes=axis)
    check(kiln.grad(lambda x: jnp.sum(two_way(x) ** 2)), xs, in_axes=axis)
    text = ir(two_way, xs, in_axes=axis)
    assert "select_n(" in text and "cond(" not in text and "scan(" not in text


def shared_choice(p, x):
    # The branches put the batch on different axes (cumsum moves it first), one output is
    # batched in one branch only, and the last is unbatched in both.
    return lax.cond(p > 0, lambda v, q: (v, q * jnp.ones_like(v), q + 1.0),
                    lambda v, q: (jnp.cumsum(v, 0), v, q * 2.0), x, p)


@EXAMPLES
@given(batch=BATCH, n=st.integers(0, 3), axis=st.integers(0, 1), seed=st.integers(0, 99),
       p=st.sampled_from([-1.0, 2.0]))
def test_cond_with_an_unbatched_predicate_stays_a_cond(batch, n, axis, seed, p):
    xs = randn(seed, *([batch, n] if axis == 0 else [n, batch]))
    p = np.float32(p)
    check(shared_choice, p, xs, in_axes=(None, axis))
    text = ir(shared_choice, p, xs, in_axes=(None, axis))
    assert text.count("cond(") == 1 and "select_n(" not in text and "scan(" not in text


def three_way(i, x):
    return lax.switch(i, [lambda v: v + 1.0, lambda v: jnp.sin(v), lambda v: v * v], x)


@EXAMPLES
@given(batch=BATCH, n=st.integers(0, 3), seed=st.integers(0, 99),
       index_axis=st.sampled_from([0, None]))
def test_switch_batched_and_unbatched_index(batch, n, seed, index_axis):
    rng = np.random.RandomState(seed)
    idx = rng.randint(-2, 5, size=batch if index_axis == 0 else ()).astype(np.int32)
    xs = randn(seed, batch, n)
    check(three_way, idx, xs, in_axes=(index_axis, 0))
    check(kiln.grad(lambda i, x: jnp.sum(three_way(i, x)), argnums=1), idx, xs,
          in_axes=(index_axis, 0))
    if index_axis == 0:   # only the index batched: each example still picks its own branch
        check(three_way, idx, randn(seed, n), in_axes=(0, None))


def test_cond_with_a_boolean_index():
    """The cond primitive also takes a bool index (branch 0 for False): batched, it
    selects per example."""
    from kiln.compiler.ir.builder import Builder
    from kiln.compiler.ir.abstract import ShapedArray
    from kiln.compiler.ir.ssa import Eqn, Function
    from kiln.compiler.primitives.interpret import run_function
    from kiln.compiler.transforms.vmap import batch_emit
    x = np.array([0.5, -1.0, 2.0], np.float32)
    staged = kiln.make_ir(lambda p, v: lax.cond(p, jnp.sin, jnp.cos, v))(True, x[0])
    (convert,) = [e for e in staged.eqns if e.prim.name == "convert_element_type"]
    (cond,) = [e for e in staged.eqns if e.prim.name == "cond"]
    fn = Function("f", staged.invars, [Eqn(cond.outvars, cond.prim,
                                           [convert.invars[0]] + cond.invars[1:],
                                           cond.params, None)], staged.outvars)
    b = Builder("batched")
    with b:
        p = b.new_input(ShapedArray((3,), np.dtype(bool), False))
        v = b.new_input(ShapedArray((3,), np.dtype(np.float32), False))
        outs, dims = batch_emit(fn, [p, v], [0, 0], 3)
        batched = b.build(outs)
    assert dims == [0] and "select_n(" in str(batched)
    (got,) = run_function(batched, np.array([True, False, True]), x)
    np.testing.assert_allclose(got, [np.sin(0.5), np.cos(-1.0), np.sin(2.0)], rtol=1e-6)


# ---------------------------------------------------------------------------- while_loop

def newton_sqrt(a):
    """Newton's iteration for sqrt(a): the trip count depends on a."""
    def cond(c):
        x, i = c
        return (jnp.abs(x * x - a) > 1e-5 * a) & (i < 60)
    x, i = lax.while_loop(cond, lambda c: (0.5 * (c[0] + a / c[0]), c[1] + 1), (a, 0))
    return x, i


def collatz_steps(n):
    def body(c):
        m, k = c
        return lax.cond(m % 2 == 0, lambda m: m // 2, lambda m: 3 * m + 1, m), k + 1
    return lax.while_loop(lambda c: c[0] != 1, body, (n, 0))[1]


@EXAMPLES
@given(batch=BATCH, seed=st.integers(0, 99))
def test_while_with_a_batched_predicate_masks_finished_examples(batch, seed):
    rng = np.random.RandomState(seed)
    a = (np.abs(rng.randn(batch)) * 50 + 0.5).astype(np.float32)
    check(newton_sqrt, a)
    n = rng.randint(1, 30, size=batch).astype(np.int32)
    check(collatz_steps, n)
    text = ir(collatz_steps, n)
    assert text.count("while_loop(") == 1 and "reduce_or(" in text and "scan(" not in text


@EXAMPLES
@given(batch=BATCH, m=st.integers(0, 3), seed=st.integers(0, 99))
def test_while_with_an_unbatched_predicate_keeps_one_loop(batch, m, seed):
    def grow(x):
        return lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * 1.5 + 1.0),
                              (0, x))[1]
    xs = randn(seed, batch, m)
    check(grow, xs)
    text = ir(grow, xs)
    assert text.count("while_loop(") == 1 and "reduce_or(" not in text


@EXAMPLES
@given(batch=BATCH, seed=st.integers(0, 99))
def test_while_with_batched_constants_in_the_predicate(batch, seed):
    def until(x, limit):
        return lax.while_loop(lambda v: jnp.sum(v) < limit, lambda v: v * 2.0 + 0.5, x)
    rng = np.random.RandomState(seed)
    xs = np.abs(randn(seed, batch, 2)) + 0.1
    limits = (np.abs(rng.randn(batch)) * 40).astype(np.float32)
    check(until, xs, limits)
    check(until, xs, np.float32(7.0), in_axes=(0, None))
    check(until, xs[0] if batch else np.ones(2, np.float32), limits, in_axes=(None, 0))


@EXAMPLES
@given(batch=BATCH, seed=st.integers(0, 99), axes=st.sampled_from([(0, 0), (0, None),
                                                                    (None, 0)]))
def test_fori_loop_with_batched_bounds(batch, seed, axes):
    def f(x, hi):
        return lax.fori_loop(0, hi, lambda i, v: v * 0.5 + i, x)
    rng = np.random.RandomState(seed)
    xs = randn(seed, batch, 2) if axes[0] == 0 else randn(seed, 2)
    his = rng.randint(-1, 6, size=batch).astype(np.int32) if axes[1] == 0 else np.int32(3)
    check(f, xs, his, in_axes=axes)


def test_nested_vmap_of_a_masked_loop():
    a = (np.abs(randn(5, 3, 4)) * 20 + 0.5).astype(np.float32)
    got = kiln.vmap(kiln.vmap(newton_sqrt))(a)
    want = loop(lambda r: loop(newton_sqrt, (r,), (0,)), (a,), (0,))
    for g, w in zip(tree_leaves(got), want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)


# ---------------------------------------------------------------------------------- scan

XS = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)


def scan_fn(which, length, reverse):
    xs_fixed = XS[:length]

    def carry_only(c):
        return lax.scan(lambda c, x: (c * 0.5 + x, jnp.sum(c * x)), c, xs_fixed,
                        reverse=reverse)

    def xs_only(xs):
        return lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(3), xs, reverse=reverse)

    def consts_only(w):   # the carry stays unbatched, the ys are batched
        return lax.scan(lambda c, x: (c + x, c * w), jnp.ones(3), xs_fixed, reverse=reverse)

    def consts_into_carry(w):
        return lax.scan(lambda c, x: (c * w + x, c), jnp.ones(3), xs_fixed, reverse=reverse)
    return {"carry_only": carry_only, "xs_only": xs_only, "consts_only": consts_only,
            "consts_into_carry": consts_into_carry}[which]


@EXAMPLES
@given(batch=BATCH, length=st.integers(0, 4), reverse=st.booleans(), seed=st.integers(0, 99),
       which=st.sampled_from(["carry_only", "xs_only", "consts_only", "consts_into_carry"]),
       axis=st.integers(0, 1))
def test_scan_batches_consts_carries_and_xs(batch, length, reverse, seed, which, axis):
    f = scan_fn(which, length, reverse)
    shape = [length, 3] if which == "xs_only" else [3]
    shape.insert(axis, batch)
    args = randn(seed, *shape)
    check(f, args, in_axes=axis)
    text = ir(f, args, in_axes=axis)
    assert text.count("scan(") == 1
    if batch and length:
        check(kiln.grad(lambda a: jnp.sum(f(a)[1]) + jnp.sum(jnp.sin(f(a)[0]))), args,
              in_axes=axis, rtol=1e-4)


# --------------------------------------------------------- Python control flow on values

def python_if(x):
    if x.sum() > 0:
        y = jnp.sin(x) * x
    else:
        y = x * 3.0
    return y.sum()


def python_while(x):
    while x > 1:
        x = x / 2 + 0.1 * jnp.sin(x)
    return x * x


@EXAMPLES
@given(batch=BATCH, n=st.integers(0, 3), seed=st.integers(0, 99))
def test_python_if_on_values_under_vmap_jit_and_grad(batch, n, seed):
    xs = randn(seed, batch, n)
    check(python_if, xs)
    check(kiln.grad(python_if), xs)
    assert "select_n(" in ir(python_if, xs)


@EXAMPLES
@given(batch=BATCH, seed=st.integers(0, 99))
def test_python_while_on_values_under_vmap_and_jit(batch, seed):
    xs = (np.abs(randn(seed, batch)) * 30).astype(np.float32)
    check(python_while, xs)
    assert "reduce_or(" in ir(python_while, xs)


@EXAMPLES
@given(batch=BATCH, seed=st.integers(0, 99))
def test_data_dependent_while_under_vmap_of_grad(batch, seed):
    """Reverse mode records the loop on a tape; batched, each example has its own tape and
    its own trip count."""
    xs = (np.abs(randn(seed, batch)) * 30).astype(np.float32)
    check(kiln.grad(python_while), xs)
    check(kiln.grad(lambda a: newton_sqrt(a)[0]), xs + 0.5, rtol=1e-4)


def test_collectives_over_the_batch_axis_inside_control_flow():
    """A region's results vary over the batch when it holds a collective over the axis, even
    where no operand is batched."""
    xs = np.arange(4.0, dtype=np.float32)

    def choose(x):
        return lax.cond(x > 1, lambda v: v / lax.psum(v, "i"), lambda v: v + lax.axis_index("i"),
                        x)

    def doubled(x):   # the trip count is the example's index
        return lax.while_loop(lambda c: c[0] < lax.axis_index("i"),
                              lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1]

    def stepped(x):
        return lax.scan(lambda c, _: (c + lax.axis_index("i"), c), 0, None, length=3)
    for batched in (kiln.vmap, lambda f, **kw: kiln.jit(kiln.vmap(f, **kw))):
        np.testing.assert_allclose(np.asarray(batched(choose, axis_name="i")(xs)),
                                   [0.0, 2.0, 2 / 6, 3 / 6], rtol=1e-6)
        np.testing.assert_allclose(np.asarray(batched(doubled, axis_name="i")(xs)),
                                   [0.0, 2.0, 8.0, 24.0])
        total, ys = batched(stepped, axis_name="i")(xs)
        np.testing.assert_array_equal(np.asarray(total), [0, 3, 6, 9])
        np.testing.assert_array_equal(np.asarray(ys), np.arange(4)[:, None] * np.arange(3))
