"""Binding primitives: where every `kiln.lax` operation goes.

`bind(prim, *operands, **params)` looks for an operand that belongs to a compiler trace (any
object whose type defines `_kiln_trace`); if there is one, that trace handles the operation
(the specialiser emits SSA for it). Otherwise the operation runs eagerly: abstract evaluation
checks the operands (cached per primitive, operand types and params, so repeated calls skip the
Python shape rules), then the primitive's NumPy implementation runs, with NumPy's
floating-point warnings off (as XLA, 1/0 is inf without a word: compiler/primitives/quiet.py),
and its result is wrapped as an `Array` with the dtype and weak type the abstract value says. An operation with an
operand on a GPU (a device buffer), or any operation outside a specialisation while the
default device in force is a GPU (kiln.default_device), runs on the GPU instead (`on_device`:
compiler/backends/cuda/eager.py), its results staying there. A result of operands typed with
a sharding (sharding_types.py) is placed as sharding_propagation.py says.
"""
import numpy as np

from .compiler.ir.abstract import ShapedArray
from .compiler.ir.builder import STATE as _BUILDER_STATE
from .compiler.backends.cuda.device import DeviceBuffer
from . import _default_device
_DEFAULT_SET = _default_device.IN_FORCE   # [True] once a default device was ever set
from .float_checks import STATE as _FLOAT_CHECKS, check as _check_floats
from .execution_guards import STATE as _GUARDS, check_execution
from .compiler.primitives.quiet import ignore as _quiet, restore as _restore

_aval_cache = {}


Array = None  # bound by array.py at import (avoids a circular import)
TYPED = None  # array.TYPED, bound likewise: ids of arrays typed with a sharding


def is_traced(x):
    """Is `x` a value of a compiler trace (its type defines `_kiln_trace`)?"""
    return getattr(type(x), "_kiln_trace", None) is not None


def bind(prim, *args, **params):
    for a in args:
        if type(a) is not Array:
            if getattr(type(a), "_kiln_trace", None) is not None:
                return _bind_traced(prim, args, params)
            raise TypeError(f"{prim.name}: operands must be kiln arrays, got "
                            f"{type(a).__name__}")
    return apply_eager(prim, args, params)


def _bind_traced(prim, args, params):
    """Bind in the innermost active specialisation (which captures values of enclosing ones);
    other trace objects (`_kiln_trace` with a `bind` method) handle their own operations."""
    from .compiler.ir.builder import current, Builder
    b = current()
    if b is None:
        trace = next(a._kiln_trace for a in args
                     if getattr(type(a), "_kiln_trace", None) is not None)
        if isinstance(trace, Builder):
            raise RuntimeError(
                f"{prim.name} was applied to a traced value outside the function being "
                f"compiled (a traced value escaped, e.g. stored in a global or returned "
                f"through a side channel). Return values from the jitted function instead.")
        b = trace
    return b.bind(prim, args, params)


def apply_eager(prim, args, params):
    if _GUARDS.no_execution and not _BUILDER_STATE.stack:
        check_execution(f"the eager operation {prim.name}")
    vals = [a._value for a in args]
    try:
        key = (prim, tuple(params.items()), *[(v.dtype, v.shape, a.weak_type)
                                              for v, a in zip(vals, args)])
        out = _aval_cache.get(key)
    except TypeError:  # unhashable params: no caching
        key, out = None, None
    if out is None:
        avals = [ShapedArray(v.shape, v.dtype, a.weak_type) for v, a in zip(vals, args)]
        out = prim.abstract_eval(*avals, **params)
        if key is not None:
            _aval_cache[key] = out
    builders = _BUILDER_STATE.stack
    if builders and _large(out):
        return builders[-1].bind(prim, args, params)
    if any(type(v) is DeviceBuffer for v in vals) or (_DEFAULT_SET[0] and not builders and
                                                       _default_device.on_gpu()):
        return on_device(prim, vals, params, out)
    token = _quiet()
    try:
        result = prim.impl(*vals, **params)
    finally:
        _restore(token)
    if _FLOAT_CHECKS.on and not builders:   # folded in a specialisation: jit checks results
        _check_floats(result if prim.multiple_results else (result,), prim.name)
    if prim.multiple_results:
        results = tuple(_wrap_as(r, o) for r, o in zip(result, out))
        if TYPED and any(id(a) in TYPED for a in args):
            return _typed(prim, args, params, results)
        return results
    if TYPED and any(id(a) in TYPED for a in args):
        return _typed(prim, args, params, _wrap_as(result, out))
    return _wrap_as(result, out)


def _typed(prim, args, params, result):
    """`result` (a tuple for several) with the sharding its operands' types give it
    (sharding_propagation.py)."""
    from .array import _SHARDINGS
    from .sharding_propagation import propagate
    return propagate(prim, args, params, result, [_SHARDINGS.get(id(a)) for a in args])


def apply_binary(prim, a, b):
    """`apply_eager` for two Arrays, with the bookkeeping unrolled: the eager fast path of
    `jnp.add` and friends (about 1 us of Python around NumPy's own call)."""
    if _GUARDS.no_execution and not _BUILDER_STATE.stack:
        check_execution(f"the eager operation {prim.name}")
    va, vb = a._value, b._value
    key = (prim, va.dtype, va.shape, a.weak_type, vb.dtype, vb.shape, b.weak_type)
    out = _binary_cache.get(key)
    if out is None:
        out = prim.abstract_eval(ShapedArray(va.shape, va.dtype, a.weak_type),
                                 ShapedArray(vb.shape, vb.dtype, b.weak_type))
        _binary_cache[key] = out
    builders = _BUILDER_STATE.stack
    if builders and _large(out):
        return builders[-1].bind(prim, (a, b), {})
    if type(va) is DeviceBuffer or type(vb) is DeviceBuffer or (
            _DEFAULT_SET[0] and not builders and _default_device.on_gpu()):
        return on_device(prim, (va, vb), {}, out)
    token = _quiet()
    try:
        value = prim.impl(va, vb)
    finally:
        _restore(token)
    if _FLOAT_CHECKS.on and not builders:
        _check_floats((value,), prim.name)
    if TYPED and (id(a) in TYPED or id(b) in TYPED):
        return _typed(prim, (a, b), {}, _wrap_as(value, out))
    if type(value) is not np.ndarray or value.dtype != out.dtype:
        return _wrap_as(value, out)
    arr = _new(Array)
    arr._value = value
    arr.weak_type = out.weak_type
    return arr


_binary_cache = {}


def on_device(prim, values, params, out):
    """`prim` run on the device holding an operand, else on the default device in force (its
    layer's `eager`: cuda/eager.py on a GPU); its results as Arrays."""
    layer = next((v.layer for v in values if type(v) is DeviceBuffer), None) or \
        _default_device.current().layer
    results = layer.eager(prim, values, params)
    avals = out if prim.multiple_results else (out,)
    arrays = []
    for buffer, aval in zip(results, avals):
        arr = _new(Array)
        arr._value = buffer
        arr.weak_type = aval.weak_type
        arrays.append(arr)
    return tuple(arrays) if prim.multiple_results else arrays[0]

# While a function is specialised, an operation on static values runs at once unless its result
# is large: then it is staged into the function being compiled like a traced one (as JAX's jit
# stages everything). A `jnp.full((10_000_000,), c)` or an `iota` computed from static
# arguments then costs nothing to pass in and fuses with what uses it, instead of becoming a
# 40 MB constant argument; small static values (shapes, scalars, index tables) stay concrete,
# so Python control flow on them keeps working.
STAGE_ELEMENTS = 1 << 12


def _large(out):
    if type(out) is tuple:
        return any(o.size >= STAGE_ELEMENTS for o in out)
    return out.size >= STAGE_ELEMENTS


def _wrap_as(value, aval):
    if type(value) is not np.ndarray or value.dtype != aval.dtype:
        value = np.asarray(value)
        if value.dtype != aval.dtype:
            value = value.astype(aval.dtype)
    arr = _new(Array)
    arr._value = value
    arr.weak_type = aval.weak_type
    return arr


_new = object.__new__
