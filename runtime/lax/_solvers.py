"""`lax.custom_root` and `lax.custom_linear_solve`: the user's solver gives the value; the
derivative is the implicit one (implicit function theorem), with respect to everything the
function or the linear map depends on, closed-over values included, to any order.

Both specialise the user's functions as regions of one equation whose operands are what the
regions close over and the operand pytree's leaves (compiler/primitives/solves.py, whose
rules differentiate and batch them; called outside any transformation, they just run
`solve`):
- custom_root: a `root` equation over f, solve(f, .) and tangent_solve(J, .) with J the
  linearisation of f (its forward mode) at a point;
- custom_linear_solve: a `linear_solve` equation over matvec, solve(matvec, .), and with a
  transpose solve the transposed map (matvec's reverse mode, or matvec itself when
  `symmetric`) and transpose_solve(vecmat, .).
"""
from ..compiler.ir.builder import close_regions, current, trace_region
from ..compiler.primitives import PRIMITIVES
from ..dispatch import is_traced
from ..staging import leaf_aval
from ..tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten
from ._ops import full_like

__all__ = ["custom_linear_solve", "custom_root"]


def _solution(out, has_aux):
    return out[0] if has_aux else out


def _zeros(x):
    return full_like(x, 0)


def _check_tree(what, ref, other):
    if tree_flatten(ref)[1] != tree_flatten(other)[1]:
        raise TypeError(f"{what} must have the same pytree structure as its input, got "
                        f"{tree_flatten(ref)[1]} and {tree_flatten(other)[1]}")


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """A root x of f (f(x) = 0) found by `solve(f, initial_guess)`, differentiable (to any
    order) by the implicit function theorem through `tangent_solve(g, y)` (which solves
    g(x) = y for the linear g)."""
    from ..ad import jvp
    leaves, tree = tree_flatten(initial_guess)
    if not _staging(leaves):
        return _eager("custom_root", solve, f, initial_guess, has_aux)
    avals = _avals(leaves, "custom_root's initial_guess")
    record = {}

    def tangent(x, rhs):
        return tangent_solve(lambda v: jvp(f, (x,), (v,))[1], rhs)
    children = {"f": _region("custom_root", "f", f, tree, avals, False, record),
                "solve": _region("custom_root", "solve", lambda v: solve(f, v), tree, avals,
                                 has_aux, record),
                "tangent_solve": _region("custom_root", "tangent_solve", tangent, tree,
                                         avals + avals, False, record)}
    return _bind("root", children, leaves, tree, has_aux, record)


def _eager(op, solve, fun, operand, has_aux):
    """Outside any transformation: solve(fun, operand), its structure checked."""
    out = solve(fun, operand)
    _check_tree(f"{op}: solve's solution", operand, _solution(out, has_aux))
    return out


def _staging(leaves):
    return current() is not None or any(is_traced(x) for x in leaves)


def _avals(leaves, where):
    return [leaf_aval(x, where)[0] for x in leaves]


def _region(op, what, fun, tree, avals, aux, record):
    """A region running `fun` on flat leaves: its inputs (of types `avals`) are one or more
    pytrees like the operand (`tree`), one argument each; it returns such a pytree (and the
    aux pytree with `aux`, its structure recorded in `record[what]`)."""
    n = tree.num_leaves

    def body(inputs):
        parts = [tree_unflatten(tree, inputs[i:i + n]) for i in range(0, len(inputs), n)]
        out = fun(*parts) if len(parts) > 1 else fun(parts[0])
        sol, extra = out if aux else (out, None)
        _check_tree(f"{op}: {what}'s result", tree_unflatten(tree, inputs[:n]), sol)
        sol_leaves = tree_leaves(sol)
        want = [a.shape for a in avals[:n]]
        if [tuple(x.shape) for x in sol_leaves] != want:
            raise ValueError(f"{op}: {what}() output shapes must match its input, got "
                             f"{[tuple(x.shape) for x in sol_leaves]} and {want}")
        aux_leaves, record[what] = tree_flatten(extra)
        return sol_leaves + aux_leaves
    return trace_region(current(), what, body, avals)


def _bind(name, children, leaves, tree, has_aux, record, **params):
    """Bind the primitive `name` over the regions `children` (param name -> traced region);
    the solution's pytree, and the aux pytree with `has_aux`."""
    fns, outer = close_regions(list(children.values()))
    params.update(zip(children, fns))
    outs = current().bind(PRIMITIVES[name], list(outer) + list(leaves),
                          dict(params, num_consts=len(outer)))
    x = tree_unflatten(tree, list(outs[:len(leaves)]))
    if not has_aux:
        return x
    return x, tree_unflatten(record["solve"], list(outs[len(leaves):]))


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
    if not _staging(leaves):
        return _eager("custom_linear_solve", solve, matvec, b, has_aux)
    avals = _avals(leaves, "custom_linear_solve's b")
    record = {}

    def region(what, fun, aux=False):
        return _region("custom_linear_solve", what, fun, tree, avals, aux, record)
    children = {"matvec": region("matvec", matvec),
                "solve": region("solve", lambda v: solve(matvec, v), has_aux)}
    if transpose_solve is not None:
        vecmat = matvec if symmetric else _transpose(matvec, b)
        children["vecmat"] = region("vecmat", vecmat)
        children["transpose_solve"] = region(
            "transpose_solve", lambda v: transpose_solve(vecmat, v), has_aux)
    return _bind("linear_solve", children, leaves, tree, has_aux, record,
                 matvec=None, vecmat=None, solve=None, transpose_solve=None)


def _transpose(matvec, b):
    """The transpose of the linear map `matvec` at b's shapes (its reverse mode)."""
    from ..ad import vjp

    def vecmat(y):
        return vjp(matvec, tree_map(_zeros, b))[1](y)[0]
    return vecmat
