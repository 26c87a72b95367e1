"""The runtime library: native helpers shared by every compiled function of the process.

Two functions would otherwise be emitted into, and optimised with, every module (about 25 ms of
compile time per module for the pair):
- `kiln_parallel_for(body, env, n, grain)`: run `body(env, lo, hi)` over [0, n) on up to
  `kiln_num_threads` threads (parallel.py's pthread externs). The range is cut into blocks of
  `grain` iterations that the threads claim one at a time from a shared atomic counter, the
  calling thread included, so a thread that the OS does not schedule at once (a busy machine)
  holds up at most one block instead of a fixed share of the loop. Generated code calls it
  through the `kiln_parallel_for` extern global (externs.py), bound at load time like BLAS
  routines;
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
externs (pthreads, the thread count) bound. Each is loaded once per process, for the CPU
`KILN_CPU` names then. A stored object that is not a well-formed object file (object_symbols.py) is
discarded and built again.
"""
import sys

import numpy as np

from . import builtins, disk_cache, externs, object_symbols, target

NAME = "kiln.rtlib"
FUNCTIONS = {"parallel_for": "kiln_parallel_for", "dispatch": "kiln_dispatch"}


_ADDRESSES = {}
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
                _ADDRESSES.update({key: loaded.function_address(symbol)
                                   for key, symbol in FUNCTIONS.items()})
    return _ADDRESSES[name]


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


def _load(name, compile_, builtins_first=False, version=""):
    """The library object `name` (compiled by `compile_()`), loaded into the JIT."""
    cpu, features = target.jit_cpu()
    key = disk_cache.key(name, target.triple(), cpu, features, sys.implementation.cache_tag,
                         np.__version__, version)
    data = disk_cache.load(key)
    if data is not None:
        try:
            object_symbols.check_object(data)
        except object_symbols.BadObject as error:
            disk_cache.discard(key, f"unusable payload: {error}")
            data = None
    if data is None:
        data = compile_()
        disk_cache.store(key, data)
    if builtins_first:
        provide([data])
    return target.load_object(name, data, entry=False)


def _compile():
    import llvmlite.ir as ir
    from . import pycall
    module = ir.Module(name=NAME)
    module.triple = target.triple()
    _emit_parallel_for(module, ir)
    pycall.emit_dispatch(module)
    return target.object_code(target.optimize(str(module), NAME))


def _compile_builtins():
    import llvmlite.ir as ir
    module = ir.Module(name=BUILTINS)
    module.triple = target.triple()
    builtins.emit(module)
    return target.object_code(target.optimize(str(module), BUILTINS))


def _emit_parallel_for(module, ir):
    """`void kiln_parallel_for(ptr body, ptr env, i64 n, i64 grain)` and its worker (see the
    module docstring)."""
    from . import parallel
    from . import ltypes as T
    from .loops import counted_loop
    shared = ir.LiteralStructType([T.PTR, T.PTR, T.I64, T.I64, T.I64, T.I64])
    worker = _emit_worker(module, ir, shared)
    function = ir.Function(module, ir.FunctionType(T.VOID, [parallel.BODY_TYPE.as_pointer(), T.PTR,
                                                            T.I64, T.I64]), FUNCTIONS["parallel_for"])
    body, env, n, grain = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    grain = parallel._max(b, grain, T.i64(1))
    blocks = parallel._ceil_div(b, parallel._max(b, n, T.i64(0)), grain)
    threads = parallel._min(b, parallel._max(b, b.load(externs.declare(module, "kiln_num_threads")),
                                             T.i64(1)), blocks)
    with b.if_else(b.icmp_signed("<=", threads, T.i64(1))) as (serial, threaded):
        with serial:
            with b.if_then(b.icmp_signed(">", n, T.i64(0))):
                b.call(body, [env, T.i64(0), n])
        with threaded:
            state = externs.stack_slot(b, ir.Constant(shared, ir.Undefined))
            for k, value in enumerate((body, env, n, grain, blocks, T.i64(0))):
                b.store(value, b.gep(state, [T.I32(0), T.I32(k)], source_etype=shared))
            helpers = b.sub(threads, T.i64(1))
            tids, started = (externs.opaque(b.alloca(t, helpers)) for t in (T.I64, T.I8))

            def start(b2, i, carried):
                rc = externs.call(b2, "kiln_pthread_create", parallel._PTHREAD_CREATE, [
                    b2.gep(tids, [i], source_etype=T.I64), ir.Constant(T.PTR, None), worker, state])
                b2.store(b2.zext(b2.icmp_signed("==", rc, T.I32(0)), T.I8),
                         b2.gep(started, [i], source_etype=T.I8))
                return carried

            def join(b2, i, carried):
                flag = b2.load(b2.gep(started, [i], source_etype=T.I8), typ=T.I8)
                with b2.if_then(b2.trunc(flag, T.I1)):
                    tid = b2.load(b2.gep(tids, [i], source_etype=T.I64), typ=T.I64)
                    externs.call(b2, "kiln_pthread_join", parallel._PTHREAD_JOIN,
                                 [tid, ir.Constant(T.PTR, None)])
                return carried
            counted_loop(b, helpers, start, (), "start")
            b.call(worker, [state])
            counted_loop(b, helpers, join, (), "join")
    b.ret_void()


def _emit_worker(module, ir, shared):
    """`ptr worker(ptr state)`: claim blocks until none is left (a pthread start routine)."""
    from . import parallel
    from . import ltypes as T
    function = ir.Function(module, ir.FunctionType(T.PTR, [T.PTR]), "kiln_parallel_worker")
    function.linkage = "internal"
    state = function.args[0]
    b = ir.IRBuilder(function.append_basic_block("entry"))
    fields = [b.load(b.gep(state, [T.I32(0), T.I32(k)], source_etype=shared), typ=t)
              for k, t in enumerate((parallel.BODY_TYPE.as_pointer(), T.PTR, T.I64, T.I64, T.I64))]
    body, env, n, grain, blocks = fields
    counter = b.gep(state, [T.I32(0), T.I32(5)], source_etype=shared)
    claim = b.append_basic_block("claim")
    run = b.append_basic_block("run")
    done = b.append_basic_block("done")
    b.branch(claim)
    b.position_at_end(claim)
    block = b.atomic_rmw("add", counter, T.i64(1), "monotonic")
    b.cbranch(b.icmp_signed("<", block, blocks), run, done)
    b.position_at_end(run)
    lo = b.mul(block, grain)
    b.call(body, [env, lo, parallel._min(b, b.add(lo, grain), n)])
    b.branch(claim)
    b.position_at_end(done)
    b.ret(ir.Constant(T.PTR, None))
    return function
