"""Partitioning rules for gathers and scatter-adds whose operand is split across the processes
(the `PARTITION` table of primitives/partitioning.py), so that an embedding lookup or its
gradient does not gather the whole table first.

- `gather` from an operand split along `d`, indexed along `d` one row at a time (`x[idx]`,
  `jnp.take(x, idx, axis=0)`): every process gathers from its own block with the index
  column of `d` shifted by the block's offset, keeps the rows whose index it owns (the index
  clamped to the whole dimension first in "clip" and "promise_in_bounds" mode, as the whole
  gather clamps it), puts zeros elsewhere and one `process_allreduce` (sum) combines them:
  the result is replicated. Real floats cross as their bits, so that a -0.0 or a NaN's
  payload arrives as it is. In "fill" mode the rows whose index is outside the whole dimension get the fill
  value after the sum. The indices are gathered whole first when they are split.
- `gather` of windows of several rows along `d` (`_windows`): each process gathers from its
  block padded on both sides, keeps the rows of each window it owns, and the same one
  allreduce joins them; the result is replicated.
- `gather` and scatters whose index column into `d` is the iota along a batch dimension of
  the indices of `d`'s size (`jnp.take_along_axis` and its gradient, `put_along_axis`, the
  batching dimensions `kiln.lax` rewrites into such columns; `along_iota`, called by
  transforms/partition.py): every index vector reads or writes the row of its own batch
  position, so on the blocks along that batch dimension there is no communication; the
  result is split along the batch dimension (gather; a scatter: along `d`), as JAX's
  partitioner keeps it.
- `gather` that takes the whole of the split dimension (a window of every row): on the block,
  the result split along the window's dimension. An operand that is replicated, indexed by
  indices split along a batch dimension (the data-parallel lookup): on the local indices, the
  result split along that batch dimension.
- `scatter_add` into an operand split along `d`, one row at a time along `d`: each process
  adds the updates whose index it owns (clamped first in "clip" mode; the other modes drop
  what is out of range) into its block, the others turned into the identity (-0.0 for
  floats, which leaves a -0.0 as it is); the result keeps the split. Split indices or updates are
  gathered whole first.

- `scatter`, `scatter_mul`, `scatter_min`, `scatter_max` the same way, except that the
  updates a process does not own are moved out of its block and dropped (`_scatter`).
- a scatter into a replicated broadcast (the zeros a gradient is added into) whose indices
  looked rows up in a value split along `d` (`Grid.lookups`): on the broadcast's block along
  `d` (`scatter_into_lookup`, called by transforms/partition.py for equations with no split
  operand), so the gradient of an embedding lookup stays split like the table.

Everything else (an index dtype too small to hold the dimension's size, with a window's
length) runs on the whole operand, as before.
"""
import numpy as np

from . import emit as E
from .indexing import default_fill
from .partitioning import PARTITION, allreduce, global_size, on_whole, reshard, block
from ..ir.registry import PRIMITIVES

_BITS = {2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
_IDENTITY = {"f": -0.0, "c": complex(-0.0, -0.0), "b": False, "i": 0, "u": 0}


def _identity_like(shape, like):
    a = E.aval(like)
    return E.full(shape, _IDENTITY[a.dtype.kind], a.dtype, a.weak_type)


def _fits(indices, n):
    """Whether the index dtype holds every offset and bound of a dimension of size `n`."""
    return n > 0 and n <= np.iinfo(E.aval(indices).dtype).max


def _column(indices, k, n, clamp):
    """Column `k` of the index vectors (the index along the split dimension), clamped to
    [0, n - 1] when `clamp` (as the whole operation clamps it)."""
    batch = E.aval(indices).shape[:-1]
    column = E.reshape(E.slice_(indices, start_indices=(0,) * len(batch) + (k,),
                                limit_indices=batch + (k + 1,), strides=None),
                       new_sizes=batch, dimensions=None)
    if not clamp:
        return column
    return E.clamp(E.scalar(0, E.aval(column)), column, E.scalar(n - 1, E.aval(column)))


def _within(column, low, high):
    return E.and_(E.ge(column, low), E.lt(column, high))


def _moved(indices, k, column, owned, offset, elsewhere=0):
    """`indices` with column `k` replaced by `column` less the block's offset where the block
    owns it (`elsewhere` elsewhere; everywhere when `owned` is None)."""
    shape = E.aval(indices).shape
    batch = shape[:-1]
    moved = E.sub(column, offset)
    local = E.reshape(moved if owned is None else E.select(owned, moved, elsewhere),
                      new_sizes=batch + (1,), dimensions=None)
    if shape[-1] == 1:
        return local
    before = E.slice_(indices, start_indices=(0,) * len(shape),
                      limit_indices=batch + (k,), strides=None)
    after = E.slice_(indices, start_indices=(0,) * len(batch) + (k + 1,), limit_indices=shape,
                     strides=None)
    return E.concatenate(before, local, after, dimension=len(batch))


def _spread(mask, shape, window_dims):
    """`mask` (one entry per index vector) broadcast over the window dimensions of `shape`."""
    batch = tuple(k for k in range(len(shape)) if k not in window_dims)
    return E.broadcast_in_dim(mask, shape=tuple(shape), broadcast_dimensions=batch)


def _owners_rows(value, mine, grid):
    """`value` where `mine` in the process that owns it, in every process (one allreduce of
    a sum, every other process adding zero). Real floats travel as their bits (unsigned
    integers of the same width), so that a -0.0 or a NaN's payload arrives exactly."""
    a = E.aval(value)
    bits = _BITS.get(a.dtype.itemsize) if a.dtype.kind == "f" else None
    if bits is None:
        return allreduce(E.select(mine, value, _identity_like(a.shape, value)), "sum", grid)
    raw = E.bitcast_convert_type(value, new_dtype=bits)
    total = allreduce(E.select(mine, raw, 0), "sum", grid)
    return E.cast_like(E.bitcast_convert_type(total, new_dtype=a.dtype), a)


def _gather(args, dims, *, grid, dimension_numbers, slice_sizes, mode="clip", fill_value=None):
    (x, indices), (d, di) = args, dims
    dn = dimension_numbers
    params = dict(dimension_numbers=dn, slice_sizes=slice_sizes, mode=mode, fill_value=fill_value)
    if d is None:
        if di == len(E.aval(indices).shape) - 1:
            return on_whole("gather", args, dims, grid, params)
        batch = [k for k in range(len(E.aval(indices).shape) + len(dn.offset_dims) - 1)
                 if k not in dn.offset_dims]
        return E.gather(x, indices, **params), batch[di]
    n, width = global_size(x, d, grid), E.aval(x).shape[d]
    if slice_sizes[d] == n and d not in dn.collapsed_slice_dims:
        local = tuple(width if k == d else s for k, s in enumerate(slice_sizes))
        kept = [k for k in range(len(slice_sizes)) if k not in dn.collapsed_slice_dims]
        out = E.gather(x, reshard(indices, di, None, grid), **{**params, "slice_sizes": local})
        return out, dn.offset_dims[kept.index(d)]
    if d in dn.start_index_map and slice_sizes[d] > 1 and _fits(indices, n + slice_sizes[d]):
        return _windows(x, reshard(indices, di, None, grid), d, grid, params), None
    if d not in dn.start_index_map or slice_sizes[d] != 1 or not _fits(indices, n):
        return on_whole("gather", args, dims, grid, params)
    indices = reshard(indices, di, None, grid)
    grid.lookups[id(indices)] = (indices, d)
    k, offset = dn.start_index_map.index(d), grid.block * width
    column = _column(indices, k, n, mode != "fill")
    owned = _within(column, offset, offset + width)
    out = E.gather(x, _moved(indices, k, column, owned, offset), **params)
    shape = E.aval(out).shape
    if 0 in shape:
        return out, None
    total = _owners_rows(out, _spread(owned, shape, dn.offset_dims), grid)
    if mode != "fill":
        return total, None
    fill = default_fill(E.aval(out).dtype) if fill_value is None else fill_value
    return E.select(_spread(_within(column, 0, n), shape, dn.offset_dims), total,
                    E.full(shape, fill, E.aval(out).dtype, E.aval(out).weak_type)), None


def _windows(x, indices, d, grid, params):
    """A gather of windows of s > 1 rows along the split dimension `d`: each process gathers
    from its block padded with s - 1 rows on each side, the window's start moved into the
    padded block (clamped: a window that misses the block reads rows it does not keep), keeps
    the rows it owns and one allreduce joins them (`_owners_rows`, exact bits), as for single
    rows. The start is clamped to [0, n - s] first where the whole gather clamps it; in
    "fill" mode a window outside the operand along any of its indexed dimensions is masked
    before the sum and gets the fill value after it."""
    dn, sizes, mode = params["dimension_numbers"], params["slice_sizes"], params["mode"]
    s, n, width = sizes[d], global_size(x, d, grid), E.aval(x).shape[d]
    k, offset = dn.start_index_map.index(d), grid.block * width
    column = _column(indices, k, n - s + 1, mode != "fill")
    padded = E.pad(x, E.scalar(0, E.aval(x)), padding_config=tuple(
        (s - 1, s - 1, 0) if m == d else (0, 0, 0) for m in range(len(sizes))))
    start = E.clamp(E.scalar(0, E.aval(column)), E.sub(column, offset - s + 1),
                    E.scalar(width + s - 1, E.aval(column)))
    out = E.gather(padded, _moved(indices, k, start, None, 0), **params)
    shape = E.aval(out).shape
    if 0 in shape:
        return out
    kept = [m for m in range(len(sizes)) if m not in dn.collapsed_slice_dims]
    batch = tuple(m for m in range(len(shape)) if m not in dn.offset_dims)
    rows = E.add(E.broadcast_in_dim(column, shape=shape, broadcast_dimensions=batch),
                 E.iota(dtype=E.aval(column).dtype, shape=shape,
                        dimension=dn.offset_dims[kept.index(d)]))
    mine = _within(rows, offset, offset + width)
    if mode != "fill":
        return _owners_rows(out, mine, grid)
    inside = None
    for c, m in enumerate(dn.start_index_map):
        size = n if m == d else E.aval(x).shape[m]
        fits = _within(_column(indices, c, size, False), 0, size - sizes[m] + 1)
        inside = fits if inside is None else E.and_(inside, fits)
    inside = _spread(inside, shape, dn.offset_dims)
    total = _owners_rows(out, E.and_(mine, inside), grid)
    fill = default_fill(E.aval(out).dtype) if params["fill_value"] is None \
        else params["fill_value"]
    return E.select(inside, total, E.full(shape, fill, E.aval(out).dtype,
                                          E.aval(out).weak_type))


def _scatter_add(args, dims, *, grid, dimension_numbers, mode="drop"):
    (x, indices, updates), (d, di, du) = args, dims
    dn = dimension_numbers
    if d is None or d not in dn.scatter_dims_to_operand_dims \
            or d not in dn.inserted_window_dims or not _fits(indices, global_size(x, d, grid)):
        return on_whole("scatter_add", args, dims, grid, dict(dimension_numbers=dn, mode=mode))
    n, width = global_size(x, d, grid), E.aval(x).shape[d]
    indices, updates = reshard(indices, di, None, grid), reshard(updates, du, None, grid)
    k, offset = dn.scatter_dims_to_operand_dims.index(d), grid.block * width
    column = _column(indices, k, n, mode == "clip")
    owned = _within(column, offset, offset + width)
    shape = E.aval(updates).shape
    mine = _spread(owned, shape, dn.update_window_dims)
    kept = E.select(mine, updates, _identity_like(shape, updates))
    return E.scatter_add(x, _moved(indices, k, column, owned, offset), kept,
                         dimension_numbers=dn, mode=mode), d


def _scatter(name):
    """scatter, scatter_mul, scatter_min, scatter_max into an operand split along `d`, one
    row at a time along `d`: each process applies the updates whose index it owns, the
    others moved out of its block and dropped (a set has no identity to mask with). In "clip"
    mode the index along `d` must be the only one (it is clamped, then the rest dropped)."""
    def rule(args, dims, *, grid, dimension_numbers, mode="drop"):
        (x, indices, updates), (d, di, du) = args, dims
        dn = dimension_numbers
        if d is None or d not in dn.scatter_dims_to_operand_dims \
                or d not in dn.inserted_window_dims or dn.operand_batching_dims \
                or (mode == "clip" and len(dn.scatter_dims_to_operand_dims) > 1) \
                or not _fits(indices, global_size(x, d, grid)):
            return on_whole(name, args, dims, grid, dict(dimension_numbers=dn, mode=mode))
        n, width = global_size(x, d, grid), E.aval(x).shape[d]
        indices, updates = reshard(indices, di, None, grid), reshard(updates, du, None, grid)
        k, offset = dn.scatter_dims_to_operand_dims.index(d), grid.block * width
        column = _column(indices, k, n, mode == "clip")
        owned = _within(column, offset, offset + width)
        return E.bind(name, x, _moved(indices, k, column, owned, offset, width), updates,
                      dimension_numbers=dn, mode="drop" if mode == "clip" else mode), d
    return rule


def iota_columns(fn, consts):
    """{id(eqn): {column k: dimension j}} for the gathers and scatters of `fn` whose index
    column k is the iota along the indices' dimension j (`jnp.take_along_axis`, and the
    batching dimensions `kiln.lax` rewrites into such columns): the indices are a known
    value, or a concatenation along their last dimension with known pieces. `consts`: the
    values of `fn`'s last inputs (the constants staging hoisted out)."""
    known = {id(v): np.asarray(c) for v, c in zip(fn.invars[len(fn.invars) - len(consts):],
                                                 consts)}
    made, found = {}, {}
    for eqn in fn.eqns:
        for v in eqn.outvars:
            made[id(v)] = eqn
        if eqn.prim.name not in ("gather",) + _SCATTERS:
            continue
        indices = eqn.invars[1]
        rank = len(indices.aval.shape)
        concat = made.get(id(indices))
        pieces = [indices]
        if concat is not None and concat.prim.name == "concatenate" \
                and concat.params["dimension"] == rank - 1:
            pieces = concat.invars
        columns, start = {}, 0
        for piece in pieces:
            value = known.get(id(piece))
            for c in range(piece.aval.shape[-1] if value is not None else 0):
                j = _iota_dimension(value[..., c])
                if j is not None:
                    columns[start + c] = j
            start += piece.aval.shape[-1]
        if columns:
            found[id(eqn)] = columns
    return found


def _iota_dimension(column):
    """The dimension j along which `column` is the iota (column[..., i, ...] == i), or None."""
    for j, n in enumerate(column.shape):
        if n > 1 and np.array_equal(column, np.broadcast_to(
                np.arange(n).reshape([n if k == j else 1 for k in range(column.ndim)]),
                column.shape)):
            return j
    return None


def along_iota(eqn, ins, dims, grid):
    """A gather from an operand split along d (or a scatter into one, or into a replicated
    value) whose index column into d is the iota along the indices' dimension j of the same
    size (`grid.iotas`): every batch position j reads or writes row j, so on the blocks
    along j of the indices (and of a scatter's updates) each process works in its own
    block, the column less the block's offset, with no communication. The result is split
    along the batch dimension (gather) or d (scatter), as JAX's partitioner keeps it through
    the operand batching dimensions. (outs, dims), or None when it is not such a gather."""
    columns = grid.iotas.get(id(eqn))
    if columns is None:
        return None
    name, dn = eqn.prim.name, eqn.params["dimension_numbers"]
    (x, indices), (d, di) = ins[:2], dims[:2]
    gather = name == "gather"
    index_map = dn.start_index_map if gather else dn.scatter_dims_to_operand_dims
    collapsed = dn.collapsed_slice_dims if gather else dn.inserted_window_dims
    shape = E.aval(indices).shape
    scatter = None if gather else [m for m in range(len(E.aval(ins[2]).shape))
                                   if m not in dn.update_window_dims]
    if d is None and not gather:   # into a replicated value: split like the indices or updates
        split = di if di is not None else scatter.index(dims[2]) if dims[2] in scatter else None
        k = next((k for k, j in columns.items() if split is not None and j == split), None)
        d = None if k is None else index_map[k]
    if d is None or d not in index_map or d not in collapsed:
        return None
    k = index_map.index(d)
    j = columns.get(k)
    n = E.aval(x).shape[d] * (grid.blocks if dims[0] is not None else 1)
    if j is None or (gather and eqn.params["slice_sizes"][d] != 1) \
            or shape[j] * (grid.blocks if di == j else 1) != n or n % grid.blocks:
        return None
    x = x if dims[0] is not None else block(x, d, grid)
    indices = reshard(indices, di, j, grid)
    local = _moved(indices, k, _column(indices, k, n, False), None,
                   grid.block * (n // grid.blocks))
    if gather:
        batch = [m for m in range(len(eqn.outvars[0].aval.shape)) if m not in dn.offset_dims]
        return [E.gather(x, local, **eqn.params)], [batch[j]]
    updates = reshard(ins[2], dims[2], scatter[j], grid)
    return [E.bind(name, x, local, updates, **eqn.params)], [d]


def scatter_into_lookup(eqn, ins, grid):
    """A scatter whose operand is a replicated broadcast (the zeros a gradient is added into)
    and whose indices looked rows up in a value split along d (`Grid.lookups`): the scatter
    on the operand's blocks along d (broadcast to the block), so the gradient of an
    embedding lookup stays split like its table (JAX's propagation gives it the table's
    sharding). (outs, dims), or None when it is not such a scatter."""
    if eqn.prim.name not in _SCATTERS:
        return None
    x, indices, updates = ins
    made, looked = grid.broadcasts.get(id(x)), grid.lookups.get(id(indices))
    if made is None or made[0] is not x or looked is None or looked[0] is not indices:
        return None
    d = looked[1]
    if E.aval(x).shape[d] % grid.blocks:
        return None
    out, od = PARTITION[eqn.prim]([block(x, d, grid), indices, updates], [d, None, None],
                                  grid=grid, **eqn.params)
    return [out], [od]


_SCATTERS = ("scatter_add", "scatter", "scatter_mul", "scatter_min", "scatter_max")
PARTITION[PRIMITIVES["gather"]] = _gather
PARTITION[PRIMITIVES["scatter_add"]] = _scatter_add
for _name in _SCATTERS[1:]:
    PARTITION[PRIMITIVES[_name]] = _scatter(_name)
