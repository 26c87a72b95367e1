"""One large LAPACK factorisation on OpenBLAS's own threads.

OpenBLAS runs on one thread in kiln (blas.py): the thread pool splits large products itself.
A LAPACK driver (syevd, gesdd, potrf, geqrf, ...) cannot be split that way: its parallel parts
are the BLAS calls inside it, so a single large matrix would factor on one core. `emit_call`
wraps such a call: it sets OpenBLAS to more threads for the call and back to one after it, as
JAX's LAPACK calls run (SciPy's OpenBLAS with its own threads).

`wanted(count, *dims)` says which calls: one matrix (a batch keeps one thread per call) whose
smallest dimension is at least `MIN_SIZE` (below it the call is too short for a second thread
to pay).

How many threads, decided at each call: `kiln_lapack_threads` (kiln's threads, KILN_NUM_THREADS
or the cores, and no more than OpenBLAS's own setting when kiln first bound it:
OPENBLAS_NUM_THREADS=1 keeps every call on one thread), and no more than 1 + the cores idle
right now: the online cores (`kiln_online_cores`) less the runnable threads /proc/loadavg
counts (the calling thread is one), as target.idle_cores() counts them for compilation.
OpenBLAS splits its work statically and waits at every step for each share: on a busy
machine a thread without a core stalls the whole call (eigh of 512x512 float32 at load 7:
a median of 270-430 ms on two threads against 57 ms on one). OpenBLAS's worker polls for
about 2^28 cycles after a threaded call (its THREAD_TIMEOUT) and so counts as runnable: the
workers of this process's last threaded call are not counted against the next one within
that time (the claim words keep its end, in time-stamp counter cycles, and thread count).

No oversubscription by kiln itself: one such call runs threaded at a time in the process. A
caller claims the process-wide word at `kiln_lapack_claim` (compare-and-swap 0 -> 1) first; a
second caller meanwhile (another replica of `pmap`, another Python thread) finds it taken and
calls on one thread. kiln's own pool is idle during the call (its workers sleep after a few
microseconds of spinning; the call is made by the thread that runs the function). While the
call runs, the setting is the library's, not the call's: a BLAS call another thread makes
meanwhile may run threaded too.

Only x86-64 reads the load (the system calls and the time-stamp counter below); elsewhere,
and where the externs are unbound (a `kiln compile` library: its glue binds none of them),
the call runs on one thread.
"""
from __future__ import annotations

import ctypes
import functools
import os

import llvmlite.ir as ir

from . import blas, blas_lookup, externs, parallel
from . import ltypes as T
from .loops import counted_loop
from .pool import SYSCALL_TYPE

MIN_SIZE = 256
# OpenBLAS's worker polls this many time-stamp counter cycles after a call (THREAD_TIMEOUT 28)
POLL_CYCLES = 1 << 28
# (openat, read, close) system call numbers by the triple's architecture
_SYSCALLS = {"x86_64": (257, 0, 3)}
_AT_FDCWD = -100
_LOADAVG = b"/proc/loadavg\0"
_READ_BYTES = 128
_CLAIM, _LAST_END, _LAST_THREADS = range(3)   # the claim words
_SETTER = ir.FunctionType(ir.VoidType(), [T.PTR])
I1, I8 = ir.IntType(1), ir.IntType(8)


def wanted(count: int, *dims: int) -> bool:
    """Whether a call for `count` matrices of dimensions `dims` may run on OpenBLAS's threads."""
    return count == 1 and min(dims) >= MIN_SIZE


def threads_for_call() -> int:
    """`kiln_lapack_threads`: kiln's threads, at most OpenBLAS's own count before kiln set it
    to one (blas.py)."""
    return max(1, min(parallel.num_threads(), blas._one_thread()))


def online_cores() -> int:
    """`kiln_online_cores`: the cores /proc/loadavg's runnable threads share."""
    return os.cpu_count() or 1


def setter_address() -> int:
    """`kiln_blas_set_threads`: OpenBLAS's `openblas_set_num_threads`, 0 without one."""
    return blas_lookup.openblas_address(blas_lookup.THREAD_SETTER) or 0


@functools.cache
def _claim_words():
    return (ctypes.c_int64 * 3)()


def claim_address() -> int:
    """`kiln_lapack_claim`: the process's claim words (claimed, the last threaded call's end,
    its thread count)."""
    return ctypes.addressof(_claim_words())


def emit_lapack(builder: ir.IRBuilder, name: str, function_type: ir.FunctionType, values,
                threaded: bool) -> None:
    """blas._call of LAPACK routine `name`, through `emit_call` when `threaded` (`wanted`)."""
    if threaded and builder.module.triple.split("-")[0] in _SYSCALLS:
        emit_call(builder, lambda b: blas._call(b, name, function_type, values))
    else:
        blas._call(builder, name, function_type, values)


def emit_call(builder: ir.IRBuilder, call) -> None:
    """Emit `call(builder)` (one LAPACK call) on as many OpenBLAS threads as the module
    docstring says."""
    module = builder.module
    threads = builder.load(externs.declare(module, "kiln_lapack_threads"), typ=T.I64)
    words = builder.load(externs.declare(module, "kiln_lapack_claim"), typ=T.PTR)
    setter = builder.load(externs.declare(module, "kiln_blas_set_threads"), typ=T.PTR)
    null = ir.Constant(T.PTR, None)
    usable = builder.and_(builder.icmp_signed(">", threads, T.i64(1)),
                          builder.and_(builder.icmp_unsigned("!=", words, null),
                                       builder.icmp_unsigned("!=", setter, null)))
    chosen = externs.stack_slot(builder, T.i64(1))
    with builder.if_then(usable):
        claim = builder.cmpxchg(_word(builder, words, _CLAIM), T.i64(0), T.i64(1), "acquire",
                                "monotonic")
        with builder.if_then(builder.extract_value(claim, 1)):
            allowed = _allowed(builder, threads, words)
            builder.store(allowed, chosen)
            with builder.if_then(builder.icmp_signed("<=", allowed, T.i64(1))):
                builder.atomic_rmw("xchg", _word(builder, words, _CLAIM), T.i64(0), "release")
    count = builder.load(chosen, typ=T.I64)
    mine = builder.icmp_signed(">", count, T.i64(1))

    def set_threads(value):
        externs.call(builder, "kiln_blas_set_threads", _SETTER,
                     [externs.stack_slot(builder, blas._int(builder, value))])
    with builder.if_then(mine):
        set_threads(count)
    call(builder)
    with builder.if_then(mine):
        set_threads(1)
        builder.store(_cycles(builder), _word(builder, words, _LAST_END))
        builder.store(count, _word(builder, words, _LAST_THREADS))
        builder.atomic_rmw("xchg", _word(builder, words, _CLAIM), T.i64(0), "release")


def _word(builder, words, index):
    return builder.gep(words, [T.i64(index)], source_etype=T.I64)


def _cycles(builder):
    counter = builder.module.declare_intrinsic("llvm.readcyclecounter", (), ir.FunctionType(T.I64, []))
    return builder.call(counter, [])


def _allowed(builder, threads, words):
    """min(threads, 1 + idle cores): idle = online cores - runnable threads, this process's
    last threaded call's polling workers not counted (the module docstring)."""
    running = _runnable(builder)
    since = builder.sub(_cycles(builder), builder.load(_word(builder, words, _LAST_END), typ=T.I64))
    polling = builder.select(builder.icmp_unsigned("<", since, T.i64(POLL_CYCLES)),
                             builder.sub(builder.load(_word(builder, words, _LAST_THREADS), typ=T.I64),
                                         T.i64(1)), T.i64(0))
    running = builder.sub(running, builder.select(builder.icmp_signed(">", running, polling),
                                                  polling, T.i64(0)))
    cores = builder.load(externs.declare(builder.module, "kiln_online_cores"), typ=T.I64)
    idle = builder.sub(cores, running)
    allowed = builder.add(T.i64(1), builder.select(builder.icmp_signed(">", idle, T.i64(0)),
                                                   idle, T.i64(0)))
    return builder.select(builder.icmp_signed("<", allowed, threads), allowed, threads)


def _runnable(builder):
    """The runnable threads /proc/loadavg counts (its fourth field, before the '/'); 0 when it
    cannot be read."""
    module = builder.module
    openat, read, close = _SYSCALLS[module.triple.split("-")[0]]
    path = module.globals.get("kiln.loadavg_path")
    if path is None:
        path = ir.GlobalVariable(module, ir.ArrayType(I8, len(_LOADAVG)), "kiln.loadavg_path")
        path.initializer = ir.Constant(ir.ArrayType(I8, len(_LOADAVG)), bytearray(_LOADAVG))
        path.global_constant, path.linkage = True, "internal"
    buffer = externs.stack_slot(builder, ir.Constant(ir.ArrayType(I8, _READ_BYTES), None))
    length = externs.stack_slot(builder, T.i64(0))

    def syscall(*args):
        return externs.call(builder, "kiln_syscall", SYSCALL_TYPE,
                            [T.i64(a) if isinstance(a, int) else a for a in args])
    fd = syscall(openat, _AT_FDCWD, builder.ptrtoint(path, T.I64), 0)
    with builder.if_then(builder.icmp_signed(">=", fd, T.i64(0))):
        got = syscall(read, fd, builder.ptrtoint(buffer, T.I64), _READ_BYTES)
        builder.store(got, length)
        syscall(close, fd)
    got = builder.load(length, typ=T.I64)
    count = builder.select(builder.icmp_signed(">", got, T.i64(0)), got, T.i64(0))

    def step(b, i, carried):   # (spaces seen, the field's value, the field ended)
        spaces, value, ended = carried
        c = b.zext(b.load(b.gep(buffer, [i], source_etype=I8), typ=I8), T.I64)
        digit = b.sub(c, T.i64(ord("0")))
        is_digit = b.icmp_unsigned("<", digit, T.i64(10))
        space = b.icmp_unsigned("==", c, T.i64(ord(" ")))
        inside = b.and_(b.icmp_signed("==", spaces, T.i64(3)), b.not_(ended))
        value = b.select(b.and_(inside, is_digit), b.add(b.mul(value, T.i64(10)), digit), value)
        ended = b.or_(ended, b.and_(inside, b.not_(b.or_(is_digit, space))))
        return [b.add(spaces, b.zext(space, T.I64)), value, ended]
    _, running, _ = counted_loop(builder, count, step,
                                 (T.i64(0), T.i64(0), ir.Constant(I1, 0)), "loadavg")
    return running
