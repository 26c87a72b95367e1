"""Extern symbols of generated code: native helpers and load-time constants held in module globals.

Generated code never contains a native address. Each native function it calls (pthreads and
libc's `syscall` for the thread pool, BLAS kernels, the runtime library's pool) and each value decided when the code is loaded (the thread count) is
an 8-byte global of the LLVM module, initialised to 0/null: `declare(module, name)` creates it (once
per module) and returns it; after the object code is loaded, `bind_externs(lookup, namespace)` writes
every such global it finds. Object code therefore stays position independent and can be cached on
disk or shipped in a shared library.

Globals are named `<namespace>.<name>` with the module's name as namespace (just `<name>` for an
unnamed module), because MCJIT keeps one copy of a global per module and looks names up across all
modules of an engine: modules sharing an engine must have distinct names.

`EXTERNS` is the complete table (name -> provider of the value). It is static, so a process that
loads cached object code binds BLAS without ever having imported the code that emitted the calls;
providers run only for globals the loaded code actually defines (scipy is imported only then).
"""

from __future__ import annotations

import ctypes
import importlib
from typing import Callable

import llvmlite.ir as ir

from . import blas_lookup

I64 = ir.IntType(64)
PTR = ir.PointerType()


def _call(module: str, function: str, *args) -> Callable[[], int]:
    """A provider: `function(*args)` of `module` (relative to this package), imported only when
    a loaded module defines the global (scipy, mpi4py, ... load only then)."""
    def provide() -> int:
        return getattr(importlib.import_module(module, __package__), function)(*args)
    return provide


def _libc(name: str) -> Callable[[], int]:
    def provide() -> int:
        return ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value
    return provide


# name -> (type of the global, provider of its value at load time)
EXTERNS: dict[str, tuple[ir.Type, Callable[[], int]]] = {
    "kiln_pthread_create": (PTR, _call(".parallel", "pthread_create_address")),
    "kiln_pthread_join": (PTR, _call(".parallel", "pthread_join_address")),
    "kiln_syscall": (PTR, _call(".parallel", "syscall_address")),
    "kiln_num_threads": (I64, _call(".parallel", "num_threads")),
    # the runtime library's (rtlib.py, pool.py)
    "kiln_parallel_for": (PTR, _call(".rtlib", "address", "parallel_for")),
    "kiln_run_tasks": (PTR, _call(".rtlib", "address", "run_tasks")),
    "kiln_barrier_wait": (PTR, _call(".rtlib", "address", "barrier_wait")),
    # the runtime library's packed matrix-product kernels (gemm_packed.py)
    "kiln_gemm_float32": (PTR, _call(".rtlib", "address", "gemm_float32")),
    "kiln_gemm_float64": (PTR, _call(".rtlib", "address", "gemm_float64")),
    # the runtime library's FFT kernels (fft_kernel.py)
    "kiln_fft_complex64": (PTR, _call(".rtlib", "address", "fft_complex64")),
    "kiln_fft_complex128": (PTR, _call(".rtlib", "address", "fft_complex128")),
    # pmap's replicas (pool.py's kiln_run_replicas, lower_collectives.py)
    **{f"kiln_{name}": (PTR, _libc(name)) for name in ("sched_yield", "pthread_setspecific")},
    **{f"kiln_{routine}": (PTR, _call(".blas", "address", routine))
       for routine in blas_lookup.ROUTINES},
    # one large LAPACK call on OpenBLAS's threads (lapack_threads.py)
    "kiln_blas_set_threads": (PTR, _call(".lapack_threads", "setter_address")),
    "kiln_lapack_threads": (I64, _call(".lapack_threads", "threads_for_call")),
    "kiln_lapack_claim": (PTR, _call(".lapack_threads", "claim_address")),
    "kiln_online_cores": (I64, _call(".lapack_threads", "online_cores")),
    # the host callback of `debug_print`
    "kiln_debug_print": (PTR, _call(".host_callbacks", "callback_address")),
    # the host side of `pure_callback`
    "kiln_pure_callback": (PTR, _call(".host_callbacks", "pure_callback_address")),
    # pmap's replicas (lower_collectives.py, replica_context.py)
    "kiln_replica_key": (I64, _call(".replica_context", "replica_key")),
    "kiln_pthread_getspecific": (PTR, _call(".replica_context", "getspecific_address")),
    # collectives across processes (mpi_engine.py; bound only once kiln.distributed set up MPI)
    **{f"kiln_mpi_{name}": (PTR, _call("..mpi_engine", "address", name)) for name in
       ("allreduce", "allgather", "alltoall", "sendrecv", "reduce_scatter", "exchange",
        "abort")},
}


def symbol(namespace: str, name: str) -> str:
    """The global's symbol name in a module called `namespace`."""
    return f"{namespace}.{name}" if namespace else name


def declare(module: ir.Module, name: str) -> ir.GlobalVariable:
    """The module's global for extern `name` (one of EXTERNS), created on first use."""
    if name not in EXTERNS:
        raise KeyError(f"unknown extern {name!r}; known: {', '.join(EXTERNS)}")
    sym = symbol(module.name, name)
    existing = module.globals.get(sym)
    if existing is not None:
        return existing
    value_type = EXTERNS[name][0]
    variable = ir.GlobalVariable(module, value_type, sym)
    variable.initializer = ir.Constant(value_type, None if value_type is PTR else 0)
    variable.align = 8
    return variable


def stack_slot(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """A stack slot holding `value`, for by-pointer arguments. The slot is allocated in the function's
    entry block (which no loop contains), so emitting this inside a loop does not grow the stack."""
    entry = builder.function.entry_basic_block
    at_entry = builder
    if builder.block is not entry:  # (a second builder in the current block would desync this one)
        at_entry = ir.IRBuilder(entry)
        at_entry.position_at_start(entry)
    slot = opaque(at_entry.alloca(value.type))
    builder.store(value, slot)
    return slot


def opaque(pointer: ir.Instruction) -> ir.Instruction:
    """`pointer` typed as the opaque `ptr` (llvmlite types allocas and GEPs as typed pointers, which
    then refuse to store or load values of other types at offsets inside them)."""
    pointer.type = PTR
    return pointer


def call(builder: ir.IRBuilder, name: str, function_type: ir.FunctionType, args) -> ir.Instruction:
    """Call the native function whose address extern global `name` holds."""
    # llvmlite needs the callee's function type: load the pointer with a typed pointer type
    # (printed as `<fnty>*`, which LLVM's parser reads as the opaque `ptr`).
    pointer = builder.load(declare(builder.module, name), typ=function_type.as_pointer())
    return builder.call(pointer, args)


def bind_externs(lookup: Callable[[str], int], namespace: str) -> list[str]:
    """Fill every extern global that loaded code defines; returns the names bound.

    `lookup(symbol) -> address` finds a global of the loaded code, 0 when it is absent, e.g.
    `engine.get_global_value_address` of an llvmlite ExecutionEngine after `finalize_object()`.
    """
    bound = []
    for name, (_, provide) in EXTERNS.items():
        address = lookup(symbol(namespace, name))
        if address:
            ctypes.c_uint64.from_address(address).value = provide()
            bound.append(name)
    return bound
