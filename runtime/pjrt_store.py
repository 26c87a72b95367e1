"""A key-value store shared by the processes of an MPI run (kiln.distributed), for the key-value
callbacks of PJRT_Client_Create (compiler/backends/pjrt/kv_store.py).

    store = shared_store()     # made once per process, by every process (it makes communicators)
    store.put(b"key", b"value"); store.get(b"key", timeout=10.0); store.try_get(b"key")

Each key belongs to one process (crc32 of the key modulo the process count), which holds its
value. `shared_store()` duplicates kiln's communicator twice (requests, replies: a collective,
so every process makes the store, in the same order as its other communicators) and starts a
daemon thread that serves the requests for this process's keys: it probes the requests'
communicator every millisecond and answers a put (after storing it), a try-get (the value or
absent) and a get (the value, at once or when a put brings it, or absent once the get's
timeout has passed). A request from another thread is a message to the owner, tagged with its
kind, carrying a reply tag unique among this process's waiting requests; the requester polls
for the reply on the replies' communicator (matched probes: any number of threads may wait at
once). `get` raises TimeoutError when the owner answers that the key did not come in time,
and every request also gives up (DistributedTimeoutError) after kiln.distributed's timeout
beyond its own, for an owner that never answers (a process that died, or never made its
store). The thread is stopped before MPI is finalised (at exit).
"""
import atexit
import itertools
import threading
import time
import zlib

from . import distributed

_PUT, _GET, _TRY_GET = 1, 2, 3   # the requests' tags
_REPLY_TAGS = range(16, 32768)   # (32767: MPI's least upper bound of a tag)
_STORE = []


def shared_store():
    """This process's MpiStore, made on first use (see the module docstring)."""
    if not _STORE:
        _STORE.append(MpiStore(distributed.communicator()))
    return _STORE[0]


class MpiStore:
    """See the module docstring; `comm` is kiln's communicator (duplicated here)."""

    def __init__(self, comm):
        from mpi4py import MPI
        self._mpi = MPI
        self.requests, self.replies = (self._duplicate(comm) for _ in range(2))
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._values = {}    # this process's keys
        self._waiting = {}   # key -> [(source, reply tag, deadline)] of gets not answered yet
        self._tags = itertools.cycle(_REPLY_TAGS)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kiln-kv-store", daemon=True)
        self._thread.start()
        atexit.register(self.close)   # (after mpi4py's: runs before MPI_Finalize)

    @staticmethod
    def _duplicate(comm):
        duplicate, request = comm.Idup()
        distributed.wait(request, distributed.timeout(),
                         "making kiln's key-value store (MPI_Comm_idup)")
        return duplicate

    def put(self, key, value):
        self._request(_PUT, key, bytes(value), 0.0)

    def get(self, key, timeout):
        found, value = self._request(_GET, key, None, float(timeout))
        if not found:
            raise TimeoutError(f"key {key!r} did not appear in kiln's key-value store within "
                               f"{timeout:g} s")
        return value

    def try_get(self, key):
        found, value = self._request(_TRY_GET, key, None, 0.0)
        return value if found else None

    def _request(self, kind, key, value, timeout):
        key = bytes(key)
        owner = zlib.crc32(key) % self.size
        with self._lock:
            tag = next(self._tags)
        self.requests.send((key, value, tag, timeout), dest=owner, tag=kind)
        limit = timeout + distributed.timeout()
        deadline = time.monotonic() + limit
        while True:
            message = self.replies.improbe(source=owner, tag=tag)
            if message is not None:
                return message.recv()
            if time.monotonic() > deadline:
                raise distributed.DistributedTimeoutError(
                    f"process {owner}, which holds the key {key!r} of kiln's key-value store, "
                    f"did not answer within {limit:g} s: it died, or has not made its store "
                    f"({distributed.TIMEOUT_VARIABLE} sets the limit)")
            time.sleep(0.0005)

    def _serve(self):
        status = self._mpi.Status()
        while not self._stop.is_set():
            message = self.requests.improbe(source=self._mpi.ANY_SOURCE,
                                            tag=self._mpi.ANY_TAG, status=status)
            if message is None:
                self._expire()
                time.sleep(0.001)
                continue
            source, kind = status.Get_source(), status.Get_tag()
            key, value, tag, timeout = message.recv()
            if kind == _PUT:
                self._values[key] = value
                self.replies.send((True, None), dest=source, tag=tag)
                for waiter, waiter_tag, _ in self._waiting.pop(key, ()):
                    self.replies.send((True, value), dest=waiter, tag=waiter_tag)
            elif key in self._values:
                self.replies.send((True, self._values[key]), dest=source, tag=tag)
            elif kind == _TRY_GET:
                self.replies.send((False, None), dest=source, tag=tag)
            else:
                self._waiting.setdefault(key, []).append((source, tag,
                                                          time.monotonic() + timeout))

    def _expire(self):
        """Answer 'absent' to the gets whose timeout has passed."""
        now = time.monotonic()
        for key in list(self._waiting):
            late = [w for w in self._waiting[key] if w[2] <= now]
            for source, tag, _ in late:
                self.replies.send((False, None), dest=source, tag=tag)
            kept = [w for w in self._waiting[key] if w[2] > now]
            if kept:
                self._waiting[key] = kept
            else:
                del self._waiting[key]

    def close(self):
        """Stop serving (this process's keys are no longer answered)."""
        self._stop.set()
        self._thread.join()
