"""Lowerings of the collectives across processes that a traced pmap emits
(compiler/primitives/processes.py): one call of the MPI engine's C ABI each (mpi_engine.py).

    process_allreduce(x, op):  out = x (copied, or the operand itself when planned in place);
                               kiln_mpi_allreduce(out, out, n, dtype, op) in place
    process_allgather(x):      kiln_mpi_allgather(x, out, n, dtype): process p's x at out[p]

The engine's status is not returned through `kiln_main` (these equations may sit in regions
compiled as internal functions): the engine guards every call itself (a call after a timeout
returns at once), and the executable checks, before a call of a function holding these
equations, that kiln.distributed is set up, and after it, that no wait timed out
(llvm/executable.py: `mpi_engine.is_broken()`), raising the engine's error. The other statuses
cannot happen: the shape rules refuse what the engine refuses (complex max/min, more than
2**31 - 1 elements).
"""
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM
from .. import mpi_engine
from . import ltypes as T
from .lower_collectives import copy_elements, operand_pointer


def _allreduce(ctx, outs, ins, *, op, processes):
    b, (out,), (x,) = ctx.builder, outs, ins
    n = T.i64(x.aval.size)
    source = operand_pointer(b, x)
    if source is not out.ptr:
        copy_elements(b, out.ptr, source, n, x.aval.dtype.itemsize)
    mpi_engine.emit_allreduce(b, out.ptr, out.ptr, n, x.aval.dtype, op)


def _allgather(ctx, outs, ins, *, process, processes):
    b, (out,), (x,) = ctx.builder, outs, ins
    mpi_engine.emit_allgather(b, operand_pointer(b, x), out.ptr, T.i64(x.aval.size),
                              x.aval.dtype)


LLVM[PRIMITIVES["process_allreduce"]] = _allreduce
LLVM[PRIMITIVES["process_allgather"]] = _allgather
