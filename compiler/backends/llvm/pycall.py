"""The dispatch fast path: an entry point that reads its NumPy arrays itself.

Calling `kiln_main(ptr args)` from Python needs the address of every buffer, and asking NumPy
for one (`a.ctypes.data`, `a.__array_interface__`) costs about a microsecond per array, more
than the rest of a small call. So every module the JIT loads gets a second entry point,

    i32 @<module>.kiln_call(ptr pack)     ; pack: the tuple (inputs, outputs, workspace, ndarray)

emitted by `emit_call_entry`: `inputs` is the tuple of arguments the executable was called with,
`outputs` the list of freshly allocated result arrays, `workspace` an array or None, `ndarray`
the type `numpy.ndarray`. It checks, in native code, that each input is exactly an ndarray
(no subclass) of the expected dtype (type number, native byte order), rank and shape, aligned
and C-contiguous; then it reads the data pointers of all arrays into the pointer array and
calls `kiln_main`, returning its status. An input in any other form returns
`MISMATCH - i` (i: the first such input) without running anything: the caller then converts
the arguments in Python and calls `kiln_main` itself (executable.py).

The offsets read are those of CPython's tuple and list objects and of NumPy's public
`PyArrayObject_fields`/`PyArray_Descr` structures (stable parts of their C ABIs). `layout_ok()`
checks them in the running process against what NumPy reports (data pointer, rank, shape,
flags, type number, byte order of sample arrays, items of a tuple and a list); where anything
differs (another Python implementation, a debug build) the fast path is never used. The
entry holds no GIL and touches no reference counts: the caller keeps every object alive for
the duration of the call.
"""
import ctypes
import functools

import numpy as np
import llvmlite.ir as ir

from . import ltypes as T

CALL = "kiln_call"
MISMATCH = -0x4B494C00
# Offsets (bytes) in CPython objects and NumPy's structures, checked by `layout_ok`.
OB_TYPE = 8
TUPLE_SIZE = 16
TUPLE_ITEMS = 24          # PyTupleObject.ob_item[] (inline)
LIST_ITEMS = 24           # PyListObject.ob_item (a pointer to the items)
ARRAY_DATA = 16
ARRAY_ND = 24
ARRAY_DIMS = 32
ARRAY_DESCR = 56
ARRAY_FLAGS = 64
DESCR_BYTEORDER = 26
DESCR_TYPE_NUM = 28
_ALIGNED_C_CONTIGUOUS = 0x0001 | 0x0100   # NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED
_SWAPPED = ord(">") if np.little_endian else ord("<")


def _read(address, ctype):
    return ctype.from_address(address).value


@functools.cache
def layout_ok():
    """Whether this process's objects have the layout `kiln_call` reads."""
    samples = [np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros((4, 1), np.int64)[::2],
               np.ones(3, ">f8"), np.array(True)]
    try:
        for a in samples:
            at = id(a)
            descr = _read(at + ARRAY_DESCR, ctypes.c_void_p)
            dims = _read(at + ARRAY_DIMS, ctypes.c_void_p)
            if (_read(at + OB_TYPE, ctypes.c_void_p) != id(np.ndarray)
                    or _read(at + ARRAY_DATA, ctypes.c_void_p) != a.__array_interface__["data"][0]
                    or _read(at + ARRAY_ND, ctypes.c_int32) != a.ndim
                    or (a.ndim and list((ctypes.c_int64 * a.ndim).from_address(dims)) != list(a.shape))
                    or _read(at + ARRAY_FLAGS, ctypes.c_int32) & 0xFFFF != a.flags.num & 0xFFFF
                    or _read(descr + DESCR_TYPE_NUM, ctypes.c_int32) != a.dtype.num
                    or (_read(descr + DESCR_BYTEORDER, ctypes.c_uint8) == _SWAPPED)
                    != (not a.dtype.isnative)):
                return False
        pack, items = (samples[0], None), [samples[1]]
        return (_read(id(pack) + TUPLE_SIZE, ctypes.c_int64) == 2
                and _read(id(pack) + TUPLE_ITEMS, ctypes.c_void_p) == id(samples[0])
                and _read(_read(id(items) + LIST_ITEMS, ctypes.c_void_p), ctypes.c_void_p)
                == id(samples[1]))
    except (ValueError, OverflowError):
        return False


# ------------------------------------------------------------------------------------ IR

def _field(builder, base, offset, ty):
    pointer = builder.gep(base, [T.i64(offset)], inbounds=True, source_etype=T.I8)
    return builder.load(pointer, typ=ty)


def emit_call_entry(module, entry, in_avals, n_outputs, workspace):
    """Define `<module>.kiln_call` (see the module docstring) calling `entry`."""
    function = ir.Function(module, ir.FunctionType(T.I32, [T.PTR]), f"{module.name}.{CALL}")
    function.attributes.add("nounwind")
    pack = function.args[0]
    pack.name = "pack"
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    fail = function.append_basic_block("mismatch")
    status = ir.IRBuilder(fail).phi(T.I32, name="status")
    slots = len(in_avals) + n_outputs + 1
    pointers = builder.alloca(ir.ArrayType(T.PTR, slots), name="args")
    items = [_field(builder, pack, TUPLE_ITEMS + 8 * k, T.PTR) for k in range(4)]
    inputs, outputs, work, ndarray = items

    def check(condition, index):
        ok = function.append_basic_block(f"in{index}.ok")
        status.add_incoming(T.I32(MISMATCH - index), builder.block)
        builder.cbranch(condition, ok, fail)
        builder.position_at_end(ok)

    def store(k, array):
        slot = builder.gep(pointers, [T.i64(0), T.i64(k)], inbounds=True)
        builder.store(_field(builder, array, ARRAY_DATA, T.PTR), slot)

    count = _field(builder, inputs, TUPLE_SIZE, T.I64)
    check(builder.icmp_signed("==", count, T.i64(len(in_avals))), 0)
    for i, aval in enumerate(in_avals):
        array = _field(builder, inputs, TUPLE_ITEMS + 8 * i, T.PTR)
        check(builder.icmp_unsigned("==", _field(builder, array, OB_TYPE, T.PTR), ndarray), i)
        for condition in _array_checks(builder, array, aval):
            check(condition, i)
        store(i, array)
    listed = _field(builder, outputs, LIST_ITEMS, T.PTR)
    for j in range(n_outputs):
        store(len(in_avals) + j, _field(builder, listed, 8 * j, T.PTR))
    if workspace:
        store(slots - 1, work)
    entry.attributes.add("noinline")   # one copy of the program, whichever entry is called
    builder.ret(builder.call(entry, [builder.bitcast(pointers, T.PTR)]))
    ir.IRBuilder(fail).ret(status)
    return function


def _array_checks(builder, array, aval):
    """i1 conditions, all true for a C-contiguous aligned native-order array of `aval`. A
    generator: each condition's loads are emitted only after the previous condition held (the
    shape is read once the rank is known to match)."""
    descr = _field(builder, array, ARRAY_DESCR, T.PTR)
    yield builder.icmp_signed("==", _field(builder, array, ARRAY_ND, T.I32), T.I32(len(aval.shape)))
    masked = builder.and_(_field(builder, array, ARRAY_FLAGS, T.I32), T.I32(_ALIGNED_C_CONTIGUOUS))
    yield builder.icmp_signed("==", masked, T.I32(_ALIGNED_C_CONTIGUOUS))
    yield builder.icmp_signed("==", _field(builder, descr, DESCR_TYPE_NUM, T.I32),
                              T.I32(np.dtype(aval.dtype).num))
    yield builder.icmp_unsigned("!=", _field(builder, descr, DESCR_BYTEORDER, T.I8), T.I8(_SWAPPED))
    if aval.shape:
        dims = _field(builder, array, ARRAY_DIMS, T.PTR)
        for k, d in enumerate(aval.shape):
            yield builder.icmp_signed("==", _field(builder, dims, 8 * k, T.I64), T.i64(d))
