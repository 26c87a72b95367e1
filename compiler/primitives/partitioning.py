"""Partitioning rules: how a primitive runs on values split across the processes of a run.

`kiln.jit` with shardings over several processes' devices (runtime/global_jit.py) stages the
function for the global shapes, then `transforms/partition.py` rewrites it into the function
each process runs on its own blocks. A value there is either *replicated* (the whole value,
the same in every process) or *split* along one dimension `d`: process p holds block p of it,
of size n / processes. A rule

    PARTITION[prim](args, dims, *, process, processes, **params) -> (outs, out_dims)

(`dims[i]`: the split dimension of `args[i]`, None if replicated; at least one is split;
lists for multiple results) emits the equation on the local blocks and says how each result
is split. The rules here cover the data-parallel step: elementwise primitives, broadcasts,
reshapes that keep the split dimension whole, transposes, squeezes, reductions (a reduction
over the split dimension reduces the block, then `process_allreduce`s it: the gradient of a
batch mean becomes a sum across processes) and `dot_general` (contracting over the split
dimension: a local product, then an allreduce). A primitive without a rule gathers its split
operands (`gather`) and runs on the whole values, which is always right and moves the data.

`gather` and `block` are the two reshardings: the whole value from every process's block
(`process_allgather`) and this process's block of a replicated value (a static slice).
"""
import math

from . import emit as E
from .core import rule_table
from .elementwise import NAMES as ELEMENTWISE
from .processes import join_processes
from ..ir.registry import PRIMITIVES

PARTITION = rule_table(
    "partition", "partition(args, dims, *, process, processes, **params) -> (outs, out_dims)")


def gather(x, d, process, processes):
    """The whole value of `x`, split along `d` (None: `x` is already whole)."""
    if d is None:
        return x
    return join_processes(x, d, process, processes)


def block(x, d, process, processes):
    """This process's block along `d` of the replicated value `x`."""
    shape = E.aval(x).shape
    width = shape[d] // processes
    start = tuple(process * width if k == d else 0 for k in range(len(shape)))
    limit = tuple((process + 1) * width if k == d else n for k, n in enumerate(shape))
    return E.slice_(x, start_indices=start, limit_indices=limit, strides=None)


def reshard(x, have, want, process, processes):
    """`x` split along `have` as a value split along `want` (None: replicated)."""
    if have == want:
        return x
    whole = gather(x, have, process, processes)
    return whole if want is None else block(whole, want, process, processes)


def _split_like(args, dims, d, process, processes):
    """Every array operand split along `d` (rank-0 operands stay as they are)."""
    return [x if len(E.aval(x).shape) == 0 else reshard(x, k, d, process, processes)
            for x, k in zip(args, dims)]


def _elementwise(name):
    def rule(args, dims, *, process, processes, **params):
        d = next(k for k in dims if k is not None)
        return E.bind(name, *_split_like(args, dims, d, process, processes), **params), d
    return rule


def _broadcast_in_dim(args, dims, *, process, processes, shape, broadcast_dimensions, **params):
    d = broadcast_dimensions[dims[0]]
    local = tuple(n // processes if k == d else n for k, n in enumerate(shape))
    return E.broadcast_in_dim(args[0], shape=local, broadcast_dimensions=broadcast_dimensions,
                              **params), d


def _reshape(args, dims, *, process, processes, new_sizes, dimensions=None):
    """A reshape that keeps the split dimension whole (same sizes before and at it), or that
    reshapes the leading dimensions of a value split along its first one: the blocks stay
    contiguous."""
    (x,), (d,) = args, dims
    shape = tuple(n * processes if k == d else n for k, n in enumerate(E.aval(x).shape))
    before = math.prod(shape[:d])
    for e in range(len(new_sizes)):
        if math.prod(new_sizes[:e]) != before or dimensions is not None:
            continue
        if new_sizes[e] == shape[d] or (before == 1 and new_sizes[e] % processes == 0):
            local = tuple(n // processes if k == e else n for k, n in enumerate(new_sizes))
            return E.reshape(x, new_sizes=local, dimensions=None), e
    whole = gather(x, d, process, processes)
    return E.reshape(whole, new_sizes=new_sizes, dimensions=dimensions), None


def _moved(name, fix):
    """transpose, squeeze: the split dimension moves to `fix(d, **params)`."""
    def rule(args, dims, *, process, processes, **params):
        return E.bind(name, args[0], **params), fix(dims[0], **params)
    return rule


_REDUCE_ACROSS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min",
                  "reduce_or": "max", "reduce_and": "min"}


def _reduction(name):
    def rule(args, dims, *, process, processes, axes, **params):
        (x,), (d,) = args, dims
        local = E.bind(name, x, axes=axes, **params)
        if d in axes:
            return E.bind("process_allreduce", local, op=_REDUCE_ACROSS[name],
                          processes=processes), None
        return local, d - sum(1 for a in axes if a < d)
    return rule


def _dot_general(args, dims, *, process, processes, dimension_numbers, **params):
    """Contracting over the split dimension: local product, then a sum across processes;
    a split free or batch dimension: the result is split along its place in the output."""
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = args
    dl, dr = dims
    nl, nr = (len(E.aval(v).shape) for v in args)
    lfree = [k for k in range(nl) if k not in lc and k not in lb]
    rfree = [k for k in range(nr) if k not in rc and k not in rb]
    pairs = list(zip(lc, rc)) + list(zip(lb, rb))
    mate = dict(pairs) if dl is not None else {r: l for l, r in pairs}
    first, own = (dl, dl) if dl is not None else (dr, dr)
    if first in mate:       # a contracting or batch dimension: its mate is split the same way
        if dl is not None:
            lhs2, rhs2 = lhs, reshard(rhs, dr, mate[own], process, processes)
        else:
            lhs2, rhs2 = reshard(lhs, dl, mate[own], process, processes), rhs
        out = E.dot_general(lhs2, rhs2, dimension_numbers=dimension_numbers, **params)
        contracting = lc if dl is not None else rc
        if own in contracting:
            return E.bind("process_allreduce", out, op="sum", processes=processes), None
        batch = lb if dl is not None else rb
        return out, batch.index(own)
    other = reshard(rhs if dl is not None else lhs, dr if dl is not None else dl, None,
                    process, processes)
    pair = (lhs, other) if dl is not None else (other, rhs)
    out = E.dot_general(*pair, dimension_numbers=dimension_numbers, **params)
    at = len(lb) + (lfree.index(dl) if dl is not None else len(lfree) + rfree.index(dr))
    return out, at


for _name in ELEMENTWISE + ("stop_gradient", "no_derivative"):
    PARTITION[PRIMITIVES[_name]] = _elementwise(_name)
for _name in _REDUCE_ACROSS:
    PARTITION[PRIMITIVES[_name]] = _reduction(_name)
PARTITION[PRIMITIVES["broadcast_in_dim"]] = _broadcast_in_dim
PARTITION[PRIMITIVES["reshape"]] = _reshape
PARTITION[PRIMITIVES["dot_general"]] = _dot_general
PARTITION[PRIMITIVES["transpose"]] = _moved(
    "transpose", lambda d, *, permutation: list(permutation).index(d))
PARTITION[PRIMITIVES["squeeze"]] = _moved(
    "squeeze", lambda d, *, dimensions: d - sum(1 for k in dimensions if k < d))
