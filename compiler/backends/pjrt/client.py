"""PJRT clients, devices, buffers and executables as Python objects over `api`.

`Client(plugin, options=None, store=None, store_prefix=b"")` creates a client of a loaded
plug-in (`plugins.load(path)`; the create options below), with its `platform`,
`platform_version`, `process_index` and `devices` (`DeviceInfo`: handle, id, kind, process
index; the addressable ones), and `kiln_dots`: the custom-call targets of kiln's matrix products
registered with a CPU plug-in (ffi_dot.py; {} for other platforms or where the plug-in cannot
take them). Objects keep what they need alive: a buffer or an executable holds its client, so
the client is destroyed after them (`close()`, or when the last reference goes; never while the
interpreter shuts down, when the plug-in's threads may already be gone).

`client.put(array, device, zero_copy=False)` copies a NumPy array to a device
(`PJRT_Client_BufferFromHostBuffer`, C-contiguous data, no strides): by default with "immutable
until transfer completes" semantics, the host array kept until the plug-in's done event fires,
which `put` awaits; with `zero_copy=True` ("immutable zero copy") a CPU plug-in may use the host
memory itself as the buffer, so the host array is kept for the buffer's whole life and must not
change (the caller's promise: kiln asks for it only for host data that is read-only down to its
base, and for an executable's host arguments during one call). The CPU plug-in aliases only
64-byte aligned memory and copies the rest. A `Buffer` has an ndarray's metadata (shape, dtype,
...), `to_host()` (`PJRT_Buffer_ToHostBuffer` into a fresh array, awaited) and
`copy_to(device)` (`PJRT_Buffer_CopyToDevice`: to another device of the client).

`Executable(client, mlir_text, in_avals, out_avals, device=None, serialized=None)` compiles a
StableHLO module in MLIR text (program format "mlir") for one device (default: the first), or
with `serialized` (bytes of `executable.serialize()`, `PJRT_Executable_Serialize`) loads the
plug-in's executable instead (`PJRT_Executable_DeserializeAndLoad`, its compile options
replaced by ones naming `device`), and checks that the
results the plug-in compiled are `out_avals` (shapes and dtypes, or only their number where the
plug-in does not report them); `executable(*inputs)` takes Buffers of that device or host arrays
(passed as zero-copy buffers for the call's duration), checks their count, shapes and dtypes
against `in_avals` before calling into the plug-in, runs (`PJRT_LoadedExecutable_Execute`,
with argument structs built once per executable) and returns one Buffer per output aval. With
host inputs it awaits the device's completion event (the host memory is lent for the call
only, and an execution error is raised there); with Buffers only it returns once the execution
is enqueued, and the results' ready events (awaited by `to_host` and `block_until_ready`)
carry an execution error. `execute(buffers)` is that last case without the checks, made by one
native call (native.py); `runner()` is the same as a function of the buffers' handles, made
once per executable, which a caller's fast path calls (its result Buffers are made without
`Buffer.__init__`). The ctypes calls here are the definition the native ones are tested
against, and the path of host inputs and of a call made while another thread is in the
native one.
`block_until_ready` and the destruction of a buffer are one native call each too (and,
once jit's native fast path is in use, native methods without Python: methods.py). Avals are
anything with `shape` and `dtype` (kiln's ShapedArray, NumPy arrays).

Compile options are a serialized xla.CompileOptionsProto (`compile_options`): an empty proto
aborts the XLA CPU plug-in (a CHECK on replica_count > 0), so kiln sends the smallest valid
one: executable_build_options (field 3) with num_replicas (field 4: 1, or one per device of a
replicated module, replicated.py), num_partitions = 1 (field 5) and a device_assignment
(field 9: replica_count, computation_count 1, the devices' ids in replica order) that pins
the executable to its devices. A partitioned module (sharded jit, replicated.py) has one
replica, num_partitions = its device count, use_spmd_partitioning (field 6), one computation
per device and, for a module with Shardy's shardings, use_shardy_partitioner (field 19).

`Client(table, options, store, store_prefix)` passes `options` ({name: int}) as
PJRT_Client_Create's create options (the CPU plug-in reads `cpu_device_count`) and, given a
key-value `store`, the callbacks over it (kv_store.py; keys prefixed by `store_prefix`) that a
multi-process plug-in shares its processes' data through.
"""
import ctypes as C
import sys
import threading
import weakref

import numpy as np

from . import api, compile_cache, ffi_dot, kv_store, native


def _varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, value):
    """A protobuf field: an int (varint) or bytes (length-delimited)."""
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def compile_options(*device_ids, partitioned=False, shardy=False, propagate=()):
    """The serialized CompileOptionsProto for one partition and one replica per id of
    `device_ids`, replica i on device `device_ids[i]`; `partitioned`: one replica and one
    partition per id instead, partition i on device `device_ids[i]`, for XLA's SPMD
    partitioner (use_spmd_partitioning, field 6), with `shardy` its Shardy partitioner
    (use_shardy_partitioner, field 19) for a module with `sdy` shardings; `propagate` (one
    bool per result: allow_spmd_sharding_propagation_to_output, field 12) lets XLA choose
    the sharding of the results marked True."""
    count = len(device_ids)
    if partitioned:
        computations = b"".join(_field(3, _field(1, i)) for i in device_ids)
        assignment = _field(1, 1) + _field(2, count) + computations
        build = _field(4, 1) + _field(5, count) + _field(6, 1) + _field(9, assignment)
        chosen = _field(12, bytes(map(bool, propagate))) if any(propagate) else b""
        return _field(3, build + chosen + (_field(19, 1) if shardy else b""))
    computation = b"".join(_field(1, i) for i in device_ids)
    assignment = _field(1, count) + _field(2, 1) + _field(3, computation)
    build = _field(4, count) + _field(5, 1) + _field(9, assignment)
    return _field(3, build)


class DeviceInfo:
    """A device of a client: `handle` (PJRT_Device*), `id`, `kind`, `process_index`."""
    __slots__ = ("client", "handle", "id", "kind", "process_index")

    def __init__(self, client, handle):
        self.client = client
        self.handle = handle
        table = client.api
        desc = table.call("Device_GetDescription", api.args(
            api.DeviceGetDescription, device=handle)).device_description
        self.id = table.call("DeviceDescription_Id", api.args(
            api.DescriptionInt, device_description=desc)).value
        self.process_index = table.call("DeviceDescription_ProcessIndex", api.args(
            api.DescriptionInt, device_description=desc)).value
        self.kind = table.string("DeviceDescription_Kind", api.DescriptionString,
                                 device_description=desc)

    def __repr__(self):
        return f"DeviceInfo({self.client.platform}:{self.id}, {self.kind!r})"


class Client:
    """A PJRT client of the plug-in `table` (an api.Api). See the module docstring."""

    def __init__(self, table, options=None, store=None, store_prefix=b""):
        self.api = table
        named = [api.args(api.NamedValue, name=k.encode(), name_size=len(k),
                          type=api.NAMED_INT64, value=api.NamedValueData(int64_value=v),
                          value_size=1) for k, v in sorted((options or {}).items())]
        listed = (api.NamedValue * max(1, len(named)))(*named)
        kv = kv_store.callbacks(store, store_prefix) if store is not None else {}
        self._kv_callbacks = kv.pop("keep", None)   # (the plug-in may call them at any time)
        self.handle = table.call("Client_Create", api.args(
            api.ClientCreate, create_options=listed, num_options=len(named), **kv)).client
        self.platform = table.string("Client_PlatformName", api.ClientString, client=self.handle)
        self.platform_version = table.string("Client_PlatformVersion", api.ClientString,
                                             client=self.handle)
        self.process_index = table.call("Client_ProcessIndex", api.args(
            api.ClientProcessIndex, client=self.handle)).process_index
        listed = table.call("Client_AddressableDevices", api.args(
            api.ClientDevices, client=self.handle))
        self.devices = [DeviceInfo(self, listed.devices[i]) for i in range(listed.num_devices)]
        # kiln's matrix-product handlers, registered with a CPU plug-in (ffi_dot.py)
        self.kiln_dots = ffi_dot.register(table) if self.platform == "cpu" else {}
        # The native await (ready event) and destruction of a buffer: fn(table_address, handle)
        self.table_address = C.addressof(table.table)
        self.native_await, self.native_destroy = native.buffer_functions()

    def device(self, device):
        """`device` (a DeviceInfo of this client, or None: the first) checked."""
        if device is None:
            if not self.devices:
                raise api.PjrtError(f"the {self.platform} client has no devices", "NOT_FOUND")
            return self.devices[0]
        if not isinstance(device, DeviceInfo) or device.client is not self:
            raise ValueError(f"{device!r} is not a device of this {self.platform} PJRT client")
        return device

    def put(self, array, device=None, zero_copy=False):
        """`array` (NumPy) as a Buffer on `device` (see the module docstring)."""
        return Buffer.from_host(self, array, self.device(device), zero_copy)

    def wait(self, event):
        """Await a PJRT_Event and destroy it; its error is raised after it is destroyed."""
        if not event:
            return
        try:
            self.api.call("Event_Await", api.args(api.Event, event=event))
        finally:
            self.api.call("Event_Destroy", api.args(api.Event, event=event))

    # Read through the class: while the interpreter finalizes, this module's globals may
    # already be None when the client goes.
    _finalizing = staticmethod(sys.is_finalizing)

    def close(self):
        """Destroy the client (every buffer and executable of it must be gone)."""
        handle, self.handle = getattr(self, "handle", None), None
        if handle and not self._finalizing():
            self.api.call("Client_Destroy", api.args(api.Client, client=handle))

    __del__ = close

    def __repr__(self):
        return f"Client({self.platform} {self.platform_version!r}, {len(self.devices)} devices)"


def _buffer_type(dtype):
    code = api.BUFFER_TYPES.get(np.dtype(dtype).name)
    if code is None:
        raise api.PjrtUnsupportedError(f"no PJRT buffer type for dtype {np.dtype(dtype).name}",
                                       hint="kiln moves bool, (u)int8-64, float16/32/64 and "
                                       "complex64/128 arrays")
    return code


def _dims(shape):
    return (C.c_int64 * max(1, len(shape)))(*shape)


class Buffer:
    """An array on a PJRT device: `handle` (PJRT_Buffer*), its client, shape and dtype."""
    __slots__ = ("client", "handle", "device", "shape", "dtype", "_host", "_done")

    class _Flags:
        c_contiguous = aligned = True
        writeable = False

    flags = _Flags()
    # Read through the class: while the interpreter finalizes, this module's globals may
    # already be None when the last buffers go.
    _finalizing = staticmethod(sys.is_finalizing)

    def __init__(self, client, handle, device, shape, dtype, host=None, done=None):
        self.client = client
        self.handle = handle
        self.device = device
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self._host = host   # the host array a zero-copy buffer may alias, kept while it lives
        self._done = done   # its done_with_host_buffer event, destroyed with the buffer

    @classmethod
    def from_host(cls, client, array, device, zero_copy):
        array = np.asarray(array, order="C")   # (ascontiguousarray makes rank 0 rank 1)
        kind = _buffer_type(array.dtype)
        dims = _dims(array.shape)
        semantics = api.IMMUTABLE_ZERO_COPY if zero_copy else \
            api.IMMUTABLE_UNTIL_TRANSFER_COMPLETES
        out = client.api.call("Client_BufferFromHostBuffer", api.args(
            api.BufferFromHostBuffer, client=client.handle, data=array.ctypes.data, type=kind,
            dims=dims, num_dims=array.ndim, host_buffer_semantics=semantics,
            device=device.handle))
        if zero_copy:
            return cls(client, out.buffer, device, array.shape, array.dtype, array,
                       out.done_with_host_buffer)
        client.wait(out.done_with_host_buffer)
        return cls(client, out.buffer, device, array.shape, array.dtype)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def _handle(self):
        if not self.handle:
            raise RuntimeError("this PJRT buffer has been deleted")
        return self.handle

    def to_host(self):
        """The buffer's value as a fresh NumPy array (awaited)."""
        out = np.empty(self.shape, self.dtype)
        done = self.client.api.call("Buffer_ToHostBuffer", api.args(
            api.BufferToHostBuffer, src=self._handle(), dst=out.ctypes.data,
            dst_size=out.nbytes)).event
        self.client.wait(done)
        return out

    def copy_to(self, device):
        """This buffer copied to `device`, another device of its client
        (`PJRT_Buffer_CopyToDevice`, without the host); the copy carries its ready event."""
        if not isinstance(device, DeviceInfo) or device.client is not self.client:
            raise ValueError(f"{device!r} is not a device of this buffer's "
                             f"{self.client.platform} PJRT client")
        out = self.client.api.call("Buffer_CopyToDevice", api.args(
            api.BufferCopyToDevice, buffer=self._handle(), dst_device=device.handle))
        return Buffer(self.client, out.dst_buffer, device, self.shape, self.dtype)

    def block_until_ready(self):
        """Await the buffer's ready event (one native call); an execution's error raised."""
        handle, client = self.handle, self.client
        if not handle:
            self._handle()
        error = client.native_await(client.table_address, handle)
        if error:
            client.api.raise_error(error)
        return self

    def delete(self):
        """Destroy the device buffer (then release the host array a zero copy aliased)."""
        try:
            handle = self.handle
        except AttributeError:   # __init__ did not get as far
            return
        if handle and not self._finalizing():
            self.handle = None
            client = self.client
            error = client.native_destroy(client.table_address, handle)
            done = self._done
            if done:
                self._done = None
                client.wait(done)
            if error:
                client.api.raise_error(error)
        self._host = None

    __del__ = delete

    def __repr__(self):
        return f"Buffer({self.dtype.name}{list(self.shape)} on {self.client.platform}:" \
               f"{self.device.id})"


def _count(table, loaded):
    """The number of results of a loaded executable."""
    inner = api.executable_of(table, loaded)
    try:
        return table.call("Executable_NumOutputs", api.args(
            api.ExecutableNumOutputs, executable=inner)).num_outputs
    finally:
        table.call("Executable_Destroy", api.args(api.Executable, executable=inner))


_DTYPES = {code: np.dtype(name) for name, code in api.BUFFER_TYPES.items()}


def cost_analysis(table, loaded):
    """XLA's cost properties of a loaded executable (PJRT_Executable_GetCostAnalysis) as a
    dict of floats; None when the plug-in does not provide them."""
    if not table.has("Executable_GetCostAnalysis"):
        return None
    inner = api.executable_of(table, loaded)
    try:
        out = table.call("Executable_GetCostAnalysis", api.args(api.CostAnalysis,
                                                                executable=inner))
        return {k: float(v) for k, v in api.named_values(out.properties,
                                                         out.num_properties).items()
                if isinstance(v, (int, float))}
    finally:
        table.call("Executable_Destroy", api.args(api.Executable, executable=inner))


def memory_stats(table, loaded):
    """XLA's CompiledMemoryStats of a loaded executable (PJRT_Executable_
    GetCompiledMemoryStats) as a dict of ints by api.MEMORY_STATS' names; None when the
    plug-in does not provide them."""
    if not table.has("Executable_GetCompiledMemoryStats"):
        return None
    inner = api.executable_of(table, loaded)
    try:
        out = table.call("Executable_GetCompiledMemoryStats", api.args(
            api.CompiledMemoryStats, executable=inner))
        return {name: int(getattr(out, name)) for name in api.MEMORY_STATS}
    finally:
        table.call("Executable_Destroy", api.args(api.Executable, executable=inner))


def _results(table, loaded):
    """[(shape, dtype)] of a loaded executable's results, as the plug-in compiled them; None
    when the plug-in does not report them (a type kiln has no dtype for reads as object)."""
    if not (table.has("Executable_OutputElementTypes") and
            table.has("Executable_OutputDimensions")):
        return None
    inner = api.executable_of(table, loaded)
    try:
        kinds = table.call("Executable_OutputElementTypes", api.args(
            api.OutputElementTypes, executable=inner))
        dims = table.call("Executable_OutputDimensions", api.args(
            api.OutputDimensions, executable=inner))
        out, at = [], 0
        for i in range(dims.num_outputs):
            rank = dims.dim_sizes[i]
            out.append((tuple(dims.dims[at + j] for j in range(rank)),
                        _DTYPES.get(kinds.output_types[i], np.dtype(object))))
            at += rank
        return out
    finally:
        table.call("Executable_Destroy", api.args(api.Executable, executable=inner))


def avals_of(avals):
    """[(shape, dtype)] of anything with `shape` and `dtype`, each dtype one PJRT moves."""
    out = [(tuple(a.shape), np.dtype(a.dtype)) for a in avals]
    for _, dtype in out:
        _buffer_type(dtype)
    return out


def check_results(table, loaded, out_avals):
    """A TypeError when the loaded executable's results are not `out_avals`."""
    produced = _results(table, loaded)
    if produced is not None and produced != out_avals or \
            produced is None and _count(table, loaded) != len(out_avals):
        shown = ", ".join(f"{d.name}{list(s)}" for s, d in produced) if produced else "?"
        raise TypeError(f"the module's results ({shown}) are not the output avals given ("
                        + ", ".join(f"{d.name}{list(s)}" for s, d in out_avals) + ")")


def check_inputs(inputs, in_avals, client, device):
    """`inputs` (Buffers of `device`, or anything NumPy converts) checked against `in_avals`
    before any call into the plug-in; host values as NumPy arrays."""
    if len(inputs) != len(in_avals):
        raise TypeError(f"the executable takes {len(in_avals)} arguments, got {len(inputs)}")
    buffers = []
    for i, (x, (shape, dtype)) in enumerate(zip(inputs, in_avals)):
        if isinstance(x, Buffer):
            if x.client is not client or x.device is not device:
                raise ValueError(f"argument {i} is on {x.client.platform}:{x.device.id}, "
                                 f"not on this executable's device "
                                 f"{client.platform}:{device.id}")
        else:
            x = np.asarray(x)
        if tuple(x.shape) != shape or x.dtype != dtype:
            raise TypeError(f"argument {i}: expected {dtype.name}{list(shape)}, got "
                            f"{x.dtype.name}{list(x.shape)}")
        buffers.append(x)
    return buffers


class _Prepared:
    """The argument structs of `PJRT_LoadedExecutable_Execute` for one executable, built once:
    a call fills in the argument handles and reads the output handles."""

    def __init__(self, executable):
        num_args = len(executable.in_avals)
        self.arguments = (C.c_void_p * max(1, num_args))()
        self.arguments_list = (C.c_void_p * 1)(C.addressof(self.arguments))
        self.outputs = (C.c_void_p * max(1, len(executable.out_avals)))()
        self.outputs_list = (C.c_void_p * 1)(C.addressof(self.outputs))
        self.events = (C.c_void_p * 1)()
        self.execute = api.args(
            api.Execute, executable=executable.handle, options=executable._options,
            argument_lists=C.addressof(self.arguments_list), num_devices=1, num_args=num_args,
            output_lists=C.addressof(self.outputs_list))
        self.reference = C.byref(self.execute)
        self.function = executable.client.api.function("LoadedExecutable_Execute")


class Executable:
    """A StableHLO module compiled for one device (see the module docstring)."""

    def __init__(self, client, mlir_text, in_avals, out_avals, device=None, serialized=None):
        if serialized is None and not isinstance(mlir_text, str):
            raise TypeError(f"Executable: mlir_text must be a str (a StableHLO module in MLIR "
                            f"text), got {type(mlir_text).__name__}")
        self.client = client
        self.device = client.device(device)
        self.in_avals, self.out_avals = avals_of(in_avals), avals_of(out_avals)
        table = client.api
        self._live = [True]   # cleared by close (runner's closure reads it)
        options = compile_options(self.device.id)
        if serialized is None:
            self.handle, self._serialized = compile_cache.compile(client, mlir_text.encode(),
                                                                  options)
        else:
            self.handle, self._serialized = compile_cache.load(client, serialized, options), \
                serialized
        self._options = C.pointer(api.args(api.ExecuteOptions))
        self._prepared = _Prepared(self)
        self._idle = threading.Lock()
        self._runner = None   # made on first use
        try:
            check_results(table, self.handle, self.out_avals)
        except Exception:
            self.close()
            raise

    def serialize(self):
        """The plug-in's serialization of this executable (`PJRT_Executable_Serialize`), which
        `Executable(..., serialized=)` loads; a PjrtError where the plug-in cannot. An
        executable loaded from bytes (the disk cache's, or `serialized`) gives those bytes
        (compile_cache.compile says why)."""
        if not self.handle:
            raise RuntimeError("this PJRT executable has been closed")
        if self._serialized is None:
            self._serialized = compile_cache.serialize_loaded(self.client.api, self.handle)
        return self._serialized

    def _inputs(self, inputs):
        return check_inputs(inputs, self.in_avals, self.client, self.device)

    def __call__(self, *inputs):
        """Run on `inputs` (Buffers of this device or host arrays); one Buffer per output.
        With only Buffers as inputs the call returns once the execution is enqueued: the
        results carry their ready events (`to_host` and `block_until_ready` await them and
        raise an execution's error there). With host inputs it waits for the execution."""
        if not self.handle:
            raise RuntimeError("this PJRT executable has been closed")
        inputs = self._inputs(inputs)
        # Host arrays go in as zero-copy buffers that live only for this call (they are alive
        # and unchanged until it returns, which it does after the execution has finished).
        temporary = [self.client.put(x, self.device, zero_copy=True) for x in inputs
                     if not isinstance(x, Buffer)]
        if not temporary:
            return self.execute(inputs)
        held = iter(temporary)
        buffers = [x if isinstance(x, Buffer) else next(held) for x in inputs]
        try:
            return self._run([b._handle() for b in buffers], wait=True)
        finally:
            for b in temporary:
                b.delete()

    def execute(self, buffers):
        """Run on Buffers of this device already known to match the input avals; returns the
        results without waiting for them (as `__call__` does). See `runner`."""
        return self.runner()([b._handle() for b in buffers])

    def runner(self):
        """`run(handles)`, a caller's fast path (made on first use): runs on the handles of
        live Buffers of this device known to match the input avals and returns one Buffer
        per output without waiting for the execution. One native call (native.py) when no
        other thread is in one on this executable, else the ctypes path. The result Buffers
        are made without `Buffer.__init__`'s conversions (their shapes and dtypes are the
        output avals themselves)."""
        run = self._runner
        if run is None:
            run = self._runner = self._make_runner()
        return run

    def _make_runner(self):
        # The closure holds no reference to the executable (which holds it): a weak one for
        # the ctypes path, and `live`, which `close` clears.
        function = native.execute_function(len(self.in_avals))
        context = native.Context(self.client.api, self.handle, self._options,
                                 len(self.out_avals))
        address, outputs, idle, live = context.address, context.outputs, self._idle, self._live
        client, device, specs, count = self.client, self.device, self.out_avals, \
            len(self.out_avals)
        raise_error, owner, new = client.api.raise_error, weakref.ref(self), object.__new__
        single = count == 1
        shape, dtype = specs[0] if single else (None, None)

        def run(handles):
            if not live:
                raise RuntimeError("this PJRT executable has been closed")
            if not idle.acquire(False):
                return owner()._run(handles, wait=False)
            try:
                error = function(address, *handles)
                made = outputs[0] if single else outputs[:count]
            finally:
                idle.release()
            if error:
                raise_error(error)
            if single:
                b = new(Buffer)
                b.client, b.handle, b.device, b.shape, b.dtype = client, made, device, shape, dtype
                b._host = b._done = None
                return [b]
            results = []
            for handle, (shape_i, dtype_i) in zip(made, specs):
                b = new(Buffer)
                b.client, b.handle, b.device, b.shape, b.dtype = client, handle, device, \
                    shape_i, dtype_i
                b._host = b._done = None
                results.append(b)
            return results
        run.context = context   # kept alive with the function
        return run

    def _wrap(self, outputs):
        client, device = self.client, self.device
        return [Buffer(client, handle, device, shape, dtype)
                for handle, (shape, dtype) in zip(outputs, self.out_avals)]

    def _run(self, handles, wait):
        # The prepared argument structs of the executable when no other thread is using them,
        # else fresh ones for this call.
        prepared = self._prepared if self._idle.acquire(False) else \
            _Prepared(self)
        try:
            prepared.arguments[:len(handles)] = handles
            prepared.execute.device_complete_events = prepared.events if wait else None
            table = self.client.api
            table.raise_error(prepared.function(prepared.reference))
            outputs, event = prepared.outputs[:], prepared.events[0]
        finally:
            if prepared is self._prepared:
                self._idle.release()
        results = self._wrap(outputs)
        if wait:
            self.client.wait(event)
        return results

    # Read through the class: while the interpreter finalizes, this module's globals may
    # already be None when the last executables and buffers go.
    _finalizing = staticmethod(sys.is_finalizing)

    def close(self):
        live = getattr(self, "_live", None)
        if live:
            live.clear()
        if not self._finalizing():
            close_executable(self)

    __del__ = close


def close_executable(executable):
    """Destroy `executable.handle` (a loaded executable of `executable.client`) once; its
    class's `_finalizing` says when the interpreter is finalizing (nothing is destroyed then)."""
    handle, executable.handle = getattr(executable, "handle", None), None
    if handle and not executable._finalizing():
        executable.client.api.call("LoadedExecutable_Destroy", api.args(
            api.LoadedExecutable, executable=handle))
