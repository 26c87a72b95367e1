"""Indexing primitives: dynamic_slice, dynamic_update_slice, gather and the scatter family.

Semantics are XLA's, which are JAX's: start indices of dynamic slices are clamped so the
window fits; `gather` in mode "clip" clamps each window start, in mode "fill" returns
`fill_value` for windows that do not fit; scatters in mode "drop" skip updates whose window does
not fit, in mode "clip" clamp them. `kiln.numpy` indexing reads clamp and `.at[]` updates drop,
as in JAX. Dimension numbers use XLA's vocabulary (the index vector is the last axis of
`indices`); operand batching dimensions are not supported.
"""
from typing import NamedTuple

import numpy as np

from ..ir.abstract import ShapedArray, shape_str
from ..ir import dtypes
from .core import register, type_error, check_shape


class GatherDimensionNumbers(NamedTuple):
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


GATHER_MODES = ("clip", "fill", "promise_in_bounds")
SCATTER_MODES = ("clip", "drop", "promise_in_bounds")


def _check_indices(op, idx):
    if idx.dtype.kind not in "iu":
        raise type_error(op, f"indices must be integers, got {idx.dtype}")


# ----------------------------------------------------------------------- dynamic slices

def _dynamic_slice_eval(x, *starts, slice_sizes):
    if len(starts) != x.ndim or len(slice_sizes) != x.ndim:
        raise type_error("dynamic_slice", f"needs one start index and one slice size per "
                         f"dimension of the operand of shape {shape_str(x.shape)}, got "
                         f"{len(starts)} start indices and slice_sizes {slice_sizes}")
    for s in starts:
        if s.shape != () or s.dtype.kind not in "iu":
            raise type_error("dynamic_slice", f"start indices must be integer scalars, got "
                             f"{s.dtype}{list(s.shape)}")
    slice_sizes = check_shape("dynamic_slice", slice_sizes)
    for size, d in zip(slice_sizes, x.shape):
        if size > d:
            raise type_error("dynamic_slice", f"slice_sizes {slice_sizes} must be no larger "
                             f"than the operand shape {shape_str(x.shape)}")
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


def _clamped_starts(starts, sizes, shape):
    return [int(min(max(int(s), 0), d - z)) for s, z, d in zip(starts, sizes, shape)]


def _dynamic_slice(x, *starts, slice_sizes):
    st = _clamped_starts(starts, slice_sizes, x.shape)
    return x[tuple(slice(s, s + z) for s, z in zip(st, slice_sizes))]


dynamic_slice = register("dynamic_slice", _dynamic_slice_eval, _dynamic_slice)


def _dynamic_update_slice_eval(x, update, *starts):
    if update.dtype != x.dtype:
        raise type_error("dynamic_update_slice", f"update dtype {update.dtype} must match the "
                         f"operand dtype {x.dtype}")
    if update.ndim != x.ndim or len(starts) != x.ndim:
        raise type_error("dynamic_update_slice", f"update of shape {shape_str(update.shape)} "
                         f"and {len(starts)} start indices must match the rank of the operand "
                         f"of shape {shape_str(x.shape)}")
    if any(u > d for u, d in zip(update.shape, x.shape)):
        raise type_error("dynamic_update_slice", f"update shape {shape_str(update.shape)} must "
                         f"be no larger than the operand shape {shape_str(x.shape)}")
    for s in starts:
        if s.shape != () or s.dtype.kind not in "iu":
            raise type_error("dynamic_update_slice", "start indices must be integer scalars")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _dynamic_update_slice(x, update, *starts):
    st = _clamped_starts(starts, update.shape, x.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(s, s + z) for s, z in zip(st, update.shape))] = update
    return out


dynamic_update_slice = register("dynamic_update_slice", _dynamic_update_slice_eval,
                                _dynamic_update_slice)


# --------------------------------------------------------------------------------- gather

def _gather_eval(x, indices, *, dimension_numbers, slice_sizes, mode="clip", fill_value=None):
    dn = dimension_numbers
    _check_indices("gather", indices)
    if dn.operand_batching_dims:
        raise type_error("gather", "with operand_batching_dims is not supported by kiln")
    if mode not in GATHER_MODES:
        raise ValueError(f"gather: unknown mode {mode!r}; expected one of {GATHER_MODES}")
    if not indices.shape:
        raise type_error("gather", "indices must have at least one dimension (the index vector)")
    if indices.shape[-1] != len(dn.start_index_map):
        raise type_error("gather", f"the last dimension of indices ({indices.shape[-1]}) must "
                         f"equal the length of start_index_map {dn.start_index_map}")
    if len(slice_sizes) != x.ndim:
        raise type_error("gather", f"slice_sizes {slice_sizes} must have one entry per operand "
                         f"dimension (shape {shape_str(x.shape)})")
    for d in dn.collapsed_slice_dims:
        if slice_sizes[d] > 1:
            raise type_error("gather", f"collapsed dimension {d} must have slice size <= 1, "
                             f"got slice_sizes {slice_sizes}")
    for z, d in zip(slice_sizes, x.shape):
        if z > d:
            raise type_error("gather", f"slice_sizes {slice_sizes} exceed operand shape "
                             f"{shape_str(x.shape)}")
    batch_shape = indices.shape[:-1]
    offset_sizes = [z for i, z in enumerate(slice_sizes) if i not in dn.collapsed_slice_dims]
    rank = len(batch_shape) + len(offset_sizes)
    if len(dn.offset_dims) != len(offset_sizes):
        raise type_error("gather", f"offset_dims {dn.offset_dims} must have one entry per "
                         f"non-collapsed slice dimension ({len(offset_sizes)})")
    out, b, o = [], iter(batch_shape), iter(offset_sizes)
    for i in range(rank):
        out.append(next(o) if i in dn.offset_dims else next(b))
    return ShapedArray(out, x.dtype, x.weak_type)


def _window_starts(x_shape, indices, index_map, window):
    """(B, rank) window starts and a (B,) mask of windows that fit without clamping."""
    flat = indices.reshape(-1, indices.shape[-1]).astype(np.int64)
    starts = np.zeros((flat.shape[0], len(x_shape)), np.int64)
    for k, d in enumerate(index_map):
        starts[:, d] = flat[:, k]
    limit = np.asarray(x_shape, np.int64) - np.asarray(window, np.int64)
    fits = np.all((starts >= 0) & (starts <= limit), axis=1)
    return np.clip(starts, 0, np.maximum(limit, 0)), fits


def _window_index(starts, window):
    """Index arrays of shape (B, *window) addressing each window."""
    idx = []
    nd = len(window)
    for d, z in enumerate(window):
        shape = [1] * (nd + 1)
        shape[d + 1] = z
        idx.append(starts[:, d].reshape((-1,) + (1,) * nd) + np.arange(z).reshape(shape))
    return tuple(idx)


def _gather(x, indices, *, dimension_numbers, slice_sizes, mode="clip", fill_value=None):
    dn = dimension_numbers
    batch_shape = indices.shape[:-1]
    starts, fits = _window_starts(x.shape, indices, dn.start_index_map, slice_sizes)
    if x.size == 0 or starts.shape[0] == 0:
        windows = np.zeros((starts.shape[0],) + tuple(slice_sizes), x.dtype)
    else:
        windows = x[_window_index(starts, slice_sizes)]
    if mode == "fill":
        fill = _default_fill(x.dtype) if fill_value is None else fill_value
        windows = np.where(fits.reshape((-1,) + (1,) * x.ndim), windows,
                           np.asarray(fill, x.dtype))
    offset = [z for i, z in enumerate(slice_sizes) if i not in dn.collapsed_slice_dims]
    windows = windows.reshape(tuple(batch_shape) + tuple(offset))
    rank = len(batch_shape) + len(offset)
    batch_pos = [i for i in range(rank) if i not in dn.offset_dims]
    # windows axes are (batch..., offset...); place them at batch_pos and offset_dims.
    perm = [0] * rank
    for src, dst in enumerate(list(batch_pos) + list(dn.offset_dims)):
        perm[dst] = src
    return np.transpose(windows, perm)


def _default_fill(dtype):
    if dtype.kind in "fc":
        return np.nan
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max


gather = register("gather", _gather_eval, _gather)


# -------------------------------------------------------------------------------- scatter

def _scatter_eval_for(name):
    def abstract_eval(x, indices, updates, *, dimension_numbers, mode="drop"):
        dn = dimension_numbers
        _check_indices(name, indices)
        if dn.operand_batching_dims:
            raise type_error(name, "with operand_batching_dims is not supported by kiln")
        if mode not in SCATTER_MODES:
            raise ValueError(f"{name}: unknown mode {mode!r}; expected one of {SCATTER_MODES}")
        if updates.dtype != x.dtype:
            raise type_error(name, f"updates dtype {updates.dtype} must match operand dtype "
                             f"{x.dtype}")
        if not indices.shape or indices.shape[-1] != len(dn.scatter_dims_to_operand_dims):
            raise type_error(name, f"the last dimension of indices {shape_str(indices.shape)} "
                             f"must equal len(scatter_dims_to_operand_dims) = "
                             f"{len(dn.scatter_dims_to_operand_dims)}")
        batch = [s for i, s in enumerate(updates.shape) if i not in dn.update_window_dims]
        if tuple(batch) != tuple(indices.shape[:-1]):
            raise type_error(name, f"updates of shape {shape_str(updates.shape)} do not match "
                             f"the scatter indices of shape {shape_str(indices.shape)}")
        if len(dn.update_window_dims) + len(dn.inserted_window_dims) != x.ndim:
            raise type_error(name, f"update_window_dims {dn.update_window_dims} and "
                             f"inserted_window_dims {dn.inserted_window_dims} must cover the "
                             f"operand's {x.ndim} dimensions")
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    return abstract_eval


def _scatter_impl_for(combine):
    def impl(x, indices, updates, *, dimension_numbers, mode="drop"):
        dn = dimension_numbers
        upd_window = [updates.shape[d] for d in dn.update_window_dims]
        it = iter(upd_window)
        window = [1 if d in dn.inserted_window_dims else next(it) for d in range(x.ndim)]
        starts, fits = _window_starts(x.shape, indices, dn.scatter_dims_to_operand_dims, window)
        batch_axes = [i for i in range(updates.ndim) if i not in dn.update_window_dims]
        upd = np.transpose(updates, batch_axes + list(dn.update_window_dims))
        upd = upd.reshape((starts.shape[0],) + tuple(window))
        out = np.array(x, copy=True)
        if mode != "clip":
            starts, upd = starts[fits], upd[fits]
        if starts.shape[0] and all(window):
            combine(out, _window_index(starts, window), upd)
        return out
    return impl


def _set(out, idx, upd):
    out[idx] = upd


def _ufunc_at(ufunc):
    def combine(out, idx, upd):
        if out.dtype == np.bool_ and ufunc is np.add:
            np.logical_or.at(out, idx, upd)
        elif out.dtype == np.bool_ and ufunc is np.multiply:
            np.logical_and.at(out, idx, upd)
        else:
            ufunc.at(out, idx, upd)
    return combine


scatter = register("scatter", _scatter_eval_for("scatter"), _scatter_impl_for(_set))
scatter_add = register("scatter_add", _scatter_eval_for("scatter_add"),
                       _scatter_impl_for(_ufunc_at(np.add)))
scatter_mul = register("scatter_mul", _scatter_eval_for("scatter_mul"),
                       _scatter_impl_for(_ufunc_at(np.multiply)))
scatter_min = register("scatter_min", _scatter_eval_for("scatter_min"),
                       _scatter_impl_for(_ufunc_at(np.minimum)))
scatter_max = register("scatter_max", _scatter_eval_for("scatter_max"),
                       _scatter_impl_for(_ufunc_at(np.maximum)))
