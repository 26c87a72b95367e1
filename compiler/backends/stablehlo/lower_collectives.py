"""StableHLO rules of the collectives (compiler/primitives/collectives.py), for a module
replicated over the devices of a pmap or shard_map (one replica per device; module.py's
`replicas`).

The replicas' layout comes from the collective's `mesh_axes` param ((name, size) pairs,
row-major; replicas.py): pmap and shard_map add it before lowering (`with_collective_params`),
and replica i of the module is the replica of flat index i. A collective over some of the
axes joins each replica with its `members` (the replicas that differ from it only along those
axes, in the order replicas.py gives them), which become the operation's `replica_groups`, in
that order, so gathers and scatters place the blocks as the reference backend's combine rules
do:

- psum, pmax, pmin: `stablehlo.all_reduce` with an add, maximum or minimum region;
- all_gather: `stablehlo.all_gather` along the gathered dimension (a new axis of size 1 first
  when not tiled);
- psum_scatter: `stablehlo.reduce_scatter` with an add region (the scattered axis of size 1
  removed after it when not tiled);
- all_to_all: `stablehlo.all_to_all` (not tiled: split and concatenated along the split axis,
  then that axis moved to `concat_axis`);
- ppermute: `stablehlo.collective_permute` with the permutation's pairs in each group (a
  replica that receives nothing gets zeros, as in the reference);
- axis_index: `stablehlo.replica_id`, divided by the axis's stride, modulo its size.

In a shard_map's body inside a partitioned module (lower_manual.py sets `ctx.manual`, and
constrains a psum's operand and sum in a partially manual body as JAX does) the
groups name partitions, the logical ids of the whole mesh, as JAX writes them: each
collective also has `channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>`, all
but all_to_all and collective_permute `use_global_device_ids`, and axis_index is
`stablehlo.partition_id` (ui32) divided and taken modulo in ui32, then converted.

A collective without `mesh_axes` (a module that is not replicated) is a located
BackendUnsupportedError. One over an axis spanning several processes is lowered by
lower_processes.py, which uses `reduced` and `gathered` for the part among this process's
replicas.
"""
import math

import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.collectives import axis_names
from ...primitives.core import STABLEHLO
from ...primitives.replicas import members, strides
from .lower_reductions import scalar
from .lower_structural import reshape, transpose
from .types import tensor_type

_REDUCE = {"psum": "stablehlo.add", "pmax": "stablehlo.maximum", "pmin": "stablehlo.minimum"}


def _layout(ctx, mesh_axes, processes):
    """The mesh axes of the module's replicas; an error where there are none to use."""
    name = ctx.eqn.prim.name
    if mesh_axes is None:
        raise ctx.error(f"the StableHLO backend lowers {name!r} only in a module replicated "
                        f"over devices: call the function through kiln.pmap(..., "
                        f"backend='pjrt') or kiln.shard_map over a mesh of PJRT devices")
    return tuple(mesh_axes)


def groups_of(mesh_axes, names):
    """The replica groups of a collective over `names` on `mesh_axes`: each replica's
    members, once."""
    groups, seen = [], set()
    for i in range(math.prod(size for _, size in mesh_axes)):
        group = members(mesh_axes, i, names)[0]
        if group[0] not in seen:
            seen.update(group)
            groups.append(group)
    return groups


def replica_groups(mesh_axes, names):
    """The `replica_groups` attribute of a collective over `names` on `mesh_axes`."""
    return groups_attribute(groups_of(mesh_axes, names))


def groups_attribute(groups):
    """The `replica_groups` attribute of `groups` (lists of replicas, of one length)."""
    return f"replica_groups = dense<{groups}> : tensor<{len(groups)}x{len(groups[0])}xi64>"


_CHANNEL = "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>"


def _attributes(ctx, *attrs, global_ids=True):
    """A collective's attributes, sorted by name as MLIR prints them; in a shard_map's body
    (`ctx.manual`) with JAX's channel handle and, for `global_ids`, `use_global_device_ids`
    (its groups then name partitions)."""
    attrs = list(attrs)
    if ctx.manual:
        attrs += [_CHANNEL] + (["use_global_device_ids"] if global_ids else [])
    return ", ".join(sorted(attrs))


def _adding(ctx, op, dtype):
    """A reduction region (two scalars of `dtype` -> `op` of them)."""
    return [([scalar(dtype)] * 2, lambda b: [ctx.binary(op, *b)])]


def reduced(ctx, name, x, groups):
    """`stablehlo.all_reduce` of `x` (psum, pmax or pmin: `name`) within each replica group of
    `groups` (a replica_groups attribute: `replica_groups`, `groups_attribute`)."""
    manual = ctx.manual if ctx.manual and ctx.manual.partial else None
    if manual is not None:
        x = manual.constrained(ctx, x)
    region = [([scalar(x.aval.dtype)] * 2, lambda b: [
        ctx.binary(_REDUCE[name], *b) if manual is None else
        manual.constrained(ctx, ctx.binary(_REDUCE[name], *b), "")])]
    return ctx.generic("stablehlo.all_reduce", [x], [x.aval], region,
                       _attributes(ctx, groups))[0]


def _reducing(name):
    def rule(ctx, args, *, axis_name, mesh_axes=None, processes=1):
        (x,) = args
        return [reduced(ctx, name, x, replica_groups(_layout(ctx, mesh_axes, processes),
                                                     axis_names(axis_name)))]
    return rule


def _axis_index(ctx, args, *, axis_name, mesh_axes=None, processes=1):
    axes = _layout(ctx, mesh_axes, processes)
    (name,) = axis_names(axis_name)
    index = scalar(np.int32)
    if ctx.manual:   # JAX's: the partition's id, in ui32, divided and taken modulo
        stride = ctx.constant(strides(axes)[name], np.uint32)
        size = ctx.constant(dict(axes)[name], np.uint32)
        partition = ctx.emit("stablehlo.partition_id : tensor<ui32>", scalar(np.uint32))
        step = ctx.binary("stablehlo.divide", partition, stride)
        return [ctx.convert(ctx.binary("stablehlo.remainder", step, size), np.int32)]
    replica = ctx.emit("stablehlo.replica_id : tensor<ui32>", scalar(np.uint32))
    replica = ctx.convert(replica, np.int32)
    step = ctx.binary("stablehlo.divide", replica,
                      ctx.constant(strides(axes)[name], np.int32), index)
    return [ctx.binary("stablehlo.remainder", step,
                       ctx.constant(dict(axes)[name], np.int32), index)]


def _with_unit_axis(ctx, x, at):
    shape = list(x.aval.shape)
    shape.insert(at, 1)
    return reshape(ctx, x, shape)


def gathered(ctx, x, dimension, groups, out_aval):
    """`stablehlo.all_gather` of `x` along `dimension` within each replica group of `groups`
    (as `reduced`'s), giving `out_aval`."""
    return ctx.generic("stablehlo.all_gather", [x], [out_aval], [],
                       _attributes(ctx, f"all_gather_dim = {dimension} : i64", groups))[0]


def _all_gather(ctx, args, *, axis_name, all_gather_dimension, tiled, axis_size,
                mesh_axes=None, processes=1, to="varying"):   # (`to`: the type only)
    (x,) = args
    groups = replica_groups(_layout(ctx, mesh_axes, processes), (axis_name,))
    if not tiled:
        x = _with_unit_axis(ctx, x, all_gather_dimension)
    return [gathered(ctx, x, all_gather_dimension, groups, ctx.out_avals[0])]


def _psum_scatter(ctx, args, *, axis_name, scatter_dimension, tiled, axis_size,
                  mesh_axes=None, processes=1):
    (x,) = args
    groups = replica_groups(_layout(ctx, mesh_axes, processes), (axis_name,))
    out = ctx.out_avals[0]
    shape = list(out.shape)
    if not tiled:
        shape.insert(scatter_dimension, 1)
    y = scattered(ctx, "psum", x, scatter_dimension, groups, out.update(shape=tuple(shape)))
    return [reshape(ctx, y, out.shape)]


def scattered(ctx, name, x, dimension, groups, out_aval):
    """`stablehlo.reduce_scatter` of `x` (psum, pmax or pmin: `name`) along `dimension`
    within each replica group of `groups` (as `reduced`'s), giving `out_aval`."""
    return ctx.generic("stablehlo.reduce_scatter", [x], [out_aval],
                       _adding(ctx, _REDUCE[name], x.aval.dtype),
                       _attributes(ctx, groups, f"scatter_dimension = {dimension} : i64"))[0]


def _all_to_all(ctx, args, *, axis_name, split_axis, concat_axis, tiled, axis_size,
                mesh_axes=None, processes=1):
    (x,) = args
    groups = replica_groups(_layout(ctx, mesh_axes, processes), (axis_name,))
    out = ctx.out_avals[0]
    concat = concat_axis if tiled else split_axis
    aval = out if tiled else x.aval
    (y,) = ctx.generic("stablehlo.all_to_all", [x], [aval], [],
                       _attributes(ctx, f"concat_dimension = {concat} : i64", groups,
                                   f"split_count = {axis_size} : i64",
                                   f"split_dimension = {split_axis} : i64", global_ids=False))
    if tiled:
        return [y]
    order = [d for d in range(len(out.shape)) if d != split_axis]
    order.insert(concat_axis, split_axis)
    return [transpose(ctx, y, order)]


def _ppermute(ctx, args, *, axis_name, perm, mesh_axes=None, processes=1):
    (x,) = args
    groups = groups_of(_layout(ctx, mesh_axes, processes), (axis_name,))
    pairs = [[group[s], group[d]] for group in groups for s, d in perm]
    if not pairs:   # nobody sends: every replica receives zeros
        return [ctx.splat(0, x.aval)]
    return ctx.generic("stablehlo.collective_permute", [x], [x.aval], [],
                       _attributes(ctx, f"source_target_pairs = dense<{pairs}> : "
                                        f"tensor<{len(pairs)}x2xi64>", global_ids=False))


for _name in _REDUCE:
    STABLEHLO[PRIMITIVES[_name]] = _reducing(_name)
STABLEHLO[PRIMITIVES["axis_index"]] = _axis_index
STABLEHLO[PRIMITIVES["all_gather"]] = _all_gather
STABLEHLO[PRIMITIVES["psum_scatter"]] = _psum_scatter
STABLEHLO[PRIMITIVES["all_to_all"]] = _all_to_all
STABLEHLO[PRIMITIVES["ppermute"]] = _ppermute
