"""kiln.ad_checkpoint (JAX's jax.ad_checkpoint): print_saved_residuals against JAX's on the
example of JAX's gradient-checkpointing guide, checkpoint_name, the policy answers."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.ad_checkpoint import (print_saved_residuals, checkpoint_name, checkpoint,
                                Saveable, Recompute, Offloadable)


def layer(W, x, np_):
    return np_.sin(np_.dot(W, x))


def three_layers(np_):
    def f(W1, W2, W3, x):
        return layer(W3, layer(W2, layer(W1, x, np_), np_), np_)
    return f


def _args(np_):
    return np_.ones((5, 4)), np_.ones((6, 5)), np_.ones((7, 6)), np_.ones(4)


def _printed(capsys, module, f, args):
    module.print_saved_residuals(f, *args)
    return capsys.readouterr().out.splitlines()


def test_saved_residuals_are_jaxs_for_a_chain_of_layers(capsys):
    import jax.ad_checkpoint as jax_ad_checkpoint
    import kiln.ad_checkpoint as kiln_ad_checkpoint
    got = _printed(capsys, kiln_ad_checkpoint, three_layers(jnp), _args(jnp))
    want = _printed(capsys, jax_ad_checkpoint, three_layers(jjnp), _args(jjnp))
    assert got[:4] == want[:4] == ["f32[5,4] from the argument W1", "f32[6,5] from the argument W2",
                                   "f32[7,6] from the argument W3", "f32[4] from the argument x"]
    assert got == want   # each layer's sine, then its cosine, in JAX's forward order
    assert all("test_ad_checkpoint.py" in line and "(layer)" in line for line in got[4:])


def test_saved_coefficients_come_in_jaxs_forward_order(capsys):
    """A derivative's coefficient (tanh's 1 - tanh², x**2's 2x) is listed beside the operation
    it differentiates, where JAX's forward pass computes it (kiln's backward pass makes it)."""
    import jax.ad_checkpoint as jax_ad_checkpoint

    def ratio(np_, name):
        def f(x, y):
            t = name(np_.tanh(x * y), "t")
            return np_.sum(np.float32(2) * t / (1 + x ** 2) + np_.cos(t))
        return f
    xs = np.linspace(0.1, 1, 3, dtype=np.float32), np.arange(3, dtype=np.float32)
    got = _printed(capsys, kiln.ad_checkpoint, ratio(jnp, checkpoint_name), xs)
    want = _printed(capsys, jax_ad_checkpoint,
                    ratio(jjnp, jax.ad_checkpoint.checkpoint_name), xs)
    assert got == want
    assert [line.split(" from")[0] for line in got[2:]] == [
        "f32[3] output of tanh", "f32[3] output of sub", "f32[3] output of mul",
        "f32[3] output of mul", "f32[3] output of add", "f32[3] output of integer_pow",
        "f32[3] output of sin"]


def test_saved_arguments_are_named_by_their_paths_as_jaxs(capsys):
    """The guide's `loss(params, x, y)` with a list of weights: `params[0]`, ..., then `x`."""
    import jax.ad_checkpoint as jax_ad_checkpoint

    def loss(np_):
        def f(params, x, y):
            *Ws, last = params
            for W in Ws:
                x = layer(W, x, np_)
            return np_.sum((np_.dot(last, x) - y) ** 2)
        return f

    def arguments(np_):
        return [np_.ones((4, 4))] * 3, np_.ones(4), np_.ones(4)
    got = _printed(capsys, kiln.ad_checkpoint, loss(jnp), arguments(jnp))
    want = _printed(capsys, jax_ad_checkpoint, loss(jjnp), arguments(jjnp))
    named = ["f32[4,4] from the argument params[0]", "f32[4,4] from the argument params[1]",
             "f32[4,4] from the argument params[2]", "f32[4] from the argument x"]
    assert got[:4] == want[:4] == named
    got = _printed(capsys, kiln.ad_checkpoint, lambda *a: loss(jnp)(*a), arguments(jnp))
    assert got[:4] == [line.replace("params", "a[0]").replace("argument x", "argument a[1]")
                       for line in named]   # JAX's names of a *args function's leaves


def test_checkpoint_saves_only_the_arguments(capsys):
    got = _printed(capsys, kiln.ad_checkpoint, checkpoint(three_layers(jnp)), _args(jnp))
    assert got == ["f32[5,4] from the argument W1", "f32[6,5] from the argument W2",
                   "f32[7,6] from the argument W3", "f32[4] from the argument x"]


def test_checkpoint_name_and_policy_answers():
    x = {"a": jnp.arange(3.0), "b": 2.0}
    got = kiln.jit(lambda t: checkpoint_name(t, "acts"))(x)
    np.testing.assert_array_equal(got["a"], x["a"])
    g = kiln.grad(lambda v: jnp.sum(checkpoint_name(jnp.sin(v), "s") ** 2))(jnp.arange(3.0))
    np.testing.assert_allclose(g, jax.grad(lambda v: jjnp.sum(jjnp.sin(v) ** 2))(jjnp.arange(3.0)),
                               rtol=1e-6)
    with pytest.raises(TypeError, match="name must be a string"):
        checkpoint_name(x, 3)
    assert repr(Saveable) == "Saveable" and repr(Recompute) == "Recompute"
    assert Offloadable(src="device", dst="pinned_host").dst == "pinned_host"
    assert kiln.ad_checkpoint.checkpoint_policies is kiln.checkpoint_policies


# ------------------------------------------------------------------ checkpoint(policy=...)

def _policies(module):
    p = module.checkpoint_policies
    return {"dots": p.dots_saveable, "dots_no_batch": p.dots_with_no_batch_dims_saveable,
            "everything": p.everything_saveable, "nothing": p.nothing_saveable,
            "both": p.save_from_both_policies(p.nothing_saveable, p.checkpoint_dots),
            "offload": p.offload_dot_with_no_batch_dims("device", "pinned_host")}


def test_policy_saves_the_dots_jax_saves(capsys):
    """The guide's cell: `dots_with_no_batch_dims_saveable` keeps the three dot_general
    outputs (and recomputes the sines from them), as JAX lists them."""
    import jax.ad_checkpoint as jax_ad_checkpoint
    policy = "dots_no_batch"
    got = _printed(capsys, kiln.ad_checkpoint,
                   checkpoint(three_layers(jnp), policy=_policies(kiln)[policy]), _args(jnp))
    want = _printed(capsys, jax_ad_checkpoint,
                    jax.checkpoint(three_layers(jjnp), policy=_policies(jax)[policy]),
                    _args(jjnp))
    assert got[:4] == want[:4]
    assert sorted(got) == sorted(want)
    assert [line.split(" from ")[0] for line in got[4:]] == [
        "f32[5] output of dot_general", "f32[6] output of dot_general",
        "f32[7] output of dot_general"]
    got = _printed(capsys, kiln.ad_checkpoint,
                   checkpoint(three_layers(jnp), policy=_policies(kiln)["nothing"]), _args(jnp))
    assert got == want[:4]


def _rand(shapes, seed=0):
    rng = np.random.RandomState(seed)
    return [rng.randn(*s).astype(np.float32) for s in shapes]


def _net(np_, inner=None):
    def net(W1, W2, x):
        h = np_.tanh(np_.dot(W1, x))
        h = h if inner is None else inner(h)
        return np_.sum(np_.sin(np_.dot(W2, h)) * h[:3])
    return net


@pytest.mark.parametrize("policy", sorted(_policies(kiln)))
def test_policy_gradients_are_jaxs(policy):
    args = _rand([(4, 3), (3, 4), (3,)])
    want = jax.grad(jax.checkpoint(_net(jjnp), policy=_policies(jax)[policy]),
                    argnums=(0, 1, 2))(*args)
    got = kiln.grad(checkpoint(_net(jnp), policy=_policies(kiln)[policy]),
                    argnums=(0, 1, 2))(*args)
    plain = kiln.grad(_net(jnp), argnums=(0, 1, 2))(*args)
    for g, w, p in zip(got, want, plain):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(g, p, rtol=2e-5, atol=1e-6)


def test_policy_saved_values_are_read_not_recomputed():
    """The forward `remat` returns the saved dots (`num_saved=2`); the backward one reads
    them and computes no dot of the forward pass again: only the dots of the cotangents."""
    f = checkpoint(_net(jnp), policy=kiln.checkpoint_policies.dots_saveable)
    text = str(kiln.make_jaxpr(kiln.grad(f))(*_rand([(4, 3), (3, 4), (3,)])))
    assert "num_saved=2" in text
    backward = text[text.index("def net_bwd"):]
    assert backward.count("dot_general(") == 4   # two per dot: the cotangents of its operands
    plain = str(kiln.make_jaxpr(kiln.grad(checkpoint(_net(jnp))))(*_rand([(4, 3), (3, 4), (3,)])))
    assert "num_saved" not in plain
    assert plain[plain.index("def net_bwd"):].count("dot_general(") == 6


def test_policy_batch_dimensions(capsys):
    """A batched dot is saved by `dots_saveable` and recomputed under
    `dots_with_no_batch_dims_saveable`."""
    def f(np_):
        return lambda a, b: np_.sum(np_.sin(np_.einsum("bij,bjk->bik", a, b)))
    args = _rand([(2, 3, 4), (2, 4, 5)])
    for policy, extra in (("dots", ["f32[2,3,5] output of dot_general"]), ("dots_no_batch", [])):
        got = _printed(capsys, kiln.ad_checkpoint,
                       checkpoint(f(jnp), policy=_policies(kiln)[policy]), args)
        assert got[:2] == ["f32[2,3,4] from the argument a", "f32[2,4,5] from the argument b"]
        assert [line.split(" from ")[0] for line in got[2:]] == extra
        np.testing.assert_allclose(
            kiln.grad(checkpoint(f(jnp), policy=_policies(kiln)[policy]))(*args),
            jax.grad(jax.checkpoint(f(jjnp), policy=_policies(jax)[policy]))(*args),
            rtol=2e-5, atol=1e-6)


def test_policy_under_jit_vmap_nesting_and_second_order():
    args = _rand([(4, 3), (3, 4), (3,)])

    def nested(module, np_):
        p = _policies(module)
        inner = module.checkpoint(lambda h: np_.cos(np_.outer(h, h)).sum(0), policy=p["dots"])
        return module.checkpoint(_net(np_, inner), policy=p["everything"])
    for k_f, j_f in ((checkpoint(_net(jnp), policy=_policies(kiln)["dots"]),
                      jax.checkpoint(_net(jjnp), policy=_policies(jax)["dots"])),
                     (nested(kiln, jnp), nested(jax, jjnp))):
        np.testing.assert_allclose(kiln.jit(kiln.grad(k_f))(*args), jax.grad(j_f)(*args),
                                   rtol=2e-5, atol=1e-6)
        xs = np.stack(_rand([(3,)] * 2, seed=1))
        np.testing.assert_allclose(
            kiln.vmap(kiln.grad(k_f, argnums=2), in_axes=(None, None, 0))(*args[:2], xs),
            jax.vmap(jax.grad(j_f, argnums=2), in_axes=(None, None, 0))(*args[:2], xs),
            rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(
            kiln.grad(lambda W1, W2, x: kiln.vmap(k_f, in_axes=(None, None, 0))(
                W1, W2, x).sum())(args[0], args[1], xs),
            jax.grad(lambda W1, W2, x: jax.vmap(j_f, in_axes=(None, None, 0))(
                W1, W2, x).sum())(args[0], args[1], xs), rtol=2e-5, atol=1e-6)
        hess = kiln.hessian(k_f, argnums=2)(*args)
        np.testing.assert_allclose(hess, jax.hessian(j_f, argnums=2)(*args),
                                   rtol=1e-4, atol=1e-5)
        second = kiln.grad(lambda *a: kiln.grad(k_f, argnums=2)(*a).sum(), argnums=0)(*args)
        np.testing.assert_allclose(
            second, jax.grad(lambda *a: jax.grad(j_f, argnums=2)(*a).sum(), argnums=0)(*args),
            rtol=1e-4, atol=1e-5)


def test_policy_answers_save_or_recompute(capsys):
    """A user's policy may answer `Saveable`, `Recompute` or an `Offloadable` (saved)."""
    for answer, n in ((Saveable, 2), (Recompute, 0), (Offloadable("device", "pinned_host"), 2)):
        def policy(prim, *avals, **params):
            return answer if prim.name == "dot_general" else Recompute
        got = _printed(capsys, kiln.ad_checkpoint, checkpoint(_net(jnp), policy=policy),
                       _rand([(4, 3), (3, 4), (3,)]))
        assert len(got) == 3 + n


def _named_layers(module, np_):
    def f(W1, W2, W3, x):
        x = module.ad_checkpoint.checkpoint_name(layer(W1, x, np_), name="layer1_output")
        x = module.ad_checkpoint.checkpoint_name(layer(W2, x, np_), name="layer2_output")
        x = module.ad_checkpoint.checkpoint_name(layer(W3, x, np_), name="layer3_output")
        return x
    return f


@pytest.mark.parametrize("policy, saved", [
    ("save_any_names_but_these", ["f32[6] named 'layer2_output'"]),
    ("save_only_these_names", ["f32[5] named 'layer1_output'"])])
def test_name_policies_save_what_jax_saves(capsys, policy, saved):
    """The guide's cell with `checkpoint_name`: `save_any_names_but_these('layer1_output')`
    keeps layer2's output (layer3's is the result, which the backward pass does not read)."""
    import jax.ad_checkpoint as jax_ad_checkpoint

    def make(module, np_):
        return module.checkpoint(_named_layers(module, np_),
                                 policy=getattr(module.checkpoint_policies, policy)(
                                     "layer1_output"))
    got = _printed(capsys, kiln.ad_checkpoint, make(kiln, jnp), _args(jnp))
    want = _printed(capsys, jax_ad_checkpoint, make(jax, jjnp), _args(jjnp))
    assert got == want
    assert [line.split(" from ")[0] for line in got[4:]] == saved
    assert got[4].endswith("(_named_layers.<locals>.f)") and "test_ad_checkpoint.py:" in got[4]
    args = _rand([(5, 4), (6, 5), (7, 6), (4,)])
    _assert_grads_close(kiln.grad(lambda *a: make(kiln, jnp)(*a).sum(), argnums=(0, 3))(*args),
                        jax.grad(lambda *a: make(jax, jjnp)(*a).sum(), argnums=(0, 3))(*args))


def _assert_grads_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)


def test_checkpoint_name_is_the_name_primitive():
    text = str(kiln.make_jaxpr(lambda v: checkpoint_name(jnp.sin(v), "s"))(jnp.arange(3.0)))
    assert "name(" in text and "name='s'" in text
    cube = checkpoint(lambda u: jnp.sin(checkpoint_name(u * u, "s")) * u,
                      policy=kiln.checkpoint_policies.save_only_these_names("s"))
    v = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    want = jax.vmap(jax.grad(lambda u: jjnp.sum(jjnp.sin(u * u) * u)))(v)
    assert "num_saved=1" in str(kiln.make_jaxpr(kiln.grad(lambda u: jnp.sum(cube(u))))(v[0]))
    for backend in ("reference", "llvm", "pjrt"):   # each lowers the name primitive
        f = kiln.jit(kiln.vmap(kiln.grad(lambda u: jnp.sum(cube(u)))), backend=backend)
        np.testing.assert_allclose(f(v), want, rtol=2e-6, atol=1e-6)


def test_everything_saveable_recomputes_loops_and_saves_the_rest(capsys):
    """A loop in the body is recomputed (its backward pass needs its carries as well); the
    values around it are saved; the derivative is JAX's."""
    def f(module, np_):
        def body(W, x):
            h = np_.sin(np_.dot(W, x))
            h = module.lax.fori_loop(0, 3, lambda i, c: np_.tanh(c) * 1.5, h)
            return np_.sum(np_.cos(h))
        return module.checkpoint(body, policy=module.checkpoint_policies.everything_saveable)
    args = _rand([(3, 3), (3,)])
    got = _printed(capsys, kiln.ad_checkpoint, f(kiln, jnp), args)
    assert got[:2] == ["f32[3,3] from the argument W", "f32[3] from the argument x"]
    assert [line.split(" from ")[0] for line in got[2:]] == [
        "f32[3] output of dot_general", "f32[3] output of sin"]   # the loop's input, no carry
    _assert_grads_close(kiln.grad(f(kiln, jnp), argnums=(0, 1))(*args),
                        jax.grad(f(jax, jjnp), argnums=(0, 1))(*args))


def test_policy_derivatives_match_finite_differences():
    from kiln.test_util import check_grads
    f = checkpoint(_net(jnp), policy=kiln.checkpoint_policies.dots_saveable)
    check_grads(f, _rand([(4, 3), (3, 4), (3,)]), order=2, modes=["rev"])


def test_a_checkpointed_value_is_named_by_the_operation_inside(capsys):
    """The guide's nested checkpoints: the values saved at each `checkpoint` call are named by
    the `sin` inside that made them, as JAX names them (not by the checkpoint call)."""
    import jax.ad_checkpoint as jax_ad_checkpoint

    def nested(module, np_):
        def g(W, x):
            return np_.sin(np_.dot(W, x))

        def f(W1, W2, W3, x):
            x = module.checkpoint(g)(W1, x)
            x = module.checkpoint(g)(W2, x)
            return module.checkpoint(g)(W3, x)
        return f
    got = _printed(capsys, kiln.ad_checkpoint, nested(kiln, jnp), _args(jnp))
    want = _printed(capsys, jax_ad_checkpoint, nested(jax, jjnp), _args(jjnp))
    assert got == want
    assert sum("output of sin" in line and "(test_a_checkpointed_value_is_named_by_the_"
               "operation_inside.<locals>.nested.<locals>.g)" in line for line in got) == 2
