"""Batching (vmap) as a transform of the SSA form.

`batch_emit(fn, args, dims, size)` replays `fn` into the current builder on batched values:
`dims[i]` is the axis of `args[i]` that carries the batch (`None`: the same value for every
example). Equations none of whose operands are batched are replayed unchanged; the others use
their primitive's batching rule

    rules["batch"](args, dims, **params) -> (outs, out_dims)

(lists for multiple-result primitives), which emits batched code and says where the batch
axis of each result is. A primitive without a rule is batched by `loop_fallback`: a `scan`
over the examples applying the primitive to one example at a time — always correct, and what
the specialised rules (elementwise, `dot_general` with a batch dimension, reductions,
shape operations) exist to beat.
"""
from ..ir.ssa import Var
from ..frontend.builder import current, trace_region, close_regions
from ..primitives import PRIMITIVES
from . import emit
from .jvp import read, replay_eqn


def moveaxis(x, src, dst):
    """`x` with its axis `src` moved to position `dst`."""
    nd = len(emit.aval(x).shape)
    if src == dst:
        return x
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return emit.transpose(x, permutation=tuple(perm))


def to_front(x, d, size):
    """`x` with its batch axis first; an unbatched `x` broadcast along a new first axis."""
    if d is None:
        a = emit.aval(x)
        return emit.broadcast_in_dim(x, shape=(size,) + a.shape,
                                     broadcast_dimensions=tuple(range(1, len(a.shape) + 1)))
    return moveaxis(x, d, 0)


def batch_eqn(eqn, ins, dims, size):
    b = current()
    if all(d is None for d in dims):
        outs = replay_eqn(b, eqn, ins)
        return outs, [None] * len(outs)
    rule = eqn.prim.rules.get("batch")
    if rule is None:
        return loop_fallback(eqn, ins, dims, size)
    outs, odims = rule(ins, dims, **eqn.params)
    if not eqn.prim.multiple_results:
        outs, odims = [outs], [odims]
    return list(outs), list(odims)


def batch_emit(fn, args, dims, size):
    """Emit the batched `fn` into the current builder: (outputs, their batch axes)."""
    env, denv = {}, {}
    for v, x, d in zip(fn.invars, args, dims):
        env[v] = x
        if d is not None:
            denv[v] = d
    b = current()
    for eqn in fn.eqns:
        info = b.info
        if eqn.info is not None:
            b.info = eqn.info
        try:
            ins = [read(env, v) for v in eqn.invars]
            ds = [denv.get(v) if isinstance(v, Var) else None for v in eqn.invars]
            outs, odims = batch_eqn(eqn, ins, ds, size)
        finally:
            b.info = info
        for v, o, d in zip(eqn.outvars, outs, odims):
            env[v] = o
            if d is not None:
                denv[v] = d
    return ([read(env, v) for v in fn.outvars],
            [denv.get(v) if isinstance(v, Var) else None for v in fn.outvars])


def loop_fallback(eqn, ins, dims, size):
    """Batch any equation as a `scan` over the examples (batch axis first in the results)."""
    b = current()
    consts = [x for x, d in zip(ins, dims) if d is None]
    xs = [moveaxis(x, d, 0) for x, d in zip(ins, dims) if d is not None]
    c_avals = [emit.aval(x) for x in consts]
    x_avals = [emit.aval(x).update(shape=emit.aval(x).shape[1:]) for x in xs]

    def body(inputs):
        cs, sl = iter(inputs[:len(consts)]), iter(inputs[len(consts):])
        args = [next(cs) if d is None else next(sl) for d in dims]
        out = current().bind(eqn.prim, args, eqn.params)
        return list(out) if eqn.prim.multiple_results else [out]
    child = trace_region(b, eqn.prim.name + "_example", body, c_avals + x_avals)
    (fn,), outer = close_regions([child])
    res = b.bind(PRIMITIVES["scan"], list(outer) + consts + xs,
                 dict(body=fn, length=size, reverse=False,
                      num_consts=len(outer) + len(consts), num_carry=0))
    return list(res), [0] * len(res)


# ------------------------------------------------------------------------- rule factories

def elementwise_rule(prim):
    """The rule of an n-ary elementwise primitive (equal shapes, rank-0 operands broadcast):
    batched operands get their batch axis first; an unbatched operand of rank > 0 is broadcast
    along it, and a batched example of rank 0 next to larger examples is broadcast to their
    shape."""
    def rule(args, dims, **params):
        size = next(emit.aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
        ex_shape = ()
        for x, d in zip(args, dims):
            s = emit.aval(x).shape
            s = s[:d] + s[d + 1:] if d is not None else s
            if s:
                ex_shape = s
        out = []
        for x, d in zip(args, dims):
            a = emit.aval(x)
            if d is None:
                out.append(x if not a.shape else to_front(x, None, size))
                continue
            x = moveaxis(x, d, 0)
            if len(a.shape) == 1 and ex_shape:
                x = emit.broadcast_in_dim(x, shape=(size,) + ex_shape,
                                          broadcast_dimensions=(0,))
            out.append(x)
        return current().bind(prim, out, params), 0
    return rule


def axes_rule(prim, param):
    """The rule of a one-operand primitive with an axis (or axes) parameter: batch axis first,
    the parameter shifted by one."""
    def rule(args, dims, **params):
        x = moveaxis(args[0], dims[0], 0)
        value = params[param]
        params = dict(params)
        params[param] = (tuple(a + 1 for a in value) if isinstance(value, tuple)
                         else value + 1)
        return current().bind(prim, [x] + list(args[1:]), params), 0
    return rule


def broadcast_in_dim_rule(args, dims, *, shape, broadcast_dimensions):
    x = moveaxis(args[0], dims[0], 0)
    size = emit.aval(x).shape[0]
    return emit.broadcast_in_dim(x, shape=(size,) + tuple(shape),
                                 broadcast_dimensions=(0,) + tuple(d + 1 for d in
                                                                   broadcast_dimensions)), 0


def reshape_rule(args, dims, *, new_sizes, dimensions=None):
    x = moveaxis(args[0], dims[0], 0)
    if dimensions is not None:
        x = emit.transpose(x, permutation=(0,) + tuple(d + 1 for d in dimensions))
    size = emit.aval(x).shape[0]
    return emit.reshape(x, new_sizes=(size,) + tuple(new_sizes), dimensions=None), 0


def transpose_rule(args, dims, *, permutation):
    x = moveaxis(args[0], dims[0], 0)
    return emit.transpose(x, permutation=(0,) + tuple(p + 1 for p in permutation)), 0


def dot_general_rule(args, dims, *, dimension_numbers, precision=None,
                     preferred_element_type=None):
    """One `dot_general`: a batch axis on both operands becomes a batch dimension; on one
    operand, a free dimension of it."""
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = args
    ld, rd = dims
    if ld is not None:
        lhs = moveaxis(lhs, ld, 0)
    if rd is not None:
        rhs = moveaxis(rhs, rd, 0)
    sh = lambda t, k: tuple(i + k for i in t)  # noqa: E731
    lk, rk = (1 if ld is not None else 0), (1 if rd is not None else 0)
    if ld is not None and rd is not None:
        dn = ((sh(lc, 1), sh(rc, 1)), ((0,) + sh(lb, 1), (0,) + sh(rb, 1)))
        out_dim = 0
    else:
        dn = ((sh(lc, lk), sh(rc, rk)), (sh(lb, lk), sh(rb, rk)))
        nb = len(lb)
        if ld is not None:   # free dims of lhs come right after the batch dims, in order
            out_dim = nb
        else:
            lhs_nd = len(emit.aval(lhs).shape)
            n_lhs_free = lhs_nd - len(lc) - len(lb)
            out_dim = nb + n_lhs_free
    out = emit.dot_general(lhs, rhs, dimension_numbers=dn, precision=precision,
                           preferred_element_type=preferred_element_type)
    return out, out_dim


def install():
    """Attach the batching rules this module defines to their primitives."""
    P = PRIMITIVES
    from ..primitives.elementwise import NAMES as elementwise
    for name in elementwise:
        if name != "bitcast_convert_type":   # may change the shape: the loop fallback
            P[name].rules.setdefault("batch", elementwise_rule(P[name]))
    for name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
                 "reduce_or", "reduce_xor", "argmax", "argmin"):
        P[name].rules.setdefault("batch", axes_rule(P[name], "axes"))
    for name in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
        P[name].rules.setdefault("batch", axes_rule(P[name], "axis"))
    P["broadcast_in_dim"].rules.setdefault("batch", broadcast_in_dim_rule)
    P["reshape"].rules.setdefault("batch", reshape_rule)
    P["transpose"].rules.setdefault("batch", transpose_rule)
    P["dot_general"].rules.setdefault("batch", dot_general_rule)


install()
