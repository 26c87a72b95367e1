"""The cross-process half of a pmap's collectives on PJRT devices: XLA FFI handlers, run by XLA's
CPU plug-in inside the module, that exchange over MPI.

A pmap over PJRT devices whose axis spans several processes (kiln.distributed under mpirun) is
lowered to this process's in-process XLA collectives plus custom calls of the targets in
stablehlo/lower_processes.py. `prepare(devices)` (compile_replicated calls it before compiling
such a module) registers the handlers below with the devices' plug-in, once per plug-in,
through its FFI extension (pjrt/ffi_dot.register_handler; the host platform only: another
platform is a ValueError), and makes one MPI communicator per local device index (duplicates
of kiln's communicator, made in the same order by every process). Replica i of the module
runs its custom calls on communicator i, so the collectives of one communicator are called by
one thread per process, in the module's order, while the other replicas' run beside them
(MPI runs with MPI_THREAD_MULTIPLE: kiln.distributed).

The handlers are ctypes functions (each takes the GIL while it runs and releases it while it
waits): asked for their metadata (XLA's metadata extension in the frame) they answer the
caller's FFI API version and no traits. On execute, `kiln_mpi_all_gather` gathers the operand
(its first argument; the second is the replica's id, which names the communicator) from every
process into the result, process by process (MPI_Iallgather of its bytes); `kiln_mpi_psum`,
`kiln_mpi_pmax` and `kiln_mpi_pmin` are MPI_Iallreduce into the result for integers, float32/64
and a complex sum, as the llvm backend's engine reduces them, and for bool and float16 gather
the operand the same way and reduce the blocks with NumPy in process order;
`kiln_mpi_process_index` writes the MPI rank. A wait longer than kiln.distributed's timeout
(KILN_DISTRIBUTED_TIMEOUT) and any other failure return an XLA FFI error (INTERNAL) with the
message, which the plug-in raises from the execution.
"""
import ctypes

import numpy as np

from . import distributed
from .compiler.backends.pjrt import ffi_dot
from .compiler.backends.stablehlo import lower_processes as targets
from .compiler.primitives import xla_ffi

_INTERNAL = 13   # XLA_FFI_Error_Code
_DTYPES = {code: dtype for dtype, code in xla_ffi.DATA_TYPES.items()}
_REDUCE = {targets.PSUM: np.add, targets.PMAX: np.maximum, targets.PMIN: np.minimum}
_COMMUNICATORS = []   # one duplicate of kiln's communicator per local device index
_REGISTERED = set()   # ids of the plug-ins' api tables the handlers are registered with


def prepare(devices):
    """Make the handlers and communicators a module replicated over `devices` (PjrtDevices of
    one plug-in, this process's) needs."""
    client = devices[0].layer.info.client
    if client.platform != "cpu":
        raise ValueError(f"a pmap over PJRT devices whose axis spans several processes runs "
                         f"its collectives across them in XLA FFI handlers on the host, which "
                         f"only XLA's CPU plug-in runs; the {client.platform!r} plug-in cannot: "
                         f"use the llvm backend (backend='cpu')")
    comm = distributed.communicator()
    while len(_COMMUNICATORS) < len(devices):
        duplicate, request = comm.Idup()
        distributed.wait(request, distributed.timeout(), "making a communicator for a PJRT "
                                                         "pmap's collectives (MPI_Comm_idup)")
        _COMMUNICATORS.append(duplicate)
    if id(client.api) not in _REGISTERED:
        for name in targets.TARGETS:
            ffi_dot.register_handler(client.api, name, ctypes.cast(_HANDLERS[name],
                                                                   ctypes.c_void_p).value)
        _REGISTERED.add(id(client.api))


def _array(address):
    """The XLA_FFI_Buffer at `address` as a NumPy array over its memory."""
    buffer = xla_ffi.Buffer.from_address(address)
    dtype = _DTYPES.get(buffer.dtype)
    if dtype is None:
        raise TypeError(f"XLA FFI data type {buffer.dtype} has no NumPy dtype in kiln")
    shape = tuple(buffer.dims[k] for k in range(buffer.rank))
    size = int(np.prod(shape)) * dtype.itemsize
    raw = (ctypes.c_uint8 * size).from_address(buffer.data) if size else bytearray()
    return np.frombuffer(raw, np.uint8).view(dtype).reshape(shape)


def _execute(name, frame):
    out = _array(frame.rets.rets[0])
    if name == targets.PROCESS_INDEX:
        out[...] = distributed.process_layout()[0]
        return
    x = np.ascontiguousarray(_array(frame.args.args[0]))
    comm = _COMMUNICATORS[int(_array(frame.args.args[1]))]
    from mpi4py import MPI
    what = f"the cross-process part of a PJRT pmap's collective ({name})"
    if name in _REDUCE and _mpi_reduces(x.dtype, name):
        op = {targets.PSUM: MPI.SUM, targets.PMAX: MPI.MAX, targets.PMIN: MPI.MIN}[name]
        distributed.wait(comm.Iallreduce(x, out, op), distributed.timeout(), what)
        return
    gathered = out if name == targets.ALL_GATHER else \
        np.empty((comm.Get_size(),) + x.shape, x.dtype)
    request = comm.Iallgather([x.view(np.uint8), MPI.BYTE], [gathered.view(np.uint8), MPI.BYTE])
    distributed.wait(request, distributed.timeout(), what)
    if name in _REDUCE:
        _REDUCE[name].reduce(gathered, axis=0, out=out)


def _mpi_reduces(dtype, name):
    """Whether MPI's own reduction takes `dtype` for `name`: integers, float32/64, and
    complex for a sum (bool and float16 are gathered and reduced by NumPy)."""
    return dtype.kind in "iu" or dtype in (np.float32, np.float64) or (
        dtype.kind == "c" and name == targets.PSUM)


def _error(frame, message):
    api = xla_ffi.Api.from_address(frame.api)
    create = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(xla_ffi.ErrorCreateArgs))(
        api.XLA_FFI_Error_Create)
    return create(ctypes.byref(xla_ffi.ErrorCreateArgs(
        xla_ffi.struct_size(xla_ffi.ErrorCreateArgs, "errc"), None, message.encode(),
        _INTERNAL)))


def _handler(name):
    def handle(pointer):
        frame = pointer.contents
        if frame.extension_start:   # XLA's metadata query: the caller's version, no traits
            extension = xla_ffi.MetadataExtension.from_address(frame.extension_start)
            if extension.extension_base.type == 1:
                version = xla_ffi.Api.from_address(frame.api).api_version
                metadata = extension.metadata.contents
                metadata.api_version.major_version = version.major_version
                metadata.api_version.minor_version = version.minor_version
                metadata.traits = 0
                return None
        if frame.stage != 3:   # (only execute does anything)
            return None
        try:
            _execute(name, frame)
        except Exception as e:   # (XLA raises it from the execution)
            return _error(frame, f"{name}: {type(e).__name__}: {e}")
        return None
    return xla_ffi.HANDLER(handle)


_HANDLERS = {name: _handler(name) for name in targets.TARGETS}
