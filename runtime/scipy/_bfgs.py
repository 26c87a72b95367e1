"""The quasi-Newton minimisers behind `kiln.scipy.optimize.minimize`, as JAX has them: BFGS
(Algorithm 6.1 of Nocedal and Wright, a dense inverse-Hessian estimate) and L-BFGS
(Algorithm 7.5: the two-loop recursion over the last `maxcor` steps), each one
`lax.while_loop` over a dict of arrays whose every step runs the strong-Wolfe line search of
`_line_search`, so that both compile under `jit`. Each returns the dict of its final state;
`status` follows JAX's codes (BFGS: 0 converged, 1 maxiter, 2 + the line search's status when
it failed; L-BFGS: 0, 1 maxiter, 2 maxfun, 3 maxgrad, 4 ftol, 5 line search failed)."""
import numpy as np

from .. import lax
from .. import numpy as jnp
from ..ad import value_and_grad
from ._line_search import line_search


def minimize_bfgs(fun, x0, maxiter=None, norm=np.inf, gtol=1e-5, line_search_maxiter=10):
    """BFGS from `x0` until the gradient's `norm` is below `gtol` or `maxiter` steps."""
    if maxiter is None:
        maxiter = np.size(x0) * 200
    d = x0.shape[0]
    f_0, g_0 = value_and_grad(fun)(x0)
    state = dict(converged=jnp.linalg.norm(g_0, ord=norm) < gtol, failed=jnp.array(False),
                 k=jnp.array(0), nfev=jnp.array(1), ngev=jnp.array(1), x_k=x0, f_k=f_0,
                 g_k=g_0, H_k=jnp.eye(d, dtype=x0.dtype),
                 old_old_fval=f_0 + jnp.linalg.norm(g_0) / 2, line_search_status=jnp.array(0))

    def body(s):
        p_k = -jnp.dot(s["H_k"], s["g_k"])
        ls = line_search(fun, s["x_k"], p_k, old_fval=s["f_k"], old_old_fval=s["old_old_fval"],
                         gfk=s["g_k"], maxiter=line_search_maxiter)
        s_k = ls["a_k"] * p_k
        y_k = ls["g_k"] - s["g_k"]
        rho_k = jnp.reciprocal(jnp.dot(y_k, s_k))
        w = jnp.eye(d, dtype=rho_k.dtype) - rho_k * (s_k[:, None] * y_k[None, :])
        H = jnp.einsum("ij,jk,lk", w, s["H_k"], w) + rho_k * s_k[:, None] * s_k[None, :]
        return dict(converged=jnp.linalg.norm(ls["g_k"], ord=norm) < gtol, failed=ls["failed"],
                    k=s["k"] + 1, nfev=s["nfev"] + ls["nfev"], ngev=s["ngev"] + ls["ngev"],
                    x_k=s["x_k"] + s_k, f_k=ls["f_k"], g_k=ls["g_k"],
                    H_k=jnp.where(jnp.isfinite(rho_k), H, s["H_k"]), old_old_fval=s["f_k"],
                    line_search_status=ls["status"])

    s = lax.while_loop(lambda s: (~s["converged"]) & (~s["failed"]) & (s["k"] < maxiter),
                       body, state)
    status = jnp.where(s["converged"], 0, jnp.where(
        s["k"] == maxiter, 1, jnp.where(s["failed"], 2 + s["line_search_status"], -1)))
    return {**s, "status": status}


def _two_loop_recursion(s):
    """The L-BFGS direction: -H g from the stored steps and gradient changes."""
    rho, S, Y = s["rho_history"], s["s_history"], s["y_history"]
    size = rho.shape[0]
    used = jnp.where(s["k"] < size, s["k"], size)

    def backward(j, carry):
        q, alphas = carry
        i = size - 1 - j
        a_i = rho[i] * jnp.dot(jnp.conj(S[i]), q).real.astype(rho.dtype)
        return q - a_i * jnp.conj(Y[i]), alphas.at[i].set(a_i)

    q, alphas = lax.fori_loop(0, used, backward, (-jnp.conj(s["g_k"]), jnp.zeros_like(rho)))

    def forward(j, q):
        i = size - used + j
        b_i = rho[i] * jnp.dot(Y[i], q).real.astype(rho.dtype)
        return q + (alphas[i] - b_i) * S[i]

    return lax.fori_loop(0, used, forward, s["gamma"] * q)


def _push(history, new):
    """The history with its oldest row dropped and `new` appended."""
    return jnp.roll(history, -1, axis=0).at[-1].set(new)


def minimize_lbfgs(fun, x0, maxiter=None, norm=np.inf, maxcor=10, ftol=2.220446049250313e-09,
                   gtol=1e-05, maxfun=None, maxgrad=None, maxls=20):
    """L-BFGS from `x0` with a history of `maxcor` steps."""
    d, dtype = len(x0), x0.dtype
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = d * 200
    maxiter, maxfun, maxgrad = (np.inf if v is None else v for v in (maxiter, maxfun, maxgrad))
    f_0, g_0 = value_and_grad(fun)(x0)
    state = dict(converged=jnp.array(False), failed=jnp.array(False), k=jnp.array(0),
                 nfev=jnp.array(1), ngev=jnp.array(1), x_k=x0, f_k=f_0, g_k=g_0,
                 s_history=jnp.zeros((maxcor, d), dtype), y_history=jnp.zeros((maxcor, d), dtype),
                 rho_history=jnp.zeros((maxcor,), dtype), gamma=jnp.array(1., g_0.dtype),
                 status=jnp.array(0), ls_status=jnp.array(0))

    def body(s):
        p_k = _two_loop_recursion(s)
        ls = line_search(fun, s["x_k"], p_k, old_fval=s["f_k"], gfk=s["g_k"], maxiter=maxls)
        s_k = jnp.asarray(ls["a_k"]).astype(p_k.dtype) * p_k
        y_k = ls["g_k"] - s["g_k"]
        rho_inv = jnp.real(jnp.dot(y_k, s_k))
        status = jnp.array(0)
        for code, hit in ((4, s["f_k"] - ls["f_k"] < ftol), (3, s["ngev"] >= maxgrad),
                          (2, s["nfev"] >= maxfun), (1, s["k"] >= maxiter), (5, ls["failed"])):
            status = jnp.where(hit, code, status)
        converged = jnp.linalg.norm(ls["g_k"], ord=norm) < gtol
        return dict(converged=converged, failed=(status > 0) & (~converged), k=s["k"] + 1,
                    nfev=s["nfev"] + ls["nfev"], ngev=s["ngev"] + ls["ngev"],
                    x_k=(s["x_k"] + s_k).astype(s["x_k"].dtype),
                    f_k=ls["f_k"].astype(s["f_k"].dtype), g_k=ls["g_k"].astype(s["g_k"].dtype),
                    s_history=_push(s["s_history"], s_k), y_history=_push(s["y_history"], y_k),
                    rho_history=_push(s["rho_history"], jnp.reciprocal(rho_inv).astype(y_k.dtype)),
                    gamma=(rho_inv / jnp.real(jnp.dot(jnp.conj(y_k), y_k))).astype(s["g_k"].dtype),
                    status=jnp.where(converged, 0, status), ls_status=ls["status"])

    return lax.while_loop(lambda s: (~s["converged"]) & (~s["failed"]), body, state)
