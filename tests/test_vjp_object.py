"""The object `vjp` returns (JAX 0.10.2's VJP object): its residuals `args_res` (the arguments
the backward pass reads as they are, `NotNeeded()` for the others) and `opaque_residuals`, a
pytree of them that jit passes in and out, and `with_refs` (Refs that gradients add into,
`GradValue()`, `DontWant()`), against JAX on the examples of JAX's vjp-objects and refs pages."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp

jax = pytest.importorskip("jax")
jjnp = jax.numpy


def _layer(np_):
    return lambda W, x: np_.tanh(x @ W)


def _both(np_):
    return np_.ones((3, 3)), np_.ones((2, 3))


def test_args_res_holds_the_arguments_the_backward_pass_reads_as_jaxs():
    _, got = kiln.vjp(_layer(jnp), *_both(jnp))
    _, want = jax.vjp(_layer(jjnp), *_both(jjnp))
    assert repr(got.args_res) == repr(want.args_res)
    assert len(kiln.tree_util.tree_leaves(got)) == len(jax.tree_util.tree_leaves(want)) == 4

    def g(np_):
        return lambda d, z: np_.sin(d["a"]) + z
    args = {"a": np.ones(3, np.float32), "b": (np.ones(2, np.float32), 1.0)}, 2.0
    _, got = kiln.vjp(g(jnp), *args)
    _, want = jax.vjp(g(jjnp), *args)
    assert repr(got.args_res) == repr(want.args_res) == \
        "[(NotNeeded(), (NotNeeded(), NotNeeded())), NotNeeded()]"
    assert kiln.tree_util.tree_leaves(got.args_res) == []
    np.testing.assert_allclose(got.opaque_residuals[0], np.cos(np.ones(3)), rtol=1e-6)
    for a, b in zip(kiln.tree_util.tree_leaves(got(jnp.ones(3))),
                    jax.tree_util.tree_leaves(want(jjnp.ones(3)))):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_the_backward_pass_reads_the_residuals_it_holds():
    """`args_res` may be assigned into; a VJP object rebuilt from other leaves (as jit
    rebuilds it, or a user's unflatten) runs on those."""
    W, x = _both(jnp)
    y, f_vjp = kiln.vjp(_layer(jnp), W, x)
    want = f_vjp(jnp.ones_like(y))
    f_vjp.args_res[0] = 2 * W
    _, other = kiln.vjp(_layer(jnp), 2 * W, x)
    wrong = f_vjp(jnp.ones_like(y))   # the residuals computed at W, with 2 W put in
    np.testing.assert_allclose(wrong[1], (jnp.ones_like(y) * (1 - y ** 2)) @ (2 * W).T,
                               rtol=1e-5)
    f_vjp.args_res[0] = W
    leaves, tree = kiln.tree_util.tree_flatten(f_vjp)
    for got in (f_vjp(jnp.ones_like(y)),
                kiln.jit(lambda *a: kiln.tree_util.tree_unflatten(tree, a[:-1])(a[-1]))(
                    *leaves, jnp.ones_like(y))):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    assert not np.allclose(other(jnp.ones_like(y))[1], want[1])


def test_forward_and_backward_jitted_apart_give_the_gradients():
    """The vjp-objects page's pipeline: jit(fwd) returns the VJP object, jit(bwd) takes it."""
    def fwd_and_bwd(module, f):
        return module.jit(lambda *a: module.vjp(f, *a)), module.jit(lambda v, ct: v(ct))
    results = []
    for module, np_ in ((kiln, jnp), (jax, jjnp)):
        fwd, bwd = fwd_and_bwd(module, _layer(np_))
        W1, x0 = _both(np_)
        W1 = 0.2 * W1   # tanh not saturated: the gradients are not all rounding
        x1, res1 = fwd(W1, x0)
        x2, res2 = fwd(2 * W1, x1)
        dW2, dx1 = bwd(res2, np_.ones_like(x2))
        results.append((x2, dW2, *bwd(res1, dx1)))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_with_refs_adds_into_refs_and_skips_what_is_not_wanted():
    def take(module, np_):   # the page's jitted take (JAX's RefAccum needs a dynamic index)
        at = module.jit(lambda a, j: a[j])
        return lambda x, i: np_.sin(x) * at(x, i)
    x = np.arange(4, dtype=np.float32)
    _, got = kiln.vjp(take(kiln, jnp), jnp.asarray(x), 2)
    _, want = jax.vjp(take(jax, jjnp), jjnp.asarray(x), 2)
    ref = kiln.new_ref(jnp.full(4, 100.0))
    out = got.with_refs(ref, kiln.ad.GradValue())(jnp.ones(4))
    assert repr(out[0]) == "GradRef()" and out[1].dtype == kiln.ad.float0
    want_ref = jax.new_ref(jjnp.full(4, 100.0))
    want.with_refs(want_ref, jax.ad.GradValue())(jjnp.ones(4))
    np.testing.assert_allclose(ref[...], want_ref[...], rtol=1e-6)
    value, _ = got.with_refs(kiln.ad.GradValue(), kiln.ad.GradValue())(jnp.ones(4))
    np.testing.assert_allclose(value, want(jjnp.ones(4))[0], rtol=1e-6)
    skipped = got.with_refs(kiln.ad.DontWant(), kiln.ad.DontWant())(jnp.ones(4))
    assert repr(skipped) == repr(want.with_refs(jax.ad.DontWant(), jax.ad.DontWant())(
        jjnp.ones(4))) == "(DidntWant(), DidntWant())"
    with pytest.raises(ValueError, match="one entry per leaf of the differentiated "
                                         "function's arguments"):
        got.with_refs(kiln.ad.DontWant())
    with pytest.raises(TypeError, match="not str"):
        got.with_refs("value", kiln.ad.DontWant())(jnp.ones(4))
    with pytest.raises(TypeError, match="was called with 2 arguments; it takes one"):
        got(jnp.ones(4), 2.0)


def test_with_refs_accumulates_microbatch_gradients_inside_scan():
    """The refs page's recipe: a scan over microbatches adds each backward pass into one
    Ref; the total is the gradient of the summed loss."""
    def loss(Ws, xs):
        act, _ = kiln.lax.scan(lambda x, W: (jnp.dot(x, W), None), xs, Ws)
        return jnp.mean(act)

    Ws = jnp.asarray(np.linspace(0.5, 1.5, 2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3))
    batches = jnp.asarray(np.linspace(-1, 1, 4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3))
    acc = kiln.new_ref(jnp.zeros_like(Ws))

    def step(_, xs):
        value, f_vjp = kiln.vjp(lambda W: loss(W, xs), Ws)
        f_vjp.with_refs(acc)(jnp.ones_like(value))
        return (), value
    kiln.lax.scan(step, (), batches)
    want = kiln.grad(lambda W: sum(loss(W, xs) for xs in batches))(Ws)
    np.testing.assert_allclose(kiln.freeze(acc), want, rtol=1e-5, atol=1e-6)
