"""StableHLO rules of the collectives over a pmap axis that spans several MPI processes (the
collective's `processes` param above 1; wrapping lower_collectives.py's rules).

Each process compiles its own module, replicated over its own n devices (`mesh_axes` is the one
pmap axis, of n local replicas); the axis has n * P members, replica i of process p being member
p * n + i. A collective is the in-process XLA collective over this process's replicas, then a
typed-FFI custom call (api_version 4, `has_side_effect`, row-major layouts) whose handler does
the part across processes with MPI (runtime/pjrt_processes.py: one communicator per local
device index, so replica i of every process talks only to replica i of the others):

- psum, pmax, pmin: `stablehlo.all_reduce` over the local replicas, then
  `@kiln_mpi_psum` / `@kiln_mpi_pmax` / `@kiln_mpi_pmin` (same shape: the reduction of that
  value over the processes). From `CHUNKED` elements per replica, the value is flattened
  and padded to n chunks instead, `stablehlo.reduce_scatter` gives each replica the local
  reduction of its chunk, the custom call reduces that chunk across processes, and a local
  `stablehlo.all_gather` puts the chunks back together: each replica's communicator
  carries 1/n of the value;
- axis_index: `stablehlo.replica_id` plus n times `@kiln_mpi_process_index` (an i32 scalar, the
  MPI rank), so every process compiles the same module;
- all_gather: every member's operand, in member order (`_everyone`: a local
  `stablehlo.all_gather` of the operand with a unit axis in front, then `@kiln_mpi_all_gather`,
  which stacks the processes' blocks), moved to the gathered dimension (merged into it when
  tiled);
- psum_scatter: the psum, then this member's block (`stablehlo.dynamic_slice` at its index);
- all_to_all: every member's operand, then this member's block of the split axis from each,
  placed along the concatenated axis;
- ppermute: every member's operand, then the one from this member's source (a constant table
  indexed by the member's index), or zeros where nobody sends to it.

Both custom calls take the replica's `stablehlo.replica_id` (tensor<ui32>) as a second operand,
which names the handler's communicator. all_gather, psum_scatter, all_to_all and ppermute
move every member's operand to every process: n * P times the operand's bytes, where an
exchange of only the blocks each member needs would move one operand's worth.
"""
import numpy as np

from ...ir.abstract import ShapedArray
from ...primitives import PRIMITIVES
from ...primitives.collectives import axis_names
from ...primitives.core import STABLEHLO
from .lower_collectives import gathered, groups_attribute, reduced, scattered
from .lower_ffi import custom_call
from .lower_indexing import dynamic_slice
from .lower_structural import concatenate, reshape, slice_, transpose

PSUM, PMAX, PMIN = "kiln_mpi_psum", "kiln_mpi_pmax", "kiln_mpi_pmin"
ALL_GATHER, PROCESS_INDEX = "kiln_mpi_all_gather", "kiln_mpi_process_index"
TARGETS = (PSUM, PMAX, PMIN, ALL_GATHER, PROCESS_INDEX)
_REDUCTIONS = {"psum": PSUM, "pmax": PMAX, "pmin": PMIN}
CHUNKED = 4096   # elements per replica from which a reduction is split among the replicas


def _local(ctx, mesh_axes, processes, axis_name):
    """The number of this process's replicas; a located error for a layout kiln does not
    lower across processes."""
    name = ctx.eqn.prim.name
    if ctx.manual or mesh_axes is None or len(mesh_axes) != 1:
        raise ctx.error(f"the StableHLO backend lowers {name!r} across {processes} processes "
                        f"only in a pmap over PJRT devices (one axis of replicas); run this "
                        f"function with the llvm backend")
    ((axis, n),) = mesh_axes
    if tuple(axis_names(axis_name)) != (axis,):
        raise ctx.error(f"the StableHLO backend lowers {name!r} across {processes} processes "
                        f"only over the pmap axis {axis!r} alone, not {axis_name!r}; run this "
                        f"function with the llvm backend")
    return n


def _replica(ctx):
    return ctx.emit("stablehlo.replica_id : tensor<ui32>", ShapedArray((), np.dtype(np.uint32)))


def _cross(ctx, target, x, out_aval):
    """The custom call `target` of `x` and the replica's id: the part across processes."""
    return custom_call(ctx, target, [x, _replica(ctx)], [out_aval], side_effect=True)[0]


def member(ctx, n):
    """This replica's index on the axis (i32): its replica id plus n times the process's."""
    index = ctx.convert(_replica(ctx), np.int32)
    aval = index.aval
    process = custom_call(ctx, PROCESS_INDEX, [], [aval])[0]
    return ctx.binary("stablehlo.add", index,
                      ctx.binary("stablehlo.multiply", process, ctx.constant(n, np.int32)))


def _local_reduce(ctx, name, x, n):
    return reduced(ctx, name, x, groups_attribute([list(range(n))]))


def _reduced_across(ctx, name, x, n):
    """`x` reduced over every member: small values (or one replica per process) reduced
    among this process's replicas, then across processes by every replica; larger ones
    flattened and padded to n chunks, reduce-scattered among the replicas, each replica's
    chunk reduced across processes, and gathered back (each replica moves 1/n of the value)."""
    size = int(np.prod(x.aval.shape))
    if n == 1 or size < CHUNKED * n:
        return _cross(ctx, _REDUCTIONS[name], _local_reduce(ctx, name, x, n), x.aval)
    chunk = -(-size // n)
    flat = reshape(ctx, x, (size,))
    if chunk * n != size:
        padding = ctx.broadcast(ctx.constant(0, x.aval.dtype), (chunk * n - size,))
        flat = concatenate(ctx, [flat, padding], 0)
    groups = groups_attribute([list(range(n))])
    mine = scattered(ctx, name, flat, 0, groups, flat.aval.update(shape=(chunk,)))
    mine = _cross(ctx, _REDUCTIONS[name], mine, mine.aval)
    whole = gathered(ctx, mine, 0, groups, flat.aval)
    if chunk * n != size:
        whole = slice_(ctx, whole, [0], [size])
    return reshape(ctx, whole, x.aval.shape)


def reduction(name):
    def rule(ctx, args, *, axis_name, mesh_axes=None, processes=1):
        (x,) = args
        return [_reduced_across(ctx, name, x, _local(ctx, mesh_axes, processes, axis_name))]
    return rule


def _everyone(ctx, x, n, processes):
    """Every member's `x`, stacked in member order: shape (n * processes, *x.shape)."""
    shape = tuple(x.aval.shape)
    local = gathered(ctx, reshape(ctx, x, (1,) + shape), 0, groups_attribute([list(range(n))]),
                     x.aval.update(shape=(n,) + shape))
    every = _cross(ctx, ALL_GATHER, local, x.aval.update(shape=(processes, n) + shape))
    return reshape(ctx, every, (processes * n,) + shape)


def _moved(ctx, x, source, at):
    """x with its axis `source` moved to position `at`."""
    order = [d for d in range(x.aval.ndim) if d != source]
    order.insert(at, source)
    return x if order == list(range(x.aval.ndim)) else transpose(ctx, x, order)


def axis_index(ctx, args, *, axis_name, mesh_axes=None, processes=1):
    return [member(ctx, _local(ctx, mesh_axes, processes, axis_name))]


def all_gather(ctx, args, *, axis_name, all_gather_dimension, tiled, axis_size,
               mesh_axes=None, processes=1, to="varying"):
    (x,) = args
    n = _local(ctx, mesh_axes, processes, axis_name)
    every = _moved(ctx, _everyone(ctx, x, n, processes), 0, all_gather_dimension)
    return [reshape(ctx, every, ctx.out_avals[0].shape) if tiled else every]


def psum_scatter(ctx, args, *, axis_name, scatter_dimension, tiled, axis_size,
                 mesh_axes=None, processes=1):
    (x,) = args
    n = _local(ctx, mesh_axes, processes, axis_name)
    total = _reduced_across(ctx, "psum", x, n)
    block = x.aval.shape[scatter_dimension] // (n * processes)
    zero = ctx.constant(0, np.int32)
    starts = [zero] * x.aval.ndim
    starts[scatter_dimension] = ctx.binary("stablehlo.multiply", member(ctx, n),
                                           ctx.constant(block, np.int32))
    sizes = list(x.aval.shape)
    sizes[scatter_dimension] = block
    return [reshape(ctx, dynamic_slice(ctx, total, starts, sizes), ctx.out_avals[0].shape)]


def all_to_all(ctx, args, *, axis_name, split_axis, concat_axis, tiled, axis_size,
               mesh_axes=None, processes=1):
    (x,) = args
    n = _local(ctx, mesh_axes, processes, axis_name)
    every = _everyone(ctx, x, n, processes)   # (source, *x.shape)
    block = x.aval.shape[split_axis] // (n * processes)
    zero = ctx.constant(0, np.int32)
    starts = [zero] * every.aval.ndim
    starts[split_axis + 1] = ctx.binary("stablehlo.multiply", member(ctx, n),
                                        ctx.constant(block, np.int32))
    sizes = list(every.aval.shape)
    sizes[split_axis + 1] = block
    mine = dynamic_slice(ctx, every, starts, sizes)   # this member's block from each source
    if not tiled:   # the source axis replaces the split one, at concat_axis
        shape = [s for d, s in enumerate(mine.aval.shape) if d != split_axis + 1]
        return [_moved(ctx, reshape(ctx, mine, shape), 0, concat_axis)]
    # the source axis just before concat_axis, then merged into it
    return [reshape(ctx, _moved(ctx, mine, 0, concat_axis), ctx.out_avals[0].shape)]


def ppermute(ctx, args, *, axis_name, perm, mesh_axes=None, processes=1):
    (x,) = args
    n = _local(ctx, mesh_axes, processes, axis_name)
    size = n * processes
    sources = [-1] * size
    for s, d in perm:
        sources[d] = s
    if max(sources) < 0:   # nobody sends: every member receives zeros
        return [ctx.splat(0, x.aval)]
    every = _everyone(ctx, x, n, processes)
    table = ctx.emit(f"stablehlo.constant dense<{sources}> : tensor<{size}xi32>",
                     ShapedArray((size,), np.dtype(np.int32)))
    source = reshape(ctx, dynamic_slice(ctx, table, [member(ctx, n)], [1]), ())
    zero = ctx.constant(0, np.int32)
    row = dynamic_slice(ctx, every, [ctx.binary("stablehlo.maximum", source, zero)] +
                        [zero] * x.aval.ndim, (1,) + tuple(x.aval.shape))
    return [ctx.select(ctx.compare("GE", source, zero), reshape(ctx, row, x.aval.shape),
                       ctx.splat(0, x.aval))]


def _spanning(local, across):
    """The rule that lowers with `across` where the axis spans several processes, else with
    `local` (lower_collectives.py's)."""
    def rule(ctx, args, **params):
        return (across if params.get("processes", 1) != 1 else local)(ctx, args, **params)
    return rule


for _name, _rule in [*((name, reduction(name)) for name in _REDUCTIONS),
                     ("axis_index", axis_index), ("all_gather", all_gather),
                     ("psum_scatter", psum_scatter), ("all_to_all", all_to_all),
                     ("ppermute", ppermute)]:
    STABLEHLO[PRIMITIVES[_name]] = _spanning(STABLEHLO[PRIMITIVES[_name]], _rule)
