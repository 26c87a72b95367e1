"""Host callbacks from native code: `debug_print` and `pure_callback`
(compiler/primitives/callbacks.py).

A `debug_print` equation becomes a call through the extern global `kiln_debug_print`
(externs.py), which the loader binds to `CALLBACK` (host_callbacks.py), a ctypes function:

    void kiln_debug_print(ptr site, ptr operands)

`site` is a NUL-terminated JSON constant of the module describing the print (its fmt,
template, sep and end params and each operand's dtype and shape), so the object code carries
everything the callback needs (it can be cached on disk, and the callback keeps no table of
call sites); `operands` is an array of pointers to the operands' data (a literal is stored in a
stack slot first). The callback (host_callbacks.py, which needs no llvmlite) prints them with the
reference backend's implementation.

A `pure_callback` equation is a call through `kiln_pure_callback`:

    void kiln_pure_callback(ptr site, ptr operands, ptr results)

with a site of the host function's token and the operands' and results' dtypes and shapes,
and `results` an array of pointers to the result buffers, which the callback fills.
`debug_callback` is the same call with no results, and `ffi_call` the same call with a
site naming the FFI target and its attributes instead of a token.
"""
import json

import llvmlite.ir as ir

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM
from . import ltypes as T
from . import externs
from .lower_control import _pointer

_FUNCTION_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.PTR])
_PURE_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.PTR, T.PTR])


def _site_constant(module, eqn, params):
    return _json_constant(module, {
        "operands": [[x.aval.dtype.str, list(x.aval.shape)] for x in eqn.invars],
        "fmt": params.get("fmt"), "template": params.get("template", ()),
        "sep": params.get("sep", " "), "end": params.get("end", "\n")})


def _json_constant(module, site):
    text = json.dumps(site, sort_keys=True).encode() + b"\0"
    ty = ir.ArrayType(T.I8, len(text))
    g = ir.GlobalVariable(module, ty, module.get_unique_name("kiln.print.site"))
    g.initializer = ir.Constant(ty, bytearray(text))
    g.global_constant = True
    g.linkage = "internal"
    return g


def _pointer_array(b, buffers, name):
    array = externs.opaque(b.alloca(ir.ArrayType(T.PTR, max(len(buffers), 1)), name=name))
    for k, x in enumerate(buffers):
        slot = b.gep(array, [T.i64(k)], inbounds=True, source_etype=T.PTR)
        b.store(_pointer(b, x), slot)
    return array


def _debug_print(ctx, outs, ins, **params):
    b = ctx.builder
    site = _site_constant(ctx.module, ctx.eqn, params)
    externs.call(b, "kiln_debug_print", _FUNCTION_TYPE, [site, _pointer_array(b, ins, "operands")])


def _pure_callback(ctx, outs, ins, *, callback, results, vmap_method=None, ordered=False):
    b = ctx.builder
    site = _json_constant(ctx.module, {
        "callback": callback, "results": [[dtype, list(shape)] for dtype, shape in results],
        "operands": [[x.aval.dtype.str, list(x.aval.shape)] for x in ctx.eqn.invars]})
    externs.call(b, "kiln_pure_callback", _PURE_TYPE,
                 [site, _pointer_array(b, ins, "operands"), _pointer_array(b, outs, "results")])


LLVM[PRIMITIVES["debug_print"]] = _debug_print
def _debug_callback(ctx, outs, ins, *, callback):
    """debug_callback: pure_callback's call with no results."""
    _pure_callback(ctx, outs, ins, callback=callback, results=())


def _ffi_call(ctx, outs, ins, *, results, vmap_method=None, **params):
    """ffi_call: pure_callback's call, its site naming the target, its attributes, layouts
    and aliases."""
    b = ctx.builder
    site = _json_constant(ctx.module, {
        "ffi": params,
        "results": [[dtype, list(shape)] for dtype, shape in results],
        "operands": [[x.aval.dtype.str, list(x.aval.shape)] for x in ctx.eqn.invars]})
    externs.call(b, "kiln_pure_callback", _PURE_TYPE,
                 [site, _pointer_array(b, ins, "operands"), _pointer_array(b, outs, "results")])


LLVM[PRIMITIVES["pure_callback"]] = _pure_callback
LLVM[PRIMITIVES["ffi_call"]] = LLVM[PRIMITIVES["ffi_call_effect"]] = _ffi_call
LLVM[PRIMITIVES["io_callback"]] = _pure_callback   # the same call; the effect flag keeps it
LLVM[PRIMITIVES["debug_callback"]] = _debug_callback
