"""The output shardings XLA chose for a partitioned executable, read from its optimized program.

PJRT C API 0.81 has no function that returns an executable's output shardings. What it has is
`PJRT_Executable_OptimizedProgram`, the program after XLA's passes: on the CPU plug-in in
format "hlo_with_config", an `HloModuleProtoWithConfig` whose field 1 is the `HloModuleProto`.
After SPMD partitioning that module's field 12, `spmd_output_sharding`, is the `OpSharding` of
the results (a TUPLE of one per result), as XLA's partitioner left them; PJRT's own
`GetOutputShardings` reads the same field.

`output_shardings(table, loaded)` returns one `Tiling` per result, or None where the plug-in
gives no optimized program or a result's sharding is not one kiln reads (MAXIMAL, MANUAL, or
subgroups other than one replicated last dimension). A `Tiling` is the OpSharding's tile
assignment as an array of partition numbers: its shape is the tiles per dimension of the
value, then one more dimension (the partitions holding copies) when the last is replicated;
None for a replicated value. `mesh_dims(tiling, mesh_sizes)` turns it into the mesh axes each
dimension is split over (`dims`, as stablehlo/module.py's `hlo_sharding` takes them), or None
when no such layout gives that tiling. Partition p is the mesh's row-major position p.
"""
import ctypes as C

import numpy as np

from . import api

_OTHER, _REPLICATED, _TUPLE = 3, 0, 2   # OpSharding.Type


def _varint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _fields(data):
    """[(field number, value)] of a serialized protobuf message: ints for varints, bytes
    for length-delimited fields; fixed-width fields are skipped."""
    out, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, i = _varint(data, i)
        elif kind == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        elif kind in (1, 5):
            i += 8 if kind == 1 else 4
            continue
        else:
            raise ValueError(f"protobuf wire type {kind} in the optimized program")
        out.append((number, value))
    return out


def _ints(fields, number):
    """A repeated int64 field, packed or not."""
    out = []
    for n, v in fields:
        if n == number:
            if isinstance(v, bytes):
                i = 0
                while i < len(v):
                    x, i = _varint(v, i)
                    out.append(x)
            else:
                out.append(v)
    return out


def _tiling(message):
    """The tile assignment of one OpSharding (module docstring): None when replicated,
    False when kiln does not read it."""
    fields = _fields(message)
    kind = next((v for n, v in fields if n == 1), _REPLICATED)
    if kind == _REPLICATED:
        return None
    if kind != _OTHER or _ints(fields, 8):   # last_tile_dims: subgroups
        return False
    shape = _ints(fields, 3)
    devices = _ints(fields, 4)
    if devices:
        tiles = np.array(devices).reshape(shape)
    else:   # iota_reshape_dims (9), iota_transpose_perm (10)
        tiles = np.arange(int(np.prod(shape))).reshape(_ints(fields, 9)) \
            .transpose(_ints(fields, 10)).reshape(shape)
    if not any(n == 6 and v for n, v in fields):   # replicate_on_last_tile_dim
        tiles = tiles[..., None]   # no copies: a trailing dimension of one
    return None if tiles[..., 0].size == 1 else tiles


def optimized_module(table, loaded):
    """The HloModuleProto bytes of a loaded executable's optimized program, None where the
    plug-in does not give one in a format kiln reads."""
    if not table.has("Executable_OptimizedProgram"):
        return None
    inner = api.executable_of(table, loaded)
    try:
        program = api.args(api.Program, format=b"hlo_with_config", format_size=15)
        arguments = api.args(api.OptimizedProgram, executable=inner,
                             program=C.pointer(program))
        table.call("Executable_OptimizedProgram", arguments)
        code = C.create_string_buffer(program.code_size)
        program.code = C.addressof(code)
        table.call("Executable_OptimizedProgram", arguments)
        data, kind = code.raw[:program.code_size], program.format[:program.format_size]
    finally:
        table.call("Executable_Destroy", api.args(api.Executable, executable=inner))
    if kind == b"hlo_with_config":
        return next((v for n, v in _fields(data) if n == 1), None)
    return data if kind == b"hlo" else None


def output_shardings(table, loaded, count):
    """One tiling per result of a partitioned executable with `count` results (module
    docstring); None where the plug-in does not say (no optimized program, an error getting
    it, or one kiln cannot read), False for a result kiln does not read."""
    try:
        module = optimized_module(table, loaded)
        sharding = module and next((v for n, v in _fields(module) if n == 12), None)
        if sharding is None:
            return None
        fields = _fields(sharding)
        if next((v for n, v in fields if n == 1), _REPLICATED) == _TUPLE:
            parts = [v for n, v in fields if n == 5]
        else:
            parts = [sharding]
        return [_tiling(p) for p in parts] if len(parts) == count else None
    except (api.PjrtError, ValueError, IndexError):
        return None


def mesh_dims(tiling, mesh_sizes):
    """The mesh axes each dimension of a value is split over (major first) that give
    `tiling` over a mesh of `mesh_sizes`, or None when no layout does."""
    mesh_sizes = tuple(mesh_sizes)
    if tiling is None:
        return None
    rank = tiling.ndim - 1
    coordinates = np.unravel_index(tiling, mesh_sizes)
    dims = []
    for d in range(rank):
        # along dimension d (the others at 0), the mesh axes that change, major first
        line = [c[(0,) * d + (slice(None),) + (0,) * (rank - d)] for c in coordinates]
        changing = [a for a in range(len(mesh_sizes)) if len(set(line[a].tolist())) > 1]
        dims.append(tuple(sorted(changing, key=lambda a: -_period(line[a]))))
    used = [a for axes in dims for a in axes]
    if len(used) != len(set(used)):   # an axis along two dimensions: no mesh layout
        return None
    return dims if np.array_equal(layout(mesh_sizes, dims), tiling) else None


def _period(values):
    """How many steps a coordinate stays the same along a line: larger for a major axis."""
    first = values[0]
    return next((i for i, v in enumerate(values) if v != first), len(values))


def layout(mesh_sizes, dims):
    """The tiling (module docstring) of a value split as `dims` says over a mesh of
    `mesh_sizes`: the tiles in the value's dimensions, then the copies."""
    used = [a for axes in dims for a in axes]
    rest = [a for a in range(len(mesh_sizes)) if a not in used]
    partitions = np.arange(int(np.prod(mesh_sizes))).reshape(mesh_sizes) \
        .transpose(used + rest)
    tiles = [int(np.prod([mesh_sizes[a] for a in axes])) for axes in dims]
    return partitions.reshape(tiles + [-1])
