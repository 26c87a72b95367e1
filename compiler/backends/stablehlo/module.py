"""An SSA function as one StableHLO module in MLIR text (`lower_module`).

    lower_module(fn, name=None, replicas=1, partitions=1, shardings=None, aliases=None,
                 dots=None, mesh=None, donors=())
        -> StableHloModule(text, name, in_avals, out_avals)
    hlo_sharding(mesh_sizes, dims) -> the `mhlo.sharding` text of one value
    gspmd_attribute(mesh_sizes, dims) -> `mhlo.sharding = "..."`, its argument attribute
    sdy_mesh(axis_names, mesh_sizes) -> Shardy's `sdy.mesh @mesh = <...>` operation
    sdy_attribute(axis_names, dims) -> `sdy.sharding = #sdy.sharding<@mesh, [...]>`

`fn` is an SSA `Function` after the reference pipeline (simplify; fusion equations, if any,
are lowered through their regions). The module holds one `func.func public @main` whose
arguments are `fn`'s inputs in order and whose results are its outputs, with tensor types
(`tensor<2x3xf32>`); `in_avals`/`out_avals` are their abstract values (shape, dtype).
`replicas` is the module's `mhlo.num_replicas`: above 1 for a pmap's or shard_map's module,
run once per device, whose collectives carry their replicas' layout (lower_collectives.py).
`partitions` is its `mhlo.num_partitions`: above 1 for a sharded `jit`, whose `shardings`
(one attribute text per input, one per output) tell XLA how each argument and result is split
over the partitions; the avals stay the global ones. The attributes are GSPMD's
(`gspmd_attribute`, read by XLA's SPMD partitioner) or Shardy's (`sdy_attribute`, naming the
mesh that `mesh`, an `sdy_mesh` operation, declares at the module's top; read by the Shardy
partitioner, which the compile options must turn on).
`aliases` ({argument index: result index}, jit's donation on PJRT devices) marks an argument
`tf.aliasing_output`: XLA may write that result into the argument's buffer. `donors`
(argument indices) marks arguments `jax.buffer_donor = true`, as JAX does when the results'
shardings are XLA's to choose: XLA picks the result that takes each buffer after it has
placed them.
`dots` ({(dtype, lhs order, rhs order): target name}, from the plug-in that will compile
the module: pjrt/ffi_dot.py) makes float and complex matrix products, batched or not, custom calls
of those targets (lower_linalg.py); without it (`as_text`, `kiln compile`) they are `stablehlo.dot_general`.

`hlo_sharding(mesh_sizes, dims)` is the sharding text of a value laid out over a mesh of
`mesh_sizes` (one size per mesh axis, partition p at the mesh's row-major position p), where
`dims[d]` are the indices of the mesh axes array dimension d is split over (row-major over
them): `{replicated}`, or `{devices=[tiles...]partitions... last_tile_dim_replicate}` with the
partition holding each tile, the mesh axes no dimension uses as the last (replicated) one.
`sdy_mesh(axis_names, mesh_sizes)` declares the same mesh for Shardy as `@mesh` (its devices
in row-major order, partition p at position p), and `sdy_attribute(axis_names, dims)` is the
value's sharding over it, one `{"axis", ...}` per dimension (major axis first; `{}` for an
unsplit dimension), the form JAX 0.10.2 writes with `jax_use_shardy_partitioner` on. A
shard_map over another mesh of the same devices (in the same row-major order) names that mesh
`@mesh_0` (`@mesh_1`, ...), which the module declares after `@mesh`, as JAX does
(lower_manual.py; `Emitter.meshes`).
"""
import json
import math

import numpy as np
import re
from typing import NamedTuple

from ...ir.abstract import ShapedArray
from .emitter import Emitter, Value


class StableHloModule(NamedTuple):
    text: str            # the module, MLIR text (`module @name { func.func public @main ... }`)
    name: str            # the module's symbol name
    in_avals: tuple      # @main's arguments: ShapedArray (shape, dtype) each
    out_avals: tuple     # @main's results


def _symbol(name):
    text = re.sub(r"[^A-Za-z0-9_]", "_", name or "main")
    return text if re.match(r"[A-Za-z_]", text) else "m_" + text


def hlo_sharding(mesh_sizes, dims):
    """The `mhlo.sharding` text of a value split as `dims` says over a mesh of `mesh_sizes`
    (module docstring)."""
    used = [a for axes in dims for a in axes]
    if all(mesh_sizes[a] == 1 for a in used):
        return "{replicated}"
    rest = [a for a in range(len(mesh_sizes)) if a not in used]
    tiles = [math.prod(mesh_sizes[a] for a in axes) for axes in dims]
    replicated = math.prod(mesh_sizes[a] for a in rest)
    order = [a for axes in dims for a in axes] + rest
    # the partition numbers, indexed by mesh coordinates, brought into tile order
    partitions = np.arange(math.prod(mesh_sizes)).reshape(mesh_sizes).transpose(order)
    shape = tiles + ([replicated] if replicated > 1 else [])
    listed = ",".join(map(str, partitions.reshape(-1)))
    tail = " last_tile_dim_replicate" if replicated > 1 else ""
    return f"{{devices=[{','.join(map(str, shape))}]{listed}{tail}}}"


def gspmd_attribute(mesh_sizes, dims):
    """The `mhlo.sharding` argument attribute of a value (`hlo_sharding`)."""
    return f'mhlo.sharding = "{hlo_sharding(mesh_sizes, dims)}"'


def sdy_mesh(axis_names, mesh_sizes, name="mesh"):
    """Shardy's declaration of the mesh `@mesh` (module docstring), or of another mesh of the
    same devices named `name`."""
    axes = ", ".join(f"{_quoted(n)}={size}" for n, size in zip(axis_names, mesh_sizes))
    return f"sdy.mesh @{name} = <[{axes}]>"


def sdy_attribute(axis_names, dims):
    """The `sdy.sharding` argument attribute of a value split as `dims` says over `@mesh`
    (module docstring)."""
    return f"sdy.sharding = #sdy.sharding{sdy_sharding(axis_names, dims)}"


def sdy_sharding(axis_names, dims, mesh="mesh"):
    """Shardy's sharding `<@mesh, [{"x"}, {}]>` of a value split as `dims` says (over the
    module's mesh `@mesh`, or another one it declares)."""
    split = ", ".join("{" + ", ".join(_quoted(axis_names[a]) for a in axes) + "}"
                      for axes in dims)
    return f"<@{mesh}, [{split}]>"


class Partitioning(NamedTuple):
    """The mesh a module is partitioned over: its axes' names and sizes, its devices' ids in
    row-major order, and whether the module is Shardy's (else GSPMD's)."""
    axis_names: tuple
    sizes: tuple
    device_ids: tuple
    shardy: bool


def _quoted(name):
    return json.dumps(str(name))


def _attributed(text, sharding, alias=None, donor=False):
    attrs = (["jax.buffer_donor = true"] if donor else []) + \
        ([] if sharding is None else [sharding]) + \
        ([] if alias is None else [f"tf.aliasing_output = {alias} : i32"])
    return f"{text} {{{', '.join(attrs)}}}" if attrs else text


def lower_module(fn, name=None, replicas=1, partitions=1, shardings=None, aliases=None,
                 dots=None, mesh=None, donors=(), partitioning=None):
    """The StableHLO module of the SSA function `fn` (module docstring); `aliases` {argument
    index: result index}: donated arguments whose buffer a result of the same type may take
    (`tf.aliasing_output`, XLA's input-output aliasing); `mesh`: an operation (Shardy's
    `sdy_mesh`) put before `@main`; `partitioning`: the `Partitioning` of a module
    partitioned over a mesh, which its sharding constraints name (else they are dropped)."""
    ctx = Emitter()
    ctx.dots = dots or {}
    ctx.partitioning = partitioning
    for v in list(fn.invars) + list(fn.outvars):
        if v.aval.dtype.kind == "O":
            raise ctx.error(f"the StableHLO backend cannot pass reverse mode's tapes "
                            f"({v.aval.str_short()}) in or out of a function; differentiate "
                            f"inside the compiled function instead")
    args = [Value(f"%arg{i}", v.aval) for i, v in enumerate(fn.invars)]
    outs = ctx.lower_function(fn, args)
    symbol = _symbol(name or fn.name)
    ins, outs_sharded = shardings or ([None] * len(args), [None] * len(outs))
    aliases = aliases or {}
    params = ", ".join(_attributed(repr(a), s, aliases.get(i), i in donors)
                       for i, (a, s) in enumerate(zip(args, ins)))
    results = ", ".join(o.type for o in outs)
    declared = ", ".join(_attributed(o.type, s) for o, s in zip(outs, outs_sharded))
    lines = [f"module @{symbol} attributes {{mhlo.num_partitions = {partitions} : i32, "
             f"mhlo.num_replicas = {replicas} : i32}} {{"]
    if mesh is not None:   # (Shardy's) and the other meshes shard_maps in it run over
        lines.append(f"  {mesh}")
        lines += [f"  {sdy_mesh(names, sizes, name)}"
                  for (names, sizes), name in ctx.meshes.items()]
    lines.append(f"  func.func public @main({params}) -> ({declared}) {{")
    lines += ctx.lines
    if outs:
        lines.append(f"    return {', '.join(o.name for o in outs)} : {results}")
    else:
        lines.append("    return")
    lines += ["  }", "}"]
    as_avals = lambda vs: tuple(ShapedArray(v.aval.shape, v.aval.dtype) for v in vs)
    return StableHloModule("\n".join(lines) + "\n", symbol, as_avals(fn.invars),
                           as_avals(fn.outvars))
