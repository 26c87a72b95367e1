"""`kiln.nn.dot_product_attention`: JAX's scaled dot-product attention (its "xla"
implementation), over `kiln.numpy`: logits `einsum('BTKGH,BSKH->BKGTS')` in at least
float32 (grouped-query attention when `key` has fewer heads than `query`), scaled, biased,
masked with 0.7 times the dtype's lowest value (a boolean `mask`, `is_causal`, per-batch
sequence lengths, a local window), softmax in float32, then weighted values."""
import numpy as np

from .. import numpy as jnp
from ..numpy._core import check_arraylike
from . import _functions   # softmax (that module imports this one: used at call time)


def _ensure_4d(t):
    return t if t.ndim == 4 else t[None]


def _reshape_bias(t, B, K, G, T, S):
    """A bias or mask broadcastable to (B, N, T, S) as (B, K, G, T, S)."""
    t = jnp.broadcast_to(_ensure_4d(t) if t.ndim <= 4 else t, (B, K * G, T, S))
    return jnp.reshape(t, (B, K, G, T, S))


def _masks(logits, mask, is_causal, q_lens, kv_lens, window):
    B, K, G, T, S = logits.shape
    combined = None if mask is None else _reshape_bias(mask.astype(bool), B, K, G, T, S)

    def both(m):
        return m if combined is None else jnp.logical_and(combined, m)
    rows = jnp.arange(T)[:, None]
    cols = jnp.arange(S)[None, :]
    if is_causal:
        combined = both(jnp.broadcast_to(cols <= rows, (B, K, G, T, S)))
    if window is not None:
        left, right = (window, window) if isinstance(window, int) else window
        inside = (cols >= rows - left) & (cols <= rows + right)
        combined = both(jnp.broadcast_to(inside, (B, K, G, T, S)))
    if q_lens is not None:
        m = jnp.arange(T)[None, :] < q_lens[:, None]
        combined = both(jnp.broadcast_to(m[:, None, None, :, None], (B, K, G, T, S)))
    if kv_lens is not None:
        m = jnp.arange(S)[None, :] < kv_lens[:, None]
        combined = both(jnp.broadcast_to(m[:, None, None, None, :], (B, K, G, T, S)))
    if combined is None:
        return logits
    large_negative = np.asarray(0.7 * np.finfo(logits.dtype).min, logits.dtype)
    return jnp.where(combined, logits, large_negative)


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None, return_residual=False):
    """`softmax(query @ key^T * scale + bias, masked) @ value` over (B, T, N, H) queries and
    (B, S, K, H) keys and values (or the same without B); N a multiple of K."""
    check_arraylike("dot_product_attention", query, key, value)
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: implementation {implementation!r} is not "
                         f"available in kiln; use None or 'xla'")
    if return_residual:
        raise NotImplementedError("dot_product_attention(return_residual=True) is not "
                                  "available in kiln")
    query, key, value = jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)
    unbatched = query.ndim == 3
    q, k, v = _ensure_4d(query), _ensure_4d(key), _ensure_4d(value)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError("dot_product_attention: query, key and value must be 3-D or 4-D")
    B, T, N, H = q.shape
    S, K = k.shape[1], k.shape[2]
    if k.shape != v.shape or k.shape[0] != B or k.shape[3] != H:
        raise ValueError(f"dot_product_attention: key {k.shape} and value {v.shape} must have "
                         f"the same shape, with query's batch and head dimensions {q.shape}")
    if N % K:
        raise ValueError(f"dot_product_attention: the number of query heads ({N}) must be a "
                         f"multiple of the number of key/value heads ({K})")
    G = N // K
    scale = 1.0 / np.sqrt(H) if scale is None else scale
    logits_dtype = jnp.promote_types(q.dtype, jnp.float32)
    qg = jnp.reshape(q, (B, T, K, G, H))
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", qg, k, preferred_element_type=logits_dtype)
    logits = logits * jnp.array(scale, dtype=logits.dtype)
    if bias is not None:
        logits = (logits + _reshape_bias(jnp.asarray(bias), B, K, G, T, S)).astype(logits.dtype)
    logits = _masks(logits, None if mask is None else jnp.asarray(mask), is_causal,
                    query_seq_lengths, key_value_seq_lengths, local_window_size)
    probs = _functions.softmax(logits.astype(np.float32), axis=-1).astype(k.dtype)
    out = jnp.reshape(jnp.einsum("BKGTS,BSKH->BTKGH", probs, v), (B, T, N, H))
    return out[0] if unbatched else out
