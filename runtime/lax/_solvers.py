"""`lax.custom_root` and `lax.custom_linear_solve`: the user's solver gives the value; the
derivative is the implicit one (implicit function theorem), with respect to everything the
function or the linear map depends on, closed-over values included.

- custom_root adds to the solver's (derivative-free) answer x* the correction
  c - stop_gradient(c), zero in value, with c = -tangent_solve(J, f(x*)), J the
  linearisation of f at x*: its derivative is -J^-1 (df at fixed x), because f(x*) = 0 (the
  terms through J vanish at a root).
- custom_linear_solve adds to x* a term that is zero in value and is a linear solve in
  derivative, applied to the residual b - matvec(x*) (whose derivative is db - dA x*): a
  `custom_jvp` whose tangent is `solve` of the residual's tangent, through a `custom_vjp`
  whose cotangent is `transpose_solve` (over matvec's transpose) of the incoming one, or
  `solve` when `symmetric`. So forward mode calls `solve` and reverse mode the transpose
  solve, as JAX does; no loop inside a solver is differentiated. Without `transpose_solve`
  (where JAX's reverse mode raises), reverse mode differentiates `solve` itself.
"""
from ..tree_util import tree_flatten, tree_map, tree_unflatten
from ._ops import add, neg, stop_gradient, sub, full_like

__all__ = ["custom_linear_solve", "custom_root"]


def _split_aux(out, has_aux):
    if has_aux:
        sol, aux = out
        return sol, stop_gradient(aux)
    return out, None


def _implicit(x_star, correction):
    return tree_map(lambda x, c: add(x, sub(c, stop_gradient(c))), x_star, correction)


def _zeros(x):
    return full_like(x, 0)


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
    matvec depends on (the derivative of A^-1 b): forward mode solves for the tangent with
    `solve`, reverse mode for the cotangent with `transpose_solve` (`solve` when
    `symmetric`), as JAX does."""
    if transpose_solve is not None and not callable(transpose_solve):
        raise TypeError("custom_linear_solve: transpose_solve must be callable or None")
    x_star, aux = _split_aux(solve(matvec, stop_gradient(b)), has_aux)
    x_star = stop_gradient(x_star)
    _check_tree("custom_linear_solve: solve's solution", b, x_star)
    residual = tree_map(sub, b, matvec(x_star))   # zero; its derivative is db - dA x*
    correction = _solve_tangent(matvec, solve, transpose_solve, symmetric, has_aux)(residual)
    out = tree_map(add, x_star, correction)
    return (out, aux) if has_aux else out


def _solve_tangent(matvec, solve, transpose_solve, symmetric, has_aux):
    """A function that is zero in value and whose derivative is the linear solve: its JVP
    applies `solve` to the tangent, and that solve's VJP is the transpose solve."""
    from ..ad import vjp
    from ..custom_derivatives import custom_jvp, custom_vjp

    def solve_value(mv, v):
        return _split_aux(solve(mv, v), has_aux)[0]

    def forward(v):
        return solve_value(matvec, v)

    def forward_fwd(v):
        return solve_value(matvec, v), v

    def backward(v, ct):
        if symmetric:
            return (solve_value(matvec, ct),)

        def vecmat(y):
            return vjp(matvec, tree_map(_zeros, v))[1](y)[0]
        return (_split_aux(transpose_solve(vecmat, ct), has_aux)[0],)

    if transpose_solve is None and not symmetric:
        linear = forward            # reverse mode differentiates `solve` itself
    else:
        linear = custom_vjp(forward)
        linear.defvjp(forward_fwd, backward)

    def zero(r):
        return tree_map(_zeros, r)

    def zero_jvp(primals, tangents):
        return zero(primals[0]), linear(tangents[0])

    tangent = custom_jvp(zero)
    tangent.defjvp(zero_jvp)
    return tangent
