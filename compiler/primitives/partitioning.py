"""Partitioning rules: how a primitive runs on values split across the processes of a run.

`kiln.jit` with shardings over several processes' devices (runtime/global_jit.py) stages the
function for the global shapes, then `transforms/partition.py` rewrites it into the function
each process runs on its own blocks. A value there is either *replicated* (the whole value,
the same in every process) or *split* along one dimension `d` into `grid.blocks` equal blocks,
process p holding block `grid.owners[p]` (a `Grid`: block p in process p for the data-parallel
layout; another order when the mesh lists the processes' devices in another order; several
processes holding the same block when the mesh replicates the value over a process-spanning
axis). A rule

    PARTITION[prim](args, dims, *, grid, **params) -> (outs, out_dims)

(`dims[i]`: the split dimension of `args[i]`, None if replicated; at least one is split;
lists for multiple results) emits the equation on the local blocks and says how each result
is split. The rules keep the common steps of training and evaluation on the blocks:

- elementwise primitives, broadcasts, transposes, squeezes, reversals and reshapes that keep
  the split dimension whole (or reshape the leading dimensions of a value split along its
  first), slices, dynamic slices and updates, pads, concatenations and sorts along the other
  dimensions: on the blocks, with no communication;
- reductions: over other dimensions on the blocks; over the split dimension, the block's
  reduction and then one `process_allreduce` (sum, max, min; a product or xor gathers the
  blocks' reductions and reduces those);
- `dot_general`: a split batch or free dimension stays split; contracting over the split
  dimension is a local product and an allreduce;
- `argmax`/`argmin` over the split dimension: the block's best value and global index, then
  allreduces pick the first index holding the global best (NaN first, as in JAX);
- cumulative scans along the split dimension: the block's scan, combined with the blocks
  before it (their totals, one allgather): an exclusive scan across the processes.

Slices, pads, reversals and concatenations along the split dimension move only the rows
that cross blocks (partition_rows.py); gathers and scatters one row at a time along it work in
the local block, gathers of windows of several rows join the looked-up rows with one
allreduce, and those whose index into it is an iota along a batch dimension
(`jnp.take_along_axis`) stay split along that batch dimension (partition_indexing.py).

Every process runs the same collectives in the same order, and uses each one's result (the
simplifier would drop an unused one in some processes and not in others, and the rest would
wait for it): the rules differ between processes only in static block offsets. When several
processes hold each block (or the blocks are a sub-group's, a row of a mesh of processes), a
reduction across the blocks gathers the peers' values (`Grid.peers`, by sendrecv rounds) and
reduces them in each process in block order (an allreduce would count a block once per
holder). `EARLIER_PASS` holds the rules for the collectives of a pass over another mesh axis
(transforms/partition.py).

A primitive without a rule, and the cases above that do not fit, gather their split operands
(`gather`) and run on the whole values, which is always right and moves the data.
`gather` and `block` are the two reshardings: the whole value from every block
(`process_allgather`) and this process's block of a replicated value (a static slice).
"""
import math

import numpy as np

from . import emit as E
from .core import rule_table
from .elementwise import NAMES as ELEMENTWISE
from .processes import merge_leading
from .reductions import SCAN_COMBINE
from ..ir.registry import PRIMITIVES

PARTITION = rule_table(
    "partition", "partition(args, dims, *, grid, **params) -> (outs, out_dims)")


class Grid:
    """How split values lie over the processes: process p holds block `owners[p]` of
    `blocks`; this is process `process`, holding block `block`; `peers[b]` is the process it
    takes block b from (the blocks that make up its whole values: by default holder k of each
    block for holder k of its own; when a value is also split over another mesh axis, the
    processes with its own coordinates on that axis: global_jit.py). While a function is
    partitioned, `broadcasts` remembers the replicated values it made by `broadcast_in_dim`
    (id(result) -> (result, operand, params)), so that `block` broadcasts to the block
    instead of slicing the whole value, and `lookups` the indices of the gathers of whole
    rows from split values (id(indices) -> (indices, split dimension): partition_indexing.py),
    and `iotas` the index columns of the function's gathers and scatters that are an iota
    along a batch dimension of the indices (id(eqn) -> {column: dimension}: `iota_columns`)."""

    __slots__ = ("process", "owners", "blocks", "block", "peers", "broadcasts", "lookups",
                 "iotas", "tags")

    def __init__(self, process, owners, peers=None):
        self.broadcasts, self.lookups, self.iotas, self.tags = {}, {}, {}, 0
        self.process, self.owners = process, tuple(owners)
        self.blocks = max(self.owners) + 1
        self.block = self.owners[process]
        if peers is None:
            holders = [[p for p, b in enumerate(self.owners) if b == k]
                       for k in range(self.blocks)]
            k = holders[self.block].index(process)
            peers = [h[k % len(h)] for h in holders]
        self.peers = list(peers)

    @property
    def processes(self):
        return len(self.owners)

    def width(self, n):
        return n // self.blocks

    def next_tag(self):
        """The MPI tag of the next point-to-point round (the same sequence in every
        process, since each partitions the same function; within MPI's least tag bound)."""
        self.tags += 1
        return self.tags % 32768


_REDUCE_BLOCKS = {("sum", False): "reduce_sum", ("max", False): "reduce_max",
                  ("min", False): "reduce_min", ("sum", True): "reduce_or",
                  ("max", True): "reduce_or", ("min", True): "reduce_and"}


def allreduce(x, op, grid):
    """`x` reduced with `op` over the blocks. When processes share blocks (or the blocks are
    a sub-group's), the peers' `x` are gathered and reduced here instead, in block order (so
    that each block counts once, and every peer gets the same bits)."""
    if grid.peers == list(range(grid.processes)):
        return E.bind("process_allreduce", x, op=op, processes=grid.processes)
    reduce = _REDUCE_BLOCKS[op, E.aval(x).dtype == np.bool_]
    return E.bind(reduce, blocks_of(x, grid), axes=(0,))


def blocks_of(x, grid):
    """The peers' `x` (one per block), stacked along a new leading axis in block order: one
    allgather when every process is a peer; otherwise blocks - 1 rounds of sendrecv among
    the peers (in round s, to the peer of block b - s and from that of block b + s), which
    moves only the peers' values."""
    if grid.peers == list(range(grid.processes)):
        return E.bind("process_allgather", x, process=grid.process, processes=grid.processes)
    rows = {grid.block: x}
    for s in range(1, grid.blocks):
        rows[(grid.block + s) % grid.blocks] = E.bind(
            "process_sendrecv", x, dest=grid.peers[(grid.block - s) % grid.blocks],
            source=grid.peers[(grid.block + s) % grid.blocks], tag=grid.next_tag())
    shape = E.aval(x).shape
    stacked = [E.reshape(rows[b], new_sizes=(1,) + shape, dimensions=None)
               for b in range(grid.blocks)]
    return stacked[0] if len(stacked) == 1 else E.concatenate(*stacked, dimension=0)


def gather(x, d, grid):
    """The whole value of `x`, split along `d` (None: `x` is already whole)."""
    if d is None:
        return x
    return merge_leading(blocks_of(x, grid), d)


def block(x, d, grid):
    """This process's block along `d` of the replicated value `x` (of a broadcast: the
    operand's block, or the operand itself, broadcast to the block)."""
    shape = E.aval(x).shape
    made = grid.broadcasts.get(id(x))
    if made is not None and made[0] is x:
        _, operand, params = made
        dims = params["broadcast_dimensions"]
        local = tuple(grid.width(n) if k == d else n for k, n in enumerate(shape))
        if d in dims and E.aval(operand).shape[dims.index(d)] != 1:
            operand = block(operand, dims.index(d), grid)
        return E.broadcast_in_dim(operand, **{**params, "shape": local})
    width = grid.width(shape[d])
    start = tuple(grid.block * width if k == d else 0 for k in range(len(shape)))
    limit = tuple((grid.block + 1) * width if k == d else n for k, n in enumerate(shape))
    return E.slice_(x, start_indices=start, limit_indices=limit, strides=None)


def reshard(x, have, want, grid):
    """`x` split along `have` as a value split along `want` (None: replicated)."""
    if have == want:
        return x
    whole = gather(x, have, grid)
    return whole if want is None else block(whole, want, grid)


def _split_like(args, dims, d, grid):
    """Every array operand split along `d` (rank-0 operands stay as they are)."""
    return [x if len(E.aval(x).shape) == 0 else reshard(x, k, d, grid)
            for x, k in zip(args, dims)]


def on_whole(name, args, dims, grid, params):
    """The primitive run on its operands gathered whole: every result replicated."""
    outs = E.bind(name, *(gather(x, d, grid) for x, d in zip(args, dims)), **params)
    return outs, ([None] * len(outs) if PRIMITIVES[name].multiple_results else None)


def _first_split(dims):
    return next(k for k in dims if k is not None)


def global_size(x, d, grid):
    """The global size of `x`'s dimension `d` (split along `d`)."""
    return E.aval(x).shape[d] * grid.blocks


def _elementwise(name):
    def rule(args, dims, *, grid, **params):
        d = _first_split(dims)
        return E.bind(name, *_split_like(args, dims, d, grid), **params), d
    return rule


def _broadcast_in_dim(args, dims, *, grid, shape, broadcast_dimensions, **params):
    d = broadcast_dimensions[dims[0]]
    local = tuple(grid.width(n) if k == d else n for k, n in enumerate(shape))
    return E.broadcast_in_dim(args[0], shape=local, broadcast_dimensions=broadcast_dimensions,
                              **params), d


def _reshape(args, dims, *, grid, new_sizes, dimensions=None):
    """A reshape that keeps the split dimension whole (same sizes before and at it), or that
    reshapes the leading dimensions of a value split along its first one: the blocks stay
    contiguous."""
    (x,), (d,) = args, dims
    shape = tuple(n * grid.blocks if k == d else n for k, n in enumerate(E.aval(x).shape))
    before = math.prod(shape[:d])
    for e in range(len(new_sizes)):
        if math.prod(new_sizes[:e]) != before or dimensions is not None:
            continue
        if new_sizes[e] == shape[d] or (before == 1 and new_sizes[e] % grid.blocks == 0):
            local = tuple(grid.width(n) if k == e else n for k, n in enumerate(new_sizes))
            return E.reshape(x, new_sizes=local, dimensions=None), e
    return on_whole("reshape", args, dims, grid,
                      dict(new_sizes=new_sizes, dimensions=dimensions))


def _moved(name, fix):
    """transpose, squeeze: the split dimension moves to `fix(d, **params)`."""
    def rule(args, dims, *, grid, **params):
        return E.bind(name, args[0], **params), fix(dims[0], **params)
    return rule


_REDUCE_ACROSS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min",
                  "reduce_or": "max", "reduce_and": "min", "reduce_prod": None,
                  "reduce_xor": None}


def _reduction(name):
    def rule(args, dims, *, grid, axes, **params):
        (x,), (d,) = args, dims
        local = E.bind(name, x, axes=axes, **params)
        if d not in axes:
            return local, d - sum(1 for a in axes if a < d)
        op = _REDUCE_ACROSS[name]
        if op is None:   # no MPI operation: every block's reduction, reduced here
            return E.bind(name, blocks_of(local, grid), axes=(0,), **params), None
        return allreduce(local, op, grid), None
    return rule


def _dot_general(args, dims, *, grid, dimension_numbers, **params):
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
    own = dl if dl is not None else dr
    if own in mate:       # a contracting or batch dimension: its mate is split the same way
        if dl is not None:
            lhs2, rhs2 = lhs, reshard(rhs, dr, mate[own], grid)
        else:
            lhs2, rhs2 = reshard(lhs, dl, mate[own], grid), rhs
        out = E.dot_general(lhs2, rhs2, dimension_numbers=dimension_numbers, **params)
        contracting = lc if dl is not None else rc
        if own in contracting:
            return allreduce(out, "sum", grid), None
        batch = lb if dl is not None else rb
        return out, batch.index(own)
    other = reshard(rhs if dl is not None else lhs, dr if dl is not None else dl, None, grid)
    pair = (lhs, other) if dl is not None else (other, rhs)
    out = E.dot_general(*pair, dimension_numbers=dimension_numbers, **params)
    at = len(lb) + (lfree.index(dl) if dl is not None else len(lfree) + rfree.index(dr))
    return out, at


_ARG = {"argmax": ("reduce_max", "max", -np.inf), "argmin": ("reduce_min", "min", np.inf)}


def _argminmax(name):
    """Over the split dimension: each block's best value and its global index; the first
    index holding the best value of all (a NaN if any block has one) wins."""
    reduce, op, worst = _ARG[name]

    def rule(args, dims, *, grid, axes, index_dtype):
        (x,), (d,) = args, dims
        local = E.bind(name, x, axes=axes, index_dtype=index_dtype)
        if axes[0] != d:
            return local, d - (axes[0] < d)
        index = E.add(local, grid.block * E.aval(x).shape[d])
        value = E.bind(reduce, x, axes=axes)
        if E.aval(x).dtype.kind not in "iub":
            nan = E.ne(value, value)
            best = allreduce(E.select(nan, worst, value), op, grid)
            mine = E.select(allreduce(nan, "max", grid), nan, E.eq(value, best))
        else:
            mine = E.eq(value, allreduce(value, op, grid))
        last = np.iinfo(np.dtype(index_dtype)).max
        return allreduce(E.select(mine, index, last), "min", grid), None
    return rule


def _scan_identity(name, dtype):
    """The value a cumulative scan `name` of `dtype` combines with to leave things alone."""
    if name in ("cumsum", "cumprod"):
        return int(name == "cumprod")
    low = name in ("cummax", "cumlogsumexp")
    if dtype == np.bool_:
        return not low
    if dtype.kind in "iu":
        return np.iinfo(dtype).min if low else np.iinfo(dtype).max
    return -np.inf if low else np.inf


def _cumulative(name):
    """Along the split dimension: the block's scan combined with the blocks before it (after
    it, in reverse): every block's total (one allgather), an identity in front (behind, in
    reverse), scanned along the blocks, and this block's entry of that exclusive scan. Every
    process uses the gathered totals, so none drops the collective."""
    combine = SCAN_COMBINE[name]

    def rule(args, dims, *, grid, axis, reverse=False):
        (x,), (d,) = args, dims
        local = E.bind(name, x, axis=axis, reverse=reverse)
        if axis != d:
            return local, d
        shape = E.aval(local).shape
        at = 0 if reverse else shape[d] - 1
        total = E.slice_(local, start_indices=tuple(at if k == d else 0 for k in range(len(shape))),
                         limit_indices=tuple(at + 1 if k == d else n for k, n in enumerate(shape)),
                         strides=None)
        totals = blocks_of(total, grid)
        rest = E.aval(total).shape
        identity = E.full((1,) + rest, _scan_identity(name, E.aval(x).dtype), E.aval(x).dtype,
                          E.aval(x).weak_type)
        padded = E.concatenate(*((totals, identity) if reverse else (identity, totals)),
                               dimension=0)
        scanned = E.bind(name, padded, axis=0, reverse=reverse)
        row = grid.block + 1 if reverse else grid.block
        offset = E.reshape(E.slice_(scanned, start_indices=(row,) + (0,) * len(rest),
                                    limit_indices=(row + 1,) + rest, strides=None),
                           new_sizes=rest, dimensions=None)
        spread = E.broadcast_in_dim(offset, shape=shape,
                                    broadcast_dimensions=tuple(range(len(shape))))
        return combine(spread, local), d
    return rule


def _dynamic_slice(args, dims, *, grid, slice_sizes):
    x, d = args[0], dims[0]
    if d is None or slice_sizes[d] != global_size(x, d, grid):
        return on_whole("dynamic_slice", args, dims, grid, dict(slice_sizes=slice_sizes))
    local = tuple(E.aval(x).shape[d] if k == d else n for k, n in enumerate(slice_sizes))
    return E.dynamic_slice(*args, slice_sizes=local), d


def _dynamic_update_slice(args, dims, *, grid):
    (x, update, *starts), (d, du, *_) = args, dims
    if d is None or E.aval(update).shape[d] * (grid.blocks if du == d else 1) \
            != global_size(x, d, grid):
        return on_whole("dynamic_update_slice", args, dims, grid, {})
    return E.dynamic_update_slice(x, reshard(update, du, d, grid), *starts), d


def _concatenate(args, dims, *, grid, dimension):
    d = _first_split(dims)
    if d == dimension:
        return on_whole("concatenate", args, dims, grid, dict(dimension=dimension))
    return E.concatenate(*_split_like(args, dims, d, grid), dimension=dimension), d


def _sort(args, dims, *, grid, dimension, **params):
    d = _first_split(dims)
    if d == dimension:
        return on_whole("sort", args, dims, grid, dict(dimension=dimension, **params))
    outs = E.sort(*_split_like(args, dims, d, grid), dimension=dimension, **params)
    return outs, [d] * len(outs)


for _name in ELEMENTWISE + ("stop_gradient", "no_derivative", "name", "sharding_constraint"):
    PARTITION[PRIMITIVES[_name]] = _elementwise(_name)
for _name in _REDUCE_ACROSS:
    PARTITION[PRIMITIVES[_name]] = _reduction(_name)
for _name in _ARG:
    PARTITION[PRIMITIVES[_name]] = _argminmax(_name)
for _name in SCAN_COMBINE:
    PARTITION[PRIMITIVES[_name]] = _cumulative(_name)
PARTITION[PRIMITIVES["broadcast_in_dim"]] = _broadcast_in_dim
PARTITION[PRIMITIVES["reshape"]] = _reshape
PARTITION[PRIMITIVES["dot_general"]] = _dot_general
PARTITION[PRIMITIVES["dynamic_slice"]] = _dynamic_slice
PARTITION[PRIMITIVES["dynamic_update_slice"]] = _dynamic_update_slice
PARTITION[PRIMITIVES["concatenate"]] = _concatenate
PARTITION[PRIMITIVES["sort"]] = _sort
PARTITION[PRIMITIVES["transpose"]] = _moved(
    "transpose", lambda d, *, permutation: list(permutation).index(d))
PARTITION[PRIMITIVES["squeeze"]] = _moved(
    "squeeze", lambda d, *, dimensions: d - sum(1 for k in dimensions if k < d))


def _earlier_collective(name, moved):
    """A collective that an earlier pass emitted (the function was partitioned over another
    mesh axis first: global_jit.py), on a value split over this pass's axis: each process
    takes part with its own block. That pass reads only its peers' rows and exchanges only
    with its peers, and its peers hold the same block of this axis (Grid.peers), so what it
    reads is the block of the right value."""
    def rule(args, dims, *, grid, **params):
        return E.bind(name, args[0], **params), dims[0] + moved
    return rule


# Rules for the collectives of an earlier pass only (transforms/partition.py, `after`): a
# pmap's own collectives in the user's function mean something else, and gather first.
EARLIER_PASS = {PRIMITIVES["process_allgather"]: _earlier_collective("process_allgather", 1),
                PRIMITIVES["process_sendrecv"]: _earlier_collective("process_sendrecv", 0)}
