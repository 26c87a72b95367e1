"""Autodiff workloads: `grad` eagerly and under `jit`, beside JAX and hand-written NumPy.

Outside `jit`, `kiln.grad(f)(x)` specialises `f`, emits its derivative as SSA, simplifies it
and compiles it with the reference backend once per function, options and argument
signature (shared by every `grad` of the same function); later calls cost a cache lookup and
a run of the generated Python over NumPy. The issue's target: scalar
`grad(tanh)(1.0)` well under JAX's eager `grad` (about 0.1x). The NumPy column is the same
derivative written by hand (the floor that any generated code runs against). The MLP is
784-512-10 at batch 128; its `value_and_grad` needs about 210 MFLOP (two 128x784x512 matrix
products, three small ones), so the machine's float32 peak bounds it from below.
"""
import numpy as np

from harness import Case

SIZES = (784, 512, 10)
BATCH = 128


def mlp_loss_kiln(params, x, y):
    import kiln.numpy as jnp
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x @ w1 + b1)
    pred = h @ w2 + b2
    return jnp.mean((pred - y) ** 2)


def mlp_loss_jax(params, x, y):
    import jax.numpy as jnp
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x @ w1 + b1)
    pred = h @ w2 + b2
    return jnp.mean((pred - y) ** 2)


def mlp_backprop_numpy(params, x, y):
    """The MLP's loss and gradients, by hand."""
    (w1, b1), (w2, b2) = params
    h = np.tanh(x @ w1 + b1)
    err = h @ w2 + b2 - y
    loss = np.mean(err ** 2)
    d_pred = err * np.float32(2 / err.size)
    d_z1 = (d_pred @ w2.T) * (1 - h * h)
    return loss, [(x.T @ d_z1, d_z1.sum(0)), (h.T @ d_pred, d_pred.sum(0))]


def mlp_flops():
    """Multiply-adds x2 of value_and_grad with respect to the parameters (x gets no gradient)."""
    (n0, n1, n2), b = SIZES, BATCH
    forward = 2 * b * (n0 * n1 + n1 * n2)
    backward = 2 * b * (n0 * n1 + 2 * n1 * n2)   # dW1, dW2, and dh = d_pred @ W2.T
    return forward + backward


def newton_sqrt_kiln(a):
    import kiln.numpy as jnp
    x = a
    while jnp.abs(x * x - a) > 1e-6 * a:
        x = 0.5 * (x + a / x)
    return x


def newton_sqrt_jax(a):
    import jax.numpy as jnp
    x = a
    while jnp.abs(x * x - a) > 1e-6 * a:
        x = 0.5 * (x + a / x)
    return x


def newton_sqrt_grad_numpy(a):
    """d sqrt(a)/da through the Newton iterations, by hand: record the iterates, then walk them
    backwards (x' = (x + a/x)/2: dx'/dx = (1 - a/x^2)/2, dx'/da = 1/(2x); x starts at a)."""
    half, tol = np.float32(0.5), np.float32(1e-6) * a
    x, tape = a, []
    while abs(x * x - a) > tol:
        tape.append(x)
        x = half * (x + a / x)
    x_bar, a_bar = np.float32(1), np.float32(0)
    for xk in reversed(tape):
        a_bar += x_bar * half / xk
        x_bar = x_bar * half * (1 - a / (xk * xk))
    return x, a_bar + x_bar


def newton_iterations(a):
    x, n = a, 0
    while abs(x * x - a) > np.float32(1e-6) * a:
        x, n = np.float32(0.5) * (x + a / x), n + 1
    return n


def tanh_grad_numpy(x):
    t = np.tanh(x)
    return 1 - t * t


def _mlp_data():
    rng = np.random.default_rng(0)
    (n0, n1, n2) = SIZES
    params = [(rng.standard_normal((n0, n1), np.float32) * np.float32(n0 ** -0.5),
               np.zeros(n1, np.float32)),
              (rng.standard_normal((n1, n2), np.float32) * np.float32(n1 ** -0.5),
               np.zeros(n2, np.float32))]
    x = rng.standard_normal((BATCH, n0), np.float32)
    y = rng.standard_normal((BATCH, n2), np.float32)
    return params, x, y


def cases(jax=None):
    import kiln
    import kiln.numpy as knp
    from kiln.tree_util import tree_map

    params, x, y = _mlp_data()
    kp, kx, ky = tree_map(knp.asarray, (params, x, y))
    want_loss, want_grads = mlp_backprop_numpy(params, x, y)
    a = np.float32(1000.0)
    _check(kiln.value_and_grad(mlp_loss_kiln)(kp, kx, ky), (want_loss, want_grads))
    _check(kiln.grad(newton_sqrt_kiln)(a), newton_sqrt_grad_numpy(a)[1])

    k_grad_tanh = kiln.grad(knp.tanh)
    k_vg = kiln.value_and_grad(mlp_loss_kiln)
    k_jit_grad = kiln.jit(kiln.grad(mlp_loss_kiln))
    k_newton = kiln.grad(newton_sqrt_kiln)
    k_jit_newton = kiln.jit(kiln.grad(newton_sqrt_kiln))
    one = np.float32(1.0)

    j_grad_tanh = j_fresh = j_lambda = j_vg = j_jit_grad = j_compile = j_newton = None
    if jax:
        jnp = jax.numpy
        jp, jx, jy = jax.tree_util.tree_map(jnp.asarray, (params, x, y))
        _check(jax.value_and_grad(mlp_loss_jax)(jp, jx, jy), (want_loss, want_grads))
        g = jax.grad(jnp.tanh)
        vg = jax.value_and_grad(mlp_loss_jax)
        jg = jax.jit(jax.grad(mlp_loss_jax))
        newton = jax.grad(newton_sqrt_jax)
        j_grad_tanh = lambda: g(1.0)                                        # noqa: E731
        j_fresh = lambda: jax.grad(jnp.tanh)(1.0)                           # noqa: E731
        j_lambda = lambda: jax.grad(lambda v: jnp.tanh(v))(1.0)             # noqa: E731
        j_vg = lambda: vg(jp, jx, jy)                                       # noqa: E731
        j_jit_grad = lambda: jg(jp, jx, jy)                                 # noqa: E731
        j_compile = lambda: jax.jit(jax.grad(mlp_loss_jax))(jp, jx, jy)     # noqa: E731
        j_newton = lambda: newton(a)                                        # noqa: E731

    mflop = mlp_flops() / 1e6
    mlp = f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}"
    iters = newton_iterations(a)
    return [
        Case("autodiff", "grad(tanh)(1.0), grad made once", lambda: k_grad_tanh(1.0),
             lambda: tanh_grad_numpy(one), j_grad_tanh,
             note="NumPy: 1 - tanh(x)**2 by hand"),
        Case("autodiff", "grad(tanh)(1.0), fresh grad each call",
             lambda: kiln.grad(knp.tanh)(1.0), None, j_fresh,
             note="kiln: grads of one function share its compiled derivative"),
        Case("autodiff", "grad(lambda x: tanh(x))(1.0), new lambda each call",
             lambda: kiln.grad(lambda v: knp.tanh(v))(1.0), None, j_lambda,
             note="kiln: specialise, differentiate, simplify, compile, run"),
        Case("autodiff", f"value_and_grad {mlp}", lambda: k_vg(kp, kx, ky),
             lambda: mlp_backprop_numpy(params, x, y), j_vg,
             note=f"{mflop:.0f} MFLOP; NumPy: backprop by hand"),
        Case("autodiff", f"jit(grad) {mlp}", lambda: k_jit_grad(kp, kx, ky),
             lambda: mlp_backprop_numpy(params, x, y), j_jit_grad,
             note="JAX: jax.jit(jax.grad)"),
        Case("autodiff", f"jit(grad) {mlp}: first call (compile)",
             lambda: kiln.jit(kiln.grad(mlp_loss_kiln))(kp, kx, ky), None, j_compile,
             note="a fresh jit(grad(loss)) each call, run included"),
        Case("autodiff", f"grad Newton sqrt, Python while ({iters} iters)", lambda: k_newton(a),
             lambda: newton_sqrt_grad_numpy(a), j_newton,
             note="JAX: eager op by op; NumPy: tape by hand"),
        Case("autodiff", f"jit(grad) Newton sqrt, Python while ({iters} iters)",
             lambda: k_jit_newton(a), lambda: newton_sqrt_grad_numpy(a), None,
             note="JAX n/a: jit rejects the Python while on a tracer; lax.while_loop has "
                  "no reverse mode"),
    ]


def _check(got, want):
    """The workloads must compute the same thing before they are timed."""
    from kiln.tree_util import tree_leaves
    got_leaves, want_leaves = tree_leaves(got), tree_leaves(want)
    if len(got_leaves) != len(want_leaves):
        raise AssertionError(f"benchmark outputs differ in structure: {got!r} vs {want!r}")
    for g, w in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=1e-6)

