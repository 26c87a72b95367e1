"""Batching of the autodiff primitives (issue 5): `stop_gradient`, reverse mode's tapes
(`tape_push`, `tape_pop`, `tape_add`), `custom_jvp_call`, `custom_vjp_call`, `remat`, and the
`debug_print` callback, each checked against a Python loop over the examples; and `vmap`
composed with `grad`, `jvp`, `vjp`, `jacfwd`, `jacrev` and `hessian` in both orders (and
under `jit`), including derivatives through data-dependent Python `while` loops, whose tapes
become one tape per example under `vmap`."""
import contextlib
import io

import numpy as np
import pytest
from hypothesis import given, settings, assume, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.backends.reference import compile_function
from kiln.compiler.ir.builder import Builder
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.primitives.autodiff import types_of
from kiln.compiler.primitives import emit as E
from kiln.compiler.primitives.batching import to_front
from kiln.compiler.transforms.vmap import batch_emit

EXAMPLES = settings(max_examples=12, deadline=None)
F32 = np.dtype(np.float32)


def batched(rng, ex_shape, size, axis):
    """A float32 operand of one example's shape, batched on `axis` (None: unbatched)."""
    shape = list(ex_shape)
    if axis is not None:
        shape.insert(axis, size)
    return np.asarray(rng.randn(*shape), np.float32)


def example(a, axis, i):
    return a if axis is None else np.take(a, i, axis=axis)


def per_example(f, args, in_axes, size):
    """`f(*example)` stacked over the examples along axis 0 (for no examples: the empty
    stack of the right shape)."""
    if not size:
        out = np.asarray(f(*[a if ax is None else np.zeros(np.delete(np.shape(a), ax), a.dtype)
                             for a, ax in zip(args, in_axes)]))
        return np.zeros((0,) + out.shape, out.dtype)
    return np.stack([np.asarray(f(*[example(a, ax, i) for a, ax in zip(args, in_axes)]))
                     for i in range(size)])


def close(got, want, tol=2e-4):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ----------------------------------------------------------------------- stop_gradient

@EXAMPLES
@given(size=st.integers(0, 3), n=st.integers(0, 2), axis=st.sampled_from([0, 1, -1, None]),
       out_axis=st.sampled_from([0, -1]), seed=st.integers(0, 99))
def test_stop_gradient(size, n, axis, out_axis, seed):
    rng = np.random.RandomState(seed)
    xs = batched(rng, (n, 2), size, None if axis is None else axis % 3)
    ys = batched(rng, (n, 2), size, 0)

    def f(x, y):
        return lax.stop_gradient(x) * y + lax.stop_gradient(y)
    vf = kiln.vmap(f, in_axes=(axis, 0), out_axes=out_axis)
    x_axis = None if axis is None else axis % 3
    want = np.moveaxis(per_example(f, (xs, ys), (x_axis, 0), size), 0, out_axis)
    close(vf(xs, ys), want)
    close(kiln.jit(vf)(xs, ys), want)
    # The derivative through the batched stop_gradient is zero in its operand.
    g = kiln.grad(lambda x, y: kiln.vmap(f, in_axes=(axis, 0))(x, y).sum(), argnums=(0, 1))
    gx, gy = g(xs, ys)
    close(gx, np.zeros_like(xs))
    close(gy, per_example(lambda x, y: x, (xs, ys), (x_axis, 0), size))


# ------------------------------------------------------------- tapes, on hand-built SSA

def tape_program(n):
    """One example's program over x: f32[n], y: f32[] exercising every tape operation: pushes
    of values of either kind on one tape, a second tape of the same records summed in with
    tape_add, a tape pushed on a tape, pops down to (and past) the empty tape."""
    x_aval, y_aval = ShapedArray((n,), F32), ShapedArray((), F32)
    b = Builder("tapes")
    with b:
        x, y = b.new_input(x_aval, "x"), b.new_input(y_aval, "y")
        t = E.tape_push(E.tape_new(), y)
        t = E.tape_push(t, x, E.mul(y, 2.0))
        u = E.tape_push(E.tape_push(E.tape_new(), E.mul(y, 3.0)), E.sin(x), y)
        s = E.tape_add(t, u)
        outer = E.tape_push(E.tape_new(), s, x)
        outer, s2, x2 = E.tape_pop(outer, types=types_of([E.aval(s), x_aval]))
        s2, a, c = E.tape_pop(s2, types=types_of([x_aval, y_aval]))
        s2, d = E.tape_pop(s2, types=types_of([y_aval]))
        _, z = E.tape_pop(s2, types=types_of([x_aval]))   # empty: zeros
        fn = b.build([a, c, d, z, x2])
    return fn, b.names


def batched_program(fn, names, avals, dims, size):
    """`fn` batched (results batched on axis 0), in the name space `fn` was built in."""
    b = Builder("batched_" + fn.name, names=names)
    with b:
        ins = [b.new_input(a) for a in avals]
        outs, odims = batch_emit(fn, ins, dims, size)
        return b.build([to_front(o, d, size) for o, d in zip(outs, odims)])


@EXAMPLES
@given(size=st.integers(0, 3), n=st.integers(0, 2), x_axis=st.sampled_from([None, 0, 1]),
       y_axis=st.sampled_from([None, 0]), seed=st.integers(0, 99))
def test_tape_rules_against_a_loop(size, n, x_axis, y_axis, seed):
    assume(x_axis is not None or y_axis is not None)
    rng = np.random.RandomState(seed)
    xs, ys = batched(rng, (n,), size, x_axis), batched(rng, (), size, y_axis)
    fn, names = tape_program(n)
    one = compile_function(fn)
    avals = [ShapedArray(np.shape(v), F32) for v in (xs, ys)]
    bfn = batched_program(fn, names, avals, [x_axis, y_axis], size)
    assert "scan(" not in str(bfn)
    got = compile_function(bfn)(xs, ys)
    for i in range(size):
        want = one(example(xs, x_axis, i), example(ys, y_axis, i))
        for g, w in zip(got, want):
            close(g[i], w, 1e-6)
    assert [np.shape(g)[0] for g in got] == [size] * len(got)


def test_a_batched_push_on_an_unbatched_tape_splits_it_per_example():
    """An unbatched tape meeting a batched value becomes one tape per example (sharing the
    records below); pops give each example its own records, and a batched tape popped past
    its records gives zeros."""
    f32 = ShapedArray((), F32)
    b = Builder("mixed")
    with b:
        x, y = b.new_input(f32, "x"), b.new_input(f32, "y")   # x unbatched, y batched
        t = E.tape_push(E.tape_push(E.tape_new(), x), y)
        t, top = E.tape_pop(t, types=("f32[]",))
        t, below = E.tape_pop(t, types=("f32[]",))
        _, past = E.tape_pop(t, types=("f32[]",))
        fn = b.build([top, below, past])
    bfn = batched_program(fn, b.names, [f32, ShapedArray((3,), F32)], [None, 0], 3)
    assert "tape[3]" in str(bfn)
    top, below, past = compile_function(bfn)(np.float32(5.0), np.arange(3, dtype=np.float32))
    close(top, [0.0, 1.0, 2.0])
    close(below, [5.0, 5.0, 5.0])
    close(past, [0.0, 0.0, 0.0])


# ----------------------------------------------- data-dependent while: tapes under vmap

def grow(x):
    """A Python while on a value: its trip count depends on the example."""
    while jnp.sum(x * x) < 10.0:
        x = x * 1.5 + 0.3 * jnp.sin(x) + 0.1
    return jnp.sum(x * x * x) / 10.0


def grow2(x, w):
    while jnp.sum(x * x) < 10.0:
        x = jnp.tanh(x * w) + x + 0.2
    return jnp.sum(x * w)


def loop_of(f, xs, axis=0):
    return np.stack([np.asarray(f(jnp.asarray(x))) for x in np.moveaxis(xs, axis, 0)]) \
        if np.shape(xs)[axis] else None


@EXAMPLES
@given(size=st.integers(0, 4), n=st.integers(1, 2), axis=st.sampled_from([0, 1]),
       seed=st.integers(0, 99))
def test_vmap_of_grad_through_a_data_dependent_while(size, n, axis, seed):
    xs = np.random.RandomState(seed).uniform(-2, 2, (size, n)).astype(np.float32)
    xs = np.moveaxis(xs, 0, axis)
    vg = kiln.vmap(kiln.grad(grow), in_axes=axis)
    got, got_jit = vg(xs), kiln.jit(vg)(xs)
    assert got.shape == (size, n)
    if size:
        want = loop_of(kiln.grad(grow), xs, axis)
        close(got, want)
        close(got_jit, want)
    assert "scan(" not in str(kiln.make_ir(vg)(xs))


def test_per_example_trip_counts_differ():
    """Lanes finishing at different trips pop their own records (a tape per example)."""
    xs = np.array([[0.1], [2.9], [3.5], [0.01]], np.float32)
    trips = []
    for x in xs:
        n, v = 0, x.copy()
        while float(np.sum(v * v)) < 10.0:
            v, n = v * 1.5 + 0.3 * np.sin(v) + 0.1, n + 1
        trips.append(n)
    assert len(set(trips)) > 2
    close(kiln.vmap(kiln.grad(grow))(xs), loop_of(kiln.grad(grow), xs))
    ir = str(kiln.make_ir(kiln.vmap(kiln.grad(grow)))(xs))
    assert "tape[4]" in ir and "tape_push" in ir and "tape_pop" in ir


@EXAMPLES
@given(size=st.integers(1, 3), seed=st.integers(0, 99))
def test_while_derivatives_in_both_orders(size, seed):
    rng = np.random.RandomState(seed)
    xs = rng.uniform(-1, 1, (size, 2)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, (2,)).astype(np.float32)
    per = [kiln.grad(grow2, argnums=(0, 1))(x, w) for x in xs]
    gx = np.stack([np.asarray(p[0]) for p in per])
    gw = sum(np.asarray(p[1]) for p in per)
    # vmap of grad, per example; grad of a vmapped sum (the masked loop differentiated).
    vx, vw = kiln.vmap(kiln.grad(grow2, argnums=(0, 1)), in_axes=(0, None))(xs, w)
    close(vx, gx)
    close(vw, np.stack([np.asarray(p[1]) for p in per]))
    tot = kiln.grad(lambda xs, w: kiln.vmap(grow2, in_axes=(0, None))(xs, w).sum(),
                    argnums=(0, 1))
    for fn in (tot, kiln.jit(tot)):
        a, b = fn(xs, w)
        close(a, gx)
        close(b, gw, 1e-3)
    # Second order: per-example Hessians, and derivatives of the batched gradient.
    h = np.stack([np.asarray(kiln.hessian(grow)(x)) for x in xs])
    close(kiln.vmap(kiln.hessian(grow))(xs), h, 1e-3)
    close(kiln.jit(kiln.vmap(kiln.hessian(grow)))(xs), h, 1e-3)
    # grad of vmap of grad: the masked loop's per-example tapes differentiated again.
    close(kiln.grad(lambda xs: kiln.vmap(kiln.grad(grow))(xs)[:, 0].sum())(xs)[:, 0],
          h[:, 0, 0], 1e-3)


# -------------------------------------------------- vmap composed with every AD transform

def smooth(x, w):
    return jnp.sum(jnp.tanh(x @ w) ** 2) + jnp.sum(jnp.sin(x) * x)


def vec(x, w):
    return jnp.tanh(x @ w) * jnp.sum(x)


@EXAMPLES
@given(size=st.integers(0, 3), n=st.integers(1, 3), axis=st.sampled_from([0, 1]),
       seed=st.integers(0, 99))
def test_vmap_of_derivatives_equals_the_loop(size, n, axis, seed):
    rng = np.random.RandomState(seed)
    xs = np.moveaxis(rng.randn(size, n).astype(np.float32), 0, axis)
    w = rng.randn(n, 2).astype(np.float32)
    transforms = {
        "grad": kiln.grad(smooth),
        "jacfwd": kiln.jacfwd(vec),
        "jacrev": kiln.jacrev(vec),
        "hessian": kiln.hessian(smooth),
        "jvp": lambda x, w: kiln.jvp(lambda x: vec(x, w), (x,), (jnp.ones_like(x),))[1],
        "vjp": lambda x, w: kiln.vjp(lambda x: vec(x, w), x)[1](jnp.ones((2,)))[0],
    }
    for name, t in transforms.items():
        vt = kiln.vmap(t, in_axes=(axis, None))
        for fn in (vt, kiln.jit(vt)):
            got = np.asarray(fn(xs, w))
            if size:
                want = np.stack([np.asarray(t(x, w)) for x in np.moveaxis(xs, axis, 0)])
                close(got, want, 1e-3)
            else:
                assert got.shape[0] == 0, name


@EXAMPLES
@given(size=st.integers(1, 3), n=st.integers(1, 3), seed=st.integers(0, 99))
def test_derivatives_of_vmap_equal_per_example_results(size, n, seed):
    rng = np.random.RandomState(seed)
    xs = rng.randn(size, n).astype(np.float32)
    w = rng.randn(n, 2).astype(np.float32)
    batch = kiln.vmap(vec, in_axes=(0, None))
    jac = [np.asarray(kiln.jacfwd(vec)(x, w)) for x in xs]           # (2, n) each
    block = np.zeros((size, 2, size, n), np.float32)
    for i, j in enumerate(jac):
        block[i, :, i, :] = j
    for J in (kiln.jacfwd(batch), kiln.jacrev(batch), kiln.jit(kiln.jacrev(batch))):
        close(J(xs, w), block, 1e-3)
    total = lambda xs, w: kiln.vmap(smooth, in_axes=(0, None))(xs, w).sum()  # noqa: E731
    g = np.stack([np.asarray(kiln.grad(smooth)(x, w)) for x in xs])
    close(kiln.grad(total)(xs, w), g, 1e-3)
    close(kiln.jit(kiln.grad(total))(xs, w), g, 1e-3)
    gw = sum(np.asarray(kiln.grad(smooth, argnums=1)(x, w)) for x in xs)
    close(kiln.grad(total, argnums=1)(xs, w), gw, 1e-3)
    hs = [np.asarray(kiln.hessian(smooth)(x, w)) for x in xs]
    H = np.zeros((size, n, size, n), np.float32)
    for i, h in enumerate(hs):
        H[i, :, i, :] = h
    close(kiln.hessian(total)(xs, w), H, 1e-3)
    t = rng.randn(size, n).astype(np.float32)
    out, tan = kiln.jvp(lambda xs: batch(xs, w), (xs,), (t,))
    close(tan, np.stack([j @ ti for j, ti in zip(jac, t)]), 1e-3)
    ct = rng.randn(size, 2).astype(np.float32)
    _, back = kiln.vjp(lambda xs: batch(xs, w), xs)
    close(back(ct)[0], np.stack([c @ j for j, c in zip(jac, ct)]), 1e-3)


# ------------------------------------------------------------------ custom_jvp / custom_vjp

@kiln.custom_jvp
def odd(x, y):
    return jnp.sin(x) * y


@odd.defjvp
def _odd_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    return odd(x, y), 100.0 * tx + 7.0 * ty * x   # deliberately not the true derivative


@kiln.custom_vjp
def rev(x, y):
    return jnp.sin(x) * y


def _rev_fwd(x, y):
    return rev(x, y), (jnp.cos(x), y)


def _rev_bwd(res, ct):
    c, y = res
    return ct * 10.0, jnp.sum(ct * 2.0 * c) * jnp.ones_like(y)   # deliberately different


rev.defvjp(_rev_fwd, _rev_bwd)


def odd_grads(x, y):
    """The custom rule's gradient of sum(odd(x, y)) for one example."""
    return 100.0 * np.ones_like(x), 7.0 * x


def rev_grads(x, y):
    return 10.0 * np.ones_like(x), 2.0 * np.sum(np.cos(x)) * np.ones_like(y)


@pytest.mark.parametrize("fun, rule", [(odd, odd_grads), (rev, rev_grads)], ids=["jvp", "vjp"])
@EXAMPLES
@given(size=st.integers(0, 3), n=st.integers(0, 2), x_axis=st.sampled_from([0, 1]),
       y_batched=st.booleans(), seed=st.integers(0, 99))
def test_custom_rules_survive_vmap(fun, rule, size, n, x_axis, y_batched, seed):
    rng = np.random.RandomState(seed)
    xs = batched(rng, (n,), size, x_axis)
    ys = batched(rng, (n,), size, 0) if y_batched else rng.randn(n).astype(np.float32)
    in_axes = (x_axis, 0 if y_batched else None)
    vf = kiln.vmap(fun, in_axes=in_axes)
    value = per_example(lambda x, y: np.sin(x) * y, (xs, ys), in_axes, size)
    close(vf(xs, ys), value, 1e-5)
    close(kiln.jit(vf)(xs, ys), value, 1e-5)
    name = "custom_jvp_call(" if fun is odd else "custom_vjp_call("
    assert name in str(kiln.make_ir(vf)(xs, ys))
    per = [rule(example(xs, x_axis, i), example(ys, in_axes[1], i)) for i in range(size)]
    want_x = np.moveaxis(np.stack([p[0] for p in per]), 0, x_axis) if size else xs * 0
    want_y = (np.stack([p[1] for p in per]) if y_batched else sum(p[1] for p in per)) \
        if size else ys * 0
    # grad of vmap: the batched primitive's derivative uses the batched rule.
    total = kiln.grad(lambda x, y: vf(x, y).sum(), argnums=(0, 1))
    for fn in (total, kiln.jit(total)):
        gx, gy = fn(xs, ys)
        close(gx, want_x, 1e-4)
        close(gy, want_y, 1e-4)
    # vmap of grad: the rule, per example.
    if size:
        vg = kiln.vmap(kiln.grad(lambda x, y: fun(x, y).sum(), argnums=(0, 1)), in_axes=in_axes)
        gx, gy = vg(xs, ys)
        close(gx, np.stack([p[0] for p in per]), 1e-4)
        close(gy, np.stack([p[1] for p in per]), 1e-4)


def test_custom_jvp_forward_mode_through_vmap():
    xs = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    y = np.float32(2.0)
    vf = kiln.vmap(odd, in_axes=(0, None))
    _, t = kiln.jvp(lambda x: vf(x, y), (xs,), (np.ones_like(xs),))
    close(t, np.full((3, 2), 100.0))
    close(kiln.jacfwd(vf)(xs, y), kiln.jacrev(vf)(xs, y))
    close(kiln.vmap(kiln.jacfwd(odd), in_axes=(0, None))(xs, y),
          np.stack([np.eye(2) * 100.0] * 3))
    with pytest.raises(TypeError, match="custom_vjp"):
        kiln.jvp(lambda x: kiln.vmap(rev, in_axes=(0, None))(x, y), (xs,), (xs,))


# -------------------------------------------------------------------------- checkpoint

@EXAMPLES
@given(size=st.integers(0, 3), n=st.integers(1, 3), axis=st.sampled_from([0, 1, None]),
       seed=st.integers(0, 99))
def test_checkpoint_under_vmap(size, n, axis, seed):
    rng = np.random.RandomState(seed)
    xs = batched(rng, (2, n), size, axis)
    ws = batched(rng, (n, 3), size, 0)
    block = kiln.checkpoint(lambda a, b: jnp.sin(a @ b) * 2.0)

    def f(x, w):
        return jnp.sum(block(x, w) ** 2)
    vf = kiln.vmap(f, in_axes=(axis, 0))
    assert "remat(" in str(kiln.make_ir(vf)(xs, ws))
    if not size:
        assert np.shape(vf(xs, ws)) == (0,)
        return
    args = [(example(xs, axis, i), ws[i]) for i in range(size)]
    close(vf(xs, ws), [f(*a) for a in args], 1e-4)
    vg = kiln.vmap(kiln.grad(f, argnums=(0, 1)), in_axes=(axis, 0))
    per = [kiln.grad(f, argnums=(0, 1))(*a) for a in args]
    gx, gw = vg(xs, ws)
    close(gx, np.stack([p[0] for p in per]), 1e-3)
    close(gw, np.stack([p[1] for p in per]), 1e-3)
    total = kiln.grad(lambda x, w: vf(x, w).sum(), argnums=(0, 1))
    for fn in (total, kiln.jit(total)):
        tx, tw = fn(xs, ws)
        close(tw, np.stack([p[1] for p in per]), 1e-3)
        want_x = sum(np.asarray(p[0]) for p in per) if axis is None else \
            np.moveaxis(np.stack([p[0] for p in per]), 0, axis)
        close(tx, want_x, 1e-3)


# -------------------------------------------------------------------------- debug_print

def show(x):
    kiln.debug.print("x={x}", x=x)
    return x * 2.0


def show_twice(x):
    kiln.debug.print("a {}", x)
    kiln.debug.print("b {}", x.sum())
    return x


def printed(fn, *args):
    """What `fn(*args)` writes to stdout, and its result."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out = fn(*args)
    return buf.getvalue(), out


@EXAMPLES
@given(size=st.integers(0, 3), n=st.integers(0, 2), axis=st.sampled_from([0, 1]),
       use_jit=st.booleans())
def test_debug_print_under_vmap_prints_like_a_loop(size, n, axis, use_jit):
    xs = np.moveaxis(np.arange(size * n, dtype=np.float32).reshape(size, n), 0, axis)
    want = "".join(printed(kiln.jit(show), x)[0] for x in np.moveaxis(xs, axis, 0))
    vf = kiln.vmap(show, in_axes=axis)
    text, out = printed(kiln.jit(vf) if use_jit else vf, xs)
    assert text == want
    assert np.shape(out) == (size, n)


def test_debug_print_order_is_per_print_then_per_example(capsys):
    """As JAX's vmap runs a debug callback: each print once per example, in example order;
    nested vmaps run the inner axis outermost (JAX 0.10.2 prints the same lines)."""
    xs = np.arange(3, dtype=np.float32)
    capsys.readouterr()
    kiln.vmap(show_twice)(xs)
    assert capsys.readouterr().out.split("\n")[:-1] == [
        "a 0.0", "a 1.0", "a 2.0", "b 0.0", "b 1.0", "b 2.0"]
    kiln.vmap(kiln.vmap(show))(np.arange(4, dtype=np.float32).reshape(2, 2))
    assert capsys.readouterr().out.split() == ["x=0.0", "x=2.0", "x=1.0", "x=3.0"]


def test_debug_print_in_a_derivative_under_vmap(capsys):
    xs = np.array([1.0, 2.0], np.float32)
    capsys.readouterr()
    g = kiln.vmap(kiln.grad(lambda x: jnp.sin(show(x))))(xs)
    close(g, 2.0 * np.cos(2.0 * xs))
    assert capsys.readouterr().out.split() == ["x=1.0", "x=2.0"]
