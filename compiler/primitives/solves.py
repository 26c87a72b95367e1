"""Solves with implicit derivatives: `linear_solve` (`lax.custom_linear_solve`, JAX's
`linear_solve_p`) and `root` (`lax.custom_root`).

  outs = linear_solve(*consts, *b, matvec=M, vecmat=V, solve=S, transpose_solve=T,
                      num_consts=k)
      S(*consts, *b) -> (*x, *aux): the solution of A x = b (and the solver's auxiliary
      results), for the linear map M(*consts, *x) -> b. V(*consts, *y) is A's transpose and
      T(*consts, *b) -> (*x, *aux) solves with it; both are None when the user gave no
      transpose solve. Every region takes all the consts (what any of them closes over).

The value is S's. The derivatives are those of x = A^-1 b, with A depending on the consts
only through M, and never go into the solver's loop:
  JVP      x_dot = linear_solve(b_dot - M_dot x): M_dot is M's tangent in the consts at x,
           and the solve is this same primitive, so the tangent differentiates again (any
           order: grad of grad, jacfwd of jacfwd, ...).
  VJP      the cotangent of b is the transposed solve of x's cotangent, itself a
           linear_solve with the roles swapped (V for M, T for S and back again); the consts
           get minus M's cotangent in them at x, applied to that solve. Without T, the
           cotangent of b is S's own reverse mode at b (JAX refuses this case).
  batching every region batched, b and the results with the batch on axis 0.
The auxiliary results carry no derivative. `root` is described beside its rules below.
Backends run either primitive's `solve` region in place (the other regions are only read by
the rules).
"""
from ..ir.builder import current, close_regions
from . import emit as E
from . import batching as B
from . import regions
from .autodiff import batched_region, to_axis
from .control import run_region
from .core import register, type_error
from .rule_forms import cotangent_rule, has_tangent, replay_eqn

_REGIONS = ("matvec", "vecmat", "solve", "transpose_solve")


def _types(avals):
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _check_region(op, what, region, num_consts, takes, returns):
    """`region` takes the consts and `takes`, and returns `returns` (then any aux results)."""
    for have, want, side in ((region.in_avals[num_consts:], takes, "takes"),
                             (region.out_avals[:len(returns)], returns, "returns")):
        if [(a.shape, a.dtype) for a in have] != [(a.shape, a.dtype) for a in want]:
            raise type_error(op, f"{what} {side} {_types(have)} where {_types(want)} is "
                                 f"expected")


def _eval(*avals, matvec, vecmat, solve, transpose_solve, num_consts):
    b = list(avals[num_consts:])
    for what, region in zip(_REGIONS, (matvec, vecmat, solve, transpose_solve)):
        if region is not None:
            _check_region("linear_solve", what, region, num_consts, b, b)
    if (vecmat is None) != (transpose_solve is None):
        raise type_error("linear_solve", "has a transpose solve exactly when it has vecmat")
    return tuple(solve.out_avals)


def _impl(*args, matvec, vecmat, solve, transpose_solve, num_consts):
    return tuple(run_region(solve, *args))


linear_solve = register("linear_solve", _eval, _impl, multiple_results=True)


def _transposed(params):
    """The params of the solve with A's transpose: the roles of M and V, S and T swapped."""
    return dict(params, matvec=params["vecmat"], vecmat=params["matvec"],
                solve=params["transpose_solve"], transpose_solve=params["solve"])


def _matvec_tangent(matvec, consts, t_consts, x):
    """M_dot x: the tangent of M(consts, x) in the consts only (None when it has none)."""
    if all(t is None for t in t_consts):
        return None
    _, touts = regions.jvp(matvec, list(consts) + list(x), list(t_consts) + [None] * len(x))
    return touts


def _jvp(eqn, ins, tins):
    p = eqn.params
    k = p["num_consts"]
    consts, b = ins[:k], ins[k:]
    n = len(b)
    outs = replay_eqn(current(), eqn, ins)
    x = outs[:n]
    rhs = list(tins[k:])
    dax = _matvec_tangent(p["matvec"], consts, tins[:k], x)
    if dax is not None:
        rhs = [E.neg(d) if r is None else r if d is None else E.sub(r, d)
               for r, d in zip(rhs, dax)]
    if all(r is None for r in rhs):
        return outs, [None] * len(outs)
    rhs = [E.instantiate(r, E.aval(v)) for r, v in zip(rhs, b)]
    x_dot = current().bind(linear_solve, list(consts) + rhs, p)
    return outs, list(x_dot[:n]) + [None] * (len(outs) - n)


def _vjp(cts, primals, outs, **params):
    k = params["num_consts"]
    consts, b = primals[:k], primals[k:]
    n = len(b)
    if all(c is None for c in cts[:n]):
        return [None] * len(primals)
    ct_x = [E.instantiate(c, E.aval(v)) for c, v in zip(cts[:n], b)]
    if params["transpose_solve"] is not None:
        ct_b = list(current().bind(linear_solve, list(consts) + ct_x,
                                   _transposed(params))[:n])
    else:   # no transpose solve: reverse mode of the solver itself, at b
        solve = params["solve"]
        _, cts_in = regions.vjp(solve, list(primals), ct_x + [None] * (len(outs) - n),
                                [False] * k + [has_tangent(E.aval(v)) for v in b])
        ct_b = [E.instantiate(c, E.aval(v)) for c, v in zip(cts_in[k:], b)]
    active = [E.aval(c).dtype.kind in "fc" for c in consts]
    if not any(active):
        return [None] * k + ct_b
    _, cts_in = regions.vjp(params["matvec"], list(consts) + list(outs[:n]), ct_b,
                            active + [False] * n)
    return [None if c is None else E.neg(c) for c in cts_in[:k]] + ct_b


def _batched(prim, args, dims, params, takes):
    """`prim`'s equation on batched operands: each region named in `takes` batched, taking
    the consts and `takes[name]` operand-shaped values, with the batch of those and of its
    results on axis 0."""
    k = params["num_consts"]
    size = B.batch_size(args, dims)
    xs = [to_axis(x, d, 0, size) for x, d in zip(args[k:], dims[k:])]
    avals = [E.aval(x) for x in list(args[:k]) + xs]
    in_dims = list(dims[:k]) + [0] * len(xs)

    def place(outs, odims):
        return [to_axis(o, d, 0, size) for o, d in zip(outs, odims)]
    fns, outer = close_regions([
        batched_region(params[w], avals + avals[k:] * (m - 1),
                       in_dims + in_dims[k:] * (m - 1), size, place)
        for w, m in takes.items()])
    new = dict(params, **dict(zip(takes, fns)), num_consts=len(outer) + k)
    outs = current().bind(prim, list(outer) + list(args[:k]) + xs, new)
    return list(outs), [0] * len(outs)


def _batch(args, dims, **params):
    return _batched(linear_solve, args, dims, params,
                    {w: 1 for w in _REGIONS if params[w] is not None})


linear_solve.def_rules(jvp=_jvp, vjp=cotangent_rule(_vjp), batch=_batch)


# ------------------------------------------------------------------------------ root

#   outs = root(*consts, *guess, f=F, solve=S, tangent_solve=L, num_consts=k)
#       S(*consts, *guess) -> (*x, *aux): a root x of F(*consts, *x) = 0 found from the
#       guess; L(*consts, *x, *r) -> y solves J y = r, J the linearisation of F at x.
# JVP: x_dot = -L(x, F_dot x), F_dot the tangent of F in the consts at x, with x this very
# equation's result, so the tangent differentiates again (to any order). VJP: the consts get
# minus F's cotangent in them at x, applied to L's transpose (L's reverse mode at r = 0,
# L being linear in r) of x's cotangent; the guess gets none. Batching as linear_solve's.

def _root_eval(*avals, f, solve, tangent_solve, num_consts):
    x = list(avals[num_consts:])
    _check_region("root", "f", f, num_consts, x, x)
    _check_region("root", "solve", solve, num_consts, x, x)
    _check_region("root", "tangent_solve", tangent_solve, num_consts, x + x, x)
    return tuple(solve.out_avals)


def _root_impl(*args, f, solve, tangent_solve, num_consts):
    return tuple(run_region(solve, *args))


root = register("root", _root_eval, _root_impl, multiple_results=True)


def _inline(region, ins):
    """`region`'s equations emitted on `ins`: its results."""
    outs, _ = regions.jvp(region, list(ins), [None] * len(ins))
    return list(outs)


def _root_jvp(eqn, ins, tins):
    p = eqn.params
    k = p["num_consts"]
    consts = ins[:k]
    n = len(ins) - k
    outs = replay_eqn(current(), eqn, ins)
    x = outs[:n]
    rhs = _matvec_tangent(p["f"], consts, tins[:k], x)
    if rhs is None:
        return outs, [None] * len(outs)
    rhs = [E.instantiate(r, E.aval(v)) for r, v in zip(rhs, x)]
    step = _inline(p["tangent_solve"], list(consts) + list(x) + rhs)
    return outs, [E.neg(s) for s in step] + [None] * (len(outs) - n)


def _root_vjp(cts, primals, outs, *, f, solve, tangent_solve, num_consts):
    k = num_consts
    consts = primals[:k]
    x = outs[:len(primals) - k]
    n = len(x)
    active = [E.aval(c).dtype.kind in "fc" for c in consts]
    if all(c is None for c in cts[:n]) or not any(active):
        return [None] * len(primals)
    ct_x = [E.instantiate(c, E.aval(v)) for c, v in zip(cts[:n], x)]
    zeros = [E.zeros(E.aval(v)) for v in x]
    _, cts_in = regions.vjp(tangent_solve, list(consts) + list(x) + zeros, ct_x,
                            [False] * (k + n) + [True] * n)
    lam = [E.instantiate(c, E.aval(v)) for c, v in zip(cts_in[k + n:], x)]
    _, cts_in = regions.vjp(f, list(consts) + list(x), lam, active + [False] * n)
    return [None if c is None else E.neg(c) for c in cts_in[:k]] + [None] * n


def _root_batch(args, dims, **params):
    return _batched(root, args, dims, params, {"f": 1, "solve": 1, "tangent_solve": 2})


root.def_rules(jvp=_root_jvp, vjp=cotangent_rule(_root_vjp), batch=_root_batch)
