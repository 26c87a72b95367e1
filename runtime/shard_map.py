"""`kiln.shard_map`: JAX's SPMD map over the devices of a mesh, one replica per device.

`shard_map(f, mesh=..., in_specs=..., out_specs=...)`: each argument is split into blocks
along the array dimensions its `PartitionSpec` names mesh axes for (`in_specs` omitted: the
spec of the argument's type, sharding_types.py: what it was placed with, over the Explicit
axes, else replicated, as JAX infers them) (a dimension named by
several axes is split row-major over them), replica (c1, ..., ck) of a k-axis mesh gets the
block at its coordinates, `f` runs on the blocks with every mesh axis bound for collectives
(`lax.psum(x, "x")` sums over the replicas that differ only along "x"), and the results are
joined the same way by `out_specs` (an axis an output spec does not name takes the value of the
replicas at coordinate 0 along it: the result must be the same along it, as JAX checks, and
with `check_vma=True` kiln checks it too, from the axes each result varies over: vma.py).

Over a mesh whose axes are all Explicit, with every axis manual, an explicit `in_specs` entry
must be the spec of its argument's type (JAX's ValueError, `_check_in_spec`).

`unreduced` / `reduced` axes in a spec: an argument unreduced over axes holds its value at
coordinate 0 along them and zeros elsewhere, typed `{U:...}` in the body (reduced: whole,
typed `{R:...}`; vma.mark_partial), and a result unreduced over axes is the sum of the
devices' values there, placed (typed) unreduced. Python's `print` at the top level of a body
over a whole kiln Mesh prints once, each value gathered from every device (`print_site`,
runtime/debug.py).

`axis_names` (a subset of the mesh's axes) makes only those manual: the specs may name only
them, "every mesh axis" below means every manual one, and the values are whole along the
other axes (replicated; an argument's split over them stays in its block's type, and a
result is placed with its spec over the manual axes plus its type's split over the others).

Layouts. An argument in *mesh-major* layout has one leading axis per mesh axis its spec uses
(in mesh order), then its block: `to_mesh_major` / `from_mesh_major` move between that and
the global array, the same code over NumPy arrays (a call) or SSA values (inside a
specialisation, through `emit`).

- A call (outside any specialisation) stages `f` once per signature for one replica, with the
  mesh's axes bound, tells its collectives the mesh layout (`replicas.with_collective_params`),
  compiles it, and runs one replica per device on threads as `pmap` does
  (`_replica_threads.run_replicas`). Over a Mesh of PJRT devices a call is `kiln.jit` of the
  shard_map instead: one module partitioned over the mesh (below), its results spread over
  it with the NamedSharding of `out_specs`, as JAX's call gives them.
- Inside a specialisation (`jit(shard_map(f))`, `grad(...)`) it is emitted as nested `vmap`s,
  one per mesh axis, with the same names: the same values in one program. While a jit
  partitioned over the mesh (of PJRT devices) is staged (`regions_over`, pjrt_partitioned.py)
  it is one `shard_map` equation with the body as its region instead
  (compiler/primitives/manual.py), which the module writes as JAX's manual computation; so
  is one over another Mesh of the same devices in the same order, and one over other
  devices is JAX's "Received incompatible devices" ValueError. A jit staged under
  `finding_pjrt_meshes` that meets a shard_map over a Mesh of PJRT devices raises
  `OnPjrtMesh`: the call runs partitioned over that mesh (jit.py), as JAX's does.
"""
import contextlib
import math
import threading

import numpy as np

from .tree_util import tree_flatten, tree_unflatten
from . import staging, _replica_threads, vma
from .staging import leaf_value, wrap_outputs
from .dispatch import is_traced
from .wrappers import user_facing, name_like, describe
from .array import placed_on
from .sharding import AxisType, Mesh, NamedSharding, PartitionSpec, get_mesh
from .sharding_types import TypedAval, retyped, spec_of
from .compiler.ir.builder import Builder, current
from .compiler.primitives import emit as E
from .compiler.primitives.batching import to_front
from .compiler.primitives.replicas import ReplicaGroup, with_collective_params
from .compiler.primitives.collectives import holds_collectives
from .compiler.transforms.vmap import batch_emit
from .lax._parallel import axis_frame


class _Entry(staging.Entry):
    __slots__ = ("executable", "consts", "out_tree", "out_weak", "out_specs", "parallel",
                 "out_blocks", "out_placements")


def _mesh_axes(mesh):
    """((name, size), ...) of a Mesh (kiln.sharding.Mesh or anything with JAX's attributes)."""
    names = tuple(mesh.axis_names)
    shape = mesh.shape
    sizes = [shape[n] for n in names] if hasattr(shape, "keys") else list(
        np.shape(mesh.devices))
    return tuple((n, int(s)) for n, s in zip(names, sizes))


def _entries(spec, ndim, what, axes, mesh_axes):
    """The mesh axis names of each of `ndim` dimensions under PartitionSpec `spec`, which
    may name only the manual `axes` of the mesh (`mesh_axes`)."""
    spec = tuple(spec) if spec is not None else ()
    if len(spec) > ndim:
        raise ValueError(f"shard_map {what} {spec!r} has {len(spec)} entries, more than the "
                         f"{ndim} dimensions of the value it describes")
    known = {n for n, _ in axes}
    out, seen = [], set()
    for entry in spec + (None,) * (ndim - len(spec)):
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        for n in names:
            if n not in known and n in dict(mesh_axes):
                raise ValueError(f"shard_map {what} {spec!r} names the mesh axis {n!r}, which "
                                 f"is not manual here (axis_names: {sorted(known)}): "
                                 f"{what} may name only the manual axes; the others stay "
                                 f"as the arguments are placed over them")
            if n not in known:
                raise ValueError(f"shard_map {what} {spec!r} names the axis {n!r}, which the "
                                 f"mesh does not have (its axes: "
                                 f"{sorted(dict(mesh_axes))})")
            if n in seen:
                raise ValueError(f"shard_map {what} {spec!r} names the mesh axis {n!r} twice")
            seen.add(n)
        out.append(names)
    return out


def _block_shape(shape, entries, sizes, where, fun):
    block = []
    for d, (n, names) in enumerate(zip(shape, entries)):
        parts = math.prod(sizes[x] for x in names)
        if n % parts:
            raise ValueError(
                f"shard_map applied to {describe(fun)} was given an argument with axis sizes "
                f"not evenly divisible by the corresponding mesh axis sizes: {where} has shape "
                f"{tuple(shape)}, and dimension {d} (size {n}) is split over the mesh axes "
                f"{names} of total size {parts}. Pad the argument or choose another spec.")
        block.append(n // parts)
    return tuple(block)


# ------------------------------------------------------------ layouts (NumPy or SSA)

class _NumPyOps:
    reshape = staticmethod(np.reshape)
    transpose = staticmethod(np.transpose)

    @staticmethod
    def first(x, axis):
        return np.take(x, 0, axis=axis)


class _EmitOps:
    @staticmethod
    def reshape(x, shape):
        return E.reshape(x, new_sizes=tuple(shape), dimensions=None)

    @staticmethod
    def transpose(x, perm):
        return E.transpose(x, permutation=tuple(perm))

    @staticmethod
    def first(x, axis):
        shape = E.aval(x).shape
        start = [0] * len(shape)
        limit = list(shape)
        limit[axis] = 1
        part = E.slice(x, start_indices=tuple(start), limit_indices=tuple(limit), strides=None)
        return E.reshape(part, new_sizes=shape[:axis] + shape[axis + 1:], dimensions=None)


def _used(entries, axes):
    """The mesh axes `entries` names, in mesh order."""
    named = {n for names in entries for n in names}
    return [n for n, _ in axes if n in named]


def to_mesh_major(ops, x, shape, entries, axes):
    """Global `x` -> [used mesh axes in mesh order..., block]."""
    sizes = dict(axes)
    split, where, position = [], {}, 0
    for n, names in zip(shape, entries):
        for name in names:
            where[name] = position
            split.append(sizes[name])
            position += 1
        split.append(n // math.prod(sizes[m] for m in names) if names else n)
        position += 1
    x = ops.reshape(x, split)
    front = [where[n] for n in _used(entries, axes)]
    return ops.transpose(x, front + [i for i in range(len(split)) if i not in front])


def from_mesh_major(ops, x, block_ndim, entries, axes):
    """[every mesh axis in mesh order..., block] -> the global value `entries` describe
    (axes it does not name: coordinate 0)."""
    names_all = [n for n, _ in axes]
    named = {n for names in entries for n in names}
    for k in reversed(range(len(names_all))):
        if names_all[k] not in named:
            x = ops.first(x, k)
    kept = [n for n in names_all if n in named]
    perm, merged = [], []
    for d, names in enumerate(entries):
        perm += [kept.index(n) for n in names] + [len(kept) + d]
    x = ops.transpose(x, perm)
    shape = list(np.shape(x)) if ops is _NumPyOps else list(E.aval(x).shape)
    k = 0
    for names in entries:
        width = len(names) + 1
        merged.append(math.prod(shape[k:k + width]))
        k += width
    return ops.reshape(x, merged)


# ------------------------------------------------------------------------ shard_map

def shard_map(f=None, /, *, out_specs, in_specs=None, mesh=None, axis_names=frozenset(),
              check_vma=True):
    """`kiln.shard_map` (JAX's signature): run `f` once per device of `mesh` on the blocks
    `in_specs` cuts its arguments into, and join its results by `out_specs`. Without
    `in_specs`, each argument's comes from its type (`_inferred`)."""
    if f is None:
        return lambda g: shard_map(g, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                   axis_names=axis_names, check_vma=check_vma)
    if not callable(f):
        raise TypeError(f"shard_map requires a callable, got {f!r}")
    if mesh is None:
        return _on_current_mesh(f, out_specs, in_specs, axis_names, check_vma)
    mesh_axes = _mesh_axes(mesh)
    axes = _manual_axes(mesh_axes, axis_names)
    partial = len(axes) < len(mesh_axes)
    sizes = dict(axes)
    cache = staging.GuardedCache()
    as_jit = []   # [kiln.jit(mapped)], whose partitioned entries the calls over a Mesh of
    #               PJRT devices run (made by the first)

    def _split(args):
        """(leaves, treedef, their types, the mesh axes of each dimension, block types)."""
        leaves, treedef = tree_flatten(tuple(args))
        avals = list(staging.leaf_avals(leaves))
        specs = _specs(in_specs, tuple(args), len(leaves), "in_specs") if in_specs is not None \
            else [_inferred(a, i, mesh, mesh_axes, sizes) for i, a in enumerate(avals)]
        if in_specs is not None and not partial and all(
                t == AxisType.Explicit for t in getattr(mesh, "axis_types", None) or ()):
            for s, a in zip(specs, avals):
                _check_in_spec(s, a)
        entries = [_entries(s, len(a.shape), "in_specs", axes, mesh_axes)
                   for s, a in zip(specs, avals)]
        blocks = [_auto_part(a, a.update(shape=_block_shape(a.shape, e, sizes,
                                                            f"argument leaf {i}", f)), sizes)
                  for i, (a, e) in enumerate(zip(avals, entries))]
        return leaves, treedef, avals, entries, _Blocks(blocks, [_partial(s) for s in specs])

    @user_facing
    def mapped(*args):
        again = [n for n, _ in axes if n in vma.order()]
        if again:
            raise ValueError(f"shard_map over the mesh axes {again} inside the body of a "
                             f"shard_map that is already manual over them: a nested "
                             f"shard_map takes other axes (axis_names=...), and the body "
                             f"can use collectives over the outer ones directly")
        leaves, treedef, avals, entries, blocks = _split(args)
        if current() is not None or any(is_traced(x) for x in leaves):
            return _emit(leaves, treedef, avals, entries, blocks)
        if _on_pjrt_devices(mesh):   # one module partitioned over the mesh: jit(shard_map)
            from .pjrt_partitioned import partitioned_call
            if not as_jit:
                from .jit import jit
                as_jit.append(jit(mapped))
            return partitioned_call(as_jit[0], args, {}, mesh, fixed=True)
        key = (treedef, tuple(avals), tuple(map(tuple, entries)), tuple(blocks.partial))
        entry = cache.lookup(key, lambda stale: _compile(treedef, blocks, entries))
        values = [to_mesh_major(_NumPyOps, np.asarray(leaf_value(x)), a.shape, e, axes)
                  for x, a, e in zip(leaves, avals, entries)]
        outs = wrap_outputs(_run(entry, values, [_used(e, axes) for e in entries]),
                            entry.out_weak)
        if isinstance(mesh, Mesh):
            for o, where in zip(outs, entry.out_placements):
                placed_on(o, where)
        return tree_unflatten(entry.out_tree, outs)

    def _stage(treedef, blocks, entries, leaves=(), call=False):
        """Stage `f` for one replica; its arguments vary over the manual axes their specs
        name, and over those the values `leaves` (in an enclosing shard_map) vary over.
        `call`: for a call outside any specialisation (prints run at every call)."""
        outer = [vma.varying(x) for x in leaves] or [frozenset()] * len(entries)
        site = _PrintSite(mesh, mesh_axes, call) \
            if not partial and isinstance(mesh, Mesh) else None

        def rebuild(tracers):
            inside.arguments(tracers, [o | set(_used(e, axes)) for o, e in zip(outer, entries)])
            if site is not None:
                site.builder = current()
            tracers = [_partial_argument(t, u, r) for t, (u, r) in zip(tracers, blocks.partial)]
            return tree_unflatten(treedef, tracers), {}

        def body(*args):   # f, then the sum of the results out_specs make unreduced
            from .compiler.frontend.specialise import call_function
            outs = call_function(f, list(args), {})
            leaves, tree = tree_flatten(outs)
            specs = _specs(out_specs, outs, len(leaves), "out_specs")
            return tree_unflatten(tree, [_unreduced_result(x, s) for x, s in zip(leaves, specs)])
        frames = [axis_frame(n, s) for n, s in axes]
        for frame in frames:
            frame.__enter__()
        _PRINT_SITES.append(site)
        try:
            with vma.body([n for n, _ in axes]) as inside:
                return staging.stage(body if _any_unreduced(out_specs) else f, list(blocks),
                                     rebuild,
                                     staging.function_name(f, "shard_map"),
                                     api="mapped by kiln.shard_map")
        finally:
            _PRINT_SITES.pop()
            for frame in reversed(frames):
                frame.__exit__(None, None, None)

    def _out_spec_list(st):
        outs = tree_unflatten(st.out_tree, [0] * len(st.out_avals))
        return _specs(out_specs, outs, len(st.out_avals), "out_specs")

    def _out_entries(st, entries):
        specs = _out_spec_list(st)
        out = [_entries(s, len(a.shape), "out_specs", axes, mesh_axes)
               for s, a in zip(specs, st.out_avals)]
        if check_vma:
            varying = vma.of_outputs(st.fn, [_used(e, axes) for e in entries])
            for spec, e, v in zip(specs, out, varying):
                _check_replicated(f, spec, e, v, axes)
        return out

    def _out_placements(st, out_entries):
        """The NamedSharding of each result: split over the manual axes as `out_specs` says,
        and over the other axes as the body's result type is (partial `axis_names`)."""
        return [NamedSharding(mesh, _joined_spec(e, spec_of(a) if partial else None,
                                                 len(tuple(s or ())), s))
                for e, a, s in zip(out_entries, st.out_avals, _out_spec_list(st))]

    def _compile(treedef, blocks, entries):
        st = _stage(treedef, blocks, entries, call=True)
        entry = _Entry()
        ssa, entry.executable = staging.compile_ssa(
            st.fn, "llvm", fallback="reference", name=describe(f),
            finish=lambda ssa: with_collective_params(ssa, mesh_axes=axes))
        entry.consts = list(st.extra)
        entry.out_tree = st.out_tree
        entry.out_weak = [v.aval.weak_type for v in ssa.outvars]
        entry.out_specs = _out_entries(st, entries)
        entry.out_placements = _out_placements(st, entry.out_specs) \
            if isinstance(mesh, Mesh) else None
        entry.out_blocks = [len(a.shape) for a in st.out_avals]
        entry.guards = st.guards
        entry.parallel = True if holds_collectives(ssa) else None
        return entry

    def _run(entry, values, used):
        def args_of(i):
            at = _coordinates(i)
            return [v[tuple(at[n] for n in u)] for v, u in zip(values, used)] + entry.consts
        group = ReplicaGroup(axes)
        per_replica = _replica_threads.run_replicas(entry, group, args_of)
        outs = []
        for k, (entries, ndim) in enumerate(zip(entry.out_specs, entry.out_blocks)):
            stacked = np.stack([np.asarray(r[k]) for r in per_replica])
            stacked = stacked.reshape(tuple(s for _, s in axes) + stacked.shape[1:])
            joined = from_mesh_major(_NumPyOps, stacked, ndim, entries, axes)
            # (np.ascontiguousarray makes a 0-d result 1-d: keep its shape)
            outs.append(np.ascontiguousarray(joined).reshape(joined.shape))
        return outs

    def _coordinates(i):
        return {n: i // math.prod(s for _, s in axes[k + 1:]) % size
                for k, (n, size) in enumerate(axes)}

    def _emit(leaves, treedef, avals, entries, blocks):
        st = _stage(treedef, blocks, entries, leaves)
        out_entries = _out_entries(st, entries)
        if _as_region(mesh) and not any(u or r for u, r in blocks.partial):
            placed = E.bind("shard_map", *leaves, *st.extra, body=st.fn,
                            mesh_axes=mesh_axes,
                            device_ids=tuple(d.id for d in mesh.devices.flat),
                            manual=tuple(n for n, _ in axes),
                            in_names=tuple(tuple(e) for e in entries) + tuple(
                                ((),) * len(E.aval(x).shape) for x in st.extra),
                            out_names=tuple(tuple(e) for e in out_entries))
        else:
            _found_on_pjrt(mesh)
            placed = _nested_vmaps(st, leaves, avals, entries, out_entries)
        if isinstance(mesh, Mesh):   # typed as JAX's: jit places them so
            placed = [retyped(x, where) for x, where in
                      zip(placed, _out_placements(st, out_entries))]
        return tree_unflatten(st.out_tree, placed)

    def _nested_vmaps(st, leaves, avals, entries, out_entries):
        """The results of the body `st` run as one vmap per mesh axis over the arguments
        in mesh-major layout."""
        ins = [to_mesh_major(_EmitOps, x, a.shape, e, axes)
               for x, a, e in zip(leaves, avals, entries)]
        used = [_used(e, axes) for e in entries]
        fn, extra = st.fn, list(st.extra)
        for level in reversed(range(1, len(axes))):   # innermost mesh axis first
            fn, more = _batched(fn, level, used, len(leaves))
            extra += more
        name, size = axes[0]
        dims = [0 if k < len(leaves) and name in used[k] else None
                for k in range(len(fn.invars))]
        outs, odims = batch_emit(fn, ins + extra, dims, size, axis_name=name)
        outs = [to_front(o, d, size) for o, d in zip(outs, odims)]
        return [from_mesh_major(_EmitOps, o, len(a.shape), e, axes)
                for o, a, e in zip(outs, st.out_avals, out_entries)]

    def _batched(fn, level, used, n_leaves):
        """(`fn` (over mesh levels > `level`) batched over mesh axis `level`, the values of
        the function being specialised it reads: extra operands). Its leaves that use that
        axis take it as their leading axis."""
        name, size = axes[level]
        b = Builder(fn.name, parent=current())
        with b:
            inputs, dims = [], []
            for k, v in enumerate(fn.invars):
                mapped = k < n_leaves and name in used[k]
                shape = ((size,) if mapped else ()) + v.aval.shape
                inputs.append(b.new_input(v.aval.update(shape=shape), v.name))
                dims.append(0 if mapped else None)
            outs, odims = batch_emit(fn, inputs, dims, size, axis_name=name)
            new = b.build([to_front(o, d, size) for o, d in zip(outs, odims)])
        return new, [outer for outer, _ in b.captured.values()]

    def make_ir(*args):
        """The SSA of one replica (what every device runs on its blocks)."""
        _, treedef, _, entries, blocks = _split(args)
        return _stage(treedef, blocks, entries).fn

    name_like(mapped, f)
    mapped._kiln_make_ir = make_ir
    return mapped


_PRINT_SITES = []   # a _PrintSite (or None) per shard_map body being staged, innermost last
_REGIONS = threading.local()   # .meshes: the meshes of the partitioned jits being staged


@contextlib.contextmanager
def regions_over(mesh, source):
    """While a jit partitioned over `mesh` (of PJRT devices) is staged: a shard_map over it,
    or over another Mesh of the same devices in the same row-major order, is one `shard_map`
    equation with its body as a region (compiler/primitives/manual.py), which the module
    writes as JAX does; one over other devices is JAX's ValueError (`_as_region`).
    `source`: what gave the call its mesh, as that error names it before "with device ids"
    ("argument a of f with shape float32[8,4] and"). Yields the list of the meshes of the
    regions staged within, in order."""
    meshes = getattr(_REGIONS, "meshes", None)
    if meshes is None:
        meshes = _REGIONS.meshes = []
    seen = []
    meshes.append((mesh, source, seen))
    try:
        yield seen
    finally:
        meshes.pop()


def _as_region(mesh):
    """Whether a shard_map over `mesh` staged now is a region (`regions_over`)."""
    meshes = getattr(_REGIONS, "meshes", None)
    if not meshes:
        return False
    outer, source, seen = meshes[-1]
    if mesh == outer or isinstance(mesh, Mesh) and \
            list(mesh.devices.flat) == list(outer.devices.flat):
        seen.append(mesh)
        return True
    if not isinstance(mesh, Mesh):
        return False
    info = current().info
    at = "" if info is None else f" at {info!r} ({info.function})"
    raise ValueError(f"Received incompatible devices for jitted computation. Got {source} "
                     f"with {_device_ids(outer)} and shard_map inside jit with "
                     f"{_device_ids(mesh)}{at}. A jit runs on one list of devices: make the "
                     f"shard_map's mesh of the call's devices in the same order (a mesh of "
                     f"another shape is fine), or put the arguments on the shard_map's mesh "
                     f"(kiln.device_put)")


def _device_ids(mesh):
    """`device ids [0, 1] on platform CPU`, as JAX's error names a mesh's devices."""
    devices = list(mesh.devices.flat)
    return (f"device ids {[d.id for d in devices]} on platform "
            f"{devices[0].platform.upper()}")


def _on_pjrt_devices(mesh):
    """Whether `mesh` is made of PJRT devices; those of a mesh that is not a kiln Mesh are a
    TypeError."""
    from . import pjrt
    if not pjrt.on_pjrt(np.asarray(mesh.devices, dtype=object).flat):
        return False
    if not isinstance(mesh, Mesh):
        raise TypeError(f"shard_map over PJRT devices takes a kiln.sharding.Mesh, got {mesh!r}")
    return True


class OnPjrtMesh(Exception):
    """Raised out of the staging of a jit (`finding_pjrt_meshes`) that holds a shard_map
    over a kiln Mesh of PJRT devices: the call runs partitioned over `mesh` instead
    (pjrt_partitioned.py), as JAX runs such a jit on the shard_map's mesh."""

    def __init__(self, mesh):
        super().__init__(mesh)
        self.mesh = mesh


@contextlib.contextmanager
def finding_pjrt_meshes():
    """Stage the block with a shard_map over a Mesh of PJRT devices raising OnPjrtMesh."""
    old = getattr(_REGIONS, "finding", False)
    _REGIONS.finding = True
    try:
        yield
    finally:
        _REGIONS.finding = old


def _found_on_pjrt(mesh):
    """Raise OnPjrtMesh where `finding_pjrt_meshes` asks for it and `mesh` is a Mesh of PJRT
    devices."""
    if getattr(_REGIONS, "finding", False) and isinstance(mesh, Mesh):
        from . import pjrt
        if pjrt.on_pjrt(mesh.devices.flat):
            raise OnPjrtMesh(mesh)


class _PrintSite:
    """What Python's `print` of a traced value needs at the top level of the body of a
    shard_map manual over every axis of a kiln Mesh: the body's builder (set when staging
    starts), one header per device, in mesh order, as JAX prints a shard_map value
    (`On cpu:0 at mesh coordinates (i, j,) = (0, 1):`), and whether the body is staged for
    a call outside any specialisation, where JAX runs it, and so prints even static text,
    at every call (under `jit` a print of static text runs once, while tracing)."""
    __slots__ = ("builder", "names", "headers", "every_call")

    def __init__(self, mesh, mesh_axes, every_call):
        self.builder, self.every_call = None, every_call
        self.names = tuple(n for n, _ in mesh_axes)
        axes = f"({', '.join(map(str, self.names))},)"
        self.headers = tuple(f"On {d} at mesh coordinates {axes} = {idx}:"
                             for idx, d in np.ndenumerate(np.asarray(mesh.devices,
                                                                     dtype=object)))


def print_site():
    """The _PrintSite of the shard_map body whose top level is being staged now, else None
    (outside a body, in a body over part of the mesh, or inside a `cond`, loop or other
    region of it, where not every device may reach the print)."""
    site = _PRINT_SITES[-1] if _PRINT_SITES else None
    return site if site is not None and site.builder is current() else None


def _specs(specs, value, count, what):
    """One PartitionSpec (or None) per leaf of `value`, from the pytree prefix `specs`."""
    if specs is None or _is_spec(specs):
        return [specs] * count
    if isinstance(specs, (tuple, list)) and isinstance(value, (tuple, list)):
        if len(specs) != len(value):
            raise ValueError(f"shard_map {what} must be a tree prefix of the corresponding "
                             f"value: {len(specs)} specs for {len(value)} values")
        return [x for s, v in zip(specs, value)
                for x in _specs(s, v, len(tree_flatten(v)[0]), what)]
    if isinstance(specs, dict) and isinstance(value, dict) and set(specs) == set(value):
        return [x for k in sorted(value)
                for x in _specs(specs[k], value[k], len(tree_flatten(value[k])[0]), what)]
    raise ValueError(f"shard_map {what} {specs!r} is not a tree prefix of the value it "
                     f"describes (a PartitionSpec, None, or a tuple/list/dict of them)")


def _on_current_mesh(f, out_specs, in_specs, axis_names, check_vma):
    """`shard_map` without `mesh`: over the current mesh of each call (as JAX, which reads it
    when the function is traced, not when it is decorated), one shard_map per mesh."""
    made = {}

    def over_current():
        mesh = get_mesh()
        if mesh is None:
            raise ValueError("shard_map needs a mesh: pass mesh=kiln.make_mesh(...) (a "
                             "kiln.sharding.Mesh), or call it under kiln.set_mesh(mesh)")
        if mesh not in made:
            made[mesh] = shard_map(f, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                   axis_names=axis_names, check_vma=check_vma)
        return made[mesh]

    @user_facing
    def mapped(*args):
        return over_current()(*args)
    name_like(mapped, f)
    mapped._kiln_make_ir = lambda *args: over_current()._kiln_make_ir(*args)
    return mapped


def _check_in_spec(spec, aval):
    """Over a mesh whose axes are all Explicit and all manual, an argument's `in_specs` entry
    must be the spec of its type (JAX's ValueError): shard_map does not reshard."""
    if not _is_spec(spec):
        return
    ndim = len(aval.shape)
    typed = spec_of(aval)
    typed = PartitionSpec() if typed is None else typed

    def norm(p):
        return tuple(p.names(d) for d in range(ndim)), p.unreduced, p.reduced
    if norm(spec) != norm(typed):
        given, has = (PartitionSpec(*(tuple(p) + (None,) * (ndim - len(p))),
                                    unreduced=p.unreduced, reduced=p.reduced)
                      for p in (spec, typed))
        raise ValueError(f"in_specs passed to shard_map: {given} does not match the specs of "
                         f"the input: {has} for arg: {aval}. `in_specs` is an optional "
                         f"argument so you can omit specifying it and shard_map will infer "
                         f"the in_specs from the arguments. If you want to reshard your "
                         f"inputs, you can use `kiln.reshard` on the arguments and then pass "
                         f"those args to shard_map (or make the mesh's axes Auto).")


def _inferred(aval, i, mesh, axes, manual):
    """The in_spec of argument leaf `i` when `in_specs` is omitted (JAX's rule): the spec of
    its type over the `manual` axes (sharding_types.py: an argument placed split over
    Explicit axes of this mesh arrives as its blocks), else replicated. Needs a mesh whose
    axes are all Explicit."""
    types = getattr(mesh, "axis_types", None) or ()
    if any(t != AxisType.Explicit for t in types):
        raise TypeError(f"shard_map's in_specs can be omitted only over a mesh whose axes are "
                        f"all Explicit (kiln.make_mesh's default), as in JAX; this mesh's axis "
                        f"types are {tuple(types)}: pass in_specs=...")
    spec = spec_of(aval)
    if spec is None:
        return PartitionSpec()
    typed = aval.sharding.mesh
    if (typed.axis_names, typed.axis_sizes) != (tuple(n for n, _ in axes),
                                                tuple(s for _, s in axes)):
        raise ValueError(f"shard_map: argument leaf {i} ({aval}) is split over the mesh "
                         f"{typed}, not over shard_map's mesh {mesh}, so its in_spec cannot "
                         f"be inferred; reshard it onto this mesh (kiln.reshard) or pass "
                         f"in_specs=...")
    return _restricted(spec, manual, len(aval.shape))


def _check_replicated(f, spec, entries, varying, axes):
    """check_vma: an output whose `out_specs` entry leaves out a manual axis it varies over
    (vma.py) is a ValueError, as in JAX (its value there would be one replica's)."""
    named = {n for names in entries for n in names}
    missing = [n for n, _ in axes if n in varying and n not in named]
    if missing:
        shape = tuple(s for _, s in axes)
        raise ValueError(
            f"shard_map applied to {describe(f)} was given out_specs which require "
            f"replication which can't be statically inferred given the mesh:\n\nThe mesh "
            f"given has shape {shape} with corresponding axis names "
            f"{tuple(n for n, _ in axes)}.\n\nout_specs is {spec!r} which implies that the "
            f"corresponding output value is replicated across mesh axis "
            f"{', '.join(repr(n) for n in missing)}, but the value varies over "
            f"{', '.join(repr(n) for n in missing)}.\n\nCheck if these output values are "
            f"meant to be replicated over those mesh axes. If not, consider revising the "
            f"corresponding out_specs entries. If so, make them so (lax.psum / lax.pmean "
            f"over those axes) or pass check_vma=False to kiln.shard_map.")


def _manual_axes(mesh_axes, axis_names):
    """((name, size), ...) of the mesh axes `shard_map` makes manual: `axis_names` (empty:
    all of them), in mesh order."""
    known = dict(mesh_axes)
    unknown = set(axis_names) - set(known)
    if unknown:
        raise ValueError(f"shard_map axis_names {sorted(unknown)} are not axes of the mesh "
                         f"(its axes: {list(known)})")
    return tuple((n, s) for n, s in mesh_axes if not axis_names or n in axis_names)


def _restricted(spec, names, ndim):
    """PartitionSpec `spec` (over `ndim` dimensions) naming only the mesh axes in `names`;
    None when it then splits nothing."""
    entries = [tuple(n for n in spec.names(d) if n in names) for d in range(ndim)]
    if not any(entries):
        return None
    return PartitionSpec(*(None if not e else e[0] if len(e) == 1 else e for e in entries))


def _auto_part(aval, block, manual):
    """The type of a block of argument type `aval`: split over the mesh's other axes as
    `aval` is (JAX's `f32[4,8@y]` in a shard_map manual over x)."""
    spec = spec_of(aval)
    if spec is None:
        return block
    rest = _restricted(spec, set(aval.sharding.mesh.axis_names) - set(manual),
                       len(aval.shape))
    return block if rest is None else TypedAval(
        block.shape, block.dtype, block.weak_type, NamedSharding(aval.sharding.mesh, rest))


def _joined_spec(entries, typed, written, out_spec=None):
    """The PartitionSpec of a result: its manual axes per dimension (`entries`), then the
    axes its body's type `typed` (a PartitionSpec or None) splits that dimension over; as
    long as its `out_specs` entry was written (`written` entries), or up to its last split
    dimension (JAX's); unreduced and reduced over the axes its `out_spec` says."""
    out = []
    for d, names in enumerate(entries):
        names = tuple(names) + (typed.names(d) if typed is not None else ())
        out.append(None if not names else names[0] if len(names) == 1 else names)
    while len(out) > written and out[-1] is None:
        out.pop()
    unreduced, reduced = _partial(out_spec)
    return PartitionSpec(*out, unreduced=unreduced, reduced=reduced)


class _Blocks(list):
    """The block types of a shard_map's argument leaves, with each leaf's in_spec's
    (unreduced, reduced) axes (`partial`)."""

    def __init__(self, blocks, partial):
        super().__init__(blocks)
        self.partial = partial


def _partial(spec):
    """(unreduced axes, reduced axes) of a PartitionSpec (or None)."""
    return (frozenset(getattr(spec, "unreduced", ())), frozenset(getattr(spec, "reduced", ())))


def at_first(names):
    """Whether this replica is at coordinate 0 along each mesh axis in `names`."""
    from .lax._parallel import axis_index
    first = None
    for name in names:
        here = axis_index(name) == 0
        first = here if first is None else first & here
    return first


def _partial_argument(t, unreduced, reduced):
    """A body's argument `t` as its in_spec's unreduced / reduced axes make it: an array
    unreduced over axes holds its value at coordinate 0 along them and zeros at the others
    (the shards kiln places it with), so the sum over them is its value, as JAX's blocks
    of one; its type says so (vma.mark_partial)."""
    if unreduced:
        from .numpy import where
        varying = vma.varying(t)
        t = where(at_first(tuple(n for n in vma.order() if n in unreduced)), t, 0)
        vma.mark(t, varying)
    if unreduced or reduced:
        vma.mark_partial(t, unreduced, reduced)
    return t


def _any_unreduced(specs):
    """Whether the `out_specs` tree `specs` makes any result unreduced."""
    return any(_partial(s)[0] for s in tree_flatten(specs, is_leaf=_is_spec)[0])


def _unreduced_result(x, spec):
    """A body's result `x` for its out_spec `spec`: over the axes the spec makes it
    unreduced, kiln holds the logical value, the sum of every device's `x` (JAX's result
    is unreduced, its blocks those per-device values); `x` itself otherwise."""
    unreduced, _ = _partial(spec)
    if not unreduced or not is_traced(x):
        return x
    from .lax import psum
    return psum(x, tuple(n for n in vma.order() if n in unreduced))


def _is_spec(x):
    """Whether `x` is one PartitionSpec (kiln's, or one with its name), not a container of
    specs."""
    return isinstance(x, PartitionSpec) or type(x).__name__ in ("PartitionSpec", "P")




def smap(f=None, /, *, in_axes=0, out_axes, axis_name):
    """`kiln.smap` (JAX's): `shard_map` over the one axis `axis_name` of the current mesh
    (`kiln.set_mesh`), its specs written as `vmap`-style axes: argument axis `d` split over
    `axis_name` (None: replicated), each instance getting its block."""
    if f is None:
        return lambda g: smap(g, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    def spec(axis):
        if axis is None:
            return PartitionSpec()
        if not isinstance(axis, int) or axis < 0:
            raise ValueError(f"smap axes are non-negative ints or None here, got {axis!r}")
        return PartitionSpec(*([None] * axis + [axis_name]))

    def specs(axes):
        if isinstance(axes, (tuple, list)):
            return type(axes)(specs(a) for a in axes)
        if isinstance(axes, dict):
            return {k: specs(a) for k, a in axes.items()}
        return spec(axes)

    @user_facing
    def mapped(*args):
        mesh = get_mesh()
        if mesh is None:
            raise ValueError("smap maps over an axis of the current mesh: call it under "
                             "kiln.set_mesh(mesh)")
        return shard_map(f, mesh=mesh, in_specs=specs(in_axes), out_specs=specs(out_axes))(
            *args)
    name_like(mapped, f)
    return mapped
