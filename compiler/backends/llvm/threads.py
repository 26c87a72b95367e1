"""BLAS threads that follow the cores other processes leave free.

OpenBLAS runs a large product on one thread per core. On a machine whose cores other
processes hold, a worker waits for a core while the calling thread spins waiting for the
worker: the MLP 784-512-512-10 SGD step took 95-136 ms beside two busy processes instead of
the 17 ms it takes on one thread. `watch()` starts, once per process and only when generated
code binds a BLAS routine, a daemon thread that every `PERIOD` seconds measures the CPU time
other processes used (the machine's busy time in /proc/stat less this process's own,
`os.times`) and sets OpenBLAS's thread count to the cores they left free (`threads_for`),
at least 1 and at most the cap. A call pays nothing for it: the count changes only when the
load does. OpenBLAS itself still runs products below its own size threshold (about 64^3
multiply-adds) on the calling thread.

The cap is `KILN_NUM_THREADS` when set, else the cores this process may run on. A user who
sets `OPENBLAS_NUM_THREADS` (or `GOTO_NUM_THREADS`, `OMP_NUM_THREADS`) has pinned the count
themselves and is left alone, as is a BLAS without `openblas_set_num_threads`, a machine
without /proc/stat, and a cap of one core (set once, nothing to watch).
"""

from __future__ import annotations

import os
import threading
import time

from . import blas_lookup, parallel

PERIOD = 0.2
PINNING_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
_STARTED: dict[int, threading.Thread | None] = {}   # pid -> its watcher (None: not watching)
_LOCK = threading.Lock()


def threads_for(cores: int, busy_elsewhere: float, cap: int) -> int:
    """BLAS threads for `cores` usable cores of which other processes keep `busy_elsewhere`
    busy (in cores, averaged over the last period): the free cores, rounded, from 1 to cap."""
    return max(1, min(cap, int(cores - busy_elsewhere + 0.5)))


def _machine_busy() -> float | None:
    """Seconds of CPU time the whole machine has spent busy (not idle or waiting for I/O),
    over all cores, from /proc/stat; None where unreadable."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_busy() -> float:
    t = os.times()
    return t.user + t.system


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
        if cap <= 1 or _machine_busy() is None:
            setter(cap)
            return
        thread = threading.Thread(target=_follow, args=(setter, cap), name="kiln-blas-threads",
                                  daemon=True)
        _STARTED[pid] = thread
        thread.start()


def _follow(setter, cap: int) -> None:
    cores = len(os.sched_getaffinity(0))
    current = None
    machine, own, clock = _machine_busy(), _own_busy(), time.monotonic()
    while True:
        time.sleep(PERIOD)
        machine2, own2, clock2 = _machine_busy(), _own_busy(), time.monotonic()
        if machine2 is None:
            return
        elsewhere = max(0.0, (machine2 - machine) - (own2 - own)) / max(clock2 - clock, 1e-3)
        wanted = threads_for(cores, elsewhere, cap)
        if wanted != current:
            setter(wanted)
            current = wanted
        machine, own, clock = machine2, own2, clock2


def watched() -> bool:
    """Whether this process runs a watcher (for tests and `kiln doctor`)."""
    return _STARTED.get(os.getpid()) is not None
