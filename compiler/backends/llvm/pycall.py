"""The dispatch fast path: one native function that reads the NumPy arrays of a call itself.

Calling `kiln_main(ptr args)` from Python needs the address of every buffer, and asking NumPy
for one (`a.ctypes.data`, `a.__array_interface__`) costs about a microsecond per array, more
than the rest of a small call. So the process-wide runtime library (rtlib.py) holds

    i32 @kiln_dispatch(ptr pack)   ; pack: (inputs, outputs, workspace, ndarray, descriptor)

emitted by `emit_dispatch`: `inputs` is the tuple of arguments an executable was called with,
`outputs` the list of its freshly allocated result arrays, `workspace` an array or None,
`ndarray` the type `numpy.ndarray` and `descriptor` the executable's int64 array (`descriptor`
below): the address of its `kiln_main`, its counts, and each input's expected type number,
rank and shape. kiln_dispatch checks, in native code, that each input is exactly an ndarray
(no subclass) of the expected dtype (type number, native byte order), rank and shape, aligned
and C-contiguous; then it reads the data pointers of all arrays into a pointer array and
calls `kiln_main`, returning its status. An input in any other form returns `MISMATCH - i`
(i: the first such input) without running anything: the caller then converts the arguments
in Python and calls `kiln_main` itself (executable.py). Being one function for all
executables, it costs the compilation of each module nothing.

The offsets read are those of CPython's tuple and list objects and of NumPy's public
`PyArrayObject_fields`/`PyArray_Descr` structures (stable parts of their C ABIs). `layout_ok()`
checks them in the running process against what NumPy reports (data pointer, rank, shape,
flags, type number, byte order of sample arrays, items of a tuple and a list); where anything
differs (another Python implementation, a debug build) the fast path is never used. The
function holds no GIL and touches no reference counts: the caller keeps every object alive
for the duration of the call.
"""
import ctypes
import functools

import numpy as np
import llvmlite.ir as ir

from . import ltypes as T
from .loops import counted_loop

DISPATCH = "kiln_dispatch"
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
    """Whether this process's objects have the layout `kiln_dispatch` reads."""
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


def descriptor(entry, in_avals, n_outputs, workspace):
    """The int64 array describing an executable to kiln_dispatch: [entry address, inputs,
    outputs, has workspace, start of each input's entries in the table..., the table: for each
    input its type number, rank and shape]."""
    table, starts = [], []
    for aval in in_avals:
        starts.append(len(table))
        table += [np.dtype(aval.dtype).num, len(aval.shape), *aval.shape]
    head = [entry, len(in_avals), n_outputs, int(bool(workspace))]
    return np.array(head + starts + table, dtype=np.int64)


def emit_dispatch(module):
    """Define `kiln_dispatch` (see the module docstring) in `module`."""
    function = ir.Function(module, ir.FunctionType(T.I32, [T.PTR]), DISPATCH)
    function.attributes.add("nounwind")
    pack = function.args[0]
    pack.name = "pack"
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    fail = function.append_basic_block("mismatch")
    status = ir.IRBuilder(fail).phi(T.I32, name="status")
    inputs, outputs, work, ndarray, described = (_field(builder, pack, TUPLE_ITEMS + 8 * k, T.PTR)
                                                 for k in range(5))
    header = _field(builder, described, ARRAY_DATA, T.PTR)
    entry_type = ir.FunctionType(T.I32, [T.PTR]).as_pointer()   # typed, for llvmlite's call
    entry, n, m, has_workspace = (_item(builder, header, 0, T.i64(k), ty)
                                  for k, ty in enumerate((entry_type, T.I64, T.I64, T.I64)))
    table = builder.gep(header, [builder.add(n, T.i64(4))], inbounds=True, source_etype=T.I64)
    slots = builder.add(builder.add(n, m), T.i64(1))
    pointers = builder.alloca(T.PTR, slots, name="args")

    def check(condition, index):
        ok = function.append_basic_block("ok")
        status.add_incoming(builder.sub(T.I32(MISMATCH), builder.trunc(index, T.I32)),
                            builder.block)
        builder.cbranch(condition, ok, fail)
        builder.position_at_end(ok)

    def store(k, array):
        slot = builder.gep(pointers, [k], inbounds=True, source_etype=T.PTR)
        builder.store(_field(builder, array, ARRAY_DATA, T.PTR), slot)

    def each_input(b, i, carried):
        array = _item(b, inputs, TUPLE_ITEMS, i)
        check(b.icmp_unsigned("==", _field(b, array, OB_TYPE, T.PTR), ndarray), i)
        start = _item(b, header, 32, i, T.I64)
        expected = _Expected(b, table, start)
        for condition in _array_checks(b, array, expected):
            check(condition, i)
        dims = _field(b, array, ARRAY_DIMS, T.PTR)
        counted_loop(b, expected.value(1), lambda b2, k, acc: check(b2.icmp_signed(
            "==", _item(b2, dims, 0, k, T.I64), expected.value(b2.add(k, T.i64(2)))), i)
            or acc, (), "dim")
        store(i, array)
        return carried

    def each_output(b, j, carried):
        store(b.add(n, j), _item(b, _field(b, outputs, LIST_ITEMS, T.PTR), 0, j))
        return carried

    check(builder.icmp_signed("==", _field(builder, inputs, TUPLE_SIZE, T.I64), n), T.i64(0))
    counted_loop(builder, n, each_input, (), "input")
    counted_loop(builder, m, each_output, (), "output")
    with builder.if_then(builder.icmp_signed("!=", has_workspace, T.i64(0))):
        store(builder.add(n, m), work)
    builder.ret(builder.call(entry, [pointers]))
    ir.IRBuilder(fail).ret(status)
    return function


def _item(builder, base, offset, index, ty=T.PTR):
    """base[offset bytes + 8 * index] (an 8-byte item of a dynamic index)."""
    pointer = builder.gep(base, [T.i64(offset // 8)], inbounds=True, source_etype=T.I64) \
        if offset else base
    return builder.load(builder.gep(pointer, [index], inbounds=True, source_etype=ty), typ=ty)


class _Expected:
    """An input's entries of the table, from its start."""

    def __init__(self, builder, table, start):
        self.builder, self.table, self.start = builder, table, start

    def value(self, k):
        b = self.builder
        k = T.i64(k) if isinstance(k, int) else k
        pointer = b.gep(self.table, [b.add(self.start, k)], inbounds=True, source_etype=T.I64)
        return b.load(pointer, typ=T.I64)


def _array_checks(builder, array, expected):
    """i1 conditions, all true for an aligned, C-contiguous, native-order array of the expected
    type number and rank (a generator: each condition's loads come after the previous held)."""
    rank = builder.sext(_field(builder, array, ARRAY_ND, T.I32), T.I64)
    yield builder.icmp_signed("==", rank, expected.value(1))
    masked = builder.and_(_field(builder, array, ARRAY_FLAGS, T.I32), T.I32(_ALIGNED_C_CONTIGUOUS))
    yield builder.icmp_signed("==", masked, T.I32(_ALIGNED_C_CONTIGUOUS))
    descr = _field(builder, array, ARRAY_DESCR, T.PTR)
    type_num = builder.sext(_field(builder, descr, DESCR_TYPE_NUM, T.I32), T.I64)
    yield builder.icmp_signed("==", type_num, expected.value(0))
    yield builder.icmp_unsigned("!=", _field(builder, descr, DESCR_BYTEORDER, T.I8), T.I8(_SWAPPED))
