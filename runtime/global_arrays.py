"""Arrays that span several processes (kiln.distributed under mpirun), JAX's global arrays.

With several processes, a sharding over every process's devices (a NamedSharding over a mesh
of `kiln.devices()`) describes a *global* array: its shape is the global shape, and each
process holds only the blocks of its own devices. `make_array_from_process_local_data`,
`make_array_from_callback` and `make_array_from_single_device_arrays` (placement.py) build one
from this process's data:

- when this process's devices hold the whole array (a replicated spec such as `P()`), it is an
  ordinary Array holding it, with that sharding: NumPy conversion and eager operations work,
  as in JAX;
- otherwise it is a `GlobalArray`: an Array of the global shape and dtype whose buffer is
  this process's block only. kiln supports the layouts that split one dimension into equal
  blocks over the processes, each process holding one block (whatever the split among its own
  devices; `process_split`): block p in process p (the data-parallel layout a mesh made by
  `kiln.make_mesh` over `kiln.devices()` gives), the blocks in another order (a mesh listing
  the processes' devices in another order), or each block in several processes (a mesh with
  a process-spanning axis the spec does not name, e.g. 4 processes as 2x2 with `P("x")`), or
  several dimensions split across the processes as a grid of blocks (4 processes as 2x2 with
  `P("x", "y")`: rows over "x", columns over "y"). Its
  `addressable_shards` are this process's devices' blocks (views of its buffer), its
  `global_shards` every device's, with `data` None for other processes' devices.

A GlobalArray has no value in any one process: NumPy conversion is JAX's RuntimeError, and so
is every eager operation on it (its buffer, `_value`, refuses every use, naming the ways that
work: `kiln.jit` with shardings (global_jit.py), `kiln.pmap` over its local shards,
`.addressable_shards`).
"""
import math

import numpy as np

from .array import Array, placed_on

_FETCH = ("Fetching value for `jax.Array` that spans non-addressable (non process local) "
          "devices is not possible. You can use `.addressable_shards` method of jax.Array to "
          "inspect the addressable (process local) shards")


def spanning_error(shape, dtype):
    """The RuntimeError for using the value of a global array of `shape` outside jit/pmap."""
    return RuntimeError(
        f"{_FETCH}. (kiln: this {np.dtype(dtype).name}{list(shape)} array spans several "
        f"processes and this process holds only its own block; compute with it in "
        f"kiln.jit(..., in_shardings=..., out_shardings=...) or kiln.pmap over its local "
        f"shards, or read .addressable_shards.)")


class SpansProcesses(TypeError):
    """A GlobalArray given where only a value held by one process fits (a transform's
    argument): kiln.jit routes its calls with such arguments to global_jit.py instead."""


def spanning_argument(where, array):
    return SpansProcesses(
        f"{where} is a global array of shape {array.shape} spanning several processes; "
        f"kiln computes with those only in kiln.jit (with or without in_shardings/"
        f"out_shardings) and kiln.pmap: call this transform inside a jitted function")


class _Spanning:
    """The `_value` of a GlobalArray: the global shape and dtype; anything else raises."""
    __slots__ = ("shape", "dtype", "ndim", "size", "itemsize", "nbytes")

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.ndim = shape, dtype, len(shape)
        self.size = math.prod(shape)
        self.itemsize = dtype.itemsize
        self.nbytes = self.size * self.itemsize

    def __getattr__(self, name):
        raise spanning_error(self.shape, self.dtype)

    def __array__(self, *args, **kwargs):
        raise spanning_error(self.shape, self.dtype)


class GlobalArray(Array):
    """An Array that spans several processes (see the module docstring): `local` is this
    process's block, along dimension `split` of the global shape; process p holds block
    `owners[p]` (split over two or more dimensions: `split` is a tuple of them, and `owners`
    one such tuple per dimension)."""

    __slots__ = ("local", "split", "owners")

    def __array__(self, dtype=None, copy=None):
        raise spanning_error(self.shape, self.dtype)

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"Array(shape={self.shape}, dtype={self.dtype.name}{weak})"

    __str__ = __repr__


def process_split(sharding, shape):
    """How `sharding` lays a `shape` array over the processes: (the dimension split across
    them, `owners`: the block of that dimension each process holds, by process index), or
    (None, None) when every process's devices hold the whole array; with several dimensions
    split across them, (a tuple of those dimensions, a tuple of their owners). Layouts that
    give a process pieces that are not one block, or blocks of another size than the others',
    or that split several dimensions otherwise than as a grid, are a NotImplementedError."""
    from .devices import process_index, process_count
    shape = tuple(shape)
    spans = {}
    for device, index in sharding.devices_indices_map(shape).items():
        spans.setdefault(device.process_index, []).append(
            [index[d].indices(n)[:2] for d, n in enumerate(shape)])
    if process_index() not in spans:
        raise ValueError(f"{sharding} has no device in process {process_index()}")
    boxes = {}
    for p, pieces in spans.items():
        box = [(min(b[d][0] for b in pieces), max(b[d][1] for b in pieces))
               for d in range(len(shape))]
        distinct = {tuple(b) for b in pieces}
        if sum(math.prod(hi - lo for lo, hi in b) for b in distinct) != \
                math.prod(hi - lo for lo, hi in box):
            raise _layout_error(sharding, shape, f"process {p}'s devices hold pieces that are "
                                                 f"not one block")
        boxes[p] = box
    partial = sorted({d for box in boxes.values() for d, n in enumerate(shape)
                      if box[d] != (0, n)})
    if not partial:
        return None, None
    count, me = process_count(), process_index()
    widths = {d: boxes[me][d][1] - boxes[me][d][0] for d in partial}
    if len(boxes) != count or any(box[d][1] - box[d][0] != widths[d]
                                  for box in boxes.values() for d in partial):
        raise _layout_error(sharding, shape, "its processes do not each hold one block of the "
                                             "same size")
    owners = [tuple(boxes[p][d][0] // widths[d] for p in range(count)) for d in partial]
    if len(partial) == 1:
        return partial[0], owners[0]
    held = {tuple(o[p] for o in owners) for p in range(count)}
    if len(held) != math.prod(block_count(o) for o in owners):
        raise _layout_error(sharding, shape, f"it splits dimensions {partial} across the "
                                             f"processes, but not as a grid of blocks")
    return tuple(partial), tuple(owners)


def _layout_error(sharding, shape, why):
    return NotImplementedError(
        f"{sharding} lays an array of shape {tuple(shape)} out over the processes in a way kiln "
        f"does not support yet ({why}): kiln's global arrays are split into equal blocks, "
        f"each process holding one block (in any order, or the same block as other processes "
        f"when the mesh replicates it over a process-spanning axis), along one dimension or "
        f"along several as a grid of blocks")


def block_count(owners):
    """How many blocks the processes' `owners` (of one split dimension: process_split) name
    (1: none)."""
    return 1 if owners is None else max(owners) + 1


def split_pairs(split, owners):
    """[(split dimension, its owners)] of a layout from process_split (one pair per
    dimension split across the processes; none when `split` is None)."""
    if split is None:
        return []
    return list(zip(split, owners)) if isinstance(split, tuple) else [(split, owners)]


def local_shape(shape, split, owners):
    """`shape` with each split dimension (process_split's layout) cut to one block."""
    out = list(shape)
    for d, o in split_pairs(split, owners):
        out[d] //= block_count(o)
    return tuple(out)


def from_local_block(local, sharding, shape, weak_type=False):
    """The array of global `shape` laid out as `sharding` says, of which this process holds
    the block `local` (an ndarray of that block's shape): a GlobalArray, or an ordinary
    Array when the block is the whole array."""
    split, owners = process_split(sharding, shape)
    expected = local_shape(shape, split, owners)
    if local.shape != expected:
        raise ValueError(f"this process's block of a {tuple(shape)} array laid out as "
                         f"{sharding} has shape {expected}, but the data given has shape "
                         f"{local.shape}")
    if split is None:
        out = Array(local, weak_type)
    else:
        out = object.__new__(GlobalArray)
        out._value = _Spanning(tuple(shape), local.dtype)
        out.weak_type = bool(weak_type)
        out.local, out.split, out.owners = local, split, owners
    return placed_on(out, sharding)


def block_start(shape, split, owners, process=None):
    """Where process `process`'s (default: this process's) block of a `shape` array laid
    out as (`split`, `owners`) (process_split; None: not split) starts along each
    dimension."""
    from .devices import process_index
    process = process_index() if process is None else process
    start = [0] * len(shape)
    for d, o in split_pairs(split, owners):
        start[d] = o[process] * (shape[d] // block_count(o))
    return tuple(start)


def own_block(shape, split, owners):
    """This process's block of a `shape` array laid out as (`split`, `owners`), as slices."""
    return tuple(slice(s, s + n) for s, n in zip(block_start(shape, split, owners),
                                                 local_shape(shape, split, owners)))


def shifted(index, start):
    """A device's `index` (slices into the global array) as slices into this process's block
    that starts at `start`."""
    return tuple(slice(s.start - o, s.stop - o) if s.start is not None else s
                 for s, o in zip(index, start))


def local_data(array):
    """This process's block of an Array: a GlobalArray's own block, else its whole value."""
    return array.local if type(array) is GlobalArray else np.asarray(array)


def local_leaves(leaves):
    """`leaves` with every GlobalArray replaced by an Array of this process's block (what
    `pmap` maps over: its local devices' shards), and {id(that Array): (the dimension the
    global array is split along across the processes, its sharding's devices here)}."""
    out, spans = [], {}
    for leaf in leaves:
        if type(leaf) is GlobalArray:
            if isinstance(leaf.split, tuple):
                raise ValueError(
                    f"pmap maps global arrays split along one dimension across the processes; "
                    f"this {leaf.shape} array is split along dimensions {list(leaf.split)}: "
                    f"use kiln.jit with in_shardings")
            if leaf.owners != tuple(range(len(leaf.owners))):
                raise ValueError(
                    f"pmap maps global arrays whose process p holds block p; this "
                    f"{leaf.shape} array's processes hold blocks {list(leaf.owners)} (its "
                    f"mesh orders or replicates the processes otherwise): use kiln.jit with "
                    f"in_shardings, or build it over kiln.make_mesh's device order")
            leaf_local = Array(leaf.local, leaf.weak_type)
            spans[id(leaf_local)] = (leaf.split, len(leaf.sharding.addressable_devices))
            leaf = leaf_local
        out.append(leaf)
    return out, spans


def check_mapped_along_split(leaves, axes, spans, what):
    """A ValueError unless each global array's local block (`spans`, from `local_leaves`) is
    mapped along the dimension it is split along across the processes."""
    for leaf, d in zip(leaves, axes):
        split, devices = spans.get(id(leaf), (None, None))
        if split is None:
            continue
        if d == split and leaf.shape[d] != devices:
            raise ValueError(
                f"{what} maps a global array whose block in this process has {leaf.shape[d]} "
                f"entries along axis {d} over this process's {devices} devices: pmap takes one "
                f"entry per device. Lay the global array out with one entry of that axis per "
                f"device (e.g. local data of shape ({devices}, {leaf.shape[d] // devices}, "
                f"...)), or use kiln.jit with in_shardings")
        if d != split:
            raise ValueError(
                f"{what} maps a global array of this process's shape {leaf.shape} along "
                f"{'no axis' if d is None else f'axis {d}'}, but it is split across the "
                f"processes along axis {split}: map it along axis {split} (each replica "
                f"takes its device's shard), or pass the whole value as an ordinary array")
