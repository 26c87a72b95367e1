"""Gather's and scatter's dimension numbers: the named tuples (JAX's fields, order and
defaults), JAX's validation of them with JAX's error texts, operand batching dimensions
included, the gather's result shape, and the rewrite of batching dimensions into the
primitives' vocabulary, which has none.

Operand batching dimensions (XLA's batched gather and scatter: each batch position of the
indices reads or writes the same batch position of the operand) are the same as one more
index column per pair (`batching_index_dims`): the iota along the indices' batching
dimension, pointing into the operand's batching dimension, which the gather collapses
(slice size 1) and the scatter inserts. The iota is always in bounds and its window of 1
always fits, so every mode clamps, fills and drops exactly as it does for the user's
columns. `kiln.lax` builds the iota columns; the primitives never see batching dimensions.
"""
from typing import NamedTuple

from ..ir.params import register_param_type


@register_param_type
class GatherDimensionNumbers(NamedTuple):
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


@register_param_type
class ScatterDimensionNumbers(NamedTuple):
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


# ------------------------------------------------------------- JAX's checks, JAX's texts

def _sorted(dims, op, name):
    if any(b < a for a, b in zip(dims, dims[1:])):
        raise TypeError(f"{name} in {op} op must be sorted; got {dims}")


def _unique(dims, op, name):
    if len(set(dims)) != len(dims):
        raise TypeError(f"{name} in {op} op must not repeat; got: {dims}.")


def _in_range(dims, rank, op, name, ordered=False):
    """Every dim in [0, rank); of `ordered` (sorted) dims, the first or the last is named."""
    bad = [d for d in dims if not 0 <= d < rank]
    if bad:
        d = bad[0] if not ordered or dims[0] < 0 else dims[-1]
        raise TypeError(f"Invalid {name} set in {op} op; valid range is [0, {rank}); got: {d}.")


def _disjoint(a, b, op, name_a, name_b):
    if set(a) & set(b):
        raise TypeError(f"{name_a} and {name_b} in {op} op must be disjoint; got: {a} and {b}.")


def _check_batching(op, operand_shape, indices_shape, operand_dims, indices_dims, indices_name):
    """The checks of the indices' batching dimensions and of the pairing, common to both."""
    title = op.capitalize()
    _unique(indices_dims, op, indices_name)
    _in_range(indices_dims, len(indices_shape), op, indices_name)
    if len(indices_shape) - 1 in indices_dims:
        raise TypeError(f"{title} op cannot have the index vector dimension as a batching "
                        f"dimension; got {indices_dims}.")
    if len(operand_dims) != len(indices_dims):
        gap = "" if op == "gather" else " "   # (JAX's gather text has no space there)
        raise TypeError(f"{title} op requires equal numbers of operand_batching_dims and "
                        f"{indices_name}, got {operand_dims} and{gap}{indices_dims}.")
    operand_batch = tuple(operand_shape[d] for d in operand_dims)
    indices_batch = tuple(indices_shape[d] for d in indices_dims)
    if operand_batch != indices_batch:
        raise TypeError(f"{title} op requires operand batching dimensions and indices batching "
                        f"dimensions to have the same shape, got {operand_batch} and "
                        f"{indices_batch}.")
    return operand_batch


def gather_shape(operand_shape, indices_shape, dn, slice_sizes):
    """The shape of a gather's result; TypeError (JAX's, in JAX's order) for invalid
    dimension numbers or slice sizes."""
    rank, nidx = len(operand_shape), len(indices_shape)
    if not nidx:
        raise TypeError("Gather index leaf dimension must be within [0, rank(indices) + 1). "
                        "rank(indices) is 0 and gather index leaf dimension is -1.")
    offset_dims, collapsed = dn.offset_dims, dn.collapsed_slice_dims
    index_map, batching = dn.start_index_map, dn.operand_batching_dims
    _sorted(offset_dims, "gather", "offset_dims")
    _unique(offset_dims, "gather", "offset_dims")
    out_rank = len(offset_dims) + nidx - 1
    for i, d in enumerate(offset_dims):
        if not 0 <= d < out_rank:
            raise TypeError(f"Offset dimension {i} in gather op is out of bounds; got {d}, but "
                            f"should have been in [0, {out_rank})")
    if len(index_map) != indices_shape[-1]:
        raise TypeError(f"Gather op has {len(index_map)} elements in start_index_map and the "
                        f"bound of dimension index_vector_dim={nidx - 1} of indices is "
                        f"{indices_shape[-1]}. These two numbers must be equal.")
    for i, d in enumerate(index_map):
        if not 0 <= d < rank:
            raise TypeError(f"Invalid start_index_map; domain is [0, {rank}), got: {i}->{d}.")
    _unique(index_map, "gather", "start_index_map")
    _sorted(collapsed, "gather", "collapsed_slice_dims")
    _in_range(collapsed, rank, "gather", "collapsed_slice_dims", ordered=True)
    _unique(collapsed, "gather", "collapsed_slice_dims")
    _unique(batching, "gather", "operand_batching_dims")
    _sorted(batching, "gather", "operand_batching_dims")
    _in_range(batching, rank, "gather", "operand_batching_dims", ordered=True)
    _disjoint(collapsed, batching, "gather", "collapsed_slice_dims", "operand_batching_dims")
    _disjoint(index_map, batching, "gather", "start_index_map", "operand_batching_dims")
    _check_batching("gather", operand_shape, indices_shape, batching,
                    dn.start_indices_batching_dims, "start_indices_batching_dims")
    if len(slice_sizes) != rank:
        raise TypeError(f"Gather op must have one slice size for every input dimension; got: "
                        f"len(slice_sizes)={len(slice_sizes)}, input_shape.rank={rank}")
    if len(slice_sizes) != len(offset_dims) + len(collapsed) + len(batching):
        raise TypeError(f"All components of the offset index in a gather op must either be a "
                        f"offset dimension or explicitly collapsed/batching; got "
                        f"len(slice_sizes)={len(slice_sizes)}, output_slice_sizes="
                        f"{offset_dims}, collapsed_slice_dims={collapsed}, "
                        f"operand_batching_dims={batching}.")
    if all(indices_shape[:-1]):   # (no window: any slice size goes; JAX also lets an
        # index vector of 0 through, which its lowering then refuses)
        for i, (z, d) in enumerate(zip(slice_sizes, operand_shape)):
            if not 0 <= z <= d:
                raise TypeError(f"Slice size at index {i} in gather op is out of range, must "
                                f"be within [0, {d} + 1), got {z}.")
    for i, d in enumerate(collapsed):
        if slice_sizes[d] != 1:
            raise TypeError(f"Gather op can only collapse slice dims with bound 1, but bound is "
                            f"{slice_sizes[d]} for index {d} at position {i}.")
    for i, d in enumerate(batching):
        if slice_sizes[d] > 1:
            raise TypeError(f"Gather op can only have operand batching dims with bound 0/1, "
                            f"but bound is {slice_sizes[d]} for index {d} at position {i}.")
    offset = iter(z for i, z in enumerate(slice_sizes) if i not in collapsed + batching)
    batch = iter(indices_shape[:-1])
    return tuple(next(offset) if i in offset_dims else next(batch) for i in range(out_rank))


def check_scatter(operand_shape, indices_shape, updates_shape, dn):
    """TypeError (JAX's, in JAX's order) for invalid scatter dimension numbers or shapes."""
    rank, nidx, nupd = len(operand_shape), len(indices_shape), len(updates_shape)
    if not nidx:
        raise TypeError("Scatter index leaf dimension must be within [0, rank(indices) + 1). "
                        "rank(indices) is 0 and scatter index leaf dimension is -1.")
    window_dims, inserted = dn.update_window_dims, dn.inserted_window_dims
    to_operand, batching = dn.scatter_dims_to_operand_dims, dn.operand_batching_dims
    if nupd != nidx - 1 + len(window_dims):
        raise TypeError(f"Updates tensor must be of rank {nidx - 1 + len(window_dims)}; got "
                        f"{nupd}.")
    for dims, name, within in ((window_dims, "update_window_dims", nupd),
                               (inserted, "inserted_window_dims", rank)):
        _sorted(dims, "scatter", name)
        _unique(dims, "scatter", name)
        _in_range(dims, within, "scatter", name, ordered=True)
    _sorted(batching, "scatter", "operand_batching_dims")
    _unique(batching, "scatter", "operand_batching_dims")
    _in_range(batching, rank, "scatter", "operand_batching_dims", ordered=True)
    _disjoint(inserted, batching, "scatter", "inserted_window_dims", "operand_batching_dims")
    _disjoint(to_operand, batching, "scatter", "scatter_dims_to_operand_dims",
              "operand_batching_dims")
    operand_batch = _check_batching("scatter", operand_shape, indices_shape, batching,
                                    dn.scatter_indices_batching_dims,
                                    "scatter_indices_batching_dims")
    update_batch_axes = [i for i in range(nupd) if i not in window_dims]
    updates_batch = tuple(updates_shape[update_batch_axes[d]]
                          for d in dn.scatter_indices_batching_dims)
    if operand_batch != updates_batch:
        raise TypeError(f"Scatter op requires operand batching dimensions and updates batching "
                        f"dimensions to have the same shape, got {operand_batch} and "
                        f"{updates_batch}.")
    window = len(window_dims) + len(inserted) + len(batching)
    if window != rank:
        raise TypeError(f"Scatter op has window of size {window}; doesn't match operand of "
                        f"rank {rank}.")
    if len(to_operand) != indices_shape[-1]:
        raise TypeError(f"Scatter op has {len(to_operand)} elements in "
                        f"scatter_dims_to_operand_dims and the bound of dimension "
                        f"index_vector_dim={nidx - 1} of indices is {indices_shape[-1]}. These "
                        f"two numbers must be equal")
    for i, d in enumerate(to_operand):
        if not 0 <= d < rank:
            raise TypeError(f"Invalid scatter_dims_to_operand_dims mapping; domain is "
                            f"[0, {rank}), got: {i}->{d}.")
    _unique(to_operand, "scatter", "scatter_dims_to_operand_dims")
    operand_window = [d for i, d in enumerate(operand_shape) if i not in inserted + batching]
    for u, d in zip(window_dims, operand_window):
        if updates_shape[u] > d:
            raise TypeError(f"Bounds of the window dimensions of updates must not exceed the "
                            f"bounds of the corresponding dimensions of operand. For dimension "
                            f"{u}, updates bound is {updates_shape[u]}, operand bound is {d}.")
    for k, (i, n) in enumerate(zip(update_batch_axes, indices_shape[:-1])):
        if updates_shape[i] != n:
            raise TypeError(f"Bounds of the scatter dimensions of updates must be the same as "
                            f"the bounds of the corresponding dimensions of scatter indices. "
                            f"For scatter dimension {i}, updates bound is {updates_shape[i]}, "
                            f"indices bound is {n}.")


# ------------------------------------------------------------- batching dims, rewritten

def batching_index_dims(dn):
    """(operand dims, indices dims) of the batching pairs of gather or scatter numbers."""
    return dn.operand_batching_dims, dn[4]


def without_batching(dn):
    """Dimension numbers without batching dimensions for indices that carry one more column
    per batching pair, after the user's columns: the iota along the indices' batching
    dimension, indexing the operand's batching dimension (collapsed or inserted)."""
    batching = dn.operand_batching_dims
    return type(dn)(dn[0], tuple(sorted(tuple(dn[1]) + tuple(batching))),
                    tuple(dn[2]) + tuple(batching))
