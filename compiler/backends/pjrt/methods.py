"""Native methods around jit's PJRT fast path: `Buffer.__del__`, `Array.block_until_ready`
and the `__call__` of a jitted function.

After a fast call (entry.py) the time left in Python is the jitted function's `__call__`, the
results' `block_until_ready` (two Python frames and a ctypes call) and their destruction
(`Buffer.__del__`, a Python frame and a ctypes call). `install(...)` and `install_call(...)`
replace them with method descriptors (`PyDescr_NewMethod` on a `PyMethodDef` built in
memory) whose C functions are emitted here with llvmlite:

- `__del__` of a Buffer whose handle is an int, of the client given, with no host array or
  done event (every execution result): the handle slot becomes None and
  `PJRT_Buffer_Destroy` runs (native.py's `kiln_pjrt_destroy_buffer`) with the GIL held, as
  jaxlib holds it when it frees an array. An error is raised as `Buffer.delete` raises it
  (`raise_error`). Any other Buffer, and any call while the interpreter is finalizing
  (`_Py_IsFinalizing`: nothing is destroyed then, as in `delete`), calls the Python `delete`
  it replaces;
- `block_until_ready` of an Array whose `_value` is a DeviceBuffer holding such a Buffer:
  the ready event is awaited (`kiln_pjrt_await_ready`) with the GIL released, as jaxlib
  awaits, an execution's error raised through `raise_error`, and the Array returned. Anything
  else calls the Python method it replaces;
- `__call__` of a class whose instances hold their fast path in a slot (`install_call`):
  the checks the Python `__call__` makes first, read from slots and counters, then the
  entry's C function called at once. The type's `tp_call` slot is set to the same code
  taking a tuple, so that calling an instance does not look `__call__` up (Python resets it
  when `__call__` is set or deleted).

Their data (function addresses, slot offsets, the client, the Python definitions) is a
tuple, as an entry's, kept in this module and read through a global each object defines
(`kiln_pjrt_<name>_bind` sets it). One client's buffers take the native path; those of
another plug-in in the same process take the Python one. `uninstall()` puts the Python
methods back. Layout checks and reference counts are entry.py's.
"""
import ctypes as C

from . import entry, native

_API = (*entry._API, "_Py_IsFinalizing")
_WORDS = (*_API, *(f"{c}.{s}" for c, s in entry._SLOTS), "int", "table", "await", "destroy")
_ITEMS = ("words", "array", "device_buffer", "buffer", "client", "none", "raise_error",
          "ready", "delete")
_METH_NOARGS = 0x4
_NEW = C.pythonapi.PyDescr_NewMethod
_NEW.argtypes, _NEW.restype = [C.py_object, C.c_void_p], C.py_object
_INSTALLED = []   # (class, name, Python definition) replaced
_KEEP = []        # the context and method definitions of the installed methods


def install(array, device_buffer, buffer, client, offsets):
    """Replace `buffer.__del__` and `array.block_until_ready` by the native methods for the
    buffers of `client`, once until `uninstall()` (`offsets`: entry.available's; see the
    module docstring). Nothing where the interpreter lacks `_Py_IsFinalizing`."""
    if "__del__" in (name for _, name, _ in _INSTALLED) or \
            not hasattr(C.pythonapi, "_Py_IsFinalizing"):
        return
    bind, delete, ready = native.load(
        "kiln.pjrt.methods", _emit, "kiln_pjrt_methods_bind", "kiln_pjrt_buffer_del",
        "kiln_pjrt_array_ready", source=__file__)
    await_ready, destroy = (C.cast(f, C.c_void_p).value for f in native.buffer_functions())
    words = [entry.address(a) for a in _API]
    words += [offsets[f"{c}.{s}"] for c, s in entry._SLOTS]
    words += [id(int), client.table_address, await_ready, destroy]
    data = b"".join(w.to_bytes(8, "little") for w in words)
    context = (data, array, device_buffer, buffer, client, None, client.api.raise_error,
               array.block_until_ready, buffer.delete)
    C.CFUNCTYPE(None, C.c_void_p)(bind)(id(context))
    _KEEP.append(context)
    _define(buffer, "__del__", delete, _METH_NOARGS,
            b"__del__($self, /)\n--\n\nDestroy the device buffer.")
    _define(array, "block_until_ready", ready, _METH_NOARGS,
            b"block_until_ready($self, /)\n--\n\nWait until the array's value is computed; "
            b"returns the array.")


_CALL_API = (*entry._API, "PyMethod_New", "PyObject_Call")
_CALL_WORDS = (*_CALL_API, "slot", "builtin", "entry_doc", "false", "zero")
TP_CALL = 128   # PyTypeObject.tp_call
_CALL_ITEMS = ("words", "miss", "fallback")


def install_call(cls, slot, fallback, miss, false_slots, zero_cells):
    """Make `cls.__call__` a native method (METH_FASTCALL | METH_KEYWORDS), once until
    `uninstall()`: a call without keywords, while each (object, slot name) of `false_slots`
    holds False and each one-item list of `zero_cells` holds 0, calls the entry in the
    instance's `slot` (a builtin of entry.py, recognised by its `ml_doc`; its C function
    called at once with the DIRECT flag) on the arguments as they are, and returns its result
    unless it is `miss`; every other call (keywords, another value in `slot`, a check that
    fails, a miss) is `fallback(self, *args, **kwargs)`, the Python `__call__` it replaces.
    Nothing where the layout is not the one checked (entry.layout_ok, the slots' offsets).
    An exception from the entry propagates as it is."""
    offsets = [entry.checked_offset(cls, slot)]
    offsets += [entry.checked_offset(type(obj), name) for obj, name in false_slots]
    if "__call__" in (name for _, name, _ in _INSTALLED) or None in offsets \
            or not entry.layout_ok() or not all(type(c) is list and len(c) == 1
                                                for c in zero_cells):
        return
    n, k = len(false_slots), len(zero_cells)
    bind, call, tp_call = native.load(
        f"kiln.pjrt.call.{n}.{k}", lambda module: _emit_call(module, n, k),
        "kiln_pjrt_call_bind", "kiln_pjrt_jitted_call", "kiln_pjrt_jitted_tp_call",
        source=__file__)
    words = [entry.address(a) for a in _CALL_API]
    words += [offsets[0], id(type(len)), C.addressof(entry.ENTRY_DOC), id(False), id(0)]
    words += offsets[1:]
    data = b"".join(w.to_bytes(8, "little") for w in words)
    context = (data, miss, fallback, *(obj for obj, _ in false_slots), *zero_cells)
    C.CFUNCTYPE(None, C.c_void_p)(bind)(id(context))
    _KEEP.append(context)
    _define(cls, "__call__", call, 0x80 | 0x2,   # METH_FASTCALL | METH_KEYWORDS
            b"__call__($self, /, *args, **kwargs)\n--\n\nCall self as a function.")
    # A call of an instance goes through the type's tp_call, which Python set to look
    # `__call__` up and call it: the native tp_call saves that (and is reset with __call__).
    slot = C.c_void_p.from_address(id(cls) + TP_CALL)
    functions_call = C.c_void_p.from_address(id(type(_define)) + TP_CALL).value
    if functions_call == entry.address("PyVectorcall_Call") and slot.value:
        slot.value = tp_call


def _define(cls, name, function, flags, doc):
    names = C.create_string_buffer(name.encode()), C.create_string_buffer(doc)
    method = entry._METHOD_DEF(C.addressof(names[0]), function, flags, C.addressof(names[1]))
    _KEEP.append((names, method))
    _INSTALLED.append((cls, name, cls.__dict__[name] if name in cls.__dict__ else None))
    setattr(cls, name, _NEW(cls, C.addressof(method)))


def uninstall():
    """Put the Python methods back (the native ones' data stays alive)."""
    while _INSTALLED:
        cls, name, function = _INSTALLED.pop()
        if function is None:
            delattr(cls, name)
        else:
            setattr(cls, name, function)


# ------------------------------------------------------------------------------------ IR

def _context(module, name):
    """The global `kiln_pjrt_<name>_context` (the address of a context tuple) and its setter
    `kiln_pjrt_<name>_bind(context)`."""
    import llvmlite.ir as ir
    i64 = ir.IntType(64)
    context = ir.GlobalVariable(module, i64, f"kiln_pjrt_{name}_context")
    context.initializer = i64(0)
    bind = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64]), f"kiln_pjrt_{name}_bind")
    builder = ir.IRBuilder(bind.append_basic_block("entry"))
    builder.store(bind.args[0], context)
    builder.ret_void()
    return context


def _emit(module):
    context = _context(module, "methods")
    _emit_del(_method(module, "kiln_pjrt_buffer_del", context, "delete"))
    _emit_ready(_method(module, "kiln_pjrt_array_ready", context, "ready"))


def _method(module, symbol, context, fallback):
    """A METH_NOARGS function's builder whose miss block returns `fallback(self)`."""
    e = entry.CApiEmitter(module, symbol, 2, _WORDS, _ITEMS,
                          lambda e: e.builder.load(context))
    e.obj = e.function.args[0]
    with e.in_block(e.miss):
        e.builder.ret(e.vectorcall(e.item(fallback), [e.obj]))
    return e


def _buffer_handle(e, buffer):
    """The PJRT_Buffer* of `buffer` (a Buffer of the client, no host array or done event),
    else to the miss block."""
    e.require(e.equal(e.field(buffer, "buffer.client"), e.item("client")))
    none = e.item("none")
    e.require(e.equal(e.field(buffer, "buffer._done"), none))
    e.require(e.equal(e.field(buffer, "buffer._host"), none))
    handle = e.field(buffer, "buffer.handle")
    return handle, e.pointer_of(handle)


def _native_call(e, name, pointer, release):
    """Call kiln_pjrt_<name>(table, pointer), with the GIL released if `release`; on an
    error, raise it (`raise_error`) and return NULL."""
    state = e.capi("PyEval_SaveThread") if release else None
    error = e.call_address(e.word(name), [e.word("table"), pointer])
    if release:
        e.capi("PyEval_RestoreThread", state, returns=e.ir.VoidType())
    e.raise_if_error(error)


def _emit_del(e):
    b = e.builder
    e.require(e.equal(e.capi("_Py_IsFinalizing", returns=e.ir.IntType(32)),
                      e.ir.IntType(32)(0)))
    handle, pointer = _buffer_handle(e, e.obj)
    none = e.item("none")
    e.capi("Py_IncRef", none)
    address = b.inttoptr(b.add(e.obj, e.word("buffer.handle")), e.i64.as_pointer())
    b.store(none, address)
    e.capi("Py_DecRef", handle)
    _native_call(e, "destroy", pointer, release=False)
    e.capi("Py_IncRef", none)
    b.ret(none)


def _emit_ready(e):
    value = e.field(e.obj, "array._value")
    e.type_is(value, "device_buffer")
    buffer = e.field(value, "device_buffer.data")
    e.type_is(buffer, "buffer")
    _, pointer = _buffer_handle(e, buffer)
    _native_call(e, "await", pointer, release=True)
    e.capi("Py_IncRef", e.obj)
    e.builder.ret(e.obj)


def _emit_call(module, n, k):
    context = _context(module, "call")

    def locate(e):
        return e.builder.load(context)
    # The method: (self, args, nargs, kwnames).
    e = entry.CApiEmitter(module, "kiln_pjrt_jitted_call", 4, _CALL_WORDS, _CALL_ITEMS, locate)
    obj, args, nargs, kwnames = e.function.args
    with e.in_block(e.miss):
        # Through a method descriptor args[-1] is self (the descriptor was called with self
        # and the arguments in one array): the fallback gets that array as it is.
        whole = e.builder.sub(args, e.i64(8))
        e.builder.ret(e.capi("PyObject_Vectorcall", e.item("fallback"), whole,
                             e.builder.add(nargs, e.i64(1)), kwnames))
    e.require(e.equal(kwnames, e.i64(0)))
    e.builder.ret(_call_entry(e, obj, args, nargs, n, k))
    # tp_call: (self, args tuple, kwargs dict or NULL).
    e = entry.CApiEmitter(module, "kiln_pjrt_jitted_tp_call", 3, _CALL_WORDS, _CALL_ITEMS,
                          locate)
    obj, packed, kwargs = e.function.args
    with e.in_block(e.miss):   # the fallback as a bound method: self goes in front
        bound = e.capi("PyMethod_New", e.item("fallback"), obj)
        e.fails_if(e.equal(bound, e.i64(0)))
        out = e.capi("PyObject_Call", bound, packed, kwargs)
        e.capi("Py_DecRef", bound)
        e.builder.ret(out)
    e.require(e.equal(kwargs, e.i64(0)))
    items = e.builder.add(packed, e.i64(entry.TUPLE_ITEMS))
    e.builder.ret(_call_entry(e, obj, items, e.load(packed, entry.VAR_SIZE), n, k))


def _call_entry(e, obj, args, nargs, n, k):
    """The checks and the entry's call on the arguments `args[:nargs]` (see install_call):
    the result; to the miss block where a check fails or the entry misses."""
    b, zero = e.builder, e.i64(0)
    fast = e.load(e.builder.add(obj, e.word("slot")), 0)
    e.require(b.icmp_unsigned("!=", fast, zero))
    e.require(e.equal(e.load(fast, entry.OB_TYPE), e.word("builtin")))
    method = e.load(fast, entry.CFUNCTION_ML)
    e.require(e.equal(e.load(method, 24), e.word("entry_doc")))   # ml_doc
    for i in range(n):   # the false slots: their objects, then their offsets in the words
        value = e.load(b.add(e.item(i), e.word("zero", 1 + i)), 0)
        e.require(e.equal(value, e.word("false")))
    for i in range(k):   # the zero cells: lists of one item
        items = e.load(e.item(n + i), entry.TUPLE_ITEMS)   # PyListObject.ob_item
        e.require(e.equal(e.load(items, 0), e.word("zero")))
    # A reference to the entry for the call: another thread may replace the slot's value
    # while the entry has released the GIL.
    e.capi("Py_IncRef", fast)
    out = e.call_address(e.load(method, 8), [e.load(fast, entry.CFUNCTION_SELF), args,
                                             b.or_(nargs, e.i64(entry.DIRECT))])
    e.capi("Py_DecRef", fast)
    e.fails_if(e.equal(out, zero))
    with b.if_then(e.equal(out, e.item("miss")), likely=False):
        e.capi("Py_DecRef", out)
        b.branch(e.miss)
    return out
