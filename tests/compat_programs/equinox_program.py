"""An equinox program (run by tests/test_compat_equinox.py once with `KILN_AS_JAX=1`, once on
JAX): a Module with an MLP and a LayerNorm trained for a few jitted steps, equinox's
transformations (`filter_jvp` gives None tangents to outputs that do not depend on the
inputs, as on JAX), a stateful BatchNorm, a custom VJP with symbolic zeros, error_if and a
checkpointed while loop. Prints one JSON object of results."""
import json

import jax
import jax.numpy as jnp
import equinox as eqx
import equinox.internal as eqxi

out = {}


def record(name, value):
    out[name] = [float(v) for v in jnp.ravel(jnp.asarray(value))]


k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
x = jax.random.normal(k2, (8, 3))
y = jnp.sum(x, axis=1, keepdims=True) ** 2


class Net(eqx.Module):
    mlp: eqx.nn.MLP
    norm: eqx.nn.LayerNorm
    scale: jax.Array
    name: str = eqx.field(static=True)

    def __init__(self, key):
        self.mlp = eqx.nn.MLP(3, 1, 8, 2, key=key)
        self.norm = eqx.nn.LayerNorm(3)
        self.scale = jnp.array(1.5)
        self.name = "net"

    def __call__(self, v):
        return self.scale * self.mlp(self.norm(v))


@eqx.filter_jit
def step(model, v, w):
    def loss(m):
        return jnp.mean((jax.vmap(m)(v) - w) ** 2)
    value, grads = eqx.filter_value_and_grad(loss)(model)
    return eqx.apply_updates(model, jax.tree.map(lambda g: -0.05 * g, grads)), value


net = Net(k1)
losses = []
for _ in range(4):
    net, value = step(net, x, y)
    losses.append(value)
record("losses", jnp.stack(losses))
record("weight", net.mlp.layers[0].weight)
record("grad", eqx.filter_grad(lambda m: jnp.sum(m(x[0])))(net).scale)

params, static = eqx.partition(net, eqx.is_inexact_array)
record("combine", jax.vmap(eqx.combine(params, static))(x))
record("tree_at", eqx.tree_at(lambda m: m.scale, net, jnp.array(2.0))(x[0]))
record("filter_vmap", eqx.filter_vmap(lambda m, v: m(v), in_axes=(None, 0))(net, x))
record("conv", eqx.nn.Conv2d(2, 2, 3, padding=1, key=k3)(x[:6].reshape(2, 3, 3)))
record("dropout", eqx.nn.Dropout(0.5)(jnp.ones(8), key=k3))
primal, tangent = eqx.filter_jvp(lambda v: {"f": jnp.sin(v), "const": jnp.ones(2), "s": "x"},
                                 (x[0],), (jnp.ones(3),))
out["jvp_nones"] = [tangent["const"] is None, tangent["s"] is None, primal["s"] == "x"]
record("jvp", tangent["f"])

batch_norm, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, "batch", mode="batch")
normed, state = jax.vmap(batch_norm, axis_name="batch", in_axes=(0, None),
                         out_axes=(0, None))(x, state)
record("batch_norm", normed)


@eqx.filter_custom_vjp
def scaled(pair, factor):
    a, b = pair
    return a * b * factor


@scaled.def_fwd
def scaled_fwd(perturbed, pair, factor):
    return scaled(pair, factor), perturbed


@scaled.def_bwd
def scaled_bwd(perturbed_res, g, perturbed, pair, factor):
    a, b = pair
    pa, pb = perturbed
    return (2 * g * b * factor if pa else None, 3 * g * a * factor if pb else None)


record("custom_vjp", jax.grad(lambda a: jnp.sum(scaled((a, x[1]), jnp.array(1.5))))(x[0]))
record("error_if", eqx.filter_jit(lambda v: eqx.error_if(v, v > 100.0, "too big"))(x[0]))
try:
    eqx.filter_jit(lambda v: eqx.error_if(v, v > 0.0, "too big"))(x[0])
    out["error_if_raises"] = "no error"
except Exception as e:
    out["error_if_raises"] = "too big" in str(e)
record("while_loop", jax.grad(lambda v: jnp.sum(eqxi.while_loop(
    lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.sin(c[1])), (0, v), max_steps=5,
    kind="checkpointed")[1]))(x[0]))
print(json.dumps(out))
