"""`kiln.jit` partitioned over several PJRT devices: XLA's SPMD partitioner splits one module.

A jit call takes this path when its `in_shardings`/`out_shardings` name PJRT devices, or when
an argument is an Array spread over several PJRT devices (pjrt_spread.py). The call

- places its arguments as `in_shardings` says (`device_put`, one block per device);
- takes the mesh of the first spread argument (else of the first sharding given); arguments
  that are not spread over it are put on it replicated (an argument spread over another mesh
  through the host); a pmap result over it gets its mapped axis back on each device;
- stages `f` for the global shapes, runs the reference pipeline and lowers it to one StableHLO
  module with `mhlo.num_partitions` = the mesh's size and a sharding on every argument and
  result: Shardy's (`sdy.mesh @mesh` and an `sdy.sharding` each, stablehlo/module.py's
  `sdy_mesh` and `sdy_attribute`) while `jax_use_shardy_partitioner` is on (the default, as in
  JAX), else GSPMD's `mhlo.sharding` (`hlo_sharding`): the arguments' own shardings, the
  results' from `out_shardings`; a result with none has none in the module, XLA chooses it
  (allow_spmd_sharding_propagation_to_output) and kiln reads XLA's choice back from the
  executable as a NamedSharding over the mesh (`_chosen`, pjrt/shardings.py). Where XLA's
  choice is not such a sharding or the plug-in does not say, it is kiln's inference instead: the result stays split along the dimension kiln's partitioning
  rules (the multi-process table, compiler/transforms/partition.py) leave it split for inputs
  split over one mesh axis, else it is replicated. The function's constants are replicated;
- compiles it once per signature, layout and partitioner with one partition per device of
  the mesh, in its row-major order (replicated.py, `partitioned=True`, and `shardy=True` for
  Shardy's module): XLA's partitioner inserts the
  collectives the layout needs (a batch mean's all-reduce), and every device runs its
  partition in one execution;
- returns each result spread over the devices with its sharding, left there: passed to the
  next call, its buffers go in as they are;
- `jitted.lower(...)` gives the call's entry (`lowered`: a `PartitionedLowered`, compiled
  already), and `.compile()` a `PartitionedCompiled` called with the same pytree, each argument
  put on its input sharding; kiln.experimental.serialize_executable serializes it;
- donates: an argument of `donate_argnums`/`donate_argnames` is aliased to the first free
  result of its shape, dtype and sharding (`tf.aliasing_output`), or, where XLA chooses some
  result's sharding, marked a buffer donor (`jax.buffer_donor`) when a result of its shape and
  dtype exists; PJRT takes its buffers over and the argument's Array is deleted (JAX's "Array
  has been deleted" on a later use); one no result can take is JAX's warning "Some donated
  buffers were not usable", left alone.
"""
import os
import sys

import numpy as np

from .tree_util import tree_unflatten, tree_leaves
from .compiler.config import config
from . import staging
from .array import Array, to_array
from .compiler.backends.cuda.device import DeviceBuffer
from .pjrt_spread import as_blocks, put, spread_array, spread_of, LAYER
from .sharding import Sharding, NamedSharding, PartitionSpec
from .staging import leaf_aval
from .execution_guards import check_execution
from .jit import Compiled, Lowered, checked_call
from .analysis import XlaFigures


class _Entry(staging.Entry):
    __slots__ = ("executable", "text", "constants", "out_tree", "out_weak", "out_shardings",
                 "out_avals", "writes", "held", "name", "in_tree", "in_avals", "in_shardings",
                 "mesh", "shardy", "ssa")
    # text: the module the plug-in compiled; held: the donated inputs a result took;
    # in_avals: the arguments' global types, in_shardings their shardings (constants not
    # included); shardy: whether the module is Shardy's; ssa: the SSA form it was lowered
    # from (None for an executable loaded from a serialized one)


def wanted(jitted, values):
    """Whether a call of `jitted` on argument values `values` runs partitioned here."""
    if any(type(v) is DeviceBuffer and v.layer is LAYER for v in values):
        return True
    return any(_on_pjrt(s) for s in _given(jitted))


def _given(jitted):
    """The Shardings `jitted`'s in_shardings and out_shardings give (PartitionSpecs over the
    current mesh)."""
    from .placement import _as_sharding
    found = []
    for prefix in jitted._shardings or ():
        for s in tree_leaves(prefix, is_leaf=lambda x: isinstance(x, (Sharding,
                                                                           PartitionSpec))):
            s = _as_sharding(s)
            if s is not None:
                found.append(s)
    return found


def _on_pjrt(sharding):
    return any(d.layer is not None and d.layer.backend == "pjrt" for d in sharding.device_set)


def partitioned_call(jitted, args, kwargs, mesh=None, fixed=False):
    """A call of `jitted` partitioned over PJRT devices (module docstring); `mesh`: the one
    of a shard_map in it, where no argument or sharding gives one (`fixed`: whatever they
    give, the call of a shard_map on its own)."""
    entry, placed, leaves = specialised(jitted, args, kwargs, mesh, fixed)
    return run(entry, placed, leaves)


def specialised(jitted, args, kwargs, mesh=None, fixed=False):
    """(the entry of a call of `jitted`, compiled now when missing, its arguments placed on
    the entry's mesh (`mesh` where no argument or sharding gives one, or whatever they give
    if `fixed`), the dynamic leaves as given)."""
    from .placement import _as_sharding
    from .global_jit import _per_leaf, placed_call
    from .jit import warn_unusable
    from .shard_map import regions_over
    args, statics, leaves, treedef = placed_call(jitted, args, kwargs)
    donated = jitted._donated_leaves(args, kwargs)
    out_shardings = (jitted._shardings or (None, None))[1]
    if not fixed:
        mesh = _mesh(leaves, _given(jitted), jitted.__name__, mesh)
    source = "shard_map" if fixed else _source(jitted, args, leaves, _given(jitted))
    placed = place(leaves, mesh)
    avals = [leaf_aval(x, f"argument {i} of {jitted.__name__}")[0] for i, x in enumerate(placed)]
    specs = tuple(spread_of(x).sharding.spec.padded(len(a.shape)) for x, a in zip(placed, avals))
    shardy = config.read("use_shardy_partitioner")
    key = (treedef, tuple(avals), specs, statics, mesh, shardy)

    def make(stale):
        with regions_over(mesh, source) as regions:   # shard_maps as JAX writes them
            st, _, _ = staging.stage_call(jitted._fun, args, kwargs, jitted._static,
                                          shown=jitted.__name__, avals=avals)
        # XLA's choice of an open result's sharding is read over the mesh of the first
        # shard_map in the function where the jit gives no shardings, as JAX reads it
        chosen_over = regions[0] if regions and not _given(jitted) else mesh
        n = st.out_tree.num_leaves
        targets = [_as_sharding(s) for s in _per_leaf(out_shardings,
                                                      tree_unflatten(st.out_tree, [0] * n))]
        targets += [None] * (len(st.out_avals) - n)   # globals the function assigns
        ins = [spread_of(x).sharding for x in placed] + [replicated] * len(st.extra)
        for t, a in zip(targets, st.out_avals):
            if t is not None:
                _check_target(t, a, mesh, jitted.__name__)
        entry = None if None not in targets else \
            _compile(st, ins, targets, mesh, jitted.__name__, donated, shardy, chosen_over)
        if entry is None:   # kiln's inference for the results out_shardings leaves open
            inferred = _inferred(st.fn, ins, st.out_avals, mesh)
            outs = [guess if t is None else t for t, guess in zip(targets, inferred)]
            for t, a in zip(outs, st.out_avals):
                _check_target(t, a, mesh, jitted.__name__)
            entry = _compile(st, ins, outs, mesh, jitted.__name__, donated, shardy, mesh)
        warn_unusable([avals[i] for i in donated if i not in entry.held], _frames_in_kiln())
        entry.name, entry.in_tree, entry.in_avals = jitted.__name__, treedef, tuple(avals)
        entry.in_shardings = ins[:len(placed)]
        return entry

    replicated = NamedSharding(mesh, PartitionSpec())
    return jitted._partitioned.lookup(key, make), placed, leaves


def place(leaves, mesh, shardings=None):
    """`leaves` on `mesh`: with `shardings`, leaf i put on `shardings[i]` (an Array already
    so spread as it is); without, one spread over the mesh as it is (a pmap result over it
    with its mapped axis back on each device) and any other put there replicated."""
    placed = []
    for i, x in enumerate(leaves):
        s = spread_of(x)
        if shardings is None and s is not None and s.sharding.mesh == mesh:
            x = as_blocks(x)   # a pmap result over the mesh: its axis back, on the devices
        else:
            target = NamedSharding(mesh, PartitionSpec()) if shardings is None else shardings[i]
            x = put(x if type(x) is Array else to_array(x), target)
        placed.append(x)
    return placed


def run(entry, placed, leaves):
    """The results of `entry` run on `placed` (spread over its mesh; `leaves` as the caller
    gave them, the donated ones deleted after the execution)."""
    rows = [[spread_of(x).buffers[i] for x in placed] + constants
            for i, constants in enumerate(entry.constants)]
    results = entry.executable(rows)
    for i in entry.held:   # their buffers were given to the results (JAX deletes them)
        if type(leaves[i]) is Array:
            leaves[i].delete()
    outs = [spread_array([row[k] for row in results], sharding, aval.shape, aval.dtype, weak)
            for k, (sharding, aval, weak) in enumerate(zip(entry.out_shardings, entry.out_avals,
                                                           entry.out_weak))]
    if entry.writes:
        staging.assign_globals(entry.writes, outs)
        outs = outs[:entry.out_tree.num_leaves]
    return tree_unflatten(entry.out_tree, outs)


def _check_target(sharding, aval, mesh, name):
    """An out_sharding must be a NamedSharding over the call's mesh that fits its result."""
    if not isinstance(sharding, NamedSharding) or sharding.mesh != mesh:
        raise NotImplementedError(
            f"jit of {name} on PJRT devices: the out_sharding {sharding} is not a "
            f"NamedSharding over the mesh of its arguments ({mesh}); kiln partitions a "
            f"call over one mesh: use it for every sharding")
    sharding.check_shape(aval.shape)


def _frames_in_kiln():
    """How many frames, from its caller's up, run kiln's runtime: the caller's stacklevel of
    the user's frame."""
    frame, count = sys._getframe(1), 0
    while frame is not None and frame.f_code.co_filename.startswith(_HERE):
        frame, count = frame.f_back, count + 1
    return count + 1


_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _mesh(leaves, given, name, fallback=None):
    """The mesh a call is partitioned over: its first spread argument's (after in_shardings
    placed them), else its first sharding's over PJRT devices, else `fallback`."""
    for x in leaves:
        s = spread_of(x)
        if s is not None:
            return s.sharding.mesh
    for s in given:
        if isinstance(s, NamedSharding) and _on_pjrt(s):
            return s.mesh
    if fallback is not None:
        return fallback
    raise ValueError(f"jit of {name} on PJRT devices: no NamedSharding over PJRT devices to "
                     f"partition it by; give in_shardings or out_shardings as "
                     f"NamedSharding(mesh, spec) over a Mesh of kiln.devices('pjrt')")


def _source(jitted, args, leaves, given):
    """What gives a call its mesh (`_mesh`), as JAX's error for a shard_map over other
    devices names it before "with device ids": `argument a of f with shape float32[8,4] and`,
    else the jit's shardings, else the shard_map in it."""
    from .ad import argument_leaf_names
    for i, x in enumerate(leaves):
        s = spread_of(x)
        if s is not None:
            names = argument_leaf_names(jitted._fun, args)
            name = names[i] if len(names) == len(leaves) else f"args[{i}]"
            fun = getattr(jitted._fun, "__qualname__", jitted.__name__)
            return (f"argument {name} of {fun} with shape "
                    f"{np.dtype(x.dtype).name}[{','.join(map(str, x.shape))}] and")
    if any(isinstance(s, NamedSharding) and _on_pjrt(s) for s in given):
        return f"the shardings of jit({jitted.__name__})"
    return "shard_map inside jit"


def _inferred(fn, ins, out_avals, mesh):
    """The sharding of each result for which out_shardings gives none, as JAX would infer
    it, for the layout kiln's partitioning rules know (compiler/transforms/partition.py:
    inputs split along one dimension each over one and the same mesh axis): a result the
    partitioned computation leaves split along dimension d is split there over that axis,
    any other replicated."""
    from .compiler.primitives.partitioning import Grid
    from .compiler.transforms.partition import partition, INFER
    replicated = NamedSharding(mesh, PartitionSpec())
    split = {tuple(n for d in range(len(s.spec)) for n in s.spec.names(d)) for s in ins}
    split.discard(())
    names = next(iter(split), ())
    if len(split) != 1 or len(names) != 1:
        return [replicated] * len(out_avals)
    axis = names[0]
    in_dims = [next((d for d in range(len(s.spec)) if s.spec.names(d)), None) for s in ins]
    _, got = partition(fn, in_dims, [INFER] * len(out_avals),
                       Grid(0, range(mesh.shape[axis])))
    return [replicated if d is None else
            NamedSharding(mesh, PartitionSpec(*[None] * d, axis)) for d in got]


def _chosen(executable, outs, out_avals, mesh):
    """`outs` with each None replaced by the NamedSharding over `mesh` that XLA chose for
    that result (pjrt/shardings.py), or None where one is not such a sharding, or its blocks
    are not the ones XLA made (an uneven split XLA pads), or the plug-in does not say."""
    from .compiler.backends.pjrt.shardings import mesh_dims
    chosen, blocks = executable.chosen, executable.out_avals
    if chosen is None or blocks is None:
        return None
    names, sizes = mesh.axis_names, tuple(mesh.devices.shape)
    found = []
    for s, a, tiling, (block, _) in zip(outs, out_avals, chosen, blocks):
        if s is None:
            dims = [()] * len(a.shape) if tiling is None else \
                None if tiling is False else mesh_dims(tiling, sizes)
            if dims is None or len(dims) != len(a.shape):
                return None
            spec = [None if not axes else names[axes[0]] if len(axes) == 1 else
                    tuple(names[x] for x in axes) for axes in dims]
            while spec and spec[-1] is None:   # JAX's spec of XLA's choice: P('y'), P()
                spec.pop()
            s = NamedSharding(mesh, PartitionSpec(*spec))
            try:
                s.check_shape(a.shape)   # an uneven split, which XLA pads
            except ValueError:
                return None
            if tuple(s.shard_shape(a.shape)) != tuple(block):
                return None
        found.append(s)
    return found


def _dims(sharding, ndim):
    names = sharding.mesh.axis_names
    return [tuple(names.index(n) for n in sharding.spec.names(d)) for d in range(ndim)]


def _compile(st, ins, outs, mesh, name, donated, shardy, chosen_over):
    """The entry of a call: `st` (staging.Staged) lowered with shardings `ins` (arguments,
    then constants) and `outs`, Shardy's if `shardy` else GSPMD's, compiled with one
    partition per device of `mesh`; a donated argument (`donated`: indices) aliased to the
    first free result of its shape, dtype and sharding. A result whose `outs` is None has no
    sharding in the module: XLA chooses it, and the entry's is what XLA chose, read back
    from the executable (`_chosen`); None when that is not a NamedSharding over
    `chosen_over` (a mesh of the same devices in the same order) with the blocks XLA made,
    or the plug-in does not say (the caller infers one instead). Then a
    donated argument for which some result of its shape and dtype exists is a buffer donor
    (`jax.buffer_donor`, as in JAX): XLA gives its buffer to a result once it has placed
    them, and PJRT takes it over in any case."""
    from .compiler.backends.stablehlo.module import (lower_module, gspmd_attribute,
                                                     sdy_attribute, sdy_mesh, Partitioning)
    from .compiler.backends.pjrt.replicated import ReplicatedExecutable
    from .pjrt import aliases
    from .staging import run_pipeline
    ssa = run_pipeline(st.fn, "pjrt")
    sizes = tuple(mesh.devices.shape)
    in_avals = [v.aval for v in ssa.invars]
    out_avals = [v.aval for v in ssa.outvars]
    names = mesh.axis_names
    attribute = (lambda dims: sdy_attribute(names, dims)) if shardy else \
        (lambda dims: gspmd_attribute(sizes, dims))
    text = [[None if s is None else attribute(_dims(s, len(a.shape)))
             for s, a in zip(shardings, avals)]
            for shardings, avals in ((ins, in_avals), (outs, out_avals))]
    devices = list(mesh.devices.flat)
    open_outs = None in outs
    kind = (lambda s, a: (a.shape, a.dtype)) if open_outs else \
        (lambda s, a: (a.shape, a.dtype, s.spec.padded(len(a.shape))))
    found = aliases([kind(s, a) for s, a in zip(ins, in_avals)],
                    [kind(s, a) for s, a in zip(outs, out_avals)], donated)
    donors = set(found) if open_outs else set()
    module = lower_module(ssa, name, partitions=len(devices), shardings=text,
                          aliases=None if open_outs else found, donors=donors,
                          mesh=sdy_mesh(names, sizes) if shardy else None,
                          partitioning=Partitioning(names, sizes,
                                                    tuple(d.id for d in devices), shardy))
    infos = [d.layer.info for d in devices]
    entry = _Entry()
    entry.text, entry.mesh, entry.shardy, entry.ssa = module.text, mesh, shardy, ssa
    entry.executable = ReplicatedExecutable(
        infos[0].client, module.text, [a.update(shape=s.shard_shape(a.shape))
                                       for s, a in zip(ins, in_avals)],
        [None if s is None else a.update(shape=s.shard_shape(a.shape))
         for s, a in zip(outs, out_avals)], infos, partitioned=True, shardy=shardy)
    if None in outs:
        outs = _chosen(entry.executable, outs, out_avals, chosen_over)
        if outs is None:
            entry.executable.close()
            return None
    entry.constants = [[d.layer.to_device(np.asarray(c, order="C")) for c in st.extra]
                       for d in devices]
    entry.out_tree, entry.writes = st.out_tree, st.writes
    entry.out_shardings, entry.out_avals = outs, st.out_avals
    entry.out_weak = [a.weak_type for a in st.out_avals]
    entry.guards = st.guards
    entry.held = sorted(found)
    return entry



def lowered(jitted, args, kwargs, mesh=None):
    """`jitted.lower(*args, **kwargs)` of a call partitioned over PJRT devices: its entry,
    compiled now (the partitioned module is compiled when it is specialised), as a
    `PartitionedLowered`. The arguments are placed on the mesh as a call places them
    (`mesh`: as partitioned_call's)."""
    return PartitionedLowered(specialised(jitted, args, kwargs, mesh)[0])


class PartitionedLowered(Lowered):
    """`Lowered` of a jit partitioned over PJRT devices: `as_text()` the SSA form after the
    passes, `as_text("stablehlo")` the partitioned module (its shardings, `sdy.mesh`)."""

    def as_text(self, dialect=None):
        if dialect == "stablehlo":
            return self._entry.text
        return super().as_text(dialect)

    def compile(self):
        return PartitionedCompiled(self._entry)

    def compile_for_topology(self, topology):
        """The partitioned module compiled by libtpu for the TPU topology `topology` without
        a TPU, partition i on the topology's i-th device (the mesh's row-major order): a
        `CompiledForTopology` whose `source` is this `compile()` (docs/pjrt.md)."""
        from .jit import CompiledForTopology
        from .pjrt import compile_for_topology
        entry = self._entry
        made = compile_for_topology(entry.text, topology, devices=entry.mesh.devices.size,
                                    partitioned=True, shardy=entry.shardy,
                                    propagate=entry.executable.propagate,
                                    shown=f"the jit of {entry.name!r} partitioned over "
                                          f"{entry.mesh}")
        return CompiledForTopology(None, made, self.compile(), entry.name)


class PartitionedCompiled(XlaFigures, Compiled):
    """`Compiled` of a jit partitioned over PJRT devices: called with the arguments'
    pytree of `lower` (each put on its input sharding over the mesh, as a call of the
    jitted function puts it), its results spread as the call's; `input_shardings` and
    `output_shardings` as JAX's; `as_text()` the module the plug-in compiled; XLA's
    figures of the executable."""

    def as_text(self, level=None):
        if level not in (None, "stablehlo"):
            raise ValueError(f"Compiled.as_text of a partitioned executable: level {level!r}; "
                             f"it has its StableHLO module only (None or 'stablehlo')")
        return self._entry.text

    @property
    def input_shardings(self):
        entry = self._entry
        return tree_unflatten(entry.in_tree, list(entry.in_shardings))

    @property
    def output_shardings(self):
        entry = self._entry
        return tree_unflatten(entry.out_tree,
                              list(entry.out_shardings[:entry.out_tree.num_leaves]))

    def _loaded(self):
        executable = self._entry.executable
        return executable.client.api, executable.handle

    def __call__(self, *args, **kwargs):
        entry = self._entry
        leaves, _ = checked_call(entry.in_tree, entry.in_avals, args, kwargs)
        check_execution(f"the compiled {entry.name}")
        return run(entry, place(leaves, entry.mesh, entry.in_shardings), leaves)
