"""`kiln.lax.linalg.qdwh` (`__all__`, re-exported there): the polar decomposition x = u h of
an (M, N) matrix, M >= N, by the QR-based dynamically weighted Halley iteration (Nakatsukasa,
Bai and Gygi, SIAM J. Matrix Anal. Appl. 31(5), 2010), with JAX 0.10.2's schedule, so that
its iterates and iteration counts are JAX's:

- x is scaled by 1 / sqrt(|x|_1 |x|_inf), a bound above its largest singular value, and the
  smallest one is assumed to be eps (`l`);
- the weights (a, b, c) of each step follow from `l` alone, in Python floats, until l is
  within 5 eps of 1 or `max_iterations` steps are planned: steps with c > 100 run the QR form
  (the reduced QR of [sqrt(c) u; I], u <- (b/c) u + (a - b/c)/sqrt(c) q1 q2^H) in one
  `fori_loop`, the others the Cholesky form (u <- (b/c) u + (a - b/c) u (I + c u^H u)^-1,
  through `cholesky` and two triangular solves) in another, which tests convergence
  (|u - u_prev|_F <= (5 eps)^(1/3));
- while not converged and under `max_iterations`, Halley's steps (a, b, c) = (3, 1, 3) in a
  `while_loop`;
- one Newton-Schulz step, u <- 1.5 u - 0.5 u u^H u, then h = (u^H x + (u^H x)^H) / 2.

It is written over `kiln.numpy` and `kiln.lax` (qr, cholesky, triangular_solve, loops), so it
runs eagerly, under `jit` and `vmap`, in every backend. `dynamic_shape=(m, n)` treats x as an
(m, n) matrix padded with anything (masked to zeros) up to (M, N), as JAX's.
"""
import numpy as np

from .. import numpy as jnp
from . import _control_flow as _control
from . import _linalg
from . import _ops

__all__ = ["qdwh"]

_CHOLESKY_CUTOFF = 100   # steps with a larger c take the QR form (better conditioned)


def _mask(x, dims, fill=0):
    """x outside the leading `dims` (an (m, n) pair; None: all) replaced by `fill`."""
    keep = None
    for axis, d in enumerate(dims):
        if d is not None:
            inside = _ops.broadcasted_iota(np.int32, x.shape, axis) < d
            keep = inside if keep is None else keep & inside
    return x if keep is None else jnp.where(keep, x, fill)


def _h(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _qr_step(u, m, n, params):
    """(b/c) u + (a - b/c)/sqrt(c) q1 q2^H, [q1; q2] the reduced QR's q of [sqrt(c) u; I]."""
    scale, sqrt_c, e = params
    rows, cols = u.shape
    stacked = jnp.concatenate([sqrt_c * u, jnp.zeros((cols, cols), u.dtype)], axis=0)
    stacked = _ops.dynamic_update_slice(stacked, jnp.eye(cols, dtype=u.dtype), (m, 0))
    q, _ = _linalg.qr(stacked, full_matrices=False)
    q1 = _mask(q[:rows], (m, n))
    q2 = _h(_mask(_ops.dynamic_slice(q, (m, 0), (cols, cols)), (n, n)))
    return e * u + scale * (q1 @ q2)


def _cholesky_step(u, m, n, params):
    """(b/c) u + (a - b/c) u (I + c u^H u)^-1, through the Cholesky factor of I + c u^H u."""
    a_minus_e, c, e = params
    cols = u.shape[1]
    eye = jnp.eye(cols, dtype=u.dtype)
    gram = _mask(c * (_h(u) @ u) + eye, (n, n), eye)   # padding: the identity, still SPD
    y = _linalg.cholesky(gram, symmetrize_input=False)
    z = jnp.conj(_linalg.triangular_solve(y, jnp.swapaxes(u, 0, 1), left_side=True,
                                          lower=True, conjugate_a=True))
    z = _h(_linalg.triangular_solve(y, z, left_side=True, lower=True, transpose_a=True,
                                    conjugate_a=True))
    return e * u + a_minus_e * z


def _schedule(eps, max_iterations):
    """The planned steps' weights: (QR-form params, Cholesky-form params), Python floats."""
    qr_params, chol_params = [], []
    l, tol_l = eps, 10.0 * eps / 2.0
    while l + tol_l < 1 and len(qr_params) + len(chol_params) < max_iterations:
        l2 = l * l
        dd = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        sqd = (1.0 + dd) ** (1 / 2)
        a = sqd + (2 - dd + 2 * (2 - l2) / (l2 * sqd)) ** (1 / 2)
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        l = l * (a + b * l2) / (1 + c * l2)
        e = b / c
        if c > _CHOLESKY_CUTOFF:
            qr_params.append(((a - e) / c ** (1 / 2), c ** (1 / 2), e))
        else:
            chol_params.append((a - e, c, e))
    return qr_params, chol_params


def qdwh(x, *, is_hermitian=False, max_iterations=None, eps=None, dynamic_shape=None):
    """(u, h, num_iters, is_converged): x = u h, u with orthonormal columns, h Hermitian
    positive semi-definite, for the full-rank (M, N) `x`, M >= N (module docstring).
    `is_hermitian` is accepted and unused, as in JAX."""
    if not isinstance(is_hermitian, (bool, np.bool_)):
        raise TypeError("The `is_hermitian` argument must be statically specified to use "
                        "`qdwh` within JAX transformations.")
    if max_iterations is None:
        max_iterations = 10
    elif not isinstance(max_iterations, (int, np.integer)):
        raise TypeError("The `max_iterations` argument must be statically specified to use "
                        "`qdwh` within JAX transformations.")
    x = jnp.asarray(x)
    M, N = x.shape
    if M < N:
        raise ValueError("The input matrix of shape M x N must have M >= N.")
    if dynamic_shape is not None:
        m, n = dynamic_shape
        x = _mask(x, (m, n))
    else:
        m, n = M, N
    eps = float(jnp.finfo(x.dtype).eps) if eps is None else eps
    tol_norm = (10.0 * eps / 2.0) ** (1 / 3)

    one_norm = jnp.linalg.norm(x, ord=1)
    inf_norm = jnp.linalg.norm(x, ord=np.inf)
    alpha_inverse = jnp.where(one_norm == 0, 1, _ops.rsqrt(one_norm) * _ops.rsqrt(inf_norm))
    u = x * alpha_inverse.astype(x.dtype)
    qr_params, chol_params = _schedule(eps, int(max_iterations))

    def planned(u, params, step, test):
        """The planned steps of one form; (u, not converged)."""
        if not params:
            return u, True
        table = jnp.array(params).astype(x.dtype)

        def body(k, state):
            u_prev, _ = state
            row = _ops.dynamic_index_in_dim(table, k, keepdims=False)
            u = step(u_prev, m, n, (row[0], row[1], row[2]))
            return u, (jnp.linalg.norm(u - u_prev) > tol_norm) if test else True
        return _control.fori_loop(0, len(params), body, (u, True))

    u, _ = planned(u, qr_params, _qr_step, False)
    u, not_converged = planned(u, chol_params, _cholesky_step, True)

    def more(state):
        k, _, not_converged = state
        return jnp.logical_and(not_converged, k < max_iterations)

    def halley(state):
        k, u_prev, _ = state
        u = _cholesky_step(u_prev, m, n, (3 - 1 / 3, 3.0, 1 / 3))   # a, b, c = 3, 1, 3
        return k + 1, u, jnp.linalg.norm(u - u_prev) > tol_norm
    num_iters, u, not_converged = _control.while_loop(
        more, halley, (len(qr_params) + len(chol_params), u, not_converged))

    u = 1.5 * u - 0.5 * u @ (_h(u) @ u)   # one Newton-Schulz step
    h = _h(u) @ x
    h = (h + _h(h)) / 2
    return u, h, num_iters, jnp.logical_not(not_converged)
