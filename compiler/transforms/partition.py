"""Partitioning over processes: the function one process runs on its blocks of global values.

`partition(fn, in_dims, out_dims, process, processes)` takes `fn`, specialised for the global
shapes, in which input i is split across the processes along dimension `in_dims[i]` (None:
replicated, the same whole value in every process), and returns the SSA function process
`process` runs: its inputs are the local blocks, and output j comes out split along
`out_dims[j]` (None: whole). Each equation is replayed with its operands' split dimensions
(the `replay` machinery, as vmap's batch axes): none split, it runs as it is; otherwise its
primitive's `PARTITION` rule (primitives/partitioning.py) emits it on the blocks, and a
primitive without a rule runs on its operands gathered whole. The cross-process work is the
`process_allreduce`/`process_allgather` equations the rules emit.
"""
from ..ir.builder import Builder, current
from ..ir.abstract import ShapedArray
from ..primitives.partitioning import PARTITION, gather, reshard
from ..primitives.rule_forms import replay_eqn
from .replay import replay_annotated


def local_aval(aval, d, processes):
    """The abstract value of one process's block of `aval` split along `d`."""
    if d is None:
        return aval
    shape = tuple(n // processes if k == d else n for k, n in enumerate(aval.shape))
    return ShapedArray(shape, aval.dtype, aval.weak_type)


def _step(process, processes):
    def step(eqn, ins, dims):
        b = current()
        if all(d is None for d in dims):
            outs = replay_eqn(b, eqn, ins)
            return outs, [None] * len(outs)
        rule = PARTITION.get(eqn.prim)
        if rule is None:
            whole = [gather(x, d, process, processes) for x, d in zip(ins, dims)]
            outs = replay_eqn(b, eqn, whole)
            return outs, [None] * len(outs)
        outs, odims = rule(ins, dims, process=process, processes=processes, **eqn.params)
        if not eqn.prim.multiple_results:
            outs, odims = [outs], [odims]
        return list(outs), list(odims)
    return step


def partition(fn, in_dims, out_dims, process, processes):
    """The SSA Function process `process` of `processes` runs (see the module docstring)."""
    b = Builder(fn.name)
    with b:
        ins = [b.new_input(local_aval(v.aval, d, processes), v.name)
               for v, d in zip(fn.invars, in_dims)]
        outs, dims = replay_annotated(fn, ins, list(in_dims), _step(process, processes))
        placed = [reshard(o, d, want, process, processes)
                  for o, d, want in zip(outs, dims, out_dims)]
        return b.build(placed)
