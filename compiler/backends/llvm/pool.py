"""The thread pool of generated code: persistent native workers, written as LLVM IR.

kiln has no C compiler at run time, so the pool is IR that `emit(module)` adds to the runtime
library (rtlib.py; for `kiln compile` libraries, kiln_runtime.o): one pool per process (per
library), shared by every compiled function. Three functions:

- `void kiln_run_tasks(ptr task, ptr env, i64 n, i32 concurrent)`: runs `task(env, i)`
  (`TASK_TYPE`) for every i in [0, n) and returns when all have finished.
  *Dynamic* (concurrent = 0): the calling thread and up to `kiln_num_threads - 1` workers
  claim tasks one at a time from an atomic counter until none is left, so a worker the OS
  does not schedule (a busy machine) holds up at most the task it claimed, and a worker that
  never wakes holds up nothing: the caller runs whatever is left.
  *Concurrent* (concurrent = 1): every task runs at the same time on its own thread (the
  caller runs one, n - 1 workers one each; the pool grows to n - 1 workers, at most
  `MAX_WORKERS`), because the tasks wait for each other (pmap's replicas at barriers). This
  holds whatever the core count: 8 replicas on 2 cores are 8 threads.
- `void kiln_barrier_wait(ptr barrier, i64 parties)`: `BARRIER_BYTES` zeroed bytes owned by the
  caller; each of `parties` threads calling it returns once the last has arrived; reusable
  (a generation counter).
- `void kiln_parallel_for(ptr body, ptr env, i64 n, i64 grain)` (parallel.py's contract):
  [0, n) cut into `CHUNKS_PER_THREAD` chunks per thread, whole multiples of `grain`, run as
  dynamic tasks.

Workers are created on first use (pthread_create, an extern bound at load time), never
joined, and wait for work by spinning `SPIN` times (a `pause`/`yield` each), then sleeping on
a futex word of their own (the raw system call through libc's `syscall`, an extern;
`FUTEX_WAIT_PRIVATE`), so a job wakes just the workers it needs (a pool grown for a
concurrent job does not wake all its threads for every parallel loop); a worker the last job
did not need sleeps at once. A barrier's waiters spin only when there are no more parties
than `kiln_num_threads` (cores): beyond that, a spinning party holds back a core that a late
one needs, so they sleep at once.
A submission publishes the job's fields, then a 64-bit *ticket* (generation << 32 | next
task); claiming a task is a compare-and-swap on the ticket, so a worker that read the fields
of an old generation cannot claim a task of a new one (the submitter closes the old ticket
before rewriting the fields: a seqlock). The caller waits for the last task the same way
(spin, then futex). A second submission while the pool runs a job (a task that runs a
parallel loop, or another thread of the process) does not wait: a dynamic one runs its tasks
on its own thread, a concurrent one starts n - 1 threads of its own for the job and joins
them. A forked child (the pid differs from the pool's) starts a new pool.

Generated code calls `kiln_run_tasks` and `kiln_barrier_wait` through extern globals
(externs.py) like BLAS routines; `emit_run_tasks` and `emit_barrier_wait` emit the calls.
"""
import llvmlite.ir as ir

from . import externs
from . import ltypes as T
from .loops import counted_loop

TASK_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.I64])
RUN_TASKS_TYPE = ir.FunctionType(T.VOID, [TASK_TYPE.as_pointer(), T.PTR, T.I64, T.I32])
BARRIER_WAIT_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.I64])
SYSCALL_TYPE = ir.FunctionType(T.I64, [T.I64], var_arg=True)
RUN_TASKS, BARRIER_WAIT = "kiln_run_tasks", "kiln_barrier_wait"
BARRIER_BYTES = 16          # i32 arrived, i32 generation, i32 sleepers, padding
MAX_WORKERS = 1023          # the caller is the 1024th thread
CHUNKS_PER_THREAD = 4       # parallel_for's chunks: a descheduled thread's share is small
# pause instructions before a wait sleeps: about 5 us (23 ns each on Zen 5), enough to catch
# the next job of a sequence of parallel loops; short, because on a busy machine a spinning
# worker burns the share of the cores the scheduler gives the process (the busy MLP step,
# six runs each at load average 6-7: median 6.5 ms with 200, 11.2 ms with 4000; BENCHMARKS.md).
SPIN = 200
MAX_TASKS = (1 << 31) - 1   # the 32-bit halves of the ticket and the futex words
_LOW = (1 << 32) - 1
_FUTEX_WAIT, _FUTEX_WAKE = 128, 129   # FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE
_WAKE_ALL = (1 << 31) - 1
# Linux system call numbers: (futex, getpid) by the triple's architecture.
_SYSCALLS = {"x86_64": (202, 39), "aarch64": (98, 172), "arm64": (98, 172),
             "riscv64": (98, 172), "ppc64": (221, 20), "ppc64le": (221, 20), "s390x": (238, 20)}
_PTHREAD_CREATE = ir.FunctionType(T.I32, [T.PTR, T.PTR, T.PTR, T.PTR])
_PTHREAD_JOIN = ir.FunctionType(T.I32, [T.I64, T.PTR])
_BODY_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.I64, T.I64])   # parallel.BODY_TYPE
_SLOT = ir.LiteralStructType([T.I32] * 16)   # a worker's futex word, sleeping count, padding


# -- generated code's calls --------------------------------------------------------------------

def emit_run_tasks(builder, task_fn, env, n, concurrent: bool) -> None:
    """Call `task_fn(env, i)` (a function of TASK_TYPE) for every i in [0, n) on the pool and
    return when all have finished; `concurrent`: all n at the same time on n distinct threads
    (see the module docstring)."""
    n = n if isinstance(n, ir.Value) else T.i64(n)
    externs.call(builder, RUN_TASKS, RUN_TASKS_TYPE,
                 [task_fn, env, n, ir.Constant(T.I32, int(bool(concurrent)))])


def emit_barrier_wait(builder, barrier_ptr, parties) -> None:
    """Wait at the barrier at `barrier_ptr` (BARRIER_BYTES zeroed bytes, reusable) until
    `parties` threads have arrived."""
    parties = parties if isinstance(parties, ir.Value) else T.i64(parties)
    externs.call(builder, BARRIER_WAIT, BARRIER_WAIT_TYPE, [barrier_ptr, parties])


# -- the runtime library's definitions ---------------------------------------------------------

class _Pool:
    """The pool's globals in one module and the helpers that emit code over them."""

    def __init__(self, module, triple):
        self.module = module
        arch = triple.split("-")[0]
        if arch not in _SYSCALLS:
            raise NotImplementedError(f"kiln's thread pool knows no futex system call for {arch!r}")
        self.futex_number, self.getpid_number = _SYSCALLS[arch]
        # the spin-wait hint: x86's `pause`, AArch64's `yield` (intrinsics: no inline assembly)
        self.pause_hint = ("llvm.x86.sse2.pause", []) if arch == "x86_64" else \
            ("llvm.aarch64.hint", [ir.Constant(T.I32, 1)]) if arch in ("aarch64", "arm64") else None
        g = self._global
        self.lock = g("lock", T.I32)
        # per worker, a cache line: its futex word and whether it sleeps on it
        self.slots = g("slots", ir.ArrayType(_SLOT, MAX_WORKERS))
        self.finished, self.waiting = g("finished", T.I32), g("waiting", T.I32)
        self.ticket, self.workers, self.owner = g("ticket", T.I64), g("workers", T.I64), g("owner", T.I64)
        self.task, self.env = g("task", T.I64), g("env", T.I64)
        self.n, self.limit, self.concurrent = g("n", T.I64), g("limit", T.I64), g("concurrent", T.I64)

    def _global(self, name, ty):
        variable = ir.GlobalVariable(self.module, ty, f"kiln.pool.{name}")
        variable.linkage = "internal"
        variable.initializer = ir.Constant(ty, None)
        variable.align = 64   # one cache line each: the counters are written by every thread
        return variable

    # small emitters
    def load(self, b, var, order="monotonic"):
        return b.load_atomic(var, order, var.value_type.width // 8)

    def store(self, b, var, value, order="monotonic"):
        b.store_atomic(value, var, order, var.value_type.width // 8)

    def syscall(self, b, *args):
        return externs.call(b, "kiln_syscall", SYSCALL_TYPE, [T.i64(a) if isinstance(a, int) else a
                                                               for a in args])

    def futex_wait(self, b, word, expected):
        self.syscall(b, self.futex_number, b.ptrtoint(word, T.I64), _FUTEX_WAIT,
                     b.zext(expected, T.I64), 0)

    def futex_wake(self, b, word, count):
        self.syscall(b, self.futex_number, b.ptrtoint(word, T.I64), _FUTEX_WAKE, count)

    def pause(self, b):
        if self.pause_hint:
            name, args = self.pause_hint
            hint = self.module.globals.get(name) or ir.Function(
                self.module, ir.FunctionType(T.VOID, [a.type for a in args]), name)
            b.call(hint, args)

    def wait_while(self, b, word, still, sleepers, spins=SPIN):
        """Emit: wait while `still(b)` (an i1 read with seq_cst loads) holds: spin `spins`
        times (an int or an i64 value), then sleep on the futex `word` (whose value changes,
        and whose sleepers are woken, when `still` stops holding), counting this thread in
        `sleepers` while it sleeps."""
        fn = b.function
        spin, sleep, nap, awake, woken, done = (fn.append_basic_block(f"wait.{s}") for s in
                                                ("spin", "sleep", "nap", "awake", "woken", "done"))
        spins = T.i64(spins) if isinstance(spins, int) else spins
        before = b.block
        b.branch(spin)
        b.position_at_end(spin)
        count = b.phi(T.I64)
        count.add_incoming(T.i64(0), before)
        waiting = still(b)
        keep_spinning = b.icmp_signed("<", count, spins)
        spin_more = fn.append_basic_block("wait.pause")
        b.cbranch(waiting, spin_more, done)
        b.position_at_end(spin_more)
        self.pause(b)
        count.add_incoming(b.add(count, T.i64(1)), spin_more)
        b.cbranch(keep_spinning, spin, sleep)
        b.position_at_end(sleep)
        b.atomic_rmw("add", sleepers, ir.Constant(T.I32, 1), "seq_cst")
        b.branch(nap)
        b.position_at_end(nap)
        value = b.load_atomic(word, "seq_cst", 4, typ=T.I32)
        b.cbranch(still(b), awake, woken)
        b.position_at_end(awake)
        self.futex_wait(b, word, value)
        b.branch(nap)
        b.position_at_end(woken)
        b.atomic_rmw("sub", sleepers, ir.Constant(T.I32, 1), "seq_cst")
        b.branch(done)
        b.position_at_end(done)

    def generation(self, b, ticket):
        return b.lshr(ticket, T.i64(32))

    def slot(self, b, worker, field):
        """Worker `worker`'s futex word (field 0) or sleeping count (field 1)."""
        return b.gep(self.slots, [T.i64(0), worker, T.I32(field)])

    def wake_workers(self, b, count):
        """Tell workers [0, count) that a new generation is out, waking those that sleep."""
        def one(b2, w, carried):
            b2.atomic_rmw("add", self.slot(b2, w, 0), ir.Constant(T.I32, 1), "seq_cst")
            asleep = b2.load_atomic(self.slot(b2, w, 1), "seq_cst", 4, typ=T.I32)
            with b2.if_then(b2.icmp_unsigned("!=", asleep, ir.Constant(T.I32, 0))):
                self.futex_wake(b2, self.slot(b2, w, 0), 1)
            return carried
        counted_loop(b, count, one, (), "wake")


def emit(module, triple):
    """Define kiln_run_tasks, kiln_barrier_wait and kiln_parallel_for (external) and the pool's
    internal globals and functions in `module`, for a target `triple`."""
    pool = _Pool(module, triple)
    work = _emit_work(pool)
    worker = _emit_worker(pool, work)
    spawn = _emit_spawn(pool)
    run = _emit_run_tasks(pool, work, worker, spawn)
    _emit_barrier_wait(pool)
    _emit_parallel_for(pool, run)


def _function(module, ty, name, internal=True):
    function = ir.Function(module, ty, name)
    if internal:
        function.linkage = "internal"
    function.attributes.add("nounwind")
    return function


def _emit_work(pool):
    """`void work(i64 generation)`: claim and run tasks of that generation's job until none is
    left (one at most for a concurrent job); the thread finishing the last task wakes a
    sleeping caller."""
    function = _function(pool.module, ir.FunctionType(T.VOID, [T.I64]), "kiln.pool.work")
    generation = function.args[0]
    b = ir.IRBuilder(function.append_basic_block("entry"))
    task = b.inttoptr(pool.load(b, pool.task), TASK_TYPE.as_pointer())
    env = b.inttoptr(pool.load(b, pool.env), T.PTR)
    n = pool.load(b, pool.n)
    concurrent = pool.load(b, pool.concurrent)
    b.fence("acquire")   # the fields were read before the claim that validates them (seqlock)
    claim, try_claim, run, last, wake, after, done = (function.append_basic_block(s) for s in (
        "claim", "try", "run", "last", "wake", "after", "done"))
    b.branch(claim)
    b.position_at_end(claim)
    ticket = pool.load(b, pool.ticket)
    index = b.and_(ticket, T.i64(_LOW))
    current = b.icmp_unsigned("==", pool.generation(b, ticket), generation)
    b.cbranch(b.and_(current, b.icmp_signed("<", index, n)), try_claim, done)
    b.position_at_end(try_claim)
    claimed = b.extract_value(b.cmpxchg(pool.ticket, ticket, b.add(ticket, T.i64(1)), "seq_cst",
                                        "monotonic"), 1)
    b.cbranch(claimed, run, claim)
    b.position_at_end(run)
    b.call(task, [env, index])
    count = b.add(b.atomic_rmw("add", pool.finished, ir.Constant(T.I32, 1), "seq_cst"),
                  ir.Constant(T.I32, 1))
    b.cbranch(b.icmp_unsigned("==", b.zext(count, T.I64), n), last, after)
    b.position_at_end(last)
    b.cbranch(b.icmp_unsigned("!=", pool.load(b, pool.waiting, "seq_cst"), ir.Constant(T.I32, 0)),
              wake, after)
    b.position_at_end(wake)
    pool.futex_wake(b, pool.finished, 1)
    b.branch(after)
    b.position_at_end(after)
    b.cbranch(b.icmp_unsigned("!=", concurrent, T.i64(0)), done, claim)
    b.position_at_end(done)
    b.ret_void()
    return function


def _emit_worker(pool, work):
    """`ptr worker(ptr arg)`, the pthread start routine of a worker: arg = the generation it
    has seen << 16 | its index. It waits for a new generation, joins that job if its index is
    below the job's limit, and waits again, for ever (spinning first only if it joined)."""
    function = _function(pool.module, ir.FunctionType(T.PTR, [T.PTR]), "kiln.pool.worker")
    b = ir.IRBuilder(function.append_basic_block("entry"))
    arg = b.ptrtoint(function.args[0], T.I64)
    index = b.and_(arg, T.i64(0xFFFF))
    first = b.lshr(arg, T.i64(16))
    entry = b.block
    loop = function.append_basic_block("loop")
    b.branch(loop)
    b.position_at_end(loop)
    seen, spins = b.phi(T.I64), b.phi(T.I64)
    seen.add_incoming(first, entry)
    spins.add_incoming(T.i64(SPIN), entry)
    pool.wait_while(b, pool.slot(b, index, 0), lambda b2: b2.icmp_unsigned(
        "==", pool.generation(b2, pool.load(b2, pool.ticket, "seq_cst")), seen),
        pool.slot(b, index, 1), spins)
    generation = pool.generation(b, pool.load(b, pool.ticket, "acquire"))
    joins = b.icmp_unsigned("<", index, pool.load(b, pool.limit))
    with b.if_then(joins):
        b.call(work, [generation])
    seen.add_incoming(generation, b.block)
    # a worker the job did not need (the pool grew for a concurrent job) sleeps at once
    spins.add_incoming(b.select(joins, T.i64(SPIN), T.i64(0)), b.block)
    b.branch(loop)
    return function


def _emit_spawn(pool):
    """`void spawn(ptr task, ptr env, i64 n)`: a concurrent job on n - 1 threads of its own
    (the pool is busy): start them, run task 0 here, join them. A task whose thread cannot be
    started runs here after task 0."""
    module = pool.module
    slot = ir.LiteralStructType([T.PTR, T.PTR, T.I64])   # task, env, index
    start = _function(module, ir.FunctionType(T.PTR, [T.PTR]), "kiln.pool.spawned")
    b = ir.IRBuilder(start.append_basic_block("entry"))
    fields = [b.load(b.gep(start.args[0], [T.I32(0), T.I32(k)], source_etype=slot), typ=t)
              for k, t in enumerate((TASK_TYPE.as_pointer(), T.PTR, T.I64))]
    b.call(fields[0], fields[1:])
    b.ret(ir.Constant(T.PTR, None))

    function = _function(module, ir.FunctionType(T.VOID, [TASK_TYPE.as_pointer(), T.PTR, T.I64]),
                         "kiln.pool.spawn")
    task, env, n = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    slots, tids, started = (externs.opaque(b.alloca(t, n)) for t in (slot, T.I64, T.I8))

    def create(b2, i, carried):
        i = b2.add(i, T.i64(1))
        at = b2.gep(slots, [i], source_etype=slot)
        for k, value in enumerate((task, env, i)):
            b2.store(value, b2.gep(at, [T.I32(0), T.I32(k)], source_etype=slot))
        rc = externs.call(b2, "kiln_pthread_create", _PTHREAD_CREATE, [
            b2.gep(tids, [i], source_etype=T.I64), ir.Constant(T.PTR, None), start, at])
        b2.store(b2.zext(b2.icmp_signed("==", rc, T.I32(0)), T.I8),
                 b2.gep(started, [i], source_etype=T.I8))
        return carried

    def finish(b2, i, carried):
        i = b2.add(i, T.i64(1))
        flag = b2.trunc(b2.load(b2.gep(started, [i], source_etype=T.I8), typ=T.I8), T.I1)
        with b2.if_else(flag) as (joined, here):
            with joined:
                tid = b2.load(b2.gep(tids, [i], source_etype=T.I64), typ=T.I64)
                externs.call(b2, "kiln_pthread_join", _PTHREAD_JOIN, [tid, ir.Constant(T.PTR, None)])
            with here:
                b2.call(task, [env, i])
        return carried
    others = b.sub(n, T.i64(1))
    counted_loop(b, others, create, (), "create")
    b.call(task, [env, T.i64(0)])
    counted_loop(b, others, finish, (), "join")
    b.ret_void()
    return function


def _emit_run_tasks(pool, work, worker, spawn):
    module = pool.module
    function = _function(module, RUN_TASKS_TYPE, RUN_TASKS, internal=False)
    task, env, n, concurrent = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    serial, pooled, spawned, locked, leave = (function.append_basic_block(s) for s in (
        "serial", "pooled", "spawned", "locked", "leave"))
    concurrent = b.icmp_unsigned("!=", concurrent, ir.Constant(T.I32, 0))
    threads = b.load(externs.declare(module, "kiln_num_threads"))
    # one task, one thread wanted, or more tasks than the ticket counts: the calling thread
    alone = b.or_(b.icmp_signed("<=", threads, T.i64(1)), b.icmp_signed(">", n, T.i64(MAX_TASKS)))
    alone = b.or_(b.icmp_signed("<=", n, T.i64(1)), b.and_(b.not_(concurrent), alone))
    with b.if_then(alone, likely=False):
        b.branch(serial)
    with b.if_then(b.and_(concurrent, b.icmp_signed(">", n, T.i64(MAX_WORKERS + 1))), likely=False):
        b.branch(spawned)   # more threads than the pool may have
    acquired = b.extract_value(b.cmpxchg(pool.lock, ir.Constant(T.I32, 0), ir.Constant(T.I32, 1),
                                         "acquire", "monotonic"), 1)
    busy = function.append_basic_block("busy")
    b.cbranch(acquired, locked, busy)
    b.position_at_end(busy)
    b.cbranch(concurrent, spawned, serial)

    b.position_at_end(locked)
    # a forked child has the parent's globals but none of its threads
    workers = pool.load(b, pool.workers)
    with b.if_then(b.icmp_signed(">", workers, T.i64(0))):
        pid = pool.syscall(b, pool.getpid_number)
        with b.if_then(b.icmp_unsigned("!=", pid, pool.load(b, pool.owner))):
            def forget(b2, w, carried):
                b2.atomic_rmw("xchg", pool.slot(b2, w, 1), ir.Constant(T.I32, 0), "monotonic")
                return carried
            counted_loop(b, workers, forget, (), "forget")
            pool.store(b, pool.workers, T.i64(0))
    want = b.select(concurrent, b.sub(n, T.i64(1)),
                    b.sub(b.select(b.icmp_signed("<", threads, n), threads, n), T.i64(1)))
    have = _emit_grow(pool, b, worker, want)
    short = b.icmp_signed("<", have, want)
    to_spawn = function.append_basic_block("grow_failed")
    b.cbranch(b.or_(b.and_(concurrent, short), b.icmp_signed("<=", have, T.i64(0))), to_spawn, pooled)
    b.position_at_end(to_spawn)
    pool.store(b, pool.lock, ir.Constant(T.I32, 0), "release")
    b.cbranch(concurrent, spawned, serial)

    b.position_at_end(pooled)
    participants = b.select(short, have, want)
    ticket = pool.load(b, pool.ticket)
    generation = pool.generation(b, ticket)
    # close the old generation's ticket, then rewrite the fields, then open the new one
    pool.store(b, pool.ticket, b.or_(b.shl(generation, T.i64(32)), T.i64(_LOW)), "seq_cst")
    b.fence("release")
    for var, value in ((pool.task, b.ptrtoint(task, T.I64)), (pool.env, b.ptrtoint(env, T.I64)),
                       (pool.n, n), (pool.limit, participants),
                       (pool.concurrent, b.zext(concurrent, T.I64))):
        pool.store(b, var, value)
    pool.store(b, pool.finished, ir.Constant(T.I32, 0))
    fresh = b.and_(b.add(generation, T.i64(1)), T.i64(_LOW))
    pool.store(b, pool.ticket, b.shl(fresh, T.i64(32)), "seq_cst")
    pool.wake_workers(b, participants)
    b.call(work, [fresh])
    n32 = b.trunc(n, T.I32)
    pool.wait_while(b, pool.finished, lambda b2: b2.icmp_unsigned(
        "!=", pool.load(b2, pool.finished, "seq_cst"), n32), pool.waiting)
    pool.store(b, pool.lock, ir.Constant(T.I32, 0), "release")
    b.branch(leave)

    b.position_at_end(spawned)
    b.call(spawn, [task, env, n])
    b.branch(leave)

    b.position_at_end(serial)

    def one(b2, i, carried):
        b2.call(task, [env, i])
        return carried
    counted_loop(b, n, one, (), "task")
    b.branch(leave)
    b.position_at_end(leave)
    b.ret_void()
    return function


def _emit_grow(pool, b, worker, want):
    """Create workers until there are `want` (at most MAX_WORKERS) or one cannot be created;
    the count there is then. The caller holds the pool's lock."""
    before = pool.load(b, pool.workers)
    with b.if_then(b.icmp_signed("==", before, T.i64(0))):
        pool.store(b, pool.owner, pool.syscall(b, pool.getpid_number))
    seen = pool.generation(b, pool.load(b, pool.ticket))
    tid = externs.opaque(b.alloca(T.I64))
    want = b.select(b.icmp_signed(">", want, T.i64(MAX_WORKERS)), T.i64(MAX_WORKERS), want)
    fn = b.function
    head, body, created, done = (fn.append_basic_block(f"grow.{s}") for s in
                                 ("head", "body", "created", "done"))
    entry = b.block
    b.branch(head)
    b.position_at_end(head)
    count = b.phi(T.I64)
    count.add_incoming(before, entry)
    b.cbranch(b.icmp_signed("<", count, want), body, done)
    b.position_at_end(body)
    arg = b.inttoptr(b.or_(b.shl(seen, T.i64(16)), count), T.PTR)
    rc = externs.call(b, "kiln_pthread_create", _PTHREAD_CREATE,
                      [tid, ir.Constant(T.PTR, None), worker, arg])
    b.cbranch(b.icmp_signed("==", rc, T.I32(0)), created, done)
    b.position_at_end(created)
    count.add_incoming(b.add(count, T.i64(1)), created)
    b.branch(head)
    b.position_at_end(done)
    final = b.phi(T.I64)
    final.add_incoming(count, head)
    final.add_incoming(count, body)
    pool.store(b, pool.workers, final)
    return final


def _emit_barrier_wait(pool):
    function = _function(pool.module, BARRIER_WAIT_TYPE, BARRIER_WAIT, internal=False)
    barrier, parties = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    arrived, generation, sleepers = (b.gep(barrier, [T.i64(k)], source_etype=T.I32) for k in range(3))
    with b.if_then(b.icmp_signed("<=", parties, T.i64(1)), likely=False):
        b.ret_void()
    old = b.load_atomic(generation, "acquire", 4, typ=T.I32)
    count = b.add(b.atomic_rmw("add", arrived, ir.Constant(T.I32, 1), "seq_cst"),
                  ir.Constant(T.I32, 1))
    with b.if_else(b.icmp_unsigned("==", b.zext(count, T.I64), parties)) as (last, other):
        with last:
            b.atomic_rmw("xchg", arrived, ir.Constant(T.I32, 0), "monotonic")
            b.atomic_rmw("add", generation, ir.Constant(T.I32, 1), "seq_cst")
            asleep = b.load_atomic(sleepers, "seq_cst", 4, typ=T.I32)
            with b.if_then(b.icmp_unsigned("!=", asleep, ir.Constant(T.I32, 0))):
                pool.futex_wake(b, generation, _WAKE_ALL)
        with other:   # more parties than threads (cores): a spinning party holds a core back
            threads = b.load(externs.declare(pool.module, "kiln_num_threads"))
            spins = b.select(b.icmp_signed("<=", parties, threads), T.i64(SPIN), T.i64(0))
            pool.wait_while(b, generation, lambda b2: b2.icmp_unsigned(
                "==", b2.load_atomic(generation, "seq_cst", 4, typ=T.I32), old), sleepers, spins)
    b.ret_void()


def _emit_parallel_for(pool, run):
    """`void kiln_parallel_for(ptr body, ptr env, i64 n, i64 grain)`: [0, n) in chunks of whole
    multiples of `grain`, about CHUNKS_PER_THREAD per thread, as dynamic tasks."""
    module = pool.module
    state = ir.LiteralStructType([T.PTR, T.PTR, T.I64, T.I64])   # body, env, n, per chunk
    chunk = _function(module, TASK_TYPE, "kiln.pool.chunk")
    b = ir.IRBuilder(chunk.append_basic_block("entry"))
    at, index = chunk.args
    body, env, n, per = (b.load(b.gep(at, [T.I32(0), T.I32(k)], source_etype=state), typ=t)
                         for k, t in enumerate((_BODY_TYPE.as_pointer(), T.PTR, T.I64, T.I64)))
    lo = b.mul(index, per)
    hi = b.add(lo, per)
    b.call(body, [env, lo, b.select(b.icmp_signed("<", hi, n), hi, n)])
    b.ret_void()

    function = _function(module, ir.FunctionType(T.VOID, [_BODY_TYPE.as_pointer(), T.PTR, T.I64, T.I64]),
                         "kiln_parallel_for", internal=False)
    body, env, n, grain = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    with b.if_then(b.icmp_signed("<=", n, T.i64(0)), likely=False):
        b.ret_void()
    grain = b.select(b.icmp_signed("<", grain, T.i64(1)), T.i64(1), grain)
    blocks = b.udiv(b.add(n, b.sub(grain, T.i64(1))), grain)
    threads = b.load(externs.declare(module, "kiln_num_threads"))
    chunks = b.mul(threads, T.i64(CHUNKS_PER_THREAD))
    chunks = b.select(b.icmp_signed("<", blocks, chunks), blocks, chunks)
    with b.if_else(b.or_(b.icmp_signed("<=", threads, T.i64(1)),
                         b.icmp_signed("<=", chunks, T.i64(1)))) as (alone, split):
        with alone:
            b.call(body, [env, T.i64(0), n])
        with split:
            per_blocks = b.udiv(b.add(blocks, b.sub(chunks, T.i64(1))), chunks)
            chunks = b.udiv(b.add(blocks, b.sub(per_blocks, T.i64(1))), per_blocks)
            packed = ir.Constant(state, ir.Undefined)
            for k, value in enumerate((body, env, n, b.mul(per_blocks, grain))):
                packed = b.insert_value(packed, value, k)
            b.call(run, [chunk, externs.stack_slot(b, packed), chunks, ir.Constant(T.I32, 0)])
    b.ret_void()
