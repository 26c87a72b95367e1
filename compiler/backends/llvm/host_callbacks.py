"""The host side of `debug_print` and `pure_callback` in native code: the Python functions
compiled code calls.

Generated code calls `void kiln_debug_print(ptr site, ptr operands)` through an extern global
(lower_callbacks.py emits the call; the JIT's loader and kiln.aot's bind the global to
`callback_address()`). `site` is a NUL-terminated JSON constant describing the print (its fmt,
template, sep and end params and each operand's dtype and shape); `operands` is an array of
pointers to the operands' data. The callback rebuilds the operands as NumPy arrays and prints
them with the reference backend's implementation, so the text is the same, written to Python's
`sys.stdout` in program order. ctypes callbacks take the GIL themselves; compiled code runs
without it. Nothing here needs llvmlite, so ahead-of-time libraries bind it without the compiler.

`void kiln_pure_callback(ptr site, ptr operands, ptr results)` does the same for
`pure_callback` (site: the host function's token, the operands' and the results' dtypes and
shapes) and copies the function's results into the result buffers; an `ffi_call` site names
the FFI target and its attributes instead of a token. An exception cannot cross
the native frames: the callback keeps it in `PENDING` (and leaves the results zero), and the
executable raises it when the native call returns (`raise_pending`). Once a host function has
raised, the rest of that native call calls no host function and prints nothing (their results
stay zero), as XLA stops the computation at a failing callback: equinox's `error_if` follows
its raising callback with one that waits for input, which only a TPU should reach.
"""
import ctypes
import functools
import json

import numpy as np

from ...primitives import callbacks, ffi

_PROTOTYPE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)
_PURE_PROTOTYPE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p)
PENDING = []   # exceptions raised by pure_callback's host functions, not yet re-raised


@functools.lru_cache(maxsize=256)
def _site(text):
    site = json.loads(text)
    operands = [(np.dtype(dtype), tuple(shape)) for dtype, shape in site["operands"]]
    template = tuple(tuple(piece) for piece in site["template"])
    return operands, dict(fmt=site["fmt"], template=template, sep=site["sep"], end=site["end"])


def _view(address, dtype, shape):
    """The buffer at `address` as a NumPy array (None when it is empty)."""
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size == 0:
        return None
    data = (ctypes.c_char * size).from_address(address)
    return np.frombuffer(data, dtype).reshape(shape)


def _operand(address, dtype, shape):
    view = _view(address, dtype, shape)
    return np.zeros(shape, dtype) if view is None else view.copy()


def _pointers(address, count):
    return (ctypes.c_void_p * max(count, 1)).from_address(address)


@_PROTOTYPE
def _print(site, operands):
    if PENDING:   # a host function of this call raised: the computation has stopped
        return
    avals, params = _site(site)
    pointers = _pointers(operands, len(avals))
    values = [_operand(pointers[k], dtype, shape) for k, (dtype, shape) in enumerate(avals)]
    callbacks.debug_print.impl(*values, **params)


CALLBACK = _print


def callback_address():
    """The native address of the print callback (the value of `kiln_debug_print`)."""
    return ctypes.cast(CALLBACK, ctypes.c_void_p).value


def _thaw(x):
    """JSON's lists back as the tuples an ffi_call's attributes are."""
    return tuple(_thaw(v) for v in x) if isinstance(x, list) else x


@functools.lru_cache(maxsize=256)
def _pure_site(text):
    """(the host call: operand values -> results, operand avals, declared results)."""
    site = json.loads(text)
    operands = [(np.dtype(dtype), tuple(shape)) for dtype, shape in site["operands"]]
    results = tuple((dtype, tuple(shape)) for dtype, shape in site["results"])
    if "ffi" in site:
        params = {k: _thaw(v) for k, v in site["ffi"].items()}
        params["results"] = results
        return (lambda values: ffi.ffi_call.impl(*values, **params)), operands, results
    token = site["callback"]
    return (lambda values: callbacks.pure_callback.impl(*values, callback=token,
                                                       results=results)), operands, results


@_PURE_PROTOTYPE
def _pure(site, operands, results):
    if PENDING:
        return
    call, avals, declared = _pure_site(site)
    pointers = _pointers(operands, len(avals))
    values = [_operand(pointers[k], dtype, shape) for k, (dtype, shape) in enumerate(avals)]
    try:
        outs = call(values)
    except BaseException as e:   # noqa: B036 -- re-raised by the executable after the call
        PENDING.append(e)
        return
    targets = _pointers(results, len(declared))
    for k, out in enumerate(outs):
        view = _view(targets[k], out.dtype, out.shape)
        if view is not None:
            view[...] = out


PURE_CALLBACK = _pure


def pure_callback_address():
    """The native address of pure_callback's host side (the value of `kiln_pure_callback`)."""
    return ctypes.cast(PURE_CALLBACK, ctypes.c_void_p).value


def raise_pending():
    """Raise the first exception a host function raised during the last native call."""
    if PENDING:
        error = PENDING[0]
        PENDING.clear()
        raise error
