"""Putting values on devices and building arrays from blocks (JAX's names): `device_put`,
`device_get`, `reshard`, `make_array_from_callback`, `make_array_from_process_local_data`,
`make_array_from_single_device_arrays`, and JAX's older `device_put_sharded` and
`device_put_replicated` (gone from JAX 0.10.2; programs written for earlier versions call
them).

Every CPU device shares the host's memory, so placing an array onto devices or a sharding
keeps (or makes) one host buffer and records the sharding beside it (`array.placed_on`); the
checks are JAX's: a sharding whose split dimensions do not divide the shape is a ValueError.
A `PartitionSpec` alone means a NamedSharding over the current mesh (`kiln.set_mesh`).
With several processes (kiln.distributed), the `make_array_from_*` functions build a global
array from this process's blocks only (global_arrays.py), and `device_put` of a value (the same
in every process) onto a sharding over several processes' devices keeps this process's block.

A GPU device (devices.py) has its own memory: `device_put(x, gpu)` copies `x` to it (an Array
holding a device buffer, cuda/device.py), `device_put(x, cpu)` and `device_get` copy back;
`device_put(x)` without a device leaves an Array where it is and puts other values on the
default device in force (kiln.default_device; none set: the host). A PJRT device
(runtime/pjrt.py) is the same: its layer makes the device buffer, and copies an Array on
another device of its plug-in device to device. Shardings over several devices are CPU-only,
except NamedShardings over PJRT devices: one buffer per device (pjrt_spread.py).

A `Format` (kiln.experimental.layout) stands for its sharding once its layout is checked to be
row-major (layouts.py).

Inside `jit` (a traced value), `device_put` onto a NamedSharding retypes the value as
`reshard` does, and onto one device is the identity; its target is recorded so that `jit`
refuses arguments committed to other devices (sharding_propagation.committed).
"""
import numpy as np

from .tree_util import tree_map
from .layouts import unwrap_format
from .dispatch import is_traced
from .array import Array, to_array, placed_on, _wrap
from .compiler.backends.cuda.device import DeviceBuffer
from .devices import Device
from . import _default_device as default_device
from .sharding import Sharding, SingleDeviceSharding, NamedSharding, PartitionSpec, get_mesh
from .devices import process_count, process_index
from .global_arrays import (GlobalArray, process_split, local_shape, block_start, shifted,
                            own_block, from_local_block, block_count, split_pairs)


def _as_sharding(where):
    if where is None or isinstance(where, Sharding):
        return where
    if isinstance(where, Device):
        return SingleDeviceSharding(where)
    if isinstance(where, PartitionSpec):
        mesh = get_mesh()
        if mesh is None:
            raise ValueError(f"device_put onto {where!r} needs a mesh: use "
                             f"kiln.set_mesh(mesh) or pass NamedSharding(mesh, {where!r})")
        return NamedSharding(mesh, where)
    raise TypeError(f"device_put: expected a Device, a Sharding or a PartitionSpec, got "
                    f"{where!r}")


def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
    """`x` (a pytree) as kiln arrays on `device`: a Device, a Sharding, a PartitionSpec over
    the current mesh, or a pytree prefix of those (see the module docstring)."""
    def put(v, where):
        where = unwrap_format(where, np.ndim(v), "device_put")
        if is_traced(v):
            return _traced(v, _as_sharding(where))
        if not isinstance(v, Array):
            v = to_array(np.asarray(v) if isinstance(v, (list, tuple)) else v, "device_put")
            if where is None:
                where = default_device.current()
        where = _as_sharding(where)
        if where is None:
            return v
        if isinstance(where, NamedSharding):
            where.check_shape(v.shape)
            if type(v) is GlobalArray or not where.is_fully_addressable:
                return _across_processes(v, where)
        moved = _onto(v, where)
        if moved is not None:
            return moved
        out = Array(v._value, v.weak_type) if v.sharding != where else v
        return placed_on(out, where)
    if isinstance(device, (list, tuple)) and isinstance(x, (list, tuple)) \
            and len(device) == len(x):
        return type(x)(device_put(v, d) for v, d in zip(x, device))
    return tree_map(lambda v: put(v, device), x)


def _traced(v, where):
    """`device_put` of a traced value (inside `jit` or another transform): onto a
    NamedSharding, the value retyped with it (as `reshard`; over an all-Auto mesh, a sharding
    constraint, as `with_sharding_constraint`); onto one device, the value itself. The
    target is recorded so that `jit` refuses a call whose committed arguments are on other
    devices (sharding_propagation.committed)."""
    from .sharding_propagation import auto_mesh, constrain
    from .sharding_types import retyped
    if where is None:
        return v
    out = retyped(v, where) if isinstance(where, NamedSharding) and auto_mesh(where) is None \
        else v
    constrain(out.var, where)
    return out


def _across_processes(v, where):
    """`v` placed on a sharding over several processes' devices: a host value (the same in
    every process) keeps this process's block; a global array keeps its own when the layout
    across the processes is the same."""
    shape = tuple(v.shape)
    split, owners = process_split(where, shape)
    if type(v) is GlobalArray:
        if (split, owners) != (v.split, v.owners):
            raise NotImplementedError(
                f"device_put: moving a global array from {v.sharding} to {where} (another "
                f"layout across the processes) is not supported; build it with that sharding")
        return from_local_block(v.local, where, shape, v.weak_type)
    return from_local_block(np.asarray(v)[own_block(shape, split, owners)], where, shape,
                            v.weak_type)


def _onto(v, where):
    """`v` copied between the host and a device with its own memory (a GPU, a PJRT device:
    a device with a layer) when `where` (a sharding) says so, else None."""
    targets = where.device_set
    held = [d for d in targets if d.layer is not None]
    on_device = type(v._value) is DeviceBuffer
    if held:
        if isinstance(where, NamedSharding) and len(held) == len(targets) and \
                all(d.layer.backend == "pjrt" for d in held):   # one block per device
            from .pjrt_spread import put
            return put(v, where)
        if len(targets) != 1:
            raise ValueError(f"device_put: shardings over several devices are CPU-only, or "
                             f"NamedShardings over PJRT devices; {where} names a "
                             f"{held[0].platform} device")
        layer = held[0].layer
        if on_device and v._value.layer is layer:
            return v
        copied = layer.copy_from(v._value) if on_device and hasattr(layer, "copy_from") \
            else None
        if copied is not None:   # from another device of the same PJRT client
            return _wrap(DeviceBuffer(copied, layer), v.weak_type)
        host = np.asarray(v)
        return _wrap(DeviceBuffer(layer.to_device(np.ascontiguousarray(host).reshape(
            host.shape)), layer), v.weak_type)
    if on_device:
        return placed_on(_wrap(np.asarray(v), v.weak_type), where)
    return None


def device_get(x):
    """`x` (a pytree) with its arrays as NumPy arrays on the host."""
    return tree_map(lambda v: np.asarray(v) if isinstance(v, Array) else v, x)


def copy_to_host_async(x):
    """`x` (a pytree), after starting the host copy of each array leaf (its
    `copy_to_host_async` method); other leaves are left alone."""
    tree_map(lambda v: v.copy_to_host_async() if isinstance(v, Array) else None, x)
    return x


def reshard(xs, out_shardings):
    """`xs` placed as `out_shardings` says (on the CPU only the shardings change); inside a
    specialisation, their traced values typed with it (sharding_types.retyped)."""
    from .dispatch import is_traced
    from .tree_util import tree_leaves
    if any(is_traced(x) for x in tree_leaves(xs)):
        from .sharding_types import retyped
        return tree_map(lambda x: retyped(x, out_shardings) if is_traced(x) else x, xs)
    return device_put(xs, out_shardings)


def make_array_from_callback(shape, sharding, data_callback, dtype=None):
    """The array of `shape` whose block on each of this process's devices is
    `data_callback(index)` (with several processes, a global array: global_arrays.py)."""
    shape = tuple(shape)
    split, owners = process_split(sharding, shape)
    start = block_start(shape, split, owners)
    out = None
    for index in sharding.addressable_devices_indices_map(shape).values():
        block = np.asarray(data_callback(index))
        if out is None:
            out = np.empty(local_shape(shape, split, owners), dtype or block.dtype)
        out[shifted(index, start)] = block
    if out is None:
        out = np.empty(shape, dtype or np.float32)
    return from_local_block(to_array(out, "make_array_from_callback")._value, sharding, shape)


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None):
    """The array of `shape` assembled from one block per device of this process in
    `sharding` (in the order of its addressable_devices_indices_map)."""
    indices = list(sharding.addressable_devices_indices_map(tuple(shape)).values())
    if len(arrays) != len(indices):
        raise ValueError(f"make_array_from_single_device_arrays: {len(arrays)} arrays for a "
                         f"sharding over {len(indices)} devices of this process")
    blocks = iter(arrays)
    return make_array_from_callback(shape, sharding, lambda index: next(blocks), dtype)


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """The global array of which `local_data` is this process's block (the whole array in a
    single process). Without `global_shape`, the dimension split across the processes is
    `local_data`'s times the number of blocks it is split into across the processes (the
    process count, unless the mesh replicates it over some of them), as in JAX."""
    data = np.asarray(local_data)
    if global_shape is None:
        processes = process_count()
        split, owners = process_split(sharding, tuple(n * processes * sharding.num_devices
                                                      for n in data.shape))
        global_shape = list(data.shape)
        for d, o in split_pairs(split, owners):
            global_shape[d] *= block_count(o)
    global_shape = tuple(global_shape)
    split, owners = process_split(sharding, global_shape)
    expected = local_shape(global_shape, split, owners)
    if expected != data.shape:
        raise ValueError(f"make_array_from_process_local_data: global_shape {global_shape} "
                         f"laid out as {sharding} gives process {process_index()} a block of "
                         f"shape {expected}, but its local data has shape {data.shape}")
    return from_local_block(to_array(data, "make_array_from_process_local_data")._value,
                            sharding, global_shape)


def device_put_sharded(shards, devices):
    """JAX's older API (gone from JAX 0.10.2, kept for the programs that still call it): the
    pytrees `shards` stacked along a new leading axis, one per device of `devices`, sharded
    over them."""
    from .tree_util import tree_map
    devices = list(devices)
    if len(shards) != len(devices):
        raise ValueError(f"device_put_sharded: {len(shards)} shards for {len(devices)} devices; "
                         f"give one shard per device")
    sharding = NamedSharding(_line(devices), PartitionSpec("_device_put_axis"))
    return tree_map(lambda *xs: placed_on(to_array(np.stack([np.asarray(x) for x in xs]),
                                                   "device_put_sharded"), sharding), *shards)


def device_put_replicated(x, devices):
    """JAX's older API: `x` (a pytree) with a new leading axis of one copy per device of
    `devices`, each device holding its copy."""
    from .tree_util import tree_map
    devices = list(devices)
    if not devices:
        raise ValueError("device_put_replicated needs at least one device")
    sharding = NamedSharding(_line(devices), PartitionSpec("_device_put_axis"))
    return tree_map(lambda v: placed_on(to_array(
        np.broadcast_to(np.asarray(v), (len(devices),) + np.shape(v)).copy(),
        "device_put_replicated"), sharding), x)


def _line(devices):
    from .sharding import Mesh
    return Mesh(np.array(devices, dtype=object), ("_device_put_axis",))
