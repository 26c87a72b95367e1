"""A flax.linen program for tests/test_compat_flax.py, run once on kiln (KILN_AS_JAX=1) and
once on JAX: an MLP (Dense, LayerNorm, Dropout), a CNN (Conv, BatchNorm with mutable
batch_stats, avg_pool, Dropout) trained by a jitted optax step over a flax TrainState, Embed
under jit of grad, jit of init, vmap of apply, the lifted transforms nn.scan, nn.remat and nn.vmap
(under jit and grad), nn.cond, MultiHeadDotProductAttention, an LSTM through nn.RNN, sow, and
Module.lazy_init. Prints the first values of every result as JSON."""
import json

import numpy as np
import jax
import jax.numpy as jnp
import flax.linen as nn
import optax
from flax.training import train_state


def leaves(tree):
    return [np.asarray(x, np.float64).ravel()[:4].tolist() for x in jax.tree.leaves(tree)]


class MLP(nn.Module):
    features: tuple = (16, 8)

    @nn.compact
    def __call__(self, x, train: bool = False):
        for f in self.features[:-1]:
            x = nn.Dense(f)(x)
            x = nn.LayerNorm()(x)
            x = nn.relu(x)
            x = nn.Dropout(0.5, deterministic=not train)(x)
        return nn.Dense(self.features[-1])(x)


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Conv(4, (3, 3), use_bias=False)(x)   # a bias before BatchNorm has no gradient
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.Dropout(0.25, deterministic=not train)(x)
        return nn.Dense(3)(x)


class TrainState(train_state.TrainState):
    batch_stats: dict


def loss_fn(params, state, x, y, key):
    logits, updates = state.apply_fn({"params": params, "batch_stats": state.batch_stats}, x,
                                     train=True, mutable=["batch_stats"], rngs={"dropout": key})
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), updates


@jax.jit
def train_step(state, x, y, key):
    (loss, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, state, x,
                                                                       y, key)
    state = state.apply_gradients(grads=grads)
    return state.replace(batch_stats=updates["batch_stats"]), loss


class Embedder(nn.Module):
    @nn.compact
    def __call__(self, ids):
        return nn.Dense(2)(nn.Embed(10, 4)(ids)).sum()


class Cell(nn.Module):
    @nn.compact
    def __call__(self, c, xs):
        h = nn.tanh(nn.Dense(4)(xs) + c)
        return h, h.sum(-1)


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.gelu(nn.Dense(4)(x))


class Deep(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(2):
            x = nn.remat(Block)()(x)
        return x.sum()


class Branchy(nn.Module):
    @nn.compact
    def __call__(self, x, pred):
        dense = nn.Dense(3)
        h = nn.cond(pred, lambda m, v: m(v), lambda m, v: -m(v), dense, x)
        self.sow("intermediates", "h", h)
        return h


def main():
    out = {}
    x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(3, 4)
    mlp = MLP()
    p = mlp.init(jax.random.PRNGKey(0), x)
    out["mlp_init"] = leaves(p)
    out["mlp_apply"] = leaves(mlp.apply(p, x))
    out["mlp_dropout"] = leaves(mlp.apply(p, x, train=True,
                                          rngs={"dropout": jax.random.PRNGKey(1)}))

    cnn = CNN()
    images = jnp.asarray(np.random.RandomState(0).randn(4, 8, 8, 2).astype(np.float32))
    labels = jnp.array([0, 1, 2, 1])
    v = cnn.init(jax.random.PRNGKey(0), images, train=False)
    state = TrainState.create(apply_fn=cnn.apply, params=v["params"],
                              batch_stats=v["batch_stats"], tx=optax.adam(1e-2))
    losses = []
    for i in range(3):
        state, loss = train_step(state, images, labels, jax.random.PRNGKey(i))
        losses.append(float(loss))
    out["cnn_losses"] = losses
    out["cnn_params"] = leaves(state.params)
    out["cnn_batch_stats"] = leaves(state.batch_stats)
    out["cnn_eval"] = leaves(cnn.apply({"params": state.params,
                                        "batch_stats": state.batch_stats}, images, train=False))

    ids = jnp.array([[1, 2, 3], [4, 5, 9]])
    emb = Embedder()
    pe = emb.init(jax.random.PRNGKey(0), ids)
    out["embed_grad"] = leaves(jax.jit(jax.grad(lambda p: emb.apply(p, ids)))(pe))

    xs = jnp.linspace(-1.0, 1.0, 24, dtype=jnp.float32).reshape(2, 3, 4)
    dense = nn.Dense(3)
    pd = jax.jit(dense.init)(jax.random.PRNGKey(2), xs[0])
    out["jit_init"] = leaves(pd)
    out["vmap_apply"] = leaves(jax.vmap(lambda xi: dense.apply(pd, xi))(xs))

    scan = nn.scan(Cell, variable_broadcast="params", split_rngs={"params": False},
                   in_axes=1, out_axes=1)()
    c0 = jnp.zeros((2, 4))
    ps = scan.init(jax.random.PRNGKey(3), c0, xs)
    out["scan"] = leaves(scan.apply(ps, c0, xs))
    out["scan_jit"] = leaves(jax.jit(scan.apply)(ps, c0, xs))

    deep = Deep()
    pr = deep.init(jax.random.PRNGKey(4), xs)
    out["remat_grad"] = leaves(jax.jit(jax.grad(deep.apply))(pr, xs))

    vdense = nn.vmap(nn.Dense, in_axes=0, out_axes=0, variable_axes={"params": 0},
                     split_rngs={"params": True})(3)
    pv = vdense.init(jax.random.PRNGKey(5), xs)
    out["nn_vmap"] = leaves((pv, vdense.apply(pv, xs)))

    attention = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=4)
    pa = attention.init(jax.random.PRNGKey(7), xs)
    out["attention"] = leaves(jax.jit(attention.apply)(pa, xs))
    lstm = nn.RNN(nn.LSTMCell(5))
    pl = lstm.init(jax.random.PRNGKey(8), xs)
    out["lstm"] = leaves(jax.jit(lstm.apply)(pl, xs))
    branchy = Branchy()
    pb = branchy.init(jax.random.PRNGKey(9), xs, True)
    out["cond_sow"] = leaves(jax.jit(lambda p, v: branchy.apply(p, v, False,
                                                                mutable=["intermediates"]))(pb, xs))

    lazy = nn.Dense(5).lazy_init(jax.random.PRNGKey(6),
                                 jax.ShapeDtypeStruct((2, 4), jnp.float32))
    out["lazy_init"] = leaves(lazy)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
