"""PJRT devices for users: `kiln.devices("pjrt")`, `kiln.devices("tpu")`, `device_put` onto them.

`devices("pjrt")` lists the devices of the first plug-in `plugins.discover()` finds
(`KILN_PJRT_PLUGIN`, else xla-cpu-pjrt, else JAX's CUDA plug-in, else libtpu where a TPU chip
is present); `devices("tpu")` those of libtpu, refused at once, before libtpu is loaded, where
libtpu is not installed or the PCI bus has no TPU chip (libtpu would otherwise look for a
Cloud TPU metadata server). One client per plug-in and process, created on first use.

A device is a `PjrtDevice` (a devices.Device: id, platform = the plug-in's platform name,
device_kind, process_index) whose `layer` is a `PjrtLayer`: what the runtime's GPU paths use
for any device with its own memory. `device_put(x, device)` makes an Array holding a
`DeviceBuffer(client.Buffer, layer)` that stays on the device between calls (zero copy when
the host data is read-only all the way down, otherwise copied, so a NumPy array changed later
cannot change it); `np.asarray(array)` copies it back. An Array on another device of the same
plug-in is copied device to device (`PjrtLayer.copy_from`). An eager operation on such arrays
runs on the device as a jit of the operation (pjrt_eager.py: kiln runs compiled code on PJRT
devices only).

`describe(found)` is the line `kiln doctor` prints about a plug-in. `compile_for_topology` compiles
a StableHLO module with libtpu for a TPU topology on a machine without TPUs.

`executable(mlir_text, in_avals, out_avals, device)` is the shim's Executable on a
PjrtDevice; called with Arrays on that device (or host values) it returns Arrays on it.
`compile_function(fn)` is `kiln.jit(f, backend="pjrt")`'s backend (staging.BACKENDS): the SSA
lowered to StableHLO, compiled for the device its arguments are on (the default plug-in's first
device for host arguments), its results left on the device (a `Program`, with `array_call`
for jit's dispatch fast path: a native builtin, compiler/backends/pjrt/entry.py, with the
native methods of methods.py installed beside it, or its Python definition `_python_call`).
Its donated arguments are aliased to results of their shape and dtype (`aliases`,
`tf.aliasing_output`): PJRT takes their buffers over (`Program.held`, which jit reads).
`compile_replicated(fn, devices)` is pmap's: one module with a replica per
device, run over all of them in one execution (`ReplicatedProgram`), its results left on the
devices (pjrt_spread.py makes them one Array).
"""
import os
import threading

import numpy as np

from .array import Array
from .compiler.backends.cuda.device import DeviceBuffer
from .compiler.backends.pjrt import client as pjrt
from .compiler.backends.pjrt import entry as native_entry, methods as native_methods, \
    plugins, topology as topologies
from .compiler.backends.pjrt.replicated import ReplicatedExecutable
from .devices import Device, chosen_cpu_count
from .distributed import process_layout
from .fastcall import MISS
from . import _default_device

_CLIENTS = {}
NATIVE_ENTRY = [True]   # jit's fast path as a native builtin where available (tests clear it)
_LOCK = threading.Lock()


def client_options(path):
    """PJRT_Client_Create's options for the plug-in at `path`: XLA's CPU plug-in (a file named
    `*cpu*`) gets `cpu_device_count` when a setting chose kiln's CPU device count
    (devices.chosen_cpu_count); it does not read XLA_FLAGS' host device count, and has 4
    devices otherwise. Another plug-in in a run of several processes (kiln.distributed) gets
    `node_id` and `num_nodes` (this process's index and the process count, as JAX passes
    them); the CPU plug-in reads neither (its client's process index stays 0)."""
    if "cpu" in os.path.basename(path):
        count = chosen_cpu_count()
        return {} if count is None else {"cpu_device_count": count}
    process, processes = process_layout()
    return {} if processes == 1 else {"node_id": process, "num_nodes": processes}


def client(path):
    """The process's client of the plug-in at `path`, created on first use; in a run of
    several processes a plug-in other than the CPU's also gets the processes' key-value store
    (pjrt_store.py), its keys prefixed by the plug-in's file name and a colon, as JAX gives its
    distributed client's prefixed by the platform's name."""
    with _LOCK:
        made = _CLIENTS.get(path)
        if made is None:
            store = None
            if process_layout()[1] > 1 and "cpu" not in os.path.basename(path):
                from .pjrt_store import shared_store
                store = shared_store()
            made = _CLIENTS[path] = pjrt.Client(
                plugins.load(path), client_options(path), store,
                os.path.basename(path).encode() + b":")
    return made


def _read_only(array):
    """Whether nothing can write `array`'s memory: it and every base it views are read-only."""
    while isinstance(array, np.ndarray):
        if array.flags.writeable:
            return False
        array = array.base
    return array is None or isinstance(array, bytes)


class PjrtLayer:
    """One PJRT device's memory, as the runtime's device paths see a layer; `backend` is the
    jit backend that arguments on it call (runtime/jit.py)."""
    xp = np
    backend = "pjrt"

    def __init__(self, found, info):
        self.plugin = found
        self.info = info
        self.platform = info.client.platform
        self.device_kind = info.kind
        self.name = f"{found.name} {self.platform}:{info.id}"
        self.kiln_device = PjrtDevice(info.id, self.platform, info.kind, info.process_index, self)

    def to_device(self, host):
        return self.info.client.put(host, self.info, zero_copy=_read_only(host))

    def to_host(self, buffer):
        return buffer.to_host()

    def copy_from(self, value):
        """`value` (a DeviceBuffer on another device of this plug-in's client) copied to this
        device without the host; None for any other value."""
        layer = value.layer
        if type(layer) is not PjrtLayer or layer.info.client is not self.info.client or \
                type(value.data) is not pjrt.Buffer:
            return None
        return value.data.copy_to(self.info)

    def synchronize(self):
        """Nothing to wait for here: transfers are awaited where they are made, and an
        execution's results through their own ready events (Array.block_until_ready)."""

    def eager(self, prim, values, params):
        """`prim` run on the device as a jit of it (pjrt_eager.py)."""
        from .pjrt_eager import run
        return run(prim, values, params)


class PjrtDevice(Device):
    """A device of a PJRT plug-in (see the module docstring)."""
    __slots__ = ()

    def __repr__(self):
        return f"PjrtDevice(platform={self.platform!r}, id={self.id}, " \
               f"plugin={self.layer.plugin.name!r})"

    def __eq__(self, other):
        return type(other) is PjrtDevice and (self.layer.plugin, self.id) == \
            (other.layer.plugin, other.id)

    def __hash__(self):
        return hash((self.layer.plugin, self.id))


_DEVICES = {}


def _devices_of(found):
    with _LOCK:
        listed = _DEVICES.get(found)
    if listed is None:
        made = client(found.path)
        listed = [PjrtLayer(found, info).kiln_device for info in made.devices]
        with _LOCK:
            listed = _DEVICES.setdefault(found, listed)
    return listed


def _unavailable(backend, why):
    return RuntimeError(f"Unable to initialize backend '{backend}': {why}")


def tpu_plugin():
    """libtpu's Found, or a RuntimeError saying why there is no TPU here (no load)."""
    path = plugins.libtpu_path()
    if path is None:
        raise _unavailable("tpu", "libtpu is not installed (pip install libtpu on a Cloud TPU "
                                  "VM, or set TPU_LIBRARY_PATH to libtpu.so)")
    if plugins.tpu_chips() == 0:
        raise _unavailable("tpu", f"this machine has no TPU chip (no Google TPU device under "
                                  f"/sys/bus/pci/devices); libtpu ({path}) runs on Cloud TPU VMs")
    return plugins.Found("libtpu", path)


def default_plugin():
    """The plug-in `devices("pjrt")` uses (see the module docstring)."""
    for found in plugins.discover():
        if found.name != "libtpu" or plugins.tpu_chips():
            return found
    raise _unavailable("pjrt", f"no PJRT plug-in found: pip install 'kiln[pjrt]' (XLA's CPU "
                               f"plug-in) or set {plugins.PLUGIN_VARIABLE}=/path/to/plugin.so")


def describe(found):
    """One line about a discovered plug-in for `kiln doctor`: its PJRT C API version, the
    StableHLO versions it reads, its platform and devices (libtpu is not loaded without a
    TPU chip)."""
    if found.name == "libtpu" and not plugins.tpu_chips():
        return f"{found.name} ({found.path}): not loaded, this machine has no TPU chip"
    try:
        made = client(found.path)
    except Exception as e:
        return f"{found.name} ({found.path}): error: {e}"
    attributes = made.api.attributes()
    stablehlo = ".".join(map(str, attributes.get("stablehlo_current_version", ()))) or "?"
    kinds = sorted({d.kind for d in made.devices})
    return (f"{found.name} ({found.path}): PJRT C API {made.api.version[0]}."
            f"{made.api.version[1]}, StableHLO {stablehlo}, platform {made.platform!r} with "
            f"{len(made.devices)} device{'s' if len(made.devices) != 1 else ''} "
            f"({', '.join(kinds)})")


def devices(backend):
    """The devices of backend "pjrt" or "tpu" (see the module docstring)."""
    return list(_devices_of(tpu_plugin() if backend == "tpu" else default_plugin()))


def compile_for_topology(mlir_text, topology, devices=1, partitioned=False, shardy=False,
                         propagate=(), shown="the module"):
    """A StableHLO module (text, public `main`) compiled by libtpu for the TPU topology named
    `topology` ("v5e:2x2", ...) on a machine without TPUs: a `compiler.backends.pjrt.topology.
    ForTopology` (the serialized executable, the platform, the topology's devices' kinds, and
    the ids of the devices it runs on). The module runs on the topology's first `devices` devices, in its order: as that many
    replicas (a pmap's module, `mhlo.num_replicas`), or with `partitioned` as that many
    partitions of XLA's SPMD partitioner (a sharded jit's; `shardy`, `propagate` as
    client.compile_options). A topology with fewer devices is a ValueError naming both
    counts (`shown`: what the module is, for it). Where libtpu is not installed a
    RuntimeError says so at once; libtpu is loaded with the metadata server query off where
    there is no chip (plugins.prepare_libtpu), so it does not wait for one."""
    path = plugins.libtpu_path()
    if path is None:
        raise _unavailable("tpu", "compiling for a TPU topology needs libtpu, which is not "
                                  "installed (pip install libtpu, or set TPU_LIBRARY_PATH to "
                                  "libtpu.so); no TPU is needed")

    def options(ids):
        if devices > len(ids):
            raise ValueError(f"compile_for_topology: {shown} runs on {devices} devices, but "
                             f"the topology {topology!r} has {len(ids)}; name a topology "
                             f"with at least {devices} devices, or lower the function over "
                             f"a mesh (or pmap) of at most {len(ids)}")
        return pjrt.compile_options(*ids[:devices], partitioned=partitioned, shardy=shardy,
                                    propagate=propagate)
    made = topologies.compile_for(plugins.load(path), topology, mlir_text.encode(), options)
    return made._replace(device_ids=made.device_ids[:devices])


def executable(mlir_text, in_avals, out_avals, device, serialized=None):
    """A StableHLO module compiled for `device` (a PjrtDevice), or with `serialized` the
    plug-in's executable loaded from those bytes instead (`Executable.serialize()`'s); see
    `Executable`."""
    if not isinstance(device, PjrtDevice):
        raise TypeError(f"executable: {device!r} is not a PJRT device; use one of "
                        f"kiln.devices('pjrt')")
    return Executable(pjrt.Executable(device.layer.info.client, mlir_text, in_avals, out_avals,
                                      device.layer.info, serialized), device.layer)


class Executable:
    """A compiled StableHLO module on one PJRT device, called with kiln Arrays (or anything
    NumPy converts): Arrays already on the device are passed as they are, host values copied in
    (an Array on another PJRT device is a ValueError naming both devices); the results are
    Arrays that stay on the device."""

    def __init__(self, compiled, layer):
        self.compiled = compiled
        self.layer = layer

    def serialize(self):
        """The plug-in's bytes of this executable, which `executable(..., serialized=)`
        loads (client.Executable.serialize)."""
        return self.compiled.serialize()

    def __call__(self, *args):
        from .array import Array
        return [Array(out) for out in
                self.buffers(*[a._value if isinstance(a, Array) else a for a in args])]

    def buffers(self, *values):
        """Run on Arrays' values (DeviceBuffers of this device, or host arrays): one
        DeviceBuffer per output."""
        inputs = [v.data if type(v) is DeviceBuffer and type(v.data) is pjrt.Buffer else
                  np.asarray(v) for v in values]
        return [DeviceBuffer(out, self.layer) for out in self.compiled(*inputs)]


def compile_function(fn, donated=()):
    """jit's backend="pjrt" (staging.BACKENDS): `fn` (SSA after the reference pipeline) lowered
    to StableHLO (a BackendUnsupportedError, located, for what the lowering refuses) and
    compiled for the default PJRT device; see `Program`. A donated input (`donated`: indices
    of `fn`'s inputs) gives its buffer to the first result of its shape and dtype no other
    donated input took (`aliases`)."""
    from .compiler.backends.stablehlo import lower_module
    kind = lambda v: (v.aval.shape, v.aval.dtype)
    found = aliases([kind(v) for v in fn.invars], [kind(v) for v in fn.outvars], donated)
    device = devices("pjrt")[0]
    program = Program(lower_module(fn, aliases=found, dots=kiln_dots(device)), device)
    program.held = {out: i for i, out in found.items()}
    return program


def kiln_dots(device):
    """The custom-call targets of kiln's matrix products that `device`'s plug-in has
    (pjrt/ffi_dot.py), unless KILN_PJRT_KILN_DOTS=0 keeps XLA's own dots."""
    if os.environ.get("KILN_PJRT_KILN_DOTS", "1") == "0":
        return {}
    return device.layer.info.client.kiln_dots


def aliases(ins, outs, donated):
    """{input index: output index} pairing each donated input with the first free output of
    its kind (`ins`, `outs`: one comparable key per input and output, as shape and dtype):
    JAX's rule for donate_argnums."""
    free = list(range(len(outs)))
    found = {}
    for i in sorted(donated):
        k = next((k for k in free if outs[k] == ins[i]), None)
        if k is not None:
            free.remove(k)
            found[i] = k
    return found


class Program:
    """A jitted function's StableHLO module on PJRT devices: called with the values of its
    arguments (DeviceBuffers on a PJRT device, host arrays) and its constants, it runs on the
    device its first PJRT argument is on, else on the default device in force when that is a
    PJRT device (kiln.default_device), else on `default`, compiling the module once per
    device (for `default` at once), and returns one DeviceBuffer per output, left on the
    device. After `hold_constants(consts)` it keeps the constants itself, put on each device
    once, and is called with the arguments only. With `serialized` (the bytes of
    `serialize()`) its executable on `default` is loaded from them, not compiled."""

    def __init__(self, module, default, serialized=None):
        self.module = module
        self.default = default
        self._compiled = {}
        self._lock = threading.Lock()
        self._constants = ()
        self._placed = {}   # device -> the constants as DeviceBuffers on it
        self.held = {}   # output index -> the donated input whose buffer it takes
        self._on(default, serialized)

    def hold_constants(self, consts):
        """Keep `consts` (@main's last arguments) to pass at every call; returns what the
        caller passes instead (nothing)."""
        self._constants = [np.asarray(c) for c in consts]
        return []

    def _constants_on(self, device):
        placed = self._placed.get(device)
        if placed is None:
            layer = device.layer
            placed = self._placed.setdefault(
                device, [DeviceBuffer(layer.to_device(c), layer) for c in self._constants])
        return placed

    def _on(self, device, serialized=None):
        exe = self._compiled.get(device)
        if exe is None:
            with self._lock:
                exe = self._compiled.get(device)
                if exe is None:
                    exe = self._compiled[device] = executable(
                        self.module.text, self.module.in_avals, self.module.out_avals, device,
                        serialized)
        return exe

    def serialize(self):
        """The plug-in's bytes of the executable on the default device."""
        return self._on(self.default).serialize()

    def __call__(self, *values):
        chosen = _default_device.current() if _default_device.IN_FORCE[0] else None
        device = chosen if type(chosen) is PjrtDevice else self.default
        for v in values:
            if type(v) is DeviceBuffer and type(v.layer) is PjrtLayer:
                device = v.layer.kiln_device
                break
        if self.held:   # a donated host value goes in as a buffer of its own, not lent memory
            values = list(values)
            for i in self.held.values():
                if type(values[i]) is not DeviceBuffer:
                    values[i] = DeviceBuffer(device.layer.to_device(np.array(values[i])),
                                             device.layer)
        return self._on(device).buffers(*values, *self._constants_on(device))

    def array_call(self, args, weak, outputs, guards_ok):
        """jit's dispatch fast path (runtime/fastcall.py) for calls like `args` (kiln Arrays
        on one PJRT device for which the module is compiled; `weak` their weak types): a
        function of a later call's arguments. When the guards hold (`guards_ok()`, unless
        None) and the arguments are Arrays with those weak types holding live buffers of
        that device with the shapes and dtypes the module takes, it runs there as `__call__`
        would and returns the outputs (`outputs`: a fastcall.Outputs); otherwise
        fastcall.MISS, with nothing run. None when `args` are not such a call. Where the
        interpreter allows it (`NATIVE_ENTRY`, entry.available) the function is a builtin
        made by compiler/backends/pjrt/entry.py that does all of it in native code; else,
        and as the definition the tests compare it with, `_python_call`."""
        first = args[0]._value if args and type(args[0]) is Array else None
        layer = first.layer if type(first) is DeviceBuffer else None
        exe = self._compiled.get(layer.kiln_device) if type(layer) is PjrtLayer else None
        if exe is None:
            return None
        compiled = exe.compiled
        placed = self._constants_on(layer.kiln_device)
        constants = [c.data.handle for c in placed]
        avals = compiled.in_avals[:len(compiled.in_avals) - len(constants)]
        offsets = NATIVE_ENTRY[0] and native_entry.available(Array, DeviceBuffer, pjrt.Buffer)
        if not offsets:
            return _python_call(compiled, layer, avals, constants, placed, weak,
                                outputs.rebuild, guards_ok)
        native_methods.install(Array, DeviceBuffer, pjrt.Buffer, compiled.client, offsets)
        from .jit import Jitted, NativeCallJitted, native_call_checks
        native_methods.install_call(NativeCallJitted, "_fast", Jitted.__call__, MISS,
                                    *native_call_checks())
        spec = native_entry.Spec(
            function=compiled.runner().context, array=Array, device_buffer=DeviceBuffer,
            buffer=pjrt.Buffer, layer=layer, client=compiled.client, device=compiled.device,
            inputs=[(w, shape, dtype) for w, (shape, dtype) in zip(weak, avals)],
            outputs=[(w, shape, dtype) for w, (shape, dtype) in
                     zip(outputs.weak, compiled.out_avals)],
            constants=constants, single=outputs.single, finish=outputs.finish,
            guards_ok=guards_ok, live=compiled._live, miss=MISS,
            raise_error=compiled.client.api.raise_error, keep=placed)
        return native_entry.make(spec, offsets)

    def as_text(self, level=None):
        """The StableHLO module the plug-in compiles (`level`: None or "stablehlo")."""
        if level not in (None, "stablehlo"):
            raise ValueError(f"the pjrt backend's executable is shown as StableHLO (level None "
                             f"or 'stablehlo'), not {level!r}")
        return self.module.text


def _python_call(compiled, layer, avals, constants, placed, weak, rebuild, guards_ok):
    """Program.array_call's function in Python: the executable's `runner` on the handles of
    the arguments and the constants, the results wrapped in DeviceBuffers, `rebuild`."""
    count, run, array = len(avals), compiled.runner(), Array
    device_buffer, pjrt_buffer, new = DeviceBuffer, pjrt.Buffer, object.__new__

    def call(args):
        if len(args) != count or guards_ok is not None and not guards_ok():
            return MISS
        handles = []
        append = handles.append
        for a, w, (shape, dtype) in zip(args, weak, avals):
            if type(a) is not array or a.weak_type is not w:
                return MISS
            v = a._value
            if type(v) is not device_buffer or v.layer is not layer:
                return MISS
            b = v.data
            if type(b) is not pjrt_buffer or b.shape != shape or \
                    b.dtype is not dtype and b.dtype != dtype:
                return MISS
            h = b.handle
            if not h:   # a deleted argument: the executable says so
                b._handle()
            append(h)
        results = []
        for b in run(handles + constants if constants else handles):
            out = new(device_buffer)
            out.data, out.layer = b, layer
            results.append(out)
        return rebuild(results)
    call.constants = placed   # alive as long as the function
    return call


def on_pjrt(devices):
    """Whether `devices` (a pmap's `devices=`, a mesh's devices) are all PJRT devices."""
    devices = list(devices)
    return bool(devices) and all(type(d) is PjrtDevice for d in devices)


def compile_replicated(fn, mesh_axes, devices, **params):
    """pmap's backend "pjrt": (the SSA, its `ReplicatedProgram`). `fn` is one
    replica's SSA; after the reference pipeline its collectives are told their replicas'
    layout (`mesh_axes`, and `params` such as `processes`: replicas.with_collective_params),
    and it is lowered to one StableHLO module with a replica per device of `devices`
    (PjrtDevices of one plug-in, in replica order; its products kiln's where the plug-in has
    the handlers: `kiln_dots`) and compiled for them. With `processes` above 1 the axis spans
    that many processes, and pjrt_processes.py supplies the collectives' part across them."""
    from .compiler.backends.stablehlo import lower_module
    from .compiler.primitives.replicas import with_collective_params
    from .staging import run_pipeline
    ssa = with_collective_params(run_pipeline(fn, "pjrt"), mesh_axes=mesh_axes, **params)
    if params.get("processes", 1) > 1:   # collectives across processes: FFI handlers over MPI
        from . import pjrt_processes
        pjrt_processes.prepare(devices)
    module = lower_module(ssa, replicas=len(devices), dots=kiln_dots(devices[0]))
    return ssa, ReplicatedProgram(module, devices, ssa=ssa)


class ReplicatedProgram:
    """A pmap's StableHLO module compiled with one replica per device:
    `run_replicas(argument_lists)` runs replica i on `argument_lists[i]` (its arguments and
    constants: DeviceBuffers of device i, or host values) in one execution over every device,
    and returns each replica's results as DeviceBuffers left on its device. `serialized`
    (bytes of `compiled.serialize()`) loads the plug-in's executable instead of compiling the
    module."""
    one_call = True   # every replica runs in one call (_replica_threads.run_replicas)

    def __init__(self, module, devices, serialized=None, ssa=None):
        if not on_pjrt(devices) or len({d.layer.plugin for d in devices}) > 1:
            raise ValueError(f"a replicated PJRT program runs on the devices of one PJRT "
                             f"plug-in, got {list(devices)}")
        self.module, self.ssa = module, ssa
        self.devices = list(devices)
        infos = [d.layer.info for d in self.devices]
        self._placed = None
        self.compiled = ReplicatedExecutable(infos[0].client, module.text, module.in_avals,
                                             module.out_avals, infos, serialized=serialized)

    def portable(self):
        """The module without kiln's matrix products as the CPU plug-in's custom calls (what
        `as_text("stablehlo")` and topologies get), or None for a loaded program."""
        from .compiler.backends.stablehlo import lower_module
        return None if self.ssa is None else lower_module(self.ssa,
                                                          replicas=len(self.devices))

    def constants_on_devices(self, consts):
        """`consts` (the staged function's constants, the same at every call) as
        DeviceBuffers on each device, one list per device, put there on the first call."""
        if self._placed is None:
            self._placed = [[DeviceBuffer(d.layer.to_device(np.asarray(c)), d.layer)
                             for c in consts] for d in self.devices]
        return self._placed

    def run_replicas(self, argument_lists, group=None):
        inputs = [[v.data if type(v) is DeviceBuffer and type(v.data) is pjrt.Buffer else
                   np.asarray(v) for v in values] for values in argument_lists]
        return [[DeviceBuffer(b, d.layer) for b in row]
                for row, d in zip(self.compiled(inputs), self.devices)]

    def __call__(self, *values):
        return self.run_replicas([values])[0]

    as_text = Program.as_text
