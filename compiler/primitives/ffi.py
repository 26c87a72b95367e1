"""`ffi_call`: a call of a handler written against XLA's FFI (kiln.ffi.ffi_call), run on the
host by xla_ffi.py; `ffi_call_effect` is the same call for `has_side_effect=True`.

  ffi_call(*operands, target_name, results=((dtype, shape), ...), attributes=(...),
           vmap_method=None, layouts=None, aliases=())
    runs the handler registered as `target_name` (xla_ffi.register_target) with the operands
    and fresh result buffers, one per `results` entry; `attributes` are the call's keyword
    arguments as xla_ffi.encode_attribute encodes them. `layouts` is None (row-major) or
    (operand orders, result orders), each None or a major-to-minor axis order per value (None:
    row-major); `aliases` are (operand, result) pairs whose result buffer starts as a copy of
    the operand, as XLA's aliased buffers do. The handler is opaque, so it is never
    evaluated while compiling (the `host` flag). It has no derivative (JAX's error names the
    target); under vmap, `vmap_method` says how, as pure_callback's does ("sequential",
    "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized"), and None
    refuses, as in JAX.

  ffi_call_effect(...)
    the same with the `effect` flag: never removed or merged, run in program order.

Every call site with the same target and attributes shares one instance of the handler (its
instantiate stage runs once, its state kept for later calls).
"""
from ..ir.abstract import ShapedArray
from .core import register, JVP, VJP, BATCH
from . import callbacks as C
from . import xla_ffi


def _eval(*operands, target_name, results, attributes=(), vmap_method=None, layouts=None,
          aliases=()):
    return tuple(ShapedArray(tuple(shape), dtype) for dtype, shape in results)


def _impl(*operands, target_name, results, attributes=(), vmap_method=None, layouts=None,
          aliases=()):
    return tuple(xla_ffi.call_target(target_name, operands, results, attributes,
                                     (target_name, attributes), layouts, aliases))


def _no_derivative(target_name):
    return ValueError(f"The FFI call to `{target_name}` cannot be differentiated. You can use "
                      f"`jax.custom_jvp` or `jax.custom_jvp` to add support.")


def _no_jvp(eqn, primals, tangents):
    raise _no_derivative(eqn.params["target_name"])


def _no_vjp(ct, primals, out, residuals, **params):
    raise _no_derivative(params["target_name"])


def _declare(name, effect):
    prim = register(name, _eval, _impl, multiple_results=True, host=True, effect=effect)
    JVP[prim] = _no_jvp
    VJP[prim] = _no_vjp
    BATCH[prim] = C.vmap_method_rule(prim)
    return prim


ffi_call = _declare("ffi_call", False)
ffi_call_effect = _declare("ffi_call_effect", True)
