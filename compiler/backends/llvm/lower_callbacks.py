"""Host callbacks from native code: `debug_print` (compiler/primitives/callbacks.py).

A `debug_print` equation becomes a call through the extern global `kiln_debug_print`
(externs.py), which the loader binds to `CALLBACK` (host_callbacks.py), a ctypes function:

    void kiln_debug_print(ptr site, ptr operands)

`site` is a NUL-terminated JSON constant of the module describing the print (its fmt,
template, sep and end params and each operand's dtype and shape), so the object code carries
everything the callback needs (it can be cached on disk, and the callback keeps no table of
call sites); `operands` is an array of pointers to the operands' data (a literal is stored in a
stack slot first). The callback (host_callbacks.py, which needs no llvmlite) prints them with the
reference backend's implementation.
"""
import json

import llvmlite.ir as ir

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM
from . import ltypes as T
from . import externs
from .lower_control import _pointer

_FUNCTION_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.PTR])


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


LLVM[PRIMITIVES["debug_print"]] = _debug_print
