"""Python control flow on traced values: what `jax.jit` refuses, kiln compiles.

    python samples/python_control_flow.py

`collatz_steps` loops with `while` on array values and branches with `if`: under `jax.jit`
both raise a ConcretizationTypeError (a tracer has no truth value), and the JAX version needs
`lax.while_loop` and `lax.cond` written by hand. kiln turns them into those primitives itself,
under jit, grad and vmap. `newton_sqrt` iterates to convergence with a data-dependent trip
count, and kiln.grad differentiates through it (reverse mode through a `while` loop, which
JAX cannot do).
"""
import numpy as np

import kiln
import kiln.numpy as jnp


@kiln.jit
def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def newton_sqrt(a):
    x = a
    while jnp.abs(x * x - a) > 1e-6 * a:
        x = 0.5 * (x + a / x)
    return x


def main():
    print("collatz steps of 27:", int(collatz_steps(27)))
    print("for 1..10:", [int(collatz_steps(n)) for n in range(1, 11)])
    print("vmapped over an array:",
          np.asarray(kiln.jit(kiln.vmap(collatz_steps.__wrapped__))(jnp.arange(1, 11))))
    value = float(kiln.jit(newton_sqrt)(2.0))
    slope = float(kiln.jit(kiln.grad(newton_sqrt))(2.0))
    print(f"sqrt(2) = {value:.6f}, d/da sqrt(a) at 2 = {slope:.6f} (exact: {0.5 / 2 ** 0.5:.6f})")
    assert abs(slope - 0.5 / 2 ** 0.5) < 1e-4


if __name__ == "__main__":
    main()
