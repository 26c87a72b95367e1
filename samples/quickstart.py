"""kiln quickstart: the JAX-compatible surface, running eagerly on NumPy buffers.

Run with `make demo`. samples/train_mlp.py, per_example_grads.py and python_control_flow.py
show jit, grad and vmap at work.
"""
import kiln
import kiln.numpy as jnp
from kiln import lax, random, nn, tree_util
from kiln.example_libraries import optimizers

# Arrays: JAX's dtypes, weak types and immutability.
x = jnp.arange(6.0).reshape(2, 3)
print("x =", repr(x))
print("x * 2 stays float32:", (x * 2).dtype)
print("functional update:", repr(x.at[0, 1].set(10.0)))
print("reductions:", jnp.sum(x), jnp.mean(x, axis=0), jnp.argmax(x))

# lax: the primitives under JAX's names, plus structured control flow.
print("fori_loop sum 0..9:", lax.fori_loop(0, 10, lambda i, acc: acc + i, 0))
carry, ys = lax.scan(lambda c, v: (c + v, c * v), 0.0, jnp.arange(4.0))
print("scan:", carry, ys)

# Explicit PRNG keys: the same bits as JAX.
key = random.PRNGKey(0)
k1, k2 = random.split(key)
print("uniform:", random.uniform(k1, (3,)))
print("normal:", random.normal(k2, (3,)))

# A tiny MLP forward pass with pytrees of parameters.
sizes = [4, 8, 2]
keys = random.split(key, len(sizes) - 1)
params = [(random.normal(k, (m, n)) * 0.1, jnp.zeros(n))
          for k, m, n in zip(keys, sizes[:-1], sizes[1:])]
print("params structure:", tree_util.tree_structure(params))


def predict(params, inputs):
    for W, b in params[:-1]:
        inputs = nn.relu(inputs @ W + b)
    W, b = params[-1]
    return nn.log_softmax(inputs @ W + b)


print("log-probabilities:", predict(params, jnp.ones((1, 4))))

# The optimizers example library.
opt_init, opt_update, get_params = optimizers.adam(1e-3)
state = opt_init(params)
grads = tree_util.tree_map(jnp.ones_like, params)
state = opt_update(0, grads, state)
print("after one adam step, first bias:", get_params(state)[0][1][:3])
print("devices:", kiln.devices(), "backend:", kiln.default_backend())


# kiln.jit: the function's source is specialised into SSA; Python control flow on traced
# values compiles to structured operations instead of failing as it does under a tracer.
@kiln.jit
def clipped_steps(x, n):
    if x.sum() > 0:
        y = x * 2
    else:
        y = -x
    i = 0
    while i < n:
        y = y * 0.5 + 1.0
        i += 1
    return y


print("jit with Python if/while:", clipped_steps(jnp.arange(3.0), 4))
print(kiln.make_ir(clipped_steps)(jnp.arange(3.0), 4))
