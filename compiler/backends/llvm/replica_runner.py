"""`kiln_run_replicas`: pmap's replicas of one compiled function run from one native call, in
the runtime library (rtlib.py) on the thread pool's concurrent mode (pool.py).

    void kiln_run_replicas(ptr main, ptr argsets, ptr records, ptr statuses, i64 n, i64 key)

Replica i runs on its own thread (kiln_run_tasks, concurrent: all n at once, since they meet at
barriers): it makes &records[i] (an array of replica records: lower_collectives.py) its thread's
record (pthread_setspecific on `key`), runs main(argsets[i]) (an entry point `kiln_main` and its
argument array), stores the status in statuses[i], and clears the record. A replica whose status
is not 0 sets the `broken` word of its group's barrier, so the others finish instead of waiting
for it (executable.Executable.run_replicas raises its error).

    i32 kiln_run_in_turn(ptr main, ptr table, i64 n, i64 k)

runs the replicas of a function without collectives one after the other on the calling thread:
main(&table[i * k]) for i in 0..n (table: n argument arrays of k pointers each, one after the
other), stopping at the first non-zero status, which it returns (0 when every replica
succeeded). pmap's fast path (stacked.py) calls it for small replicas, which are faster run in
turn than handed to other threads.
"""
import llvmlite.ir as ir

from . import externs
from . import ltypes as T
from .pool import TASK_TYPE, RUN_TASKS
from .replica_context import RECORD as _RECORD, BARRIER_FIELD

RUN_REPLICAS = "kiln_run_replicas"
RUN_IN_TURN = "kiln_run_in_turn"
_MAIN = ir.FunctionType(T.I32, [T.PTR])
_SETSPECIFIC = ir.FunctionType(T.I32, [T.I32, T.PTR])
_ENV = ir.LiteralStructType([T.PTR, T.PTR, T.PTR, T.PTR, T.I64])


def _field(b, base, struct, k):
    return externs.opaque(b.gep(base, [T.i64(0), T.I32(k)], source_etype=struct))


def emit(module):
    """Define kiln_run_replicas in `module`, beside the pool's kiln_run_tasks."""
    task = ir.Function(module, TASK_TYPE, "kiln.replica.task")
    task.linkage = "internal"
    env, i = task.args
    b = ir.IRBuilder(task.append_basic_block("entry"))
    main, argsets, records, statuses, key = [b.load(_field(b, env, _ENV, k), typ=t)
                                             for k, t in enumerate(_ENV.elements)]
    record = externs.opaque(b.gep(records, [i], source_etype=_RECORD))
    key = b.trunc(key, T.I32)
    externs.call(b, "kiln_pthread_setspecific", _SETSPECIFIC, [key, record])
    entry = b.load(externs.stack_slot(b, main), typ=_MAIN.as_pointer())
    status = b.call(entry, [b.load(b.gep(argsets, [i], source_etype=T.PTR), typ=T.PTR)])
    b.store(status, b.gep(statuses, [i], source_etype=T.I32))
    with b.if_then(b.icmp_signed("!=", status, T.I32(0)), likely=False):
        barrier = b.load(_field(b, record, _RECORD, BARRIER_FIELD), typ=T.PTR)
        b.atomic_rmw("xchg", b.gep(barrier, [T.i64(2)], source_etype=T.I64), T.i64(1),
                     "release")
    externs.call(b, "kiln_pthread_setspecific", _SETSPECIFIC, [key, ir.Constant(T.PTR, None)])
    b.ret_void()

    run = ir.Function(module, ir.FunctionType(T.VOID, [T.PTR] * 4 + [T.I64, T.I64]),
                      RUN_REPLICAS)
    main, argsets, records, statuses, n, key = run.args
    b = ir.IRBuilder(run.append_basic_block("entry"))
    packed = ir.Constant(_ENV, ir.Undefined)
    for k, value in enumerate((main, argsets, records, statuses, key)):
        packed = b.insert_value(packed, value, k)
    b.call(module.globals[RUN_TASKS], [task, externs.stack_slot(b, packed), n,
                                       ir.Constant(T.I32, 1)])
    b.ret_void()


def emit_in_turn(module):
    """Define kiln_run_in_turn in `module` (see the module docstring)."""
    run = ir.Function(module, ir.FunctionType(T.I32, [T.PTR, T.PTR, T.I64, T.I64]), RUN_IN_TURN)
    main, table, n, k = run.args
    b = ir.IRBuilder(run.append_basic_block("entry"))
    head, body, failed, done = (run.append_basic_block(x) for x in ("head", "body", "failed",
                                                                      "done"))
    entry = b.load(externs.stack_slot(b, main), typ=_MAIN.as_pointer())   # typed, for the call
    start = b.block
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(T.I64, name="i")
    i.add_incoming(T.i64(0), start)
    b.cbranch(b.icmp_signed("<", i, n), body, done)
    b.position_at_end(body)
    args = b.gep(table, [b.mul(i, k)], source_etype=T.PTR)
    status = b.call(entry, [args])
    i.add_incoming(b.add(i, T.i64(1)), body)
    b.cbranch(b.icmp_signed("!=", status, T.I32(0)), failed, head)
    b.position_at_end(failed)
    b.ret(status)
    b.position_at_end(done)
    b.ret(T.I32(0))
