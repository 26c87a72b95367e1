"""Indexing primitives: dynamic_slice, dynamic_update_slice, gather and the scatter family.

Semantics are XLA's, which are JAX's: start indices of dynamic slices are clamped so the
window fits; `gather` in mode "clip" clamps each window start, in mode "fill" returns
`fill_value` for windows that do not fit; scatters in mode "drop" skip updates whose window does
not fit, in mode "clip" clamp them. `kiln.numpy` indexing reads clamp and `.at[]` updates drop,
as in JAX. Dimension numbers use XLA's vocabulary (the index vector is the last axis of
`indices`), checked as JAX checks them (gather_dims); the primitives take no operand batching
dimensions: `kiln.lax` rewrites them as iota index columns (gather_dims.without_batching).

Batching (no loop over examples): a batched operand alone gets its batch axis as one more
window (offset) dimension of full size; batched indices alone carry it as one more batch
dimension of the indices; both batched, the indices get an iota component for the batch axis,
which the operand then collapses (gather) or inserts (scatter). Dynamic slices with batched
start indices become that gather or scatter, in the clamping mode ("clip").

Derivatives: a gather's adjoint is a scatter_add with the matching dimension numbers and the
scatter's adjoint (for its updates) is the matching gather (`_inverse_gather`), with modes
paired so that each is the exact transpose of the other, out-of-bounds windows included.
`scatter` with repeated indices follows JAX: a scatter of update ids finds which update element
each output element came from, and only that one gets the derivative. `scatter_min`/`max`
share the derivative between tied candidates (JAX's convention), and `scatter_mul` gives every
update the product of the others, whether or not indices repeat (JAX requires unique indices),
exactly where updates are 0 too (to second order; third derivatives at three or more zero
updates combined into one element are not).
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from . import batching as B
from .core import register, type_error, check_shape, check_same_dtypes, JVP, VJP, BATCH
from .rule_forms import tangent_rule, cotangent_rule
from .structural import around, insert, batch_at
from .reductions import order_zeros, winning_zeros
from .gather_dims import (GatherDimensionNumbers, ScatterDimensionNumbers, gather_shape,
                          check_scatter)


GATHER_MODES = ("clip", "fill", "promise_in_bounds")
SCATTER_MODES = ("clip", "drop", "promise_in_bounds")


def check_indices(op, idx):
    if idx.dtype.kind not in "iu":
        raise ValueError("indices must have an integer type")


# ----------------------------------------------------------------------- dynamic slices

def _check_start_indices(op, starts):
    if any(s.ndim for s in starts):
        raise TypeError(f"start_indices arguments to {op} must be scalars, got indices "
                        + ", ".join(f"{s.dtype}{list(s.shape)}" for s in starts))
    if any(s.dtype != starts[0].dtype or s.dtype.kind not in "iu" for s in starts):
        raise TypeError(f"index arguments to {op} must be integers of the same type, got: "
                        + ", ".join(s.dtype.name for s in starts))


def _dynamic_slice_eval(x, *starts, slice_sizes):
    if len(starts) != x.ndim or len(slice_sizes) != x.ndim:
        raise ValueError(f"Length of slice indices must match number of operand dimensions "
                         f"({len(starts)} vs {x.shape})")
    slice_sizes = tuple(slice_sizes)
    if any(z > d for z, d in zip(slice_sizes, x.shape)):
        raise TypeError(f"slice slice_sizes must be less than or equal to operand shape, got "
                        f"slice_sizes {slice_sizes} for operand shape {x.shape}.")
    if any(z < 0 for z in slice_sizes):
        raise TypeError(f"slice slice_sizes must be greater than or equal to zero, got "
                        f"slice_sizes of {slice_sizes}.")
    _check_start_indices("dynamic_slice", starts)
    return ShapedArray(check_shape("dynamic_slice", slice_sizes, "slice_sizes"), x.dtype,
                       x.weak_type)


def _clamped_starts(starts, sizes, shape):
    return [int(min(max(int(s), 0), d - z)) for s, z, d in zip(starts, sizes, shape)]


def _dynamic_slice(x, *starts, slice_sizes):
    st = _clamped_starts(starts, slice_sizes, x.shape)
    return x[tuple(slice(s, s + z) for s, z in zip(st, slice_sizes))]


dynamic_slice = register("dynamic_slice", _dynamic_slice_eval, _dynamic_slice)
JVP[dynamic_slice] = tangent_rule(lambda primals, tangents, outs, *, slice_sizes: E.dynamic_slice(
    tangents[0], *primals[1:], slice_sizes=slice_sizes))


def _dynamic_slice_vjp(ct, primals, outs, *, slice_sizes):
    x, *starts = primals
    if tuple(slice_sizes) != E.aval(x).shape:  # else the whole operand
        ct = E.dynamic_update_slice(E.zeros_like(x), ct, *starts)
    return [ct] + [None] * len(starts)


VJP[dynamic_slice] = cotangent_rule(_dynamic_slice_vjp)


def _dynamic_update_slice_eval(x, update, *starts):
    if update.ndim != x.ndim:
        raise TypeError(f"dynamic_update_slice update must have the same rank as operand, got "
                        f"update shape {update.shape} for operand shape {x.shape}.")
    if len(starts) != x.ndim:
        raise TypeError(f"dynamic_update_slice start_indices must have length equal to the rank "
                        f"of operand, got {len(starts)} indices for operand shape {x.shape}.")
    if any(u > d for u, d in zip(update.shape, x.shape)):
        raise TypeError(f"dynamic_update_slice update shape must be smaller than operand shape, "
                        f"got update shape {update.shape} for operand shape {x.shape}.")
    check_same_dtypes("dynamic_update_slice", (x, update))
    _check_start_indices("dynamic_update_slice", starts)
    return ShapedArray(x.shape, x.dtype, x.weak_type and update.weak_type)


def _dynamic_update_slice(x, update, *starts):
    st = _clamped_starts(starts, update.shape, x.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(s, s + z) for s, z in zip(st, update.shape))] = update
    return out


def _dynamic_update_slice_jvp(primals, tangents, outs):
    x, update, *starts = primals
    tx = E.zeros_like(x) if tangents[0] is None else tangents[0]
    tu = E.zeros_like(update) if tangents[1] is None else tangents[1]
    return E.dynamic_update_slice(tx, tu, *starts)


def _dynamic_update_slice_vjp(ct, primals, outs):
    x, update, *starts = primals
    shape = E.aval(update).shape
    return ([E.dynamic_update_slice(ct, E.zeros(E.aval(ct).update(shape=shape)), *starts),
             E.dynamic_slice(ct, *starts, slice_sizes=shape)] + [None] * len(starts))


dynamic_update_slice = register("dynamic_update_slice", _dynamic_update_slice_eval,
                                _dynamic_update_slice)
JVP[dynamic_update_slice] = tangent_rule(_dynamic_update_slice_jvp)
VJP[dynamic_update_slice] = cotangent_rule(_dynamic_update_slice_vjp)


# --------------------------------------------------------------------------------- gather

def _gather_eval(x, indices, *, dimension_numbers, slice_sizes, mode="clip", fill_value=None):
    dn = dimension_numbers
    check_indices("gather", indices)
    if mode not in GATHER_MODES:
        raise ValueError(f"gather: unknown mode {mode!r}; expected one of {GATHER_MODES}")
    shape = gather_shape(x.shape, indices.shape, dn, tuple(slice_sizes))
    _refuse_batching("gather", dn)
    return ShapedArray(shape, x.dtype, x.weak_type)


def _refuse_batching(name, dn):
    if dn.operand_batching_dims:
        raise type_error(name, "primitive takes no operand batching dimensions: kiln.lax's "
                         f"{name} rewrites them as index columns (gather_dims.without_batching)")


def _window_starts(x_shape, indices, index_map, window):
    """(B, rank) window starts and a (B,) mask of windows that fit without clamping."""
    # (an index vector of length 0 still has one window per batch element)
    flat = indices.reshape(int(np.prod(indices.shape[:-1])), indices.shape[-1]).astype(np.int64)
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


def _taken_windows(x, indices, index_map, window):
    """(windows, fits) as `_window_starts` and `_window_index` give them, for a gather whose
    windows are whole slices of `x` at one index along one axis (`take` along an axis: one
    `np.take` instead of an index array per axis); None for any other gather."""
    if len(index_map) != 1 or indices.shape[-1] != 1 or x.size == 0:
        return None
    axis = index_map[0]
    if window[axis] != 1 or any(w != n for d, (w, n) in enumerate(zip(window, x.shape))
                                if d != axis):
        return None
    flat = indices.reshape(-1).astype(np.int64)
    if flat.size == 0:
        return None
    last = x.shape[axis] - 1
    fits = (flat >= 0) & (flat <= last)
    taken = np.take(x, np.minimum(np.maximum(flat, 0), last), axis=axis)
    if axis:
        taken = np.moveaxis(taken, axis, 0)
    return taken.reshape((flat.size,) + tuple(window)), fits


def _gather(x, indices, *, dimension_numbers, slice_sizes, mode="clip", fill_value=None):
    dn = dimension_numbers
    batch_shape = indices.shape[:-1]
    taken = _taken_windows(x, indices, dn.start_index_map, slice_sizes)
    if taken is not None:
        windows, fits = taken
    else:
        starts, fits = _window_starts(x.shape, indices, dn.start_index_map, slice_sizes)
        if x.size == 0 or starts.shape[0] == 0:
            windows = np.zeros((starts.shape[0],) + tuple(slice_sizes), x.dtype)
        else:
            windows = x[_window_index(starts, slice_sizes)]
    if mode == "fill":
        fill = default_fill(x.dtype) if fill_value is None else fill_value
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


def default_fill(dtype):
    if dtype.kind in "fc":
        return np.nan
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max


gather = register("gather", _gather_eval, _gather)

# The scatter mode whose scatter_add is the exact transpose of a gather in each mode: kiln's
# gather clamps in "promise_in_bounds" as in "clip" (JAX pairs it with a promise_in_bounds
# scatter, which drops what the gather clamped).
_GATHER_ADJOINT_MODE = {"clip": "clip", "promise_in_bounds": "clip", "fill": "drop"}


def _gather_jvp(primals, tangents, outs, *, dimension_numbers, slice_sizes, mode="clip",
                fill_value=None):
    return E.gather(tangents[0], primals[1], dimension_numbers=dimension_numbers,
                    slice_sizes=slice_sizes, mode=mode,
                    fill_value=0 if mode == "fill" else fill_value)


def _gather_vjp(ct, primals, outs, *, dimension_numbers, slice_sizes, mode="clip",
                fill_value=None):
    x, indices = primals
    dn = dimension_numbers
    sdn = ScatterDimensionNumbers(dn.offset_dims, dn.collapsed_slice_dims, dn.start_index_map)
    return [E.scatter_add(E.zeros_like(x), indices, ct, dimension_numbers=sdn,
                          mode=_GATHER_ADJOINT_MODE[mode]), None]


JVP[gather] = tangent_rule(_gather_jvp)
VJP[gather] = cotangent_rule(_gather_vjp)


# -------------------------------------------------------------------------------- scatter

def _scatter_eval_for(name):
    def abstract_eval(x, indices, updates, *, dimension_numbers, mode="drop"):
        dn = dimension_numbers
        check_indices(name, indices)
        if mode not in SCATTER_MODES:
            raise ValueError(f"{name}: unknown mode {mode!r}; expected one of {SCATTER_MODES}")
        check_same_dtypes("scatter", (x, updates))
        check_scatter(x.shape, indices.shape, updates.shape, dn)
        _refuse_batching(name, dn)
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
        if starts.shape[0] and all(window) and out.size:  # (clip: windows of 1 in a 0)
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


def _extreme_at(ufunc, negative):
    """max/min scatters with XLA's zeros for floats (-0.0 below 0.0; see
    reductions.order_zeros); other kinds as NumPy combines them (complex numbers in its
    lexicographic order, an operand with a NaN part winning, as kiln's complex max/min)."""
    combine = _ufunc_at(ufunc)

    def at(out, idx, upd):
        if out.dtype.kind != "f":
            combine(out, idx, upd)
            return
        won = winning_zeros(out, negative)
        np.logical_or.at(won, idx, winning_zeros(upd, negative))
        combine(out, idx, upd)
        out[...] = order_zeros(out, won, negative)
    return at


scatter = register("scatter", _scatter_eval_for("scatter"), _scatter_impl_for(_set))
scatter_add = register("scatter_add", _scatter_eval_for("scatter_add"),
                       _scatter_impl_for(_ufunc_at(np.add)))
scatter_mul = register("scatter_mul", _scatter_eval_for("scatter_mul"),
                       _scatter_impl_for(_ufunc_at(np.multiply)))
scatter_min = register("scatter_min", _scatter_eval_for("scatter_min"),
                       _scatter_impl_for(_extreme_at(np.minimum, True)))
scatter_max = register("scatter_max", _scatter_eval_for("scatter_max"),
                       _scatter_impl_for(_extreme_at(np.maximum, False)))


# ----------------------------------------------------------------- scatter derivatives

def _inverse_gather(values, indices, updates, dimension_numbers, mode):
    """The gather reading, for every update element, the element of `values` (shaped like the
    operand) that the scatter combines it with: the scatter_add's transpose. Windows a
    dropping scatter skips read 0."""
    dn = dimension_numbers
    window = iter(E.aval(updates).shape[d] for d in dn.update_window_dims)
    sizes = tuple(1 if d in dn.inserted_window_dims else next(window)
                  for d in range(E.aval(values).ndim))
    gdn = GatherDimensionNumbers(dn.update_window_dims, dn.inserted_window_dims,
                                 dn.scatter_dims_to_operand_dims)
    if mode == "clip":
        return E.gather(values, indices, dimension_numbers=gdn, slice_sizes=sizes, mode="clip")
    return E.gather(values, indices, dimension_numbers=gdn, slice_sizes=sizes, mode="fill",
                    fill_value=0)


def _scatter_add_jvp(primals, tangents, outs, *, dimension_numbers, mode="drop"):
    x, indices, _ = primals
    tx, _, tu = tangents
    if tu is None:
        return tx
    tx = E.zeros_like(x) if tx is None else tx
    return E.scatter_add(tx, indices, tu, dimension_numbers=dimension_numbers, mode=mode)


def _scatter_add_vjp(ct, primals, outs, *, dimension_numbers, mode="drop"):
    _, indices, updates = primals
    return [ct, None, _inverse_gather(ct, indices, updates, dimension_numbers, mode)]


JVP[scatter_add] = tangent_rule(_scatter_add_jvp)
VJP[scatter_add] = cotangent_rule(_scatter_add_vjp)


def _scatter_winners(x, indices, updates, dimension_numbers, mode):
    """(won, kept): for each update element, whether it is the one `scatter` leaves in the
    output (with repeated indices, exactly one of the contenders is); for each operand
    element, whether no update overwrote it. Computed, as in JAX, by scattering ids."""
    shape = E.aval(updates).shape
    ids = E.add(E.reshape(E.iota(dtype=np.dtype(np.int32), shape=(int(np.prod(shape)),),
                                 dimension=0), new_sizes=shape), 1)
    scattered = E.scatter(E.zeros(ShapedArray(E.aval(x).shape, np.dtype(np.int32))), indices,
                          ids, dimension_numbers=dimension_numbers, mode=mode)
    landed = _inverse_gather(scattered, indices, updates, dimension_numbers, mode)
    return E.eq(ids, landed), E.eq(scattered, 0)


def _scatter_jvp(primals, tangents, outs, *, dimension_numbers, mode="drop"):
    x, indices, updates = primals
    tx, _, tu = tangents
    if tu is None:  # the operand's tangent where nothing overwrote it
        return E.scatter(tx, indices, E.zeros_like(updates),
                         dimension_numbers=dimension_numbers, mode=mode)
    won, kept = _scatter_winners(x, indices, updates, dimension_numbers, mode)
    base = E.zeros_like(x) if tx is None else E.select(kept, tx, 0)
    return E.scatter_add(base, indices, E.select(won, tu, 0),
                         dimension_numbers=dimension_numbers, mode=mode)


def _scatter_vjp(ct, primals, outs, *, dimension_numbers, mode="drop"):
    x, indices, updates = primals
    won, kept = _scatter_winners(x, indices, updates, dimension_numbers, mode)
    return [E.select(kept, ct, 0), None,
            E.select(won, _inverse_gather(ct, indices, updates, dimension_numbers, mode), 0)]


JVP[scatter] = tangent_rule(_scatter_jvp)
VJP[scatter] = cotangent_rule(_scatter_vjp)


def _scatter_mul_others(x, indices, updates, out, dimension_numbers, mode):
    """For each update element: the operand element times the product of the other updates
    combined with it (the derivative of the output by that update). Where the update is not 0,
    the output divided by it; where it is 0, the operand times the non-zero contenders, times
    1 if it is the only zero among them, times the other zero if there are two (0, but with
    the right derivative: second derivatives are exact everywhere), else 0."""
    params = dict(dimension_numbers=dimension_numbers, mode=mode)

    def back(values):
        return _inverse_gather(values, indices, updates, dimension_numbers, mode)

    nonzero = E.ne(updates, 0)
    safe = E.select(nonzero, updates, 1)
    n_zeros = back(E.scatter_add(E.zeros(ShapedArray(E.aval(x).shape, np.dtype(np.int32))),
                                 indices, E.convert(E.not_(nonzero), np.int32), **params))
    zero_sum = back(E.scatter_add(E.zeros_like(x), indices, E.select(nonzero, 0, updates),
                                  **params))
    other_zeros = E.select(E.eq(n_zeros, 1), 1, E.select(E.eq(n_zeros, 2),
                                                         E.sub(zero_sum, updates), 0))
    at_zero = E.mul(back(E.scatter_mul(x, indices, safe, **params)), other_zeros)
    return E.select(nonzero, E.div(back(out), safe), at_zero)


def _scatter_mul_jvp(primals, tangents, outs, *, dimension_numbers, mode="drop"):
    x, indices, updates = primals
    tx, _, tu = tangents
    params = dict(dimension_numbers=dimension_numbers, mode=mode)
    t = None if tx is None else E.scatter_mul(tx, indices, updates, **params)
    if tu is None:
        return t
    others = _scatter_mul_others(x, indices, updates, outs, dimension_numbers, mode)
    return E.scatter_add(E.zeros_like(x) if t is None else t, indices, E.mul(tu, others),
                         **params)


def _scatter_mul_vjp(ct, primals, outs, *, dimension_numbers, mode="drop"):
    x, indices, updates = primals
    others = _scatter_mul_others(x, indices, updates, outs, dimension_numbers, mode)
    return [E.scatter_mul(ct, indices, updates, dimension_numbers=dimension_numbers, mode=mode),
            None, E.mul(_inverse_gather(ct, indices, updates, dimension_numbers, mode), others)]


JVP[scatter_mul] = tangent_rule(_scatter_mul_jvp)
VJP[scatter_mul] = cotangent_rule(_scatter_mul_vjp)


def _scatter_extremum_shares(x, indices, updates, out, dimension_numbers, mode):
    """JAX's tie convention for scatter_min/max: the derivative of an output element is the
    mean of those of its candidates (the operand element and the updates combined with it)
    equal to the result. Returns the operand's share (shaped like it; 1 where no update
    landed) and each update element's share: out_dot = scatter_add(x_dot * operand_share,
    indices, u_dot * update_share)."""
    params = dict(dimension_numbers=dimension_numbers, mode=mode)
    dtype, count = E.aval(x).dtype, np.dtype(np.int32)   # (complex counts would not compare)
    won = E.eq(updates, _inverse_gather(out, indices, updates, dimension_numbers, mode))
    kept = E.eq(x, out)
    no_counts = E.zeros(ShapedArray(E.aval(x).shape, count))
    n_won = E.scatter_add(no_counts, indices, E.convert(won, count), **params)
    hit = E.gt(E.scatter_add(no_counts, indices, E.full(E.aval(updates).shape, 1, count),
                             **params), 0)
    ties = E.convert(E.max_(E.add(n_won, E.convert(kept, count)), 1), dtype)
    operand_share = E.select(hit, E.select(kept, E.div(1, ties), 0), 1)
    update_share = E.select(won, E.div(1, _inverse_gather(ties, indices, updates,
                                                           dimension_numbers, mode)), 0)
    return operand_share, update_share


def _scatter_extremum_jvp(primals, tangents, outs, *, dimension_numbers, mode="drop"):
    x, indices, updates = primals
    tx, _, tu = tangents
    operand_share, update_share = _scatter_extremum_shares(x, indices, updates, outs,
                                                           dimension_numbers, mode)
    tx = E.zeros_like(x) if tx is None else E.mul(tx, operand_share)
    tu = E.zeros_like(updates) if tu is None else E.mul(tu, update_share)
    return E.scatter_add(tx, indices, tu, dimension_numbers=dimension_numbers, mode=mode)


def _scatter_extremum_vjp(ct, primals, outs, *, dimension_numbers, mode="drop"):
    x, indices, updates = primals
    operand_share, update_share = _scatter_extremum_shares(x, indices, updates, outs,
                                                           dimension_numbers, mode)
    back = _inverse_gather(ct, indices, updates, dimension_numbers, mode)
    return [E.mul(ct, operand_share), None, E.mul(back, update_share)]


for _prim in (scatter_min, scatter_max):
    JVP[_prim] = tangent_rule(_scatter_extremum_jvp)
    VJP[_prim] = cotangent_rule(_scatter_extremum_vjp)


# ------------------------------------------------------------------------------ batching

def _new_axis(window_dims, rank, window, k):
    """(position, window dims) for an array of `rank` axes (a gather's output or a scatter's
    updates) of which `window_dims` are window axes and the others batch axes, given one more
    axis that is its `k`-th window axis (`window`) or `k`-th batch axis: the new axis goes
    where the current k-th one of its kind is, else just after the last one, else first."""
    is_window = [i in window_dims for i in range(rank)]
    same = [i for i, w in enumerate(is_window) if w == window]
    p = same[k] if k < len(same) else same[-1] + 1 if same else 0
    is_window.insert(p, window)
    return p, tuple(i for i, w in enumerate(is_window) if w)


def _batch_indices(indices, d):
    """Batched indices with their batch axis before the index vector (the last axis): (the
    indices, the batch axis)."""
    last = len(E.aval(indices).shape) - 1
    return (B.moveaxis(indices, d, 0), 0) if d == last else (indices, d)


def _with_batch_index(indices, d, size):
    """Indices batched on axis `d` with the example's number prepended to each index vector."""
    a = E.aval(indices)
    if size - 1 > np.iinfo(a.dtype).max:
        indices, a = E.convert(indices, np.int32), a.update(dtype=np.dtype(np.int32))
    iota = E.iota(dtype=a.dtype, shape=a.shape[:-1] + (1,), dimension=d)
    return E.concatenate(iota, indices, dimension=len(a.shape) - 1)


def _kept_before(d, dropped):
    """How many of one example's axes before axis `d` are not in `dropped`."""
    return sum(1 for a in range(d) if a not in dropped)


def _gather_batch(args, dims, *, dimension_numbers, slice_sizes, mode="clip", fill_value=None):
    """One gather for the batch; the operand keeps its batch axis where it is, and the result
    carries it where the new window (or indices batch) axis lands among its kind."""
    (x, indices), (dx, di) = args, dims
    dn, size = dimension_numbers, B.batch_size(args, dims)
    rank = len(B.example_shape(indices, di)) - 1 + len(dn.offset_dims)
    collapsed, index_map = dn.collapsed_slice_dims, dn.start_index_map
    if di is None:
        p, offset = _new_axis(dn.offset_dims, rank, True, _kept_before(dx, collapsed))
        collapsed, index_map = around(collapsed, dx), around(index_map, dx)
        slice_sizes = insert(slice_sizes, dx, size)
    else:
        indices, di = _batch_indices(indices, di)
        p, offset = _new_axis(dn.offset_dims, rank, False, di)
        if dx is not None:
            if size == 0:  # no examples: give the operand one (never read) to collapse
                zero = ((0, 0, 0),) * (len(E.aval(x).shape) - 1)
                x = E.pad(x, E.scalar(0, E.aval(x)), padding_config=insert(zero, dx, (0, 1, 0)))
            indices = _with_batch_index(indices, di, size)
            collapsed = tuple(sorted(around(collapsed, dx) + (dx,)))
            index_map = (dx,) + around(index_map, dx)
            slice_sizes = insert(slice_sizes, dx, 1)
    gdn = GatherDimensionNumbers(offset, collapsed, index_map)
    return E.gather(x, indices, dimension_numbers=gdn, slice_sizes=tuple(slice_sizes), mode=mode,
                    fill_value=fill_value), p


BATCH[gather] = _gather_batch


def _scatter_batch_for(prim):
    """The batching rule of one scatter primitive: one scatter for the batch, into the
    operand (broadcast when unbatched) with its batch axis where it is."""
    def rule(args, dims, *, dimension_numbers, mode="drop"):
        (x, indices, updates), (dx, di, du) = args, dims
        dn, size = dimension_numbers, B.batch_size(args, dims)
        if dx is None:  # every example gets its own copy of the operand
            x, dx = batch_at(x, None, size, 0), 0
        rank = len(B.example_shape(updates, du))
        inserted, to_operand = dn.inserted_window_dims, dn.scatter_dims_to_operand_dims
        if di is None:
            p, window = _new_axis(dn.update_window_dims, rank, True,
                                  _kept_before(dx, inserted))
            inserted, to_operand = around(inserted, dx), around(to_operand, dx)
        else:
            indices, di = _batch_indices(indices, di)
            p, window = _new_axis(dn.update_window_dims, rank, False, di)
            indices = _with_batch_index(indices, di, size)
            inserted = tuple(sorted(around(inserted, dx) + (dx,)))
            to_operand = (dx,) + around(to_operand, dx)
        sdn = ScatterDimensionNumbers(window, inserted, to_operand)
        return E.bind(prim.name, x, indices, batch_at(updates, du, size, p),
                      dimension_numbers=sdn, mode=mode), dx
    rule.__name__ = f"_{prim.name}_batch"
    return rule


for _prim in (scatter, scatter_add, scatter_mul, scatter_min, scatter_max):
    BATCH[_prim] = _scatter_batch_for(_prim)


def _start_index_vectors(starts, dims, size):
    """Scalar start indices (some batched) as one index vector per example: (size, n)."""
    cols = [E.broadcast_in_dim(s, shape=(size, 1), broadcast_dimensions=() if d is None else (0,))
            for s, d in zip(starts, dims)]
    return cols[0] if len(cols) == 1 else E.concatenate(*cols, dimension=1)


def _zero_start(starts):
    """A start index 0 for the batch axis, of the other start indices' type."""
    return E.scalar(0, E.aval(starts[0]) if starts else ShapedArray((), np.dtype(np.int32)))


def _dynamic_slice_batch(args, dims, *, slice_sizes):
    (x, *starts), (dx, *ds) = args, dims
    if all(d is None for d in ds):  # the same window of every example
        size = E.aval(x).shape[dx]
        return E.dynamic_slice(x, *insert(starts, dx, _zero_start(starts)),
                               slice_sizes=insert(slice_sizes, dx, size)), dx
    n = len(starts)
    gdn = GatherDimensionNumbers(tuple(range(n)), (), tuple(range(n)))
    indices = _start_index_vectors(starts, ds, B.batch_size(args, dims))
    return _gather_batch([x, indices], [dx, 0], dimension_numbers=gdn,
                         slice_sizes=tuple(slice_sizes), mode="clip")


BATCH[dynamic_slice] = _dynamic_slice_batch


def _dynamic_update_slice_batch(args, dims):
    (x, update, *starts), (dx, du, *ds) = args, dims
    size = B.batch_size(args, dims)
    if all(d is None for d in ds):  # the same window of every example
        at = du if dx is None else dx
        return E.dynamic_update_slice(batch_at(x, dx, size, at), batch_at(update, du, size, at),
                                      *insert(starts, at, _zero_start(starts))), at
    n = len(starts)
    sdn = ScatterDimensionNumbers(tuple(range(n)), (), tuple(range(n)))
    indices = _start_index_vectors(starts, ds, size)
    return BATCH[scatter]([x, indices, update], [dx, 0, du], dimension_numbers=sdn,
                                  mode="clip")


BATCH[dynamic_update_slice] = _dynamic_update_slice_batch
