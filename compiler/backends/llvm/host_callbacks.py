"""The host side of `debug_print` in native code: the Python function compiled code calls.

Generated code calls `void kiln_debug_print(ptr site, ptr operands)` through an extern global
(lower_callbacks.py emits the call; the JIT's loader and kiln.aot's bind the global to
`callback_address()`). `site` is a NUL-terminated JSON constant describing the print (its fmt,
template, sep and end params and each operand's dtype and shape); `operands` is an array of
pointers to the operands' data. The callback rebuilds the operands as NumPy arrays and prints
them with the reference backend's implementation, so the text is the same, written to Python's
`sys.stdout` in program order. ctypes callbacks take the GIL themselves; compiled code runs
without it. Nothing here needs llvmlite, so ahead-of-time libraries bind it without the compiler.
"""
import ctypes
import functools
import json

import numpy as np

from ...primitives import callbacks

_PROTOTYPE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)


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
