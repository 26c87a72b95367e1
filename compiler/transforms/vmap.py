"""Batching (vmap) as a transform of the SSA form.

`batch_emit(fn, args, dims, size)` replays `fn` into the current builder on batched values:
`dims[i]` is the axis of `args[i]` that carries the batch (`None`: the same value for every
example). Equations none of whose operands are batched are replayed unchanged; the others use
their primitive's batching rule

    BATCH[prim](args, dims, **params) -> (outs, out_dims)

(lists for multiple-result primitives; the table's signature is documented in
`compiler/primitives/core.py`), which emits batched code and says where the batch axis of
each result is; a collective over the axis being batched uses its `BATCH_COLLECTIVE` rule
instead. Every primitive declares its rule beside its declaration (`primitives/batching.py`
holds the shared vocabulary and the family factories); `tests/test_vmap_completeness.py`
checks that each one exists, `tests/test_vmap.py` and `tests/test_vmap_rules_structural.py`
that they agree with a loop over examples.
"""
from ..errors import CompileError
from ..ir.builder import current
from ..primitives import batching, regions
from .replay import replay_annotated
from ..primitives.core import BATCH, BATCH_COLLECTIVE
from ..primitives.processes import BATCH_ACROSS_PROCESSES, across_processes_error
from ..primitives.rule_forms import replay_eqn


def batch_eqn(eqn, ins, dims, size):
    b = current()
    name = batching.current_axis_name()
    if name is not None and name in batching.collective_axes(eqn):
        # A collective over the axis being batched (`psum(x, 'i')` under
        # `vmap(..., axis_name='i')`): it becomes a computation across the batch.
        span = batching.current_span()
        if span is None:
            outs, odims = BATCH_COLLECTIVE[eqn.prim](ins, dims, size=size, axis=name,
                                                     **eqn.params)
        else:   # a pmap axis over several processes: the local batch, then across them
            rule = BATCH_ACROSS_PROCESSES.get(eqn.prim)
            if rule is None:
                raise across_processes_error(eqn, span[1])
            outs, odims = rule(ins, dims, size=size, axis=name, process=span[0],
                               processes=span[1], **eqn.params)
    elif all(d is None for d in dims) and not batching.reads_batch_axis(eqn):
        outs = replay_eqn(b, eqn, ins)
        return outs, [None] * len(outs)
    else:
        rule = BATCH.get(eqn.prim)
        if rule is None:
            raise no_batch_rule_error(eqn)
        if all(d is None for d in dims):
            # Control flow around a collective over this axis: its results vary over the
            # batch although its operands do not; the first operand is made batched.
            ins = [batching.to_front(ins[0], None, size)] + list(ins[1:])
            dims = [0] + list(dims[1:])
        outs, odims = rule(ins, dims, **eqn.params)
    if not eqn.prim.multiple_results:
        outs, odims = [outs], [odims]
    return list(outs), list(odims)


def no_batch_rule_error(eqn):
    """A primitive without a batching rule reached vmap: name it and the user line."""
    return CompileError(f"kiln cannot batch the primitive {eqn.prim.name!r}: it has no "
                        "batching rule", eqn.info,
                        "Call the function in a Python loop over the examples instead of "
                        "vmap, or report the missing rule.")


def batch_emit(fn, args, dims, size, axis_name=batching.INHERIT, span=None):
    """Emit the batched `fn` into the current builder: (outputs, their batch axes).

    `axis_name` names the batch axis for collectives (`vmap(..., axis_name=...)`); rules that
    batch a region of the function being batched (control flow) leave it out and inherit the
    name of the batch_emit running them. `span` = (process, processes) says the axis is a pmap
    axis over several processes, this batch being this process's replicas: its collectives
    then use their `BATCH_ACROSS_PROCESSES` rules (primitives/processes.py)."""
    with batching.batch_axis(axis_name, size, span):
        return replay_annotated(fn, args, dims,
                                lambda eqn, ins, ds: batch_eqn(eqn, ins, ds, size))


regions.provide("batch", batch_emit)
