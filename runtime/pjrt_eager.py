"""Eager operations on Arrays on PJRT devices: each runs as a kiln.jit of the one operation.

As JAX runs an eager operation on a device array as a jit of it, `run(prim, values, params)`
calls a jit (backend "pjrt") that binds `prim` with `params`: on one PJRT device it runs on
that device; with an operand spread over several (pjrt_spread.py) it runs partitioned over
them (pjrt_partitioned.py: the other operands replicated there, the results spread as XLA's
partitioner leaves them). One jit is kept per primitive and params, and its own cache keeps
one executable per shapes, dtypes and shardings, so a repeated operation does not compile
again; params that cannot be a key (unhashable) get a fresh jit each time. Under
kiln.disable_jit the operations of a function run this way one by one.
"""
import atexit

from .array import _wrap

_JITS = {}   # (primitive, params) -> the jit running it
# emptied before the interpreter tears modules down, while the plug-in's client still works
atexit.register(_JITS.clear)


def run(prim, values, params):
    """`prim` applied to `values` (the operands' values, DeviceBuffers on PJRT devices or host
    values): its results' DeviceBuffers, a list."""
    from .jit import _DISABLED, disable_jit
    fn, args = _jit(prim, params), [_wrap(v) for v in values]
    if _DISABLED.on:   # kiln.disable_jit: the operation still runs compiled, on the device
        with disable_jit(False):
            results = fn(*args)
    else:
        results = fn(*args)
    return [r._value for r in results] if prim.multiple_results else [results._value]


def _jit(prim, params):
    try:
        key = (prim, tuple(sorted(params.items())))
        hash(key)
    except TypeError:
        key = None
    fn = _JITS.get(key) if key is not None else None
    if fn is None:
        from .jit import jit
        from .dispatch import bind
        fn = jit(lambda *args: bind(prim, *args, **params), backend="pjrt")
        fn._one_operation = prim.name
        if key is not None:
            _JITS[key] = fn
    return fn
