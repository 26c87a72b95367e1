"""The conjugate gradient and BiCGSTAB iterations (preconditioned by `M`), each one
`lax.while_loop` that stops when |b - A x|^2 <= max(tol^2 |b|^2, atol^2) (SciPy's
tolerance) or after `maxiter` steps; BiCGSTAB also stops when it breaks down (a zero
inner product)."""
from ... import lax
from ... import numpy as jnp
from ._trees import axpy, sub, tree_map, vdot, vdot_real


def _threshold(b, tol, atol):
    """The squared residual norm to reach."""
    return jnp.maximum(jnp.square(tol) * vdot_real(b, b), jnp.square(atol))


def cg_solve(A, b, *, x0, tol, atol, maxiter, M):
    """Conjugate gradients for Hermitian positive definite A."""
    target = _threshold(b, tol, atol)
    r = sub(b, A(x0))
    z = M(r)
    state = (x0, r, z, vdot(r, z), jnp.array(0))

    def running(s):
        return (vdot_real(s[1], s[1]) > target) & (s[4] < maxiter)

    def step(s):
        x, r, p, rz, k = s
        q = A(p)
        alpha = rz / vdot(p, q)
        x, r = axpy(alpha, p, x), axpy(-alpha, q, r)
        z = M(r)
        rz_next = vdot(r, z)
        return x, r, axpy(rz_next / rz, p, z), rz_next, k + 1

    return lax.while_loop(running, step, state)[0]


def bicgstab_solve(A, b, *, x0, tol, atol, maxiter, M):
    """BiCGSTAB (van der Vorst) for general A, with the initial residual as shadow vector.
    `k` becomes negative on a breakdown, which ends the loop."""
    target = _threshold(b, tol, atol)
    r = sub(b, A(x0))
    one = jnp.ones((), jnp.result_type(vdot(r, r)))
    zeros = tree_map(jnp.zeros_like, b)
    state = (x0, r, r, zeros, zeros, one, one, one, jnp.array(0))

    def running(s):
        return (vdot_real(s[1], s[1]) > target) & (s[8] < maxiter) & (s[8] >= 0)

    def step(s):
        x, r, shadow, p, v, rho_prev, alpha, omega, k = s
        rho = vdot(shadow, r)
        p = axpy(rho / rho_prev * (alpha / omega), sub(p, tree_map(lambda u: omega * u, v)), r)
        p_hat = M(p)
        v = A(p_hat)
        alpha = rho / vdot(shadow, v)
        s_res = axpy(-alpha, v, r)
        done = vdot_real(s_res, s_res) <= target     # x + alpha p_hat is good enough
        s_hat = M(s_res)
        t = A(s_hat)
        tt = vdot(t, t)
        omega = jnp.where(done, 0, vdot(t, s_res) / jnp.where(done, 1, tt)).astype(one.dtype)
        x = axpy(omega, s_hat, axpy(alpha, p_hat, x))
        r = axpy(-omega, t, s_res)
        k = jnp.where(rho == 0, -10, jnp.where(((omega == 0) & ~done) | (alpha == 0), -11,
                                               k + 1))
        return x, r, shadow, p, v, rho, alpha, omega, k

    return lax.while_loop(running, step, state)[0]
