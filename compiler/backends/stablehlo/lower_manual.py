"""The StableHLO rule of `shard_map` (compiler/primitives/manual.py), in a module partitioned
over its mesh, as JAX 0.10.2 writes a shard_map under `jit`:

- Shardy (the module's `Partitioning.shardy`): one `sdy.manual_computation` whose operands
  are the arguments, with `in_shardings` and `out_shardings` over `@mesh` (one `{"x", ...}`
  per dimension; with only some axes manual each dimension is also left open, `{"x", ?}`,
  for the partitioner to split over the others), `manual_axes`, and a region that takes
  the blocks, runs the body and ends in `sdy.return`;
- GSPMD: each argument through `@Sharding` (its split over the mesh) and
  `@SPMDFullToShardShape` (manual: `{manual}`, or with only some axes manual
  `{devices=[1,...,M,R]... last_tile_dims={manual, replicated}}`), the body inline on the
  blocks, each result through `@Sharding` (manual) and `@SPMDShardToFullShape` (its split).
  JAX puts the body in a private function it calls; kiln writes it in place.

The body's collectives name the partitions: `replica_groups` over the logical device ids of
the whole mesh (row-major), with `channel_handle = #stablehlo.channel_handle<handle = 1,
type = 1>` and `use_global_device_ids` where JAX writes them, and `axis_index` is
`stablehlo.partition_id` divided by the axis's stride (lower_collectives.py reads
`ctx.manual`, a `Manual`). In a body manual over some of the axes, a psum's operand and its
region's sum are constrained as JAX constrains them (`Manual.constrained`).

A shard_map over another mesh than the module's, of the same devices in the same row-major
order (a 2 x 4 mesh inside a jit over a 4 x 2 one), is written over that mesh: under Shardy
its shardings name `@mesh_0` (declared after `@mesh`), under GSPMD its tilings and replica
groups are that mesh's, whose row-major position p is partition p too. Any other device
list is refused (the runtime raises JAX's error before: runtime/shard_map.py).
"""
import math

import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from ...primitives.replicas import with_collective_params
from .emitter import Value
from .module import hlo_sharding, sdy_sharding
from .types import tensor_type


def _check(ctx, mesh_axes, device_ids):
    """The name of the Shardy mesh a shard_map over the mesh `mesh_axes` of the devices
    `device_ids` (row-major) runs over: `mesh` for the module's own, `mesh_0`, ... for
    another mesh of the same devices in the same order (declared by lower_module)."""
    part = ctx.partitioning
    names, sizes = tuple(n for n, _ in mesh_axes), tuple(s for _, s in mesh_axes)
    if part is None or tuple(part.device_ids) != tuple(device_ids):
        where = "a module that is not partitioned" if part is None else \
            f"a module partitioned over the devices {list(part.device_ids)}"
        raise ctx.error(f"a shard_map over the mesh {dict(mesh_axes)} of the devices "
                        f"{list(device_ids)} lowers only in a module partitioned over those "
                        f"devices in that order, not in {where}: call it inside a jit over "
                        f"that mesh's devices")
    if (tuple(part.axis_names), tuple(part.sizes)) == (names, sizes):
        return "mesh"
    return ctx.meshes.setdefault((names, sizes), f"mesh_{len(ctx.meshes)}")


def _dims(names, axis_names):
    return [tuple(axis_names.index(a) for a in axes) for axes in names]


def _sdy(axis_names, names, partial, mesh):
    text = sdy_sharding(axis_names, _dims(names, axis_names), mesh)
    if not partial:
        return text
    # each dimension left open for the axes that are not manual: {"x", ?} and {?}
    return text.replace("}", ", ?}").replace("{, ?}", "{?}")


def _manual_sharding(sizes, manual_dims, ndim):
    """GSPMD's sharding of a block in a region manual over the mesh axes `manual_dims`."""
    if len(manual_dims) == len(sizes):
        return "{manual}"
    rest = [a for a in range(len(sizes)) if a not in manual_dims]
    m = math.prod(sizes[a] for a in manual_dims)
    r = math.prod(sizes[a] for a in rest)
    devices = np.arange(math.prod(sizes)).reshape(sizes).transpose(list(manual_dims) + rest)
    tiles = [1] * ndim + [m] + ([r] if r > 1 else [])
    tail = "manual, replicated" if r > 1 else "manual"
    return (f"{{devices=[{','.join(map(str, tiles))}]{','.join(map(str, devices.reshape(-1)))}"
            f" last_tile_dims={{{tail}}}}}")


class Manual:
    """What a shard_map's body lowers under (`ctx.manual`): the mesh's sizes, the indices of
    the manual axes, whether the module is Shardy's, the Shardy mesh's name."""

    def __init__(self, sizes, manual_dims, shardy, mesh):
        self.sizes, self.manual_dims, self.shardy, self.mesh = sizes, manual_dims, shardy, mesh
        self.partial = len(manual_dims) < len(sizes)

    def constrained(self, ctx, x, config=None):
        """`x` in a partially manual body with its sharding said again, as JAX writes it
        around a psum's operand and result: GSPMD's `@Sharding` (manual over the manual
        axes, replicated over the others), or Shardy's `sdy.sharding_constraint` of a scalar
        (`<@mesh, []>`; an operand as it is)."""
        if self.shardy:
            return x if x.aval.shape else ctx.emit(
                f"sdy.sharding_constraint {x} <@{self.mesh}, []> : {x.type}", x.aval)
        ndim = len(x.aval.shape)
        return custom(ctx, "Sharding", x, x.aval,
                      _manual_sharding(self.sizes, self.manual_dims, ndim),
                      _unspecified(ndim) if config is None else config)


def custom(ctx, target, x, aval, sharding, config):
    return ctx.emit(f'stablehlo.custom_call @{target}({x}) {{backend_config = "{config}", '
                    f'mhlo.sharding = "{sharding}"}} : ({x.type}) -> {tensor_type(aval)}', aval)


def _shard_map(ctx, args, *, body, mesh_axes, device_ids, manual, in_names, out_names):
    mesh = _check(ctx, mesh_axes, device_ids)
    part = ctx.partitioning
    axis_names, sizes = [n for n, _ in mesh_axes], tuple(s for _, s in mesh_axes)
    body = with_collective_params(body, mesh_axes=tuple(mesh_axes))
    partial = len(manual) < len(mesh_axes)
    blocks = [v.aval for v in body.invars]
    saved, ctx.manual = ctx.manual, Manual(sizes, [axis_names.index(a) for a in manual],
                                           part.shardy, mesh)
    try:
        if part.shardy:
            return _manual_computation(ctx, args, body, blocks, axis_names, manual, in_names,
                                       out_names, partial, mesh)
        return _full_to_shard(ctx, args, body, blocks, axis_names, sizes, manual, in_names,
                              out_names)
    finally:
        ctx.manual = saved


def _manual_computation(ctx, args, body, blocks, axis_names, manual, in_names, out_names,
                        partial, mesh):
    outs = ctx.out_avals
    first = ctx.fresh()
    head = f"{first} = " if len(outs) == 1 else f"{first}:{len(outs)} = "
    ins = ", ".join(_sdy(axis_names, n, partial, mesh) for n in in_names)
    results = ", ".join(_sdy(axis_names, n, partial, mesh) for n in out_names)
    axes = ", ".join(f'"{a}"' for a in manual)
    region = [Value(ctx.fresh(), b) for b in blocks]
    params = ", ".join(f"{v.name}: {v.type}" for v in region)
    ctx.line(f"{head}sdy.manual_computation({', '.join(a.name for a in args)}) "
             f"in_shardings=[{ins}] out_shardings=[{results}] manual_axes={{{axes}}} "
             f"({params}) {{")
    ctx.depth += 1
    got = ctx.lower_function(body, region)
    ctx.line(f"sdy.return {', '.join(v.name for v in got)} : "
             f"{', '.join(v.type for v in got)}")
    ctx.depth -= 1
    in_types = ", ".join(a.type for a in args)
    out_types = ", ".join(tensor_type(a) for a in outs)
    ctx.line(f"}} : ({in_types}) -> " + (out_types if len(outs) == 1 else f"({out_types})"))
    if len(outs) == 1:
        return [Value(first, outs[0])]
    return [Value(f"{first}#{i}", a) for i, a in enumerate(outs)]


def _full_to_shard(ctx, args, body, blocks, axis_names, sizes, manual, in_names, out_names):
    manual_dims = [axis_names.index(a) for a in manual]
    partial = len(manual) < len(sizes)
    region = []
    for x, block, names in zip(args, blocks, in_names):
        config = _unspecified(len(block.shape)) if partial else ""
        whole = custom(ctx, "Sharding", x, x.aval, hlo_sharding(sizes, _dims(names, axis_names)),
                        config)
        region.append(custom(ctx, "SPMDFullToShardShape", whole, block,
                              _manual_sharding(sizes, manual_dims, len(block.shape)), config))
    got = ctx.lower_function(body, region)
    outs = []
    for y, aval, names in zip(got, ctx.out_avals, out_names):
        config = _unspecified(len(aval.shape)) if partial else ""
        y = custom(ctx, "Sharding", y, y.aval,
                    _manual_sharding(sizes, manual_dims, len(aval.shape)), config)
        outs.append(custom(ctx, "SPMDShardToFullShape", y, aval,
                            hlo_sharding(sizes, _dims(names, axis_names)), config))
    return outs


def _unspecified(ndim):
    return f"unspecified_dims=[{','.join(map(str, range(ndim)))}]"


STABLEHLO[PRIMITIVES["shard_map"]] = _shard_map
