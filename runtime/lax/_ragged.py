"""Ragged matrix products: `lax.ragged_dot`, `lax.ragged_dot_general` and their
`RaggedDotDimensionNumbers`, with JAX's three modes, as compositions of `dot_general`.

`group_sizes[..., g]` cuts the lhs ragged dimension into consecutive groups (positions past the
last group belong to none and contribute zeros). The ragged operand is expanded to `[g, ...]`
with every group's positions kept in its own slice (a mask built from the groups' start and
end offsets, per prefix position when `group_sizes` has leading dimensions), then:
1. ragged non-contracting dim: the group axis is contracted with the rhs group dimension;
2. ragged contracting dim: lhs and rhs are both expanded and `g` becomes a leading batch
   dimension of the result;
3. ragged batch dim: the product is `dot_general`'s (the groups change nothing).
Derivatives, batching and every backend come from the operations used.
"""
import operator
from typing import NamedTuple

from ..array import to_array
from ._ops import (bitwise_and, broadcast, broadcast_in_dim, broadcasted_iota, cumsum,
                   dot_general, full_like, le, lt, select, sub, transpose)

__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]


class RaggedDotDimensionNumbers(NamedTuple):
    """The dot dimension numbers `((lhs_contracting, rhs_contracting), (lhs_batch,
    rhs_batch))`, the lhs ragged dimension (exactly one) and the rhs group dimensions (one in
    mode 1, none otherwise)."""
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple


_NONCONTRACTING, _CONTRACTING, _BATCH = "noncontracting", "contracting", "batch"


def _dims(dn):
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    return [list(map(operator.index, d)) for d in (lc, rc, lb, rb)]


def _mode(ragged, contract, batch):
    if ragged in contract:
        return _CONTRACTING
    if ragged in batch:
        return _BATCH
    return _NONCONTRACTING


def _prefix(mode, rank, ragged, batch, contract):
    """The dimensions of an operand that `group_sizes`' leading dimensions stand for."""
    if mode == _BATCH:
        return batch[:batch.index(ragged)]
    if mode == _CONTRACTING:
        return batch + contract[:contract.index(ragged)]
    free = [d for d in range(rank) if d not in contract and d not in batch]
    return batch + free[:free.index(ragged)]


def _expand(x, dim, group_sizes, prefix):
    """[g] + x.shape: slice k keeps the positions of group k along `dim`, zeros elsewhere."""
    g = group_sizes.shape[-1]
    shape = (g,) + x.shape
    ends = cumsum(group_sizes, axis=group_sizes.ndim - 1)
    starts = sub(ends, group_sizes)
    order = sorted(range(len(prefix)), key=lambda i: prefix[i])
    perm = [len(prefix)] + order
    dims = [0] + [1 + prefix[i] for i in order]
    starts = broadcast_in_dim(transpose(starts, perm), shape, dims)
    ends = broadcast_in_dim(transpose(ends, perm), shape, dims)
    pos = broadcasted_iota(group_sizes.dtype, shape, dim + 1)
    keep = bitwise_and(le(starts, pos), lt(pos, ends))
    wide = broadcast_in_dim(x, shape, tuple(range(1, len(shape))))
    return select(keep, wide, full_like(wide, 0))


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """Ragged matrix multiplication in JAX's three modes (see the module docstring)."""
    lhs, rhs = to_array(lhs, "lax.ragged_dot_general"), to_array(rhs, "lax.ragged_dot_general")
    gs = to_array(group_sizes, "lax.ragged_dot_general")
    if group_offset is not None:
        raise NotImplementedError("Unimplemented group_offset support.")
    dn = ragged_dot_dimension_numbers
    lc, rc, lb, rb = _dims(dn)
    if len(dn.lhs_ragged_dimensions) != 1:
        raise TypeError("ragged_dot_general expects exactly one lhs ragged dimension.")
    ragged = operator.index(dn.lhs_ragged_dimensions[0])
    _in_range(ragged, lhs.ndim, "lhs ragged dimension", "lhs")
    if gs.dtype.kind not in "iu":
        raise TypeError("ragged_dot_general requires that group_sizes.dtype is subtype of "
                        "np.integer.")
    if gs.ndim == 0:
        raise TypeError("expected rank of group_sizes to be >=1.")
    mode = _mode(ragged, lc, lb)
    l_prefix = _prefix(mode, lhs.ndim, ragged, lb, lc)
    prefix_shape = tuple(lhs.shape[i] for i in l_prefix)
    if gs.ndim != 1 and gs.shape != prefix_shape + gs.shape[-1:]:
        raise TypeError(f"expected group_sizes to have shape {prefix_shape + gs.shape[-1:]}, "
                        f"got {gs.shape}.")
    groups = list(map(operator.index, dn.rhs_group_dimensions))
    _check_groups(mode, groups, rhs, rc, rb, gs.shape[-1])
    if gs.ndim == 1:
        gs = broadcast(gs, prefix_shape)
    dot = dict(precision=precision, preferred_element_type=preferred_element_type)

    def up(ds):
        return [d + 1 for d in ds]
    if mode == _NONCONTRACTING:
        return dot_general(_expand(lhs, ragged, gs, l_prefix), rhs,
                           ((up(lc) + [0], rc + groups), (up(lb), rb)), **dot)
    if mode == _CONTRACTING:
        r_ragged = rc[lc.index(ragged)]
        r_prefix = _prefix(mode, rhs.ndim, r_ragged, rb, rc)
        return dot_general(_expand(lhs, ragged, gs, l_prefix),
                           _expand(rhs, r_ragged, gs, r_prefix),
                           ((up(lc), up(rc)), ([0] + up(lb), [0] + up(rb))), **dot)
    return dot_general(lhs, rhs, ((lc, rc), (lb, rb)), **dot)


def _in_range(dim, rank, what, arg):
    if not 0 <= dim < rank:
        raise TypeError(f"ragged_dot_general requires {what} numbers to be nonnegative and less "
                        f"than the number of axes of the {arg} value, got {dim} for {arg} of "
                        f"rank {rank}.")


def _check_groups(mode, groups, rhs, rc, rb, num_groups):
    if mode != _NONCONTRACTING:
        if groups:
            raise TypeError("ragged_dot_general requires zero group dimensions in the rhs when "
                            "lhs ragged dimension is contracting or batch.")
        return
    if len(groups) != 1:
        raise TypeError("ragged_dot_general requires exactly one rhs group dimension when lhs "
                        "ragged dimension is noncontracting.")
    _in_range(groups[0], rhs.ndim, "rhs group dimension", "rhs")
    if groups[0] in rb or groups[0] in rc:
        raise TypeError("ragged_dot_general requires rhs group dimension numbers to be "
                        "distinct from contracting and batch dimensions.")
    if rhs.shape[groups[0]] != num_groups:
        raise TypeError(f"expected rhs group dimension size to be {num_groups}, got "
                        f"{rhs.shape[groups[0]]}.")


_RAGGED_DOT = RaggedDotDimensionNumbers(dot_dimension_numbers=(((1,), (1,)), ((), ())),
                                        lhs_ragged_dimensions=(0,), rhs_group_dimensions=(0,))


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """`[m, k] x [g, k, n] -> [m, n]`: rows of group i of lhs times rhs[i]."""
    return ragged_dot_general(lhs, rhs, group_sizes, _RAGGED_DOT, precision,
                              preferred_element_type, group_offset)
