"""kiln.nn.tanh, dot_product_attention and the block-scaled products against JAX (eager, jit,
grad)."""
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


# ------------------------------------------------- scaled_matmul / scaled_dot_general

def _jax_scaled_dot(x, y, dn, configs):
    """JAX's quantization (`quantize`, which runs on CPU) and the einsum that scaled_matmul
    documents as its meaning (JAX's cuDNN kernel does not run on CPU)."""
    from jax._src.cudnn import scaled_matmul_stablehlo as S
    J = jax.numpy
    (lc, rc), (lb, rb) = dn
    a = S.shape_normalization(J.asarray(x), (lc, lb))
    b = S.shape_normalization(J.asarray(y), (rc, rb))
    (aq, sa), (bq, sb) = S.quantize(a, configs[0]), S.quantize(b, configs[1])

    def dequant(q, s):
        return q.astype(np.float32) * J.repeat(s.astype(np.float32), q.shape[-1] // s.shape[-1],
                                               -1)
    out = J.einsum("bmk,bnk->bmn", dequant(aq, sa), dequant(bq, sb))
    if configs[0].mode == "nvfp4":
        out = out * configs[0].global_scale * configs[1].global_scale
    return np.asarray(out).reshape(S.compute_dot_output_shape(x.shape, y.shape, (lc, lb),
                                                              (rc, rb)))


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_scaled_dot_general_configs_values_and_grads_match_jax(mode):
    gs = np.array([0.5], np.float32)
    kcfg = kiln.nn.get_scaled_dot_general_config(mode, *([gs] if mode == "nvfp4" else []))
    jcfg = jax.nn.get_scaled_dot_general_config(mode, *([gs] if mode == "nvfp4" else []))
    assert (kcfg.mode, kcfg.block_size, kcfg.data_type, kcfg.scale_type, kcfg.infer_only) == \
        (jcfg.mode, jcfg.block_size, str(np.dtype(jcfg.data_type)),
         str(np.dtype(jcfg.scale_type)), jcfg.infer_only)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 32, 64)) * 3).astype(np.float32)
    y = rng.standard_normal((2, 32, 64)).astype(np.float32)
    dn = (((2,), (2,)), ((0,), (0,)))
    kc, jc = [kcfg] * 3, [jcfg] * 3
    want = _jax_scaled_dot(x, y, dn, jc)
    got = kiln.nn.scaled_dot_general(x, y, dn, configs=kc)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.abs(want - np.einsum("bmk,bnk->bmn", x, y)).max() > 0.1   # really quantized
    np.testing.assert_allclose(
        kiln.jit(lambda x, y: kiln.nn.scaled_dot_general(x, y, dn, configs=kc))(x, y), want,
        rtol=1e-5, atol=1e-5)
    # JAX's backward: the transposed products, quantized for mxfp8, plain for nvfp4
    gl, gr = kiln.grad(lambda x, y: kiln.nn.scaled_dot_general(x, y, dn, configs=kc).sum(),
                       argnums=(0, 1))(x, y)
    ones = np.ones((2, 32, 32), np.float32)
    if mode == "mxfp8":
        want_l = _jax_scaled_dot(ones, y, (((2,), (1,)), ((0,), (0,))), jc)
        want_r = _jax_scaled_dot(ones, x, (((1,), (1,)), ((0,), (0,))), jc)
    else:
        want_l, want_r = np.einsum("bmn,bnk->bmk", ones, y), np.einsum("bmn,bmk->bnk", ones, x)
    np.testing.assert_allclose(gl, want_l, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(gr, want_r, rtol=1e-5, atol=1e-4)


def test_scaled_dot_general_without_batch_and_without_configs():
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((32, 64)).astype(np.float32),
            rng.standard_normal((64, 3)).astype(np.float32))
    dn = (((1,), (0,)), ((), ()))
    kc = [kiln.nn.get_scaled_dot_general_config("mxfp8")] * 3
    jc = [jax.nn.get_scaled_dot_general_config("mxfp8")] * 3
    np.testing.assert_allclose(kiln.nn.scaled_dot_general(x, y.T.copy(), (((1,), (1,)), ((), ())),
                                                          configs=kc),
                               _jax_scaled_dot(x[None], y.T[None], (((2,), (2,)), ((0,), (0,))),
                                               jc)[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kiln.nn.scaled_dot_general(x, y, dn),
                               jax.nn.scaled_dot_general(x, y, dn), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="Only support preferred_element_type"):
        kiln.nn.scaled_dot_general(x, y, dn, preferred_element_type=np.int32, configs=kc)
    with pytest.raises(ValueError, match="Unsupported mode: fp4"):
        kiln.nn.get_scaled_dot_general_config("fp4")


def test_scaled_matmul_is_the_blockwise_einsum_with_jax_checks():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3, 8)).astype(np.float32), \
        rng.standard_normal((2, 4, 8)).astype(np.float32)
    sa, sb = rng.random((2, 3, 2)).astype(np.float32), rng.random((2, 4, 2)).astype(np.float32)
    want = np.einsum("bmk,bnk->bmn", a * np.repeat(sa, 4, -1), b * np.repeat(sb, 4, -1))
    got = kiln.nn.scaled_matmul(a, b, sa, sb)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert kiln.nn.scaled_matmul(a, b, sa, sb, preferred_element_type=np.float16).dtype == \
        np.float16
    for args in [(a[0], b, sa, sb), (a, b[:, :, :4], sa, sb), (a, b, sa, sb[:, :, :1]),
                 (a, b, sa[:, :2], sb)]:
        with pytest.raises(ValueError) as want_err:
            jax.nn.scaled_matmul(*args)
        with pytest.raises(ValueError, match=str(want_err.value)[:60].replace("(", ".")
                           .replace(")", ".")):
            kiln.nn.scaled_matmul(*args)
