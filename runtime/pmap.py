"""`kiln.pmap`: JAX's SPMD map, one replica of the function per device.

The function is staged (`staging.stage`) for one replica (the argument types with the mapped
axes removed) with `axis_name` bound to the number of replicas, so its collectives
(`lax.psum(x, 'i')`, `all_gather`, `ppermute`, ...) check their names at the user's call and
stay in its SSA as equations. That SSA is compiled once per argument signature for the backend
(`backend=`, default the CPU's LLVM code, as `jit`) and cached in a `staging.GuardedCache`.
A call runs the compiled replica once per device, replica `i` on slice `i` of each mapped
argument, inside one `ReplicaGroup` (compiler/primitives/replicas.py) through which the
collectives exchange their operands; the results are stacked along `out_axes`, and each carries JAX's sharding of a pmap
result: a NamedSharding over a one-axis mesh of the replicas' devices, split along its mapped
axis. A function with
collectives runs its replicas all at once on native threads (`_replica_threads`: they wait for
each other). One without runs them on those threads when a replica takes more than 50 us
(measured on the first call, which runs them one after the other), else one after the other on
the calling thread: handing a few microseconds of work to another thread costs more than it
saves (`_replica_threads.run_replicas`). Calls of positional arrays like the latest one take
`pmap_fast`'s fast path: every replica from one native call into stacked outputs.

Inside a specialisation (`jit(pmap(f))`, `grad(pmap(f))`, a pmap in a pmap) the replicas are
not separate calls: pmap is then emitted like `vmap` with the same axis name, which computes
the same values (docs/pmap.md).

Several processes (kiln.distributed under mpirun): each process maps over its local devices and
the axis spans every process's (its size is the local size times the process count, replica i
of process p has index p*n + i); every collective exchanges among the local replicas first,
then makes one call of the MPI engine per process (replicas.py; compiled: lower_collectives.py).
A pmap inside jit/grad/vmap is a vmap over this process's replicas whose axis spans the
processes: psum/pmean/pmax/pmin, axis_index and all_gather over it reduce or gather the local
batch and then across the processes (compiler/primitives/processes.py); psum_scatter, ppermute
and all_to_all over it there are a CompileError saying to call the pmap directly.

A global array (several processes: global_arrays.py) is mapped as this process's block, each
local replica taking its device's shard, as JAX's pmap takes the local shards; it must be
mapped along the dimension it is split along across the processes.

`pmap(f).lower(*args).compile()` is the specialisation for those arguments, compiled: a
`PmapCompiled` called as the pmap (`PmapCall` checks the pytree, types and mapped axes), which
kiln.experimental.serialize_executable serializes on PJRT devices (`run_replicated` runs a
loaded one).

The mapped size may not exceed the devices pmap runs on (`devices=`, else
`kiln.local_devices()`): a ValueError names both. `static_broadcasted_argnums` are passed to
every replica by value and are part of the cache key, as `jit`'s static arguments.
"""
import numpy as np

from .tree_util import tree_flatten, tree_unflatten
from . import staging, _replica_threads, pmap_fast
from .devices import local_devices
from .array import Array, placed_on
from .global_arrays import local_leaves, check_mapped_along_split
from .sharding import Mesh, NamedSharding, PartitionSpec, AxisType
from .staging import leaf_value, wrap_outputs
from .dispatch import is_traced
from .wrappers import user_facing, name_like, describe
from .compiler.ir.builder import current
from .compiler.primitives.collectives import holds_collectives
from .compiler.primitives.replicas import ReplicaGroup, with_collective_params
from .distributed import process_layout
from .compiler.transforms.vmap import batch_emit
from .compiler.backends.llvm import memory
from .lax._parallel import axis_frame
from .vmap import _broadcast_prefix, _check_axis_spec, split_mapped, place_outputs

INTERNAL_AXIS = "_internal_pmap_axis_name"   # JAX's name of an unnamed pmap axis


class _Entry(staging.Entry):
    __slots__ = ("executable", "consts", "out_tree", "out_weak", "mapped_out", "parallel")


def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=(),
         global_arg_shapes=None):
    """`kiln.pmap` (JAX's signature): run `fun` once per device, in parallel, on slices of its
    arguments along `in_axes`; collectives over `axis_name` compute across the devices."""
    if not callable(fun):
        raise TypeError(f"pmap requires a callable, got {fun!r}")
    if global_arg_shapes is not None:
        raise ValueError("pmap: global_arg_shapes is only meaningful with several processes "
                         "feeding different data, which kiln's pmap does not need; remove it")
    _check_axis_spec("in_axes", in_axes)
    _check_axis_spec("out_axes", out_axes)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    static = staging.StaticArgs(fun, static_broadcasted_argnums, (), what="static_broadcasted")
    staging.StaticArgs(fun, donate_argnums, (), what="donate")   # checked; see docs/pmap.md
    backend_key = staging.backend_name(backend or ("pjrt" if devices is not None and
                                                   _pjrt().on_pjrt(devices) else "cpu"))
    fallback = None if backend is not None else "reference"
    name = axis_name or INTERNAL_AXIS
    cache = staging.GuardedCache()
    fast = staging.FastSlot()   # `_fast`: pmap_fast.install of the latest call of positional
    #                             arrays, or None

    @user_facing
    def mapped(*args, **kwargs):
        if fast._fast is not None and not kwargs and current() is None:
            out = fast._fast(args)
            if out is not pmap_fast.MISS:
                return out
        prep = _prepare(args, kwargs)
        leaves, treedef, statics, avals, axes, size, examples = prep
        process, processes = process_layout()
        if current() is not None or any(is_traced(x) for x in leaves):
            st = _stage_replica(examples, treedef, statics, size * processes)
            outs, odims = batch_emit(st.fn, list(leaves) + list(st.extra),
                                     axes + [None] * len(st.extra), size,
                                     axis_name=name,
                                     span=(process, processes) if processes > 1 else None)
            placed = place_outputs(outs, odims, st.out_tree, size, out_axes, fun, "pmap")
            return tree_unflatten(st.out_tree, placed)
        entry = _entry(prep, processes)
        outs, mesh = _outputs(entry, leaves, axes, size)
        if backend_key == "pjrt":
            return tree_unflatten(entry.out_tree, outs)
        if processes == 1 and not statics[1]:
            fast._fast = pmap_fast.install(entry, args, kwargs, static, axes, size,
                                           entry.mapped_out, mesh, name) or fast._fast
            staging.FAST_PATHS.add(fast)
        return tree_unflatten(entry.out_tree, outs)

    def _entry(prep, processes):
        """The compiled specialisation of a call `_prepare` split (made when missing)."""
        _, treedef, statics, avals, axes, size, examples = prep
        key = (treedef, statics, tuple(avals), tuple(axes), processes)
        return cache.lookup(key, lambda stale: _compile(examples, treedef, statics, size,
                                                         processes))

    def _outputs(entry, leaves, axes, size):
        """(the outputs of `entry` run on `leaves`, the replicas' mesh)."""
        replicas = _devices_for(size)
        mesh = Mesh(np.array(replicas, dtype=object), (name,), (AxisType.Auto,))
        if backend_key == "pjrt":   # the results stay on the devices (pjrt_spread.py)
            return run_replicated(entry, leaves, axes, mesh, describe(fun)), mesh
        process, processes = process_layout()
        values = [_to_front(leaf_value(x), d) for x, d in zip(leaves, axes)]
        outs = wrap_outputs(_run(entry, values, axes, size, process, processes), entry.out_weak)
        for o, spec in zip(outs, entry.mapped_out):
            at = [None] * o.ndim
            if spec is not None:
                at[spec % o.ndim] = name
            placed_on(o, NamedSharding(mesh, PartitionSpec(*at)))
        return outs, mesh

    def lower(*args, **kwargs):
        """JAX's `pmap(f).lower(*args)`: the specialisation for these arguments, compiled
        (`.compile()` gives a `PmapCompiled`, called as the pmap is)."""
        prep = _prepare(args, kwargs)
        leaves, treedef, statics, avals, axes, size, _ = prep
        processes = process_layout()[1]
        if processes > 1:
            raise NotImplementedError(f"pmap of {describe(fun)}: lower() over several "
                                      f"processes; call the pmap instead")
        entry = _entry(prep, processes)
        return PmapLowered(PmapCall(entry, describe(fun), treedef, statics, avals, axes,
                                    lambda leaves: _outputs(entry, leaves, axes, size)[0],
                                    backend_key, name, prepare=_prepare))

    def _devices_for(size):
        """The devices the replicas run on; a ValueError when there are fewer than `size`."""
        if backend_key == "pjrt":   # one replicated module over PJRT devices
            available = list(devices) if devices is not None else _pjrt().devices("pjrt")
            if size > len(available):
                raise ValueError(
                    f"compiling computation that requires {size} logical devices, but only "
                    f"{len(available)} XLA devices are available (num_replicas={size}): pmap "
                    f"of {describe(fun)} with backend='pjrt' maps an axis of size {size}. "
                    f"Map over at most {len(available)} per call, or give XLA's CPU plug-in "
                    f"more devices: KILN_NUM_CPU_DEVICES={size} (or "
                    f"kiln.config.update('jax_num_cpu_devices', {size})) before kiln first "
                    f"lists its devices.")
            return available[:size]
        # the CPU devices: pmap's replicas run on the CPU (pmap over GPUs: docs/cuda.md)
        available = list(devices) if devices is not None else local_devices(backend="cpu")
        if size > len(available):
            where = "the devices given to pmap" if devices is not None else \
                "kiln.local_devices('cpu')"
            raise ValueError(
                f"pmap of {describe(fun)} maps an axis of size {size}, but only "
                f"{len(available)} devices are available ({where}). Map over at most "
                f"{len(available)} per call (reshape the batch into [devices, per device, ...]), "
                f"or run with more CPU devices: kiln.config.update('jax_num_cpu_devices', "
                f"{size}) before kiln first lists its devices, KILN_NUM_CPU_DEVICES={size}, or "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={size}.")
        return available[:size]

    def _prepare(args, kwargs):
        statics, dyn_args, dyn_kwargs = static.split(args, kwargs, describe(fun))
        leaves, treedef = tree_flatten((tuple(dyn_args), dyn_kwargs))
        leaves, spans = local_leaves(leaves)
        spec = in_axes
        if isinstance(spec, tuple):
            if len(spec) != len(args):
                raise ValueError(f"pmap in_axes must be an int, None, or a tuple of entries "
                                 f"corresponding to the positional arguments passed to the "
                                 f"function, but got len(in_axes)={len(spec)}, "
                                 f"len(args)={len(args)} ({describe(fun)})")
            static_positions = {w for k, w, _ in statics if k == "#"}
            spec = tuple(s for i, s in enumerate(spec) if i not in static_positions)
        consts, leaves, avals, axes, size, examples = split_mapped(
            leaves, spec, dyn_args, dyn_kwargs, axis_size, "pmap")
        check_mapped_along_split(leaves, axes, spans, f"pmap of {describe(fun)}")
        return leaves, treedef, (statics, consts), avals, axes, size, examples

    def _stage_replica(examples, treedef, statics, size):
        """`fun` specialised for one replica, with `axis_name` bound (to `size` replicas in
        all) for its collectives."""
        call_statics, consts = statics

        def rebuild(tracers):
            dyn_args, dyn_kwargs = tree_unflatten(treedef, staging.merge_leaves(tracers, consts))
            return staging.merge_statics(dyn_args, dyn_kwargs, call_statics)
        with axis_frame(name, size):
            return staging.stage(fun, examples, rebuild, staging.function_name(fun, "pmap"),
                                 api="mapped by kiln.pmap")

    def _compile(examples, treedef, statics, size, processes):
        st = _stage_replica(examples, treedef, statics, size * processes)
        entry = _Entry()
        extra = {} if processes == 1 else {"processes": processes}
        if backend_key == "pjrt":
            ssa, entry.executable = _pjrt().compile_replicated(
                st.fn, ((name, size),), _devices_for(size), **extra)
        else:
            finish = (lambda ssa: with_collective_params(ssa, **extra)) if extra else None
            ssa, entry.executable = staging.compile_ssa(st.fn, backend_key, fallback=fallback,
                                                        name=describe(fun), finish=finish)
        entry.consts = list(st.extra)
        entry.out_tree = st.out_tree
        entry.out_weak = [v.aval.weak_type for v in ssa.outvars]
        entry.guards = st.guards
        entry.mapped_out = _out_specs(st.out_tree, len(ssa.outvars))
        one_call = getattr(entry.executable, "one_call", False)   # runs every replica at once
        entry.parallel = True if one_call or holds_collectives(ssa) else None   # None: not measured
        return entry

    def _out_specs(out_tree, n):
        if out_axes is None or isinstance(out_axes, int):
            return [out_axes] * n
        return _broadcast_prefix(out_axes, tree_unflatten(out_tree, [0] * n), "out_axes")

    def _run(entry, values, axes, size, process, processes):
        def args_of(i):
            return [v[i] if d is not None else v for v, d in zip(values, axes)] + entry.consts
        cross = None
        if processes > 1:
            from .compiler.backends import mpi_engine as cross
        group = ReplicaGroup(((name, size),), process, processes, cross)
        per_replica = _replica_threads.run_replicas(entry, group, args_of)
        outs = []
        for k, spec in enumerate(entry.mapped_out):
            if spec is None:
                outs.append(per_replica[0][k] if size else None)
                continue
            stacked = _stack([np.asarray(r[k]) for r in per_replica], values + entry.consts)
            nd = stacked.ndim
            if not -nd <= spec < nd:
                raise ValueError(f"pmap out_axes {spec} is out of bounds for an output of "
                                 f"rank {nd} ({describe(fun)})")
            outs.append(np.moveaxis(stacked, 0, spec % nd))
        return outs

    def make_ir(*args, **kwargs):
        """The SSA of one replica (what every device runs), for `kiln.make_ir(pmap(f))`."""
        _, treedef, statics, _, _, size, examples = _prepare(args, kwargs)
        return _stage_replica(examples, treedef, statics, size).fn

    name_like(mapped, fun)
    mapped._kiln_make_ir = make_ir
    mapped.lower = lower
    return mapped


def run_replicated(entry, leaves, axes, mesh, shown):
    """The outputs of a pmap's `entry` on PJRT devices (the replicas: `mesh`, one axis),
    spread over them: a mapped argument already spread over the replicas' devices along its
    axis goes in as its buffers."""
    spread = _pjrt_spread()
    name = mesh.axis_names[0]
    replicas = list(mesh.devices.flat)
    values = [spread.replica_buffers(x, d, replicas) or
              _to_front(np.asarray(x) if type(x) is Array else leaf_value(x), d)
              for x, d in zip(leaves, axes)]

    consts = entry.executable.constants_on_devices(entry.consts)

    def args_of(i):
        return [v[i] if d is not None else v for v, d in zip(values, axes)] + consts[i]
    per_replica = _replica_threads.run_replicas(entry, ReplicaGroup(((name, len(replicas)),)),
                                                args_of)
    outs = []
    for k, (spec, weak) in enumerate(zip(entry.mapped_out, entry.out_weak)):
        rows = [r[k] for r in per_replica]
        if spec is None:
            outs.append(wrap_outputs(rows[:1], [weak])[0])
            continue
        try:
            outs.append(spread.stacked(rows, mesh, name, spec, weak))
        except ValueError as e:
            raise ValueError(f"{e} ({shown})") from None
    return outs


class PmapCall:
    """What a lowered pmap runs: its `entry` (pmap's, or one loaded from a serialized
    executable), the name it is shown by, the pytree, static leaves, types and mapped axes
    of the arguments it was lowered for, `run(leaves)` (its outputs on those leaves),
    the backend, the axis name, and `prepare` (the pmap's split of a call's arguments; None
    for a loaded one, whose arguments are flattened and checked here)."""

    def __init__(self, entry, shown, in_tree, statics, in_avals, axes, run, backend,
                 axis_name, prepare=None):
        self.entry, self.shown, self.in_tree, self.statics = entry, shown, in_tree, statics
        self.in_avals, self.axes, self.run, self.backend = tuple(in_avals), list(axes), run, \
            backend
        self.axis_name, self.prepare = axis_name, prepare

    def __call__(self, args, kwargs):
        if self.prepare is not None:   # (called without the static arguments, as JAX's)
            args, kwargs = staging.merge_statics(args, kwargs, self.statics[0])
            leaves, tree, statics, avals, axes, _, _ = self.prepare(tuple(args), kwargs)
        else:
            leaves, tree = tree_flatten((tuple(args), kwargs))
            statics, avals, axes = self.statics, staging.leaf_avals(leaves), self.axes
        if tree != self.in_tree:
            raise TypeError(f"Function compiled with input pytree does not match the input "
                            f"pytree it was called with: compiled for {self.in_tree}, called "
                            f"with {tree}")
        if statics != self.statics:
            raise TypeError(f"this executable of the pmap of {self.shown} was specialised for "
                            f"other values of its Python int and bool arguments; call the "
                            f"pmap instead")
        strip = lambda t: [(a.shape, a.dtype) for a in t]  # noqa: E731  (weak types may differ)
        if strip(avals) != strip(self.in_avals) or list(axes) != self.axes:
            show = lambda t: "(" + ", ".join(a.str_short() for a in t) + ")"  # noqa: E731
            raise TypeError(f"this executable of the pmap of {self.shown} was compiled for "
                            f"arguments of types {show(self.in_avals)} mapped along "
                            f"{self.axes} but is called with {show(avals)} mapped along "
                            f"{list(axes)}; call the pmap instead to compile for new types")
        return tree_unflatten(self.entry.out_tree, self.run(leaves))


class PmapLowered:
    """`pmap(f).lower(*args)`: `compile()` gives the `PmapCompiled`; `as_text("stablehlo")`
    the replicated module (PJRT devices)."""

    def __init__(self, call):
        self._call = call

    def as_text(self, dialect=None):
        return self.compile().as_text(dialect)

    def compile(self):
        return PmapCompiled(self._call)

    def compile_for_topology(self, topology):
        """The replicated module compiled by libtpu for the TPU topology `topology` without a
        TPU, replica i on the topology's i-th device: a `CompiledForTopology` whose `source`
        is this `compile()` (docs/pjrt.md). Needs `backend="pjrt"` (the module is lowered
        from the SSA that backend compiles)."""
        from .jit import CompiledForTopology
        from .pjrt import compile_for_topology
        call = self._call
        program = call.entry.executable
        module = program.portable() if call.backend == "pjrt" else None
        if module is None:
            how = "was loaded from a serialized executable" if call.backend == "pjrt" else \
                f"was compiled by the {call.backend} backend, which keeps no StableHLO module"
            raise ValueError(f"compile_for_topology: the pmap of {call.shown} {how}; lower "
                             f"kiln.pmap(f, backend='pjrt') and compile that for the topology")
        made = compile_for_topology(module.text, topology, devices=len(program.devices),
                                    shown=f"the pmap of {call.shown}")
        return CompiledForTopology(None, made, self.compile(), call.shown)


class PmapCompiled:
    """`pmap(f).lower(*args).compile()`: called as the pmap (with the dynamic arguments of
    the same types); `in_tree` and `out_tree` as JAX's; `as_text()` what the backend runs
    (on PJRT devices the replicated StableHLO module)."""

    def __init__(self, call):
        self._call = call

    in_tree = property(lambda self: self._call.in_tree)
    out_tree = property(lambda self: self._call.entry.out_tree)

    def as_text(self, level=None):
        executable = self._call.entry.executable
        return executable.as_text() if level is None else executable.as_text(level)

    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs)


def _pjrt():
    """runtime/pjrt.py, imported when a pmap runs on PJRT devices."""
    from . import pjrt
    return pjrt


def _pjrt_spread():
    """runtime/pjrt_spread.py, imported when a pmap runs on PJRT devices."""
    from . import pjrt_spread
    return pjrt_spread


def _stack(values, inputs):
    """The replicas' values stacked along a new leading axis: one replica's value viewed so,
    without a copy, when it is a buffer of its own (compiled code's results are; the
    reference backend may return an input, which must not become the result); else copied
    into memory from the compiled code's buffer pool (pages already mapped: no page faults)."""
    if len(values) == 1 and not any(np.may_share_memory(values[0], x) for x in inputs):
        return values[0][np.newaxis]
    out = memory.empty((len(values), *values[0].shape), values[0].dtype) if values else None
    return np.stack(values, out=out)


def _to_front(value, axis):
    """`value` with its mapped axis first (None: unmapped, as it is)."""
    if axis is None or axis == 0:
        return value
    return np.ascontiguousarray(np.moveaxis(np.asarray(value), axis, 0))
