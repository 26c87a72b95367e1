"""A CPython builtin that runs one PJRT executable on Python objects: no ctypes, no Python frame.

`make(spec)` gives a `builtin_function_or_method` whose C function is emitted here with
llvmlite, `PyObject* entry(PyObject* self, PyObject* const* args, Py_ssize_t nargs)`
(METH_FASTCALL), wrapped with `PyCFunction_NewEx` on a `PyMethodDef` built in memory and kept
alive by `self`. It is called with one argument, the tuple of a call's arguments, and:

1. checks them natively: the tuple's length, that the executable is live (its `live` list is
   not empty), the guards (`guards_ok()`, when there is one, must return True), and for each
   argument that it is exactly an `Array` (the `array` type given) with the expected weak type
   (the very object: True or False), whose `_value` is exactly a `DeviceBuffer` of the
   expected `layer`, whose `data` is exactly a `Buffer` with a handle (an int) and the expected
   shape and dtype (the same objects, or shape tuples of the same items, else equal by `==`);
2. runs `PJRT_LoadedExecutable_Execute` on the handles (and the constants' handles) through
   the plug-in's function pointer, with its structs and the output handles on the native
   stack, the GIL released around the call (as jaxlib does around its Execute);
3. makes each output as `object.__new__` would (`PyType_GenericAlloc`) and fills its slots
   (a Buffer with its client, handle, device, shape and dtype, `_host` and `_done` None; a
   DeviceBuffer of it and the layer; an Array of that with the output's weak type), and
   returns the single Array, or a tuple of them, or `finish(tuple)` when a pytree is given.

Anything that does not match returns the `miss` object given, with nothing run, and the
caller takes its Python path. A plug-in error is passed, as an int, to `raise_error` (which
raises the PjrtError with the plug-in's message); the entry then returns NULL with that
exception set. An exception from the guards or from a shape or dtype comparison propagates
the same way. References are exact: arguments are borrowed, each new object's slots own one
reference to what they hold. Should an allocation fail (MemoryError) after the execution,
the outputs not yet wrapped are not destroyed on the device.

What it reads of CPython's objects (the type pointer at 8, a tuple's items at 24 and its size
at 16, a list's size at 16 and its items' pointer at 24, a bytes object's data at 32, a
builtin's method definition at 16 and `self` at 24, the slots of the classes given at the
offsets their member descriptors hold) is checked against the running interpreter by
`available()`, which also needs the C API functions below; where anything differs the caller
keeps its Python path. The code is one object per (argument ranks, constants, outputs, form),
compiled once per machine and loaded once per process (`native.load`); everything
process-specific (function addresses, offsets, the objects compared against) is data in
`self`, a tuple: a bytes object of words, then objects (see `_WORDS` and `_ITEMS`).

methods.py's native `__call__` calls the C function itself with `DIRECT` in `nargs` and the
arguments as they are in `args` (no tuple). Every entry's `ml_doc` is `ENTRY_DOC`, which is
how that `__call__` recognises one.
"""
import ctypes as C
import functools
import sys

from . import api, native

_API = ("PyType_GenericAlloc", "PyLong_AsVoidPtr", "PyLong_FromVoidPtr", "Py_IncRef",
        "Py_DecRef", "PyEval_SaveThread", "PyEval_RestoreThread", "PyObject_RichCompareBool",
        "PyTuple_New", "PyObject_Vectorcall", "PyErr_Clear")
_SLOTS = (("array", "_value"), ("array", "weak_type"), ("device_buffer", "data"),
          ("device_buffer", "layer"), ("buffer", "client"), ("buffer", "handle"),
          ("buffer", "device"), ("buffer", "shape"), ("buffer", "dtype"), ("buffer", "_host"),
          ("buffer", "_done"))
# self's bytes: execute, executable, options, the C API functions, the slots' offsets, the
# addresses of int, tuple and True, then the constants' handles.
_WORDS = ("execute", "executable", "options", *_API, *(f"{c}.{s}" for c, s in _SLOTS),
          "int", "tuple", "true")
# self's objects after the bytes, then (weak, shape, dtype) per argument and per output.
_ITEMS = ("words", "array", "device_buffer", "buffer", "layer", "miss", "live", "guards_ok",
          "raise_error", "finish", "client", "device", "none", "keep")
OB_TYPE, VAR_SIZE, TUPLE_ITEMS, BYTES_DATA = 8, 16, 24, 32
DIRECT = 1 << 62        # in nargs: argv holds the arguments themselves
CFUNCTION_ML, CFUNCTION_SELF = 16, 24   # PyCFunctionObject.m_ml, m_self
ENTRY_DOC = C.create_string_buffer(b"kiln's PJRT fast path")   # every entry's ml_doc
_MEMBER_DESCR = 40      # PyMemberDescrObject.d_member (after PyDescr_COMMON)
_T_OBJECT_EX = 16
_METH_FASTCALL = 0x80
_PY_EQ = 2


class Spec:
    """What an entry checks and makes (see the module docstring): `function` (the
    ctypes-path executable's `native.Context`, for the execute address, executable and
    options), `array`, `device_buffer`, `buffer` (the three classes), `layer`, `client`,
    `device` (the Buffer slots of outputs), `inputs` and `outputs` ([(weak, shape, dtype)]),
    `constants` (handles), `single` (return the one output itself), `finish` (None, or a
    function of the outputs' tuple), `guards_ok` (None or a function), `live`, `miss`,
    `raise_error`, `keep` (anything else to keep alive)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def address(name):
    """The address of the C API function `name`."""
    return C.cast(getattr(C.pythonapi, name), C.c_void_p).value


def slot_offset(cls, name):
    """The offset of `cls`'s `__slots__` member `name` in its instances, from its member
    descriptor (PyMemberDescrObject -> PyMemberDef), or None where that is not a plain object
    slot."""
    descriptor = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
    if type(descriptor).__name__ != "member_descriptor":
        return None
    member = C.c_void_p.from_address(id(descriptor) + _MEMBER_DESCR).value
    if not member or C.string_at(C.c_void_p.from_address(member).value) != name.encode() \
            or C.c_int.from_address(member + 8).value != _T_OBJECT_EX:
        return None
    return C.c_ssize_t.from_address(member + 16).value


def checked_offset(cls, name):
    """`slot_offset(cls, name)` checked on an instance (a sentinel set through Python, read
    back at the offset, then removed), or None."""
    if type(cls) is not type or cls.__new__ is not object.__new__:
        return None
    offset = slot_offset(cls, name)
    if offset is None:
        return None
    sample, sentinel = object.__new__(cls), object()
    setattr(sample, name, sentinel)
    seen = C.c_void_p.from_address(id(sample) + offset).value
    delattr(sample, name)
    return offset if seen == id(sentinel) else None


def _offsets(classes):
    """{"class.slot": offset} for _SLOTS (checked_offset), or None."""
    found = {}
    for role, name in _SLOTS:
        found[f"{role}.{name}"] = offset = checked_offset(classes[role], name)
        if offset is None:
            return None
    return found


@functools.lru_cache(maxsize=None)
def layout_ok():
    if sys.implementation.name != "cpython" or not all(hasattr(C.pythonapi, n) for n in _API):
        return False
    data, listed = b"kiln", [1, 2, 3]
    pack = (data, None)
    read = C.c_void_p.from_address
    method = read(id(len) + CFUNCTION_ML).value
    return (read(id(pack) + OB_TYPE).value == id(tuple)
            and read(id(len) + CFUNCTION_SELF).value == id(len.__self__)
            and C.string_at(read(method).value) == b"len"
            and C.c_ssize_t.from_address(id(pack) + VAR_SIZE).value == 2
            and read(id(pack) + TUPLE_ITEMS).value == id(data)
            and C.c_ssize_t.from_address(id(listed) + VAR_SIZE).value == 3
            and read(read(id(listed) + TUPLE_ITEMS).value).value == id(listed[0])
            and C.string_at(id(data) + BYTES_DATA, 4) == data)


def available(array, device_buffer, buffer):
    """The slot offsets of the three classes when this interpreter has the layout the entry
    reads (see the module docstring), else None."""
    if not layout_ok():
        return None
    return _offsets({"array": array, "device_buffer": device_buffer, "buffer": buffer})


_METHOD_DEF = C.c_void_p * 4   # ml_name, ml_meth, ml_flags (an int, padded), ml_doc
_NEW = C.pythonapi.PyCFunction_NewEx
_NEW.argtypes, _NEW.restype = [C.c_void_p, C.py_object, C.c_void_p], C.py_object


def make(spec, offsets):
    """The builtin for `spec` (offsets: `available(...)`)."""
    k, m = len(spec.constants), len(spec.outputs)
    ranks = tuple(len(shape) for _, shape, _ in spec.inputs)
    form = "single" if spec.single else "tuple"
    tag = f"{'_'.join(map(str, ranks)) or 'none'}_{k}_{m}_{form}"
    symbol = f"kiln_pjrt_entry_{tag}"
    function = native.load(f"kiln.pjrt.entry.{tag}",
                           lambda module: _emit(module, symbol, ranks, k, m, spec.single), symbol,
                           source=__file__)
    context = spec.function
    words = [context.words[i] or 0 for i in range(3)]
    words += [address(a) for a in _API] + [offsets[f"{c}.{s}"] for c, s in _SLOTS]
    words += [id(int), id(tuple), id(True)] + list(spec.constants)
    data = b"".join(w.to_bytes(8, "little", signed=w < 0) for w in words)
    name = b"kiln_pjrt_fast_path"
    method = _METHOD_DEF(C.cast(C.c_char_p(name), C.c_void_p).value, function, _METH_FASTCALL,
                         C.addressof(ENTRY_DOC))
    items = [data, spec.array, spec.device_buffer, spec.buffer, spec.layer, spec.miss,
             spec.live, spec.guards_ok, spec.raise_error, spec.finish, spec.client, spec.device,
             None, (method, name, context, spec.keep)]
    for weak, shape, dtype in (*spec.inputs, *spec.outputs):
        items += [weak, shape, dtype]
    return _NEW(C.addressof(method), tuple(items), None)


# ------------------------------------------------------------------------------------ IR

class CApiEmitter(native._Emitter):
    """A builder of functions that work on Python objects through the C API. Their data is a
    tuple, `context` (an i64 value made by `locate(emitter)` in the entry block): a bytes
    object of words named `words`, then objects named `items` (then more, by number).
    `item(name)` reads the objects, `word(name)` the words, `capi(name, *args)` calls a C API
    function, `require(condition)` goes on only where it holds (else to the `miss` block,
    which the subclass fills), `fails_if(condition)` returns NULL (an exception is set)."""

    def __init__(self, module, symbol, num_params, words, items, locate):
        super().__init__(module, symbol, num_params)
        self.names, self.items = words, items
        self.context = locate(self)
        self.data = self.builder.add(self.load(self.context, TUPLE_ITEMS), self.i64(BYTES_DATA))
        self.miss = self.function.append_basic_block("miss")
        self.null = self.function.append_basic_block("error")
        self.ir.IRBuilder(self.null).ret(self.i64(0))

    def in_block(self, block):
        """A context manager: the builder at the end of `block`, then back where it was."""
        return self.builder.goto_block(block)

    def item(self, name):
        index = self.items.index(name) if isinstance(name, str) else len(self.items) + name
        return self.load(self.context, TUPLE_ITEMS + 8 * index)

    def word(self, name, extra=0):
        return self.load(self.data, 8 * (self.names.index(name) + extra))

    def capi(self, name, *args, returns=None):
        return self.call_address(self.word(name), args, returns)

    def call_address(self, address, args, returns=None):
        returns = returns or self.i64
        kind = self.ir.FunctionType(returns, [self.i64] * len(args))
        return self.builder.call(self.builder.inttoptr(address, kind.as_pointer()), args)

    def require(self, condition):
        ok = self.function.append_basic_block("ok")
        self.builder.cbranch(condition, ok, self.miss)
        self.builder.position_at_end(ok)

    def equal(self, a, b):
        return self.builder.icmp_unsigned("==", a, b)

    def type_is(self, obj, name):
        self.require(self.builder.icmp_unsigned("!=", obj, self.i64(0)))
        self.require(self.equal(self.load(obj, OB_TYPE), self.item(name)))

    def fails_if(self, condition):
        """Return NULL (an exception is set) where `condition` holds."""
        ok = self.function.append_basic_block("ok")
        self.builder.cbranch(condition, self.null, ok)
        self.builder.position_at_end(ok)

    def field(self, obj, name):
        """The object in `obj`'s slot `name` (a borrowed reference, 0 where unset)."""
        address = self.builder.add(obj, self.word(name))
        return self.builder.load(self.builder.inttoptr(address, self.i64.as_pointer()))

    def set_slot(self, obj, name, value, owned=False):
        """Store `value` in a fresh object's slot: a new reference to it unless `owned`."""
        if not owned:
            self.capi("Py_IncRef", value)
        address = self.builder.add(obj, self.word(name))
        self.builder.store(value, self.builder.inttoptr(address, self.i64.as_pointer()))

    def same_or_equal(self, value, expected, rank=None):
        """Require `value is expected or value == expected` (an exception propagates). With
        `rank` (expected is a tuple of that length) two tuples whose items are the same
        objects (small ints are) are equal without a comparison call."""
        b = self.builder
        done = self.function.append_basic_block("same")
        compare = self.function.append_basic_block("compare")
        if rank is None:
            b.cbranch(self.equal(value, expected), done, compare)
        else:
            items = self.function.append_basic_block("items")
            b.cbranch(self.equal(value, expected), done, items)
            b.position_at_end(items)
            same = b.and_(self.equal(self.load(value, OB_TYPE), self.word("tuple")),
                          self.equal(self.load(value, VAR_SIZE), self.i64(rank)))
            for i in range(rank):   # loads within the value's size only where it is a tuple
                at = self.i64(TUPLE_ITEMS + 8 * i)
                address = b.select(same, b.add(value, at), b.add(expected, at))
                item = b.load(b.inttoptr(address, self.i64.as_pointer()))
                same = b.and_(same, self.equal(item, self.load(expected, TUPLE_ITEMS + 8 * i)))
            b.cbranch(same, done, compare)
        b.position_at_end(compare)
        result = self.capi("PyObject_RichCompareBool", value, expected, self.i64(_PY_EQ),
                           returns=self.ir.IntType(32))
        self.fails_if(b.icmp_signed("<", result, self.ir.IntType(32)(0)))
        self.require(b.icmp_signed("!=", result, self.ir.IntType(32)(0)))
        b.branch(done)
        b.position_at_end(done)

    def pointer_of(self, handle):
        """The pointer an int object `handle` holds (a borrowed slot value, 0 where unset);
        to the miss block where it is not an int or not a non-NULL pointer."""
        b, zero = self.builder, self.i64(0)
        self.require(b.icmp_unsigned("!=", handle, zero))
        self.require(self.equal(self.load(handle, OB_TYPE), self.word("int")))
        pointer = self.capi("PyLong_AsVoidPtr", handle)
        with b.if_then(self.equal(pointer, zero), likely=False):
            self.capi("PyErr_Clear")   # an int out of a pointer's range
            b.branch(self.miss)
        return pointer

    def raise_if_error(self, error):
        """Where `error` (a PJRT_Error*) is not NULL: pass it, as an int, to the item
        `raise_error` (which raises the plug-in's error) and return NULL."""
        b, zero = self.builder, self.i64(0)
        with b.if_then(b.icmp_unsigned("!=", error, zero), likely=False):
            code = self.capi("PyLong_FromVoidPtr", error)
            self.fails_if(self.equal(code, zero))
            raised = self.vectorcall(self.item("raise_error"), [code])
            self.capi("Py_DecRef", code)
            with b.if_then(b.icmp_unsigned("!=", raised, zero)):
                self.capi("Py_DecRef", raised)
            b.branch(self.null)

    def vectorcall(self, callable_, args):
        """callable_(*args) (a new reference, or 0 with an exception set)."""
        array = self.words(max(1, len(args)))
        for i, value in enumerate(args):
            self.store(value, array, 8 * i)
        return self.capi("PyObject_Vectorcall", callable_, array, self.i64(len(args)),
                         self.i64(0))

    def alloc(self, name):
        """A new zeroed instance of the class `name` (object.__new__'s allocation)."""
        return self.capi("PyType_GenericAlloc", self.item(name), self.i64(0))


def _emit(module, symbol, ranks, k, m, single):
    e = CApiEmitter(module, symbol, 3, _WORDS, _ITEMS, lambda e: e.function.args[0])
    with e.in_block(e.miss):   # the miss object (a new reference)
        missed = e.item("miss")
        e.capi("Py_IncRef", missed)
        e.builder.ret(missed)
    e.argv, e.nargs = e.function.args[1:]
    b, zero, n = e.builder, e.i64(0), len(ranks)
    # The arguments: argv itself (nargs with the DIRECT flag: methods.py's __call__), else
    # the items of the one tuple given.
    direct = b.icmp_unsigned("!=", b.and_(e.nargs, e.i64(DIRECT)), zero)
    with b.if_else(direct) as (then, otherwise):
        with then:
            e.require(e.equal(e.nargs, e.i64(DIRECT | n)))
            from_argv = b.block
        with otherwise:
            e.require(e.equal(e.nargs, e.i64(1)))
            packed = e.load(e.argv, 0)
            e.require(e.equal(e.load(packed, OB_TYPE), e.word("tuple")))
            e.require(e.equal(e.load(packed, VAR_SIZE), e.i64(n)))
            items = b.add(packed, e.i64(TUPLE_ITEMS))
            from_tuple = b.block
    args = b.phi(e.i64)
    args.add_incoming(e.argv, from_argv)
    args.add_incoming(items, from_tuple)
    e.require(b.icmp_unsigned("!=", e.load(e.item("live"), VAR_SIZE), zero))
    guards = e.item("guards_ok")
    with b.if_then(b.icmp_unsigned("!=", guards, e.item("none"))):
        result = e.vectorcall(guards, [])
        e.fails_if(e.equal(result, zero))
        e.capi("Py_DecRef", result)
        e.require(e.equal(result, e.word("true")))
    handles = e.words(max(1, n + k))
    for i in range(n):
        a = e.load(args, 8 * i)
        e.require(e.equal(e.load(a, OB_TYPE), e.item("array")))
        e.require(e.equal(e.field(a, "array.weak_type"), e.item(3 * i)))
        v = e.field(a, "array._value")
        e.type_is(v, "device_buffer")
        e.require(e.equal(e.field(v, "device_buffer.layer"), e.item("layer")))
        buffer = e.field(v, "device_buffer.data")
        e.type_is(buffer, "buffer")
        e.same_or_equal(e.field(buffer, "buffer.shape"), e.item(3 * i + 1), ranks[i])
        e.same_or_equal(e.field(buffer, "buffer.dtype"), e.item(3 * i + 2))
        e.store(e.pointer_of(e.field(buffer, "buffer.handle")), handles, 8 * i)
    for j in range(k):
        e.store(e.word("true", 1 + j), handles, 8 * (n + j))
    outputs = e.words(max(1, m))
    argument_list, output_list = e.words(1), e.words(1)
    e.store(handles, argument_list, 0)
    e.store(outputs, output_list, 0)
    execute = e.struct(api.Execute, executable=e.word("executable"), options=e.word("options"),
                       argument_lists=argument_list, num_devices=e.i64(1),
                       num_args=e.i64(n + k), output_lists=output_list)
    state = e.capi("PyEval_SaveThread")
    error = e.call(e.word("execute"), execute)
    e.capi("PyEval_RestoreThread", state, returns=e.ir.VoidType())
    e.raise_if_error(error)
    made = zero if single else e.capi("PyTuple_New", e.i64(m))
    if not single:
        e.fails_if(e.equal(made, zero))
    for j in range(m):
        at = 3 * (n + j)
        buffer = e.alloc("buffer")
        e.fails_if(e.equal(buffer, zero))
        e.set_slot(buffer, "buffer.client", e.item("client"))
        e.set_slot(buffer, "buffer.device", e.item("device"))
        e.set_slot(buffer, "buffer.shape", e.item(at + 1))
        e.set_slot(buffer, "buffer.dtype", e.item(at + 2))
        e.set_slot(buffer, "buffer._host", e.item("none"))
        e.set_slot(buffer, "buffer._done", e.item("none"))
        handle = e.capi("PyLong_FromVoidPtr", e.load(outputs, 8 * j))
        with b.if_then(e.equal(handle, zero), likely=False):
            e.capi("Py_DecRef", buffer)
            b.branch(e.null)
        e.set_slot(buffer, "buffer.handle", handle, owned=True)
        wrapped = e.alloc("device_buffer")
        with b.if_then(e.equal(wrapped, zero), likely=False):
            e.capi("Py_DecRef", buffer)
            b.branch(e.null)
        e.set_slot(wrapped, "device_buffer.data", buffer, owned=True)
        e.set_slot(wrapped, "device_buffer.layer", e.item("layer"))
        out = e.alloc("array")
        with b.if_then(e.equal(out, zero), likely=False):
            e.capi("Py_DecRef", wrapped)
            b.branch(e.null)
        e.set_slot(out, "array._value", wrapped, owned=True)
        e.set_slot(out, "array.weak_type", e.item(at))
        if single:
            made = out
        else:
            e.store(out, made, TUPLE_ITEMS + 8 * j)
    if single:
        b.ret(made)
        return
    finish = e.item("finish")
    with b.if_then(e.equal(finish, e.item("none"))):
        b.ret(made)
    result = e.vectorcall(finish, [made])
    e.capi("Py_DecRef", made)
    b.ret(result)
