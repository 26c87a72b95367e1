"""The threads `pmap` and `shard_map` run their replicas on: started once per process and
kept, and `run_replicas`, how a call runs its replicas.

`run(tasks)` runs every zero-argument callable of `tasks` at the same time, each on its own
thread (the caller runs the first), and returns their results in order. All of them must run
at once because replicas wait for each other in their collectives; so the pool grows to
`len(tasks) - 1` workers on first need and keeps them (no thread starts per call). A task that
raises calls `abort()` of the `on_error` object given (the replica group's barrier), so the
others stop instead of waiting for it, and `run` re-raises the first error. Compiled replicas
release the GIL while they run, so they run in parallel on the cores.
"""
import queue
import threading
import time

from .compiler.primitives.replicas import running_as
from .execution_guards import check_execution, check_thread

PARALLEL_ABOVE = 50e-6   # seconds per replica above which replicas without collectives go parallel

_LOCK = threading.Lock()
_WORKERS = []


class _Worker:
    def __init__(self):
        self.inbox = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name=f"kiln-replica-{len(_WORKERS) + 1}",
                                       daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            task, done = self.inbox.get()
            done(task)


def _workers(n):
    with _LOCK:
        while len(_WORKERS) < n:
            _WORKERS.append(_Worker())
        return _WORKERS[:n]


def run(tasks, on_error=None):
    """The results of `tasks`, run at once on distinct threads (see the module docstring).
    Calls from several threads at once are serialised: each needs all the workers."""
    with _RUN_LOCK:
        results = [None] * len(tasks)
        errors = []
        finished = threading.Semaphore(0)

        def runner(i):
            def done(task):
                try:
                    results[i] = task()
                except BaseException as e:   # noqa: BLE001 - re-raised by the caller below
                    errors.append((i, e))
                    if on_error is not None:
                        on_error()
                finally:
                    finished.release()
            return done

        for i, (worker, task) in enumerate(zip(_workers(len(tasks) - 1), tasks[1:]), 1):
            worker.inbox.put((task, runner(i)))
        if tasks:
            runner(0)(tasks[0])
        for _ in tasks:
            finished.acquire()
    if errors:
        first = min(errors, key=lambda e: (_secondary(e[1]), e[0]))[1]
        raise first
    return results


def _secondary(error):
    """Errors caused by another replica's failure (a broken barrier) sort last."""
    return isinstance(error, threading.BrokenBarrierError)


_RUN_LOCK = threading.RLock()


def run_replicas(entry, group, args_of):
    """Each replica's outputs: `entry.executable(*args_of(i))` for every replica `i` of
    `group`. With collectives (`entry.parallel` True) they run all at once, each inside
    `running_as(group, i)`; without, one after the other on the calling thread while a replica
    takes under PARALLEL_ABOVE seconds (`entry.parallel` None: measured on this call) or its
    compiled code hands work to the thread pool itself (`uses_pool`: parallel loops, panels
    of large products, which already spread one replica over the cores, and on a busy
    machine do not need every replica's thread to get a core at once), and at once
    otherwise: compiled code in one call into its runtime library (kiln_run_replicas),
    the reference backend on this module's threads."""
    size = group.size
    what = "a pmap or shard_map computation"
    check_execution(what)
    if group.processes > 1:
        check_thread(what)
    if not entry.parallel:   # no collectives: the replicas need not meet
        start = time.perf_counter()
        outs = [entry.executable(*args_of(i)) for i in range(size)]
        if entry.parallel is None:   # code that uses the pool already spreads over the cores
            entry.parallel = (time.perf_counter() - start) > PARALLEL_ABOVE * size and \
                not getattr(entry.executable, "uses_pool", False)
        return outs

    if size == 1:   # one replica: on this thread, its loops free to use the thread pool
        with running_as(group, 0):
            return [entry.executable(*args_of(0))]
    native = getattr(entry.executable, "run_replicas", None)
    if native is not None:   # compiled code: its runtime library runs the replicas
        return native([args_of(i) for i in range(size)], group)

    def replica(i):
        def task():
            with running_as(group, i):
                return entry.executable(*args_of(i))
        return task
    return run([replica(i) for i in range(size)], on_error=group.abort)
