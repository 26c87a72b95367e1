"""parallel_for for generated code: a loop's iterations split over native threads, no GIL involved.

The code generator outlines a loop nest's body into a function `void body(ptr env, i64 lo, i64 hi)`
running iterations [lo, hi) (its captured values packed into a struct by `pack_env`, read back with
`unpack_env`) and calls

    call void %kiln_parallel_for(ptr @body, ptr %env, i64 %n, i64 %grain)

through the extern global `kiln_parallel_for` (`emit_parallel_for`), the runtime library's
function (rtlib.py) on the persistent thread pool (pool.py): [0, n) is cut into a few chunks
per thread (whole multiples of `grain`, so no chunk is smaller than `grain` and chunk boundaries
stay aligned to it, e.g. to vector widths or rows), which the calling thread and the pool's
workers claim one at a time. With one thread, or n <= grain, it calls the body directly.

This module provides the load-time values of the pool's externs (externs.py): the thread count
is `KILN_NUM_THREADS` if set (1 disables threading), else the number of cores this process may
run on; pthread_create/join and libc's `syscall` (the pool's futex waits) are libc's.
"""

from __future__ import annotations

import ctypes
import os

import llvmlite.ir as ir

from . import externs

VOID = ir.VoidType()
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
BODY_TYPE = ir.FunctionType(VOID, [PTR, I64, I64])
_BODY_POINTER = BODY_TYPE.as_pointer()  # typed, so llvmlite can call it (LLVM reads it as `ptr`)
PARALLEL_FOR = "kiln_parallel_for"
PARALLEL_FOR_TYPE = ir.FunctionType(VOID, [_BODY_POINTER, PTR, I64, I64])
_MAX_THREADS = 1024


# -- load-time values (externs.EXTERNS providers) ------------------------------------------------------

def num_threads() -> int:
    """Threads a parallel loop may use: KILN_NUM_THREADS, else the cores this process may run on."""
    setting = os.environ.get("KILN_NUM_THREADS", "").strip()
    if not setting:
        return len(os.sched_getaffinity(0))
    if not setting.isdigit() or not 1 <= int(setting) <= _MAX_THREADS:
        raise ValueError(f"KILN_NUM_THREADS={setting!r} must be a whole number from 1 to {_MAX_THREADS} "
                         f"(1 runs compiled loops on the calling thread only)")
    return int(setting)


def _libc_address(name: str) -> int:
    return ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value


def pthread_create_address() -> int:
    return _libc_address("pthread_create")


def pthread_join_address() -> int:
    return _libc_address("pthread_join")


def syscall_address() -> int:
    return _libc_address("syscall")


# -- IR ------------------------------------------------------------------------------------------------

def emit_parallel_for(builder: ir.IRBuilder, body: ir.Function, env: ir.Value, n: ir.Value, grain) -> None:
    """Run `body(env, lo, hi)` over [0, n) split across threads, chunks at least `grain` long."""
    grain = grain if isinstance(grain, ir.Value) else ir.Constant(I64, int(grain))
    n = n if isinstance(n, ir.Value) else ir.Constant(I64, int(n))
    externs.call(builder, PARALLEL_FOR, PARALLEL_FOR_TYPE, [body, env, n, grain])


def pack_env(builder: ir.IRBuilder, values: list[ir.Value]) -> ir.Value:
    """A pointer to a stack struct holding `values` (valid until the current function returns)."""
    struct = ir.LiteralStructType([v.type for v in values])
    packed = ir.Constant(struct, ir.Undefined)
    for index, value in enumerate(values):
        packed = builder.insert_value(packed, value, index)
    return externs.stack_slot(builder, packed)


def unpack_env(builder: ir.IRBuilder, env: ir.Value, types: list[ir.Type]) -> list[ir.Value]:
    """The values `pack_env` stored, given their types, inside a body function."""
    struct = ir.LiteralStructType(types)
    return [builder.load(builder.gep(env, [ir.Constant(I32, 0), ir.Constant(I32, i)], source_etype=struct),
                         typ=t) for i, t in enumerate(types)]
