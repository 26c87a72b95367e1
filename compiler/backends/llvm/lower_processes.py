"""Lowerings of the collectives across processes that a traced pmap emits
(compiler/primitives/processes.py): one call of the MPI engine's C ABI each (mpi_engine.py).

    process_allreduce(x, op):  kiln_mpi_allreduce(x, out, n, dtype, op): the engine reads the
                               operand and writes the result, no copy; in place (x == out,
                               MPI_IN_PLACE) where the storage plan computes the result in the
                               operand's buffer (`LLVM_INPLACE`: an operand that dies there, or a
                               donated input)
    process_allgather(x):      kiln_mpi_allgather(x, out, n, dtype): process p's x at out[p]
    process_sendrecv(x):       kiln_mpi_sendrecv(x, dest, out, source, n, dtype, tag) (-1: no
                               such side); without a source, out is zeroed instead

The engine's status is not returned through `kiln_main` (these equations may sit in regions
compiled as internal functions): the engine guards every call itself (a call after a timeout
returns at once), and the executable checks, before a call of a function holding these
equations, that kiln.distributed is set up, and after it, that no wait timed out
(llvm/executable.py: `mpi_engine.is_broken()`), raising the engine's error. The other statuses
cannot happen: the shape rules refuse what the engine refuses (complex max/min, more than
2**31 - 1 elements).
"""
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_INPLACE
from .. import mpi_engine
from . import ltypes as T
from .buffers import nbytes
from .calls import intrinsic
from .lower_collectives import operand_pointer


def _allreduce(ctx, outs, ins, *, op, processes):
    b, (out,), (x,) = ctx.builder, outs, ins
    mpi_engine.emit_allreduce(b, operand_pointer(b, x), out.ptr, T.i64(x.aval.size),
                              x.aval.dtype, op)


def _allreduce_in_place(eqn):
    """The `LLVM_INPLACE` rule: the result may take the operand's storage."""
    return [(0, 0)]


def _allgather(ctx, outs, ins, *, process, processes):
    b, (out,), (x,) = ctx.builder, outs, ins
    mpi_engine.emit_allgather(b, operand_pointer(b, x), out.ptr, T.i64(x.aval.size),
                              x.aval.dtype)


def _sendrecv(ctx, outs, ins, *, dest, source, tag):
    b, (out,), (x,) = ctx.builder, outs, ins
    if source is None:
        intrinsic(b, "memset", [out.ptr, T.I8(0), T.i64(nbytes(out.aval)), T.I1(0)],
                  ret=T.VOID, overloads=[T.PTR, T.I64])
    mpi_engine.emit_sendrecv(b, operand_pointer(b, x), -1 if dest is None else dest, out.ptr,
                             -1 if source is None else source, T.i64(x.aval.size),
                             x.aval.dtype, tag)


LLVM[PRIMITIVES["process_allreduce"]] = _allreduce
LLVM_INPLACE[PRIMITIVES["process_allreduce"]] = _allreduce_in_place
LLVM[PRIMITIVES["process_allgather"]] = _allgather
LLVM[PRIMITIVES["process_sendrecv"]] = _sendrecv
