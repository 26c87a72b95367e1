"""A program written against JAX's public API the way optimizer libraries (optax) are: run by
tests/test_compat.py in a subprocess with `jax` mapped to kiln. It prints one JSON line."""
import json
from typing import Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax, tree_util
from jax.typing import ArrayLike, DTypeLike


class ScaleByAdamState(NamedTuple):
    count: jax.Array
    mu: Any
    nu: Any


def _canonical(dtype: DTypeLike | None) -> Any:
    return jax.dtypes.canonicalize_dtype(dtype) if dtype is not None else None


def safe_increment(count: jax.Array) -> jax.Array:
    max_int = jnp.iinfo(count.dtype).max
    one = jnp.array(1, dtype=count.dtype)
    return jnp.where(count < max_int, count + one, max_int)


def adam_init(params, mu_dtype: DTypeLike | None = None):
    mu_dtype = _canonical(mu_dtype)
    mu = jax.tree.map(lambda t: jnp.zeros_like(t, dtype=mu_dtype), params)
    nu = jax.tree.map(jnp.zeros_like, params)
    return ScaleByAdamState(count=jnp.zeros([], jnp.int32), mu=mu, nu=nu)


def adam_update(updates, state, lr: float = 0.1, b1: float = 0.9, b2: float = 0.999,
                eps: float = 1e-8):
    mu = jax.tree.map(lambda g, t: (1 - b1) * g + b1 * t, updates, state.mu)
    nu = jax.tree.map(lambda g, t: (1 - b2) * (g * g) + b2 * t, updates, state.nu)
    count = safe_increment(state.count)
    mu_hat = jax.tree.map(lambda t: t / (1 - b1 ** count).astype(t.dtype), mu)
    nu_hat = jax.tree.map(lambda t: t / (1 - b2 ** count).astype(t.dtype), nu)
    out = jax.tree.map(lambda m, v: -lr * m / (jnp.sqrt(v) + eps), mu_hat, nu_hat)
    return out, ScaleByAdamState(count=count, mu=mu, nu=nu)


def apply_updates(params, updates):
    return jax.tree.map(
        lambda p, u: jnp.asarray(p + u).astype(jnp.asarray(p).dtype), params, updates)


def global_norm(tree) -> jax.Array:
    return jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in tree_util.tree_leaves(tree)))


def loss(params, x: ArrayLike, y: ArrayLike) -> jax.Array:
    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred - lax.stop_gradient(y)) ** 2)


@jax.jit
def step(params, state, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    updates, state = adam_update(grads, state)
    return apply_updates(params, updates), state, value, global_norm(grads)


def main():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 3)).astype(np.float32)
    y = x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.25
    params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
    state = adam_init(params, mu_dtype=jnp.float64)
    losses = []
    for _ in range(60):
        params, state, value, gnorm = step(params, state, x, y)
        losses.append(float(value))
    key = jax.random.key(0)
    checks = {
        "array": isinstance(params["w"], jax.Array) and not isinstance(1.0, jax.Array),
        "floating": bool(jnp.issubdtype(params["w"].dtype, jnp.floating)),
        "canonical": str(jax.dtypes.canonicalize_dtype(jnp.float64)),
        "result_type": str(jnp.result_type(jnp.int32, 1.0)),
        "promote": str(jnp.promote_types(jnp.int8, jnp.uint8)),
        "eps": float(jnp.finfo(jnp.float32).eps),
        "scalar_type": jax.dtypes.scalar_type_of(params["b"]).__name__,
        "key_is_prng": bool(jnp.issubdtype(key.dtype, jax.dtypes.prng_key)),
        "count": int(state.count),
        "leaves": len(jax.tree.leaves(state)),
        "structure": str(jax.tree.structure(params)),
        "jax_is": jax.__name__,
    }
    print(json.dumps({"losses": losses, "w": np.asarray(params["w"]).tolist(),
                      "b": float(params["b"]), "checks": checks}))


if __name__ == "__main__":
    main()
