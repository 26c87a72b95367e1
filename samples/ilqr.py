"""An iLQR-style controller: a pendulum on a cart-less pivot swung towards upright over a short
horizon. Each iteration linearises the dynamics with jacfwd, runs the LQR backward pass (one
jnp.linalg.solve per step for the feedback gains) and a forward rollout, all under jit; the
initial control sequence is first improved by a few jit(grad) steps on the cost.

The same code runs on JAX: `run(jax, jax.numpy)` (tests/test_samples.py compares the two);
`python samples/ilqr.py` runs it on kiln.
"""
import numpy as np

HORIZON, DT = 20, 0.1


def run(api, jnp, iterations=4, warmup=5):
    def dynamics(x, u):
        theta, omega = x[0], x[1]
        accel = -9.81 * jnp.sin(theta) - 0.1 * omega + u[0]
        return jnp.stack([theta + DT * omega, omega + DT * accel])

    goal = jnp.array([np.pi, 0.0], jnp.float32)

    def step_cost(x, u):
        d = x - goal
        return 0.5 * (d @ d) * DT + 0.05 * (u @ u) * DT

    def final_cost(x):
        d = x - goal
        return 5.0 * (d @ d)

    def rollout(x0, us):
        xs = [x0]
        for t in range(HORIZON):
            xs.append(dynamics(xs[-1], us[t]))
        return jnp.stack(xs)

    def total(x0, us):
        xs = rollout(x0, us)
        return sum(step_cost(xs[t], us[t]) for t in range(HORIZON)) + final_cost(xs[-1])

    def ilqr_step(x0, us):
        xs = rollout(x0, us)
        vx = api.grad(final_cost)(xs[-1])
        vxx = api.hessian(final_cost)(xs[-1])
        gains, feedback = [], []
        for t in reversed(range(HORIZON)):
            fx = api.jacfwd(dynamics, argnums=0)(xs[t], us[t])
            fu = api.jacfwd(dynamics, argnums=1)(xs[t], us[t])
            lx, lu = api.grad(step_cost, argnums=(0, 1))(xs[t], us[t])
            qx = lx + fx.T @ vx
            qu = lu + fu.T @ vx
            qxx = DT * jnp.eye(2) + fx.T @ vxx @ fx
            quu = 0.1 * DT * jnp.eye(1) + fu.T @ vxx @ fu + 1e-3 * jnp.eye(1)
            qux = fu.T @ vxx @ fx
            k = -jnp.linalg.solve(quu, qu[:, None])[:, 0]
            big_k = -jnp.linalg.solve(quu, qux)
            vx = qx + big_k.T @ quu @ k + big_k.T @ qu + qux.T @ k
            vxx = qxx + big_k.T @ quu @ big_k + big_k.T @ qux + qux.T @ big_k
            vxx = 0.5 * (vxx + vxx.T)
            gains.insert(0, k)
            feedback.insert(0, big_k)
        x, new = x0, []
        for t in range(HORIZON):
            u = us[t] + 0.5 * gains[t] + feedback[t] @ (x - xs[t])
            new.append(u)
            x = dynamics(x, u)
        return jnp.stack(new)

    x0 = jnp.zeros(2, jnp.float32)
    us = jnp.zeros((HORIZON, 1), jnp.float32)
    grad = api.jit(api.grad(total, argnums=1))
    for _ in range(warmup):
        us = us - 0.05 * grad(x0, us)
    step = api.jit(ilqr_step)
    costs = [float(total(x0, us))]
    for _ in range(iterations):
        us = step(x0, us)
        costs.append(float(total(x0, us)))
    return np.asarray(us), np.array(costs)


if __name__ == "__main__":
    import kiln
    import kiln.numpy as knp
    us, costs = run(kiln, knp)
    print("cost per iteration:", np.round(costs, 3))
    print("first controls:", np.round(us[:5, 0], 3))
