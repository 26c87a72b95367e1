"""Partitioning rules for slices, pads, reversals and concatenations along the split
dimension: each process receives only the rows its block of the result needs, from the
processes holding them.

The result stays split along the same dimension, in the same layout (as JAX's sharding
propagation keeps a slice's or pad's operand sharding): block j of a result of global size M
is rows [j*M/B, (j+1)*M/B) of it, B the block count. Each of those rows comes from one block
of the operand (or is padding), so block j's rows are a few contiguous runs, each from one
block. The rule plans them (`_runs`) and moves them in rounds (`_rounds`), in each of which a
block sends at most one run and receives at most one, with one `process_sendrecv` per process,
the run padded to the longest run of that round so that both sides agree on the size; every
process takes part in every round (a side with nothing to move is None), so each send meets
its receive. A shifting slice (x[2:], x[:-1], the halo of a stencil) is one round with one
neighbour per block: it moves the rows that cross a block boundary, not the array; a reversal
is one round (block j swaps with block B - 1 - j). A strided slice (x[::2]) takes every
step-th row of each run the same way. When several processes hold each block, a process
exchanges with its peers (`Grid.peers`: holder k of a block with holder k of the other).
A concatenation along the split dimension of operands split along it or replicated places
each split operand's rows as a shifted slice would (its padding cut away) and takes a
replicated operand's rows from its whole value, which every process holds.

What does not fit (interior padding, a result whose size the block count does not divide, an
empty one) runs on the operand gathered whole (partitioning.py's fallback), replicated.
"""
from . import emit as E
from .partitioning import PARTITION, on_whole, global_size
from ..ir.registry import PRIMITIVES


def _runs(j, start, out_width, width, size, step=1):
    """Block j's runs of a result whose row r is operand row start + r * step (rows outside
    [0, size) are padding; only with step 1): [(operand block, its local rows as a range) or
    (None, range(count of padding rows))], in order."""
    r0, r1 = j * out_width, (j + 1) * out_width

    def first(g):   # the first result row of block j at or after operand row g
        return max(r0, min(r1, -(-(g - start) // step)))
    cuts = [(None, r0, first(0))]
    cuts += [(i, first(i * width), first((i + 1) * width)) for i in range(size // width)]
    cuts.append((None, first(size), r1))
    runs = []
    for i, a, b in cuts:
        if b > a:
            lo = start + a * step - (0 if i is None else i * width)
            runs.append((i, range(b - a) if i is None else
                         range(lo, lo + (b - a - 1) * step + 1, step)))
    return runs


def _rows(x, d, plan, fill, grid):
    """This process's block of the value whose block j is `plan(j)`'s runs (`_runs`) of the
    blocks of `x` (split along `d`), padding runs filled with the scalar `fill`."""
    shape = E.aval(x).shape
    got = {}
    for pieces in _rounds(plan, grid.blocks):
        count = max(len(rows) for _, rows in pieces.values())
        out = next((j for j, (i, _) in pieces.items() if i == grid.block), None)
        dest = None
        if out is not None:
            rows = pieces[out][1]
            send = E.pad(_cut(x, d, rows), E.scalar(0, E.aval(x)), padding_config=tuple(
                (0, count - len(rows), 0) if k == d else (0, 0, 0) for k in range(len(shape))))
            dest = grid.peers[out]
        else:
            send = E.full(_sized(shape, d, count), 0, E.aval(x).dtype, E.aval(x).weak_type)
        source = None
        if grid.block in pieces:
            source = grid.peers[pieces[grid.block][0]]
        received = E.bind("process_sendrecv", send, dest=dest, source=source,
                          tag=grid.next_tag())
        if source is not None:
            got[pieces[grid.block][0]] = received
    parts = []
    for i, rows in plan(grid.block):
        if i is None:
            parts.append(E.broadcast_in_dim(fill, shape=_sized(shape, d, len(rows)),
                                            broadcast_dimensions=()))
        elif i == grid.block:
            parts.append(_cut(x, d, rows))
        else:
            parts.append(_cut(got[i], d, range(len(rows))))
    return parts[0] if len(parts) == 1 else E.concatenate(*parts, dimension=d)


def _rounds(plan, blocks):
    """The runs to move, in rounds ({receiving block: (sending block, rows)}) in which each
    block sends at most one run and receives at most one: each run goes into the first round
    where both its ends are free (a shift: one round per offset; a permutation: one)."""
    rounds = []
    for j in range(blocks):
        for i, rows in plan(j):
            if i is None or i == j:
                continue
            fit = next((r for r in rounds if j not in r
                        and all(src != i for src, _ in r.values())), None)
            if fit is None:
                fit = {}
                rounds.append(fit)
            fit[j] = (i, rows)
    return rounds


def _sized(shape, d, n):
    return tuple(n if k == d else m for k, m in enumerate(shape))


def _cut(x, d, rows):
    """The `rows` (a range) of `x` along `d`."""
    shape = E.aval(x).shape
    if rows == range(shape[d]):
        return x
    return E.slice_(x, start_indices=tuple(rows.start if k == d else 0
                                           for k in range(len(shape))),
                    limit_indices=tuple(rows.stop if k == d else n for k, n in enumerate(shape)),
                    strides=None if rows.step == 1 else tuple(
                        rows.step if k == d else 1 for k in range(len(shape))))


def _shifted(x, d, start, size_out, fill, grid, step=1):
    """Rows start, start + step, ... (size_out of them) of `x` along its split dimension `d`
    (outside the operand: `fill`), split the same way."""
    width = E.aval(x).shape[d]
    out_width = size_out // grid.blocks
    return _rows(x, d, lambda j: _runs(j, start, out_width, width, width * grid.blocks, step),
                 fill, grid)


def _fits(size_out, grid):
    return size_out > 0 and size_out % grid.blocks == 0


def _slice(args, dims, *, grid, start_indices, limit_indices, strides=None):
    (x,), (d,) = args, dims
    params = dict(start_indices=start_indices, limit_indices=limit_indices, strides=strides)
    step = 1 if strides is None else strides[d]
    size_out = len(range(start_indices[d], limit_indices[d], step))
    if not _fits(size_out, grid):
        return on_whole("slice", args, dims, grid, params)
    limit = tuple(E.aval(x).shape[d] if k == d else n for k, n in enumerate(limit_indices))
    start = tuple(0 if k == d else n for k, n in enumerate(start_indices))
    local = E.slice_(x, start_indices=start, limit_indices=limit, strides=None if
                     strides is None else tuple(1 if k == d else s for k, s in enumerate(strides)))
    if (start_indices[d], limit_indices[d], step) == (0, global_size(x, d, grid), 1):
        return local, d
    return _shifted(local, d, start_indices[d], size_out, None, grid, step), d


def _pad(args, dims, *, grid, padding_config):
    (x, value), d = args, dims[0]
    params = dict(padding_config=padding_config)
    if d is None or dims[1] is not None:
        return on_whole("pad", args, dims, grid, params)
    lo, hi, interior = padding_config[d]
    size_out = global_size(x, d, grid) + lo + hi
    if interior != 0 or not _fits(size_out, grid):
        return on_whole("pad", args, dims, grid, params)
    config = tuple((0, 0, 0) if k == d else c for k, c in enumerate(padding_config))
    local = E.pad(x, value, padding_config=config)
    if (lo, hi) == (0, 0):
        return local, d
    return _shifted(local, d, -lo, size_out, value, grid), d


def _rev(args, dims, *, grid, dimensions):
    (x,), (d,) = args, dims
    local = E.rev(x, dimensions=dimensions)
    if d not in dimensions:
        return local, d
    width = E.aval(x).shape[d]
    return _rows(local, d, lambda j: [(grid.blocks - 1 - j, range(width))], None, grid), d


_ELSEWHERE = PARTITION[PRIMITIVES["concatenate"]]   # along another dimension: partitioning.py


def _concatenate(args, dims, *, grid, dimension):
    """Along the split dimension, of operands split along it or replicated: block j of the
    result takes its rows of each split operand as a shifted slice (`_shifted`: only the
    rows that cross blocks move) and its rows of a replicated one from the whole value."""
    d = dimension
    sizes = [E.aval(x).shape[d] * (grid.blocks if k == d else 1) for x, k in zip(args, dims)]
    size_out = sum(sizes)
    if d not in dims or any(k not in (None, d) for k in dims) or not _fits(size_out, grid):
        return _ELSEWHERE(args, dims, grid=grid, dimension=dimension)
    out_width = size_out // grid.blocks
    low, parts, start = grid.block * out_width, [], 0
    for x, k, n in zip(args, dims, sizes):
        a, b, first = max(low, start), min(low + out_width, start + n), start
        if k is not None and n:   # the operand's rows placed as the result's block
            x, first = _shifted(x, d, -start, size_out, E.scalar(0, E.aval(x)), grid), low
        if b > a:
            parts.append(_cut(x, d, range(a - first, b - first)))
        start += n
    return (parts[0] if len(parts) == 1 else E.concatenate(*parts, dimension=d)), d


PARTITION[PRIMITIVES["slice"]] = _slice
PARTITION[PRIMITIVES["pad"]] = _pad
PARTITION[PRIMITIVES["rev"]] = _rev
PARTITION[PRIMITIVES["concatenate"]] = _concatenate
