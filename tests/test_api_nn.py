"""kiln.nn.tanh and dot_product_attention against JAX (eager, jit, grad)."""
import jax
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp


def _qkv(B, T, S, N, K, H, seed=0):
    rng = np.random.default_rng(seed)
    shape = (lambda *s: s) if B is None else (lambda *s: (B,) + s)
    return (rng.standard_normal(shape(T, N, H)).astype(np.float32),
            rng.standard_normal(shape(S, K, H)).astype(np.float32),
            rng.standard_normal(shape(S, K, H)).astype(np.float32))


@pytest.mark.parametrize("B,T,S,N,K,H", [(2, 4, 4, 4, 2, 3), (None, 3, 5, 2, 1, 4)])
@pytest.mark.parametrize("opts", [{}, {"is_causal": True}, {"scale": 0.3},
                                  {"local_window_size": (1, 0)}, {"bias": True},
                                  {"mask": True}, {"seq": True}])
def test_dot_product_attention_matches_jax(B, T, S, N, K, H, opts):
    q, k, v = _qkv(B, T, S, N, K, H)
    kw = dict(opts)
    rng = np.random.default_rng(1)
    b = 1 if B is None else B
    if kw.pop("bias", False):
        kw["bias"] = rng.standard_normal((b, N, T, S)).astype(np.float32)
        if B is None:
            kw["bias"] = kw["bias"][0]
    if kw.pop("mask", False):
        kw["mask"] = rng.random((T, S)) > 0.3
    if kw.pop("seq", False):
        if B is None:
            return
        kw["query_seq_lengths"] = np.full(B, T, np.int32)
        kw["key_value_seq_lengths"] = np.maximum(np.arange(B, dtype=np.int32) % S, 1) + 1
    want = jax.nn.dot_product_attention(q, k, v, **kw)
    got = kiln.nn.dot_product_attention(q, k, v, **kw)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    if B == 2 and opts in ({"is_causal": True}, {"seq": True}):
        jitted = kiln.jit(lambda q, k, v: kiln.nn.dot_product_attention(q, k, v, **kw))
        np.testing.assert_allclose(jitted(q, k, v), want, rtol=2e-5, atol=2e-6)


def test_dot_product_attention_grad_and_errors():
    q, k, v = _qkv(2, 3, 4, 2, 1, 3)
    loss_k = lambda q: kiln.nn.dot_product_attention(q, k, v, is_causal=True).sum()  # noqa
    loss_j = lambda q: jax.nn.dot_product_attention(q, k, v, is_causal=True).sum()  # noqa
    np.testing.assert_allclose(kiln.grad(loss_k)(q), jax.grad(loss_j)(q), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="multiple of the number of key/value heads"):
        kiln.nn.dot_product_attention(*_qkv(1, 2, 2, 3, 2, 2))
    with pytest.raises(ValueError, match="not available in kiln"):
        kiln.nn.dot_product_attention(q, k, v, implementation="cudnn")


def test_tanh():
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    np.testing.assert_allclose(kiln.nn.tanh(x), jax.nn.tanh(x), rtol=1e-6)
    np.testing.assert_allclose(kiln.jit(kiln.grad(lambda x: kiln.nn.tanh(x)))(0.5),
                               jax.grad(jax.nn.tanh)(0.5), rtol=1e-6)


def test_delta_orthogonal():
    init = kiln.nn.initializers.delta_orthogonal()
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        init(kiln.random.PRNGKey(0), (3, 3))
    with pytest.raises(ValueError, match="fan_in"):
        init(kiln.random.PRNGKey(0), (3, 4, 2))
    assert isinstance(init, kiln.nn.initializers.Initializer)
    got = init(kiln.random.PRNGKey(0), (3, 3, 2, 4))
    want = jax.nn.initializers.delta_orthogonal()(jax.random.PRNGKey(0), (3, 3, 2, 4))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
