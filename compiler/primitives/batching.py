"""The vocabulary batching rules are written in, and the rule factories the primitive
families share.

A batching rule has the fixed signature

    BATCH[prim](args, dims, **params) -> (outs, out_dims)

`args` are the operands (tracers or literals) and `dims[i]` the axis of `args[i]` that carries
the batch, or None for an operand that is the same for every example (at least one is not
None: `transforms/vmap.py` replays unbatched equations as they are). A rule emits batched code
into the current builder through `emit` and returns the results with the axis each
one carries its batch on (None: the result is the same for every example). Multiple-result
primitives return lists. Rules live beside their primitive's declaration; this module holds
what several of them need:

Collectives (`psum`, `axis_index`, ...) are marked `collective` and have an `axis_name`
param (a name or a tuple of names); when the axis being batched is one of them, `vmap` calls

    BATCH_COLLECTIVE[prim](args, dims, *, size, axis, **params) -> (outs, out_dims)

instead (even when no operand is batched), and `BATCH[prim]` otherwise (another vmap's or
pmap's axis: the collective is applied example by example).

- `batch_axis`, `current_axis_name`, `collective_axes`: the axis being batched.
- `moveaxis`, `to_front`, `batch_size`, `bdim_at_front` (every operand batched on axis 0).
- `elementwise_rule(prim)`, `axes_rule(prim, param)`: the rules of whole families.
- `loop_rule(prim)`: a rule that runs the primitive once per example in a `scan` — correct for
  anything, used where a vectorised form would be no faster (host callbacks) or does not exist.
"""
import contextlib

from ..ir.builder import current, trace_region, close_regions, PerThread
from . import emit

# ------------------------------------------------------------------------ the batch axis

INHERIT = object()   # `batch_emit(..., axis_name=INHERIT)`: the enclosing batch_emit's name
_AXES = PerThread(stack=list)   # (axis name or None, size, span) of this thread's batch_emit calls


@contextlib.contextmanager
def batch_axis(axis_name, size, span=None):
    """Mark the batch axis that the batch_emit running inside this block transforms. `span`:
    (this process's index, the process count) when the axis is a pmap axis spanning several
    processes (the batch is this process's replicas; processes.py), else None."""
    stack = _AXES.stack
    if axis_name is INHERIT:
        axis_name, span = stack[-1][::2] if stack else (None, None)
    stack.append((axis_name, size, span))
    try:
        yield
    finally:
        stack.pop()


def current_axis_name():
    """The name of the axis being batched (None when unnamed or outside vmap)."""
    stack = _AXES.stack
    return stack[-1][0] if stack else None


def current_span():
    """(process, processes) when the axis being batched spans several processes, else None."""
    stack = _AXES.stack
    return stack[-1][2] if stack else None


_LANES = PerThread(stack=list)   # (batch depth, size, mask) of the masked loops being batched


@contextlib.contextmanager
def active_lanes(mask, size):
    """Within: the regions batched here run on every example of the batch, but only those
    where `mask` (bool[size]) holds take effect (a while_loop's body whose examples finish at
    different trips). Run-time checks read it (`current_lanes`): a finished example fails
    none. Nested masked loops combine their masks."""
    outer = current_lanes(size)
    if outer is not None:
        mask = emit.and_(outer, mask)
    _LANES.stack.append((len(_AXES.stack), size, mask))
    try:
        yield
    finally:
        _LANES.stack.pop()


def current_lanes(size):
    """The mask of the examples that take effect in the regions of this batch (bool[size],
    batch axis first), or None when all do."""
    if not _LANES.stack:
        return None
    depth, lanes, mask = _LANES.stack[-1]
    return mask if lanes == size and len(_AXES.stack) > depth else None


def reads_batch_axis(eqn):
    """Whether `eqn` is, or holds in a region, a collective over the axis being batched: its
    results vary over the batch even when its operands do not."""
    name = current_axis_name()
    return name is not None and _reads_axis(eqn, name)


def _reads_axis(eqn, name):
    return name in collective_axes(eqn) or any(
        _reads_axis(e, name) for region in eqn.regions() for e in region.eqns)


def collective_axes(eqn):
    """The axis names a collective equation reduces over (empty for other primitives)."""
    if not eqn.prim.collective:
        return ()
    names = eqn.params["axis_name"]
    return names if isinstance(names, tuple) else (names,)



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


def batch_size(args, dims):
    """The number of examples: the length of any batched operand's batch axis."""
    return next(emit.aval(x).shape[d] for x, d in zip(args, dims) if d is not None)


def bdim_at_front(args, dims):
    """Every operand with its batch axis first (unbatched ones broadcast to the batch)."""
    size = batch_size(args, dims)
    return [to_front(x, d, size) for x, d in zip(args, dims)]


def example_shape(x, d):
    """The shape of one example of `x` (batched on `d`, or not at all)."""
    s = emit.aval(x).shape
    return s if d is None else s[:d] + s[d + 1:]


def shift(axes, by=1):
    """Axis numbers of one example, as axes of the batched value with its batch axis first."""
    return tuple(a + by for a in axes)


def loop_over_examples(prim, args, dims, params, size):
    """Batch one application of `prim` as a `scan` over the examples (batch axis first in
    the results): always correct, and what the vectorised rules exist to beat."""
    from .core import PRIMITIVES
    b = current()
    consts = [x for x, d in zip(args, dims) if d is None]
    xs = [moveaxis(x, d, 0) for x, d in zip(args, dims) if d is not None]
    c_avals = [emit.aval(x) for x in consts]
    x_avals = [emit.aval(x).update(shape=emit.aval(x).shape[1:]) for x in xs]

    def body(inputs):
        cs, sl = iter(inputs[:len(consts)]), iter(inputs[len(consts):])
        ins = [next(cs) if d is None else next(sl) for d in dims]
        out = current().bind(prim, ins, params)
        return list(out) if prim.multiple_results else [out]
    child = trace_region(b, prim.name + "_example", body, c_avals + x_avals)
    (fn,), outer = close_regions([child])
    res = b.bind(PRIMITIVES["scan"], list(outer) + consts + xs,
                 dict(body=fn, length=size, reverse=False,
                      num_consts=len(outer) + len(consts), num_carry=0))
    return list(res), [0] * len(res)


def loop_rule(prim):
    """A batching rule that loops over the examples (see `loop_over_examples`)."""
    def rule(args, dims, **params):
        outs, odims = loop_over_examples(prim, args, dims, params, batch_size(args, dims))
        return (outs, odims) if prim.multiple_results else (outs[0], odims[0])
    return rule


# ------------------------------------------------------------------------- rule factories

def elementwise_rule(prim, scalar_positions=None):
    """The rule of an n-ary elementwise primitive (equal shapes; rank-0 operands broadcast
    where the primitive allows it: anywhere, or only at `scalar_positions`, as select_n's
    predicate and clamp's bounds). Batched operands get their batch axis first; an unbatched
    operand is broadcast along it unless it may stay rank 0, and a batched example of rank 0
    next to larger examples is broadcast to their shape. When every batched operand already
    carries its batch on the same axis and nothing needs broadcasting, the operands are used
    as they are and the result keeps that axis (no transposes)."""
    def may_stay_scalar(i):
        return scalar_positions is None or i in scalar_positions

    def rule(args, dims, **params):
        size = batch_size(args, dims)
        ex_shape = ()
        for x, d in zip(args, dims):
            if example_shape(x, d):
                ex_shape = example_shape(x, d)
        batched = {d for d in dims if d is not None}
        if len(batched) == 1 and all(
                example_shape(x, d) == ex_shape if d is not None
                else not emit.aval(x).shape and may_stay_scalar(i)
                for i, (x, d) in enumerate(zip(args, dims))):
            return current().bind(prim, list(args), params), batched.pop()
        full = (size,) + ex_shape
        out = []
        for i, (x, d) in enumerate(zip(args, dims)):
            rank = len(emit.aval(x).shape)
            if d is None and not rank and may_stay_scalar(i):
                out.append(x)
            elif d is None:
                out.append(emit.broadcast_in_dim(
                    x, shape=full, broadcast_dimensions=tuple(range(1 + len(ex_shape) - rank,
                                                                    1 + len(ex_shape)))))
            elif rank == 1 and ex_shape:
                out.append(emit.broadcast_in_dim(x, shape=full, broadcast_dimensions=(0,)))
            else:
                out.append(moveaxis(x, d, 0))
        return current().bind(prim, out, params), 0
    return rule


def axes_rule(prim, param):
    """The rule of a one-operand primitive with an axis (or axes) parameter: batch axis first,
    the parameter shifted by one."""
    def rule(args, dims, **params):
        x = moveaxis(args[0], dims[0], 0)
        value = params[param]
        params = dict(params)
        params[param] = shift(value) if isinstance(value, tuple) else value + 1
        return current().bind(prim, [x] + list(args[1:]), params), 0
    return rule
