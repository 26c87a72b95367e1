"""The PJRT C API as ctypes declarations: the structs and the function table of `pjrt_c_api.h`
version 0.81, the header the `xla-cpu-pjrt` wheel ships (xla_plugins/xla_cpu_pjrt/include).

Every argument struct starts with `struct_size` and `extension_start`; `args(Struct, **fields)`
makes one with `struct_size` set to the header's `<Struct>_STRUCT_SIZE` (the offset of the
struct's last field plus its size, `STRUCT_SIZE` here). Structs only grow at the end, so a
plug-in built against an older header reads the prefix it knows and one built against a newer
header sees from `struct_size` which fields the caller knows.

`Api` is `PJRT_Api`: its version and the function pointers in the header's order. `Api.call`
looks a function up by name, refuses (`PjrtUnsupportedError`) one past the end of the plug-in's
table (its `struct_size`) or left NULL, and calls it with an argument struct; a returned
`PJRT_Error` becomes a `PjrtError` carrying the plug-in's message and code, after the error is
destroyed. `check_version` compares a plug-in's version with the header's; `Api.attributes()`
reads the plug-in's attributes (xla_version, stablehlo_current_version, ...). Handles (clients,
devices, buffers, events, executables) are opaque pointers (`c_void_p`).
"""
import ctypes as C

from ...errors import KilnError

HEADER_VERSION = (0, 81)   # PJRT_API_MAJOR, PJRT_API_MINOR of the header these declarations follow

ERROR_CODES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
               "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
               "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
               "UNAUTHENTICATED")

# PJRT_Buffer_Type by NumPy dtype name (the types kiln has; bfloat16 and the 8/4/2-bit floats
# and integers have no NumPy dtype).
BUFFER_TYPES = {"bool": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "uint8": 6,
                "uint16": 7, "uint32": 8, "uint64": 9, "float16": 10, "float32": 11,
                "float64": 12, "complex64": 14, "complex128": 15}

# PJRT_HostBufferSemantics
IMMUTABLE_UNTIL_TRANSFER_COMPLETES = 1
IMMUTABLE_ZERO_COPY = 2

# PJRT_NamedValue_Type
NAMED_STRING, NAMED_INT64, NAMED_INT64_LIST, NAMED_FLOAT, NAMED_BOOL = range(5)


class PjrtError(KilnError, RuntimeError):
    """A PJRT plug-in reported an error: `message` is the plug-in's, `code` its name
    (INVALID_ARGUMENT, ...); the text is "PJRT error CODE: message"."""

    def __init__(self, message, code="UNKNOWN", hint=None):
        self.code = code
        self.message = message
        super().__init__(f"PJRT error {code}: {message}", hint=hint)


class PjrtUnsupportedError(PjrtError):
    """The plug-in does not provide a function or version kiln needs."""

    def __init__(self, message, hint=None):
        super().__init__(message, "UNIMPLEMENTED", hint)


_HEAD = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p)]


def _struct(name, fields, head=_HEAD, base=C.Structure, **extra):
    cls = type(name, (base,), dict(_fields_=head + fields, **extra))
    last = getattr(cls, (head + fields)[-1][0])
    cls.STRUCT_SIZE = last.offset + last.size
    return cls


def args(struct, **fields):
    """An instance of `struct` with `struct_size` set and `fields` filled in."""
    return struct(struct_size=struct.STRUCT_SIZE, **fields)


P, SIZE, INT, BOOL, I64P = C.c_void_p, C.c_size_t, C.c_int, C.c_bool, C.POINTER(C.c_int64)

ApiVersion = _struct("PJRT_Api_Version", [("major_version", INT), ("minor_version", INT)])


class NamedValueData(C.Union):
    _fields_ = [("string_value", C.c_char_p), ("int64_value", C.c_int64),
                ("int64_array_value", I64P), ("float_value", C.c_float),
                ("bool_value", BOOL)]


NamedValue = _struct("PJRT_NamedValue", [("name", C.c_char_p), ("name_size", SIZE),
                                         ("type", INT), ("value", NamedValueData),
                                         ("value_size", SIZE)])

ErrorDestroy = _struct("PJRT_Error_Destroy_Args", [("error", P)])
ErrorMessage = _struct("PJRT_Error_Message_Args", [("error", P), ("message", P),
                                                   ("message_size", SIZE)])
ErrorGetCode = _struct("PJRT_Error_GetCode_Args", [("error", P), ("code", INT)])
PluginInitialize = _struct("PJRT_Plugin_Initialize_Args", [])
PluginAttributes = _struct("PJRT_Plugin_Attributes_Args", [
    ("attributes", C.POINTER(NamedValue)), ("num_attributes", SIZE)])
Event = _struct("PJRT_Event_Await_Args", [("event", P)])   # Destroy: the same layout
ClientCreate = _struct("PJRT_Client_Create_Args", [
    ("create_options", C.POINTER(NamedValue)), ("num_options", SIZE),
    ("kv_get_callback", P), ("kv_get_user_arg", P), ("kv_put_callback", P),
    ("kv_put_user_arg", P), ("client", P), ("kv_try_get_callback", P),
    ("kv_try_get_user_arg", P)])
# The key-value store callbacks' arguments (PJRT_KeyValue*Callback_Args): `callback_error`
# points to a PJRT_CallbackError, `value_deleter` is set by the callback to free its `value`.
KeyValueGet = _struct("PJRT_KeyValueGetCallback_Args", [
    ("key", P), ("key_size", SIZE), ("timeout_in_ms", INT), ("callback_error", P),
    ("user_arg", P), ("value", P), ("value_size", SIZE), ("value_deleter", P)])
KeyValueTryGet = _struct("PJRT_KeyValueTryGetCallback_Args", [
    ("key", P), ("key_size", SIZE), ("callback_error", P), ("user_arg", P),
    ("value", P), ("value_size", SIZE), ("value_deleter", P)])
KeyValuePut = _struct("PJRT_KeyValuePutCallback_Args", [
    ("key", P), ("key_size", SIZE), ("value", P), ("value_size", SIZE),
    ("callback_error", P), ("user_arg", P)])
CALLBACK_ERROR = C.CFUNCTYPE(P, INT, C.c_char_p, SIZE)   # PJRT_CallbackError
Client = _struct("PJRT_Client_Destroy_Args", [("client", P)])
ClientString = _struct("PJRT_Client_PlatformName_Args", [   # PlatformVersion: the same layout
    ("client", P), ("text", P), ("size", SIZE)])
ClientProcessIndex = _struct("PJRT_Client_ProcessIndex_Args", [("client", P),
                                                               ("process_index", INT)])
ClientDevices = _struct("PJRT_Client_Devices_Args", [   # AddressableDevices: the same layout
    ("client", P), ("devices", C.POINTER(P)), ("num_devices", SIZE)])
DeviceGetDescription = _struct("PJRT_Device_GetDescription_Args", [
    ("device", P), ("device_description", P)])
DescriptionInt = _struct("PJRT_DeviceDescription_Id_Args", [   # ProcessIndex: the same layout
    ("device_description", P), ("value", INT)])
DescriptionString = _struct("PJRT_DeviceDescription_Kind_Args", [   # DebugString: the same
    ("device_description", P), ("text", P), ("size", SIZE)])
Program = _struct("PJRT_Program", [("code", P), ("code_size", SIZE), ("format", C.c_char_p),
                                   ("format_size", SIZE)])
ClientCompile = _struct("PJRT_Client_Compile_Args", [
    ("client", P), ("program", C.POINTER(Program)), ("compile_options", P),
    ("compile_options_size", SIZE), ("executable", P)])
LoadedExecutable = _struct("PJRT_LoadedExecutable_Destroy_Args", [("executable", P)])
OptimizedProgram = _struct("PJRT_Executable_OptimizedProgram_Args", [
    ("executable", P), ("program", C.POINTER(Program))])
LoadedExecutableGetExecutable = _struct("PJRT_LoadedExecutable_GetExecutable_Args", [
    ("loaded_executable", P), ("executable", P)])
Executable = _struct("PJRT_Executable_Destroy_Args", [("executable", P)])
CostAnalysis = _struct("PJRT_Executable_GetCostAnalysis_Args", [
    ("executable", P), ("num_properties", SIZE), ("properties", C.POINTER(NamedValue))])
MEMORY_STATS = ("generated_code_size_in_bytes", "argument_size_in_bytes",
                "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
                "host_generated_code_size_in_bytes", "host_argument_size_in_bytes",
                "host_output_size_in_bytes", "host_alias_size_in_bytes",
                "host_temp_size_in_bytes", "peak_memory_in_bytes")
CompiledMemoryStats = _struct("PJRT_Executable_GetCompiledMemoryStats_Args",
                              [("executable", P)] + [(n, C.c_int64) for n in MEMORY_STATS])
ExecutableNumOutputs = _struct("PJRT_Executable_NumOutputs_Args", [
    ("executable", P), ("num_outputs", SIZE)])
OutputElementTypes = _struct("PJRT_Executable_OutputElementTypes_Args", [
    ("executable", P), ("output_types", C.POINTER(INT)), ("num_output_types", SIZE)])
OutputDimensions = _struct("PJRT_Executable_OutputDimensions_Args", [
    ("executable", P), ("num_outputs", SIZE), ("dims", I64P), ("dim_sizes", C.POINTER(SIZE))])
ExecutableSerialize = _struct("PJRT_Executable_Serialize_Args", [
    ("executable", P), ("serialized_bytes", P), ("serialized_bytes_size", SIZE),
    ("serialized_executable", P), ("serialized_executable_deleter", P)])
DeserializeAndLoad = _struct("PJRT_Executable_DeserializeAndLoad_Args", [
    ("client", P), ("serialized_executable", P), ("serialized_executable_size", SIZE),
    ("loaded_executable", P), ("overridden_serialized_compile_options", P),
    ("overridden_serialized_compile_options_size", SIZE)])
ExecuteOptions = _struct("PJRT_ExecuteOptions", [
    ("send_callbacks", P), ("recv_callbacks", P), ("num_send_ops", SIZE),
    ("num_recv_ops", SIZE), ("launch_id", INT), ("non_donatable_input_indices", I64P),
    ("num_non_donatable_input_indices", SIZE), ("context", P), ("call_location", C.c_char_p),
    ("num_tasks", SIZE), ("task_ids", C.POINTER(INT)), ("incarnation_ids", I64P)])
Execute = _struct("PJRT_LoadedExecutable_Execute_Args", [
    ("executable", P), ("options", C.POINTER(ExecuteOptions)), ("argument_lists", P),
    ("num_devices", SIZE), ("num_args", SIZE), ("output_lists", P),
    ("device_complete_events", C.POINTER(P)), ("execute_device", P)])
BufferFromHostBuffer = _struct("PJRT_Client_BufferFromHostBuffer_Args", [
    ("client", P), ("data", P), ("type", INT), ("dims", I64P), ("num_dims", SIZE),
    ("byte_strides", I64P), ("num_byte_strides", SIZE), ("host_buffer_semantics", INT),
    ("device", P), ("memory", P), ("device_layout", P), ("done_with_host_buffer", P),
    ("buffer", P)])
Buffer = _struct("PJRT_Buffer_Destroy_Args", [("buffer", P)])
BufferCopyToDevice = _struct("PJRT_Buffer_CopyToDevice_Args", [
    ("buffer", P), ("dst_device", P), ("dst_buffer", P)])
BufferToHostBuffer = _struct("PJRT_Buffer_ToHostBuffer_Args", [
    ("src", P), ("host_layout", P), ("dst", P), ("dst_size", SIZE), ("event", P)])
BufferReadyEvent = _struct("PJRT_Buffer_ReadyEvent_Args", [("buffer", P), ("event", P)])
BufferElementType = _struct("PJRT_Buffer_ElementType_Args", [("buffer", P), ("type", INT)])
BufferDimensions = _struct("PJRT_Buffer_Dimensions_Args", [
    ("buffer", P), ("dims", I64P), ("num_dims", SIZE)])

TopologyCreate = _struct("PJRT_TopologyDescription_Create_Args", [
    ("topology_name", C.c_char_p), ("topology_name_size", SIZE),
    ("create_options", C.POINTER(NamedValue)), ("num_options", SIZE), ("topology", P)])
Topology = _struct("PJRT_TopologyDescription_Destroy_Args", [("topology", P)])
TopologyString = _struct("PJRT_TopologyDescription_PlatformName_Args", [   # PlatformVersion: same
    ("topology", P), ("text", P), ("size", SIZE)])
TopologyDevices = _struct("PJRT_TopologyDescription_GetDeviceDescriptions_Args", [
    ("topology", P), ("descriptions", C.POINTER(P)), ("num_descriptions", SIZE)])
Compile = _struct("PJRT_Compile_Args", [
    ("topology", P), ("program", C.POINTER(Program)), ("compile_options", P),
    ("compile_options_size", SIZE), ("client", P), ("executable", P)])

# PJRT_Api's function pointers, in the header's order (append-only after PJRT_Compile).
FUNCTIONS = """
Error_Destroy Error_Message Error_GetCode Plugin_Initialize Plugin_Attributes
Event_Destroy Event_IsReady Event_Error Event_Await Event_OnReady
Client_Create Client_Destroy Client_PlatformName Client_ProcessIndex Client_PlatformVersion
Client_Devices Client_AddressableDevices Client_LookupDevice Client_LookupAddressableDevice
Client_AddressableMemories Client_Compile Client_DefaultDeviceAssignment
Client_BufferFromHostBuffer
DeviceDescription_Id DeviceDescription_ProcessIndex DeviceDescription_Attributes
DeviceDescription_Kind DeviceDescription_DebugString DeviceDescription_ToString
Device_GetDescription Device_IsAddressable Device_LocalHardwareId Device_AddressableMemories
Device_DefaultMemory Device_MemoryStats
Memory_Id Memory_Kind Memory_DebugString Memory_ToString Memory_AddressableByDevices
Executable_Destroy Executable_Name Executable_NumReplicas Executable_NumPartitions
Executable_NumOutputs Executable_SizeOfGeneratedCodeInBytes Executable_GetCostAnalysis
Executable_OutputMemoryKinds Executable_OptimizedProgram Executable_Serialize
LoadedExecutable_Destroy LoadedExecutable_GetExecutable LoadedExecutable_AddressableDevices
LoadedExecutable_Delete LoadedExecutable_IsDeleted LoadedExecutable_Execute
Executable_DeserializeAndLoad LoadedExecutable_Fingerprint
Buffer_Destroy Buffer_ElementType Buffer_Dimensions Buffer_UnpaddedDimensions
Buffer_DynamicDimensionIndices Buffer_GetMemoryLayout Buffer_OnDeviceSizeInBytes Buffer_Device
Buffer_Memory Buffer_Delete Buffer_IsDeleted Buffer_CopyToDevice Buffer_ToHostBuffer
Buffer_IsOnCpu Buffer_ReadyEvent Buffer_UnsafePointer Buffer_IncreaseExternalReferenceCount
Buffer_DecreaseExternalReferenceCount Buffer_OpaqueDeviceMemoryDataPointer
CopyToDeviceStream_Destroy CopyToDeviceStream_AddChunk CopyToDeviceStream_TotalBytes
CopyToDeviceStream_GranuleSize CopyToDeviceStream_CurrentBytes
TopologyDescription_Create TopologyDescription_Destroy TopologyDescription_PlatformName
TopologyDescription_PlatformVersion TopologyDescription_GetDeviceDescriptions
TopologyDescription_Serialize TopologyDescription_Attributes Compile
Executable_OutputElementTypes Executable_OutputDimensions Buffer_CopyToMemory
Client_CreateViewOfDeviceBuffer Executable_Fingerprint Client_TopologyDescription
Executable_GetCompiledMemoryStats Memory_Kind_Id ExecuteContext_Create ExecuteContext_Destroy
Buffer_CopyRawToHost AsyncHostToDeviceTransferManager_Destroy
AsyncHostToDeviceTransferManager_TransferData Client_CreateBuffersForAsyncHostToDevice
AsyncHostToDeviceTransferManager_RetrieveBuffer AsyncHostToDeviceTransferManager_Device
AsyncHostToDeviceTransferManager_BufferCount AsyncHostToDeviceTransferManager_BufferSize
AsyncHostToDeviceTransferManager_SetBufferError AsyncHostToDeviceTransferManager_AddMetadata
Client_DmaMap Client_DmaUnmap Client_CreateUninitializedBuffer Client_UpdateGlobalProcessInfo
TopologyDescription_Deserialize Client_CreateAliasBuffer Client_FulfillAliasBuffer
LoadedExecutable_GetDeviceAssignment
""".split()

# How each PJRT_NamedValue_Type is read, by its number.
_NAMED = (lambda a: C.string_at(a.value.string_value, a.value_size).decode("utf-8", "replace"),
          lambda a: a.value.int64_value,
          lambda a: [a.value.int64_array_value[i] for i in range(a.value_size)],
          lambda a: a.value.float_value,
          lambda a: a.value.bool_value)

_Table = type("PJRT_Api", (C.Structure,), {"_fields_": _HEAD + [("pjrt_api_version", ApiVersion)]
                                            + [(name, P) for name in FUNCTIONS]})
_VOID = {"Error_Destroy", "Error_Message"}   # the functions that return nothing
_SIGNATURES = {True: C.CFUNCTYPE(None, P), False: C.CFUNCTYPE(P, P)}


def executable_of(table, loaded):
    """The PJRT_Executable* of a loaded executable (the caller destroys it)."""
    return table.call("LoadedExecutable_GetExecutable", args(
        LoadedExecutableGetExecutable, loaded_executable=loaded)).executable


def named_values(values, count):
    """`count` PJRT_NamedValues at `values` as a dict: strings, ints, lists of ints, floats
    and bools by name (values of an unknown type left out)."""
    found = {}
    for i in range(count):
        a = values[i]
        read = _NAMED[a.type] if 0 <= a.type < len(_NAMED) else None
        if read is not None:
            found[C.string_at(a.name, a.name_size).decode()] = read(a)
    return found


def check_version(version, where):
    """Refuse a plug-in whose major version differs from the header's (an ABI change: the
    structs would not match); a different minor version is fine (append-only structs)."""
    if version[0] != HEADER_VERSION[0]:
        raise PjrtUnsupportedError(
            f"{where} implements PJRT C API {version[0]}.{version[1]}; kiln speaks "
            f"{HEADER_VERSION[0]}.{HEADER_VERSION[1]}, and a different major version changes "
            f"the structs", hint="use a plug-in built for PJRT C API "
            f"{HEADER_VERSION[0]}.x (for example the xla-cpu-pjrt or jax-cuda*-pjrt wheel of "
            f"the JAX release kiln mirrors)")


class Api:
    """A plug-in's `PJRT_Api` table (`pointer`: what `GetPjrtApi()` returned; `where`: the
    plug-in's path, for messages). `keep`: the loaded library, kept alive with the table."""

    def __init__(self, pointer, where, keep):
        self.where = where
        self.keep = keep
        size = C.c_size_t.from_address(pointer).value
        if size < _Table.pjrt_api_version.offset + _Table.pjrt_api_version.size:
            raise PjrtUnsupportedError(f"{where}: GetPjrtApi() returned a table of {size} "
                                       f"bytes, too small to be a PJRT_Api")
        # Copy at most the plug-in's table: what it does not have reads as absent below.
        self.table = _Table()
        C.memmove(C.addressof(self.table), pointer, min(size, C.sizeof(_Table)))
        self.size = size
        v = self.table.pjrt_api_version
        self.version = (v.major_version, v.minor_version)
        check_version(self.version, where)
        self._functions = {}

    def has(self, name):
        field = getattr(_Table, name)
        return field.offset + field.size <= self.size and bool(getattr(self.table, name))

    def function(self, name):
        fn = self._functions.get(name)
        if fn is None:
            if not self.has(name):
                raise PjrtUnsupportedError(
                    f"{self.where} (PJRT C API {self.version[0]}.{self.version[1]}) does not "
                    f"provide PJRT_{name}", hint="use a newer build of the plug-in")
            fn = self._functions[name] = _SIGNATURES[name in _VOID](getattr(self.table, name))
        return fn

    def call(self, name, arguments):
        """Call PJRT_<name> with `arguments` (an argument struct); raise its error."""
        self.raise_error(self.function(name)(C.byref(arguments)))
        return arguments

    def raise_error(self, error):
        """Raise the PjrtError of a `PJRT_Error*` (nothing for NULL), destroying it."""
        if not error:
            return
        message = args(ErrorMessage, error=error)
        self.function("Error_Message")(C.byref(message))
        text = C.string_at(message.message, message.message_size).decode("utf-8", "replace") \
            if message.message else "(no message)"
        code = args(ErrorGetCode, error=error)
        failed = self.function("Error_GetCode")(C.byref(code))
        self.function("Error_Destroy")(C.byref(args(ErrorDestroy, error=error)))
        if failed:   # an error while reading the code: destroy it too, keep the first message
            self.function("Error_Destroy")(C.byref(args(ErrorDestroy, error=failed)))
        name = ERROR_CODES[code.code] if not failed and 0 <= code.code < len(ERROR_CODES) \
            else "UNKNOWN"
        raise PjrtError(text, name)

    def attributes(self):
        """The plug-in's attributes (PJRT_Plugin_Attributes) as a dict: strings, ints, lists
        of ints, floats and bools by name ({} where the plug-in has no such function)."""
        if not self.has("Plugin_Attributes"):
            return {}
        out = self.call("Plugin_Attributes", args(PluginAttributes))
        return named_values(out.attributes, out.num_attributes)

    def string(self, name, struct, **handle):
        """The (text, size) string that PJRT_<name> returns, decoded."""
        out = self.call(name, args(struct, **handle))
        return C.string_at(out.text, out.size).decode("utf-8", "replace") if out.text else ""
