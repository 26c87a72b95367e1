"""`kiln.experimental.serialize_executable`: JAX's `serialize` and `deserialize_and_load` for
executables of PJRT plug-ins (docs/pjrt.md, "Serialized executables").

`serialize(compiled)` takes `kiln.jit(f, backend="pjrt").lower(...).compile()` (or a
`Lowered.compile_for_topology(...)` result) and returns `(blob, in_tree, out_tree)`, as JAX
does: the pytrees are returned, not stored. The blob is kiln's: a first line naming the
format and its version, a line with the SHA-256 of the rest, then a JSON document with the
plug-in's serialized executable (`PJRT_Executable_Serialize`, base64), the platform and
plug-in that compiled it, the types of the arguments and results (with their weak types),
the donations, the arrays the function closes over (passed as `@main`'s last arguments) and
the StableHLO module (what `as_text()` shows, and what another device of the plug-in
compiles). No pickle: loading the blob runs no Python code of it, but the plug-in's
executable is native code, so a blob should come from a trusted source, as JAX warns.

`deserialize_and_load(blob, in_tree, out_tree, backend=None, execution_devices=None)` checks
the blob and that its platform is the target plug-in's (else a ValueError naming both and
what to do), loads the executable with `PJRT_Executable_DeserializeAndLoad` on the first
execution device (the plug-in's error, for bytes it cannot read, is a PjrtError carrying its
message) and returns a `Compiled` that is called as the original was.
"""
import base64
import json

import numpy as np

from ..compiler.backends.pjrt.api import PjrtError
from ..compiler.backends.stablehlo.module import StableHloModule
from ..export import (aval_json, aval_from_json, array_json, array_from_json, framed,
                      unframed)
from ..jit import Compiled, CompiledForTopology, _Entry

_MAGIC = b"kiln.serialize_executable"
FORMAT_VERSION = 1

__all__ = ["serialize", "deserialize_and_load"]


def serialize(compiled):
    """`(blob, in_tree, out_tree)` of a compiled PJRT executable (see the module docstring)."""
    if isinstance(compiled, CompiledForTopology):
        document = _topology_document(compiled)
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
    return {
        "function": name, "module": module.text, "module_name": module.name,
        "module_in": [aval_json(a) for a in module.in_avals],
        "module_out": [aval_json(a) for a in module.out_avals],
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


def _target(backend, execution_devices):
    """The PjrtDevice the executable is loaded on."""
    from .. import pjrt
    if backend is not None and backend not in ("pjrt", "tpu"):
        raise ValueError(f"deserialize_and_load: backend {backend!r} does not load PJRT "
                         f"executables; use backend='pjrt' (the default plug-in) or 'tpu'")
    listed = pjrt.devices(backend or "pjrt")
    if execution_devices is None:
        return listed[0]
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
    return first


def deserialize_and_load(serialized, in_tree, out_tree, backend=None, execution_devices=None):
    """A `Compiled` loaded from `serialize`'s blob onto the first of `execution_devices`
    (default: the first device of `backend`, "pjrt" or "tpu"; see the module docstring)."""
    from ..pjrt import Program
    doc = _read(serialized)
    device = _target(backend, execution_devices)
    here = device.layer
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
    module = StableHloModule(doc["module"], doc["module_name"],
                             tuple(aval_from_json(a) for a in doc["module_in"]),
                             tuple(aval_from_json(a) for a in doc["module_out"]))
    try:
        program = Program(module, device, base64.b64decode(doc["executable"]))
    except PjrtError as e:
        raise PjrtError(f"the {here.platform} plug-in {here.plugin.name} could not load the "
                        f"serialized executable of {doc['function']!r} (compiled by "
                        f"{doc['plugin']}, platform version {doc['platform_version']!r}; this "
                        f"plug-in's is {here.info.client.platform_version!r}): "
                        f"{e.message}", e.code,
                        hint="serialize the executable again with this plug-in") from None
    program.held = {out: i for out, i in doc["held"]}
    program.hold_constants([array_from_json(c) for c in doc["constants"]])
    return LoadedCompiled(_entry(doc, program, arguments, in_tree, out_tree))


class LoadedCompiled(Compiled):
    """A `Compiled` loaded from a serialized executable: called as the original was; it has
    the StableHLO module and XLA's figures of the executable, not kiln's SSA form."""

    def as_text(self, level=None):
        """The StableHLO module the executable was compiled from (`level` None or
        "stablehlo")."""
        return self._entry.executable.as_text(level)

    def cost_analysis(self):
        """XLA's cost properties of the loaded executable (a dict of floats)."""
        return self._figures("cost_analysis", "cost properties")

    def memory_analysis(self):
        """XLA's CompiledMemoryStats of the loaded executable."""
        from ..analysis import CompiledMemoryStats
        return CompiledMemoryStats(**self._figures("memory_stats", "memory statistics"))

    def _figures(self, name, what):
        from ..compiler.backends.pjrt import client
        program = self._entry.executable
        compiled = program._on(program.default).compiled
        found = getattr(client, name)(compiled.client.api, compiled.handle)
        if found is None:
            raise ValueError(f"the plug-in gives no {what} of executables, and an executable "
                             f"loaded from a serialized one has no SSA form to count them on")
        return found


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
