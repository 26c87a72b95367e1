"""Host callbacks from native code: `debug_print` (compiler/primitives/callbacks.py).

A `debug_print` equation becomes a call through the extern global `kiln_debug_print`
(externs.py), which the loader binds to `CALLBACK`, a ctypes function:

    void kiln_debug_print(ptr site, ptr operands)

`site` is a NUL-terminated JSON constant of the module describing the print (its fmt,
template, sep and end params and each operand's dtype and shape), so the object code carries
everything the callback needs (it can be cached on disk, and the callback keeps no table of
call sites); `operands` is an array of pointers to the operands' data (a literal is stored in a
stack slot first). The callback rebuilds the operands as NumPy arrays and prints them with the
reference backend's implementation, so the text is the same, written to Python's `sys.stdout`
in program order. ctypes callbacks take the GIL themselves; compiled code runs without it.
"""
import ctypes
import functools
import json

import numpy as np
import llvmlite.ir as ir

from ...primitives import PRIMITIVES
from ...primitives import callbacks
from . import ltypes as T
from . import externs
from .lower_control import _pointer

_PROTOTYPE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)
_FUNCTION_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.PTR])


@functools.lru_cache(maxsize=256)
def _site(text):
    site = json.loads(text)
    operands = [(np.dtype(dtype), tuple(shape)) for dtype, shape in site["operands"]]
    template = tuple(tuple(piece) for piece in site["template"])
    return operands, dict(fmt=site["fmt"], template=template, sep=site["sep"], end=site["end"])


def _operand(address, dtype, shape):
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size == 0:
        return np.zeros(shape, dtype)
    data = (ctypes.c_char * size).from_address(address)
    return np.frombuffer(data, dtype).reshape(shape).copy()


@_PROTOTYPE
def _print(site, operands):
    avals, params = _site(site)
    pointers = (ctypes.c_void_p * max(len(avals), 1)).from_address(operands)
    values = [_operand(pointers[k], dtype, shape) for k, (dtype, shape) in enumerate(avals)]
    callbacks.debug_print.impl(*values, **params)


CALLBACK = _print


def callback_address():
    """The native address of the print callback (the value of `kiln_debug_print`)."""
    return ctypes.cast(CALLBACK, ctypes.c_void_p).value


def _site_constant(module, eqn, params):
    text = json.dumps({"operands": [[x.aval.dtype.str, list(x.aval.shape)] for x in eqn.invars],
                       "fmt": params.get("fmt"), "template": params.get("template", ()),
                       "sep": params.get("sep", " "), "end": params.get("end", "\n")},
                      sort_keys=True).encode() + b"\0"
    ty = ir.ArrayType(T.I8, len(text))
    g = ir.GlobalVariable(module, ty, module.get_unique_name("kiln.print.site"))
    g.initializer = ir.Constant(ty, bytearray(text))
    g.global_constant = True
    g.linkage = "internal"
    return g


def _debug_print(ctx, outs, ins, **params):
    b = ctx.builder
    site = _site_constant(ctx.module, ctx.eqn, params)
    array = externs.opaque(b.alloca(ir.ArrayType(T.PTR, max(len(ins), 1)), name="operands"))
    for k, x in enumerate(ins):
        slot = b.gep(array, [T.i64(k)], inbounds=True, source_etype=T.PTR)
        b.store(_pointer(b, x), slot)
    externs.call(b, "kiln_debug_print", _FUNCTION_TYPE, [site, array])


PRIMITIVES["debug_print"].rules["llvm"] = _debug_print
