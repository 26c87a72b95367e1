"""The thread pool of compiled code: worker threads started once per process, in the runtime
library (rtlib.py), reached through two functions:

    void kiln_parallel_for(ptr body, ptr env, i64 n, i64 grain)
        body(env, lo, hi) over [0, n) in blocks of `grain` iterations, claimed one at a time
        from a shared atomic counter by the calling thread and up to kiln_num_threads - 1
        workers, so a thread the OS does not run at once (a busy machine) holds up at most one
        block instead of a fixed share;
    void kiln_run_concurrently(ptr task, ptr env, i64 n)
        task(env, i) for i in [0, n), each on its own thread at the same time (the caller runs
        one; the pool grows to n - 1 workers): pmap's replicas, which wait for each other in
        their collectives;
    void kiln_run_replicas(ptr main, ptr argsets, ptr records, ptr statuses, i64 n, i64 key)
        that, for n replicas of one compiled function: replica i makes &records[i] (an array of
        records) its thread's replica record (pthread_setspecific on `key`: lower_collectives.py reads it), runs
        main(argsets[i]) and stores its status in statuses[i]; a replica that fails sets the
        `broken` word of its group's barrier, so the others finish instead of waiting for it.

State. One `kiln.pool` global holds a mutex, two condition variables (`work`: a job was posted;
`done`: a participant left a job), the job (body, env, n, grain, blocks, mode, the participant
limit) and its counters (`next`: the next block to claim, `completed`: blocks finished, `active`:
workers inside the job). The pthread objects are zeroed storage, which is their static
initialiser on Linux (glibc and musl), and the sizes reserved (64 bytes each) cover both.

A job: the caller takes the `busy` flag (a compare-and-swap; a call made while another job runs,
e.g. a parallel loop inside a pmap replica, runs on the calling thread instead for
parallel_for, and waits its turn for run_concurrently), starts the workers still missing
(pthread_create, once per process: kept, never joined), posts the job under the mutex and
broadcasts `work`, claims blocks itself, then waits under the mutex until every block is
completed and no worker is inside the job. A worker waits on `work` for a job it has not seen,
joins it when fewer than `limit` workers are inside, claims blocks (mode 1: one task), then
leaves and broadcasts `done`. Workers never spin: a waiting thread sleeps in the kernel, so
pool threads cost nothing while other processes have the cores.

fork(): the workers do not exist in a child process. The pool records the pid that started
them; a call from another pid resets the whole state (mutex and conditions re-zeroed, no
workers) first.
"""
import llvmlite.ir as ir

from . import externs
from . import ltypes as T

RANGE_BODY = ir.FunctionType(T.VOID, [T.PTR, T.I64, T.I64])    # body(env, lo, hi)
TASK = ir.FunctionType(T.VOID, [T.PTR, T.I64])                 # task(env, i)
PARALLEL_FOR = "kiln_parallel_for"
RUN_CONCURRENTLY = "kiln_run_concurrently"
_LOCK = ir.FunctionType(T.I32, [T.PTR])
_WAIT = ir.FunctionType(T.I32, [T.PTR, T.PTR])
_CREATE = ir.FunctionType(T.I32, [T.PTR, T.PTR, T.PTR, T.PTR])
_GETPID = ir.FunctionType(T.I32, [])
_YIELD = ir.FunctionType(T.I32, [])
_SYNC = ir.ArrayType(T.I8, 64)
# field: (index, type)
_FIELDS = ["mutex", "work", "done", "pid", "workers", "job", "body", "env", "n", "grain",
           "blocks", "mode", "limit", "next", "completed", "active", "busy"]
_TYPES = [_SYNC, _SYNC, _SYNC] + [T.I64] * 3 + [T.PTR, T.PTR] + [T.I64] * 9
_STATE = ir.LiteralStructType(_TYPES)
MAX_WORKERS = 1023


class _State:
    """Pointers to the fields of the pool's global state, for one builder."""

    def __init__(self, builder, state):
        self.b = builder
        self.state = state

    def __getattr__(self, name):
        k = _FIELDS.index(name)
        return externs.opaque(self.b.gep(self.state, [T.i64(0), T.I32(k)], source_etype=_STATE))

    def load(self, name, ordering=None):
        k = _FIELDS.index(name)
        if ordering is None:
            return self.b.load(getattr(self, name), typ=_TYPES[k])
        return self.b.load_atomic(getattr(self, name), ordering, 8, typ=_TYPES[k])

    def store(self, name, value):
        self.b.store(value, getattr(self, name))

    def add(self, name, value, ordering="acq_rel"):
        return self.b.atomic_rmw("add", getattr(self, name), value, ordering)


def _call(b, name, fnty, args):
    return externs.call(b, name, fnty, args)


def _lock(s):
    _call(s.b, "kiln_pthread_mutex_lock", _LOCK, [s.mutex])


def _unlock(s):
    _call(s.b, "kiln_pthread_mutex_unlock", _LOCK, [s.mutex])


def _wait(s, cond):
    _call(s.b, "kiln_pthread_cond_wait", _WAIT, [getattr(s, cond), s.mutex])


def _broadcast(s, cond):
    _call(s.b, "kiln_pthread_cond_broadcast", _LOCK, [getattr(s, cond)])


def _while(b, test, body, name):
    """while (test(b)) body(b)."""
    head, loop, done = (b.append_basic_block(f"{name}.{x}") for x in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(test(b), loop, done)
    b.position_at_end(loop)
    body(b)
    b.branch(head)
    b.position_at_end(done)


def _typed(b, pointer, fnty):
    """`pointer` (an opaque ptr) as a callable of type `fnty` (llvmlite calls only typed
    function pointers)."""
    return b.load(externs.stack_slot(b, pointer), typ=fnty.as_pointer())


def _run_block(s, body, env, mode, block, n, grain):
    """Run block `block` of the current job (mode 0: a range; mode 1: a task)."""
    b = s.b
    with b.if_else(b.icmp_unsigned("==", mode, T.i64(0))) as (ranges, tasks):
        with ranges:
            lo = b.mul(block, grain)
            end = b.add(lo, grain)
            hi = b.select(b.icmp_signed("<", end, n), end, n)
            b.call(_typed(b, body, RANGE_BODY), [env, lo, hi])
        with tasks:
            b.call(_typed(b, body, TASK), [env, block])


def _claim(s, body, env, mode, n, grain, blocks):
    """Claim and run blocks until none is left (mode 1: at most one)."""
    b = s.b
    head, run, done = (b.append_basic_block(f"claim.{x}") for x in ("head", "run", "done"))
    b.branch(head)
    b.position_at_end(head)
    block = s.add("next", T.i64(1))
    b.cbranch(b.icmp_signed("<", block, blocks), run, done)
    b.position_at_end(run)
    _run_block(s, body, env, mode, block, n, grain)
    s.add("completed", T.i64(1))
    b.cbranch(b.icmp_unsigned("==", mode, T.i64(0)), head, done)
    b.position_at_end(done)


def _worker(module, state_global):
    """`ptr kiln.pool.worker(ptr last_job)`: the pthread start routine of a pool worker; its
    argument is the last job posted before it was started (the job it is started for may be
    posted before this thread first runs)."""
    fn = ir.Function(module, ir.FunctionType(T.PTR, [T.PTR]), "kiln.pool.worker")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    s = _State(b, state_global)
    seen = externs.stack_slot(b, b.ptrtoint(fn.args[0], T.I64))
    _lock(s)
    loop = b.append_basic_block("loop")
    b.branch(loop)
    b.position_at_end(loop)
    _while(b, lambda b: b.icmp_unsigned("==", s.load("job"), b.load(seen, typ=T.I64)),
           lambda b: _wait(s, "work"), "idle")
    b.store(s.load("job"), seen)
    fields = [s.load(n) for n in ("body", "env", "mode", "n", "grain", "blocks")]
    full = b.icmp_signed(">=", s.load("active"), s.load("limit"))
    with b.if_then(b.not_(full)):
        s.store("active", b.add(s.load("active"), T.i64(1)))
        _unlock(s)
        body, env, mode, n, grain, blocks = fields
        _claim(s, body, env, mode, n, grain, blocks)
        _lock(s)
        s.store("active", b.sub(s.load("active"), T.i64(1)))
        _broadcast(s, "done")
    b.branch(loop)
    return fn


def _fresh(s):
    """Reset the state when this process did not start the workers (a fork's child)."""
    b = s.b
    pid = b.sext(_call(b, "kiln_getpid", _GETPID, []), T.I64)
    with b.if_then(b.icmp_unsigned("!=", s.load("pid", "acquire"), pid), likely=False):
        b.store(ir.Constant(_STATE, None), s.state)
        s.store("pid", pid)


def _acquire(s, wait):
    """Take the busy flag: returns an i1, false when `wait` is false and a job runs."""
    b = s.b
    if not wait:
        pair = b.cmpxchg(s.busy, T.i64(0), T.i64(1), "acquire", "monotonic")
        return b.extract_value(pair, 1)
    _while(b, lambda b: b.not_(b.extract_value(
        b.cmpxchg(s.busy, T.i64(0), T.i64(1), "acquire", "monotonic"), 1)),
        lambda b: _call(b, "kiln_sched_yield", _YIELD, []), "busy")
    return T.I1(1)


def _start_workers(s, worker, wanted):
    """Start workers until there are `wanted` (at most MAX_WORKERS); a failed start stops."""
    b = s.b
    wanted = b.select(b.icmp_signed(">", wanted, T.i64(MAX_WORKERS)), T.i64(MAX_WORKERS), wanted)
    tid = externs.stack_slot(b, T.i64(0))

    def more(b):
        return b.icmp_signed("<", s.load("workers"), wanted)

    def start(b):
        rc = _call(b, "kiln_pthread_create", _CREATE, [tid, ir.Constant(T.PTR, None), worker,
                                                       b.inttoptr(s.load("job"), T.PTR)])
        ok = b.icmp_signed("==", rc, T.I32(0))
        s.store("workers", b.select(ok, b.add(s.load("workers"), T.i64(1)), wanted))
    _while(b, more, start, "start")


def _post_and_join(s, worker, body, env, mode, n, grain, blocks, helpers):
    """Post the job for `helpers` workers, claim blocks here, wait until it is complete."""
    b = s.b
    _start_workers(s, worker, helpers)
    _lock(s)
    for name, value in (("body", body), ("env", env), ("mode", mode), ("n", n),
                        ("grain", grain), ("blocks", blocks), ("limit", helpers),
                        ("next", T.i64(0)), ("completed", T.i64(0))):
        s.store(name, value)
    s.store("job", b.add(s.load("job"), T.i64(1)))
    _broadcast(s, "work")
    _unlock(s)
    _claim(s, body, env, mode, n, grain, blocks)
    _lock(s)
    _while(b, lambda b: b.or_(b.icmp_signed("<", s.load("completed", "acquire"), blocks),
                              b.icmp_signed(">", s.load("active"), T.i64(0))),
           lambda b: _wait(s, "done"), "join")
    _unlock(s)
    b.atomic_rmw("xchg", s.busy, T.i64(0), "release")


RUN_REPLICAS = "kiln_run_replicas"
_MAIN = ir.FunctionType(T.I32, [T.PTR])
_SETSPECIFIC = ir.FunctionType(T.I32, [T.I32, T.PTR])
_REPLICAS_ENV = ir.LiteralStructType([T.PTR, T.PTR, T.PTR, T.PTR, T.I64])
_RECORD = ir.LiteralStructType([T.I64, T.I64, T.PTR, T.PTR, T.I64, T.I64])   # lower_collectives'



def _emit_run_replicas(module, concurrently):
    task = ir.Function(module, TASK, "kiln.replica.task")
    task.linkage = "internal"
    env, i = task.args
    b = ir.IRBuilder(task.append_basic_block("entry"))
    main, argsets, records, statuses, key = [
        b.load(externs.opaque(b.gep(env, [T.i64(0), T.I32(k)], source_etype=_REPLICAS_ENV)),
               typ=t) for k, t in enumerate(_REPLICAS_ENV.elements)]
    record = externs.opaque(b.gep(records, [i], source_etype=_RECORD))
    _call(b, "kiln_pthread_setspecific", _SETSPECIFIC, [b.trunc(key, T.I32), record])
    status = b.call(_typed(b, main, _MAIN), [b.load(b.gep(argsets, [i], source_etype=T.PTR),
                                                    typ=T.PTR)])
    b.store(status, b.gep(statuses, [i], source_etype=T.I32))
    with b.if_then(b.icmp_signed("!=", status, T.I32(0)), likely=False):
        barrier = b.load(externs.opaque(b.gep(record, [T.i64(0), T.I32(3)],
                                              source_etype=_RECORD)), typ=T.PTR)
        b.atomic_rmw("xchg", b.gep(barrier, [T.i64(2)], source_etype=T.I64), T.i64(1),
                     "release")
    _call(b, "kiln_pthread_setspecific", _SETSPECIFIC, [b.trunc(key, T.I32),
                                                        ir.Constant(T.PTR, None)])
    b.ret_void()

    run = ir.Function(module, ir.FunctionType(T.VOID, [T.PTR] * 4 + [T.I64, T.I64]),
                      RUN_REPLICAS)
    main, argsets, records, statuses, n, key = run.args
    b = ir.IRBuilder(run.append_basic_block("entry"))
    packed = ir.Constant(_REPLICAS_ENV, ir.Undefined)
    for k, value in enumerate((main, argsets, records, statuses, key)):
        packed = b.insert_value(packed, value, k)
    b.call(concurrently, [task, externs.stack_slot(b, packed), n])
    b.ret_void()


def emit(module):
    """Define the pool's state, worker, kiln_parallel_for, kiln_run_concurrently and
    kiln_run_replicas in `module` (the runtime library's)."""
    state = ir.GlobalVariable(module, _STATE, "kiln.pool")
    state.initializer = ir.Constant(_STATE, None)
    state.linkage = "internal"
    state.align = 64
    worker = _worker(module, state)

    parallel_for = ir.Function(module, ir.FunctionType(T.VOID, [T.PTR, T.PTR, T.I64, T.I64]),
                               PARALLEL_FOR)
    body, env, n, grain = parallel_for.args
    b = ir.IRBuilder(parallel_for.append_basic_block("entry"))
    s = _State(b, state)
    grain = b.select(b.icmp_signed("<", grain, T.i64(1)), T.i64(1), grain)
    positive = b.select(b.icmp_signed("<", n, T.i64(0)), T.i64(0), n)
    blocks = b.udiv(b.add(positive, b.sub(grain, T.i64(1))), grain)
    threads = b.load(externs.declare(module, "kiln_num_threads"), typ=T.I64)
    threads = b.select(b.icmp_signed("<", blocks, threads), blocks, threads)
    serial = b.icmp_signed("<=", threads, T.i64(1))
    with b.if_else(serial) as (alone, shared):
        with alone:
            with b.if_then(b.icmp_signed(">", n, T.i64(0))):
                b.call(_typed(b, body, RANGE_BODY), [env, T.i64(0), n])
        with shared:
            _fresh(s)
            got = _acquire(s, wait=False)
            with b.if_else(got) as (pooled, busy):
                with pooled:
                    _post_and_join(s, worker, body, env, T.i64(0), n, grain, blocks,
                                   b.sub(threads, T.i64(1)))
                with busy:   # a job runs (this is inside one, or another thread's)
                    b.call(_typed(b, body, RANGE_BODY), [env, T.i64(0), n])
    b.ret_void()

    concurrently = ir.Function(module, ir.FunctionType(T.VOID, [T.PTR, T.PTR, T.I64]),
                               RUN_CONCURRENTLY)
    task, env, n = concurrently.args
    b = ir.IRBuilder(concurrently.append_basic_block("entry"))
    s = _State(b, state)
    with b.if_then(b.icmp_signed(">", n, T.i64(0))):
        _fresh(s)
        _acquire(s, wait=True)
        _post_and_join(s, worker, task, env, T.i64(1), n, T.i64(1), n, b.sub(n, T.i64(1)))
    b.ret_void()
    _emit_run_replicas(module, concurrently)
