"""`kiln.sharding`: meshes of devices and how an array is laid out over them (JAX's names).

- `Mesh(devices, axis_names, axis_types=None)`: an n-d array of devices with a name per axis;
  `kiln.make_mesh(axis_shapes, axis_names)` builds one from `kiln.devices()`.
- `PartitionSpec(*entries)` (`P`): per array dimension, the mesh axis (or tuple of axes, or
  None) it is split over.
- `NamedSharding(mesh, spec)`, `SingleDeviceSharding(device)`: what `Array.sharding` is; each
  answers `shard_shape`, `devices_indices_map`, `device_set`, `is_fully_replicated`, ...
- `set_mesh(mesh)`: the mesh `shard_map` and `device_put(x, P(...))` use when none is given;
  a context manager, or a global setting when not used in a `with`.
- `AbstractMesh`, `get_abstract_mesh()`, `use_abstract_mesh(m)`: a mesh's sizes, names and
  axis types without devices (the mesh of `kiln.typeof(x).sharding`, sharding_types.py), and
  `auto_axes`, `explicit_axes`, `reshard` (JAX's names here; defined in sharding_types.py and
  placement.py).

Every CPU device shares the host's memory, so a kiln Array keeps one host buffer whatever its
sharding: the sharding is metadata (set by `device_put`, pmap, shard_map and
`jit(out_shardings=...)`) that says which device holds which block, and each `Shard.data` is a
view of the buffer, not a copy. Arrays that were never placed are on device 0
(`SingleDeviceSharding`). With several processes, an array over every process's devices holds
this process's blocks only (global_arrays.py): `addressable_shards` are its own devices',
`global_shards` every device's, with `data` None for other processes' devices.
"""
import collections
import enum
import math
import threading

import numpy as np


class AxisType(enum.Enum):
    """How a mesh axis is used (JAX's names); kiln treats every axis alike."""
    Auto = "Auto"
    Explicit = "Explicit"
    Manual = "Manual"

    def __repr__(self):
        return self.value


class PartitionSpec:
    """Per array dimension: None (not split), a mesh axis name, or a tuple of names (split
    row-major over them). Dimensions past the last entry are not split. `unreduced` and
    `reduced` (sets of mesh axis names, JAX's keywords) are kept, compared and printed; an
    array placed unreduced over an axis keeps its (logical) value, and its shards off
    coordinate 0 along that axis hold zeros (`shards`)."""

    __slots__ = ("_entries", "unreduced", "reduced")

    def __init__(self, *entries, unreduced=frozenset(), reduced=frozenset()):
        for e in entries:
            names = e if isinstance(e, tuple) else (e,)
            if not all(n is None or isinstance(n, str) for n in names):
                raise TypeError(f"PartitionSpec entries are None, a mesh axis name or a tuple "
                                f"of names; got {e!r}")
        self._entries = tuple(entries)
        self.unreduced = _axis_set(unreduced, "unreduced")
        self.reduced = _axis_set(reduced, "reduced")
        split = {n for d in range(len(entries)) for n in self.names(d)}
        for what, axes in (("unreduced", self.unreduced), ("reduced", self.reduced)):
            if split & axes:
                raise ValueError(f"PartitionSpec: the {what} axes {sorted(axes)} overlap the "
                                 f"axes the dimensions are split over {sorted(split)}; an "
                                 f"axis is either split over or {what}")
        if self.unreduced & self.reduced:
            raise ValueError(f"PartitionSpec: the axes {sorted(self.unreduced & self.reduced)}"
                             f" are both unreduced and reduced")

    def __iter__(self):
        return iter(self._entries)

    def __len__(self):
        return len(self._entries)

    def __getitem__(self, i):
        return self._entries[i]

    def __eq__(self, other):
        return isinstance(other, PartitionSpec) and self._entries == other._entries and \
            self.unreduced == other.unreduced and self.reduced == other.reduced

    def __hash__(self):
        return hash((self._entries, self.unreduced, self.reduced))

    def __repr__(self):
        parts = [repr(e) for e in self._entries]
        if len(parts) == 1 and not (self.unreduced or self.reduced):
            parts[0] += ","
        for what, axes in (("unreduced", self.unreduced), ("reduced", self.reduced)):
            if axes:
                parts.append(f"{what}={{{', '.join(map(repr, sorted(axes)))}}}")
        return f"P({', '.join(parts)})"

    def padded(self, ndim):
        """This spec with None entries up to `ndim` dimensions."""
        return PartitionSpec(*(self._entries + (None,) * (ndim - len(self._entries))),
                             unreduced=self.unreduced, reduced=self.reduced)

    def names(self, dim):
        """The mesh axis names dimension `dim` is split over."""
        e = self._entries[dim] if dim < len(self._entries) else None
        return () if e is None else e if isinstance(e, tuple) else (e,)


P = PartitionSpec


def _axis_set(axes, what):
    axes = frozenset((axes,) if isinstance(axes, str) else axes)
    if not all(isinstance(n, str) for n in axes):
        raise TypeError(f"PartitionSpec {what}= takes a set of mesh axis names, got {axes!r}")
    return axes

_MESH = threading.local()     # .stack: meshes of `with mesh:` / `with set_mesh(mesh):` blocks
_GLOBAL_MESH = [None]         # set_mesh(mesh) outside a `with`


class Mesh:
    """Devices laid out in an n-d array with one name per axis (JAX's `jax.sharding.Mesh`);
    its axes are Auto unless `axis_types` says otherwise (make_mesh's are Explicit), as in
    JAX."""

    def __init__(self, devices, axis_names, axis_types=None):
        devices = np.asarray(devices, dtype=object)
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if devices.ndim != len(names):
            raise ValueError(f"Mesh: the devices array has {devices.ndim} dimensions but "
                             f"{len(names)} axis names were given ({names})")
        if len(set(names)) != len(names):
            raise ValueError(f"Mesh axis names must be unique, got {names}")
        self.devices = devices
        self.axis_names = names
        types = (axis_types,) if isinstance(axis_types, AxisType) else axis_types
        self.axis_types = tuple(types) if types is not None else (AxisType.Auto,) * len(names)

    @property
    def shape(self):
        return collections.OrderedDict(zip(self.axis_names, self.devices.shape))   # as JAX

    @property
    def axis_sizes(self):
        return tuple(self.devices.shape)

    @property
    def size(self):
        return int(self.devices.size)

    @property
    def empty(self):
        return self.size == 0

    @property
    def device_ids(self):
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def local_devices(self):
        from .devices import process_index
        return [d for d in self.devices.flat if d.process_index == process_index()]

    @property
    def abstract_mesh(self):
        """This mesh without its devices (JAX's `Mesh.abstract_mesh`)."""
        platform = self.devices.flat[0].platform if self.size else None
        return AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types,
                            platform=platform)

    @property
    def local_mesh(self):
        """The sub-mesh of this process's devices (the box of positions they fill), with the
        same axis names, as JAX's `Mesh.local_mesh`."""
        from .devices import process_index
        here = np.vectorize(lambda d: d.process_index == process_index(), otypes=[bool])(
            self.devices)
        where = np.argwhere(here)
        if not len(where):
            raise ValueError(f"{self} has no device of process {process_index()}")
        box = tuple(slice(lo, hi + 1) for lo, hi in zip(where.min(0), where.max(0)))
        if not here[box].all():
            raise ValueError(f"the devices of process {process_index()} in {self} do not fill "
                             f"a box of the mesh, so it has no local mesh")
        return Mesh(self.devices[box], self.axis_names, self.axis_types)

    def __eq__(self, other):
        return isinstance(other, Mesh) and self.axis_names == other.axis_names and \
            self.devices.shape == other.devices.shape and \
            all(a == b for a, b in zip(self.devices.flat, other.devices.flat))

    def __hash__(self):
        return hash((self.axis_names, self.devices.shape,
                     tuple(d.id for d in self.devices.flat)))

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()

    def __repr__(self):
        return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}, "
                f"axis_types=({', '.join(map(repr, self.axis_types))}"
                f"{',' if len(self.axis_types) == 1 else ''}))")

    def __str__(self):
        sizes = ", ".join(f"{n!r}: {s}" for n, s in zip(self.axis_names, self.axis_sizes))
        types = ", ".join(map(repr, self.axis_types)) + ("," if len(self.axis_types) == 1 else "")
        return f"Mesh({sizes}, axis_types=({types}))"


def _stack():
    if not hasattr(_MESH, "stack"):
        _MESH.stack = []
    return _MESH.stack


class AbstractMesh:
    """A mesh's axis sizes, names and types without devices (JAX's
    `jax.sharding.AbstractMesh`): what `get_abstract_mesh()` answers and the mesh of the
    shardings in `kiln.typeof(x).sharding`."""

    def __init__(self, axis_sizes, axis_names, axis_types=None, *, platform=None):
        self.axis_sizes = tuple(int(n) for n in axis_sizes)
        self.axis_names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if len(self.axis_sizes) != len(self.axis_names):
            raise ValueError(f"AbstractMesh: {len(self.axis_sizes)} axis sizes but "
                             f"{len(self.axis_names)} axis names")
        types = (axis_types,) if isinstance(axis_types, AxisType) else axis_types
        self.axis_types = tuple(types) if types is not None else \
            (AxisType.Auto,) * len(self.axis_names)
        if len(self.axis_types) != len(self.axis_names):
            raise ValueError(f"AbstractMesh: {len(self.axis_types)} axis types for "
                             f"{len(self.axis_names)} axes")
        self.platform = platform

    @property
    def shape(self):
        return collections.OrderedDict(zip(self.axis_names, self.axis_sizes))   # as JAX

    @property
    def size(self):
        return math.prod(self.axis_sizes)

    @property
    def empty(self):
        return not self.axis_names

    @property
    def abstract_mesh(self):
        return self

    def with_axis_types(self, new_type, axes=None):
        """This mesh with the axes `axes` (default: all) of type `new_type`."""
        axes = self.axis_names if axes is None else (axes,) if isinstance(axes, str) else axes
        for n in axes:
            if n not in self.axis_names:
                raise ValueError(f"{n!r} is not an axis of {self}")
        return AbstractMesh(self.axis_sizes, self.axis_names,
                            tuple(new_type if n in axes else t
                                  for n, t in zip(self.axis_names, self.axis_types)),
                            platform=self.platform)

    def _key(self):
        return self.axis_sizes, self.axis_names, self.axis_types

    def __eq__(self, other):
        return isinstance(other, AbstractMesh) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        if self.empty:
            return "AbstractMesh((), axis_types=())"
        sizes = ", ".join(f"{n!r}: {s}" for n, s in zip(self.axis_names, self.axis_sizes))
        types = ", ".join(map(repr, self.axis_types)) + ("," if len(self.axis_types) == 1 else "")
        where = "" if self.platform is None else \
            f", device_kind={self.platform}, num_cores=None, platform={self.platform}"
        return f"AbstractMesh({sizes}, axis_types=({types}){where})"


_ABSTRACT = threading.local()   # .stack: meshes of use_abstract_mesh / auto_axes / explicit_axes


def _abstract_stack():
    if not hasattr(_ABSTRACT, "stack"):
        _ABSTRACT.stack = []
    return _ABSTRACT.stack


def get_abstract_mesh():
    """The current mesh without its devices: that of the innermost `use_abstract_mesh`,
    `auto_axes` or `explicit_axes`, else the current mesh's, else the empty AbstractMesh."""
    stack = _abstract_stack()
    if stack:
        return stack[-1]
    mesh = get_mesh()
    return mesh.abstract_mesh if mesh is not None else AbstractMesh((), ())


class use_abstract_mesh:   # noqa: N801 - JAX's name; a function-like context manager
    """`with use_abstract_mesh(m):` makes the AbstractMesh `m` what `get_abstract_mesh()`
    answers inside the block. As in JAX, its total size must be the current mesh's."""

    def __init__(self, mesh):
        if not isinstance(mesh, AbstractMesh):
            raise TypeError(f"use_abstract_mesh expects a kiln.sharding.AbstractMesh, got "
                            f"{mesh!r}")
        current_mesh = get_abstract_mesh()
        if not current_mesh.empty and current_mesh.size != mesh.size:
            raise ValueError(f"use_abstract_mesh: {mesh} has {mesh.size} devices but the "
                             f"current mesh {current_mesh} has {current_mesh.size}; the total "
                             f"size cannot change")
        self.mesh = mesh

    def __enter__(self):
        _abstract_stack().append(self.mesh)
        return self.mesh

    def __exit__(self, *exc):
        _abstract_stack().pop()


def get_mesh():
    """The mesh of the innermost `with mesh:` / `with set_mesh(mesh):`, else the one
    `set_mesh` set, else None."""
    stack = _stack()
    return stack[-1] if stack else _GLOBAL_MESH[0]


class set_mesh:   # noqa: N801 - JAX's name; a function-like context manager
    """`set_mesh(mesh)`: make `mesh` the current mesh, for the whole program, or inside a
    `with set_mesh(mesh):` block only (restored at its end)."""

    def __init__(self, mesh):
        if mesh is not None and not isinstance(mesh, Mesh):
            raise TypeError(f"set_mesh expects a kiln.sharding.Mesh or None, got {mesh!r}")
        self.mesh = mesh
        self.previous = _GLOBAL_MESH[0]
        _GLOBAL_MESH[0] = mesh

    def __enter__(self):
        _GLOBAL_MESH[0] = self.previous
        _stack().append(self.mesh)
        return self.mesh

    def __exit__(self, *exc):
        _stack().pop()


# ----------------------------------------------------------------------- shardings

class Sharding:
    """How an array of some shape is split over devices (the base of every sharding)."""

    memory_kind = "device"

    @property
    def device_set(self):
        return set(self._devices())

    @property
    def addressable_devices(self):
        from .devices import process_index
        return {d for d in self._devices() if d.process_index == process_index()}

    @property
    def num_devices(self):
        return len(self._devices())

    @property
    def is_fully_addressable(self):
        return self.addressable_devices == self.device_set

    def addressable_devices_indices_map(self, global_shape):
        addressable = self.addressable_devices
        return {d: i for d, i in self.devices_indices_map(global_shape).items()
                if d in addressable}

    def shard_shape(self, global_shape):
        index = next(iter(self.devices_indices_map(global_shape).values()))
        return tuple(len(range(*s.indices(n))) for s, n in zip(index, global_shape))


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""

    def __init__(self, device, *, memory_kind=None):
        self._device = device

    def _devices(self):
        return [self._device]

    is_fully_replicated = True

    def devices_indices_map(self, global_shape):
        return {self._device: tuple(slice(None) for _ in global_shape)}

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and other._device == self._device

    def __hash__(self):
        return hash(self._device)

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind=device)"


class NamedSharding(Sharding):
    """An array split over `mesh` as `spec` says, replicated along the mesh axes it does not
    name."""

    def __init__(self, mesh, spec, *, memory_kind=None):
        if not isinstance(mesh, (Mesh, AbstractMesh)):
            raise TypeError(f"NamedSharding expects a kiln.sharding.Mesh or AbstractMesh, got "
                            f"{mesh!r}")
        spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)
        used = [n for k in range(len(spec)) for n in spec.names(k)]
        for n in used:
            if n not in mesh.axis_names:
                raise ValueError(f"NamedSharding: the spec {spec} names the axis {n!r}, which "
                                 f"the mesh does not have (its axes: {mesh.axis_names})")
        if len(set(used)) != len(used):
            raise ValueError(f"NamedSharding: the spec {spec} names a mesh axis twice")
        self.mesh = mesh
        self.spec = spec

    def _devices(self):
        if isinstance(self.mesh, AbstractMesh):
            raise ValueError(f"{self} is over an AbstractMesh, which has no devices; use a "
                             f"NamedSharding over a kiln.sharding.Mesh")
        return list(self.mesh.devices.flat)

    @property
    def is_fully_replicated(self):
        sizes = self.mesh.shape
        return all(sizes[n] == 1 for k in range(len(self.spec)) for n in self.spec.names(k))

    def check_shape(self, global_shape):
        """A ValueError (JAX's text) unless every split dimension divides evenly."""
        if len(self.spec) > len(global_shape):
            raise ValueError(f"Sharding {self} is only valid for values of rank at least "
                             f"{len(self.spec)}, but was applied to a value of rank "
                             f"{len(global_shape)}")
        sizes = self.mesh.shape
        for d, n in enumerate(global_shape):
            parts = math.prod(sizes[x] for x in self.spec.names(d))
            if n % parts:
                raise ValueError(
                    f"Sharding spec {tuple(self.spec)} implies that array axis {d} is "
                    f"partitioned {parts} times, but does not evenly divide the dimension size "
                    f"{n}. Got shape: {tuple(global_shape)} and sharding {self}")

    def devices_indices_map(self, global_shape):
        self.check_shape(global_shape)
        names, sizes = self.mesh.axis_names, self.mesh.shape
        out = {}
        for coords in np.ndindex(*self.mesh.devices.shape):
            at = dict(zip(names, coords))
            index = []
            for d, n in enumerate(global_shape):
                split = self.spec.names(d)
                if not split:
                    index.append(slice(None))
                    continue
                parts, k = 1, 0
                for x in split:
                    k, parts = k * sizes[x] + at[x], parts * sizes[x]
                width = n // parts
                index.append(slice(k * width, (k + 1) * width))
            out[self.mesh.devices[coords]] = tuple(index)
        return out

    def __eq__(self, other):
        return isinstance(other, NamedSharding) and other.mesh == self.mesh and \
            other.spec.padded(8) == self.spec.padded(8)

    def __hash__(self):
        return hash((self.mesh, self.spec.padded(8)))

    def __repr__(self):
        if isinstance(self.mesh, AbstractMesh):
            return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"
        return f"NamedSharding(mesh={self.mesh}, spec={self.spec!r}, memory_kind=device)"


class Shard:
    """One device's block of an array: `device`, `index` (slices into the global array),
    `replica_id` (its number among the devices holding the same block) and `data` (a view)."""

    __slots__ = ("device", "index", "replica_id", "data")

    def __init__(self, device, index, replica_id, data):
        self.device, self.index, self.replica_id, self.data = device, index, replica_id, data

    def __repr__(self):
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data})")


def shards(array, sharding, addressable=True):
    """The Shards of `array` under `sharding`: this process's devices' (views of its buffer),
    or with `addressable=False` every device's, with `data` None for other processes'
    devices (an array spanning processes: global_arrays.py)."""
    from .array import Array
    from .global_arrays import local_data, block_start, shifted, GlobalArray
    value = local_data(array)
    start = (block_start(array.shape, array.split, array.owners) if type(array) is GlobalArray
             else (0,) * len(array.shape))
    mine = sharding.addressable_devices
    seen = {}
    out = []
    for device, index in sharding.devices_indices_map(tuple(array.shape)).items():
        key = tuple((s.start, s.stop) for s in index)
        replica = seen.get(key, 0)
        seen[key] = replica + 1
        if device not in mine:
            if not addressable:
                out.append(Shard(device, index, replica, None))
            continue
        data = value[shifted(index, start)]
        if sharding.spec.unreduced and _unreduced_rest(sharding, device):
            data = np.zeros_like(data)
        out.append(Shard(device, index, replica, Array(data)))
    return out


def _unreduced_rest(sharding, device):
    """Whether `device` is off coordinate 0 along an axis `sharding` is unreduced over: its
    shard of an array placed so holds zeros (the block, whose sum over the axis is the
    value, sits at coordinate 0, as JAX's device_put lays it out)."""
    at = np.argwhere(sharding.mesh.devices == device)[0]
    return any(c for n, c in zip(sharding.mesh.axis_names, at) if n in sharding.spec.unreduced)


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None):
    """A Mesh of `axis_shapes` over `devices` (default `kiln.devices("cpu")`, in order: meshes
    run on the CPU)."""
    from .devices import devices as all_devices
    shape = tuple(int(s) for s in axis_shapes)
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if len(shape) != len(names):
        raise ValueError(f"make_mesh: {len(shape)} axis shapes but {len(names)} axis names")
    pool = list(devices) if devices is not None else all_devices("cpu")
    need = math.prod(shape)
    if need > len(pool):
        raise ValueError(f"make_mesh: the mesh shape {shape} needs {need} devices, but only "
                         f"{len(pool)} are available (raise the count with "
                         f"kiln.config.update('jax_num_cpu_devices', {need}))")
    if axis_types is None:   # (make_mesh's default, as in JAX; the Mesh constructor's: Auto)
        axis_types = (AxisType.Explicit,) * len(names)
    return Mesh(np.array(pool[:need], dtype=object).reshape(shape), names, axis_types)


_ELSEWHERE = {"auto_axes": "sharding_types", "explicit_axes": "sharding_types",
              "reshard": "placement"}


def __getattr__(name):
    """`kiln.sharding.auto_axes`, `explicit_axes`, `reshard` (JAX's names here), defined in
    modules that import this one."""
    if name in _ELSEWHERE:
        import importlib
        return getattr(importlib.import_module(f"{__package__}.{_ELSEWHERE[name]}"), name)
    raise AttributeError(f"module 'kiln.sharding' has no attribute {name!r}")


class _TypingFlag:
    """A flag of JAX's sharding-in-types mode (`kiln.auto_pcast`,
    `kiln.remove_size_one_mesh_axis_from_type`): `flag(value)` is a context manager setting it
    for a block, `flag.value` reads it. kiln's collectives do not type varying values, so the
    flags are recorded and change nothing (docs/pmap.md)."""

    def __init__(self, name, default):
        self.name = name
        self._values = [default]

    @property
    def value(self):
        return self._values[-1]

    def __call__(self, new_val=True):
        flag = self

        class _Block:
            def __enter__(self):
                flag._values.append(new_val)

            def __exit__(self, *exc):
                flag._values.pop()
        return _Block()

    def __repr__(self):
        return f"<kiln flag {self.name}={self.value!r}>"


auto_pcast = _TypingFlag("auto_pcast", False)
remove_size_one_mesh_axis_from_type = _TypingFlag("remove_size_one_mesh_axis_from_type", False)

