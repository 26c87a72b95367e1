"""Partitioning over processes: the function one process runs on its blocks of global values.

`partition(fn, in_dims, out_dims, grid)` takes `fn`, specialised for the global shapes, in
which input i is split along dimension `in_dims[i]` (None: replicated, the same whole value in
every process) into the blocks `grid` (primitives/partitioning.py) lays over the processes,
and returns the SSA function process `grid.process` runs, with the split dimension of each of
its outputs. Its inputs are the local blocks; output j comes out split along `out_dims[j]`
(None: whole; `INFER`: as the partitioned computation leaves it, split or not). Each equation
is replayed with its operands' split dimensions (the `replay` machinery, as vmap's batch
axes): none split, it runs as it is; otherwise its primitive's `PARTITION` rule emits it on
the blocks, and a primitive without a rule runs on its operands gathered whole. A replicated
broadcast that meets a split value is broadcast to the block (the bias of a layer, the
cotangent of a mean), not computed whole and sliced; a scatter into such a broadcast with the
indices of a lookup into a split value (an embedding's gradient) runs on the blocks too, and
so does a gather or scatter whose index column into the split dimension is an iota along a
batch dimension (`jnp.take_along_axis` and its gradient). The cross-process work is the
`process_allreduce`/`process_allgather`/`process_sendrecv` equations the rules emit.

A value split over two mesh axes of processes (P("x", "y") over a 2 x 2 mesh of processes)
is partitioned one axis at a time (runtime/global_jit.py): first over "x" (each value seen
with its "x" blocks, whole along the "y" split), then that function over "y", whose Grid's
peers are the processes with this one's "x" coordinate. A reduction over the "y" split then
combines the blocks of this process's row of the mesh only.
"""
from ..ir.builder import Builder, current
from ..ir.abstract import ShapedArray
from ..primitives.partitioning import PARTITION, EARLIER_PASS, gather, reshard
from ..primitives.partition_indexing import scatter_into_lookup, along_iota, iota_columns
from ..primitives.rule_forms import replay_eqn
from .replay import replay_annotated

INFER = "infer"   # an out_dims entry: the output keeps the split the computation gives it


def local_aval(aval, d, blocks):
    """The abstract value of one block of `aval` split along `d` into `blocks`."""
    if d is None:
        return aval
    shape = tuple(n // blocks if k == d else n for k, n in enumerate(aval.shape))
    return ShapedArray(shape, aval.dtype, aval.weak_type)


def _step(grid, after):
    def step(eqn, ins, dims):
        b = current()
        if all(d is None for d in dims):
            split = scatter_into_lookup(eqn, ins, grid)
            if split is not None:
                return split
            outs = replay_eqn(b, eqn, ins)
            if eqn.prim.name == "broadcast_in_dim":
                grid.broadcasts[id(outs[0])] = (outs[0], ins[0], eqn.params)
            return outs, [None] * len(outs)
        split = along_iota(eqn, ins, dims, grid)
        if split is not None:
            return split
        rule = (EARLIER_PASS.get(eqn.prim) if after else None) or PARTITION.get(eqn.prim)
        if rule is None:
            whole = [gather(x, d, grid) for x, d in zip(ins, dims)]
            outs = replay_eqn(b, eqn, whole)
            return outs, [None] * len(outs)
        outs, odims = rule(ins, dims, grid=grid, **eqn.params)
        if not eqn.prim.multiple_results:
            outs, odims = [outs], [odims]
        return list(outs), list(odims)
    return step


def partition(fn, in_dims, out_dims, grid, after=False, consts=()):
    """(The SSA Function process `grid.process` runs, the split dimension of each of its
    outputs): see the module docstring. `after`: `fn` is the result of partitioning over
    another mesh axis, whose collectives (process_allgather, process_sendrecv) this pass
    runs on the blocks of this axis (partitioning.py's `EARLIER_PASS`). `consts`: the values
    of `fn`'s last inputs, the constants staging hoisted (replicated), where the iota index
    columns of `jnp.take_along_axis` are found (partition_indexing.py's `iota_columns`)."""
    grid.iotas = iota_columns(fn, consts)
    b = Builder(fn.name)
    with b:
        ins = [b.new_input(local_aval(v.aval, d, grid.blocks), v.name)
               for v, d in zip(fn.invars, in_dims)]
        outs, dims = replay_annotated(fn, ins, list(in_dims), _step(grid, after))
        wanted = [d if want == INFER else want for d, want in zip(dims, out_dims)]
        placed = [reshard(o, d, want, grid) for o, d, want in zip(outs, dims, wanted)]
        return b.build(placed), wanted
