"""`kiln.experimental.serialize_executable`: JAX's `serialize` and `deserialize_and_load` for
executables of PJRT plug-ins (docs/pjrt.md, "Serialized executables").

`serialize(compiled)` takes `kiln.jit(f, backend="pjrt").lower(...).compile()` (one device,
or partitioned over a mesh of PJRT devices: pjrt_partitioned.PartitionedCompiled),
`kiln.pmap(f, backend="pjrt").lower(...).compile()` (pmap.PmapCompiled) or a
`Lowered.compile_for_topology(...)` result, and returns `(blob, in_tree, out_tree)`, as JAX
does: the pytrees are returned, not stored. The blob is kiln's: a first line naming the
format and its version, a line with the SHA-256 of the rest, then a JSON document with the
plug-in's serialized executable (`PJRT_Executable_Serialize`, base64), the platform and
plug-in that compiled it, the types of the arguments and results (with their weak types),
the donations, the arrays the function closes over (passed as `@main`'s last arguments) and
the StableHLO module (what `as_text()` shows, and what another device of the plug-in
compiles); for a partitioned executable also the mesh (its devices' ids), the arguments' and
results' PartitionSpecs and the results whose sharding XLA chose; for a pmap the replicas'
device ids, the axis name and the mapped axes. No pickle: loading the blob runs no Python
code of it, but the plug-in's executable is native code, so a blob should come from a
trusted source, as JAX warns.

`deserialize_and_load(blob, in_tree, out_tree, backend=None, execution_devices=None)` checks
the blob and that its platform is the target plug-in's (else a ValueError naming both and
what to do), loads the executable with `PJRT_Executable_DeserializeAndLoad` on the first
execution device (the plug-in's error, for bytes it cannot read, is a PjrtError carrying its
message) and returns a `Compiled` that is called as the original was. A partitioned or pmap
executable is loaded on the devices with its ids among `execution_devices` (default: every
device of the backend), as JAX's unpickler finds a pickled executable's devices.
"""
import base64
import contextlib
import json

import numpy as np

from ..compiler.backends.pjrt.api import PjrtError
from ..compiler.backends.stablehlo.module import StableHloModule
from ..export import (aval_json, aval_from_json, array_json, array_from_json, framed,
                      unframed)
from ..jit import Compiled, CompiledForTopology, _Entry
from ..analysis import XlaFigures

_MAGIC = b"kiln.serialize_executable"
FORMAT_VERSION = 2   # 2: the partitioned executables' mesh and shardings

__all__ = ["serialize", "deserialize_and_load"]


def serialize(compiled):
    """`(blob, in_tree, out_tree)` of a compiled PJRT executable (see the module docstring)."""
    from ..pjrt_partitioned import PartitionedCompiled
    from ..pmap import PmapCompiled
    if isinstance(compiled, CompiledForTopology):
        document = _topology_document(compiled) if compiled.source is None else \
            _pmap_document(compiled.source, compiled) if isinstance(
                compiled.source, PmapCompiled) else _partitioned_document(compiled.source,
                                                                          compiled)
    elif isinstance(compiled, PmapCompiled):
        document = _pmap_document(compiled)
    elif isinstance(compiled, PartitionedCompiled):
        document = _partitioned_document(compiled)
    elif isinstance(compiled, Compiled):
        document = _compiled_document(compiled)
    else:
        raise TypeError(f"serialize: expected the result of kiln.jit(f, backend='pjrt')"
                        f".lower(...).compile() or of Lowered.compile_for_topology(...), got "
                        f"{type(compiled).__name__}")
    blob = framed(_MAGIC, FORMAT_VERSION, json.dumps(document, sort_keys=True).encode())
    return blob, compiled.in_tree, compiled.out_tree


def _compiled_document(compiled):
    from ..pjrt import Program
    entry = compiled._entry
    program = entry.executable
    name = entry.function.name
    if type(program) is not Program:
        raise ValueError(f"Compilation does not support serialization: {name!r} was compiled "
                         f"by the {_backend_of(program)} backend; kiln serializes executables "
                         f"of PJRT plug-ins, so compile it with kiln.jit(f, backend='pjrt')")
    if entry.refs is not None or entry.writes or entry.out_typed is not None:
        raise ValueError(f"serialize: {name!r} writes Refs or globals, or places its results "
                         f"by their sharding types, which happens around the executable, "
                         f"not in it; serialize a function that returns its results instead")
    device = program.default
    return _document(name, program.module, program.serialize(), entry.closed,
                     entry.in_avals, entry.out_weak, program.held, device.platform,
                     device.layer.info.client.platform_version, device.layer.plugin.name,
                     None, [device.device_kind])


def _made(made, platform_of):
    """(the executable's bytes, platform, platform version, plug-in, topology, devices'
    kinds, device ids) of `made`, a `CompiledForTopology`, or with None those of the
    executable compiled here (`platform_of()` gives them)."""
    if made is None:
        return platform_of()
    return (made.serialized, made.platform, made.platform_version, "libtpu", made.topology,
            list(made.device_kinds), list(made.device_ids))


def _partitioned_document(compiled, made=None):
    """The document of a jit partitioned over a mesh of PJRT devices: `_document`'s, with
    the mesh (its devices' ids, names, axis types), the arguments' and results' shardings
    and the results XLA chose the shardings of; with `made` (a `CompiledForTopology` of
    it), the topology's executable and devices instead."""
    entry = compiled._entry
    if entry.writes:
        raise ValueError(f"serialize: {entry.name!r} assigns globals, which happens around "
                         f"the executable, not in it; serialize a function that returns its "
                         f"results instead")
    mesh, executable = entry.mesh, entry.executable
    device = mesh.devices.flat[0]
    held = {i: i for i in entry.held}   # (a partitioned entry keeps the donated inputs only)
    code, platform, version, plugin, topology, kinds, ids = _made(made, lambda: (
        executable.serialize(), device.platform, device.layer.info.client.platform_version,
        device.layer.plugin.name, None, sorted({d.device_kind for d in mesh.devices.flat}),
        [int(d.id) for d in mesh.devices.flat]))
    document = _document(entry.name, None, code, [b.to_host() for b in entry.constants[0]],
                         entry.in_avals, entry.out_weak, held, platform, version, plugin,
                         topology, kinds)
    document.update(
        module=entry.text, results=[aval_json(a) for a in entry.out_avals],
        mesh={"axis_names": list(mesh.axis_names), "shape": list(mesh.devices.shape),
              "axis_types": [t.value for t in mesh.axis_types], "device_ids": ids},
        in_specs=[_spec_json(s.spec) for s in entry.in_shardings],
        out_specs=[_spec_json(s.spec) for s in entry.out_shardings],
        propagate=[bool(p) for p in executable.propagate], shardy=bool(entry.shardy))
    return document


def _pmap_document(compiled, made=None):
    """The document of `pmap(f, backend="pjrt").lower(...).compile()`: `_document`'s, with
    the replicas' devices (by id), the axis name, the mapped axes of the arguments and of
    the results; with `made` (a `CompiledForTopology` of it), the topology's executable,
    devices and module (without the CPU plug-in's custom calls) instead."""
    call = compiled._call
    entry = call.entry
    if call.backend != "pjrt":
        raise ValueError(f"Compilation does not support serialization: the pmap of "
                         f"{call.shown} was compiled by the {_backend_of(entry.executable)} "
                         f"backend; kiln serializes executables of PJRT plug-ins, so map it "
                         f"with kiln.pmap(f, backend='pjrt')")
    if call.statics[1]:
        raise ValueError(f"serialize: the pmap of {call.shown} was specialised for the values "
                         f"of its Python-number arguments ({len(call.statics[1])} of them), "
                         f"which the executable does not take; pass them as arrays "
                         f"(np.asarray) to serialize it")
    program = entry.executable
    device = program.devices[0]
    code, platform, version, plugin, topology, kinds, ids = _made(made, lambda: (
        program.compiled.serialize(), device.platform,
        device.layer.info.client.platform_version, device.layer.plugin.name, None,
        sorted({d.device_kind for d in program.devices}), [int(d.id) for d in program.devices]))
    document = _document(call.shown, program.module if made is None else program.portable(),
                         code, entry.consts, call.in_avals, entry.out_weak, {}, platform,
                         version, plugin, topology, kinds)
    document.update(pmap={"axis_name": call.axis_name, "in_axes": call.axes,
                          "out_axes": list(entry.mapped_out), "device_ids": ids})
    return document


def _spec_json(spec):
    return {"entries": [e if e is None or isinstance(e, str) else list(e) for e in spec],
            "unreduced": sorted(spec.unreduced), "reduced": sorted(spec.reduced)}


def _spec_from_json(doc):
    from ..sharding import PartitionSpec
    return PartitionSpec(*[tuple(e) if isinstance(e, list) else e for e in doc["entries"]],
                         unreduced=doc["unreduced"], reduced=doc["reduced"])


def _topology_document(compiled):
    from ..compiler.backends.stablehlo import lower_module
    entry = compiled._entry
    module = lower_module(entry.ssa)   # the module compile_for_topology compiled
    return _document(entry.function.name, module, compiled.serialized, entry.closed,
                     entry.in_avals, entry.out_weak, {}, compiled.platform,
                     compiled.platform_version, "libtpu", compiled.topology,
                     list(compiled.device_kinds))


def _backend_of(executable):
    module = type(executable).__module__
    for part, name in (("cuda", "CUDA"), ("llvm", "LLVM"), ("pjrt", "PJRT")):
        if part in module:
            return name
    return "reference"


def _document(name, module, executable, consts, in_avals, out_weak, held, platform,
              platform_version, plugin, topology, device_kinds):
    """The blob's document; `module` None for a partitioned executable (its caller adds the
    module's text and the mesh)."""
    described = {} if module is None else {
        "module": module.text, "module_name": module.name,
        "module_in": [aval_json(a) for a in module.in_avals],
        "module_out": [aval_json(a) for a in module.out_avals]}
    return {
        "function": name, **described, "mesh": None, "pmap": None,
        "arguments": [aval_json(a) for a in in_avals], "out_weak": list(out_weak),
        "held": sorted([int(k), int(v)] for k, v in held.items()),
        "constants": [array_json(np.asarray(c)) for c in consts],
        "executable": base64.b64encode(executable).decode(),
        "platform": platform, "platform_version": platform_version, "plugin": plugin,
        "topology": topology, "device_kinds": device_kinds}


def _read(blob):
    """The JSON document of a blob `serialize` wrote, or a ValueError saying why not."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"deserialize_and_load: expected the bytes serialize() returned, got "
                        f"{type(blob).__name__}")
    return json.loads(unframed(bytes(blob), _MAGIC, FORMAT_VERSION, ValueError, _foreign,
                               "Serialize the executable again", "the executable"))


def _foreign(blob):
    if blob.startswith(b"\x80"):
        return ("the blob is not kiln's: it looks like a pickle, as JAX's "
                "jax.experimental.serialize_executable writes, which holds jaxlib's objects "
                "kiln cannot read; serialize the executable with kiln")
    return (f"the blob is not a kiln serialized executable (it does not start with "
            f"{_MAGIC!r}: {blob[:16]!r}...); pass the bytes serialize() returned. The "
            f"plug-in's own bytes (CompiledForTopology.serialized) do not say the function's "
            f"argument types: pass serialize(compiled_for_topology)[0]")


def _candidates(backend, execution_devices):
    """The PjrtDevices an executable may be loaded on: `execution_devices`, else every device
    of `backend`; a single-device executable goes on the first."""
    from .. import pjrt
    if backend is not None and backend not in ("pjrt", "tpu"):
        raise ValueError(f"deserialize_and_load: backend {backend!r} does not load PJRT "
                         f"executables; use backend='pjrt' (the default plug-in) or 'tpu'")
    listed = pjrt.devices(backend or "pjrt")
    if execution_devices is None:
        return list(listed)
    execution_devices = list(execution_devices)
    if not execution_devices or not pjrt.on_pjrt(execution_devices):
        raise ValueError(f"deserialize_and_load: execution_devices must be PJRT devices "
                         f"(kiln.devices('pjrt')), got {execution_devices!r}")
    first = execution_devices[0]
    if backend is not None and first.layer.plugin != listed[0].layer.plugin:
        raise ValueError(f"Execution devices belong to a client other than `backend`. Got "
                         f"backend client: {listed[0].layer.plugin.name} "
                         f"({listed[0].platform}) and execution devices client: "
                         f"{first.layer.plugin.name} ({first.platform})")
    return execution_devices


def deserialize_and_load(serialized, in_tree, out_tree, backend=None, execution_devices=None):
    """A `Compiled` loaded from `serialize`'s blob onto the first of `execution_devices`
    (default: the first device of `backend`, "pjrt" or "tpu"; see the module docstring)."""
    from ..pjrt import Program
    doc = _read(serialized)
    candidates = _candidates(backend, execution_devices)
    here = candidates[0].layer
    if doc["platform"] != here.platform:
        made = f"topology {doc['topology']!r}, " if doc["topology"] else ""
        raise ValueError(
            f"deserialize_and_load: the executable of {doc['function']!r} was compiled for "
            f"platform {doc['platform']!r} ({made}{', '.join(sorted(set(doc['device_kinds'])))}"
            f", by {doc['plugin']}) and cannot be loaded on platform {here.platform!r} (the "
            f"plug-in {here.plugin.name}, {here.plugin.path}): PJRT loads an executable only "
            f"on the platform and plug-in version that compiled it. Load it on a machine with "
            f"{doc['platform']!r} devices (backend='tpu' for libtpu), or compile the function "
            f"here with kiln.jit(f, backend='pjrt')")
    arguments = [aval_from_json(a) for a in doc["arguments"]]
    if in_tree.num_leaves != len(arguments) or out_tree.num_leaves != len(doc["out_weak"]):
        raise ValueError(f"deserialize_and_load: in_tree {in_tree} and out_tree {out_tree} "
                         f"have {in_tree.num_leaves} and {out_tree.num_leaves} leaves, but the "
                         f"executable of {doc['function']!r} takes {len(arguments)} arguments "
                         f"and returns {len(doc['out_weak'])} results; pass the pytrees "
                         f"serialize() returned with this blob")
    executable = base64.b64decode(doc["executable"])
    constants = [array_from_json(c) for c in doc["constants"]]
    if doc["mesh"] is not None:
        return _partitioned(doc, candidates, executable, constants, arguments, in_tree,
                            out_tree)
    module = StableHloModule(doc["module"], doc["module_name"],
                             tuple(aval_from_json(a) for a in doc["module_in"]),
                             tuple(aval_from_json(a) for a in doc["module_out"]))
    if doc["pmap"] is not None:
        return _pmap(doc, candidates, module, executable, constants, arguments, in_tree,
                     out_tree)
    with _loading(doc, here):
        program = Program(module, candidates[0], executable)
    program.held = {out: i for out, i in doc["held"]}
    program.hold_constants(constants)
    return LoadedCompiled(_entry(doc, program, arguments, in_tree, out_tree))


@contextlib.contextmanager
def _loading(doc, here):
    """The plug-in's error loading the executable of `doc` on layer `here` as a PjrtError
    that says which plug-ins made and load it."""
    try:
        yield
    except PjrtError as e:
        raise PjrtError(f"the {here.platform} plug-in {here.plugin.name} could not load the "
                        f"serialized executable of {doc['function']!r} (compiled by "
                        f"{doc['plugin']}, platform version {doc['platform_version']!r}; this "
                        f"plug-in's is {here.info.client.platform_version!r}): "
                        f"{e.message}", e.code,
                        hint="serialize the executable again with this plug-in") from None


def _by_id(doc, ids, candidates, what):
    """The devices of `candidates` with ids `ids`, or a ValueError saying which are missing."""
    by_id = {d.id: d for d in candidates}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise ValueError(f"deserialize_and_load: the executable of {doc['function']!r} runs "
                         f"on the PJRT devices with ids {ids} ({what}), but execution_devices "
                         f"has none with id {missing}; pass execution_devices that include "
                         f"them (by default every device of the backend), or compile the "
                         f"function for the devices at hand")
    return [by_id[i] for i in ids]


def _pmap(doc, candidates, module, executable, constants, arguments, in_tree, out_tree):
    """A `PmapCompiled` of a pmap executable's document, loaded on its replicas' devices
    (found by id among `candidates`)."""
    from ..pjrt import ReplicatedProgram
    from ..pmap import _Entry, PmapCall, PmapCompiled, run_replicated
    from ..sharding import AxisType, Mesh
    facts = doc["pmap"]
    devices = _by_id(doc, facts["device_ids"], candidates,
                     f"{len(facts['device_ids'])} replicas")
    with _loading(doc, devices[0].layer):
        program = ReplicatedProgram(module, devices, executable)
    entry = _Entry()
    entry.executable, entry.consts, entry.out_tree = program, constants, out_tree
    entry.out_weak, entry.mapped_out = list(doc["out_weak"]), facts["out_axes"]
    entry.parallel, entry.guards = True, []
    mesh = Mesh(np.array(devices, dtype=object), (facts["axis_name"],), (AxisType.Auto,))
    axes = facts["in_axes"]
    return PmapCompiled(PmapCall(
        entry, doc["function"], in_tree, ((), ()), arguments, axes,
        lambda leaves: run_replicated(entry, leaves, axes, mesh, doc["function"]), "pjrt",
        facts["axis_name"]))


def _partitioned(doc, candidates, executable, constants, arguments, in_tree, out_tree):
    """A `PartitionedCompiled` of a partitioned executable's document, loaded on the devices
    of its mesh (found by id among `candidates`, as JAX finds a pickled executable's)."""
    from ..compiler.backends.pjrt.replicated import ReplicatedExecutable
    from ..pjrt_partitioned import _Entry, PartitionedCompiled
    from ..sharding import AxisType, Mesh, NamedSharding
    shape = doc["mesh"]["shape"]
    devices = _by_id(doc, doc["mesh"]["device_ids"], candidates,
                     f"a mesh of shape {tuple(shape)}")
    mesh = Mesh(np.array(devices, dtype=object).reshape(shape), doc["mesh"]["axis_names"],
                tuple(AxisType(t) for t in doc["mesh"]["axis_types"]))
    ins = [NamedSharding(mesh, _spec_from_json(s)) for s in doc["in_specs"]]
    outs = [NamedSharding(mesh, _spec_from_json(s)) for s in doc["out_specs"]]
    results = [aval_from_json(a) for a in doc["results"]]
    in_blocks = [a.update(shape=s.shard_shape(a.shape)) for s, a in zip(ins, arguments)]
    in_blocks += constants   # replicated
    here = devices[0].layer
    with _loading(doc, here):
        loaded = ReplicatedExecutable(
            here.info.client, doc["module"], in_blocks,
            [a.update(shape=s.shard_shape(a.shape)) for s, a in zip(outs, results)],
            [d.layer.info for d in devices], partitioned=True, shardy=doc["shardy"],
            serialized=executable, propagate=doc["propagate"])
    entry = _Entry()
    entry.text, entry.mesh, entry.shardy, entry.ssa = doc["module"], mesh, doc["shardy"], None
    entry.executable = loaded
    entry.constants = [[d.layer.to_device(np.asarray(c, order="C")) for c in constants]
                       for d in devices]
    entry.out_tree, entry.writes, entry.guards = out_tree, [], []
    entry.out_shardings, entry.out_avals, entry.out_weak = outs, results, list(doc["out_weak"])
    entry.held = sorted(i for _, i in doc["held"])
    entry.name, entry.in_tree, entry.in_avals = doc["function"], in_tree, tuple(arguments)
    entry.in_shardings = ins
    return PartitionedCompiled(entry)


class LoadedCompiled(XlaFigures, Compiled):
    """A `Compiled` loaded from a serialized executable: called as the original was; it has
    the StableHLO module and XLA's figures of the executable, not kiln's SSA form."""

    def as_text(self, level=None):
        """The StableHLO module the executable was compiled from (`level` None or
        "stablehlo")."""
        return self._entry.executable.as_text(level)

    _why_none = (", and an executable loaded from a serialized one has no SSA form to "
                 "count them on")

    def _loaded(self):
        program = self._entry.executable
        compiled = program._on(program.default).compiled
        return compiled.client.api, compiled.handle


class _Named:
    """What a loaded executable's entry says of its function: its name."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


def _entry(doc, program, arguments, in_tree, out_tree):
    """jit's entry for a loaded executable: what `Compiled` reads to call it."""
    entry = _Entry()
    entry.function = _Named(doc["function"])
    entry.ssa = None
    entry.executable = program
    entry.in_tree, entry.out_tree = in_tree, out_tree
    entry.in_avals = tuple(arguments)
    entry.out_weak = list(doc["out_weak"])
    entry.consts = entry.closed = []
    entry.held = sorted(i for _, i in doc["held"])
    entry.writes, entry.refs, entry.out_typed = [], None, None
    entry.guards = []
    return entry
