"""The runtime library: native helpers shared by every compiled function of the process.

Functions that would otherwise be emitted into, and optimised with, every module:
- the thread pool (pool.py): `kiln_run_tasks(task, env, n, concurrent)`,
  `kiln_barrier_wait(barrier, parties)` and `kiln_parallel_for(body, env, n, grain)` (run
  `body(env, lo, hi)` over [0, n) on up to `kiln_num_threads` threads, as pool tasks), with
  the pool's workers and counters, and `kiln_run_replicas` (replica_runner.py: pmap's
  replicas on the pool's concurrent mode, and `kiln_run_in_turn`, the same replicas one after
  the other on the calling thread). Generated code calls them through extern globals
  of those names (externs.py), bound at load time like BLAS routines;
- the packed matrix-product kernels (gemm_packed.py): `kiln_gemm_float32` and
  `kiln_gemm_float64`, called through extern globals of those names;
- the FFT kernels (fft_kernel.py): `kiln_fft_complex64` and `kiln_fft_complex128`, called the
  same way;
- `kiln_dispatch(pack)` (pycall.py): the fast entry of every executable.
`address(name)` gives their addresses.

The compiler-rt builtins LLVM emits calls to (builtins.py: float16 conversions, ...) are a
second object, `kiln.builtins`, defining them under their own names: `provide(objects)` loads
it before the code of a function whose objects call one of them (executable.py calls it before
loading any function), so MCJIT resolves those calls; a process whose code calls none never
compiles it (about 50 ms without the disk cache).

Each object is built on first use: loaded from the disk cache (disk_cache.py; the key covers
the target, the JIT's CPU (`KILN_CPU`), kiln's fingerprint and the Python/NumPy object layouts
kiln_dispatch reads), or compiled and stored there, then loaded into the JIT with its own
externs (pthreads, libc's `syscall`, the thread count) bound. Each is loaded once per process, for the CPU
`KILN_CPU` names then. A stored object that is not a well-formed object file (object_symbols.py) is
discarded and built again.
"""
import sys

import numpy as np

from . import (builtins, disk_cache, externs, fft_kernel, gemm_packed, object_symbols, pool,
               replica_runner, target)

NAME = "kiln.rtlib"
FUNCTIONS = {"parallel_for": "kiln_parallel_for", "run_tasks": "kiln_run_tasks",
             "barrier_wait": "kiln_barrier_wait", "run_replicas": "kiln_run_replicas",
             "run_in_turn": "kiln_run_in_turn",
             "dispatch": "kiln_dispatch", "gemm_float32": "kiln_gemm_float32",
             "gemm_float64": "kiln_gemm_float64", "fft_complex64": "kiln_fft_complex64",
             "fft_complex128": "kiln_fft_complex128"}


_ADDRESSES = {}
_LOADED = []
BUILTINS = "kiln.builtins"
_BUILTIN_NAMES = frozenset(builtins.NAMES)
_LOADED_BUILTINS = []


def address(name):
    """The address of the runtime function `name` ("parallel_for" or "dispatch")."""
    if not _ADDRESSES:
        with target.LOCK:   # once per process, even when several threads compile at once
            if not _ADDRESSES:
                loaded = _load(NAME, _compile)
                externs.bind_externs(loaded.global_address, NAME)
                _LOADED.append(loaded)
                _ADDRESSES.update({key: loaded.function_address(symbol)
                                   for key, symbol in FUNCTIONS.items()})
    return _ADDRESSES[name]


def extern_address(name):
    """The address of the runtime library's extern global `name` (externs.EXTERNS), e.g. its
    `kiln_num_threads`, which tests change to run the pool with other thread counts."""
    address("dispatch")
    return _LOADED[0].global_address(externs.symbol(NAME, name))


def provide(objects):
    """Load the builtins into the JIT if one of `objects` (object code about to be loaded)
    calls one of them and they are not loaded yet."""
    if _LOADED_BUILTINS:
        return
    if any(object_symbols.symbols(data)[1] & _BUILTIN_NAMES for data in objects):
        with target.LOCK:
            if not _LOADED_BUILTINS:
                _LOADED_BUILTINS.append(_load(BUILTINS, _compile_builtins))


def load_library(name, compile_, source):
    """Another process-wide object (e.g. kiln.mpi, mpi_engine.py): `name` compiled by
    `compile_()` or read from the disk cache, loaded into the JIT after the builtins it calls;
    its `target.Loaded` handle. `source`, the path of the module that emits it, is part of the
    cache key (its size and time, as the modules here are in `disk_cache.fingerprint`). It must
    not use extern globals (none are bound)."""
    import os
    status = os.stat(source)
    with target.LOCK:
        return _load(name, compile_, builtins_first=True,
                     version=f"{os.path.basename(source)} {status.st_size} {status.st_mtime_ns}")


def cached_object(key, compile_, object_of=bytes):
    """The disk cache's entry `key` (disk_cache.py), else `compile_()`'s payload, stored
    there. `object_of(payload)` is the object code in a payload (the whole of it by default);
    an entry whose object code is not a well-formed object file is dropped and rebuilt."""
    data = disk_cache.load(key)
    if data is not None:
        try:
            object_symbols.check_object(object_of(data))
            return data
        except object_symbols.BadObject as error:
            disk_cache.discard(key, f"unusable payload: {error}")
    data = compile_()
    disk_cache.store(key, data)
    return data


def _load(name, compile_, builtins_first=False, version=""):
    """The library object `name` (compiled by `compile_()`), loaded into the JIT."""
    cpu, features = target.jit_cpu()
    key = disk_cache.key(name, target.triple(), cpu, features, sys.implementation.cache_tag,
                         np.__version__, version)
    data = cached_object(key, compile_)
    if builtins_first:
        provide([data])
    return target.load_object(name, data, entry=False)


def _compile():
    import llvmlite.ir as ir
    from . import pycall
    module = ir.Module(name=NAME)
    module.triple = target.triple()
    pool.emit(module, module.triple)
    replica_runner.emit(module)
    replica_runner.emit_in_turn(module)
    gemm_packed.emit(module)
    fft_kernel.emit(module)
    pycall.emit_dispatch(module)
    return target.object_code(target.optimize(str(module), NAME))


def _compile_builtins():
    import llvmlite.ir as ir
    module = ir.Module(name=BUILTINS)
    module.triple = target.triple()
    builtins.emit(module)
    return target.object_code(target.optimize(str(module), BUILTINS))
