"""`lax.custom_root` and `lax.custom_linear_solve`: the user's solver gives the value; the
derivative is the implicit one (implicit function theorem), with respect to everything the
function or the linear map depends on, closed-over values included.

- custom_root adds to the solver's (derivative-free) answer x* the correction
  c - stop_gradient(c), zero in value, with c = -tangent_solve(J, f(x*)), J the
  linearisation of f at x*: its derivative is -J^-1 (df at fixed x), because f(x*) = 0 (the
  terms through J vanish at a root).
- custom_linear_solve specialises matvec, solve(matvec, .), and with a transpose solve the
  transposed map (matvec's reverse mode, or matvec itself when `symmetric`) and
  transpose_solve(vecmat, .), as regions of one `linear_solve` equation whose operands are
  what they close over and b (compiler/primitives/solves.py): its rules solve again for
  tangents and cotangents, so derivatives of any order are those of A^-1 b. Called outside
  any transformation it just runs `solve`.
"""
from ..compiler.ir.builder import close_regions, current, trace_region
from ..compiler.primitives import PRIMITIVES
from ..dispatch import is_traced
from ..staging import leaf_aval
from ..tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten
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
    matvec depends on (the derivative of A^-1 b, to any order): forward mode solves for the
    tangent with `solve`, reverse mode for the cotangent with `transpose_solve` (`solve` when
    `symmetric`), as JAX does."""
    if transpose_solve is not None and not callable(transpose_solve):
        raise TypeError("custom_linear_solve: transpose_solve must be callable or None")
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    leaves, tree = tree_flatten(b)
    if current() is None and not any(is_traced(x) for x in leaves):
        out = solve(matvec, b)
        _check_tree("custom_linear_solve: solve's solution", b, _split_aux(out, has_aux)[0])
        return out
    avals = [leaf_aval(x, "custom_linear_solve's b")[0] for x in leaves]
    record = {}

    def region(what, fun, aux):
        """`fun` (b's pytree -> b's pytree, and the aux pytree with `aux`) on flat leaves."""
        def body(inputs):
            out = fun(tree_unflatten(tree, inputs))
            sol, extra = out if aux else (out, None)
            _check_tree(f"custom_linear_solve: {what}'s result", b, sol)
            sol_leaves = tree_leaves(sol)
            for got, want in zip(sol_leaves, avals):
                if tuple(got.shape) != want.shape:
                    raise ValueError(f"custom_linear_solve: {what}() output shapes must "
                                     f"match b, got {[tuple(x.shape) for x in sol_leaves]} "
                                     f"and {[a.shape for a in avals]}")
            aux_leaves, record[what] = tree_flatten(extra)
            return sol_leaves + aux_leaves
        return trace_region(current(), what, body, avals)

    def solve_with(solver, linear):
        return lambda v: solver(linear, v)
    children = {"matvec": region("matvec", matvec, False),
                "solve": region("solve", solve_with(solve, matvec), has_aux)}
    if transpose_solve is not None:
        vecmat = matvec if symmetric else _transpose(matvec, b)
        children["vecmat"] = region("vecmat", vecmat, False)
        children["transpose_solve"] = region("transpose_solve",
                                             solve_with(transpose_solve, vecmat), has_aux)
    fns, outer = close_regions(list(children.values()))
    params = dict(matvec=None, vecmat=None, solve=None, transpose_solve=None)
    params.update(zip(children, fns))
    outs = current().bind(PRIMITIVES["linear_solve"], list(outer) + list(leaves),
                          dict(params, num_consts=len(outer)))
    x = tree_unflatten(tree, list(outs[:len(leaves)]))
    if not has_aux:
        return x
    return x, tree_unflatten(record["solve"], list(outs[len(leaves):]))


def _transpose(matvec, b):
    """The transpose of the linear map `matvec` at b's shapes (its reverse mode)."""
    from ..ad import vjp

    def vecmat(y):
        return vjp(matvec, tree_map(_zeros, b))[1](y)[0]
    return vecmat
