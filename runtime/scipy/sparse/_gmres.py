"""Restarted GMRES (left-preconditioned by `M`) on the pytree raveled into one vector.

Each cycle builds an orthonormal basis V of the Krylov space of M A from the current
preconditioned residual (Arnoldi, classical Gram-Schmidt run twice), then takes the x in
that space with the least residual:
- "incremental": the Hessenberg matrix is reduced to triangular form by Givens rotations as
  each column arrives, which gives the residual norm at every step, so a cycle stops as
  soon as it is below `ptol`; one triangular solve at the end;
- "batched": all `restart` columns (fewer on a breakdown), then one least-squares solve.
The outer loop restarts from the new x until the preconditioned residual norm is at most
`atol` or after `maxiter` cycles."""
from ... import lax
from ... import numpy as jnp
from ..linalg import solve_triangular

_TINY = {jnp.dtype(jnp.float32): 1e-30, jnp.dtype(jnp.float64): 1e-300}


def _normalized(v):
    """(v / |v|, |v|), with a zero vector for a (numerically) zero v."""
    n = jnp.linalg.norm(v)
    real = jnp.zeros((), v.dtype).real.dtype
    ok = n > _TINY[jnp.dtype(real)]
    return v / jnp.where(ok, n, 1).astype(v.dtype) * ok, n


def _arnoldi_column(op, V, k):
    """The next basis vector and the Hessenberg column k (length m + 1)."""
    w = op(V[k])
    h = jnp.zeros(V.shape[0], V.dtype)
    for _ in range(2):                           # Gram-Schmidt, then once more for accuracy
        c = jnp.conj(V) @ w
        w = w - V.T @ c
        h = h + c
    v, beta = _normalized(w)
    return v, h.at[k + 1].set(beta.astype(h.dtype)), beta


def _rotate(c, s, a, b):
    """(c a + s b, -conj(s) a + c b): the Givens rotation (c real, |c|^2 + |s|^2 = 1)."""
    return c * a + s * b, -jnp.conj(s) * a + c * b


def _givens(a, b):
    """(c, s) whose rotation maps (a, b) to (r, 0)."""
    abs_a, abs_b = jnp.abs(a), jnp.abs(b)
    r = jnp.sqrt(abs_a ** 2 + abs_b ** 2)
    phase = jnp.where(abs_a == 0, 1, a / jnp.where(abs_a == 0, 1, abs_a).astype(a.dtype))
    nonzero = r > 0
    r1 = jnp.where(nonzero, r, 1)
    c = jnp.where(nonzero, abs_a / r1, 1)
    s = jnp.where(nonzero, phase * jnp.conj(b) / r1.astype(b.dtype), 0).astype(b.dtype)
    return c, s


def _basis(u, m):
    V = jnp.zeros((m + 1,) + u.shape, u.dtype)
    return V.at[0].set(u)


def _incremental(op, u, rnorm, ptol, m):
    """The correction to x from one cycle, Givens-rotated as it goes."""
    dtype = u.dtype
    g = jnp.zeros(m + 1, dtype).at[0].set(rnorm.astype(dtype))
    real = jnp.zeros((), dtype).real.dtype
    state = (jnp.array(0), _basis(u, m), jnp.zeros((m + 1, m), dtype), jnp.zeros(m, real),
             jnp.zeros(m, dtype), g)

    def running(s):
        k, g = s[0], s[5]
        return (k < m) & (jnp.abs(g[k]) > ptol)

    def step(s):
        k, V, R, cs, sn, g = s
        v, col, _ = _arnoldi_column(op, V, k)

        def previous(i, col):
            a, b = _rotate(cs[i], sn[i], col[i], col[i + 1])
            return col.at[i].set(a).at[i + 1].set(b)
        col = lax.fori_loop(0, k, previous, col)
        c, sk = _givens(col[k], col[k + 1])
        top, _ = _rotate(c, sk, col[k], col[k + 1])
        col = col.at[k].set(top).at[k + 1].set(0)
        gk, gk1 = _rotate(c, sk, g[k], g[k + 1])
        return (k + 1, V.at[k + 1].set(v), R.at[:, k].set(col), cs.at[k].set(c),
                sn.at[k].set(sk), g.at[k].set(gk).at[k + 1].set(gk1))

    k, V, R, _, _, g = lax.while_loop(running, step, state)
    used = jnp.arange(m) < k
    R = R[:m] + jnp.diag(jnp.where(used, 0, 1).astype(dtype))   # identity where unused
    y = solve_triangular(R, jnp.where(used, g[:m], 0))
    return V[:m].T @ y


def _batched(op, u, rnorm, ptol, m):
    """The correction to x from one cycle: `m` Arnoldi steps, then least squares."""
    dtype = u.dtype
    state = (jnp.array(0), _basis(u, m), jnp.zeros((m + 1, m), dtype), jnp.array(False))

    def running(s):
        return (s[0] < m) & ~s[3]

    def step(s):
        k, V, H, broke = s
        v, col, beta = _arnoldi_column(op, V, k)
        real = jnp.zeros((), dtype).real.dtype
        return k + 1, V.at[k + 1].set(v), H.at[:, k].set(col), beta <= _TINY[jnp.dtype(real)]

    _, V, H, _ = lax.while_loop(running, step, state)
    rhs = jnp.zeros(m + 1, dtype).at[0].set(rnorm.astype(dtype))
    y = jnp.linalg.lstsq(H, rhs)[0]
    return V[:m].T @ y


CYCLES = {"incremental": _incremental, "batched": _batched}


def gmres_solve(A, b, *, x0, atol, ptol, restart, maxiter, M, cycle):
    """Restarted GMRES on 1-D vectors: A and M map vectors to vectors."""
    def residual(x):
        return _normalized(M(b - A(x)))

    def op(v):
        return M(A(v))

    u, rnorm = residual(x0)

    def running(s):
        return (s[1] < maxiter) & (s[3] > atol)

    def step(s):
        x, j, u, rnorm = s
        x = x + cycle(op, u, rnorm, ptol, restart)
        u, rnorm = residual(x)
        return x, j + 1, u, rnorm

    return lax.while_loop(running, step, (x0, jnp.array(0), u, rnorm))[0]
