"""The host side of XLA's FFI (its C API, `xla/ffi/api/c_api.h`, version 0.x): kiln plays the
part of the XLA runtime for handlers compiled against that API (the C++ `xla::ffi` bindings
JAX's FFI guide uses), so the same shared library serves `jax.ffi` and `kiln.ffi`.

- `register_target(name, stages, traits)`: a handler bundle, the native addresses of its
  stages ("execute", and optionally "instantiate", "prepare", "initialize"). The execute
  handler is asked for its metadata first (the metadata extension, as XLA does) and a handler
  built for another major version of the API is refused.
- `call_target(name, operands, results, attributes, site)`: builds a call frame (the
  operands and result buffers, the attributes sorted by name) and runs the handler's stages;
  instantiate runs once per call site (`site`, a hashable key), the others at every call. A
  handler's error is raised as `RuntimeFailure` (JAX's JaxRuntimeError) with its message.
- `register_type(name, type_id_address, deleter)`: a user type id (`register_ffi_type_id`):
  kiln writes the next free id through the pointer, as XLA does.

The `XLA_FFI_Api` table handlers call back into is made of ctypes functions here: errors,
futures (an asynchronous handler's result is awaited before the call returns), per-site
state, host memory, a thread pool that runs each task at once in the calling thread, the
run id and device ordinal 0. There is no stream (a CPU handler asking for one gets an
error) and no execution-context user data (`NOT_FOUND`, as XLA with none registered).

Attributes are encoded by `encode_attribute` into hashable tuples (primitive params):
("scalar", dtype, value), ("string", text), ("array", dtype, values) for a 1-D array,
("dict", ((name, attribute), ...)).
"""
import ctypes
import itertools
import threading

import numpy as np

from ..errors import RuntimeFailure

API_MAJOR, API_MINOR = 0, 3   # the version of c_api.h these structs follow

c_size_t, c_int, c_int64, c_void_p, c_char_p = (
    ctypes.c_size_t, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p)


def _struct(name, fields):
    return type(name, (ctypes.Structure,), {"_fields_": fields})


ExtensionBase = _struct("XLA_FFI_Extension_Base",
                        [("struct_size", c_size_t), ("type", c_int), ("next", c_void_p)])
ApiVersion = _struct("XLA_FFI_Api_Version", [("struct_size", c_size_t),
                                             ("extension_start", c_void_p),
                                             ("major_version", c_int),
                                             ("minor_version", c_int)])
ByteSpan = _struct("XLA_FFI_ByteSpan", [("ptr", c_void_p), ("len", c_size_t)])
Buffer = _struct("XLA_FFI_Buffer", [("struct_size", c_size_t), ("extension_start", c_void_p),
                                    ("dtype", c_int), ("data", c_void_p), ("rank", c_int64),
                                    ("dims", ctypes.POINTER(c_int64))])
Scalar = _struct("XLA_FFI_Scalar", [("dtype", c_int), ("value", c_void_p)])
ArrayAttr = _struct("XLA_FFI_Array", [("dtype", c_int), ("size", c_size_t),
                                      ("data", c_void_p)])


def _list_struct(name, extra=()):
    return _struct(name, [("struct_size", c_size_t), ("extension_start", c_void_p),
                          ("size", c_int64), ("types", ctypes.POINTER(c_int)), *extra])


Args = _list_struct("XLA_FFI_Args", [("args", ctypes.POINTER(c_void_p))])
Rets = _list_struct("XLA_FFI_Rets", [("rets", ctypes.POINTER(c_void_p))])
Attrs = _list_struct("XLA_FFI_Attrs", [("names", ctypes.POINTER(ctypes.POINTER(ByteSpan))),
                                       ("attrs", ctypes.POINTER(c_void_p))])
CallFrame = _struct("XLA_FFI_CallFrame", [
    ("struct_size", c_size_t), ("extension_start", c_void_p), ("api", c_void_p),
    ("ctx", c_void_p), ("stage", c_int), ("args", Args), ("rets", Rets), ("attrs", Attrs),
    ("future", c_void_p)])
Metadata = _struct("XLA_FFI_Metadata", [("struct_size", c_size_t), ("api_version", ApiVersion),
                                        ("traits", ctypes.c_uint32),
                                        ("state_type_id", c_int64)])
MetadataExtension = _struct("XLA_FFI_Metadata_Extension",
                            [("extension_base", ExtensionBase),
                             ("metadata", ctypes.POINTER(Metadata))])


def _args(name, *fields):
    """An API call's argument struct: struct_size, extension_start, then `fields`."""
    return _struct(name, [("struct_size", c_size_t), ("extension_start", c_void_p), *fields])


ErrorCreateArgs = _args("XLA_FFI_Error_Create_Args", ("message", c_char_p), ("errc", c_int))
ErrorGetMessageArgs = _args("XLA_FFI_Error_GetMessage_Args", ("error", c_void_p),
                            ("message", c_void_p))
ErrorDestroyArgs = _args("XLA_FFI_Error_Destroy_Args", ("error", c_void_p))
TypeRegisterArgs = _args("XLA_FFI_Type_Register_Args", ("name", ByteSpan),
                         ("type_id", ctypes.POINTER(c_int64)), ("type_info", c_void_p))
ContextGetArgs = _args("XLA_FFI_ExecutionContext_Get_Args", ("ctx", c_void_p),
                       ("type_id", ctypes.POINTER(c_int64)), ("data", c_void_p))
StateSetArgs = _args("XLA_FFI_State_Set_Args", ("ctx", c_void_p), ("stage", c_int),
                     ("type_id", ctypes.POINTER(c_int64)), ("state", c_void_p))
StateGetArgs = _args("XLA_FFI_State_Get_Args", ("ctx", c_void_p), ("stage", c_int),
                     ("type_id", ctypes.POINTER(c_int64)), ("state", c_void_p))
StreamGetArgs = _args("XLA_FFI_Stream_Get_Args", ("ctx", c_void_p), ("stream", c_void_p))
AllocateArgs = _args("XLA_FFI_DeviceMemory_Allocate_Args", ("ctx", c_void_p),
                     ("size", c_size_t), ("alignment", c_size_t), ("data", c_void_p))
FreeArgs = _args("XLA_FFI_DeviceMemory_Free_Args", ("ctx", c_void_p), ("size", c_size_t),
                 ("data", c_void_p))
TASK = ctypes.CFUNCTYPE(None, c_void_p)
ScheduleArgs = _args("XLA_FFI_ThreadPool_Schedule_Args", ("ctx", c_void_p), ("task", TASK),
                     ("data", c_void_p))
NumThreadsArgs = _args("XLA_FFI_ThreadPool_NumThreads_Args", ("ctx", c_void_p),
                       ("num_threads", ctypes.POINTER(c_int64)))
FutureCreateArgs = _args("XLA_FFI_Future_Create_Args", ("future", c_void_p))
FutureSetAvailableArgs = _args("XLA_FFI_Future_SetAvailable_Args", ("future", c_void_p))
FutureSetErrorArgs = _args("XLA_FFI_Future_SetError_Args", ("future", c_void_p),
                           ("error", c_void_p))
RunIdArgs = _args("XLA_FFI_RunId_Get_Args", ("ctx", c_void_p), ("run_id", c_int64))
DeviceOrdinalArgs = _args("XLA_FFI_DeviceOrdinal_Get_Args", ("ctx", c_void_p),
                          ("device_ordinal", ctypes.c_int32))
HandlerRegisterArgs = _args("XLA_FFI_Handler_Register_Args", ("name", ByteSpan),
                            ("platform", ByteSpan), ("bundle", c_void_p * 4),
                            ("traits", ctypes.c_uint32))

# The API table, in c_api.h's order: (field, argument struct, returns an error).
_API_FUNCTIONS = (
    ("Error_Create", ErrorCreateArgs, True), ("Error_GetMessage", ErrorGetMessageArgs, False),
    ("Error_Destroy", ErrorDestroyArgs, False), ("Handler_Register", HandlerRegisterArgs, True),
    ("Stream_Get", StreamGetArgs, True), ("Type_Register", TypeRegisterArgs, True),
    ("ExecutionContext_Get", ContextGetArgs, True), ("State_Set", StateSetArgs, True),
    ("State_Get", StateGetArgs, True), ("DeviceMemory_Allocate", AllocateArgs, True),
    ("DeviceMemory_Free", FreeArgs, True), ("ThreadPool_Schedule", ScheduleArgs, True),
    ("ThreadPool_NumThreads", NumThreadsArgs, True), ("Future_Create", FutureCreateArgs, True),
    ("Future_SetAvailable", FutureSetAvailableArgs, True),
    ("Future_SetError", FutureSetErrorArgs, True), ("RunId_Get", RunIdArgs, True),
    ("DeviceOrdinal_Get", DeviceOrdinalArgs, True))
Api = _struct("XLA_FFI_Api", [("struct_size", c_size_t), ("extension_start", c_void_p),
                              ("api_version", ApiVersion), ("internal_api", c_void_p)]
              + [(f"XLA_FFI_{name}", c_void_p) for name, _, _ in _API_FUNCTIONS])



def struct_size(struct, last_field):
    """c_api.h's XLA_FFI_STRUCT_SIZE: the size up to the end of `last_field` (the last field
    the caller knows of; handlers check it exactly)."""
    field = getattr(struct, last_field)
    return field.offset + field.size


CALL_FRAME_SIZE = struct_size(CallFrame, "attrs")
HANDLER = ctypes.CFUNCTYPE(c_void_p, ctypes.POINTER(CallFrame))
STAGES = ("instantiate", "prepare", "initialize", "execute")   # XLA_FFI_ExecutionStage order
_EXTENSION_METADATA = 1
_ARG_BUFFER = _RET_BUFFER = 1
_ATTR_KINDS = {"array": 1, "dict": 2, "scalar": 3, "string": 4}

# XLA_FFI_DataType by NumPy dtype (bfloat16 and the float8 types are not NumPy dtypes).
DATA_TYPES = {np.dtype(k): v for k, v in (
    ("bool", 1), ("int8", 2), ("int16", 3), ("int32", 4), ("int64", 5), ("uint8", 6),
    ("uint16", 7), ("uint32", 8), ("uint64", 9), ("float16", 10), ("float32", 11),
    ("float64", 12), ("complex64", 15), ("complex128", 18))}
_ERROR_CODES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")


def data_type(dtype, what):
    code = DATA_TYPES.get(np.dtype(dtype))
    if code is None:
        raise TypeError(f"{what} has dtype {np.dtype(dtype)}, which XLA's FFI has no code for "
                        f"in kiln; supported: {', '.join(d.name for d in DATA_TYPES)}")
    return code


# ---------------------------------------------------------------------------- attributes

def encode_attribute(name, value):
    """`value` (a keyword argument of an FFI call) as a hashable attribute, typed as JAX types
    it: a Python bool/int/float is an i1/i64/f64 scalar, a NumPy scalar keeps its dtype, a str
    a string, a 1-D NumPy array a dense array, a dict a dictionary."""
    if isinstance(value, (str, bytes)):
        return ("string", value if isinstance(value, str) else value.decode())
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), encode_attribute(f"{name}[{k!r}]", v))
                                     for k, v in value.items())))
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        dtype = {bool: np.bool_, int: np.int64, float: np.float64}[type(value)]
        return ("scalar", np.dtype(dtype).str, value)
    if isinstance(value, (np.generic, np.ndarray)):
        array = np.asarray(value)
        data_type(array.dtype, f"the attribute {name!r}")
        if array.dtype.kind == "c":
            raise TypeError(f"the attribute {name!r} is complex, which kiln does not pass as "
                            f"an FFI attribute: pass it as an operand instead")
        if array.ndim == 0:
            return ("scalar", array.dtype.str, array.item())
        if array.ndim == 1:
            return ("array", array.dtype.str, tuple(array.tolist()))
        raise TypeError(f"the attribute {name!r} is an array of shape {array.shape}; XLA's FFI "
                        f"passes only 1-D arrays as attributes: pass it as an operand instead")
    raise TypeError(f"the attribute {name!r} has type {type(value).__name__}, which XLA's FFI "
                    f"cannot pass: use a bool, int, float, NumPy scalar, str, 1-D NumPy array "
                    f"or dict of them")


class _Attributes:
    """The native `XLA_FFI_Attrs` of encoded attributes, kept alive with their storage."""

    def __init__(self, encoded):
        self.keep = []
        entries = sorted(encoded)   # XLA passes attributes sorted by name
        n = len(entries)
        self.struct = Attrs(struct_size(Attrs, "attrs"), None, n, (c_int * max(n, 1))(),
                            (ctypes.POINTER(ByteSpan) * max(n, 1))(), (c_void_p * max(n, 1))())
        for k, (name, attribute) in enumerate(entries):
            kind, pointer = self._value(attribute)
            self.struct.types[k] = _ATTR_KINDS[kind]
            self.struct.names[k] = ctypes.pointer(self._span(name))
            self.struct.attrs[k] = pointer

    def _span(self, text):
        raw = ctypes.create_string_buffer(text.encode())
        self.keep.append(raw)
        span = ByteSpan(ctypes.cast(raw, c_void_p), len(text.encode()))
        self.keep.append(span)
        return span

    def _value(self, attribute):
        kind = attribute[0]
        if kind == "string":
            value = self._span(attribute[1])
        elif kind == "dict":
            nested = _Attributes(attribute[1])
            self.keep.append(nested)
            value = nested.struct
        else:
            data = np.array(attribute[2], dtype=np.dtype(attribute[1]))
            self.keep.append(data)
            code = data_type(data.dtype, "an attribute")
            value = (Scalar(code, data.ctypes.data) if kind == "scalar" else
                     ArrayAttr(code, data.size, data.ctypes.data))
        self.keep.append(value)
        return kind, ctypes.cast(ctypes.pointer(value), c_void_p)


# ---------------------------------------------------------------------------- the API table

class _Host:
    """Kiln's side of the API: the table handed to handlers and the objects it hands out
    (errors, futures, states, allocations), keyed by the addresses given to the handler."""

    def __init__(self):
        self.lock = threading.Lock()
        self.objects = {}     # address -> Python object (an error's message, a future's event)
        self.states = {}      # (ctx address, stage, type id) -> state address
        self.next_type_id = itertools.count(1)
        self.run_ids = itertools.count(1)
        self.functions = []   # the ctypes functions, kept alive
        table = {}
        for name, args_type, returns_error in _API_FUNCTIONS:
            proto = ctypes.CFUNCTYPE(c_void_p if returns_error else None,
                                     ctypes.POINTER(args_type))
            fn = proto(getattr(self, name.lower()))
            self.functions.append(fn)
            table[f"XLA_FFI_{name}"] = ctypes.cast(fn, c_void_p).value
        self.api = Api(struct_size=struct_size(Api, "XLA_FFI_DeviceOrdinal_Get"), api_version=ApiVersion(
            struct_size(ApiVersion, "minor_version"), None, API_MAJOR, API_MINOR), **table)
        self.address = ctypes.addressof(self.api)

    def _handle(self, obj):
        """A fresh native address standing for `obj`."""
        cell = ctypes.create_string_buffer(1)
        with self.lock:
            self.objects[ctypes.addressof(cell)] = (obj, cell)
        return ctypes.addressof(cell)

    def error(self, code, message):
        return self._handle(f"{_ERROR_CODES[code]}: {message}")

    def take_error(self, address):
        with self.lock:
            return self.objects.pop(address)[0]

    # the table's functions, each given its argument struct
    def error_create(self, args):
        a = args.contents
        return self.error(a.errc, (a.message or b"").decode(errors="replace"))

    def error_getmessage(self, args):
        a = args.contents
        text = self.objects[a.error][0]
        raw = ctypes.create_string_buffer(text.encode())
        self.objects[a.error] = (text, raw)   # the message lives as long as the error
        a.message = ctypes.addressof(raw)

    def error_destroy(self, args):
        with self.lock:
            self.objects.pop(args.contents.error, None)

    def handler_register(self, args):
        return self.error(12, "register handlers with kiln.ffi.register_ffi_target, not from "
                              "inside a handler")

    def stream_get(self, args):
        return self.error(12, "kiln runs FFI handlers on the CPU, which has no stream")

    def type_register(self, args):
        a = args.contents
        if a.type_id.contents.value == 0:
            a.type_id.contents.value = next(self.next_type_id)
        return None

    def executioncontext_get(self, args):
        return self.error(5, f"no user data of type id {args.contents.type_id.contents.value} "
                             f"in the execution context (kiln passes none)")

    def state_set(self, args):
        a = args.contents
        key = (a.ctx, a.stage, a.type_id.contents.value)
        if key in self.states:
            return self.error(6, "the state of this FFI call site is already set")
        self.states[key] = a.state
        return None

    def state_get(self, args):
        a = args.contents
        state = self.states.get((a.ctx, a.stage, a.type_id.contents.value))
        if state is None:
            return self.error(5, f"no state of type id {a.type_id.contents.value} at this FFI "
                                 f"call site")
        a.state = state
        return None

    def devicememory_allocate(self, args):
        a = args.contents
        alignment = max(int(a.alignment), 1)
        raw = np.empty(int(a.size) + alignment, np.uint8)
        start = -raw.ctypes.data % alignment
        address = raw.ctypes.data + start
        with self.lock:
            self.objects[address] = ("memory", raw)
        a.data = address
        return None

    def devicememory_free(self, args):
        with self.lock:
            self.objects.pop(args.contents.data, None)
        return None

    def threadpool_schedule(self, args):
        a = args.contents
        a.task(a.data)   # at once, in the calling thread
        return None

    def threadpool_numthreads(self, args):
        args.contents.num_threads.contents.value = 1
        return None

    def future_create(self, args):
        args.contents.future = self._handle(_Future())
        return None

    def future_setavailable(self, args):
        self.objects[args.contents.future][0].set(None)
        return None

    def future_seterror(self, args):
        a = args.contents
        self.objects[a.future][0].set(self.take_error(a.error))
        return None

    def runid_get(self, args):
        args.contents.run_id = next(self.run_ids)
        return None

    def deviceordinal_get(self, args):
        args.contents.device_ordinal = 0
        return None


class _Future:
    def __init__(self):
        self.event, self.error = threading.Event(), None

    def set(self, error):
        self.error = error
        self.event.set()


HOST = _Host()


# ---------------------------------------------------------------------------- targets

class Target:
    """A registered handler bundle: the native address and the ctypes function of each stage
    it has."""

    def __init__(self, name, stages, traits):
        self.name = name
        self.addresses = dict(stages)
        self.stages = {stage: HANDLER(address) for stage, address in stages.items()}
        self.traits = traits
        self.version = (API_MAJOR, API_MINOR)   # the FFI API version it was built for
        self.sites = {}   # call-site key -> the native context address of that site


TARGETS = {}
OTHER_PLATFORMS = {}   # target name -> the other platforms it was registered for (not run)
_TYPES = {}


def register_target(name, stages, traits=0):
    """Register the handler bundle `stages` (stage name -> native address) under `name`."""
    if "execute" not in stages:
        raise ValueError(f"the FFI target {name!r} has no 'execute' handler; a dict of "
                         f"handlers needs one (and optionally {', '.join(STAGES[:3])})")
    unknown = set(stages) - set(STAGES)
    if unknown:
        raise ValueError(f"the FFI target {name!r}: unknown stage(s) {sorted(unknown)}; the "
                         f"stages are {', '.join(STAGES)}")
    target = Target(name, stages, traits)
    major, minor = target.version = _metadata(target)
    if major != API_MAJOR:
        raise ValueError(f"the FFI handler {name!r} was built for XLA FFI API version "
                         f"{major}.{minor}; kiln implements version {API_MAJOR}.{API_MINOR}: "
                         f"rebuild it against a matching xla/ffi/api header")
    TARGETS[name] = target


def _metadata(target):
    """The API version the execute handler was built for (XLA's metadata query)."""
    metadata = Metadata(struct_size(Metadata, "traits"), ApiVersion(struct_size(ApiVersion, "minor_version")), 0, -1)
    extension = MetadataExtension(ExtensionBase(struct_size(MetadataExtension, "metadata"),
                                                _EXTENSION_METADATA, None),
                                  ctypes.pointer(metadata))
    frame = CallFrame(struct_size=CALL_FRAME_SIZE,
                      extension_start=ctypes.addressof(extension), api=HOST.address, stage=3)
    error = target.stages["execute"](ctypes.byref(frame))
    if error:
        raise ValueError(f"the FFI handler {target.name!r} did not answer XLA's metadata "
                         f"query ({HOST.take_error(error)}); is it an XLA FFI handler "
                         f"(XLA_FFI_Handler)?")
    return metadata.api_version.major_version, metadata.api_version.minor_version


def register_type(name, type_id_address):
    """Give the user type `name` an id, written through `type_id_address` (an int64*)."""
    pointer = ctypes.cast(type_id_address, ctypes.POINTER(c_int64))
    if name in _TYPES:
        pointer.contents.value = _TYPES[name]
        return
    args = TypeRegisterArgs(struct_size(TypeRegisterArgs, "type_info"), None, ByteSpan(None, 0), pointer,
                            None)
    HOST.type_register(ctypes.pointer(args))
    _TYPES[name] = pointer.contents.value


def _buffers(arrays, shapes, kind):
    """The `XLA_FFI_Buffer`s of `arrays` (data in memory order, `shapes` their logical
    shapes) and the pointer array to them (kept by the caller)."""
    structs, keep = [], []
    for k, (a, shape) in enumerate(zip(arrays, shapes)):
        dims = (c_int64 * max(len(shape), 1))(*shape)
        keep.append(dims)
        structs.append(Buffer(struct_size(Buffer, "dims"), None, data_type(a.dtype, f"{kind} {k}"),
                              a.ctypes.data, len(shape), dims))
    n = len(arrays)
    pointers = (c_void_p * max(n, 1))(*[ctypes.addressof(s) for s in structs])
    types = (c_int * max(n, 1))(*([_ARG_BUFFER] * n))
    return pointers, types, structs + keep


def _in_memory_order(x, order):
    """`x`'s data laid out with axes major to minor in `order` (None: row-major)."""
    return np.ascontiguousarray(x if order is None else np.transpose(x, order))


def call_target(name, operands, results, attributes, site, layouts=None, aliases=()):
    """Run the FFI target `name` on the NumPy `operands`, returning new arrays of the
    `results` ((dtype, shape) each); `attributes` encoded by `encode_attribute`, `site` the
    key of the call site (instantiate runs once per site); `layouts` and `aliases` as the
    ffi_call primitive's (ffi.py)."""
    target = TARGETS.get(name)
    if target is None:
        elsewhere = sorted(OTHER_PLATFORMS.get(name, ()))
        why = (f" (it is registered for {', '.join(elsewhere)} only: kiln runs CPU handlers)"
               if elsewhere else "")
        raise RuntimeFailure(f"NOT_FOUND: no FFI target named {name!r} is registered for the "
                             f"CPU{why}: register it with kiln.ffi.register_ffi_target({name!r}, "
                             f"..., platform='cpu') before calling it")
    in_orders, out_orders = layouts or (None, None)
    in_orders = in_orders or (None,) * len(operands)
    out_orders = out_orders or (None,) * len(results)
    shapes = [tuple(np.shape(x)) for x in operands]
    operands = [_in_memory_order(np.asarray(x), o) for x, o in zip(operands, in_orders)]
    out_shapes = [tuple(shape) for _, shape in results]
    outs = [np.empty(shape if o is None else tuple(shape[d] for d in o), np.dtype(dtype))
            for (dtype, shape), o in zip(results, out_orders)]
    for i, o in aliases:   # an aliased result starts as its operand
        outs[o][...] = operands[i]
    arg_ptrs, arg_types, keep_args = _buffers(operands, shapes, "operand")
    ret_ptrs, ret_types, keep_rets = _buffers(outs, out_shapes, "result")
    attrs = _Attributes(attributes)
    frame = CallFrame(struct_size=CALL_FRAME_SIZE, api=HOST.address,
                      args=Args(struct_size(Args, "args"), None, len(operands), arg_types, arg_ptrs),
                      rets=Rets(struct_size(Rets, "rets"), None, len(outs), ret_types, ret_ptrs),
                      attrs=attrs.struct)
    context = target.sites.get(site)
    if context is None:
        context = target.sites[site] = ctypes.create_string_buffer(8)
        frame.ctx = ctypes.addressof(context)
        _run(target, "instantiate", frame)
    frame.ctx = ctypes.addressof(context)
    for stage in STAGES[1:]:
        _run(target, stage, frame)
    del keep_args, keep_rets
    return [out if o is None else np.ascontiguousarray(np.transpose(out, np.argsort(o)))
            for out, o in zip(outs, out_orders)]


def _run(target, stage, frame):
    handler = target.stages.get(stage)
    if handler is None:
        return
    frame.stage = STAGES.index(stage)
    frame.future = None
    error = handler(ctypes.byref(frame))
    if error:
        raise RuntimeFailure(f"{HOST.take_error(error)} (the FFI handler {target.name!r}, "
                             f"{stage} stage)")
    if frame.future:
        future = HOST.objects[frame.future][0]
        future.event.wait()
        HOST.objects.pop(frame.future, None)
        if future.error is not None:
            raise RuntimeFailure(f"{future.error} (the FFI handler {target.name!r}, {stage} "
                                 f"stage)")
