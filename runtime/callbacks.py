"""`kiln.pure_callback` and `kiln.debug.callback`: call a Python function on the host from
compiled code.

`pure_callback(callback, result_shape_dtypes, *args, vmap_method=None, **kwargs)` has JAX's
signature. Eagerly it calls `callback` at once. Inside `jit`, `vmap` or another transform it
binds the `pure_callback` primitive (compiler/primitives/callbacks.py), which calls the
function at run time with the operands as kiln arrays; the LLVM backend calls back into
Python through a ctypes function (compiler/backends/llvm/host_callbacks.py). The callback's
results must match `result_shape_dtypes` (a pytree of objects with `shape` and `dtype`), whose
dtypes are canonicalised as JAX's are (float64 is float32 while x64 is off).

`debug_callback(callback, *args, ordered=False, partitioned=False, **kwargs)` (kiln.debug's
`callback`) calls `callback` for its effect and returns None: the `debug_callback` primitive,
which is never removed, runs once per example under vmap, and with the primal values under
grad. kiln runs effects in program order, so `ordered` changes nothing.
"""
import numpy as np

from .array import Array, to_array
from .compiler.ir import dtypes as _d
from .compiler.ir.builder import current
from .compiler.primitives import PRIMITIVES
from .compiler.primitives.callbacks import register_host_function, call_host, VMAP_METHODS
from .dispatch import bind, is_traced
from .tree_util import tree_flatten, tree_unflatten

__all__ = ["pure_callback", "io_callback", "debug_callback"]


def _on_host(callback):
    """`callback`, or a host function made of it when it is a `def` or `lambda` written
    inside the function kiln specialises (compiler/frontend/host_functions.py)."""
    from .compiler.frontend.specialise import LocalFunction   # (gast: loaded on first use)
    if isinstance(callback, LocalFunction):
        from .compiler.frontend.host_functions import host_function
        return host_function(callback)
    return callback


class _HostFunction:
    """`callback` on flat NumPy operands, returning flat results (the primitive's form)."""

    def __init__(self, callback, in_tree, out_tree):
        self.callback, self.in_tree, self.out_tree = callback, in_tree, out_tree

    def __call__(self, *flat):
        args, kwargs = tree_unflatten(self.in_tree, [Array(np.asarray(x)) for x in flat])
        result = self.callback(*args, **kwargs)
        if self.out_tree is None:   # debug_callback: the result is ignored
            return []
        leaves, tree = tree_flatten(result)
        if tree != self.out_tree:
            raise TypeError(f"pure_callback: the callback returned a value of structure {tree}, "
                            f"result_shape_dtypes has structure {self.out_tree}")
        return [np.asarray(leaf) for leaf in leaves]


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """Call `callback(*args, **kwargs)` on the host, with results shaped as
    `result_shape_dtypes`; see the module docstring and docs/differences.md."""
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ValueError(f"vmap_method must be one of {', '.join(map(repr, VMAP_METHODS))} "
                         f"or None, got {vmap_method!r}")
    return _call_on_host("pure_callback", callback, result_shape_dtypes, args, kwargs,
                         vmap_method=vmap_method)


def io_callback(callback, result_shape_dtypes, *args, sharding=None, ordered=False, **kwargs):
    """`kiln.experimental.io_callback` (JAX's): `pure_callback` for a function with effects,
    which compiled code always calls, in program order; see docs/differences.md."""
    return _call_on_host("io_callback", callback, result_shape_dtypes, args, kwargs,
                         ordered=bool(ordered))


def _call_on_host(primitive, callback, result_shape_dtypes, args, kwargs, **params):
    callback = _on_host(callback)
    leaves, in_tree = tree_flatten((args, kwargs))
    specs, out_tree = tree_flatten(result_shape_dtypes)
    results = tuple((_d.canonicalize(np.dtype(s.dtype)).name, tuple(int(n) for n in s.shape))
                    for s in specs)
    operands = [x if is_traced(x) else to_array(x) for x in leaves]
    host = _HostFunction(callback, in_tree, out_tree)
    if stages_host_call(operands):
        token = register_host_function((callback, in_tree, out_tree), host)
        outs = bind_host_call(PRIMITIVES[primitive], operands, dict(callback=token, results=results,
                                                           **params))
    else:
        outs = [Array(o) for o in call_host(host, operands, results)]
    return tree_unflatten(out_tree, list(outs))


def stages_host_call(operands):
    """Whether a callback becomes a primitive of compiled code: inside a function being
    specialised it does even when its operands are static (JAX calls it when the compiled
    code runs, never while tracing, and drops an unused pure one); outside, it runs now."""
    return current() is not None or any(is_traced(x) for x in operands)


def bind_host_call(prim, operands, params):
    if any(is_traced(x) for x in operands):
        return bind(prim, *operands, **params)
    return current().bind(prim, operands, params)


def debug_callback(callback, *args, ordered=False, partitioned=False, **kwargs):
    """Call `callback(*args, **kwargs)` for its effect, at run time in compiled code."""
    callback = _on_host(callback)
    leaves, in_tree = tree_flatten((args, kwargs))
    operands = [x if is_traced(x) else to_array(x) for x in leaves]
    host = _HostFunction(callback, in_tree, None)
    if stages_host_call(operands):
        token = register_host_function(("debug", callback, in_tree), host)
        bind_host_call(PRIMITIVES["debug_callback"], operands, dict(callback=token))
    else:
        host(*[np.asarray(x) for x in operands])
    return None


def __dir__():
    return sorted(__all__)
