"""PJRT_Client_Create's key-value store callbacks over a Python store.

    callbacks(store, prefix=b"") -> {PJRT_Client_Create_Args field: value}

`store` has `get(key, timeout)` (bytes, or a TimeoutError after `timeout` seconds),
`try_get(key)` (bytes, or None when the key is absent) and `put(key, value)`, keys and values
being bytes (runtime/pjrt_store.py's `MpiStore` over MPI). The three callbacks (ctypes
functions, kept alive by the returned dict's "keep" entry, which the client holds) follow
pjrt_c_api.h (API 0.81 in the xla-cpu-pjrt wheel): each reads the key (and value) from its
argument struct and uses the key after `prefix` (one per plug-in: the header leaves keeping
plug-ins' keys apart to the caller); get and try-get return the value in memory from the C
library's `malloc`, with `free` as its deleter, which the plug-in calls once it has copied it. A
missing key (try-get) is the plug-in's NOT_FOUND error, a get that times out DEADLINE_EXCEEDED
and any other failure INTERNAL, each made through the arguments' `callback_error` with the
message.
"""
import ctypes as C

from . import api

NOT_FOUND, DEADLINE_EXCEEDED, INTERNAL = 5, 4, 13   # PJRT_Error_Code
_LIBC = C.CDLL(None)
_LIBC.malloc.restype = C.c_void_p
_LIBC.malloc.argtypes = [C.c_size_t]
_FREE = C.cast(_LIBC.free, C.c_void_p).value


def _error(args, code, message):
    """The PJRT_Error the plug-in's callback_error makes of `code` and `message`."""
    make = api.CALLBACK_ERROR(C.c_void_p.from_address(args.callback_error).value)
    raw = message.encode()
    return make(code, raw, len(raw))


def _returned(args, value):
    """Hand `value` (bytes) to the plug-in as malloc'd memory it frees with `free`."""
    memory = _LIBC.malloc(max(1, len(value)))
    C.memmove(memory, value, len(value))
    args.value, args.value_size, args.value_deleter = memory, len(value), _FREE


def _bytes(address, size):
    return C.string_at(address, size) if size else b""


def _callback(struct, body, prefix):
    def call(pointer):
        args = C.cast(pointer, C.POINTER(struct)).contents
        try:
            return body(args, prefix + _bytes(args.key, args.key_size))
        except TimeoutError as e:
            return _error(args, DEADLINE_EXCEEDED, str(e))
        except Exception as e:   # (the plug-in reports it)
            return _error(args, INTERNAL, f"{type(e).__name__}: {e}")
    return C.CFUNCTYPE(C.c_void_p, C.c_void_p)(call)


def callbacks(store, prefix=b""):
    """The key-value fields of PJRT_Client_Create_Args over `store` (see the docstring)."""
    def get(args, key):
        _returned(args, store.get(key, args.timeout_in_ms / 1000))

    def try_get(args, key):
        value = store.try_get(key)
        if value is None:
            return _error(args, NOT_FOUND, f"key {key!r} not found in kiln's key-value store")
        _returned(args, value)

    def put(args, key):
        store.put(key, _bytes(args.value, args.value_size))

    made = {"kv_get_callback": _callback(api.KeyValueGet, get, prefix),
            "kv_try_get_callback": _callback(api.KeyValueTryGet, try_get, prefix),
            "kv_put_callback": _callback(api.KeyValuePut, put, prefix)}
    fields = {name: C.cast(f, C.c_void_p).value for name, f in made.items()}
    fields["keep"] = made
    return fields
