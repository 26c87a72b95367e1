"""The top-level options and helpers beyond the basic ones (docs/differences.md): rank
promotion and legacy keys do what JAX does, with JAX's messages (checked against JAX); the
options kiln cannot act on accept only the value it implements, or are recorded and
documented; live_arrays and effects_barrier."""
import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp


def _jax_error(fn):
    try:
        fn()
    except Exception as e:   # noqa: BLE001 -- the oracle's message, whatever its type
        return type(e), str(e)
    raise AssertionError("JAX did not raise")


@pytest.mark.parametrize("op", ["add", "multiply", "arctan2"])
def test_rank_promotion_raise_and_warn_match_jax(op):
    a, b = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    with jax.numpy_rank_promotion("raise"):
        kind, message = _jax_error(lambda: getattr(jjnp, op)(a, b))
    with kiln.numpy_rank_promotion("raise"):
        with pytest.raises(kind) as e:
            getattr(jnp, op)(jnp.asarray(a), jnp.asarray(b))
        assert str(e.value) == message
        assert getattr(jnp, op)(jnp.asarray(a), 2.0).shape == (2, 3)   # scalars are fine
        with pytest.raises(ValueError, match="rank_promotion"):
            kiln.jit(lambda x, y: x + y)(a, b)
    with kiln.numpy_rank_promotion("warn"), pytest.warns(UserWarning, match="rank_promotion"):
        getattr(jnp, op)(jnp.asarray(a), jnp.asarray(b))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(jnp, op)(jnp.asarray(a), jnp.asarray(b)).shape == (2, 3)


def test_legacy_prng_key_matches_jax():
    with jax.legacy_prng_key("error"):
        kind, message = _jax_error(lambda: jax.random.normal(jax.random.PRNGKey(0), (2,)))
    with kiln.legacy_prng_key("error"):
        with pytest.raises(kind) as e:
            kiln.random.normal(kiln.random.PRNGKey(0), (2,))
        assert str(e.value) == message
        kiln.random.normal(kiln.random.key(0), (2,))   # typed keys are fine
    with kiln.legacy_prng_key("warn"), pytest.warns(UserWarning, match="Legacy uint32 key"):
        kiln.random.uniform(kiln.random.PRNGKey(0))
    assert kiln.legacy_prng_key.value == "allow"


def test_options_kiln_implements_one_value_of():
    for option, value in [(kiln.numpy_dtype_promotion, "standard"),
                          (kiln.enable_custom_prng, False), (kiln.softmax_custom_jvp, False)]:
        with option(value):
            assert option.value == value
    for option, value in [(kiln.numpy_dtype_promotion, "strict"),
                          (kiln.enable_custom_prng, True), (kiln.softmax_custom_jvp, True)]:
        with pytest.raises(ValueError, match="implements only"):
            with option(value):
                pass


@pytest.mark.parametrize("name", ["transfer_guard", "transfer_guard_host_to_device",
                                  "transfer_guard_device_to_host",
                                  "transfer_guard_device_to_device"])
def test_transfer_guards_take_jax_values(name):
    option = getattr(kiln, name)
    assert option.value == "allow"
    with option("disallow"):
        assert option.value == "disallow" and kiln.config.read(name) == "disallow"
        assert float(jnp.asarray(np.ones(2)).sum()) == 2.0   # not checked: see the docs
    assert option.value == "allow"
    with pytest.raises(ValueError, match="expected one of 'allow', 'log', 'disallow'"):
        with option("forbid"):
            pass


def test_live_arrays_and_effects_barrier():
    a = jnp.arange(3.0)
    live = kiln.live_arrays()
    assert any(x is a for x in live) and all(type(x) is kiln.Array for x in live)
    assert any(x is a for x in kiln.live_arrays("cpu")) and not kiln.live_arrays("tpu")
    del live
    assert kiln.effects_barrier() is None


def _layer(x, W):
    return jnp.tanh(x @ W), jnp.sum(W ** 2)


def _layer_jax(x, W):
    return jjnp.tanh(x @ W), jjnp.sum(W ** 2)


@pytest.mark.parametrize("jitted", [True, False])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_fwd_and_bwd_match_jax(jitted, argnums):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    W = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    ct = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    fwd, bwd = kiln.fwd_and_bwd(_layer, argnums, has_aux=True, jitted=jitted)
    jfwd, jbwd = jax.fwd_and_bwd(_layer_jax, argnums, has_aux=True, jitted=jitted)
    y, res, aux = fwd(x, W)
    jy, jres, jaux = jfwd(x, W)
    np.testing.assert_allclose(y, jy, rtol=1e-6)
    np.testing.assert_allclose(aux, jaux, rtol=1e-6)
    got, want = bwd(res, ct), jbwd(jres, ct)
    got, want = (got, want) if isinstance(argnums, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    y2, _ = kiln.fwd_and_bwd(lambda a, b: _layer(a, b)[0], argnums)[0](x, W)
    np.testing.assert_allclose(y2, jy, rtol=1e-6)


def test_copy_to_host_async_returns_its_argument():
    tree = {"a": jnp.ones(2), "b": [3, None]}
    assert kiln.copy_to_host_async(tree) is tree
