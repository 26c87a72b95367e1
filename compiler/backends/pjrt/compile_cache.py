"""On-disk cache of PJRT executables, so a second process skips the plug-in's compile.

XLA's compile of a module inside the plug-in (`PJRT_Client_Compile`) is most of the time from
a new function to its first result (about 180 ms for an MLP step on the CPU plug-in). Where the
plug-in serializes executables (`PJRT_Executable_Serialize`,
`PJRT_Executable_DeserializeAndLoad`), `compile(client, code, options)` first looks for the
module's executable in the cache and loads it; on a miss it compiles and stores the
serialization. `key` covers everything that decides the executable: the module's text, the
compile options (which name the device), the plug-in (its real path, size and modification
time, so a rebuilt or upgraded plug-in never loads another's executables), its platform
version and PJRT C API version, the `XLA_FLAGS` XLA compiles under (plugins.prepare_xla_flags),
kiln's version and this cache's format.

The entries live in kiln's cache directory (`KILN_CACHE_DIR`, else `$XDG_CACHE_HOME/kiln`,
else `~/.cache/kiln`), in `pjrt/`, written and checked by the LLVM backend's `DiskCache`
(atomic writes, each entry naming its key and the sha256 of its payload, a damaged entry
deleted and a miss). `KILN_CACHE_DIR=0` disables it, as it does the LLVM backend's. An entry
the plug-in cannot load (`DeserializeAndLoad` fails) is discarded and the module compiled
again; a failure to serialize only means nothing is stored.
"""
import ctypes as C
import hashlib
import os
import sys

from . import api, ffi_targets

FORMAT = "kiln pjrt executable 2"
_DELETER = C.CFUNCTYPE(None, C.c_void_p)


def _cache():
    """The cache's DiskCache, None where KILN_CACHE_DIR turns caching off."""
    from ..llvm import disk_cache
    root = disk_cache.cache_root()
    return None if root is None else disk_cache.DiskCache(root / "pjrt")


def key(table, platform_version, code, options):
    """The entry's key: hex sha256 of everything that decides the executable (see above)."""
    status = os.stat(table.where)
    digest = hashlib.sha256()
    for part in (FORMAT, getattr(sys.modules.get("kiln"), "__version__", "unknown"),
                 f"{os.path.realpath(table.where)} {status.st_size} {status.st_mtime_ns}",
                 f"{table.version} {platform_version}", os.environ.get("XLA_FLAGS", ""),
                 options, code):
        data = part.encode() if isinstance(part, str) else bytes(part)
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def compile(client, code, options):
    """(a PJRT_LoadedExecutable* for `code` (MLIR bytes) under `options` (serialized
    CompileOptionsProto), the bytes it was loaded from or None): loaded from the cache, else
    compiled by the plug-in (None) and stored. A caller that serializes the executable later
    must use those bytes: the CPU plug-in serializes an executable it loaded without its
    compiled kernels (the bytes load, and their execution fails: "Function ... not found");
    one it compiled serializes whole."""
    ffi_targets.register_called(client, code)
    table = client.api
    usable = table.has("Executable_Serialize") and table.has("Executable_DeserializeAndLoad")
    cache = _cache() if usable else None
    entry = key(table, client.platform_version, code, options) if cache else None
    if entry is not None:
        data = cache.load(entry)
        if data is not None:
            try:
                return load(client, data), data
            except api.PjrtError as e:
                cache.discard(entry, f"the plug-in cannot load it: {e}")
    text = C.create_string_buffer(code, len(code))
    program = api.args(api.Program, code=C.addressof(text), code_size=len(code),
                       format=b"mlir", format_size=4)
    with ffi_targets.explained():
        loaded = table.call("Client_Compile", api.args(
            api.ClientCompile, client=client.handle, program=C.pointer(program),
            compile_options=C.cast(C.c_char_p(options), C.c_void_p),
            compile_options_size=len(options))).executable
    if entry is not None:
        data = serialize(table, loaded)
        if data is not None:
            cache.store(entry, data)
    return loaded, None


def load(client, data, options=None):
    """`PJRT_Executable_DeserializeAndLoad` of `data` (bytes the plug-in serialized) on
    `client`: a PJRT_LoadedExecutable*; `options` (a serialized CompileOptionsProto, such as
    one naming another device) replaces the compile options the executable was serialized
    with. The plug-in's error (bytes it cannot read) is raised as a PjrtError."""
    ffi_targets.register_all(client)
    held = C.create_string_buffer(data, len(data))
    arguments = api.args(api.DeserializeAndLoad, client=client.handle,
                         serialized_executable=C.addressof(held),
                         serialized_executable_size=len(data))
    if options is not None:
        arguments.overridden_serialized_compile_options = C.cast(C.c_char_p(options),
                                                                 C.c_void_p)
        arguments.overridden_serialized_compile_options_size = len(options)
    return client.api.call("Executable_DeserializeAndLoad", arguments).loaded_executable


def serialize(table, loaded):
    """The plug-in's serialization of a loaded executable (bytes), None when it fails."""
    try:
        return serialize_loaded(table, loaded)
    except api.PjrtError:
        return None


def serialize_loaded(table, loaded):
    """The plug-in's serialization of a loaded executable (bytes), its error raised. Of an
    executable the plug-in compiled only: see `compile`."""
    inner = api.executable_of(table, loaded)
    try:
        return serialize_executable(table, inner)
    finally:
        table.call("Executable_Destroy", api.args(api.Executable, executable=inner))


def serialize_executable(table, executable):
    """`PJRT_Executable_Serialize` of a PJRT_Executable*, as bytes (its error raised)."""
    out = table.call("Executable_Serialize", api.args(api.ExecutableSerialize,
                                                      executable=executable))
    try:
        return C.string_at(out.serialized_bytes, out.serialized_bytes_size)
    finally:
        if out.serialized_executable_deleter:
            _DELETER(out.serialized_executable_deleter)(out.serialized_executable)
