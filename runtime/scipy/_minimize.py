"""The implementation of `kiln.scipy.optimize`: `minimize` and `OptimizeResults`."""
from typing import NamedTuple

from .. import numpy as jnp
from ._bfgs import minimize_bfgs, minimize_lbfgs

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """The result of `minimize`: the solution `x`, `success`, the solver's `status` (0
    converged, 1 maxiter reached, 3 zoom failed, 4 saddle point, 5 line search maxiter, -1
    undefined for BFGS), `fun` and `jac` at `x`, `hess_inv` (None for L-BFGS), and the counts
    `nfev`, `njev` and `nit`."""
    x: object
    success: object
    status: object
    fun: object
    jac: object
    hess_inv: object
    nfev: object
    njev: object
    nit: object


_METHODS = {"bfgs": (minimize_bfgs, "H_k"),
            "l-bfgs-experimental-do-not-rely-on-this": (minimize_lbfgs, None)}


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
    """Minimise `fun(x, *args)` over 1-D `x` from `x0` with `method` ("BFGS" or
    "l-bfgs-experimental-do-not-rely-on-this"); `options` go to the solver (`maxiter`,
    `gtol`, `norm`, `line_search_maxiter` for BFGS; `maxcor`, `ftol`, `maxfun`, `maxgrad`,
    `maxls` for L-BFGS). `tol` is accepted and unused, as in JAX."""
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to kiln.scipy.optimize.minimize must be a tuple, got "
                        f"{args}")
    if method.lower() not in _METHODS:
        raise ValueError(f"Method {method} not recognized; kiln.scipy.optimize.minimize knows "
                         f"{', '.join(repr(m) for m in _METHODS)}")
    solver, hess_key = _METHODS[method.lower()]
    s = solver(lambda x: fun(x, *args), x0, **(options or {}))
    return OptimizeResults(x=s["x_k"], success=s["converged"] & jnp.logical_not(s["failed"]),
                           status=s["status"], fun=s["f_k"], jac=s["g_k"],
                           hess_inv=None if hess_key is None else s[hess_key],
                           nfev=s["nfev"], njev=s["ngev"], nit=s["k"])

