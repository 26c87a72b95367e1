"""The runtime library: native helpers shared by every compiled function of the process.

Two functions would otherwise be emitted into, and optimised with, every module (about 25 ms of
compile time per module for the pair):
- `kiln_parallel_for(body, env, n, grain)` (parallel.py's definition): split [0, n) over
  threads. Generated code calls it through the `kiln_parallel_for` extern global (externs.py),
  bound at load time like BLAS routines;
- `kiln_dispatch(pack)` (pycall.py): the fast entry of every executable.
`address(name)` gives their addresses. The library is built on first use: loaded from the disk
cache (disk_cache.py; the key covers the target, the host CPU, kiln's fingerprint and the
Python/NumPy object layouts kiln_dispatch reads), or compiled and stored there, then loaded
into the JIT with its own externs (pthreads, the thread count) bound.
"""
import functools
import sys

import numpy as np

from . import disk_cache, externs, target

NAME = "kiln.rtlib"
FUNCTIONS = {"parallel_for": "kiln_parallel_for", "dispatch": "kiln_dispatch"}


def address(name):
    """The address of the runtime function `name` ("parallel_for" or "dispatch")."""
    return _loaded()[name]


@functools.cache
def _loaded():
    cpu, features = target.host_cpu()
    key = disk_cache.key(NAME, target.triple(), cpu, features, sys.implementation.cache_tag,
                         np.__version__)
    with target.LOCK:
        data = disk_cache.load(key)
        if data is None:
            data = _compile()
            disk_cache.store(key, data)
        loaded = target.load_object(NAME, data, entry=False)
    externs.bind_externs(loaded.global_address, NAME)
    return {name: loaded.function_address(symbol) for name, symbol in FUNCTIONS.items()}


def _compile():
    import llvmlite.ir as ir
    from . import parallel, pycall
    module = ir.Module(name=NAME)
    module.triple = target.triple()
    parallel.parallel_for(module).linkage = "external"
    pycall.emit_dispatch(module)
    return target.object_code(target.optimize(str(module), NAME))
