"""kiln Arrays spread over several PJRT devices: one device buffer per device.

Such an Array holds `DeviceBuffer(Spread, SpreadLayer)`. A `Spread` is one global array's
per-device buffers (client.Buffer, one per device of its sharding, in the order of
`sharding._devices()`: a mesh's devices row-major), its `sharding` (a NamedSharding over PJRT
devices), its global shape and dtype, and `squeezed`: the dimension each buffer leaves out, or
None. pmap's results are squeezed along their mapped axis (each replica's buffer is its own
result, without the axis, as the next pmap takes it); `device_put` and partitioned calls
(sharded jit, shard_map) give the blocks themselves (squeezed None).

- `np.asarray(x)` copies every device's block to the host into one array (Spread.to_host);
  `block_until_ready()` awaits every buffer.
- `x.sharding`, `x.devices()`; `x.addressable_shards` are Shards whose `data` is an Array on
  that device (a squeezed buffer gets its axis back through a compiled reshape on the device).
- `x[i]` of an array split along its first dimension into blocks of one row (a pmap result):
  device i's buffer as an Array on that device, without a copy (`SpreadLayer.getitem`). Other
  eager operations run as a jit of the operation, partitioned over the devices
  (`SpreadLayer.eager`, pjrt_eager.py): their results stay spread.
- `put(array, sharding)`: a host array (or any Array) onto a NamedSharding over PJRT devices,
  each device getting its block (device_put): resharded on the devices when the array is
  spread over the same mesh; over other devices, each block copied device to device from a
  device holding exactly that block; copied device to device when it is on one PJRT device
  and the sharding replicated; else from the host; `as_blocks(x)`: a pmap result holding its
  blocks (each buffer given its axis back on its device), as sharded jit takes it.
- `replica_buffers(x, axis, devices)`: pmap's fast way in: the per-device buffers of `x`
  when it is spread over `devices` in the layout the map takes (a result of a pmap, or
  blocks of one row each, squeezed on their devices), else None (the caller then takes its
  host value).
- `stacked(rows, mesh, axis_name, axis, weak)`: the Array pmap returns from its per-device
  result buffers.
"""
import atexit
import math

import numpy as np

from .array import Array, _wrap
from .compiler.backends.cuda.device import DeviceBuffer
from .sharding import NamedSharding, PartitionSpec, Shard


class Spread:
    """One global array's buffers on several PJRT devices (module docstring)."""
    __slots__ = ("buffers", "sharding", "shape", "dtype", "squeezed")

    def __init__(self, buffers, sharding, shape, dtype, squeezed=None):
        self.buffers = list(buffers)
        self.sharding = sharding
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.squeezed = squeezed

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def blocks(self):
        """(device, index into the global array, its buffer) for every device."""
        indices = self.sharding.devices_indices_map(self.shape)
        return [(d, indices[d], b) for d, b in zip(self.sharding._devices(), self.buffers)]

    def to_host(self):
        out = np.empty(self.shape, self.dtype)
        done = set()
        for _, index, buffer in self.blocks():
            key = tuple((s.start, s.stop) for s in index)
            if key not in done:   # a block replicated on several devices is copied once
                done.add(key)
                block = buffer.to_host()
                out[index] = block if self.squeezed is None else \
                    np.expand_dims(block, self.squeezed)
        return out

    def block_until_ready(self):
        for b in self.buffers:
            b.block_until_ready()
        return self


class SpreadLayer:
    """The layer of every Spread: what the runtime's device paths ask of it."""
    xp = np
    backend = "pjrt"   # jit runs calls with such arguments partitioned (pjrt_partitioned)
    platform = "pjrt"
    name = "several PJRT devices"

    @staticmethod
    def to_host(spread):
        return spread.to_host()

    @staticmethod
    def synchronize():
        """Nothing: each buffer carries its ready event (Spread.block_until_ready)."""

    @staticmethod
    def sharding_of(spread):
        return spread.sharding

    @staticmethod
    def eager(prim, values, params):
        """`prim` on values of which one at least is spread: run as a jit of the operation,
        partitioned over the spread operand's devices (the others replicated there), its
        results as XLA's partitioner leaves them (module docstring)."""
        from .pjrt_eager import run
        return run(prim, values, params)

    @staticmethod
    def getitem(spread, idx, weak):
        """`x[i]` as device i's buffer when the first dimension is split into blocks of one
        row over the devices (module docstring); None for any other index."""
        if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool) or not spread.shape:
            return None
        n = spread.shape[0]
        if not -n <= idx < n or not spread.sharding.spec.names(0) or \
                spread.sharding.shard_shape(spread.shape)[0] != 1:
            return None
        idx = int(idx) % n
        for device, index, buffer in spread.blocks():
            if index[0].start == idx:
                block = _wrap(DeviceBuffer(buffer, device.layer), weak)
                return block if spread.squeezed == 0 else _squeeze_front(block)
        return None

    @staticmethod
    def shards(spread, weak):
        """The Shards of a spread array, each `data` an Array on its device."""
        seen, out = {}, []
        for device, index, buffer in spread.blocks():
            key = tuple((s.start, s.stop) for s in index)
            replica = seen.get(key, 0)
            seen[key] = replica + 1
            data = _wrap(DeviceBuffer(buffer, device.layer), weak)
            if spread.squeezed is not None:
                data = _unsqueeze(data, spread.squeezed)
            out.append(Shard(device, index, replica, data))
        return out


LAYER = SpreadLayer()


def spread_array(buffers, sharding, shape, dtype, weak=False, squeezed=None):
    """An Array over `sharding`'s devices holding `buffers` (client.Buffers, in its order)."""
    return _wrap(DeviceBuffer(Spread(buffers, sharding, shape, dtype, squeezed), LAYER), weak)


def spread_of(x):
    """The Spread an Array holds, or None."""
    v = x._value if type(x) is Array else None
    return v.data if type(v) is DeviceBuffer and v.layer is LAYER else None


_RESHAPES = {}   # (axis, expand) -> a jitted reshape on PJRT devices
# emptied before the interpreter tears modules down, while the plug-in's client still works
atexit.register(_RESHAPES.clear)


def _reshaped(x, axis, expand):
    """`x` (an Array on one PJRT device) with a dimension of 1 inserted at (or removed from)
    `axis`, computed on its device."""
    key = (axis, expand)
    fn = _RESHAPES.get(key)
    if fn is None:
        from .jit import jit
        from . import numpy as jnp
        fn = _RESHAPES[key] = jit((lambda a: jnp.expand_dims(a, axis)) if expand else
                                  (lambda a: jnp.squeeze(a, axis)), backend="pjrt")
    return fn(x)


def _unsqueeze(x, axis):
    return _reshaped(x, axis, True)


def _squeeze_front(x):
    return _reshaped(x, 0, False)


def as_blocks(x):
    """`x` (a spread Array) holding its blocks themselves: a pmap result's buffers given
    their mapped axis back on their devices, any other spread Array as it is."""
    s = spread_of(x)
    if s.squeezed is None:
        return x
    blocks = [shard.data._value.data for shard in LAYER.shards(s, x.weak_type)]
    return spread_array(blocks, s.sharding, s.shape, s.dtype, x.weak_type)


def put(v, sharding):
    """`v` (an Array) on `sharding`, a NamedSharding over PJRT devices: the same array (its
    blocks) when it is already there; resharded on the devices when it is spread over the
    same mesh (a partitioned jit of the identity: XLA moves the blocks); over another mesh,
    its blocks copied device to device where each block of `sharding` is one of its own
    (`_moved`); copied device to device onto every device when the sharding is replicated and
    `v` is on one PJRT device; else each device's block copied from the host value."""
    s = spread_of(v)
    if s is not None and s.sharding == sharding:
        return as_blocks(v)
    sharding.check_shape(v.shape)
    if s is not None and s.sharding.mesh == sharding.mesh:
        return _resharded(sharding)(v)
    if s is not None and (moved := _moved(as_blocks(v), sharding)) is not None:
        return moved
    if sharding.is_fully_replicated and type(v._value) is DeviceBuffer:
        buffers = [d.layer.copy_from(v._value) for d in sharding._devices()]
        if all(b is not None for b in buffers):
            return spread_array(buffers, sharding, v.shape, v.dtype, v.weak_type)
    host = np.asarray(v)
    indices = sharding.devices_indices_map(host.shape)
    buffers = [d.layer.to_device(np.asarray(host[indices[d]], order="C"))
               for d in sharding._devices()]
    return spread_array(buffers, sharding, host.shape, host.dtype, v.weak_type)


def _moved(x, sharding):
    """`x` (a spread Array holding its blocks) on `sharding` over other devices, each block
    copied device to device from a device holding exactly that block; None when a block of
    `sharding` is none of `x`'s."""
    s = spread_of(x)
    held = {_extent(index, s.shape): (device, buffer) for device, index, buffer in s.blocks()}
    buffers = []
    indices = sharding.devices_indices_map(s.shape)
    for device in sharding._devices():
        source = held.get(_extent(indices[device], s.shape))
        if source is None:
            return None
        buffer = source[1] if source[0] == device else \
            device.layer.copy_from(DeviceBuffer(source[1], source[0].layer))
        if buffer is None:
            return None
        buffers.append(buffer)
    return spread_array(buffers, sharding, s.shape, s.dtype, x.weak_type)


def _extent(index, shape):
    return tuple(part.indices(n)[:2] for part, n in zip(index, shape))


_RESHARDS = {}   # target sharding -> the jit putting an array spread over its mesh there
atexit.register(_RESHARDS.clear)


def _resharded(sharding):
    fn = _RESHARDS.get(sharding)
    if fn is None:
        from .jit import jit
        fn = _RESHARDS[sharding] = jit(lambda a: a, out_shardings=sharding)
    return fn


def replica_buffers(x, axis, devices):
    """What replica i of a pmap over `devices` (`axis`: the mapped axis) takes of `x`, per
    device: DeviceBuffers, when `x` is spread over exactly those devices in that layout;
    else None."""
    s = spread_of(x)
    if s is None or list(s.sharding._devices()) != list(devices):
        return None
    ok = axis is not None and s.squeezed == axis and \
        s.sharding.spec.names(axis) and len(devices) == s.shape[axis]
    if axis is not None and _rows(s, axis):   # device i holds row i: squeezed there
        return [_reshaped(_wrap(DeviceBuffer(b, d.layer)), axis, False)._value
                for b, d in zip(s.buffers, devices)]
    if not ok:
        return None
    return [DeviceBuffer(b, d.layer) for b, d in zip(s.buffers, devices)]


def _rows(s, axis):
    """Whether Spread `s` holds blocks (not squeezed) in which device i of its sharding holds
    exactly row i along `axis` and the whole of every other dimension."""
    if s.squeezed is not None or not 0 <= axis < len(s.shape):
        return False
    for i, (_, index, _) in enumerate(s.blocks()):
        for d, (part, n) in enumerate(zip(index, s.shape)):
            if part.indices(n)[:2] != ((i, i + 1) if d == axis else (0, n)):
                return False
    return True


def stacked(rows, mesh, axis_name, axis, weak):
    """pmap's result from each replica's DeviceBuffer (`rows`, one per device of `mesh`, a
    one-axis mesh named `axis_name`): stacked along `axis` of the result, which stays spread
    over the devices."""
    first = rows[0]
    ndim = first.ndim + 1
    if not -ndim <= axis < ndim:
        raise ValueError(f"pmap out_axes {axis} is out of bounds for an output of rank {ndim}")
    axis %= ndim
    shape = list(first.shape)
    shape.insert(axis, len(rows))
    spec = [None] * ndim
    spec[axis] = axis_name
    return spread_array([r.data for r in rows], NamedSharding(mesh, PartitionSpec(*spec)),
                        shape, first.dtype, weak, squeezed=axis)
