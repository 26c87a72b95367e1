"""The cross-process collective engine: MPI collectives on contiguous buffers, with a deadline.

kiln's processes talk through MPI (mpi4py finds the MPI library and starts it; kiln.distributed
calls `setup`). Every operation here works on one contiguous buffer of `count` elements of one
kiln dtype, and has two faces over ONE native implementation, the process's "kiln.mpi" library
(LLVM IR built with llvmlite below, compiled once per process and cached on disk like the runtime
library: it holds no address; the MPI functions and handles are written into its state when it is
loaded):

C ABI (for generated LLVM code; all return an i32 status, 0 = done):

    i32 kiln_mpi_allreduce(ptr send, ptr recv, i64 count, i32 dtype, i32 op)
        recv[i] = op over processes of send[i]; send == recv is in place (MPI_IN_PLACE).
    i32 kiln_mpi_allgather(ptr send, ptr recv, i64 count, i32 dtype)
        recv = the processes' `count`-element blocks of send, in process order (size*count).
    i32 kiln_mpi_alltoall(ptr send, ptr recv, i64 count, i32 dtype)
        block j (count elements) of send goes to process j; block j of recv comes from process j.
    i32 kiln_mpi_reduce_scatter(ptr send, ptr recv, i64 count, i32 dtype, i32 op)
        recv[i] = op over processes of their send[rank * count + i]: send holds one `count`-element
        block per process, and this process keeps the reduction of its own block (psum_scatter).
    i32 kiln_mpi_sendrecv(ptr send, i64 dest, ptr recv, i64 source, i64 count, i32 dtype, i32 tag)
        send `count` elements to process `dest` and receive `count` from process `source` at
        once (ppermute across processes); dest < 0 or source < 0 skips that side. Messages
        match on (source, tag): use one tag per exchange of a call when several are in flight.
    i32 kiln_mpi_exchange(ptr records, i64 n, i64 count, i32 dtype)
        n sendrecvs at once (ppermute between the replicas of several processes): `records` holds
        n pointers, each to a record {ptr send, i64 dest, i64 send_tag, ptr recv, i64 source,
        i64 recv_tag}; `count` elements of `send` go to process `dest` with `send_tag`, and
        `count` elements from process `source` with `recv_tag` land in `recv` (a side whose
        process is < 0 is skipped). Tags are at most 32767 (MPI's least upper bound), and
        distinct among the messages from one process to another.
    void kiln_mpi_abort(i32 code)      MPI_Abort on kiln's communicator (ends every process).

`dtype` is `DTYPE_CODES[np.dtype]` and `op` is `OP_CODES[name]` ("sum", "max", "min"), constants
of the generated code. Buffers must not overlap except send == recv for allreduce. Counts are at
most 2**31 - 1 elements per MPI call (MPI's int counts): larger is the status TOO_LARGE. As for
any MPI collective, every process calls the same collectives in the same order, and one process
does not run two of them at once from two threads (sendrecv included; tag 0x4B4D is the
engine's own). Threads may take turns: MPI runs with MPI_THREAD_MULTIPLE.

Every wait polls MPI_Testall against a deadline of `timeout` seconds from its start (set by
`setup` / `set_timeout`; kiln.distributed takes it from KILN_DISTRIBUTED_TIMEOUT, default 300):
a process that died or stopped makes the others return TIMEOUT instead of hanging. After a
timeout kiln's communicator is unusable: every later operation returns BROKEN at once, and
kiln.distributed aborts the MPI job when the process exits (MPI_Finalize would wait forever).

Statuses: OK = 0; `STATUS_BASE` + 1 TIMEOUT, + 2 UNSUPPORTED (no such dtype/op pair, e.g. max
on complex), + 3 TOO_LARGE, + 4 NOT_SET_UP, + 5 BROKEN, + 0x100 + e an MPI error code e.
`error(status)` turns one into the exception to raise (`DistributedTimeoutError`,
`DistributedError`); `is_status(status)` says whether a kiln_main status is one of these.

Dtypes: bool (sum and max are logical or, min logical and: MPI has no arithmetic on C bool),
int8-64, uint8-64, float32/64 and complex64/128 (sum only) use MPI's own types and operations;
float16 travels as 16-bit words and is reduced by kiln's own MPI user operations (compiled in
kiln.mpi: two float16 values are added in float32, exact for them, and rounded once, as NumPy's
float16 add; max/min give NaN when either value is NaN).

Python face (the reference backend; NumPy arrays in, new arrays out, GIL released while waiting):

    allreduce(x, op="sum", out=None) -> array like x (into `out` when given; out may be x)
    allgather(x) -> array of shape (process count, *x.shape)
    alltoall(x) -> x.shape[0] == process count; block j goes to process j, same shape back
    sendrecv(x, dest, source, tag=0) -> the array like x received from `source` (None if
        source is None); x is sent to `dest` (not sent if dest is None)
    reduce_scatter(x, op="sum") -> x.shape[0] == process count; the reduction of block `rank`
    exchange(x, dests, sources, send_tags, recv_tags) -> array like x: block k of x (its leading
        axis) goes to process dests[k], block k of the result comes from sources[k] (None:
        skipped; that block is zeros)

IR face (llvmlite; values are IR values, `count` an i64 value or int, dtype a NumPy dtype):

    emit_allreduce(builder, send, recv, count, dtype, op) -> i32 status value
    emit_allgather(builder, send, recv, count, dtype) -> i32 status value
    emit_alltoall(builder, send, recv, count, dtype) -> i32 status value
    emit_sendrecv(builder, send, dest, recv, source, count, dtype, tag=0) -> i32 status value
    emit_reduce_scatter(builder, send, recv, count, dtype, op) -> i32 status value
    emit_exchange(builder, records, n, count, dtype) -> i32 status value
    emit_return_on_error(builder, status): if status != 0, `ret status` (an i32 function
        holding nothing to free; kiln_main's status then reaches Python, where
        executable.py raises `error(status)`)

The calls go through extern globals (`kiln_mpi_allreduce`, ... in llvm/externs.py) bound when
object code is loaded, so cached object code never holds a process's addresses; binding one
needs `setup` first (kiln.distributed.initialize under mpirun). So emit them only where the
process count (kiln.distributed.process_layout()[1], a specialisation key) is above 1; in one
process there is nothing to exchange. E.g. a psum across processes of a float32 buffer `buf`
of `n` elements, after the in-process reduction, in place:

    status = mpi_engine.emit_allreduce(builder, buf, buf, n, np.float32, "sum")
    mpi_engine.emit_return_on_error(builder, status)

How: allreduce is MPI_Iallreduce, except when every process is on one node, or between two
processes. Processes all on one node (any number from two) share a window (`setup` makes it:
MPI_Comm_split_type + MPI_Win_allocate_shared; `shared=False` skips it), and from SHARED_BYTES
(64 KB) on their allreduce goes through it without MPI messages (`_Library.emit_shared`): chunk
after chunk of `send` (SHARED_CHUNK bytes, two in flight), each of K processes stages the
others' pieces of the chunk there, reduces its own 1/K of it across the K processes while it is
in cache (MPI_Reduce_local, MPI's operation, in process order: the bits of NumPy's left fold,
the same in every process), and all copy each reduced piece into recv with non-temporal stores,
synchronised by counters in the window that each wait polls against the deadline. Setting the
window up waits for every process with the same deadline (a nonblocking barrier before and
after). Measured 64 MB float32 on 2 cores with two processes: 1.5x the point-to-point form on a
quiet machine (55 % of a one-process copy's bandwidth), up to 2x at load (the same when another
program shares a core), and 2-3x MPI_Iallreduce from 64 KB to 4 MB; with three and four
processes (oversubscribed) see BENCHMARKS.md. When the processes span several nodes, no window
is made (a node's window does not reach the others; node-local reduce + inter-node allreduce +
node-local broadcast is not done): two processes use point-to-point messages in PAIRWISE_CHUNK
pieces from PAIRWISE_BYTES (1 MB) on (`_Library.emit_pairwise`), more, MPI_Iallreduce at every
size.
allgather/alltoall are MPI_Iallgather/MPI_Ialltoall, reduce_scatter MPI_Ireduce_scatter_block,
sendrecv MPI_Irecv + MPI_Isend, exchange one MPI_Irecv and one MPI_Isend per record's side (all
polled together).

Set-up (kiln.distributed): `setup(comm, timeout, shared=True)` with an mpi4py communicator
(kiln's own duplicate of COMM_WORLD), `set_timeout(seconds)`, `teardown()` (frees the window),
`is_broken()`, `abort(code)`.
The compiler never imports kiln; mpi4py is imported only by `setup`.
"""
from __future__ import annotations

import ctypes
import os
import struct
import threading
import time

import numpy as np

STATUS_BASE = 0x4B4D5000
TIMEOUT, UNSUPPORTED, TOO_LARGE, NOT_SET_UP, BROKEN = (STATUS_BASE + k for k in range(1, 6))
MPI_ERROR = STATUS_BASE + 0x100
_INT_MAX = (1 << 31) - 1
# Between two processes without a shared window, an allreduce of at least PAIRWISE_BYTES runs
# as point-to-point messages in PAIRWISE_CHUNK pieces (_Library.emit_pairwise): measured 64 MB
# float32 on 2 cores, about 1.3x MPI_Iallreduce (BENCHMARKS.md). Its messages use tag
# PAIRWISE_TAG.
PAIRWISE_BYTES = 1 << 20
PAIRWISE_CHUNK = 1 << 21
PAIRWISE_TAG = 0x4B4D
# Processes all on one node share a window (MPI_Win_allocate_shared, made by `setup`): each
# process's region holds three counters, one per cache line (SHARED_COUNTERS), then
# SHARED_SLOTS staging buffers of SHARED_CHUNK bytes (the state's `shared_chunk`). An allreduce
# of at least SHARED_BYTES goes through it (_Library.emit_shared) instead of messages, chunk by
# chunk, each process reducing 1/K of each chunk. With two processes, halves of 512 KB - 1 MB
# lost least on the loaded 2-core machine when a process was descheduled (fewer hand-overs;
# BENCHMARKS.md): chunks of 1 MB (halves of 512 KB); with three, 1 MB and 2 MB beat 512 KB.
SHARED_BYTES = 1 << 16
SHARED_CHUNK = 1 << 20
SHARED_SLOTS = 2
SHARED_COUNTERS = ("posted", "reduced", "copied")
SHARED_LINE = 64
SHARED_DATA = 256   # the staging buffers' offset in a region (after the counters)
SHARED_REGION = SHARED_DATA + SHARED_SLOTS * SHARED_CHUNK
SHARED_SPIN = 256   # polls of a counter between looks at the clock (and sched_yield)

DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))
DTYPE_CODES = {dtype: code for code, dtype in enumerate(DTYPES)}
OPS = ("sum", "max", "min")
OP_CODES = {name: code for code, name in enumerate(OPS)}

# the library's state: one i64 array, slots written by `setup`
_SLOTS = ("comm", "Iallreduce", "Iallgather", "Ialltoall", "Isend", "Irecv", "Testall", "Wtime",
          "Abort", "in_place", "types", "ops", "timeout", "broken", "Reduce_local", "malloc",
          "free", "sizes", "rank", "size", "Ireduce_scatter_block", "status_size",
          "shared_regions", "sched_yield", "shared_chunk")
SLOT = {name: k for k, name in enumerate(_SLOTS)}
# the slots holding MPI's functions (MPI_<name>)
MPI_FUNCTIONS = ("Iallreduce", "Iallgather", "Ialltoall", "Isend", "Irecv", "Testall", "Wtime",
                 "Abort", "Reduce_local", "Ireduce_scatter_block")
FUNCTIONS = ("allreduce", "allgather", "alltoall", "sendrecv", "reduce_scatter", "exchange",
             "abort")
# the library's external definitions: its entry points, float16 operations and state
LIBRARY_SYMBOLS = (*(f"kiln_mpi_{name}" for name in FUNCTIONS),
                   *(f"kiln_mpi_f16_{op}" for op in OPS), "kiln_mpi_state")
TAG_LIMIT = 32767   # the tags kiln_mpi_exchange may use: 0 .. TAG_LIMIT (MPI_TAG_UB >= it)
# kiln_mpi_exchange's record: send, dest, send_tag, recv, source, recv_tag (8 bytes each)
EXCHANGE_RECORD = ("send", "dest", "send_tag", "recv", "source", "recv_tag")


class DistributedError(RuntimeError):
    """A cross-process operation failed."""


class DistributedTimeoutError(DistributedError):
    """A cross-process operation did not complete within the timeout (a process died or hangs)."""


def is_status(status):
    return STATUS_BASE < status < MPI_ERROR + 0x10000


def error(status, what="a cross-process collective"):
    """The exception for a non-zero status of the functions above."""
    where = _where()
    if status == TIMEOUT:
        return DistributedTimeoutError(
            f"{what} did not complete within {_timeout():g} s on {where}: another process died, "
            f"stopped, or did not reach the same collective. The MPI job is now unusable and is "
            f"aborted when this process exits (KILN_DISTRIBUTED_TIMEOUT sets the limit).")
    if status == BROKEN:
        return DistributedError(f"{what} on {where}: an earlier cross-process operation timed out; "
                                f"the MPI job is unusable")
    if status == NOT_SET_UP:
        return DistributedError(f"{what}: kiln.distributed.initialize() has not set up MPI")
    if status == UNSUPPORTED:
        return DistributedError(f"{what}: unsupported dtype/operation (see kiln.compiler.backends."
                                f"mpi_engine: max/min have no complex form)")
    if status == TOO_LARGE:
        return DistributedError(f"{what}: more than 2**31 - 1 elements in one MPI call")
    if status >= MPI_ERROR:
        code = status - MPI_ERROR
        text = ""
        if _STATE.mpi is not None:
            text = ": " + _STATE.mpi.Get_error_string(code)
        return DistributedError(f"{what} failed on {where} with MPI error {code}{text}")
    return DistributedError(f"{what}: status {status}")


# -------------------------------------------------------------------------------- set-up

class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.library = {}       # handle size -> {name: address, "state": address}
        self.mpi = None         # the mpi4py.MPI module once set up
        self.comm = None
        self.words = None       # ctypes view of the library's state
        self.keep = []          # tables and user ops kept alive while set up
        self.functions = {}     # name -> ctypes function (Python face)
        self.window = None      # (shared window, node communicator) of the processes on one node


_STATE = _State()


def _where():
    comm = _STATE.comm
    if comm is None:
        return "this process"
    return f"process {comm.Get_rank()} of {comm.Get_size()}"


def _timeout():
    words = _STATE.words
    if words is None:
        return float("nan")
    return struct.unpack("<d", struct.pack("<q", words[SLOT["timeout"]]))[0]


def _libmpi():
    """ctypes handle of the MPI library mpi4py loaded into this process."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/libmpi" in line}
    for path in sorted(paths):
        if os.path.basename(path).startswith(("libmpi.so", "libmpi_abi.so")):
            return ctypes.CDLL(path)
    raise DistributedError(f"the MPI library mpi4py uses is not mapped into this process "
                           f"(found {sorted(paths) or 'none'})")


def _handle_types(MPI):
    size = MPI._sizeof(MPI.Comm)
    for cls in (MPI.Datatype, MPI.Op, MPI.Request):
        if MPI._sizeof(cls) != size or size not in (4, 8):
            raise DistributedError("unsupported MPI ABI: handles of different or odd sizes")
    return size


# MPI's datatype (its name without MPI_) of each dtype's kind and size; float16 travels as
# 16-bit words
MPI_TYPE_NAMES = {"b": "C_BOOL", "i1": "INT8_T", "i2": "INT16_T", "i4": "INT32_T",
                  "i8": "INT64_T", "u1": "UINT8_T", "u2": "UINT16_T", "u4": "UINT32_T",
                  "u8": "UINT64_T", "f2": "UINT16_T", "f4": "FLOAT", "f8": "DOUBLE",
                  "c8": "C_FLOAT_COMPLEX", "c16": "C_DOUBLE_COMPLEX"}
F16_OP = "f16"   # in `mpi_op_names`: kiln's own user operation (kiln_mpi_f16_<op>)


def mpi_type_name(dtype):
    return MPI_TYPE_NAMES["b" if dtype.kind == "b" else f"{dtype.kind}{dtype.itemsize}"]


def mpi_op_names(dtype):
    """MPI's operation (its name without MPI_) for each of OPS on `dtype`: None where there
    is none (UNSUPPORTED), F16_OP for kiln's float16 operations."""
    if dtype.kind == "b":
        return ("LOR", "LOR", "LAND")
    if dtype.kind == "c":
        return ("SUM", None, None)
    if dtype == np.float16:
        return (F16_OP,) * len(OPS)
    return ("SUM", "MAX", "MIN")


def _tables(MPI, user_ops):
    """The datatype handle of each dtype, the op handle of each (dtype, op) (0: unsupported)."""
    h = MPI._handleof
    type_table = (ctypes.c_int64 * len(DTYPES))()
    op_table = (ctypes.c_int64 * (len(DTYPES) * len(OPS)))()
    for code, dtype in enumerate(DTYPES):
        type_table[code] = h(getattr(MPI, mpi_type_name(dtype)))
        for k, name in enumerate(mpi_op_names(dtype)):
            op_table[code * len(OPS) + k] = 0 if name is None else (
                user_ops[k] if name == F16_OP else h(getattr(MPI, name)))
    return type_table, op_table


def setup(comm, timeout, shared=True):
    """Point the native library at `comm` (an mpi4py intracommunicator) with `timeout` seconds
    for every wait; with `shared`, processes all on one node share a window
    (`_shared_window`; every process must pass the same). Builds and loads the library on first
    use (needs llvmlite)."""
    from mpi4py import MPI
    with _STATE.lock:
        size = _handle_types(MPI)
        library = _load_library(size)
        libmpi = _libmpi()
        words = (ctypes.c_int64 * len(_SLOTS)).from_address(library["state"])
        words[SLOT["broken"]] = 0
        for name in MPI_FUNCTIONS:
            words[SLOT[name]] = ctypes.cast(getattr(libmpi, f"MPI_{name}"), ctypes.c_void_p).value
        libc = ctypes.CDLL(None)
        for name in ("malloc", "free", "sched_yield"):
            words[SLOT[name]] = ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
        user_ops = []
        for op in OPS:
            handle = ctypes.c_int64(0)
            create = libmpi.MPI_Op_create
            create.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
            rc = create(library[f"f16_{op}"], 1, ctypes.byref(handle))
            if rc:
                raise DistributedError(f"MPI_Op_create failed with MPI error {rc}")
            user_ops.append(handle.value)
        type_table, op_table = _tables(MPI, user_ops)
        sizes = (ctypes.c_int64 * len(DTYPES))(*(dtype.itemsize for dtype in DTYPES))
        _STATE.keep = [type_table, op_table, user_ops, libmpi, sizes]
        words[SLOT["sizes"]] = ctypes.addressof(sizes)
        words[SLOT["status_size"]] = MPI._sizeof(MPI.Status)
        words[SLOT["rank"]], words[SLOT["size"]] = comm.Get_rank(), comm.Get_size()
        words[SLOT["in_place"]] = int(MPI.IN_PLACE)
        words[SLOT["types"]] = ctypes.addressof(type_table)
        words[SLOT["ops"]] = ctypes.addressof(op_table)
        words[SLOT["shared_regions"]] = 0
        _STATE.mpi, _STATE.comm, _STATE.words = MPI, comm, words
        set_timeout(timeout)
        window = _shared_window(MPI, comm, words, timeout) if shared else None
        _STATE.window = None if window is None else window[0]
        _STATE.keep.append(None if window is None else window[1])
        words[SLOT["comm"]] = MPI._handleof(comm)
        prototypes = {
            "allreduce": (ctypes.c_int32, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                           ctypes.c_int32, ctypes.c_int32]),
            "allgather": (ctypes.c_int32, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                           ctypes.c_int32]),
            "sendrecv": (ctypes.c_int32, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                                          ctypes.c_int64, ctypes.c_int64, ctypes.c_int32,
                                          ctypes.c_int32]),
            "exchange": (ctypes.c_int32, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                          ctypes.c_int32]),
            "abort": (None, [ctypes.c_int32])}
        prototypes["alltoall"] = prototypes["allgather"]
        prototypes["reduce_scatter"] = prototypes["allreduce"]
        _STATE.functions = {name: ctypes.CFUNCTYPE(ret, *args)(library[name])
                            for name, (ret, args) in prototypes.items()}


def _shared_window(MPI, comm, words, timeout):
    """When every process of `comm` (two or more) is on one node: the window of SHARED_REGION
    bytes per process that `emit_shared` stages its chunks in (counters zeroed), and the table
    of the processes' regions (in rank order; its address in the state): ((window, node
    communicator), table). None when the processes span several nodes (a node's window does
    not reach the others: their allreduce goes through MPI's messages) or there is one.
    Collective over `comm`, and MPI's calls here have no nonblocking form: a nonblocking
    barrier before and after, each polled against `timeout` (`_arrive`), turns a process that
    never comes into an error instead of a hang."""
    _arrive(comm, timeout, words)
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    size = comm.Get_size()
    if not size == node.Get_size() >= 2:
        node.Free()
        return None
    window = MPI.Win.Allocate_shared(SHARED_REGION, 1, comm=node)
    regions = (ctypes.c_int64 * size)(*(window.Shared_query(q)[0].address for q in range(size)))
    ctypes.memset(regions[node.Get_rank()], 0, SHARED_DATA)
    _arrive(node, timeout, words)
    words[SLOT["shared_regions"]] = ctypes.addressof(regions)
    words[SLOT["shared_chunk"]] = SHARED_CHUNK
    return (window, node), regions


def _arrive(comm, timeout, words):
    """A barrier over `comm` polled against `timeout` seconds; past it, kiln's communicator is
    broken and DistributedTimeoutError names what to do."""
    request = comm.Ibarrier()
    deadline = time.monotonic() + timeout
    while not request.Test():
        if time.monotonic() > deadline:
            words[SLOT["broken"]] = 1
            raise DistributedTimeoutError(
                f"setting up the shared-memory window of the allreduce (kiln.distributed."
                f"initialize) did not complete within {timeout:g} s on process {comm.Get_rank()} "
                f"of {comm.Get_size()}: another process did not call kiln.distributed.initialize()"
                f", died or stopped. Every process of the MPI job must call it "
                f"(KILN_DISTRIBUTED_TIMEOUT sets the limit; KILN_DISTRIBUTED_SHARED_MEMORY=0 skips "
                f"the window). The MPI job is now unusable and is aborted when this process exits.")
        time.sleep(0.0002)


def set_timeout(seconds):
    """The deadline of every later wait, in seconds (> 0)."""
    seconds = float(seconds)
    if not seconds > 0:
        raise ValueError(f"the timeout must be a positive number of seconds, not {seconds}")
    if _STATE.words is not None:
        _STATE.words[SLOT["timeout"]] = struct.unpack("<q", struct.pack("<d", seconds))[0]


def teardown():
    """Forget the communicator (later calls return NOT_SET_UP); frees kiln's MPI operations."""
    with _STATE.lock:
        words = _STATE.words
        if words is None:
            return
        words[SLOT["comm"]] = 0
        if _STATE.mpi is not None and not is_broken():
            free = _STATE.keep[3].MPI_Op_free
            free.argtypes = [ctypes.c_void_p]
            for handle in _STATE.keep[2]:
                free(ctypes.byref(ctypes.c_int64(handle)))
        words[SLOT["shared_regions"]] = 0
        if _STATE.window is not None and not is_broken():
            for handle in _STATE.window:
                handle.Free()
        _STATE.window = None
        _STATE.comm = None
        _STATE.keep = []
        _STATE.functions = {}


def is_set_up():
    return _STATE.words is not None and _STATE.words[SLOT["comm"]] != 0


def is_broken():
    """Whether a wait timed out (kiln's communicator is then unusable)."""
    return _STATE.words is not None and _STATE.words[SLOT["broken"]] != 0


def address(name):
    """The native address of kiln_mpi_<name> (an extern provider): needs `setup`."""
    if not is_set_up():
        raise DistributedError(
            f"compiled code calls kiln_mpi_{name} (a collective across processes) but MPI is not "
            f"set up in this process: call kiln.distributed.initialize() under mpirun first")
    return _load_library(_handle_types(_STATE.mpi))[name]


def abort(code=1):
    """MPI_Abort on kiln's communicator: ends every process of the job."""
    _STATE.functions["abort"](code)


# -------------------------------------------------------------------------------- Python face

def _call(name, what, *args):
    if not is_set_up():
        raise error(NOT_SET_UP, what)
    status = _STATE.functions[name](*args)
    if status:
        raise error(status, what)


def _contiguous(x):
    x = np.ascontiguousarray(x)
    if x.dtype not in DTYPE_CODES:
        raise TypeError(f"no cross-process collective on {x.dtype} arrays; "
                        f"supported: {', '.join(map(str, DTYPES))}")
    return x


def allreduce(x, op="sum", out=None):
    x = _contiguous(x)
    if op not in OP_CODES:
        raise ValueError(f"allreduce op must be one of {OPS}, not {op!r}")
    if out is None:
        out = np.empty_like(x)
    elif not (type(out) is np.ndarray and out.dtype == x.dtype and out.shape == x.shape
              and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError("allreduce's out must be a writable C-contiguous array like x")
    _call("allreduce", f"allreduce({op})", x.ctypes.data, out.ctypes.data, x.size,
          DTYPE_CODES[x.dtype], OP_CODES[op])
    return out


def allgather(x):
    x = _contiguous(x)
    out = np.empty((_STATE.comm.Get_size() if is_set_up() else 1, *x.shape), x.dtype)
    _call("allgather", "allgather", x.ctypes.data, out.ctypes.data, x.size, DTYPE_CODES[x.dtype])
    return out


def alltoall(x):
    x = _contiguous(x)
    size = _STATE.comm.Get_size() if is_set_up() else 1
    if x.ndim == 0 or x.shape[0] != size:
        raise ValueError(f"alltoall needs a leading axis of the process count {size}, "
                         f"got shape {x.shape}")
    out = np.empty_like(x)
    _call("alltoall", "alltoall", x.ctypes.data, out.ctypes.data, x.size // size,
          DTYPE_CODES[x.dtype])
    return out


def reduce_scatter(x, op="sum"):
    x = _contiguous(x)
    size = _STATE.comm.Get_size() if is_set_up() else 1
    if op not in OP_CODES:
        raise ValueError(f"reduce_scatter op must be one of {OPS}, not {op!r}")
    if x.ndim == 0 or x.shape[0] != size:
        raise ValueError(f"reduce_scatter needs a leading axis of the process count {size}, "
                         f"got shape {x.shape}")
    out = np.empty(x.shape[1:], x.dtype)
    _call("reduce_scatter", f"reduce_scatter({op})", x.ctypes.data, out.ctypes.data, out.size,
          DTYPE_CODES[x.dtype], OP_CODES[op])
    return out


def exchange(x, dests, sources, send_tags, recv_tags):
    x = _contiguous(x)
    out = np.zeros_like(x)
    n = x.shape[0] if x.ndim else 0
    if not len(dests) == len(sources) == len(send_tags) == len(recv_tags) == n:
        raise ValueError(f"exchange needs one dest, source and tag pair per block of x ({n})")
    records = np.zeros((n, len(EXCHANGE_RECORD)), np.int64)
    for k in range(n):
        records[k] = (x[k].ctypes.data, -1 if dests[k] is None else dests[k], send_tags[k],
                      out[k].ctypes.data, -1 if sources[k] is None else sources[k], recv_tags[k])
    pointers = np.array([records[k].ctypes.data for k in range(n)], np.int64)
    _call("exchange", "exchange", pointers.ctypes.data, n, x[0].size if n else 0,
          DTYPE_CODES[x.dtype])
    return out


def sendrecv(x, dest, source, tag=0):
    x = _contiguous(x)
    out = None if source is None else np.empty_like(x)
    _call("sendrecv", "sendrecv", x.ctypes.data, -1 if dest is None else dest,
          None if out is None else out.ctypes.data, -1 if source is None else source, x.size,
          DTYPE_CODES[x.dtype], tag)
    return out


# -------------------------------------------------------------------------------- IR face

def _ir():
    import llvmlite.ir as ir
    I32, I64, PTR = ir.IntType(32), ir.IntType(64), ir.PointerType()
    return ir, I32, I64, PTR


def function_type(name):
    """The LLVM function type of kiln_mpi_<name>."""
    ir, I32, I64, PTR = _ir()
    return {"allreduce": ir.FunctionType(I32, [PTR, PTR, I64, I32, I32]),
            "allgather": ir.FunctionType(I32, [PTR, PTR, I64, I32]),
            "alltoall": ir.FunctionType(I32, [PTR, PTR, I64, I32]),
            "sendrecv": ir.FunctionType(I32, [PTR, I64, PTR, I64, I64, I32, I32]),
            "reduce_scatter": ir.FunctionType(I32, [PTR, PTR, I64, I32, I32]),
            "exchange": ir.FunctionType(I32, [PTR, I64, I64, I32]),
            "abort": ir.FunctionType(ir.VoidType(), [I32])}[name]


def _i64(value):
    ir, _, I64, _ = _ir()
    return ir.Constant(I64, value) if isinstance(value, int) else value


def _code(dtype):
    dtype = np.dtype(dtype)
    if dtype not in DTYPE_CODES:
        raise TypeError(f"no cross-process collective on {dtype} values")
    ir, I32, _, _ = _ir()
    return ir.Constant(I32, DTYPE_CODES[dtype])


def _emit(builder, name, args):
    from .llvm import externs
    return externs.call(builder, f"kiln_mpi_{name}", function_type(name), args)


def emit_allreduce(builder, send, recv, count, dtype, op):
    return _emit(builder, "allreduce", [send, recv, _i64(count), _code(dtype), _op(op)])


def emit_reduce_scatter(builder, send, recv, count, dtype, op):
    return _emit(builder, "reduce_scatter", [send, recv, _i64(count), _code(dtype), _op(op)])


def emit_exchange(builder, records, n, count, dtype):
    return _emit(builder, "exchange", [records, _i64(n), _i64(count), _code(dtype)])


def _op(op):
    ir, I32, _, _ = _ir()
    if op not in OP_CODES:
        raise ValueError(f"the op must be one of {OPS}, not {op!r}")
    return ir.Constant(I32, OP_CODES[op])


def emit_allgather(builder, send, recv, count, dtype):
    return _emit(builder, "allgather", [send, recv, _i64(count), _code(dtype)])


def emit_alltoall(builder, send, recv, count, dtype):
    return _emit(builder, "alltoall", [send, recv, _i64(count), _code(dtype)])


def emit_sendrecv(builder, send, dest, recv, source, count, dtype, tag=0):
    ir, I32, _, _ = _ir()
    return _emit(builder, "sendrecv", [send, _i64(dest), recv, _i64(source), _i64(count),
                                       _code(dtype), ir.Constant(I32, tag)])


def emit_return_on_error(builder, status):
    ir, I32, _, _ = _ir()
    with builder.if_then(builder.icmp_unsigned("!=", status, ir.Constant(I32, 0)), likely=False):
        builder.ret(status)


# -------------------------------------------------------------------------------- the library

def _load_library(handle_size):
    """{function name: address, "state": address} of the loaded kiln.mpi library."""
    if handle_size not in _STATE.library:
        from .llvm import rtlib
        name = f"kiln.mpi{handle_size}"
        loaded = rtlib.load_library(name, lambda: _compile(name, handle_size), __file__)
        found = {key: loaded.function_address(f"kiln_mpi_{key}")
                 for key in FUNCTIONS + tuple(f"f16_{op}" for op in OPS)}
        found["state"] = loaded.global_address("kiln_mpi_state")
        if not all(found.values()):
            raise DistributedError(f"the kiln.mpi library lacks {[k for k, v in found.items() if not v]}")
        _STATE.library[handle_size] = found
    return _STATE.library[handle_size]


def _compile(name, handle_size):
    from .llvm import target
    return target.object_code(target.optimize(library_ir(name, handle_size), name))


def library_ir(name, handle_size):
    """The kiln.mpi library's LLVM IR (a module called `name`) for MPI handles of
    `handle_size` bytes; its definitions: LIBRARY_SYMBOLS (ahead-of-time libraries link it)."""
    from .llvm import target
    ir = _ir()[0]
    module = ir.Module(name=name)
    module.triple = target.triple()
    _Library(module, handle_size).emit()
    return str(module)


def handle_size():
    """The size of this MPI's handles (MPI_Comm, ...) in bytes, from mpi4py (MPI is not
    started for this)."""
    import mpi4py
    if "mpi4py.MPI" not in __import__("sys").modules:
        mpi4py.rc.initialize = False   # (kiln.distributed.initialize starts it when asked)
    from mpi4py import MPI
    return _handle_types(MPI)


class _Library:
    """Emits kiln.mpi: the entry points of the module docstring over a state array."""

    def __init__(self, module, handle_size):
        ir, self.I32, self.I64, self.PTR = _ir()
        self.ir, self.module = ir, module
        self.H = ir.IntType(8 * handle_size)   # an MPI handle (Open MPI: a pointer; MPICH: int)
        self.state = ir.GlobalVariable(module, ir.ArrayType(self.I64, len(_SLOTS)), "kiln_mpi_state")
        self.state.initializer = ir.Constant(self.state.value_type, None)
        self.state.align = 8

    def c(self, value, typ=None):
        return self.ir.Constant(typ or self.I32, value)

    def slot(self, b, name, typ=None):
        pointer = b.gep(self.state, [self.c(0), self.c(SLOT[name])], inbounds=True)
        return b.load(pointer, typ=typ or self.I64)

    def handle(self, b, value):
        return value if self.H.width == 64 else b.trunc(value, self.H)

    def mpi(self, b, name, ret, args):
        fnty = self.ir.FunctionType(ret, [a.type for a in args])
        return b.call(b.inttoptr(self.slot(b, name), fnty.as_pointer()), args)

    def emit(self):
        self.poll = self.emit_poll()
        self.emit_allreduce()
        self.emit_blocks("allgather", "Iallgather")
        self.emit_blocks("alltoall", "Ialltoall")
        self.emit_sendrecv()
        self.emit_reduce_scatter()
        self.emit_exchange()
        self.emit_abort()
        for op in OPS:
            self.emit_f16_op(op)

    def function(self, name, fnty):
        f = self.ir.Function(self.module, fnty, name)
        return f, self.ir.IRBuilder(f.append_basic_block("entry"))

    def emit_poll(self):
        """i32 poll(i32 n, ptr requests): Testall until done (0), an MPI error or the deadline."""
        ir, I32 = self.ir, self.I32
        f, b = self.function("kiln_mpi_poll", ir.FunctionType(I32, [I32, self.PTR]))
        f.linkage = "internal"
        n, requests = f.args
        D = ir.DoubleType()
        flag = b.alloca(I32)
        statuses = b.alloca(ir.IntType(8), size=b.mul(b.zext(n, self.I64), self.slot(b, "status_size")))
        timeout = b.bitcast(self.slot(b, "timeout"), D)
        start = self.mpi(b, "Wtime", D, [])
        loop, done, error, late = (f.append_basic_block(s) for s in ("loop", "done", "error", "late"))
        check = f.append_basic_block("check")
        b.branch(loop)
        b.position_at_end(loop)
        b.store(self.c(0), flag)
        rc = self.mpi(b, "Testall", I32, [n, requests, flag, statuses])
        b.cbranch(b.icmp_signed("!=", rc, self.c(0)), error, check)
        b.position_at_end(check)
        finished = b.icmp_signed("!=", b.load(flag), self.c(0))
        waited = b.fsub(self.mpi(b, "Wtime", D, []), start)
        b.cbranch(finished, done, f.append_basic_block("running"))
        b.position_at_end(f.blocks[-1])
        b.cbranch(b.fcmp_ordered(">", waited, timeout), late, loop)
        b.position_at_end(done)
        b.ret(self.c(0))
        b.position_at_end(error)
        b.ret(b.add(rc, self.c(MPI_ERROR)))
        b.position_at_end(late)
        self.time_out(b)
        return f

    def time_out(self, b):
        """Mark kiln's communicator broken and return TIMEOUT."""
        broken = b.gep(self.state, [self.c(0), self.c(SLOT["broken"])], inbounds=True)
        b.store(self.c(1, self.I64), broken)
        b.ret(self.c(TIMEOUT))

    def guard(self, b, counts, dtype):
        """Return early with NOT_SET_UP / BROKEN / TOO_LARGE / UNSUPPORTED; the comm handle."""
        comm = self.slot(b, "comm")
        for bad, status in ((b.icmp_signed("==", comm, self.c(0, self.I64)), NOT_SET_UP),
                            (b.icmp_signed("!=", self.slot(b, "broken"), self.c(0, self.I64)), BROKEN),
                            (b.icmp_unsigned(">=", dtype, self.c(len(DTYPES))), UNSUPPORTED)):
            with b.if_then(bad, likely=False):
                b.ret(self.c(status))
        for count in counts:
            with b.if_then(b.icmp_unsigned(">", count, self.c(_INT_MAX, self.I64)), likely=False):
                b.ret(self.c(TOO_LARGE))
        return self.handle(b, comm)

    def table(self, b, name, index):
        base = b.inttoptr(self.slot(b, name), self.I64.as_pointer())
        return b.load(b.gep(base, [b.zext(index, self.I64)]))

    def request(self, b, n):
        requests = b.alloca(self.ir.ArrayType(self.H, n))
        for k in range(n):
            b.store(self.c(0, self.H), b.gep(requests, [self.c(0), self.c(k)]))
        return requests

    def start(self, b, mpi_name, args):
        """Start the nonblocking MPI_<mpi_name>(*args, &request), return its outcome (`finish`)."""
        requests = self.request(b, 1)
        rc = self.mpi(b, mpi_name, self.I32, args + [b.bitcast(requests, self.PTR)])
        self.finish(b, rc, self.c(1), requests)

    def finish(self, b, rc, n, requests):
        """Return the MPI error of starting the operation, else poll its `n` requests."""
        with b.if_then(b.icmp_signed("!=", rc, self.c(0)), likely=False):
            b.ret(b.add(rc, self.c(MPI_ERROR)))
        b.ret(b.call(self.poll, [n, b.bitcast(requests, self.PTR)]))

    def emit_allreduce(self):
        f, b = self.function("kiln_mpi_allreduce", function_type("allreduce"))
        send, recv, count, dtype, op = f.args
        comm = self.guard(b, [count], dtype)
        mpi_op = self.operation(b, dtype, op)
        in_place = b.inttoptr(self.slot(b, "in_place"), self.PTR)
        source = b.select(b.icmp_unsigned("==", b.ptrtoint(send, self.I64), b.ptrtoint(recv, self.I64)),
                          in_place, send)
        mpi_type = self.handle(b, self.table(b, "types", dtype))
        elsize = self.table(b, "sizes", dtype)
        two = b.icmp_signed("==", self.slot(b, "size"), self.c(2, self.I64))
        nbytes = b.mul(count, elsize)
        shared = b.and_(b.icmp_signed("!=", self.slot(b, "shared_regions"), self.c(0, self.I64)),
                        b.icmp_signed(">=", nbytes, self.c(SHARED_BYTES, self.I64)))
        with b.if_then(shared):
            b.ret(b.call(self.emit_shared(), [send, recv, count, mpi_type, mpi_op, elsize]))
        pairwise = b.and_(two, b.icmp_signed(">=", nbytes, self.c(PAIRWISE_BYTES, self.I64)))
        with b.if_then(pairwise):
            b.ret(b.call(self.emit_pairwise(), [send, recv, count, mpi_type, mpi_op, elsize,
                                                 comm]))
        self.start(b, "Iallreduce", [source, recv, b.trunc(count, self.I32), mpi_type, mpi_op,
                                     comm])

    def emit_pairwise(self):
        """i32 pairwise(send, recv, i64 count, type, op, i64 elsize, comm): allreduce between two
        processes through point-to-point messages (see `PAIRWISE_BYTES`). Each process reduces
        its half: chunk by chunk it sends the peer's half of `send` and receives the peer's
        values of its own half into a buffer of one chunk, reduces them there, while in cache,
        with MPI's operation (MPI_Reduce_local), and copies the result into recv; then the
        halves are exchanged. In place (send == recv) is safe: nothing of the peer's half is written
        before the peer has read it (its sends completed)."""
        ir, I32, I64, PTR = self.ir, self.I32, self.I64, self.PTR
        f, b = self.function("kiln_mpi_pairwise", ir.FunctionType(
            I32, [PTR, PTR, I64, self.H, self.H, I64, self.H]))
        f.linkage = "internal"
        send, recv, count, mpi_type, op, elsize, comm = f.args
        rank = self.slot(b, "rank")
        peer = b.sub(self.c(1, I64), rank)
        mine_lo, mine_n, their_lo, their_n = self.halves(b, count)
        chunk = b.sdiv(self.c(PAIRWISE_CHUNK, I64), elsize)
        tmp = self.mpi(b, "malloc", PTR, [self.c(PAIRWISE_CHUNK, I64)])
        status = b.alloca(I32)
        b.store(self.c(0), status)
        requests = self.request(b, 2)
        exit_ = f.append_basic_block("exit")
        with b.if_then(b.icmp_unsigned("==", b.ptrtoint(tmp, I64), self.c(0, I64)), likely=False):
            b.ret(self.c(MPI_ERROR + 17))   # (MPI_ERR_NO_MEM in MPICH, "no memory" in spirit)
        peer32, tag = b.trunc(peer, I32), self.c(PAIRWISE_TAG)

        def at(buffer, index):
            return b.gep(buffer, [b.mul(index, elsize)], source_etype=ir.IntType(8))

        def started(rc, after):
            """Continue in block `after` if `rc` is 0, else record the MPI error and exit."""
            failed = f.append_basic_block("failed")
            b.cbranch(b.icmp_signed("!=", rc, self.c(0)), failed, after)
            b.position_at_end(failed)
            b.store(b.add(rc, self.c(MPI_ERROR)), status)
            b.branch(exit_)
            b.position_at_end(after)

        def exchange(sent, sent_n, received, received_n, after):
            for k in range(2):
                b.store(self.c(0, self.H), b.gep(requests, [self.c(0), self.c(k)]))
            reqs = b.bitcast(requests, PTR)
            rc = self.mpi(b, "Isend", I32, [sent, b.trunc(sent_n, I32), mpi_type, peer32, tag, comm,
                                            reqs])
            started(rc, f.append_basic_block("sent"))
            rc = self.mpi(b, "Irecv", I32, [received, b.trunc(received_n, I32), mpi_type, peer32, tag,
                                            comm, b.bitcast(b.gep(requests, [self.c(0), self.c(1)]), PTR)])
            started(rc, f.append_basic_block("received"))
            polled = b.call(self.poll, [self.c(2), reqs])
            b.store(polled, status)
            b.cbranch(b.icmp_signed("!=", polled, self.c(0)), exit_, after)
            b.position_at_end(after)

        def clamp(n, i):
            return self.clamp(b, n, i, chunk)

        chunks = self.chunks(b, mine_n, their_n, chunk)
        entry = b.block
        head, body, phase2 = (f.append_basic_block(s) for s in ("chunk", "chunk.body", "phase2"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(self.c(0, I64), entry)
        b.cbranch(b.icmp_signed("<", i, chunks), body, phase2)
        b.position_at_end(body)
        offset = b.mul(i, chunk)
        n_sent, n_mine = clamp(their_n, i), clamp(mine_n, i)
        mine = b.add(mine_lo, offset)
        # The peer's values land in a chunk-sized buffer that stays in cache (measured faster
        # than landing in recv, and needed in place anyway), are reduced there, then copied.
        landing = tmp
        exchange(at(send, b.add(their_lo, offset)), n_sent, landing, n_mine, f.append_basic_block("got"))
        rc = self.mpi(b, "Reduce_local", I32, [at(send, mine), landing, b.trunc(n_mine, I32),
                                                 mpi_type, op])
        started(rc, f.append_basic_block("reduced"))
        from .llvm.calls import intrinsic
        intrinsic(b, "memcpy", [at(recv, mine), tmp, b.mul(n_mine, elsize),
                                ir.Constant(ir.IntType(1), 0)],
                  ret=ir.VoidType(), overloads=[PTR, PTR, I64])
        i.add_incoming(b.add(i, self.c(1, I64)), b.block)
        b.branch(head)
        b.position_at_end(phase2)
        exchange(at(recv, mine_lo), mine_n, at(recv, their_lo), their_n, exit_)
        self.mpi(b, "free", ir.VoidType(), [tmp])
        b.ret(b.load(status))
        return f

    def halves(self, b, count):
        """(mine_lo, mine_n, their_lo, their_n): process 0 reduces the first count // 2
        elements, process 1 the rest."""
        I64 = self.I64
        half = b.sdiv(count, self.c(2, I64))
        first = b.icmp_signed("==", self.slot(b, "rank"), self.c(0, I64))
        return (b.select(first, self.c(0, I64), half), b.select(first, half, b.sub(count, half)),
                b.select(first, half, self.c(0, I64)), b.select(first, b.sub(count, half), half))

    def clamp(self, b, n, i, chunk):
        """The elements of chunk i of n: min(max(n - i * chunk, 0), chunk)."""
        zero = self.c(0, self.I64)
        rest = b.sub(n, b.mul(i, chunk))
        rest = b.select(b.icmp_signed("<", rest, zero), zero, rest)
        return b.select(b.icmp_signed(">", rest, chunk), chunk, rest)

    def chunks(self, b, mine_n, their_n, chunk):
        """The chunks of the longer half."""
        longest = b.select(b.icmp_signed(">", mine_n, their_n), mine_n, their_n)
        return b.sdiv(b.add(longest, b.sub(chunk, self.c(1, self.I64))), chunk)

    def emit_await(self):
        """i32 await(ptr counter, i64 target): 0 once the shared counter (a peer's) reaches
        `target`, TIMEOUT (the communicator then broken) when it has not within the timeout.
        Polls with `pause`; every SHARED_SPIN polls it looks at the clock and yields the core
        (the peer may need it: two processes on a loaded machine)."""
        ir, I32, I64 = self.ir, self.I32, self.I64
        f, b = self.function("kiln_mpi_await", ir.FunctionType(I32, [self.PTR, I64]))
        f.linkage = "internal"
        counter, target = f.args
        D = ir.DoubleType()
        loop, done, late = (f.append_basic_block(s) for s in ("loop", "done", "late"))
        reached = b.icmp_signed(">=", b.load_atomic(counter, "acquire", 8, typ=I64), target)
        with b.if_then(reached):
            b.ret(self.c(0))
        start = self.mpi(b, "Wtime", D, [])
        timeout = b.bitcast(self.slot(b, "timeout"), D)
        before = b.block
        b.branch(loop)
        b.position_at_end(loop)
        spins = b.phi(I64)
        spins.add_incoming(self.c(0, I64), before)
        reached = b.icmp_signed(">=", b.load_atomic(counter, "acquire", 8, typ=I64), target)
        spin = f.append_basic_block("spin")
        b.cbranch(reached, done, spin)
        b.position_at_end(spin)
        if self.module.triple.startswith("x86_64"):
            b.call(self.declare("llvm.x86.sse2.pause", ir.VoidType(), []), [])
        spins_next = b.add(spins, self.c(1, I64))
        tick = b.icmp_signed("==", b.srem(spins_next, self.c(SHARED_SPIN, I64)), self.c(0, I64))
        with b.if_then(tick, likely=False):
            waited = b.fsub(self.mpi(b, "Wtime", D, []), start)
            with b.if_then(b.fcmp_ordered(">", waited, timeout), likely=False):
                b.branch(late)
            self.mpi(b, "sched_yield", I32, [])
        spins.add_incoming(spins_next, b.block)
        b.branch(loop)
        b.position_at_end(done)
        b.ret(self.c(0))
        b.position_at_end(late)
        self.time_out(b)
        return f

    def declare(self, name, ret, args):
        existing = self.module.globals.get(name)
        return existing or self.ir.Function(self.module, self.ir.FunctionType(ret, args), name)

    def emit_shared(self):
        """i32 shared(send, recv, i64 count, type, op, i64 elsize): allreduce among the K
        processes of kiln's communicator, all on one node, through the shared window
        (`_shared_window`; K = `size`). The buffer goes chunk by chunk (the state's
        `shared_chunk` bytes); chunk j splits into K pieces (`piece`), and process r reduces piece
        r. Each process copies the other processes' pieces of its chunk of `send` into its own
        staging buffer (the pieces at their offsets in the chunk) and bumps its `posted` counter;
        once every peer's `posted` says chunk j is staged everywhere, process r folds piece r in
        process order (s0 op s1 op ... op s(K-1), MPI_Reduce_local) into the piece r staged by
        `holder` (process 0, or 1 for process 0), bumps `reduced`, copies the result into recv
        and stages the next chunk (while the peers may still be reducing this one); once peer q's
        `reduced` says piece q is reduced, it copies that into recv too; then it bumps `copied`,
        and once every peer's `copied` has passed a chunk, the slot of that chunk is free for
        the chunk SHARED_SLOTS later. The counters count chunks since set-up, so they never go
        back; each wait is `emit_await` (polled against the timeout). Each element is reduced
        once, by one process, in process order: every process gets the same bits, those of a
        NumPy left fold (np.add.reduce over a stack of the processes' buffers). In place
        (send == recv) is safe: a chunk of send is staged or reduced before recv's chunk is
        written, and the peers read only the window."""
        ir, I32, I64, PTR = self.ir, self.I32, self.I64, self.PTR
        f, b = self.function("kiln_mpi_shared", ir.FunctionType(
            I32, [PTR, PTR, I64, self.H, self.H, I64]))
        f.linkage = "internal"
        send, recv, count, mpi_type, op, elsize = f.args
        wait = self.emit_await()
        byte = ir.IntType(8)
        from .llvm.calls import intrinsic
        from .llvm.loops import counted_loop
        rank, size = self.slot(b, "rank"), self.slot(b, "size")
        chunk_bytes = self.slot(b, "shared_chunk")
        chunk = b.sdiv(chunk_bytes, elsize)
        chunks = self.chunks(b, count, count, chunk)
        regions = b.inttoptr(self.slot(b, "shared_regions"), PTR)
        streamer = self.emit_stream()

        def region(q):
            return b.inttoptr(b.load(b.gep(regions, [q], source_etype=I64), typ=I64), PTR)
        me = region(rank)

        def counter(region, name):
            return b.gep(region, [self.c(SHARED_LINE * SHARED_COUNTERS.index(name), I64)],
                         source_etype=byte)

        def at(buffer, index):
            return b.gep(buffer, [b.mul(index, elsize)], source_etype=byte)

        def fail_on(status, value):
            with b.if_then(b.icmp_signed("!=", status, self.c(0)), likely=False):
                b.ret(value)

        def peers(name, visit):
            """visit(q) for every process q but this one."""
            def body(_, q, carried):
                with b.if_then(b.icmp_signed("!=", q, rank)):
                    visit(q)
                return carried
            counted_loop(b, size, body, (), name)

        def awaited(q, name, target):
            status = b.call(wait, [counter(region(q), name), target])
            fail_on(status, status)

        def bump(name, value):
            b.atomic_rmw("xchg", counter(me, name), value, "release")

        def copy(to, source, n):
            intrinsic(b, "memcpy", [to, source, b.mul(n, elsize), ir.Constant(ir.IntType(1), 0)],
                      ret=ir.VoidType(), overloads=[PTR, PTR, I64])

        def stream(to, source, n):
            b.call(streamer, [to, source, b.mul(n, elsize)])

        def piece(n, q):
            """(first element, elements) of piece q of a chunk of n elements"""
            lo = b.sdiv(b.mul(n, q), size)
            return lo, b.sub(b.sdiv(b.mul(n, b.add(q, self.c(1, I64))), size), lo)

        def holder(q):
            """the process whose staging buffer piece q is reduced in"""
            return b.select(b.icmp_signed("==", q, self.c(0, I64)), self.c(1, I64), self.c(0, I64))

        base = b.load_atomic(counter(me, "posted"), "monotonic", 8, typ=I64)

        def place(j):
            """(chunk j's number since set-up + 1, its slot's offset in a region, its first
            element, its elements)"""
            t = b.add(base, j)
            offset = b.add(self.c(SHARED_DATA, I64),
                           b.mul(b.srem(t, self.c(SHARED_SLOTS, I64)), chunk_bytes))
            return (b.add(t, self.c(1, I64)), offset, b.mul(j, chunk),
                    self.clamp(b, count, j, chunk))

        def stage(j):
            """Copy the other pieces of chunk j into this process's buffer once every peer is
            done with the chunk SHARED_SLOTS earlier there."""
            done, offset, start, n = place(j)
            peers("free", lambda q: awaited(q, "copied", b.sub(done, self.c(SHARED_SLOTS, I64))))
            lo, mine = piece(n, rank)
            hi = b.add(lo, mine)
            staged = b.gep(me, [offset], source_etype=byte)
            copy(staged, at(send, start), lo)
            copy(at(staged, hi), at(send, b.add(start, hi)), b.sub(n, hi))
            bump("posted", done)

        stage(self.c(0, I64))

        def body(_, j, carried):
            done, offset, start, n = place(j)
            peers("posted", lambda q: awaited(q, "posted", done))
            lo, mine = piece(n, rank)
            keeper = holder(rank)
            result = at(b.gep(region(keeper), [offset], source_etype=byte), lo)

            def fold(_, q, carried):
                with b.if_then(b.icmp_signed("!=", q, keeper)):
                    staged = at(b.gep(region(q), [offset], source_etype=byte), lo)
                    source = b.select(b.icmp_signed("==", q, rank), at(send, b.add(start, lo)),
                                      staged)
                    rc = self.mpi(b, "Reduce_local", I32, [source, result, b.trunc(mine, I32),
                                                           mpi_type, op])
                    fail_on(rc, b.add(rc, self.c(MPI_ERROR)))
                return carried
            counted_loop(b, size, fold, (), "fold")
            bump("reduced", done)
            stream(at(recv, b.add(start, lo)), result, mine)
            following = b.add(j, self.c(1, I64))
            with b.if_then(b.icmp_signed("<", following, chunks)):
                stage(following)   # (while the peers reduce chunk j)

            def gather(q):
                awaited(q, "reduced", done)
                first, elements = piece(n, q)
                reduced = b.gep(region(holder(q)), [offset], source_etype=byte)
                stream(at(recv, b.add(start, first)), at(reduced, first), elements)
            peers("gather", gather)
            bump("copied", done)
            return carried
        counted_loop(b, chunks, body, (), "chunk")
        if self.module.triple.startswith("x86_64"):   # (order the streaming stores)
            b.call(self.declare("llvm.x86.sse.sfence", ir.VoidType(), []), [])
        b.ret(self.c(0))
        return f

    def emit_stream(self):
        """void stream(ptr to, ptr from, i64 bytes): a copy whose stores bypass the cache
        (non-temporal) from the first 64-byte boundary of `to` on, so that writing recv does
        not first read it into the cache; memcpy for the ends."""
        ir, I64, PTR = self.ir, self.I64, self.PTR
        f, b = self.function("kiln_mpi_stream", ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]))
        f.linkage = "internal"
        to, source, nbytes = f.args
        byte, line = ir.IntType(8), ir.VectorType(I64, 8)
        from .llvm.calls import intrinsic
        from .llvm.loops import counted_loop

        def memcpy(offset, n):
            intrinsic(b, "memcpy", [b.gep(to, [offset], source_etype=byte),
                                    b.gep(source, [offset], source_etype=byte), n,
                                    ir.Constant(ir.IntType(1), 0)],
                      ret=ir.VoidType(), overloads=[PTR, PTR, I64])
        misaligned = b.and_(b.sub(self.c(0, I64), b.ptrtoint(to, I64)), self.c(63, I64))
        head = b.select(b.icmp_unsigned("<", nbytes, misaligned), nbytes, misaligned)
        memcpy(self.c(0, I64), head)
        lines = b.udiv(b.sub(nbytes, head), self.c(64, I64))
        nontemporal = self.module.add_metadata([self.c(1)])

        def body(_, k, carried):
            offset = b.add(head, b.mul(k, self.c(64, I64)))
            value = b.load(b.gep(source, [offset], source_etype=byte), typ=line, align=1)
            b.store(value, b.gep(to, [offset], source_etype=byte), align=64).set_metadata(
                "nontemporal", nontemporal)
            return carried
        counted_loop(b, lines, body, (), "line")
        done = b.add(head, b.mul(lines, self.c(64, I64)))
        memcpy(done, b.sub(nbytes, done))
        b.ret_void()
        return f

    def emit_blocks(self, name, mpi_name):
        f, b = self.function(f"kiln_mpi_{name}", function_type(name))
        send, recv, count, dtype = f.args
        comm = self.guard(b, [count], dtype)
        mpi_type = self.handle(b, self.table(b, "types", dtype))
        n = b.trunc(count, self.I32)
        self.start(b, mpi_name, [send, n, mpi_type, recv, n, mpi_type, comm])

    def emit_sendrecv(self):
        f, b = self.function("kiln_mpi_sendrecv", function_type("sendrecv"))
        send, dest, recv, source, count, dtype, tag = f.args
        comm = self.guard(b, [count], dtype)
        mpi_type = self.handle(b, self.table(b, "types", dtype))
        n = b.trunc(count, self.I32)
        requests = self.request(b, 2)
        posted = b.alloca(self.I32)
        b.store(self.c(0), posted)
        for peer, buffer, mpi_name in ((source, recv, "Irecv"), (dest, send, "Isend")):
            with b.if_then(b.icmp_signed(">=", peer, self.c(0, self.I64))):
                k = b.load(posted)
                rc = self.mpi(b, mpi_name, self.I32, [
                    buffer, n, mpi_type, b.trunc(peer, self.I32), tag, comm,
                    b.bitcast(b.gep(requests, [self.c(0), k]), self.PTR)])
                with b.if_then(b.icmp_signed("!=", rc, self.c(0)), likely=False):
                    b.ret(b.add(rc, self.c(MPI_ERROR)))
                b.store(b.add(k, self.c(1)), posted)
        b.ret(b.call(self.poll, [b.load(posted), b.bitcast(requests, self.PTR)]))

    def emit_reduce_scatter(self):
        f, b = self.function("kiln_mpi_reduce_scatter", function_type("reduce_scatter"))
        send, recv, count, dtype, op = f.args
        comm = self.guard(b, [count], dtype)
        mpi_op = self.operation(b, dtype, op)
        mpi_type = self.handle(b, self.table(b, "types", dtype))
        self.start(b, "Ireduce_scatter_block", [send, recv, b.trunc(count, self.I32), mpi_type,
                                                mpi_op, comm])

    def emit_exchange(self):
        """Post every record's receive and send (requests and their statuses in one malloc'd
        block: there may be many), poll them together, free the block."""
        ir, I32, I64, PTR = self.ir, self.I32, self.I64, self.PTR
        f, b = self.function("kiln_mpi_exchange", function_type("exchange"))
        records, n, count, dtype = f.args
        comm = self.guard(b, [count], dtype)
        mpi_type = self.handle(b, self.table(b, "types", dtype))
        count32 = b.trunc(count, I32)
        hsize = self.c(self.H.width // 8, I64)
        requests = self.mpi(b, "malloc", PTR, [b.add(b.mul(b.mul(n, self.c(2, I64)), hsize),
                                                     self.c(8, I64))])
        with b.if_then(b.icmp_unsigned("==", b.ptrtoint(requests, I64), self.c(0, I64)),
                       likely=False):
            b.ret(self.c(MPI_ERROR + 17))   # (as emit_pairwise: no memory)
        posted = b.alloca(I32)
        status = b.alloca(I32)
        b.store(self.c(0), posted)
        b.store(self.c(0), status)
        field = {name: k for k, name in enumerate(EXCHANGE_RECORD)}
        record_type = ir.ArrayType(I64, len(EXCHANGE_RECORD))
        from .llvm.loops import counted_loop

        def post(b, k, carried):
            record = b.load(b.gep(records, [k], source_etype=PTR), typ=PTR)

            def word(name):
                return b.load(b.gep(record, [self.c(0), self.c(field[name])],
                                    source_etype=record_type), typ=I64)
            for side, peer, tag, mpi_name in (("recv", "source", "recv_tag", "Irecv"),
                                              ("send", "dest", "send_tag", "Isend")):
                with b.if_then(b.icmp_signed(">=", word(peer), self.c(0, I64))):
                    at = b.load(posted)
                    rc = self.mpi(b, mpi_name, I32, [
                        b.inttoptr(word(side), PTR), count32, mpi_type, b.trunc(word(peer), I32),
                        b.trunc(word(tag), I32), comm,
                        b.gep(requests, [b.mul(b.zext(at, I64), hsize)], source_etype=ir.IntType(8))])
                    with b.if_then(b.icmp_signed("!=", rc, self.c(0)), likely=False):
                        b.store(b.add(rc, self.c(MPI_ERROR)), status)
                    b.store(b.add(at, self.c(1)), posted)
            return carried
        counted_loop(b, n, post, (), "k")
        failed = b.icmp_signed("!=", b.load(status), self.c(0))
        polled = b.call(self.poll, [b.load(posted), requests])
        result = b.select(failed, b.load(status), polled)
        self.mpi(b, "free", ir.VoidType(), [requests])
        b.ret(result)

    def operation(self, b, dtype, op):
        """The MPI handle of `op` on `dtype`; returns UNSUPPORTED early when there is none."""
        with b.if_then(b.icmp_unsigned(">=", op, self.c(len(OPS))), likely=False):
            b.ret(self.c(UNSUPPORTED))
        mpi_op = self.table(b, "ops", b.add(b.mul(dtype, self.c(len(OPS))), op))
        with b.if_then(b.icmp_signed("==", mpi_op, self.c(0, self.I64)), likely=False):
            b.ret(self.c(UNSUPPORTED))
        return self.handle(b, mpi_op)

    def emit_abort(self):
        f, b = self.function("kiln_mpi_abort", function_type("abort"))
        comm = self.handle(b, self.slot(b, "comm"))
        self.mpi(b, "Abort", self.I32, [comm, f.args[0]])
        b.ret_void()

    def emit_f16_op(self, op):
        """void kiln_mpi_f16_<op>(ptr in, ptr inout, ptr len, ptr datatype): an MPI user op."""
        from .llvm.loops import counted_loop
        ir = self.ir
        half, single = ir.HalfType(), ir.FloatType()
        f, b = self.function(f"kiln_mpi_f16_{op}", ir.FunctionType(ir.VoidType(), [self.PTR] * 4))
        source, inout, length, _ = f.args
        n = b.sext(b.load(length, typ=self.I32), self.I64)

        def body(b2, i, carried):
            x = b2.fpext(b2.load(b2.gep(source, [i], source_etype=half), typ=half), single)
            at = b2.gep(inout, [i], source_etype=half)
            y = b2.fpext(b2.load(at, typ=half), single)
            if op == "sum":
                r = b2.fadd(x, y)
            else:   # NaN in either operand gives NaN, as jnp.maximum/minimum
                better = b2.fcmp_unordered(">" if op == "max" else "<", x, y)
                r = b2.select(better, x, y)
                r = b2.select(b2.fcmp_unordered("uno", y, y), y, r)
            b2.store(b2.fptrunc(r, half), at)
            return carried
        counted_loop(b, n, body, (), "k")
        b.ret_void()
