"""`lax.custom_root` and `lax.custom_linear_solve`: the user's solver gives the value; the
derivative is the implicit one (implicit function theorem), with respect to everything the
function or the linear map depends on, closed-over values included.

Both add to the solver's (derivative-free) answer x* a correction term that is zero in value
but carries the implicit derivative:
- custom_root: c = -tangent_solve(J, f(x*)), J the linearisation of f at x*: its derivative
  is -J^-1 (df at fixed x), because f(x*) = 0 (the terms through J vanish at a root).
- custom_linear_solve: c = solve(matvec, b - matvec(x*)): its derivative is
  A^-1 (db - dA x*), the derivative of A^-1 b.
The value returned is x* + (c - stop_gradient(c)) = x*. Reverse mode differentiates `solve`
(or `tangent_solve`) applied to the residual's cotangent path, so JAX's `transpose_solve` is
accepted and checked but kiln does not need it: kiln reverses the solver's own operations
(loops included), which give the transpose solve's values for a linear solver.
"""
from ..tree_util import tree_flatten, tree_map, tree_unflatten
from ._ops import add, neg, stop_gradient, sub

__all__ = ["custom_linear_solve", "custom_root"]


def _split_aux(out, has_aux):
    if has_aux:
        sol, aux = out
        return sol, stop_gradient(aux)
    return out, None


def _implicit(x_star, correction):
    return tree_map(lambda x, c: add(x, sub(c, stop_gradient(c))), x_star, correction)


def _check_tree(what, ref, other):
    if tree_flatten(ref)[1] != tree_flatten(other)[1]:
        raise TypeError(f"{what} must have the same pytree structure as its input, got "
                        f"{tree_flatten(ref)[1]} and {tree_flatten(other)[1]}")


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """A root x of f (f(x) = 0) found by `solve(f, initial_guess)`, differentiable by the
    implicit function theorem through `tangent_solve(g, y)` (which solves g(x) = y for the
    linear g)."""
    from ..ad import jvp
    guess = stop_gradient(initial_guess)
    x_star, aux = _split_aux(solve(f, guess), has_aux)
    x_star = stop_gradient(x_star)
    _check_tree("custom_root: solve's solution", initial_guess, x_star)
    residual = f(x_star)
    _check_tree("custom_root: f's output", initial_guess, residual)

    def linear(v):
        return jvp(f, (x_star,), (v,))[1]
    step = tangent_solve(linear, residual)      # J^-1 f(x*): zero in value, -dx* in derivative
    out = _implicit(x_star, tree_map(neg, step))
    return (out, aux) if has_aux else out


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
    """x = solve(matvec, b) for the linear map `matvec`, differentiable in b and in whatever
    matvec depends on (the derivative of A^-1 b)."""
    if transpose_solve is not None and not callable(transpose_solve):
        raise TypeError("custom_linear_solve: transpose_solve must be callable or None")
    x_star, aux = _split_aux(solve(matvec, stop_gradient(b)), has_aux)
    x_star = stop_gradient(x_star)
    _check_tree("custom_linear_solve: solve's solution", b, x_star)
    residual = tree_map(sub, b, matvec(x_star))
    correction, _ = _split_aux(solve(matvec, residual), has_aux)
    out = _implicit(x_star, correction)
    return (out, aux) if has_aux else out
