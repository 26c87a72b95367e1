"""Front-end workloads: how long specialisation (source -> SSA) and simplification take.

The issue's target: specialising and simplifying the seed MLP loss (784-512-512-10) in under
20 ms. The kiln column times `make_ir` + the pass pipeline on a fresh specialisation every
call (the jit cache is bypassed); the JAX column times `jax.make_jaxpr` of the same function,
its nearest equivalent (tracing to jaxpr).
"""
import numpy as np

from harness import Case


def loss_kiln(params, x, y):
    import kiln.numpy as jnp
    for W, b in params:
        x = jnp.tanh(x @ W + b)
    return jnp.mean((x - y) ** 2)


def loss_jax(params, x, y):
    import jax.numpy as jnp
    for W, b in params:
        x = jnp.tanh(x @ W + b)
    return jnp.mean((x - y) ** 2)


def stupid_kiln(x):
    import kiln.numpy as jnp
    y = jnp.copy(x)
    for _ in range(1000):
        x = x * 2.0
    return y


def cases(jax=None):
    import kiln
    from kiln.compiler import passes
    sizes = [784, 512, 512, 10]
    params = [(np.zeros((m, n), np.float32), np.zeros(n, np.float32))
              for m, n in zip(sizes[:-1], sizes[1:])]
    x, y = np.zeros((128, 784), np.float32), np.zeros((128, 10), np.float32)

    def kiln_specialise():
        return passes.run_pipeline(kiln.make_ir(loss_kiln)(params, x, y))

    def kiln_stupid():
        return passes.run_pipeline(kiln.make_ir(stupid_kiln)(x))

    jax_spec = (lambda: jax.make_jaxpr(loss_jax)(params, x, y)) if jax else None
    return [
        Case("frontend", "specialise+simplify MLP loss", kiln_specialise, None, jax_spec,
             note="JAX: make_jaxpr"),
        Case("frontend", "specialise+simplify stupid_fn (1000-step loop)", kiln_stupid),
    ]
