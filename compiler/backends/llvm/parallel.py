"""parallel_for for generated code: a loop's iterations split over native threads, no GIL involved.

The code generator outlines a loop nest's body into a function `void body(ptr env, i64 lo, i64 hi)`
running iterations [lo, hi) (its captured values packed into a struct by `pack_env`, read back with
`unpack_env`) and calls

    call void @kiln_parallel_for(ptr @body, ptr %env, i64 %n, i64 %grain)

(`emit_parallel_for` does both the definition and the call). `parallel_for(module)` defines that
internal function once per module. It splits [0, n) into at most `kiln_num_threads` chunks of whole
multiples of `grain` iterations (so no chunk is smaller than `grain`, and chunk boundaries stay aligned
to it, e.g. to vector widths or rows), starts a pthread per chunk but the first, runs the first on
the calling thread, and joins. With one chunk (one thread, or n <= grain) it calls the body
directly. If a thread cannot be created its chunk runs on the calling thread instead.

pthread_create, pthread_join and the thread count are extern globals (externs.py), filled when the
object code is loaded: the thread count is `KILN_NUM_THREADS` if set (1 disables threading), else the
number of cores this process may run on. Each call creates and joins its threads (about 20-50 us per
thread), so the code generator should parallelise only loops of substantial work (hundreds of
microseconds); the grain is its lever.
"""

from __future__ import annotations

import ctypes
import os

import llvmlite.ir as ir

from . import externs

VOID = ir.VoidType()
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
BODY_TYPE = ir.FunctionType(VOID, [PTR, I64, I64])
_BODY_POINTER = BODY_TYPE.as_pointer()  # typed, so llvmlite can call it (LLVM reads it as `ptr`)
PARALLEL_FOR = "kiln_parallel_for"
_TRAMPOLINE = "kiln_parallel_trampoline"
_TASK = ir.LiteralStructType([PTR, PTR, I64, I64])  # body, env, lo, hi
_PTHREAD_CREATE = ir.FunctionType(I32, [PTR, PTR, PTR, PTR])
_PTHREAD_JOIN = ir.FunctionType(I32, [I64, PTR])
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


# -- IR ------------------------------------------------------------------------------------------------

def emit_parallel_for(builder: ir.IRBuilder, body: ir.Function, env: ir.Value, n: ir.Value, grain) -> None:
    """Run `body(env, lo, hi)` over [0, n) split across threads, chunks at least `grain` long."""
    grain = grain if isinstance(grain, ir.Value) else ir.Constant(I64, int(grain))
    builder.call(parallel_for(builder.module), [body, env, n, grain])


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
    return [builder.load(_field(builder, env, struct, i), typ=t) for i, t in enumerate(types)]


def parallel_for(module: ir.Module) -> ir.Function:
    """The module's internal `void kiln_parallel_for(ptr body, ptr env, i64 n, i64 grain)`."""
    existing = module.globals.get(PARALLEL_FOR)
    if existing is not None:
        return existing
    function = ir.Function(module, ir.FunctionType(VOID, [_BODY_POINTER, PTR, I64, I64]), PARALLEL_FOR)
    function.linkage = "internal"
    body, env, n, grain = function.args
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    grain = _max(builder, grain, ir.Constant(I64, 1))
    blocks = _ceil_div(builder, _max(builder, n, ir.Constant(I64, 0)), grain)
    threads = _max(builder, builder.load(externs.declare(module, "kiln_num_threads")), _one())
    chunks = _min(builder, threads, blocks)
    with builder.if_else(builder.icmp_signed("<=", chunks, _one())) as (serial, threaded):
        with serial:
            with builder.if_then(builder.icmp_signed(">", n, ir.Constant(I64, 0))):
                builder.call(body, [env, ir.Constant(I64, 0), n])
        with threaded:
            _run_threads(builder, body, env, n, grain, blocks, chunks)
    builder.ret_void()
    return function


def _run_threads(builder, body, env, n, grain, blocks, chunks) -> None:
    per = builder.mul(_ceil_div(builder, blocks, chunks), grain)  # iterations per chunk
    chunks = _ceil_div(builder, blocks, builder.udiv(per, grain))  # no empty trailing chunk
    tasks, tids, started = (externs.opaque(builder.alloca(t, chunks)) for t in (_TASK, I64, I8))
    trampoline = _trampoline(builder.module)

    def start(i):
        lo = builder.mul(i, per)
        hi = _min(builder, builder.add(lo, per), n)
        task = builder.gep(tasks, [i], source_etype=_TASK)
        for index, value in enumerate((body, env, lo, hi)):
            builder.store(value, _field(builder, task, _TASK, index))
        rc = externs.call(builder, "kiln_pthread_create", _PTHREAD_CREATE,
                          [builder.gep(tids, [i], source_etype=I64), ir.Constant(PTR, None), trampoline, task])
        failed = builder.icmp_signed("!=", rc, ir.Constant(I32, 0))
        builder.store(builder.zext(builder.not_(failed), I8), builder.gep(started, [i], source_etype=I8))
        with builder.if_then(failed):  # no thread: run the chunk here
            builder.call(body, [env, lo, hi])

    def join(i):
        flag = builder.load(builder.gep(started, [i], source_etype=I8), typ=I8)
        with builder.if_then(builder.trunc(flag, ir.IntType(1))):
            tid = builder.load(builder.gep(tids, [i], source_etype=I64), typ=I64)
            externs.call(builder, "kiln_pthread_join", _PTHREAD_JOIN, [tid, ir.Constant(PTR, None)])

    _for_range(builder, _one(), chunks, start)
    builder.call(body, [env, ir.Constant(I64, 0), per])
    _for_range(builder, _one(), chunks, join)


def _trampoline(module: ir.Module) -> ir.Function:
    """`ptr trampoline(ptr task)`: the pthread start routine running one task's chunk."""
    existing = module.globals.get(_TRAMPOLINE)
    if existing is not None:
        return existing
    function = ir.Function(module, ir.FunctionType(PTR, [PTR]), _TRAMPOLINE)
    function.linkage = "internal"
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    task = function.args[0]
    fields = (_BODY_POINTER, PTR, I64, I64)
    body, env, lo, hi = (builder.load(_field(builder, task, _TASK, i), typ=t) for i, t in enumerate(fields))
    builder.call(body, [env, lo, hi])
    builder.ret(ir.Constant(PTR, None))
    return function


def _for_range(builder: ir.IRBuilder, start: ir.Value, stop: ir.Value, emit_body) -> None:
    """for (i = start; i < stop; ++i) emit_body(i), as a phi loop."""
    before = builder.block
    header = builder.append_basic_block("for.header")
    loop = builder.append_basic_block("for.body")
    done = builder.append_basic_block("for.end")
    builder.branch(header)
    builder.position_at_end(header)
    index = builder.phi(I64)
    index.add_incoming(start, before)
    builder.cbranch(builder.icmp_signed("<", index, stop), loop, done)
    builder.position_at_end(loop)
    emit_body(index)
    index.add_incoming(builder.add(index, _one()), builder.block)
    builder.branch(header)
    builder.position_at_end(done)


def _field(builder: ir.IRBuilder, base: ir.Value, struct: ir.LiteralStructType, index: int) -> ir.Value:
    return builder.gep(base, [ir.Constant(I32, 0), ir.Constant(I32, index)], source_etype=struct)


def _one() -> ir.Constant:
    return ir.Constant(I64, 1)


def _max(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    return builder.select(builder.icmp_signed(">", a, b), a, b)


def _min(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    return builder.select(builder.icmp_signed("<", a, b), a, b)


def _ceil_div(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    return builder.udiv(builder.add(a, builder.sub(b, _one())), b)
