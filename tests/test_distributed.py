"""kiln.distributed and the cross-process collective engine (compiler/backends/mpi_engine.py).

The multi-process tests run small scripts under `mpirun -np 2` (and 3) on this machine, each with
a wall-clock limit: every collective through both faces of the engine (the Python functions and
IR emitted by the emit_* helpers, compiled by kiln's JIT), for every dtype, against NumPy; a rank
that stops or dies makes the other fail within KILN_DISTRIBUTED_TIMEOUT instead of hanging. They
are skipped only when mpi4py (or its mpirun) is not installed; `make test` installs both (the
`mpi` extra). The one-process behaviour and the error messages are tested in this process.
"""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import kiln
from kiln import distributed
from kiln.compiler.backends import mpi_engine

HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None
MPIRUN = shutil.which("mpirun", path=os.path.dirname(sys.executable)) or shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(
    not (HAVE_MPI4PY and MPIRUN),
    reason="mpi4py and mpirun are not installed (pip install 'kiln[mpi]'; make test installs them)")


def mpirun(tmp_path, script, np_=2, env=None, limit=90, args=()):
    """Run `script` on `np_` processes; (return code, combined output, seconds)."""
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    return launch([sys.executable, str(path), *args], np_, env, limit)


def launch(program, np_=2, env=None, limit=90):
    """Run the command `program` (a list) on `np_` processes under mpirun; (return code,
    combined output, seconds)."""
    env = {**os.environ, **(env or {})}
    for name in list(env):   # (pytest-xdist's worker variables would confuse nothing, but an
        if name.startswith(("OMPI_", "PMIX_", "PRTE_")):   # outer MPI job's would)
            del env[name]
    command = [MPIRUN, "-np", str(np_), "--oversubscribe"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    for name in ("KILN_DISTRIBUTED_TIMEOUT", "KILN_CACHE_DIR", "KILN_CPU", "KILN_LOG_COMPILES",
                 distributed.SHARED_MEMORY_VARIABLE):
        if name in env:
            command += ["-x", name]
    command += program
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=limit,
                            stdin=subprocess.DEVNULL)
    return result.returncode, result.stdout + result.stderr, time.monotonic() - start


@pytest.fixture
def fresh_world(monkeypatch):
    """kiln.distributed as never initialised, restored afterwards; no launcher variables."""
    for name in distributed.LAUNCHER_VARIABLES + (distributed.TIMEOUT_VARIABLE,):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(distributed, "_WORLD", None)
    yield
    distributed._WORLD = None


# -- one process --------------------------------------------------------------------------------

def test_one_process_without_a_launcher(fresh_world):
    assert kiln.distributed is distributed
    assert distributed.process_layout() == (0, 1) and not distributed.is_initialized()
    distributed.initialize(local_device_ids=3)
    assert distributed.is_initialized() and distributed.process_layout() == (0, 1)
    assert distributed.requested_local_device_ids() == [3]
    with pytest.raises(RuntimeError, match="should only be called once"):
        distributed.initialize()
    distributed.shutdown()
    assert not distributed.is_initialized()
    distributed.shutdown()   # (a no-op when not initialised, as JAX's)
    distributed.initialize(num_processes=1, process_id=0, coordinator_address="localhost:1234")
    assert distributed.process_layout() == (0, 1)


def test_jax_signature():
    import inspect
    names = list(inspect.signature(distributed.initialize).parameters)
    assert names == ["coordinator_address", "num_processes", "process_id", "local_device_ids",
                     "cluster_detection_method", "initialization_timeout",
                     "heartbeat_timeout_seconds", "shutdown_timeout_seconds",
                     "coordinator_bind_address", "slice_index", "partition_index"]


def test_errors_without_a_launcher(fresh_world, monkeypatch):
    with pytest.raises(ValueError, match=r"num_processes=2 but no MPI launcher.*mpirun -np 2"):
        distributed.initialize(num_processes=2)
    with pytest.raises(ValueError, match="process_id=1 in a one-process run"):
        distributed.initialize(process_id=1)
    with pytest.raises(ValueError, match="cluster_detection_method must be one of"):
        distributed.initialize(cluster_detection_method="tpu")
    assert not distributed.is_initialized()
    monkeypatch.setenv("KILN_DISTRIBUTED_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="KILN_DISTRIBUTED_TIMEOUT='soon'"):
        distributed.initialize()
    monkeypatch.setenv("KILN_DISTRIBUTED_TIMEOUT", "2.5")
    assert distributed.timeout() == 2.5


def test_missing_mpi4py_names_the_extra(fresh_world, monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)   # (import mpi4py then raises ImportError)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    with pytest.raises(ImportError, match=r"pip install 'kiln\[mpi\]'"):
        distributed.initialize()
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE")
    with pytest.raises(ImportError, match=r"pip install 'kiln\[mpi\]'"):
        distributed.initialize(cluster_detection_method="mpi4py")
    assert not distributed.is_initialized()


def test_launcher_detection():
    assert not distributed.launched_by_mpi({})
    assert distributed.launched_by_mpi({"OMPI_COMM_WORLD_SIZE": "2"})
    assert distributed.launched_by_mpi({"PMI_RANK": "0"})


def test_engine_before_setup():
    if mpi_engine.is_set_up():
        pytest.skip("MPI is set up in this process")
    with pytest.raises(mpi_engine.DistributedError, match="initialize"):
        mpi_engine.allreduce(np.ones(3))
    with pytest.raises(mpi_engine.DistributedError, match="under mpirun"):
        mpi_engine.address("allreduce")
    with pytest.raises(TypeError, match="no cross-process collective on <U1"):
        mpi_engine.allreduce(np.array(["a"]))


def test_statuses_become_errors():
    assert mpi_engine.is_status(mpi_engine.TIMEOUT) and not mpi_engine.is_status(0)
    assert not mpi_engine.is_status(2) and not mpi_engine.is_status(-0x4B494C00)
    assert isinstance(mpi_engine.error(mpi_engine.TIMEOUT), mpi_engine.DistributedTimeoutError)
    assert "did not complete" in str(mpi_engine.error(mpi_engine.TIMEOUT))
    assert "MPI error 5" in str(mpi_engine.error(mpi_engine.MPI_ERROR + 5))
    assert distributed.DistributedTimeoutError is mpi_engine.DistributedTimeoutError


def test_a_compiled_functions_mpi_status_raises_the_engines_error():
    """kiln_main returning a kiln_mpi_* status (emit_return_on_error) raises DistributedError."""
    from types import SimpleNamespace
    from kiln.compiler.backends.llvm.executable import Executable
    fake = SimpleNamespace(function=SimpleNamespace(name="step"))
    error = Executable._failure(fake, mpi_engine.TIMEOUT)
    assert isinstance(error, mpi_engine.DistributedTimeoutError)
    assert str(error).startswith("compiled code for step did not complete within")
    assert type(Executable._failure(fake, 12345)) is RuntimeError


def test_emit_helpers_call_the_externs():
    import llvmlite.ir as ir
    module = ir.Module(name="probe")
    I32, I64, PTR = ir.IntType(32), ir.IntType(64), ir.PointerType()
    f = ir.Function(module, ir.FunctionType(I32, [PTR, PTR]), "f")
    b = ir.IRBuilder(f.append_basic_block())
    send, recv = f.args
    for status in (mpi_engine.emit_allreduce(b, send, recv, 4, np.float32, "max"),
                   mpi_engine.emit_allgather(b, send, recv, 4, np.int8),
                   mpi_engine.emit_alltoall(b, send, recv, ir.Constant(I64, 2), np.complex64),
                   mpi_engine.emit_sendrecv(b, send, 1, recv, 0, 4, np.float16, tag=7),
                   mpi_engine.emit_reduce_scatter(b, send, recv, 3, np.float64, "sum"),
                   mpi_engine.emit_exchange(b, send, 2, 5, np.bool_)):
        mpi_engine.emit_return_on_error(b, status)
    b.ret(ir.Constant(I32, 0))
    text = str(module)
    for name in ("allreduce", "allgather", "alltoall", "sendrecv", "reduce_scatter", "exchange"):
        assert f'@"probe.kiln_mpi_{name}"' in text
    for emit in (mpi_engine.emit_allreduce, mpi_engine.emit_reduce_scatter):
        with pytest.raises(ValueError, match="one of"):
            emit(b, send, recv, 4, np.float32, "prod")


# -- several processes --------------------------------------------------------------------------

COLLECTIVES = """
import ctypes, sys
import numpy as np
import llvmlite.ir as ir
import kiln
from kiln.compiler.backends import mpi_engine as E
from kiln.compiler.backends.llvm import externs, target

kiln.distributed.initialize()
rank, size = kiln.distributed.process_layout()
assert (rank, size) == (kiln.distributed._WORLD.comm.Get_rank(), {size})

# The IR face: one function per collective, emitted with the emit_* helpers, compiled by kiln's
# JIT, externs bound as for any compiled function.
I32, I64, PTR = ir.IntType(32), ir.IntType(64), ir.PointerType()
module = ir.Module(name="mpi_probe")
module.triple = target.triple()
def define(name, params, emit):
    f = ir.Function(module, ir.FunctionType(I32, params), name)
    b = ir.IRBuilder(f.append_basic_block())
    b.ret(emit(b, *f.args))
for code, dtype in enumerate(E.DTYPES):
    for op in E.OPS:
        define(f"allreduce_{{code}}_{{op}}", [PTR, PTR, I64],
               lambda b, s, r, n: E.emit_allreduce(b, s, r, n, dtype, op))
    define(f"allgather_{{code}}", [PTR, PTR, I64], lambda b, s, r, n: E.emit_allgather(b, s, r, n, dtype))
    define(f"alltoall_{{code}}", [PTR, PTR, I64], lambda b, s, r, n: E.emit_alltoall(b, s, r, n, dtype))
    define(f"sendrecv_{{code}}", [PTR, I64, PTR, I64, I64],
           lambda b, s, d, r, src, n: E.emit_sendrecv(b, s, d, r, src, n, dtype, tag=3))
    for op in E.OPS:
        define(f"reduce_scatter_{{code}}_{{op}}", [PTR, PTR, I64],
               lambda b, s, r, n: E.emit_reduce_scatter(b, s, r, n, dtype, op))
    define(f"exchange_{{code}}", [PTR, I64, I64],
           lambda b, records, n, count: E.emit_exchange(b, records, n, count, dtype))
loaded = target.load_object(module.name, target.object_code(target.optimize(str(module), module.name)),
                            entry=False)
bound = externs.bind_externs(loaded.global_address, module.name)
assert set(bound) == {{"kiln_mpi_allreduce", "kiln_mpi_allgather", "kiln_mpi_alltoall",
                      "kiln_mpi_sendrecv", "kiln_mpi_reduce_scatter", "kiln_mpi_exchange"}}, bound
P, N = ctypes.c_void_p, ctypes.c_int64
def native(name, *types):
    return ctypes.CFUNCTYPE(ctypes.c_int32, *types)(loaded.function_address(name))
def check(status):
    if status:
        raise E.error(status)

def value(dtype, k, shape=(7,)):
    "process k's operand: small values every dtype holds exactly, negatives where signed"
    dtype = np.dtype(dtype)
    x = (np.arange(int(np.prod(shape))).reshape(shape) * 3 + 5 * k) % (2 if dtype.kind == "b" else 11)
    if dtype.kind in "ifc":
        x = x - 4
    if dtype.kind == "c":
        x = x + 1j * (x + 1)
    return x.astype(dtype)

everyone = lambda dtype, shape=(7,): [value(dtype, k, shape) for k in range(size)]

def expected_of(dtype, op, values):
    if np.dtype(dtype).kind == "b":
        return np.logical_and.reduce(values) if op == "min" else np.logical_or.reduce(values)
    return {{"sum": np.sum, "max": np.max, "min": np.min}}[op](np.stack(values), axis=0).astype(dtype)

# exchange: a ring of blocks, block k of process r to block (k + 1) % 3 of process r + 1 (tag:
# the receiving block); block 2 of process 0 stays home, so block 0 of process 1 gets nothing
def exchange_plan(rank):
    dests = [(rank + 1) % size if not (rank == 0 and k == 2) else None for k in range(3)]
    sources = [(rank - 1) % size if not (rank == 1 % size and k == 0) else None for k in range(3)]
    return dests, sources, [(k + 1) % 3 for k in range(3)], list(range(3))
for code, dtype in enumerate(E.DTYPES):
    mine = value(dtype, rank)
    for op in E.OPS:
        if dtype.kind == "c" and op != "sum":
            try:
                E.allreduce(mine, op)
            except E.DistributedError as e:
                assert "unsupported" in str(e)
            else:
                raise AssertionError("complex max")
            assert native(f"allreduce_{{code}}_{{op}}", P, P, N)(mine.ctypes.data, mine.ctypes.data, 7) == E.UNSUPPORTED
            continue
        expected = expected_of(dtype, op, everyone(dtype))
        got = E.allreduce(mine, op)
        assert got.dtype == dtype and np.array_equal(got, expected), (dtype, op, got, expected)
        out = np.empty_like(mine)
        check(native(f"allreduce_{{code}}_{{op}}", P, P, N)(mine.ctypes.data, out.ctypes.data, 7))
        assert np.array_equal(out, expected), (dtype, op, "native", out, expected)
        inplace = mine.copy()   # send == recv: MPI_IN_PLACE
        check(native(f"allreduce_{{code}}_{{op}}", P, P, N)(inplace.ctypes.data, inplace.ctypes.data, 7))
        assert np.array_equal(inplace, expected), (dtype, op, "in place")
        blocks = [value(dtype, k, (size, 4)) for k in range(size)]   # reduce_scatter: block rank
        expected = expected_of(dtype, op, [v[rank] for v in blocks])
        assert np.array_equal(E.reduce_scatter(blocks[rank], op), expected), (dtype, op)
        out = np.empty(4, dtype)
        check(native(f"reduce_scatter_{{code}}_{{op}}", P, P, N)(blocks[rank].ctypes.data, out.ctypes.data, 4))
        assert np.array_equal(out, expected), (dtype, op, "reduce_scatter native")
    gathered = np.stack(everyone(dtype))
    assert np.array_equal(E.allgather(mine), gathered)
    out = np.empty((size, 7), dtype)
    check(native(f"allgather_{{code}}", P, P, N)(mine.ctypes.data, out.ctypes.data, 7))
    assert np.array_equal(out, gathered)
    blocks = value(dtype, rank, (size, 3))
    expected = np.stack([value(dtype, k, (size, 3))[rank] for k in range(size)])
    assert np.array_equal(E.alltoall(blocks), expected)
    out = np.empty_like(blocks)
    check(native(f"alltoall_{{code}}", P, P, N)(blocks.ctypes.data, out.ctypes.data, 3))
    assert np.array_equal(out, expected)
    right, left = (rank + 1) % size, (rank - 1) % size   # a ring shift, as ppermute
    assert np.array_equal(E.sendrecv(mine, right, left), value(dtype, left))
    out = np.empty_like(mine)
    check(native(f"sendrecv_{{code}}", P, N, P, N, N)(mine.ctypes.data, right, out.ctypes.data, left, 7))
    assert np.array_equal(out, value(dtype, left))
    dests, sources, send_tags, recv_tags = exchange_plan(rank)
    blocks = value(dtype, rank, (3, 5))
    expected = np.zeros_like(blocks)
    for k in range(3):
        if sources[k] is not None:
            expected[k] = value(dtype, sources[k], (3, 5))[(k - 1) % 3]
    assert np.array_equal(E.exchange(blocks, dests, sources, send_tags, recv_tags), expected)
    out = np.zeros_like(blocks)
    records = np.array([[blocks[k].ctypes.data, -1 if dests[k] is None else dests[k], send_tags[k],
                         out[k].ctypes.data, -1 if sources[k] is None else sources[k], recv_tags[k]]
                        for k in range(3)], np.int64)
    pointers = np.array([records[k].ctypes.data for k in range(3)], np.int64)
    check(native(f"exchange_{{code}}", P, N, N)(pointers.ctypes.data, 3, 5))
    assert np.array_equal(out, expected), (dtype, "exchange native")
# one side only: process 0 sends to the last, which receives; the others take no part
last = size - 1
got = E.sendrecv(mine, last if rank == 0 else None, 0 if rank == last else None)
assert (got is None) == (rank != last) and (got is None or np.array_equal(got, value(mine.dtype, 0)))
# buffers of several MB: between two processes these take the point-to-point path of the engine
# (mpi_engine.PAIRWISE_BYTES), several chunks of it, in place too; odd counts split unevenly
for dtype, op, n in (("float32", "sum", 1_000_003), ("float64", "max", 700_001), ("int16", "min", 1_500_000),
                     ("float16", "sum", 1_400_001), ("bool", "max", 2_500_000), ("complex64", "sum", 400_001)):
    code = E.DTYPE_CODES[np.dtype(dtype)]
    values = [value(dtype, k, (n,)) for k in range(size)]
    if dtype == "bool":
        expected = np.logical_or.reduce(values)
    else:
        expected = {{"sum": np.sum, "max": np.max, "min": np.min}}[op](np.stack(values), axis=0).astype(dtype)
    assert np.array_equal(E.allreduce(values[rank], op), expected), (dtype, op, n)
    inplace = values[rank].copy()
    check(native(f"allreduce_{{code}}_{{op}}", P, P, N)(inplace.ctypes.data, inplace.ctypes.data, n))
    assert np.array_equal(inplace, expected), (dtype, op, n, "in place")
    assert E.allreduce(inplace, op, out=inplace) is inplace and np.array_equal(inplace, expected) == (op != "sum")
# an empty buffer and a NaN under max/min
assert E.allreduce(np.zeros(0, np.float32)).shape == (0,)
x = np.array([np.nan if rank == 0 else 1.0, 2.0], np.float16)
assert np.isnan(E.allreduce(x, "max")[0]) and E.allreduce(x, "min")[1] == 2
kiln.distributed.shutdown()
print(f"process {{rank}} of {{size}}: every collective agrees with NumPy", flush=True)
"""


@needs_mpi
@pytest.mark.parametrize("size", [2, 3])
def test_collectives_across_processes(tmp_path, size):
    code, output, _ = mpirun(tmp_path, COLLECTIVES.format(size=size), np_=size)
    assert code == 0, output
    for rank in range(size):
        assert f"process {rank} of {size}: every collective agrees with NumPy" in output, output


DEAD_RANK = """
import os, signal, sys, time
import numpy as np
import kiln
from kiln.compiler.backends import mpi_engine as E
kiln.distributed.initialize()
rank, size = kiln.distributed.process_layout()
assert E.allreduce(np.ones(2))[0] == size   # both alive: fine
E.set_timeout(float(sys.argv[1]))   # (short only now: starting up may take longer on a busy machine)
if rank == 1:
    os.kill(os.getpid(), signal.{signal})    # SIGSTOP: hangs; SIGKILL: dies
start = time.monotonic()
try:
    E.allreduce(np.ones({count}, np.float32))
except kiln.distributed.DistributedTimeoutError as e:
    print(f"rank {{rank}} after {{time.monotonic() - start:.1f}} s: {{e}}", flush=True)
try:
    E.allgather(np.ones(4))
except kiln.distributed.DistributedError as e:
    print(f"then: {{e}}", flush=True)
sys.exit(3)
"""


@needs_mpi
def test_a_stopped_rank_makes_the_other_fail_not_hang(tmp_path):
    code, output, seconds = mpirun(tmp_path, DEAD_RANK.format(signal="SIGSTOP", count=4), args=["2"])
    assert code != 0, output
    assert "did not complete within 2 s on process 0 of 2" in output, output
    assert "then: " in output and "an earlier cross-process operation timed out" in output, output
    assert "aborting the MPI job" in output and "MPI_ABORT was invoked" in output, output
    assert seconds < 40, (seconds, output)


@needs_mpi
def test_a_stopped_rank_fails_a_shared_memory_allreduce(tmp_path):
    """A large allreduce between two processes on this machine waits on counters in the shared
    window (mpi_engine.SHARED_BYTES): a stopped peer gives the timeout there too."""
    count = 4 * mpi_engine.SHARED_CHUNK // 4 + 1
    code, output, seconds = mpirun(tmp_path, DEAD_RANK.format(signal="SIGSTOP", count=count),
                                   args=["2"])
    assert code != 0, output
    assert "allreduce(sum) did not complete within 2 s on process 0 of 2" in output, output
    assert "then: " in output and "an earlier cross-process operation timed out" in output, output
    assert seconds < 40, (seconds, output)


LATE_WINDOW = """
import os, time
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
if rank == 1:   # this process skips the shared window, so the others wait for it in vain
    os.environ["KILN_DISTRIBUTED_SHARED_MEMORY"] = "0"
import kiln
start = time.monotonic()
try:
    kiln.distributed.initialize()
except kiln.distributed.DistributedTimeoutError as e:
    print(f"rank {rank} after {time.monotonic() - start:.1f} s: {e}", flush=True)
else:
    time.sleep(60)   # (until the job is aborted)
"""


@needs_mpi
def test_a_process_that_never_sets_up_the_window_fails_initialize(tmp_path):
    """Setting up the shared window at initialize waits for every process with the engine's
    timeout: a process that never comes (here one that skips the window) makes the others
    raise, naming what to do, and the job is aborted, instead of hanging."""
    code, output, seconds = mpirun(tmp_path, LATE_WINDOW, np_=3,
                                   env={"KILN_DISTRIBUTED_TIMEOUT": "2"})
    assert code != 0, output
    # (the first to time out aborts the job: the other may not get to print)
    assert re.search(r"setting up the shared-memory window of the allreduce \(kiln\.distributed"
                     r"\.initialize\) did not complete within 2 s on process [02] of 3", output), output
    assert "Every process of the MPI job must call it" in output, output
    assert "aborting the MPI job" in output, output
    assert seconds < 40, (seconds, output)


TWO_NODES = """
import numpy as np
from mpi4py import MPI
from kiln.compiler.backends import mpi_engine as E


class TwoNodes(MPI.Intracomm):
    "processes 0 and 1 on one node, 2 and 3 on another: MPI_Comm_split_type's node communicators, simulated"
    def Split_type(self, split_type, key=0, info=MPI.INFO_NULL):
        return self.Split(self.Get_rank() // 2, key)


comm = TwoNodes(MPI.COMM_WORLD.Dup())
E.setup(comm, 30.0)
rank, size = comm.Get_rank(), comm.Get_size()
assert E._STATE.words[E.SLOT["shared_regions"]] == 0, "a window across two nodes"
x = np.arange(E.SHARED_BYTES, dtype=np.int32) * (rank + 1)
assert np.array_equal(E.allreduce(x), np.arange(E.SHARED_BYTES, dtype=np.int32) * 10)
E.teardown()
print(f"process {rank}: no window across two nodes", flush=True)
"""


@needs_mpi
def test_processes_on_several_nodes_share_no_window(tmp_path):
    """The shared window serves only processes that are all on one node: four processes split
    into two simulated nodes of two make none (their allreduce goes through MPI)."""
    code, output, _ = mpirun(tmp_path, TWO_NODES, np_=4)
    assert code == 0, output
    assert output.count("no window across two nodes") == 4, output


SHARED_ALLREDUCE = """
import functools, zlib
import numpy as np
import kiln
from kiln.compiler.backends import mpi_engine as E
kiln.distributed.initialize()
rank, size = kiln.distributed.process_layout()
comm = kiln.distributed._WORLD.comm
assert (E._STATE.words[E.SLOT["shared_regions"]] != 0) == {shared}
rng = np.random.default_rng(rank)
checked = 0
for dtype in E.DTYPES:
    item = dtype.itemsize
    edge, chunk = E.SHARED_BYTES // item, E.SHARED_CHUNK // item
    # 0 and tiny counts (MPI_Iallreduce), around the threshold, one chunk, one more element
    # (a second chunk whose pieces are empty but one), several chunks and a rest that the
    # processes split unevenly
    for n in {counts}:
        if dtype.kind == "b":
            x = rng.random(n) < 0.5
        elif dtype.kind in "iu":   # no overflow: Open MPI's vector sums of 8- and 16-bit
            x = rng.integers(0 if dtype.kind == "u" else -30, 30, n).astype(dtype)   # saturate
        else:
            x = rng.standard_normal(n).astype(dtype)
            if dtype.kind == "c":
                x = x + 1j * rng.standard_normal(n).astype(dtype)
        everyone = comm.allgather(x)
        for op in E.OPS:
            if dtype.kind == "c" and op != "sum":
                continue
            if dtype.kind == "b":
                ufunc = np.logical_and if op == "min" else np.logical_or
            else:
                ufunc = {{"sum": np.add, "max": np.maximum, "min": np.minimum}}[op]
            # a left fold in process order: the shared window's order, bit for bit
            want = functools.reduce(ufunc, everyone).astype(dtype)
            for in_place in (False, True):
                buffer = x.copy()
                got = E.allreduce(buffer, op, out=buffer if in_place else None)
                assert np.array_equal(buffer, x) != in_place or n == 0 or np.array_equal(want, x)
                if n * item >= E.SHARED_BYTES or dtype.kind not in "fc" or size == 2:
                    assert got.tobytes() == want.tobytes(), (dtype, op, n, in_place)
                else:   # (MPI_Iallreduce's order is its own)
                    assert np.allclose(got, want, rtol=1e-2), (dtype, op, n, in_place)
                crc = comm.allgather(zlib.crc32(got.tobytes()))
                assert len(set(crc)) == 1, ("not bit-identical", dtype, op, n, in_place)
                checked += 1
# 8- and 16-bit integer sums wrap, as NumPy's (kiln.distributed starts Open MPI without its
# op/avx component, whose sums saturate)
for dtype in ("int8", "uint8", "int16", "uint16"):
    for n in (10, 2 * E.SHARED_BYTES):
        big = np.full(n, np.iinfo(dtype).max - 1, dtype)
        assert np.array_equal(E.allreduce(big), big * size), (dtype, n)
kiln.distributed.shutdown()
print(f"process {{rank}}: {{checked}} allreduces exact and the same in all {{size}}", flush=True)
"""
# counts of elements of the shared-window test: every boundary with two processes; fewer with
# three and four (oversubscribed on two cores)
ALL_COUNTS = "(0, 1, 7, edge - 1, edge, edge + 1, chunk - 1, chunk, chunk + 1, 2 * chunk + 3)"
FEW_COUNTS = "(0, 7, edge, chunk + 1, 2 * chunk + 5)"


@needs_mpi
@pytest.mark.parametrize("shared, size", [(True, 2), (False, 2), (True, 3), (True, 4)])
def test_large_allreduce_on_one_node(tmp_path, shared, size):
    """An allreduce from SHARED_BYTES on goes through the shared window when every process is
    on this machine (two, three, four), or, between two processes without it
    (KILN_DISTRIBUTED_SHARED_MEMORY=0, as between two machines), through point-to-point
    messages from PAIRWISE_BYTES on: every dtype and op, counts around the thresholds and the
    chunks, out of place and in place, exact (NumPy's left fold) and bit-identical."""
    env = {} if shared else {distributed.SHARED_MEMORY_VARIABLE: "0"}
    counts = ALL_COUNTS if size == 2 else FEW_COUNTS
    code, output, _ = mpirun(tmp_path, SHARED_ALLREDUCE.format(shared=shared, counts=counts),
                             np_=size, env=env, limit=240)
    assert code == 0, output
    assert output.count(f"allreduces exact and the same in all {size}") == size, output


STALLED_COMPILED = """
import os, signal, sys, time
import numpy as np
import kiln
from kiln import lax
from kiln.compiler.backends import mpi_engine as E
kiln.config.update("jax_num_cpu_devices", 2)
kiln.distributed.initialize()
rank, size = kiln.process_index(), kiln.process_count()
ring = [(i, (i + 1) % 4) for i in range(4)]
f = kiln.pmap(lambda v: lax.ppermute(v, "i", ring), axis_name="i", backend="cpu")
g = kiln.pmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i", backend="cpu")
x = np.ones((2, 4), np.float32)
f(x), g(x)    # compiled, and working on both processes
E.set_timeout(2.0)
if rank == 1:
    os.kill(os.getpid(), signal.SIGSTOP)
start = time.monotonic()
try:
    f(x)
except kiln.distributed.DistributedTimeoutError as e:
    print(f"rank {rank} after {time.monotonic() - start:.1f} s: {e}", flush=True)
try:
    g(x)
except kiln.distributed.DistributedError as e:
    print(f"then: {e}", flush=True)
sys.exit(3)
"""


@needs_mpi
def test_a_stopped_rank_fails_a_compiled_collective(tmp_path):
    """Compiled ppermute across processes (the engine's exchange, called by replica 0 while
    the other replica waits) raises the timeout when the other process stops; the next
    compiled collective fails at once."""
    code, output, seconds = mpirun(tmp_path, STALLED_COMPILED)
    assert code != 0, output
    assert "rank 0 after 2." in output and "did not complete within 2 s on process 0" in output, \
        output
    assert "then: " in output and "an earlier cross-process operation timed out" in output, output
    assert seconds < 40, (seconds, output)


@needs_mpi
def test_a_killed_rank_ends_the_job(tmp_path):
    code, output, seconds = mpirun(tmp_path, DEAD_RANK.format(signal="SIGKILL", count=4), args=["30"])
    assert code != 0, output
    assert " ".join(output.split()).count("exited on signal 9"), output
    assert seconds < 40, (seconds, output)


LAYOUT = """
import kiln, numpy as np
assert kiln.distributed.process_layout() == (0, 1)
kiln.distributed.initialize(num_processes={size})
rank, size = kiln.distributed.process_layout()
from kiln.compiler.backends import mpi_engine
print(f"layout {{rank}} {{size}} {{kiln.distributed.is_initialized()}} timeout {{mpi_engine._timeout()}}", flush=True)
try:
    kiln.distributed.initialize(process_id=rank)
except RuntimeError as e:
    print("again:", e)
kiln.distributed.shutdown()
print("after", kiln.distributed.process_layout(), kiln.distributed.is_initialized())
"""


@needs_mpi
def test_initialize_under_mpirun(tmp_path):
    code, output, _ = mpirun(tmp_path, LAYOUT.format(size=2), env={"KILN_DISTRIBUTED_TIMEOUT": "7.5"})
    assert code == 0, output
    assert "layout 0 2 True timeout 7.5" in output and "layout 1 2 True timeout 7.5" in output, output
    assert output.count("again: kiln.distributed.initialize should only be called once.") == 2
    assert output.count("after (0, 1) False") == 2
    code, output, _ = mpirun(tmp_path, LAYOUT.format(size=3))
    assert code != 0 and "num_processes=3 but the MPI world has 2 processes" in output, output


LATE = """
import os, time
import kiln
if os.environ.get("OMPI_COMM_WORLD_RANK") == "1":
    time.sleep(6)             # joins too late (MPI_Init waits for every process: a watchdog)
try:
    kiln.distributed.initialize(initialization_timeout=2)
except kiln.distributed.DistributedTimeoutError as e:
    print("rank 0:", e, flush=True)
"""


@needs_mpi
def test_a_process_that_joins_late(tmp_path):
    """Process 0 gives up after initialization_timeout with an error; mpirun then ends the job
    (once the late process, which is not inside MPI, finishes its sleep)."""
    code, output, seconds = mpirun(tmp_path, LATE)
    assert code != 0, output
    assert "joining the MPI world (MPI_Init) did not complete within 2 s" in output, output
    assert seconds < 40, (seconds, output)


PMAP_ACROSS_PROCESSES = """
import numpy as np
import kiln
import kiln.numpy as jnp
from kiln import lax

kiln.config.update("jax_num_cpu_devices", 2)
kiln.distributed.initialize()
rank, size = kiln.process_index(), kiln.process_count()
assert kiln.device_count() == 2 * size and kiln.local_device_count() == 2
assert [d.id for d in kiln.local_devices()] == [2 * rank, 2 * rank + 1]
x = np.arange(2, dtype=np.float32) + 2 * rank + 1       # global values 1 .. 2*size


def stats(v):
    return lax.psum(v, "i"), lax.pmax(v, "i"), lax.pmin(v, "i"), lax.axis_index("i"), \
        lax.pmean(v, "i")


def gathered(v):
    return lax.all_gather(v, "i")


total = float(sum(range(1, 2 * size + 1)))
for backend in ("cpu", "reference"):
    s, mx, mn, idx, mean = kiln.pmap(stats, axis_name="i", backend=backend)(x)
    assert np.allclose(s, total) and np.allclose(mx, 2 * size) and np.allclose(mn, 1), (s, mx, mn)
    assert list(np.asarray(idx)) == [2 * rank, 2 * rank + 1] and np.allclose(mean, total / (2 * size))
g = kiln.pmap(gathered, axis_name="i", backend="cpu")(x)   # compiled, across processes
g2 = kiln.pmap(lambda v: lax.all_gather(v, "i", axis=0, tiled=True), axis_name="i")(x[:, None])
assert np.allclose(g2[0], np.arange(1, 2 * size + 1)), g2
assert np.allclose(g, np.arange(1, 2 * size + 1)), g
# data-parallel gradient: every process holds its share of the batch
w = np.linspace(-1, 1, 3).astype(np.float32)
data = np.random.default_rng(0).standard_normal((2 * size, 5, 3)).astype(np.float32)


def grad_step(w, xb):
    g = kiln.grad(lambda w: jnp.sum(jnp.tanh(xb @ w) ** 2))(w)
    return lax.pmean(g, "i")


mine = data[2 * rank: 2 * rank + 2]
out = kiln.pmap(grad_step, axis_name="i", in_axes=(None, 0))(w, mine)
whole = kiln.grad(lambda w: jnp.sum(jnp.tanh(data.reshape(-1, 3) @ w) ** 2))(w) / (2 * size)
assert np.allclose(out[0], whole, rtol=1e-5, atol=1e-6), (out[0], whole)
print(f"rank {rank} ok")
kiln.distributed.shutdown()
"""


@needs_mpi
@pytest.mark.parametrize("size", [2, 3])
def test_pmap_spans_every_process(tmp_path, size):
    """pmap over 2 local devices per process: the axis spans all processes' replicas (global
    indices p*2 + i), psum/pmax/pmin/pmean/axis_index on both backends, all_gather compiled
    (stacked and tiled), and a data-parallel gradient equal to the whole batch's."""
    code, output, _ = mpirun(tmp_path, PMAP_ACROSS_PROCESSES, np_=size, limit=240)
    assert code == 0, output[-3000:]
    assert sorted(line for line in output.splitlines() if line.endswith(" ok")) == \
        [f"rank {r} ok" for r in range(size)]


# pmap inside a transform (jit, grad) under several processes: emitted as a batch over this
# process's replicas whose collectives finish across the processes (primitives/processes.py).
TRACED_PMAP = """
import numpy as np
import kiln
import kiln.numpy as jnp
from kiln import lax

kiln.config.update("jax_num_cpu_devices", 2)
kiln.distributed.initialize()
rank, size = kiln.process_index(), kiln.process_count()
G = 2 * size
x = (np.arange(6, dtype=np.float32).reshape(2, 3) + 6 * rank) % 7 - 2.5   # this process's rows
every = np.concatenate([(np.arange(6, dtype=np.float32).reshape(2, 3) + 6 * p) % 7 - 2.5
                        for p in range(size)])


def stats(v):
    return (lax.psum(v, "i"), lax.pmax(v, "i"), lax.pmin(v, "i"), lax.pmean(v, "i"),
            lax.axis_index("i") + 0 * v[0], lax.all_gather(v, "i"),
            lax.all_gather(v, "i", tiled=True), lax.psum(1, "i") + 0 * v[0])


want = (every.sum(0), every.max(0), every.min(0), every.mean(0))
for backend in ("cpu", "reference"):
    outs = kiln.jit(kiln.pmap(stats, axis_name="i"), backend=backend)(x)
    mine = slice(2 * rank, 2 * rank + 2)
    checks = [np.broadcast_to(want[0], (2, 3)), np.broadcast_to(want[1], (2, 3)),
              np.broadcast_to(want[2], (2, 3)), np.broadcast_to(want[3], (2, 3)),
              np.arange(G)[mine], np.broadcast_to(every, (2, G, 3)),
              np.broadcast_to(every.reshape(-1), (2, G * 3)), np.full(2, G)]
    for k, (got, expect) in enumerate(zip(outs, checks)):
        assert np.allclose(np.asarray(got), expect, rtol=1e-6), (backend, k, got, expect)

# grad through a traced pmap: the gradient of the global mean loss is every process's same value
w = np.linspace(-1, 1, 3).astype(np.float32)


def loss(w, xb):
    per = kiln.pmap(lambda xr: lax.pmean(jnp.sum(jnp.tanh(xr * w) ** 2), "i"),
                    axis_name="i")(xb)
    return per[0]


def row_loss(w, xr):
    return jnp.sum(jnp.tanh(xr * w) ** 2)


whole = kiln.grad(lambda w: jnp.mean(jnp.sum(jnp.tanh(every * w) ** 2, axis=1)))(w)
dp = kiln.jit(kiln.pmap(lambda xr: lax.pmean(kiln.grad(row_loss)(w, xr), "i"),
                        axis_name="i"))(x)
assert np.allclose(dp, np.broadcast_to(whole, (2, 3)), rtol=1e-5, atol=1e-6), (dp, whole)
# JAX's transpose of pmean: every process's cotangent (1 at its replica 0) is summed over the
# whole axis, so each replica's gradient is scaled by size / G
g = kiln.jit(kiln.grad(loss))(w, x)
local = sum(np.asarray(kiln.grad(row_loss)(w, xr)) for xr in x)
assert np.allclose(g, local * size / G, rtol=1e-5, atol=1e-6), (g, local)
try:
    kiln.jit(kiln.pmap(lambda v: lax.ppermute(v, "i", [(0, 1)]), axis_name="i"))(x)
except Exception as e:
    assert "ppermute over a pmap axis that spans" in str(e) and "directly" in str(e), e
else:
    raise AssertionError("ppermute across processes inside jit was accepted")
print(f"rank {rank} ok", flush=True)
kiln.distributed.shutdown()
"""


@needs_mpi
def test_pmap_inside_jit_and_grad_spans_every_process(tmp_path):
    """jit(pmap(f)) and grad through a pmap under 2 processes: psum/pmax/pmin/pmean,
    axis_index, all_gather (stacked and tiled) and psum of a constant across both processes'
    replicas, compiled and on the reference backend; the gradient of a pmean'd loss equals the
    whole batch's; a ppermute over the axis is a CompileError that says what to do."""
    code, output, _ = mpirun(tmp_path, TRACED_PMAP, limit=240)
    assert code == 0, output[-3000:]
    assert sorted(line for line in output.splitlines() if line.endswith(" ok")) == \
        ["rank 0 ok", "rank 1 ok"]


# psum & co. with one device per process: the engine reduces the operand straight into the
# result, eagerly (lower_collectives.py) and inside jit (lower_processes.py, the result in the
# operand's buffer when it dies there or is donated); results of calls held at once stay apart.
ONE_DEVICE_EACH = """
import numpy as np
import kiln
import kiln.numpy as jnp
from kiln import lax

kiln.config.update("jax_num_cpu_devices", 1)
kiln.distributed.initialize()
rank, size = kiln.process_index(), kiln.process_count()
assert kiln.local_device_count() == 1
ops = {"psum": (lax.psum, np.sum), "pmax": (lax.pmax, np.max), "pmin": (lax.pmin, np.min)}


def data(n, dtype, p, k):   # process p's values of call k
    return ((np.arange(n) * (p + 1) + 3 * k) % 11 - 5).astype(dtype).reshape(1, n)


def address(a):
    return np.asarray(a).__array_interface__["data"][0]


# n: below and above the engine's point-to-point threshold (mpi_engine.PAIRWISE_BYTES), and 0
for n, dtype in ((5, np.float32), ((1 << 18) + 3, np.float32), ((1 << 17) + 1, np.int64),
                 (7, np.float16), (0, np.float32)):
    for name, (collective, reduce) in ops.items():
        eager = kiln.pmap(lambda v: collective(v, "i"), axis_name="i")
        traced = kiln.jit(eager)
        in_place = kiln.jit(kiln.pmap(lambda v: collective(v * 2, "i"), axis_name="i"))
        for f, scale in ((eager, 1), (traced, 1), (in_place, 2)):
            xs = [data(n, dtype, rank, k) for k in range(3)]
            held = [f(x) for x in xs]   # held at once: each call its own result
            for k, got in enumerate(held):
                want = reduce(np.stack([data(n, dtype, p, k) * scale for p in range(size)]), 0)
                assert np.array_equal(np.asarray(got), want.astype(dtype)), (name, n, k, got, want)
                assert np.array_equal(xs[k], data(n, dtype, rank, k)), "the operand changed"
            if n:
                assert len({address(r) for r in held} | {address(x) for x in xs}) == 6
# donated: the result is the argument's buffer, reduced in place
donating = kiln.jit(kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i"), donate_argnums=0)
for n in (6, (1 << 18) + 3):
    x = jnp.asarray(data(n, np.float32, rank, 0))
    at = address(x)
    y = donating(x)
    want = np.sum([data(n, np.float32, p, 0) for p in range(size)], 0)
    assert np.array_equal(np.asarray(y), want) and address(y) == at and x.is_deleted()
print(f"rank {rank} ok", flush=True)
kiln.distributed.shutdown()
"""


@needs_mpi
@pytest.mark.parametrize("size", [2, 3])
def test_one_device_per_process_reduces_straight_into_the_result(tmp_path, size):
    """pmap and jit(pmap) psum/pmax/pmin with one device per process (float32 and int64 on
    either side of the engine's point-to-point threshold, float16, empty): results of three
    calls held at once are correct and distinct from each other and the operands, a dying
    operand is reduced in place, and a donated one becomes the result."""
    code, output, _ = mpirun(tmp_path, ONE_DEVICE_EACH, np_=size, limit=240)
    assert code == 0, output[-3000:]
    assert sorted(line for line in output.splitlines() if line.endswith(" ok")) == \
        [f"rank {r} ok" for r in range(size)]


# The collectives other than psum & co. over a pmap axis spanning several processes: each case's
# global input has a leading axis of every process's replicas; process p maps over its rows.
PMAP_CASES = """import numpy as np
from kiln import lax


def cases(G):
    "(name, function of one replica, global input with a leading axis of G replicas)"
    def data(shape, dtype=np.float32):
        n = int(np.prod(shape))
        return (np.arange(n).reshape(shape) % 23 - 7).astype(dtype)
    ring = [(i, (i + 1) % G) for i in range(G)]
    partial = [(0, G - 1), (G - 1, 1 % G)] if G > 2 else [(0, 1)]
    shuffle = [(i * 2 + 1) % G for i in range(G)] if G % 2 else list(reversed(range(G)))
    return [
        ("psum_scatter_0", lambda v: lax.psum_scatter(v, "i"), data((G, G, 3))),
        ("psum_scatter_1", lambda v: lax.psum_scatter(v, "i", scatter_dimension=1), data((G, 2, G, 2), np.int32)),
        ("psum_scatter_0t", lambda v: lax.psum_scatter(v, "i", tiled=True), data((G, 2 * G, 3), np.float16)),
        ("psum_scatter_1t", lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True), data((G, 3, 2 * G))),
        ("ppermute_ring", lambda v: lax.ppermute(v, "i", ring), data((G, 2, 3))),
        ("ppermute_partial", lambda v: lax.ppermute(v, "i", partial), data((G, 4), np.int32)),
        ("all_to_all_01", lambda v: lax.all_to_all(v, "i", 0, 1), data((G, G, 3))),
        ("all_to_all_10t", lambda v: lax.all_to_all(v, "i", 1, 0, tiled=True), data((G, 2, 2 * G))),
        ("all_to_all_12", lambda v: lax.all_to_all(v, "i", 1, 2, tiled=True), data((G, 2, 3 * G, 2), np.int32)),
        ("pshuffle", lambda v: lax.pshuffle(v, "i", shuffle), data((G, 3))),
        ("pswapaxes", lambda v: lax.pswapaxes(v, "i", 1), data((G, 2, G))),
        ("all_gather_1", lambda v: lax.all_gather(v, "i", axis=1), data((G, 2, 3))),
        ("all_gather_1t", lambda v: lax.all_gather(v, "i", axis=1, tiled=True), data((G, 2, 3), np.bool_)),
        ("all_gather_0t", lambda v: lax.all_gather(v, "i", tiled=True), data((G, 2, 3), np.int16)),
        ("all_gather_empty", lambda v: lax.all_gather(v, "i", axis=1), data((G, 2, 0))),
        ("psum_scatter_empty", lambda v: lax.psum_scatter(v, "i", scatter_dimension=1), data((G, 0, G))),
        ("all_to_all_empty", lambda v: lax.all_to_all(v, "i", 0, 1), data((G, G, 0))),
        ("ppermute_empty", lambda v: lax.ppermute(v, "i", ring), data((G, 0))),
        ("scalar_ppermute", lambda v: lax.ppermute(v, "i", ring), data((G,))),
        ("literal_all_gather", lambda v: lax.all_gather(2.5, "i") * v, data((G,))),
    ]
"""

PMAP_COLLECTIVES = """
import sys
import numpy as np
import kiln
from cases import cases

local = int(sys.argv[1])
kiln.config.update("jax_num_cpu_devices", local)
kiln.distributed.initialize()
rank, size = kiln.process_index(), kiln.process_count()
expected = np.load(sys.argv[2])
mine = slice(rank * local, rank * local + local)
wrong = []
for name, fn, x in cases(local * size):
    got = kiln.pmap(fn, axis_name="i")(x[mine])   # compiled (KILN_LOG_COMPILES: no fallback)
    ref = kiln.pmap(fn, axis_name="i", backend="reference")(x[mine])
    want = expected[name][mine]
    if not (got.dtype == want.dtype and np.array_equal(got, want) and np.array_equal(ref, want)):
        wrong.append(name)
        print(name, got, ref, want, sep="\\n", flush=True)
print(f"rank {rank} of {size} with {local} devices: wrong {wrong}", flush=True)
kiln.distributed.shutdown()
"""


@needs_mpi
@pytest.mark.parametrize("size, local", [(2, 1), (2, 2), (3, 2)])
def test_pmap_collectives_span_every_process(tmp_path, size, local):
    """psum_scatter (tiled or not, along axis 0 or 1), ppermute (a ring, a partial perm),
    all_to_all, pshuffle, pswapaxes and all_gather along axis 1 (tiled too), empty operands, a
    scalar and a literal: compiled under mpirun on `size` processes of `local` devices, equal to
    the same pmap over all devices in this process, and to the reference backend there; no
    function falls back to the reference backend."""
    (tmp_path / "cases.py").write_text(PMAP_CASES)
    spec = importlib.util.spec_from_file_location("cases", tmp_path / "cases.py")
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    expected = {name: np.asarray(kiln.pmap(fn, axis_name="i", backend="cpu")(x))
                for name, fn, x in cases.cases(size * local)}
    np.savez(tmp_path / "expected.npz", **expected)
    code, output, _ = mpirun(tmp_path, PMAP_COLLECTIVES, np_=size, limit=120,
                             env={"KILN_LOG_COMPILES": "1"},
                             args=[str(local), str(tmp_path / "expected.npz")])
    assert code == 0, output[-3000:]
    assert "runs on the reference backend" not in output, output[-3000:]
    assert sorted(line for line in output.splitlines() if " wrong " in line) == \
        [f"rank {r} of {size} with {local} devices: wrong []" for r in range(size)], output[-3000:]


def test_ppermute_across_processes_tags_fit_mpi():
    """The compiled ppermute across processes tags its messages with replica indices, which MPI
    bounds (32767): a larger axis is a BackendUnsupportedError that says so."""
    from kiln import lax
    from kiln.compiler.errors import BackendUnsupportedError
    from kiln.compiler.primitives.replicas import with_collective_params
    from kiln.staging import compile_function
    size = mpi_engine.TAG_LIMIT + 2
    staged = kiln.pmap(lambda v: lax.ppermute(v, "i", [(0, size - 1)]), axis_name="i")
    fn = with_collective_params(kiln.make_ir(staged)(np.zeros(size, np.float32)), processes=2)
    with pytest.raises(BackendUnsupportedError, match="at most 32768 replicas"):
        compile_function(fn, "llvm")
