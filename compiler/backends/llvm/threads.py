"""BLAS threads that follow the load other processes put on the cores.

OpenBLAS cuts a large product into one static share per thread of its pool (one per core). On a
machine whose cores other processes hold, a share whose thread gets no core holds up the whole
product while the other threads spin waiting for it. Measured on 2 cores, the MLP 784-512-512-10
SGD step (median ms, alternating in one process, repeated runs on a shared machine; JAX 2-4 ms
throughout):

| competing spinning processes | OpenBLAS on 2 threads | on 1 thread |
|---|---:|---:|
| 0 | 1.75-2.2 | 3.2 |
| 2 | 1.9-10.3 | 7.3-11.6 |
| 3 | 10.2 | 7.4 |
| 4 | 10.0-204 | 11.3-11.5 |

Two threads beside two spinners were as fast as JAX in one run and 136 ms in another (the
`benchmarks/small.py` row); one thread never collapsed. So the pool takes only the cores no
other process wants. `watch()` starts, once per process and only when generated code binds a BLAS
routine, a daemon thread that samples every `SAMPLE` seconds the threads runnable on the machine
(/proc/loadavg) less this process's own (/proc/self/task/*/stat), and every `SAMPLES` samples
sets OpenBLAS's thread count from their mean (`threads_for`): the cores less the other runnable
threads, at least 1, at most the cap. A call pays nothing for it: the count changes only when the load does.
OpenBLAS itself still runs products below its own size threshold (about 64^3 multiply-adds) on
the calling thread, and kiln's products below 2^19 multiply-adds call no BLAS at all.

While `shared_by(k)` is active (pmap running k replicas at once, each calling BLAS), the count
is divided among them: each product gets `max(1, count // k)` threads, so k replicas on as many
cores do not each start a full pool (measured: 2 replicas of a 1024^3 float32 matmul chain on 2
cores run 1.95x faster than one after the other with 1 thread each, and no faster than one
device with 2 threads each).

The cap is `KILN_NUM_THREADS` when set, else the cores this process may run on. A user who
sets `OPENBLAS_NUM_THREADS` (or `GOTO_NUM_THREADS`, `OMP_NUM_THREADS`) has pinned the count
themselves and is left alone, as is a BLAS without `openblas_set_num_threads`, a machine
without /proc/loadavg, and a cap of one core (set once, nothing to watch).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

from . import blas_lookup, parallel

SAMPLE = 0.05
SAMPLES = 4
PERIOD = SAMPLE * SAMPLES   # seconds between decisions
PINNING_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
_STARTED: dict[int, threading.Thread | None] = {}   # pid -> its watcher (None: not watching)
_LOCK = threading.Lock()
_SHARING = [1]     # replicas calling BLAS at once (shared_by)
_CHOSEN = [None]   # the count the watcher (or the single decision) last chose


def threads_for(cores: int, others: float, cap: int) -> int:
    """BLAS threads for `cores` usable cores while other processes keep `others` threads
    runnable (a mean over the last period): see the module docstring."""
    return max(1, min(cap, cores - round(others)))


def _runnable() -> int | None:
    """Threads runnable on the machine right now (the calling one included), or None where
    /proc/loadavg cannot be read."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def _own_runnable() -> int:
    """Threads of this process runnable right now (the calling one included)."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as f:
                count += f.read().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, IndexError):
            continue
    return count


def _cap() -> int:
    return min(parallel.num_threads(), len(os.sched_getaffinity(0)))


def watch() -> None:
    """Start this process's watcher if BLAS threads are kiln's to set (see the module
    docstring); later calls, and calls in a process that already decided, do nothing."""
    pid = os.getpid()
    if pid in _STARTED:
        return
    with _LOCK:
        if pid in _STARTED:
            return
        _STARTED[pid] = None
        if any(os.environ.get(v, "").strip() for v in PINNING_VARIABLES):
            return
        setter = blas_lookup.thread_setter()
        if setter is None:
            return
        cap = _cap()
        if cap <= 1 or _runnable() is None:
            _CHOSEN[0] = cap
            setter(cap)
            return
        thread = threading.Thread(target=_follow, args=(setter, cap), name="kiln-blas-threads",
                                  daemon=True)
        _STARTED[pid] = thread
        thread.start()


def _follow(setter, cap: int) -> None:
    cores = len(os.sched_getaffinity(0))
    current = None
    while True:
        others = []
        for _ in range(SAMPLES):
            time.sleep(SAMPLE)
            running = _runnable()
            if running is not None:   # a failed read skips the sample
                others.append(max(0, running - _own_runnable()))
        if not others:
            continue
        wanted = threads_for(cores, sum(others) / len(others), cap)
        if wanted != current:
            _CHOSEN[0] = current = wanted
            setter(max(1, wanted // _SHARING[0]))


@contextlib.contextmanager
def shared_by(replicas: int):
    """BLAS threads divided among `replicas` callers for the duration of the block (see the
    module docstring); nothing to do where kiln does not set the count."""
    setter = blas_lookup.thread_setter() if os.getpid() in _STARTED else None
    if setter is None or _CHOSEN[0] is None or replicas <= 1:
        yield
        return
    with _LOCK:
        _SHARING[0] = replicas
        setter(max(1, _CHOSEN[0] // replicas))
    try:
        yield
    finally:
        with _LOCK:
            _SHARING[0] = 1
            setter(_CHOSEN[0])


def watched() -> bool:
    """Whether this process runs a watcher (for tests and `kiln doctor`)."""
    return _STARTED.get(os.getpid()) is not None
