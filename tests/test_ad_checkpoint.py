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
    assert sorted(got) == sorted(want)   # the sines and cosines of the layers, at their lines
    assert all("test_ad_checkpoint.py" in line and "(layer)" in line for line in got[4:])


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
