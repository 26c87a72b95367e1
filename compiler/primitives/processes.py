"""Collectives across the processes of a run (kiln.distributed over MPI), for a pmap that a
transform traces (`jit(pmap(f))`, `grad(pmap(f))` under several processes), and for a function
partitioned over the processes (sharded jit of global arrays: primitives/partitioning.py).

There pmap is emitted like vmap over this process's replicas (runtime/pmap.py), and its axis
spans every process. A collective over that axis computes what it can across the local
replicas with its usual batching rule, then these two primitives finish it across processes:

    process_allreduce(x, op, processes)          x reduced with op ("sum", "max", "min") over
                                                 the processes, elementwise: the same result
                                                 in every process
    process_allgather(x, process, processes)     every process's x stacked along a new leading
                                                 axis, in process order: (processes, *x.shape)
    process_sendrecv(x, dest, source, tag)       x sent to process `dest` (None: nothing sent)
                                                 and what process `source` sent in the same
                                                 round (zeros when `source` is None)

`process` (this process's index), `processes`, `dest`, `source` and `tag` are static params:
each process specialises its own code. `process_sendrecv` is what partition rules use to move
rows between neighbouring blocks (a slice, pad or reversal along the split dimension): every
process runs the same rounds, each one sendrecv (with None for a side it has nothing on), so
each send meets its receive; it is marked `effect`, so the simplifier never drops a send whose
result (the receive) this process does not read. The `BATCH_ACROSS_PROCESSES` rules (below) write psum/pmax/pmin, axis_index and
all_gather over such an axis with them; the other collectives (psum_scatter, ppermute,
all_to_all) over it are a CompileError saying to call the pmapped function outside the
transform, where its replicas exchange directly (compiler/primitives/replicas.py).

The engine that moves the bytes is the MPI engine (compiler/backends/mpi_engine.py); the layer
above gives it to `set_engine` (kiln.distributed.initialize), so these impls, the reference
backend's, call its Python face. The LLVM lowerings call its C ABI (lower_processes.py).

Derivatives: process_allreduce with "sum" is linear and its own transpose (psum's rule, JAX's);
with "max"/"min" the derivative is shared among the processes holding the result, as pmax's.
process_allgather's transpose is this process's row of the sum over processes of the
cotangent. process_sendrecv is linear; its transpose sends the cotangent back (dest and source
swapped). Batching: both act on the batched value as it is (allgather puts the batch axis one
further).
"""
import numpy as np

from ..errors import CompileError
from ..ir.abstract import ShapedArray
from . import emit as E
from .core import register, rule_table, JVP, VJP, BATCH, BATCH_COLLECTIVE
from .collectives import psum, pmax, pmin, axis_index, all_gather
from .rule_forms import tangent_rule, cotangent_rule

OPS = ("sum", "max", "min")
_ENGINE = [None]


def set_engine(engine):
    """The MPI engine's Python face (allreduce, allgather), or None (one process)."""
    _ENGINE[0] = engine


def _engine(what):
    if _ENGINE[0] is None:
        raise RuntimeError(f"{what} runs across processes, but kiln.distributed is not "
                           f"initialized in this process; call kiln.distributed.initialize()")
    return _ENGINE[0]


# ------------------------------------------------------------------------ the primitives

_MAX_COUNT = (1 << 31) - 1   # MPI's int counts


def _check_count(name, x):
    if x.size > _MAX_COUNT:
        raise ValueError(f"{name}: {x.str_short()} has more than 2**31 - 1 elements, more than "
                         f"one MPI call moves; split it")


def _allreduce_eval(x, *, op, processes):
    if op not in OPS:
        raise ValueError(f"process_allreduce: op must be one of {OPS}, not {op!r}")
    if op != "sum" and x.dtype.kind == "c":
        raise TypeError(f"process_allreduce: no {op} of complex values {x.str_short()}")
    _check_count("process_allreduce", x)
    return x


def _allreduce_impl(x, *, op, processes):
    x = np.asarray(x)
    return _engine("process_allreduce").allreduce(np.ascontiguousarray(x), op).reshape(x.shape)


def _allgather_eval(x, *, process, processes):
    _check_count("process_allgather", x)
    return ShapedArray((processes, *x.shape), x.dtype, x.weak_type)


def _allgather_impl(x, *, process, processes):
    x = np.asarray(x)
    return _engine("process_allgather").allgather(np.ascontiguousarray(x)).reshape(
        (processes, *x.shape))


def _sendrecv_eval(x, *, dest, source, tag):
    _check_count("process_sendrecv", x)
    return x


def _sendrecv_impl(x, *, dest, source, tag):
    x = np.ascontiguousarray(x)
    got = _engine("process_sendrecv").sendrecv(x, dest, source, tag)
    return np.zeros_like(x) if got is None else got.reshape(x.shape)


process_allreduce = register("process_allreduce", _allreduce_eval, _allreduce_impl)
process_allgather = register("process_allgather", _allgather_eval, _allgather_impl)
process_sendrecv = register("process_sendrecv", _sendrecv_eval, _sendrecv_impl, effect=True)


def _allreduce_jvp(primals, tangents, outs, *, op, processes):
    (x,), (t,) = primals, tangents
    if op == "sum":
        return E.bind("process_allreduce", t, op="sum", processes=processes)
    chosen = E.cast_like(E.eq(x, outs), x)   # pmax's rule: shared among the holders
    count = E.bind("process_allreduce", chosen, op="sum", processes=processes)
    return E.div(E.bind("process_allreduce", E.mul(t, chosen), op="sum",
                        processes=processes), count)


def _allreduce_vjp(ct, primals, outs, *, op, processes):
    total = E.bind("process_allreduce", ct, op="sum", processes=processes)
    if op == "sum":
        return [total]
    chosen = E.cast_like(E.eq(primals[0], outs), primals[0])
    count = E.bind("process_allreduce", chosen, op="sum", processes=processes)
    return [E.mul(chosen, E.div(total, count))]


def _allgather_jvp(primals, tangents, outs, **params):
    return E.bind("process_allgather", tangents[0], **params)


def _allgather_vjp(ct, primals, outs, *, process, processes):
    total = E.bind("process_allreduce", ct, op="sum", processes=processes)
    shape = E.aval(total).shape
    mine = E.slice(total, start_indices=(process,) + (0,) * (len(shape) - 1),
                   limit_indices=(process + 1,) + shape[1:], strides=None)
    return [E.squeeze(mine, dimensions=(0,))]


def _sendrecv_jvp(primals, tangents, outs, **params):
    return E.bind("process_sendrecv", tangents[0], **params)


def _sendrecv_vjp(ct, primals, outs, *, dest, source, tag):
    return [E.bind("process_sendrecv", ct, dest=source, source=dest, tag=tag)]


def _in_place(name):
    def rule(args, dims, **params):
        return E.bind(name, args[0], **params), dims[0]
    return rule


def _allgather_batch(args, dims, **params):
    return E.bind("process_allgather", args[0], **params), dims[0] + 1


JVP[process_allreduce] = tangent_rule(_allreduce_jvp)
VJP[process_allreduce] = cotangent_rule(_allreduce_vjp)
BATCH[process_allreduce] = _in_place("process_allreduce")
JVP[process_allgather] = tangent_rule(_allgather_jvp)
VJP[process_allgather] = cotangent_rule(_allgather_vjp)
BATCH[process_allgather] = _allgather_batch
JVP[process_sendrecv] = tangent_rule(_sendrecv_jvp)
VJP[process_sendrecv] = cotangent_rule(_sendrecv_vjp)
BATCH[process_sendrecv] = _in_place("process_sendrecv")


# ----------------------------------------------- collectives over an axis across processes

BATCH_ACROSS_PROCESSES = rule_table(
    "batch_across_processes",
    "batch_across_processes(args, dims, *, size, axis, process, processes, **params) "
    "-> (outs, out_dims)")


def _reducing(prim, op):
    """psum/pmax/pmin: the local replicas' reduction, then the processes'."""
    def rule(args, dims, *, size, axis, process, processes, **params):
        local, _ = BATCH_COLLECTIVE[prim](args, dims, size=size, axis=axis, **params)
        return E.bind("process_allreduce", local, op=op, processes=processes), None
    return rule


def _axis_index(args, dims, *, size, axis, process, processes, **params):
    """The local replica's index plus the replicas of the processes before this one."""
    local, d = BATCH_COLLECTIVE[axis_index](args, dims, size=size, axis=axis, **params)
    return E.add(local, np.int32(process * size)), d


def _all_gather(args, dims, *, size, axis, process, processes, all_gather_dimension,
                axis_size, **params):
    """The local replicas' gather (an axis of `size` at the gather dimension, or merged into
    it when tiled), then every process's, merged in front of it: process p's block first."""
    local, _ = BATCH_COLLECTIVE[all_gather](args, dims, size=size, axis=axis,
                                            all_gather_dimension=all_gather_dimension,
                                            axis_size=size, **params)
    return join_processes(local, all_gather_dimension, process, processes), None


def join_processes(local, at, process, processes):
    """Every process's `local` joined along its dimension `at`, process p's block p (one
    allgather)."""
    stacked = E.bind("process_allgather", local, process=process, processes=processes)
    return merge_leading(stacked, at)


def merge_leading(stacked, at):
    """`stacked`'s leading axis (one block per process or per block of a split value) merged
    into its dimension `at` (counted without that axis), block 0 first."""
    shape = list(E.aval(stacked).shape)
    count = shape.pop(0)
    order = list(range(1, len(shape) + 1))
    order.insert(at, 0)
    moved = E.transpose(stacked, permutation=tuple(order))
    shape[at] *= count
    return E.reshape(moved, new_sizes=tuple(shape), dimensions=None)


BATCH_ACROSS_PROCESSES[psum] = _reducing(psum, "sum")
BATCH_ACROSS_PROCESSES[pmax] = _reducing(pmax, "max")
BATCH_ACROSS_PROCESSES[pmin] = _reducing(pmin, "min")
BATCH_ACROSS_PROCESSES[axis_index] = _axis_index
BATCH_ACROSS_PROCESSES[all_gather] = _all_gather


def across_processes_error(eqn, processes):
    """The CompileError for a collective over a pmap axis spanning processes that the traced
    form does not compute across processes."""
    return CompileError(
        f"lax.{eqn.prim.name} over a pmap axis that spans {processes} processes cannot run "
        f"inside jit/grad/vmap", eqn.info,
        "Call the pmapped function directly (not inside a transform): its replicas then "
        "exchange across processes themselves. Inside a transform kiln computes psum, pmean, "
        "pmax, pmin, axis_index and all_gather across processes.")


def crosses_processes(fn):
    """Whether SSA function `fn` (regions included) holds a collective across processes."""
    return first_crossing(fn) is not None


def first_crossing(fn):
    """The first equation of `fn` (regions included) that is a collective across processes,
    or None."""
    for eqn in fn.eqns:
        if eqn.prim in (process_allreduce, process_allgather, process_sendrecv):
            return eqn
        for region in eqn.regions():
            inner = first_crossing(region)
            if inner is not None:
                return inner
    return None
