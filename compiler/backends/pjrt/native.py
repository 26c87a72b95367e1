"""Native code for the PJRT calls of every execution: one crossing from Python per call.

A call through ctypes costs a few hundred nanoseconds, and building an argument struct in
Python about as much again, so an execution on device buffers, its result's ready event (get,
await, destroy) and the results' destruction cost several microseconds in ctypes alone. This
module emits, with llvmlite, small functions that make those PJRT calls from native code, with
their argument structs on the native stack (so any thread may call them at once):

- `kiln_pjrt_execute<N>(ptr ctx, ptr h0, ..., ptr h<N-1>) -> PJRT_Error*`: runs
  `PJRT_LoadedExecutable_Execute` on one device with the N buffer handles as arguments. `ctx`
  is the executable's `Context` (built once per executable): the address of Execute, the
  loaded executable, its `PJRT_ExecuteOptions`, and the array the output handles are written
  to. One function per argument count N, shared by every executable of the process;
- `kiln_pjrt_await_ready(ptr api, ptr buffer) -> PJRT_Error*`: `PJRT_Buffer_ReadyEvent`, then
  `PJRT_Event_Await` and `PJRT_Event_Destroy` on its event (the await's error first; a second
  error is destroyed);
- `kiln_pjrt_destroy_buffer(ptr api, ptr buffer) -> PJRT_Error*`: `PJRT_Buffer_Destroy`.

`api` is the address of a plug-in's function table (`Api.table`); the functions read the
function pointers at the offsets `api._Table` declares, and every struct's field offsets and
`struct_size` come from the ctypes declarations in api.py (checked against the C header by the
tests). An error is returned, not raised: the caller makes it a `PjrtError` with the plug-in's
message (`Api.raise_error`), exactly as on the ctypes path, which stays the definition
(client.py) and the path of calls with host arguments.

The objects are compiled once per machine and loaded once per process through the LLVM
backend's runtime libraries (`rtlib.load_library`: disk-cached, keyed by this file).
"""
import ctypes as C
import threading

from . import api

_ERROR = C.c_void_p
_AWAIT = C.CFUNCTYPE(_ERROR, C.c_void_p, C.c_void_p)
_LOCK = threading.Lock()
_LIBRARIES = {}
_OBJECTS = {}     # (name, source) -> the loaded object (load)
CONTEXT_WORDS = 4   # execute function, executable, options, outputs


class Context:
    """The constant part of one executable's native executions: the words `kiln_pjrt_execute<N>`
    reads and the output array it fills (`outputs`, read after each call)."""

    def __init__(self, table, executable, options, num_outputs):
        self.outputs = (C.c_void_p * max(1, num_outputs))()
        self.keep = (table, options)
        self.words = (C.c_void_p * CONTEXT_WORDS)(
            getattr(table.table, "LoadedExecutable_Execute"), executable,
            C.cast(options, C.c_void_p).value, C.addressof(self.outputs))
        self.address = C.addressof(self.words)


def execute_function(num_args):
    """`kiln_pjrt_execute<num_args>` as a ctypes function (ctx, handles...) -> error."""
    function = _LIBRARIES.get(num_args)
    if function is None:
        address = load(f"kiln.pjrt.execute{num_args}", lambda m: _emit_execute(m, num_args),
                        f"kiln_pjrt_execute{num_args}")
        kind = C.CFUNCTYPE(_ERROR, C.c_void_p, *[C.c_void_p] * num_args)
        function = _LIBRARIES.setdefault(num_args, kind(address))
    return function


def buffer_functions():
    """(await_ready, destroy_buffer) as ctypes functions (api, buffer) -> error."""
    found = _LIBRARIES.get("buffers")
    if found is None:
        addresses = load("kiln.pjrt.buffers", _emit_buffers,
                          "kiln_pjrt_await_ready", "kiln_pjrt_destroy_buffer")
        found = _LIBRARIES.setdefault("buffers", tuple(map(_AWAIT, addresses)))
    return found


def load(name, emit, *symbols, source=__file__):
    """The addresses of `symbols` in the object `name`, emitted by `emit(module)` (disk-cached,
    keyed by the file `source` that emits it) and loaded once per process (`_OBJECTS`: a new
    jitted function with the form of an earlier one reuses its entry object); one address for
    one symbol."""
    from ..llvm import rtlib, target
    import llvmlite.ir as ir

    def compile_():
        module = ir.Module(name=name)
        module.triple = target.triple()
        emit(module)
        return target.object_code(target.optimize(str(module), name))

    with _LOCK:
        loaded = _OBJECTS.get((name, source))
        if loaded is None:
            loaded = _OBJECTS[name, source] = rtlib.load_library(name, compile_, source)
    addresses = [loaded.function_address(s) for s in symbols]
    if not all(addresses):
        raise api.PjrtError(f"the native PJRT library {name} lacks {symbols}", "INTERNAL")
    return addresses[0] if len(addresses) == 1 else addresses


# ------------------------------------------------------------------------------------ IR

class _Emitter:
    """A function's builder with helpers to fill PJRT argument structs on the stack. Every
    value is an i64 word (a pointer, a size): every field of the structs used here is one
    8-byte word, at a multiple of 8."""

    def __init__(self, module, name, num_params):
        import llvmlite.ir as ir
        self.ir = ir
        self.i64 = ir.IntType(64)
        kind = ir.FunctionType(self.i64, [self.i64] * num_params)
        self.function = ir.Function(module, kind, name)
        self.function.attributes.add("nounwind")
        self.builder = ir.IRBuilder(self.function.append_basic_block("entry"))

    def words(self, count):
        """The address of a zeroed array of `count` words on the stack."""
        kind = self.ir.ArrayType(self.i64, count)
        memory = self.builder.alloca(kind)
        self.builder.store(kind(None), memory)
        return self.builder.ptrtoint(memory, self.i64)

    def slot(self, base, offset):
        assert offset % 8 == 0, offset
        address = self.builder.add(base, self.i64(offset))
        return self.builder.inttoptr(address, self.i64.as_pointer())

    def load(self, base, offset):
        return self.builder.load(self.slot(base, offset))

    def store(self, value, base, offset):
        self.builder.store(value, self.slot(base, offset))

    def struct(self, struct, **fields):
        """The address of a zeroed `struct` on the stack with struct_size and `fields` (i64
        values) set."""
        address = self.words(-(-C.sizeof(struct) // 8))
        self.store(self.i64(struct.STRUCT_SIZE), address, 0)
        for name, value in fields.items():
            self.store(value, address, getattr(struct, name).offset)
        return address

    def call(self, function, struct):
        """Call a PJRT function (its address) on an argument struct: its error."""
        kind = self.ir.FunctionType(self.i64, [self.i64])
        return self.builder.call(self.builder.inttoptr(function, kind.as_pointer()), [struct])

    def call_api(self, table, name, struct):
        return self.call(self.load(table, getattr(api._Table, name).offset), struct)


def _emit_execute(module, num_args):
    e = _Emitter(module, f"kiln_pjrt_execute{num_args}", 1 + num_args)
    ctx, *handles = e.function.args
    array = e.words(max(1, num_args))
    for i, handle in enumerate(handles):
        e.store(handle, array, 8 * i)
    argument_list = e.words(1)
    e.store(array, argument_list, 0)
    output_list = e.words(1)
    e.store(e.load(ctx, 24), output_list, 0)
    execute = e.struct(api.Execute, executable=e.load(ctx, 8), options=e.load(ctx, 16),
                       argument_lists=argument_list, num_devices=e.i64(1),
                       num_args=e.i64(num_args), output_lists=output_list)
    e.builder.ret(e.call(e.load(ctx, 0), execute))


def _emit_buffers(module):
    _emit_await(module)
    e = _Emitter(module, "kiln_pjrt_destroy_buffer", 2)
    table, buffer = e.function.args
    e.builder.ret(e.call_api(table, "Buffer_Destroy", e.struct(api.Buffer, buffer=buffer)))


def _emit_await(module):
    e = _Emitter(module, "kiln_pjrt_await_ready", 2)
    table, buffer = e.function.args
    b = e.builder
    ready = e.struct(api.BufferReadyEvent, buffer=buffer)
    error = e.call_api(table, "Buffer_ReadyEvent", ready)
    zero = e.i64(0)
    with b.if_then(b.icmp_unsigned("!=", error, zero)):
        b.ret(error)
    event = e.struct(api.Event, event=e.load(ready, api.BufferReadyEvent.event.offset))
    awaited = e.call_api(table, "Event_Await", event)
    destroyed = e.call_api(table, "Event_Destroy", event)
    with b.if_then(b.icmp_unsigned("==", awaited, zero)):
        b.ret(destroyed)
    with b.if_then(b.icmp_unsigned("!=", destroyed, zero)):
        e.call_api(table, "Error_Destroy", e.struct(api.ErrorDestroy, error=destroyed))
    b.ret(awaited)
