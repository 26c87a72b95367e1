"""The replica records compiled collectives read (lower_collectives.py), and how a thread
enters one.

A `ReplicaGroup` (compiler/primitives/replicas.py) gets, on the first compiled collective of a
call, one native block (`NativeGroup`, kept in `group.backend_state["llvm"]`): a record per
replica `{index, size, slots, barrier, process, status}`, the shared table of `size` slot pointers, and the
barrier handle. Before a replica's compiled code runs, `enter()` makes the calling thread's
record current with `pthread_setspecific` on this process's key (`replica_key()`, created
once), which generated code reads back with `pthread_getspecific` (externs
`kiln_replica_key`, `kiln_pthread_getspecific`).

The barrier is three words per group (arrived, generation, broken: lower_collectives.py);
`abort()` sets `broken` when a replica fails, so the others finish instead of waiting.
"""
import ctypes
import threading

import llvmlite.ir as ir
import numpy as np

from ...primitives.replicas import current_frame

# A replica record as generated code reads it: index, size, slots, barrier, process, status.
RECORD = ir.LiteralStructType([ir.IntType(64), ir.IntType(64), ir.PointerType(),
                               ir.PointerType(), ir.IntType(64), ir.IntType(64)])
BARRIER_FIELD, STATUS_FIELD = 3, 5

_LIBC = ctypes.CDLL(None)
_KEY = None
_KEY_LOCK = threading.Lock()


def replica_key() -> int:
    """This process's pthread key for the current replica record (created on first use)."""
    global _KEY
    with _KEY_LOCK:
        if _KEY is None:
            key = ctypes.c_uint(0)
            if _LIBC.pthread_key_create(ctypes.byref(key), None) != 0:
                raise RuntimeError("kiln: pthread_key_create failed (no key for pmap's replicas)")
            _KEY = key.value
    return _KEY


def getspecific_address() -> int:
    return ctypes.cast(_LIBC.pthread_getspecific, ctypes.c_void_p).value


class NativeGroup:
    """The native records of one ReplicaGroup (see the module docstring)."""

    def __init__(self, group):
        self.slots = np.zeros(group.size, np.uint64)
        self.barrier = np.zeros(3, np.int64)
        self.records = np.zeros((group.size, len(RECORD.elements)), np.uint64)
        self.records[:, 0] = np.arange(group.size)
        self.records[:, 1] = group.size
        self.records[:, 2] = self.slots.ctypes.data
        self.records[:, 3] = self.barrier.ctypes.data
        self.records[:, 4] = group.process
        # [:, STATUS_FIELD]: the status of a cross-process step (mpi_engine), 0 when it succeeded

    def status(self):
        """The first non-zero status a replica's cross-process step stored, else 0."""
        statuses = self.records[:, STATUS_FIELD]
        failed = statuses[statuses != 0]
        return int(failed[0]) if failed.size else 0

    def record(self, index):
        return self.records.ctypes.data + index * self.records.strides[0]

    def abort(self):
        self.barrier[2] = 1


def native_group(group):
    """The NativeGroup of ReplicaGroup `group` (made on first use)."""
    native = group.backend_state.get("llvm")
    if native is None:
        native = group.backend_state.setdefault("llvm", NativeGroup(group))
    return native


def enter():
    """Make this thread's replica (pmap's `running_as`) current for compiled code."""
    frame = current_frame()
    if frame is None:
        _LIBC.pthread_setspecific(replica_key(), None)
        return
    group, index = frame
    native = native_group(group)
    _LIBC.pthread_setspecific(ctypes.c_uint(replica_key()), ctypes.c_void_p(native.record(index)))
