"""Partitioning rules for gathers and scatters that index the split dimension of their operand:
the embedding lookup into a table split by rows (`table[ids]`, `jnp.take(table, ids, 0)`) and
its gradient, a scatter-add into the table.

They cover the indexing that picks whole rows: the operand is split along `d`, the indices
pick positions along `d` only (`start_index_map`/`scatter_dims_to_operand_dims` is `(d,)`,
and `d` is collapsed/inserted: one row per index), with no batching dimensions. The indices
(and a scatter's updates) are made whole first (they are the small side); then

- gather: each process looks its indices up in its own block (an index outside it reads row 0
  and is masked to zero), and one `process_allreduce` (sum) adds the blocks' contributions:
  every row comes from exactly one block, so the sum is that row (as XLA's SPMD partitioner
  does it). The result is replicated. Mode "clip" (and "promise_in_bounds") clamps the global
  index first; in mode "fill" an index outside the operand reads the fill value from the
  first block only.
- scatter, scatter_add, scatter_mul, scatter_min, scatter_max: each process applies, in mode
  "drop", the updates whose index falls in its block (shifted to the block), which drops the
  others; mode "clip" clamps the global index first. No communication; the result stays
  split along `d`.

Other gathers and scatters with a split operand run on it gathered whole (partitioning.py's
fallback).
"""
from . import emit as E
from .partitioning import PARTITION, whole_rule, reshard, allreduce, block
from ..ir.registry import PRIMITIVES

_SCATTERS = ("scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max")


def _positions(indices, d_size, mode):
    """The global index column (indices[..., 0]) clamped to [0, d_size) unless `mode` is
    "fill" or "drop" (then kept as it is)."""
    column = E.reshape(indices, new_sizes=E.aval(indices).shape[:-1], dimensions=None)
    if mode in ("fill", "drop"):
        return column
    return E.clamp(E.scalar(0, E.aval(column)), column, E.scalar(d_size - 1, E.aval(column)))


def _as_indices(column):
    shape = E.aval(column).shape
    return E.reshape(column, new_sizes=shape + (1,), dimensions=None)


def _picks_rows(x_shape, d, index_map, collapsed, batching):
    return tuple(index_map) == (d,) and d in collapsed and not batching and x_shape[d] > 0


def _gather(args, dims, *, grid, dimension_numbers, slice_sizes, mode="clip", fill_value=None):
    (x, indices), (d, di) = args, dims
    dn = dimension_numbers
    params = dict(dimension_numbers=dn, slice_sizes=slice_sizes, mode=mode,
                  fill_value=fill_value)
    if d is None or not _picks_rows(E.aval(x).shape, d, dn.start_index_map,
                                    dn.collapsed_slice_dims, dn.operand_batching_dims):
        return whole_rule("gather", args, dims, grid, params)
    width = E.aval(x).shape[d]
    start = grid.block * width
    indices = reshard(indices, di, None, grid)
    grid.lookups[id(indices)] = (indices, d)
    index = _positions(indices, width * grid.blocks, mode)
    local = E.sub(index, start)
    mine = E.and_(E.ge(local, 0), E.lt(local, width))
    if mode == "fill" and grid.block == 0:   # block 0 also reads the fill value of indices
        outside = E.or_(E.lt(index, 0), E.ge(index, width * grid.blocks))   # outside x
        mine = E.or_(mine, outside)
        local = E.select(outside, index, local)
    local = E.select(mine, local, 0)
    found = E.gather(x, _as_indices(local), dimension_numbers=dn, slice_sizes=slice_sizes,
                     mode=mode, fill_value=fill_value)
    out = E.aval(found)
    batch = tuple(k for k in range(len(out.shape)) if k not in dn.offset_dims)
    keep = E.broadcast_in_dim(mine, shape=out.shape, broadcast_dimensions=batch)
    return allreduce(E.select(keep, found, E.full((), 0, out.dtype, out.weak_type)), "sum",
                     grid), None


def _scatter(name):
    def rule(args, dims, *, grid, dimension_numbers, mode="drop"):
        (x, indices, updates), (d, di, du) = args, dims
        dn = dimension_numbers
        params = dict(dimension_numbers=dn, mode=mode)
        if d is None or not _picks_rows(E.aval(x).shape, d, dn.scatter_dims_to_operand_dims,
                                        dn.inserted_window_dims, dn.operand_batching_dims):
            return whole_rule(name, args, dims, grid, params)
        width = E.aval(x).shape[d]
        index = _positions(reshard(indices, di, None, grid), width * grid.blocks,
                           "drop" if mode == "drop" else "clip")
        local = _as_indices(E.sub(index, grid.block * width))
        return E.bind(name, x, local, reshard(updates, du, None, grid), dimension_numbers=dn,
                      mode="drop"), d
    return rule


def scatter_into_lookup(eqn, ins, grid):
    """A scatter of whole values whose operand is a replicated broadcast (the zeros a
    gradient is added into) and whose indices looked rows up in a value split along d: the
    scatter on the operand's blocks along d (broadcast to the block), so the gradient of an
    embedding lookup stays split like its table (JAX's sharding propagation gives it the
    table's sharding). (outs, dims), or None when it is not such a scatter."""
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


PARTITION[PRIMITIVES["gather"]] = _gather
for _name in _SCATTERS:
    PARTITION[PRIMITIVES[_name]] = _scatter(_name)
