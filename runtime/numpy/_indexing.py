"""NumPy indexing for `kiln.Array`: `x[idx]`, `x.at[idx].get/set/add/...`, and index helpers.

`getitem(arr, idx)` and `update(arr, idx, values, op)` are the two entry points `Array` calls.
An index is parsed once into a list of `_Idx` entries (kind, value, consumed axes), following
NumPy's rules with JAX's bounds semantics:

* all-static indices (ints, slices, `None`, `...`) lower to `lax.slice`/`rev`/`squeeze`/
  `expand_dims`; scalar integer *arrays* lower to `lax.dynamic_slice`; everything else (integer
  arrays, strided slices mixed with arrays, `mode='fill'`) lowers to one `lax.gather`, whose
  dimension numbers are built exactly as JAX builds them (advanced indices broadcast together and
  go where NumPy puts them: in place when adjacent, first otherwise).
* reads clamp out-of-bounds indices (`mode='clip'`, the default) or fill them (`mode='fill'`);
  negative indices wrap once; a static int on an empty axis is an IndexError.
* updates are the transposed gather, a `lax.scatter*`; out-of-bounds updates are dropped (or
  clamped with `mode='clip'`). Values broadcast to the indexed shape, are computed in the
  promoted dtype and cast back to the array's dtype and weak type, as JAX does.
* boolean masks become integer indices with `nonzero`, which needs a concrete mask (eager mode).
  `x.at[mask].set(v)` with a mask over the leading axes compiles to a select instead, so it also
  works on traced masks.

The module also holds NumPy's index helpers (`nonzero`, `select`, `ix_`, `unravel_index`, ...),
written over `kiln.lax` so that the compiler can specialise them.
"""
import operator
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .. import lax
from ..array import Array, to_array
from ..dispatch import bind, is_traced as _is_traced
from ..compiler import errors as _errors
from ..compiler.ir.builder import current as current_builder
from ..compiler.ir import dtypes
from ..compiler.primitives import PRIMITIVES
from ..compiler.primitives.indexing import GatherDimensionNumbers, ScatterDimensionNumbers
from ._core import check_arraylike, promote_dtypes, broadcast_to, broadcast_shapes, \
    canonicalize_axis, canonical_dtype
from ._creation import asarray
from ._ufuncs import true_divide, power, where

__all__ = ["nonzero", "flatnonzero", "argwhere", "compress", "extract", "select", "choose",
           "ix_", "indices", "diag_indices", "diag_indices_from", "tril_indices",
           "tril_indices_from", "triu_indices", "triu_indices_from", "unravel_index",
           "ravel_multi_index"]


class NonConcreteBooleanIndexError(_errors.NonConcreteBooleanIndexError):
    """Boolean-mask indexing needs a concrete mask: the result's shape depends on its values.
    Under `jit` the message points at the user's expression and spells out its rewrite."""

    def __init__(self, aval):
        b = current_builder()
        info = None if b is None else b.info
        super().__init__(
            f"Array boolean indices must be concrete; got {aval}. A boolean mask gives a result "
            f"whose shape depends on the mask's values, which is unknown when the mask is "
            f"traced. Rewrite `x[mask]` as `jnp.where(mask, x, fill)` (same shape as x), or use "
            f"`jnp.nonzero(mask, size=n)` for a fixed number of indices; `x.at[mask].set(v)` "
            f"with a scalar v works as it is.", info, _where_rewrite(info))


def _where_rewrite(info):
    """`jnp.where(mask, x, 0)` spelled with the user's own `x[mask]` expression, if any."""
    import ast
    text = "" if info is None or info.end_col is None else info.line[info.col:info.end_col]
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Subscript):
        return None
    x, mask = ast.unparse(node.value), ast.unparse(node.slice)
    return f"Here: replace `{text.strip()}` by `jnp.where({mask}, {x}, 0)`."


# ------------------------------------------------------------------------- index parsing

NONE, ELLIPSIS, SLICE, INT, BOOL, ARRAY = "none", "ellipsis", "slice", "int", "bool", "array"


class _Idx(NamedTuple):
    kind: str
    value: object
    axes: tuple  # the axes of the indexed array this entry consumes



def _is_int_scalar(i):
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _index_tuple(idx):
    """NumPy's `arr[seq]` heuristics are refused, as JAX refuses them: only tuples unpack."""
    if isinstance(idx, tuple):
        return idx
    if isinstance(idx, Sequence) and not isinstance(idx, str):
        nested = any(isinstance(i, (Sequence, slice)) and not isinstance(i, str) or i is None
                     or i is Ellipsis or getattr(i, "ndim", 0) for i in idx)
        fix = "arr[tuple(seq)]" if nested else "arr[array(seq)]"
        raise TypeError(f"Using a non-tuple sequence for multidimensional indexing is not "
                        f"allowed; use `{fix}` instead of `arr[seq]`.")
    return (idx,)


def _array_kind(dtype):
    if dtype == np.bool_:
        return BOOL
    if dtype.kind in "iu":
        return ARRAY
    raise TypeError(f"Indexer must have integer or boolean type, got indexer with type {dtype}")


def _sequence_index(seq):
    """A list (or tuple inside the index tuple) of ints or bools, as an index array."""
    if not seq:
        return ARRAY, to_array(np.zeros((0,), np.int32))
    if all(isinstance(e, (bool, np.bool_)) for e in seq):
        return BOOL, to_array(np.asarray(seq, np.bool_))
    leaves_static = all(isinstance(e, (int, float, complex, np.generic, Sequence, np.ndarray))
                        and not isinstance(e, str) for e in seq)
    if leaves_static:
        try:
            v = np.asarray(seq)
        except ValueError:
            raise TypeError(f"Indexer sequences must be rectangular (all rows of one length); "
                            f"got {seq!r}") from None
        if v.dtype.kind not in "biufc":
            raise TypeError(f"Indexer must have integer or boolean type, got {seq!r}")
        arr = to_array(v)
    else:
        arr = asarray(seq)
    return _array_kind(arr.dtype), arr


def _classify(i):
    """(kind, value) of one entry of an index tuple; TypeError/IndexError for invalid ones."""
    if i is None:
        return NONE, None
    if i is Ellipsis:
        return ELLIPSIS, None
    if isinstance(i, slice):
        return SLICE, _static_slice_of(i)
    if _is_int_scalar(i):
        return INT, i
    if isinstance(i, (bool, np.bool_)):
        return BOOL, bool(i)
    if isinstance(i, np.ndarray):
        kind = _array_kind(i.dtype)
        if i.ndim == 0:  # a NumPy scalar array is a static index
            return (INT, int(i)) if kind == ARRAY else (BOOL, bool(i))
        return kind, to_array(i)
    if isinstance(i, Array) or _is_traced(i):
        kind = _array_kind(i.dtype)
        if kind == BOOL and i.ndim == 0 and isinstance(i, Array):
            return BOOL, bool(i)  # a concrete scalar mask: a new axis of length 1 or 0
        return kind, i
    if isinstance(i, str):
        raise TypeError(f"kiln does not support string indexing; got idx={i!r}")
    if isinstance(i, Sequence):
        return _sequence_index(i)
    if isinstance(i, (float, complex, np.generic)):
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{np.dtype(type(i))}")
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), newaxis (`None`) and "
                     f"integer or boolean arrays are valid indices. Got {i!r}")


def _static_slice_of(s):
    """Slice bounds must be static integers (concrete scalar arrays are accepted)."""
    def bound(v):
        if v is None:
            return None
        if _is_traced(v):
            raise IndexError(f"Slice entries must be static integers. Got {s}; use "
                             f"lax.dynamic_slice for a slice with a traced start.")
        return operator.index(v)
    return slice(bound(s.start), bound(s.stop), bound(s.step))


def _parse(idx, shape):
    """The index as a list of `_Idx`, with consumed axes resolved (the ellipsis included)."""
    entries = [_classify(i) for i in _index_tuple(idx)]
    consumed = [_ndim(v) if k == BOOL else (0 if k in (NONE, ELLIPSIS) else 1)
                for k, v in entries]
    ellipses = [n for n, (k, _) in enumerate(entries) if k == ELLIPSIS]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    total = sum(consumed)
    if total > len(shape):
        raise IndexError(f"Too many indices: array is {len(shape)}-dimensional, but {total} "
                         f"were indexed")
    if ellipses:
        consumed[ellipses[0]] = len(shape) - total
    out, axis = [], 0
    for (kind, value), n in zip(entries, consumed):
        out.append(_Idx(kind, value, tuple(range(axis, axis + n))))
        axis += n
    return out


def _ndim(v):
    return 0 if isinstance(v, bool) else v.ndim


def _expand_ellipsis(parsed, ndim):
    """Replace `...` and the implicit trailing axes with full slices."""
    out, consumed = [], 0
    for e in parsed:
        consumed += len(e.axes)
        if e.kind == ELLIPSIS:
            out.extend(_Idx(SLICE, slice(None), (a,)) for a in e.axes)
        else:
            out.append(e)
    out.extend(_Idx(SLICE, slice(None), (a,)) for a in range(consumed, ndim))
    return out


def _expand_bool_arrays(parsed, shape):
    """Boolean arrays -> one integer index array per consumed axis (needs a concrete mask)."""
    out = []
    for position, e in enumerate(parsed):
        if e.kind != BOOL or isinstance(e.value, bool):
            out.append(e)
            continue
        if _is_traced(e.value):
            raise NonConcreteBooleanIndexError(e.value.aval.str_short()
                                               if hasattr(e.value, "aval") else e.value)
        expected = [shape[a] for a in e.axes]
        if not all(s in (0, t) for s, t in zip(e.value.shape, expected)):
            raise IndexError(f"boolean index did not match shape of indexed array in index "
                             f"{position}: got {tuple(e.value.shape)}, expected {expected}")
        out.extend(_Idx(ARRAY, i, (a,)) for i, a in zip(nonzero(e.value), e.axes))
    return out


# ------------------------------------------------------------------------------- modes

_GATHER_MODES = {"clip": "clip", "fill": "fill", "drop": "fill",
                 "promise_in_bounds": "promise_in_bounds"}


def _mode_name(mode):
    if mode is None:
        return None
    name = getattr(mode, "value", mode)
    if name == "one_hot":
        raise ValueError("kiln does not support mode='one_hot' for indexing; use 'clip', "
                         "'fill', 'drop' or 'promise_in_bounds'")
    if name not in _GATHER_MODES:
        raise ValueError(f'Unknown gather mode "{mode}"')
    return _GATHER_MODES[name]


# ----------------------------------------------------------------------------- getitem

def _dslices(idx, shape):
    """`idx` with each `kiln.ds` Slice as the positions it selects: a static start as a
    slice, a traced one as an index array whose start is clamped (stride 1) so that the
    window fits, as `lax.dynamic_slice`. Slices must come before any None or Ellipsis."""
    from ..refs import Slice
    entries = _index_tuple(idx)
    if not any(type(e) is Slice for e in entries):
        return idx
    out = []
    for axis, e in enumerate(entries):
        if type(e) is not Slice:
            out.append(e)
            continue
        if any(p is None or p is Ellipsis for p in entries[:axis]):
            raise IndexError("kiln.ds after None or ... in an index: put the ds entries first")
        start = e.start
        if not _is_traced(start) and not hasattr(start, "shape"):
            if e.stride == 1:
                start = min(max(start, 0), max(shape[axis] - e.size, 0))
                out.append(slice(start, start + e.size))
            else:
                out.append(np.minimum(start + e.stride * np.arange(e.size), shape[axis] - 1))
            continue
        if e.stride == 1:
            start = lax.clamp(0, start, max(shape[axis] - e.size, 0))
        out.append(start + e.stride * lax.iota(dtypes.int32, e.size))
    return tuple(out)


def getitem(arr, idx, mode=None, fill_value=None, *, wrap_negative_indices=True):
    """`arr[idx]` (and `arr.at[idx].get(mode=..., fill_value=...)`)."""
    x = to_array(arr)
    mode = _mode_name(mode)
    parsed = _parse(_dslices(idx, x.shape), x.shape)
    kinds = {e.kind for e in parsed}
    if mode != "fill":
        if kinds <= {NONE, ELLIPSIS, SLICE, INT} and _in_bounds(parsed, x.shape,
                                                                wrap_negative_indices):
            return _static_slice(x, parsed, wrap_negative_indices)
        if kinds <= {NONE, ELLIPSIS, SLICE, INT, ARRAY} and _dynamic_slice_ok(parsed):
            return _dynamic_slice(x, parsed, wrap_negative_indices)
    return _gather(x, _expand_bool_arrays(parsed, x.shape), mode, fill_value,
                   wrap_negative_indices)


def _in_bounds(parsed, shape, wrap):
    """Whether every static int index is in bounds; an out-of-bounds one is read through
    dynamic_slice with its value, as JAX does (so checkify's index checks see it)."""
    return all(e.kind != INT or 0 <= _normalize_int(int(e.value), shape[e.axes[0]], wrap)
               < shape[e.axes[0]] for e in _expand_ellipsis(parsed, len(shape)))


def _normalize_int(i, size, wrap):
    return i + size if wrap and i < 0 else i


def _check_nonempty_axis(shape, axis):
    if shape[axis] == 0:
        raise IndexError(f"index is out of bounds for axis {axis} with size 0")


def _static_slice(x, parsed, wrap):
    """Ints, slices, None and `...`: lax.slice, then rev, squeeze and expand_dims."""
    starts, limits, strides, rev, squeeze, newaxis = [], [], [], [], [], []
    for e in _expand_ellipsis(parsed, x.ndim):
        if e.kind == NONE:
            newaxis.append(len(starts) - len(squeeze) + len(newaxis))
            continue
        axis, = e.axes
        size = x.shape[axis]
        if e.kind == INT:
            _check_nonempty_axis(x.shape, axis)
            i = min(max(_normalize_int(int(e.value), size, wrap), 0), size - 1)
            starts.append(i), limits.append(i + 1), strides.append(1), squeeze.append(axis)
            continue
        start, stop, step = e.value.indices(size)
        if step < 0:
            first = min(size, stop + 1 + abs(start - stop - 1) % -step)
            starts.append(first), limits.append(max(first, start + 1)), rev.append(axis)
        else:
            starts.append(start), limits.append(max(start, stop))
        strides.append(abs(step))
    out = lax.slice(x, starts, limits, None if all(s == 1 for s in strides) else strides)
    if rev:
        out = lax.rev(out, rev)
    if squeeze:
        out = lax.squeeze(out, squeeze)
    if newaxis:
        out = lax.expand_dims(out, newaxis)
    return out


def _dynamic_slice_ok(parsed):
    return all(e.kind != ARRAY or e.value.ndim == 0 for e in parsed) and all(
        e.kind != SLICE or e.value.step in (None, 1, -1) for e in parsed)


def _index_dtype(shape):
    return dtypes.int32 if all(d < 2 ** 31 for d in shape) else dtypes.default_int()


def _index_array(i, size, wrap, dtype):
    """An integer index (static or array) as an array of `dtype`, negative values wrapped once.
    Indices out of range keep being out of range by their own value, whatever their type: a
    static one keeps its value where `dtype` holds it (else it is brought into [-1, size]), an unsigned
    one is capped at `size` before the conversion (np.uint32(4e9) would wrap to a negative
    int32), so the primitive clamps them to the last element or drops them, as it should."""
    if not isinstance(i, (Array,)) and not _is_traced(i):
        i = _normalize_int(int(i), size, wrap)
        info = np.iinfo(dtype)
        return to_array(np.asarray(i if info.min <= i <= info.max else min(max(i, -1), size),
                                   dtype))
    signed = i.dtype.kind == "i"
    if i.dtype.kind == "u" and np.iinfo(i.dtype).max > np.iinfo(dtype).max:
        i = lax.min(i, _const(i, size))
    i = _as_type(i, dtype, False)
    if not (wrap and signed):
        return i
    return lax.select(lax.lt(i, _const(i, 0)), lax.add(i, _const(i, size)), i)


def _dynamic_slice(x, parsed, wrap):
    """Scalar index arrays (with ints, unit-step slices, None, `...`): lax.dynamic_slice."""
    dt = _index_dtype(x.shape)
    starts, sizes, rev, squeeze, newaxis = [], [], [], [], []
    for e in _expand_ellipsis(parsed, x.ndim):
        if e.kind == NONE:
            newaxis.append(len(starts) - len(squeeze) + len(newaxis))
            continue
        axis, = e.axes
        size = x.shape[axis]
        if e.kind in (INT, ARRAY):
            _check_nonempty_axis(x.shape, axis)
            starts.append(_index_array(e.value, size, wrap, dt)), sizes.append(1)
            squeeze.append(axis)
            continue
        start, stop, step = e.value.indices(size)
        if step < 0:
            first = stop + 1
            starts.append(_index_array(first, size, False, dt))
            sizes.append(max(0, start + 1 - first)), rev.append(axis)
        else:
            starts.append(_index_array(start, size, False, dt)), sizes.append(max(0, stop - start))
    # The primitive clamps the window into range; negative indices were wrapped above.
    out = bind(PRIMITIVES["dynamic_slice"], x, *starts, slice_sizes=tuple(sizes))
    if rev:
        out = lax.rev(out, rev)
    if squeeze:
        out = lax.squeeze(out, squeeze)
    if newaxis:
        out = lax.expand_dims(out, newaxis)
    return out


# --------------------------------------------------------------------- the gather plan

class _GatherPlan(NamedTuple):
    slice_shape: tuple         # shape of x[idx] (None axes included)
    slice_sizes: tuple         # gather slice sizes, one per axis of the (expanded) operand
    indices: object            # gather indices, index vector last; None when there are none
    dnums: GatherDimensionNumbers
    newaxis_dims: tuple        # axes of x[idx] made by None
    scalar_bool_dims: tuple    # size-1 axes inserted into x for scalar boolean indices


def _expand_scalar_bools(parsed):
    """A scalar bool b becomes index arange(int(b)) on a new size-1 axis of the operand."""
    out, inserted, axis = [], [], 0
    for e in parsed:
        if e.kind == BOOL:  # only scalar bools are left at this point
            inserted.append(axis)
            out.append(_Idx(ARRAY, to_array(np.arange(int(e.value), dtype=np.int32)), (axis,)))
            axis += 1
        elif e.kind == NONE:
            out.append(_Idx(NONE, None, ()))
        else:
            out.append(_Idx(e.kind, e.value, (axis,)))
            axis += 1
    return out, tuple(inserted)


def _broadcast_arrays(arrs):
    shape = broadcast_shapes(*(a.shape for a in arrs))
    return [broadcast_to(a, shape) for a in arrs], shape


def _gather_plan(parsed, shape, wrap):
    """NumPy index -> XLA gather dimension numbers (JAX's `_index_to_gather`)."""
    # NumPy counts scalar booleans as advanced indices too (JAX 0.10.2 does not, and then
    # disagrees with NumPy on where the advanced axes go, e.g. for x[:, True, :, 0]).
    adv_positions = [n for n, e in enumerate(parsed) if e.kind in (ARRAY, INT, BOOL)]
    contiguous = all(b - a == 1 for a, b in zip(adv_positions, adv_positions[1:]))
    parsed, scalar_bool_dims = _expand_scalar_bools(_expand_ellipsis(parsed, len(shape)))
    shape = list(shape)
    for a in scalar_bool_dims:
        shape.insert(a, 1)
    dt = _index_dtype(shape)
    advanced = any(e.kind == ARRAY and e.value.ndim > 0 for e in parsed)
    adv = [(n, e) for n, e in enumerate(parsed) if advanced and e.kind in (ARRAY, INT)]
    adv_at = adv[0][0] if adv and contiguous else 0

    offset_dims, collapsed, start_map, slice_sizes = [], [], [], []
    gather_indices, index_batch = [], []   # (array, first batch dim), batch shape
    slice_shape, newaxis_dims = [], []
    y_axis = collapsed_y = 0
    for pos, e in enumerate(parsed):
        if adv and pos == adv_at:
            arrs, bshape = _broadcast_arrays(
                [_index_array(a.value, shape[a.axes[0]], wrap, dt) for _, a in adv])
            first = len(index_batch)
            gather_indices.extend((a, first) for a in arrs)
            index_batch.extend(bshape)
            axes = [a.axes[0] for _, a in adv]
            start_map.extend(axes), collapsed.extend(axes), slice_shape.extend(bshape)
            y_axis += len(bshape)
            collapsed_y += len(bshape)
        if adv and e.kind in (ARRAY, INT):
            slice_sizes.append(1)
            continue
        if e.kind == NONE:
            slice_shape.append(1), newaxis_dims.append(y_axis)
            y_axis += 1
            continue
        axis, = e.axes
        if e.kind in (INT, ARRAY):  # a scalar index
            _check_nonempty_axis(shape, axis)
            gather_indices.append((_index_array(e.value, shape[axis], wrap, dt),
                                   len(index_batch)))
            collapsed.append(axis), slice_sizes.append(1), start_map.append(axis)
            continue
        start, stop, step = e.value.indices(shape[axis])
        size = len(range(start, stop, step))
        slice_shape.append(size)
        if step == 1:
            if size != shape[axis]:
                gather_indices.append((_index_array(start, shape[axis], False, dt),
                                       len(index_batch)))
                start_map.append(axis)
            slice_sizes.append(size)
            offset_dims.append(collapsed_y)
        else:
            strided = lax.add(lax.mul(lax.iota(dt, size), np.asarray(step, dt)),
                              np.asarray(start, dt))
            gather_indices.append((strided, len(index_batch)))
            index_batch.append(size)
            slice_sizes.append(1), start_map.append(axis), collapsed.append(axis)
        collapsed_y += 1
        y_axis += 1
    dnums = GatherDimensionNumbers(tuple(offset_dims), tuple(sorted(collapsed)),
                                   tuple(start_map))
    return _GatherPlan(tuple(slice_shape), tuple(slice_sizes),
                       _stack_indices(gather_indices, index_batch), dnums,
                       tuple(newaxis_dims), scalar_bool_dims)


def _stack_indices(gather_indices, batch):
    if not gather_indices:
        return None
    full = tuple(batch) + (1,)
    cols = [lax.broadcast_in_dim(g, full, tuple(range(i, i + g.ndim)))
            for g, i in gather_indices]
    return lax.concatenate(cols, len(batch))


def _gather(x, parsed, mode, fill_value, wrap):
    plan = _gather_plan(parsed, x.shape, wrap)
    if fill_value is not None:
        fill_value = _static_fill_value(fill_value)
    y = lax.expand_dims(x, plan.scalar_bool_dims) if plan.scalar_bool_dims else x
    if 0 in plan.slice_shape:
        return _zeros(plan.slice_shape, x.dtype, x.weak_type)
    if plan.indices is not None:
        y = lax.gather(y, plan.indices, plan.dnums, plan.slice_sizes, mode=mode or "clip",
                       fill_value=fill_value if mode == "fill" else None)
    return lax.expand_dims(y, plan.newaxis_dims) if plan.newaxis_dims else y


def _static_fill_value(v):
    if _is_traced(v):
        raise TypeError("fill_value argument to indexed get() must be a concrete scalar, not a "
                        "traced value")
    if np.ndim(v) != 0:
        raise ValueError("fill_value argument to indexed get() must be a scalar")
    return v.item() if isinstance(v, (Array, np.ndarray, np.generic)) else v


def _const(like, value):
    """A scalar constant of `like`'s dtype (lax operands must match dtypes exactly)."""
    return to_array(np.array(value).astype(like.dtype))


def _zeros(shape, dtype, weak):
    zero = _as_type(to_array(np.zeros((), dtype)), dtype, weak)
    return lax.broadcast_in_dim(zero, tuple(shape), ())


def _as_type(x, dtype, weak):
    """Convert to (dtype, weak_type) exactly, weak types included."""
    if x.dtype == dtype and x.weak_type == weak:
        return x
    return bind(PRIMITIVES["convert_element_type"], x, new_dtype=np.dtype(dtype), weak_type=weak)


# ------------------------------------------------------------------------------ update

_SCATTERS = {"set": lax.scatter, "add": lax.scatter_add, "subtract": lax.scatter_add,
             "multiply": lax.scatter_mul, "min": lax.scatter_min, "max": lax.scatter_max}
_NO_BOOL = {"add": "add", "subtract": "sub", "multiply": "mul"}  # JAX's primitive names
_SCATTER_MODES = {"clip": "clip", "fill": "drop", "promise_in_bounds": "promise_in_bounds"}
_UPDATE_OPS = ("set", "add", "subtract", "multiply", "divide", "power", "min", "max", "apply")


def update(arr, idx, values, op, *, indices_are_sorted=False, unique_indices=False, mode=None,
           **kw):
    """`arr.at[idx].<op>(values)`: a functional indexed update (op in `_UPDATE_OPS`).

    `indices_are_sorted` and `unique_indices` are hints (ignored eagerly); `kw` may hold JAX's
    `wrap_negative_indices` (default True) and `out_sharding` (None: kiln has one device).
    """
    if op not in _UPDATE_OPS:
        raise ValueError(f"unknown indexed update {op!r}; expected one of {_UPDATE_OPS}")
    wrap_negative_indices = kw.pop("wrap_negative_indices", True)
    if kw.pop("out_sharding", None) is not None:
        raise ValueError(f".at[].{op}(): kiln arrays live on one device; out_sharding is not "
                         f"supported")
    if kw:
        raise TypeError(f".at[].{op}() got an unexpected keyword argument {next(iter(kw))!r}")
    x = to_array(arr)
    mode = _SCATTER_MODES.get(_mode_name(mode), "drop")
    if op in ("divide", "power"):
        factors = update(_ones_like(x), idx, values, "multiply", mode=mode,
                         wrap_negative_indices=wrap_negative_indices)
        return (true_divide if op == "divide" else power)(x, factors)
    if op == "apply":
        return _apply(x, idx, values, mode, wrap_negative_indices)
    parsed = _parse(_dslices(idx, x.shape), x.shape)
    y = _update_values(x, values)
    xp, yp = promote_dtypes(x, y)
    if xp.dtype == np.bool_ and op in _NO_BOOL:
        raise TypeError(f"{_NO_BOOL[op]} does not accept dtype bool at position 0. Accepted "
                        f"dtypes at position 0 are subtypes of integer, floating, "
                        f"complexfloating.")
    if xp.dtype != x.dtype:
        warnings.warn(f"scatter inputs have incompatible types: cannot safely cast value from "
                      f"dtype={y.dtype} to dtype={x.dtype} with standard dtype promotion. In "
                      f"future releases this will result in an error.", FutureWarning,
                      stacklevel=4)
    if op == "subtract":
        yp = lax.neg(yp)
    mask = _leading_mask(parsed, x)
    if mask is not None and yp.ndim <= x.ndim - mask.ndim:
        out = _masked_update(xp, mask, yp, op)
    else:
        out = _scatter(xp, _expand_bool_arrays(parsed, x.shape), yp, op, mode,
                       wrap_negative_indices)
    return _as_type(out, x.dtype, x.weak_type)


def _ones_like(x):
    return lax.broadcast_in_dim(_as_type(to_array(np.ones((), x.dtype)), x.dtype, x.weak_type),
                                x.shape, ())


def _update_values(x, values):
    if type(values) is int and x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        if info.min <= values <= info.max:
            return to_array(np.asarray(values, x.dtype))
    if isinstance(values, (Array, np.ndarray, np.generic, int, float, complex, bool)) \
            or _is_traced(values):
        return to_array(values, ".at[] update values")
    return asarray(values)


def _leading_mask(parsed, x):
    """The mask of `x.at[mask]` / `x.at[mask, ...]` / `x.at[mask, :, :]` when it covers the
    leading axes with x's shape; None for any other index."""
    if not parsed:
        return None
    first, rest = parsed[0], parsed[1:]
    if first.kind != BOOL or isinstance(first.value, bool):
        return None
    if not all(e.kind == ELLIPSIS or e.kind == SLICE and e.value == slice(None) for e in rest):
        return None
    if tuple(first.value.shape) != x.shape[:first.value.ndim]:
        return None
    return first.value


def _combine(op, x, y):
    """Elementwise `x op y` for the scatter ops (y already negated for subtract)."""
    if op == "set":
        return y
    if op in ("add", "subtract"):
        return lax.add(x, y)
    if op == "multiply":
        return lax.mul(x, y)
    return (lax.min if op == "min" else lax.max)(x, y)


def _masked_update(x, mask, y, op):
    """x.at[mask].op(y) as a select: no concrete mask needed."""
    m = lax.broadcast_in_dim(mask, x.shape, tuple(range(mask.ndim)))
    y = broadcast_to(y, x.shape)
    return lax.select(m, _combine(op, x, y), x)


def _scatter(x, parsed, y, op, mode, wrap):
    plan = _gather_plan(parsed, x.shape, wrap)
    if 0 in plan.slice_shape:
        return x
    y = broadcast_to(y, plan.slice_shape)
    if plan.newaxis_dims:
        y = lax.squeeze(y, plan.newaxis_dims)
    xe = lax.expand_dims(x, plan.scalar_bool_dims) if plan.scalar_bool_dims else x
    if plan.indices is None:  # only full slices: an elementwise update of the whole array
        out = _combine(op, xe, lax.reshape(y, xe.shape))
    else:
        dnums = ScatterDimensionNumbers(update_window_dims=plan.dnums.offset_dims,
                                        inserted_window_dims=plan.dnums.collapsed_slice_dims,
                                        scatter_dims_to_operand_dims=plan.dnums.start_index_map)
        out = _SCATTERS[op](xe, plan.indices, y, dnums, mode=mode)
    return lax.squeeze(out, plan.scalar_bool_dims) if plan.scalar_bool_dims else out


def _apply(x, idx, func, mode, wrap):
    """x.at[idx].apply(func): func is applied once per occurrence of each indexed position."""
    if not callable(func):
        raise TypeError(f".at[].apply() needs a unary function, got {type(func).__name__}")
    counts = update(_zeros(x.shape, dtypes.int32, False), idx, 1, "add", mode=mode,
                    wrap_negative_indices=wrap)
    if x.size == 0:
        return x

    def body(carry):
        k, v = carry
        fv = to_array(func(v), ".at[].apply func")
        if fv.dtype != x.dtype or fv.shape != x.shape:
            raise ValueError(f".at[].apply(func): func must be elementwise and keep the dtype "
                             f"{x.dtype}; it returned {fv.dtype}{list(fv.shape)} for "
                             f"{x.dtype}{list(x.shape)}")
        fv = _as_type(fv, x.dtype, x.weak_type)
        return lax.add(k, _const(k, 1)), lax.select(lax.gt(counts, k), fv, v)

    times = lax.reduce_max(counts, tuple(range(x.ndim)))
    _, out = lax.while_loop(lambda c: lax.lt(c[0], times), body,
                            (to_array(np.int32(0)), x))
    return out


# --------------------------------------------------------------------- index helpers

def _concrete_index(v, what):
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be a static integer, got {v!r}") from None


def _int_mask(a):
    return lax.convert_element_type(_to_bool(a), dtypes.int32)


def _to_bool(a):
    return a if a.dtype == np.bool_ else lax.ne(a, _const(a, 0))


def nonzero(a, *, size=None, fill_value=None):
    """Indices of the non-zero elements, one array per dimension (NumPy's `nonzero`).

    Without `size` the number of results is data-dependent, so the array must be concrete; with
    `size` the result has exactly `size` entries, padded with `fill_value` (default 0).
    """
    check_arraylike("nonzero", a)
    arr = to_array(a)
    if arr.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                         "jnp.atleast_1d(scalar).nonzero() instead.")
    mask = _int_mask(arr)
    count = lax.reduce_sum(mask, tuple(range(arr.ndim)))
    if size is None:
        if _is_traced(count):
            raise TypeError("The size argument of jnp.nonzero must be statically specified to "
                            "use jnp.nonzero within kiln transformations.")
        size = int(count)
    size = _concrete_index(size, "nonzero: size")
    # Computed in int32, returned in the default integer type (int64 under x64), as JAX's.
    out = tuple(_default_int(o) for o in _nonzero_positions(mask, size))
    if fill_value is None:
        return out
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * arr.ndim
    if len(fills) != arr.ndim or any(np.ndim(f) != 0 for f in fills):
        raise ValueError(f"fill_value must be a scalar or a tuple of length {arr.ndim}; got "
                         f"{fill_value}")
    padding = lax.ge(lax.iota(dtypes.int32, size), count)
    return tuple(where(padding, f, o) for f, o in zip(fills, out))


def _default_int(x):
    wide = dtypes.default_int()
    return x if x.dtype == wide else lax.convert_element_type(x, wide)


def _nonzero_positions(mask, size):
    """The coordinates of the first `size` non-zeros of an int32 0/1 mask; zeros past them."""
    if mask.size == 0 or size == 0:
        return tuple(_zeros((size,), dtypes.int32, False) for _ in mask.shape)
    # bincount of the running count gives, cumulated, the flat position of each non-zero.
    running = lax.cumsum(lax.reshape(mask, (mask.size,)))
    bins = update(_zeros((size,), dtypes.int32, False), (running,), 1, "add")
    flat = lax.cumsum(bins)
    strides = [int(np.prod(mask.shape[k + 1:])) for k in range(mask.ndim)]
    return tuple(lax.rem(lax.div(flat, _const(flat, s)), _const(flat, d))
                 for s, d in zip(strides, mask.shape))


def flatnonzero(a, *, size=None, fill_value=None):
    """Indices of the non-zero elements of the flattened array."""
    check_arraylike("flatnonzero", a)
    arr = to_array(a)
    return nonzero(lax.reshape(arr, (arr.size,)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """Indices of the non-zero elements as a (count, ndim) array."""
    check_arraylike("argwhere", a)
    arr = to_array(a)
    cols = nonzero(lax.reshape(arr, (1,)) if arr.ndim == 0 else arr, size=size,
                   fill_value=fill_value)
    n = cols[0].shape[0]
    if arr.ndim == 0:
        return _zeros((n, 0), dtypes.default_int(), False)
    return lax.concatenate([lax.reshape(c, (n, 1)) for c in cols], 1)


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """Slices of `a` along `axis` where `condition` is True (eager unless `size` is given)."""
    check_arraylike("compress", condition, a, fill_value)
    if out is not None:
        raise ValueError("compress: the 'out' argument is not supported (kiln arrays are "
                         "immutable); use the return value")
    cond, arr = to_array(condition), to_array(a)
    if cond.ndim != 1:
        raise ValueError("condition must be a 1D array")
    cond = _to_bool(cond)
    if axis is None:
        arr, axis = lax.reshape(arr, (arr.size,)), 0
    axis = canonicalize_axis(axis, arr.ndim, "compress")
    arr = _move_to_front(arr, axis)
    n = min(cond.shape[0], arr.shape[0])
    extra = lax.slice(cond, (n,), (cond.shape[0],))
    cond = lax.slice(cond, (0,), (n,))
    arr = lax.slice_in_dim(arr, 0, n, 1, 0) if arr.shape[0] != n else arr
    if size is None:
        if extra.shape[0] and bool(lax.reduce_or(extra, (0,))):
            raise ValueError("condition contains entries that are out of bounds")
        result = getitem(arr, cond)
    else:
        size = _concrete_index(size, "compress: size")
        if not 0 <= size <= arr.shape[0]:
            raise ValueError(f"size must be positive and not greater than the size of the array "
                             f"axis; got size={size} for a.shape[axis]={arr.shape[0]}")
        rows, = nonzero(cond, size=size)
        taken = getitem(arr, rows)
        valid = lax.lt(lax.iota(dtypes.int32, size),
                       lax.reduce_sum(_int_mask(cond), (0,)))
        keep = lax.broadcast_in_dim(valid, taken.shape, (0,))
        fill = _as_type(to_array(fill_value), arr.dtype, False)
        result = lax.select(keep, taken, lax.broadcast_in_dim(fill, taken.shape, ()))
    return _move_from_front(result, axis)


def _move_to_front(x, axis):
    perm = (axis,) + tuple(d for d in range(x.ndim) if d != axis)
    return lax.transpose(x, perm)


def _move_from_front(x, axis):
    perm = list(range(1, x.ndim))
    perm.insert(axis, 0)
    return lax.transpose(x, perm)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of `arr` where `condition` is non-zero (both flattened)."""
    check_arraylike("extract", condition, arr, fill_value)
    c, x = to_array(condition), to_array(arr)
    return compress(lax.reshape(c, (c.size,)), lax.reshape(x, (x.size,)), size=size,
                    fill_value=fill_value)


def select(condlist, choicelist, default=0):
    """Elements from `choicelist` where the first matching condition of `condlist` holds."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"condlist must have length equal to choicelist ({len(condlist)} vs "
                         f"{len(choicelist)})")
    if len(condlist) == 0:
        raise ValueError("condlist must be non-empty")
    check_arraylike("select", *condlist, *choicelist, default)
    default, *choices = promote_dtypes(default, *choicelist)
    conds = [_to_bool(to_array(c)) for c in condlist]
    everything, _ = _broadcast_arrays(conds + choices + [default])
    conds, choices, out = everything[:len(conds)], everything[len(conds):-1], everything[-1]
    for cond, choice in zip(reversed(conds), reversed(choices)):
        out = lax.select(cond, choice, out)
    return out


def choose(a, choices, out=None, mode="raise"):
    """`choices[a[i...]][i...]`: pick each element from the choice array that `a` names."""
    if out is not None:
        raise ValueError("choose: the 'out' argument is not supported (kiln arrays are "
                         "immutable); use the return value")
    check_arraylike("choose", a, *choices)
    arr = to_array(a)
    if arr.dtype.kind not in "iu":
        raise ValueError("`a` array must be integer typed")
    n = len(choices)
    if mode == "raise":
        bad = _any_outside(arr, n)
        if _is_traced(bad):
            raise TypeError("choose with mode='raise' needs a concrete `a`: under kiln.jit use "
                            "mode='wrap' or mode='clip'")
        if bool(bad):
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        arr = _floor_mod(arr, n)
    elif mode == "clip":
        arr = lax.clamp(_const(arr, 0), arr, _const(arr, n - 1))
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    cs = [to_array(c) for c in choices]
    dtype, _ = dtypes.result_type(*((c.dtype, c.weak_type) for c in cs))
    everything, _ = _broadcast_arrays([arr] + [_as_type(c, dtype, False) for c in cs])
    arr, cs = everything[0], everything[1:]
    result = cs[0]
    for k, c in enumerate(cs[1:], 1):
        result = lax.select(lax.eq(arr, _const(arr, k)), c, result)
    return result


def _any_outside(i, n):
    """Whether any index of `i` lies outside [0, n)."""
    outside = lax.bitwise_or(lax.lt(i, _const(i, 0)), lax.ge(i, _const(i, n)))
    return lax.reduce_or(outside, tuple(range(i.ndim)))


def _floor_mod(x, n):
    return _floor_divmod(x, n)[1]


def ix_(*args):
    """Open mesh index arrays: `x[ix_(rows, cols)]` takes the cross product."""
    check_arraylike("ix_", *args)
    arrs = [to_array(a) for a in args]
    out = []
    for i, a in enumerate(arrs):
        if a.ndim != 1:
            raise ValueError(f"Arguments to kiln.numpy.ix_ must be 1-dimensional, got shape "
                             f"{a.shape}")
        if a.dtype == np.bool_:
            a, = nonzero(a)
        shape = [1] * len(arrs)
        shape[i] = a.shape[0]
        if a.size == 0:
            a = _zeros((0,), dtypes.default_int(), False)
        out.append(lax.broadcast_in_dim(a, tuple(shape), (i,)))
    return tuple(out)


def indices(dimensions, dtype=None, sparse=False):
    """A grid of indices: `out[k][i0, i1, ...] == ik`."""
    dtype = canonical_dtype(int if dtype is None else dtype, "indices")
    dims = tuple(_concrete_index(d, "indices: dimensions") for d in dimensions)
    n = len(dims)
    out = []
    for i, d in enumerate(dims):
        shape = (1,) * i + (d,) + (1,) * (n - i - 1) if sparse else dims
        out.append(lax.broadcast_in_dim(lax.iota(dtype, d), shape, (i,)))
    if sparse:
        return tuple(out)
    if not out:
        return _zeros((0,), dtype, False)
    return lax.concatenate([lax.expand_dims(o, (0,)) for o in out], 0)


def diag_indices(n, ndim=2):
    """Indices of the main diagonal of an `ndim`-dimensional array of side `n`."""
    n = _concrete_index(n, "diag_indices: n")
    ndim = _concrete_index(ndim, "diag_indices: ndim")
    if n < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    if ndim < 0:
        raise ValueError(f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    return (lax.iota(dtypes.default_int(), n),) * ndim


def diag_indices_from(arr):
    """`diag_indices` for a square array."""
    check_arraylike("diag_indices_from", arr)
    a = to_array(arr)
    if a.ndim < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(a.shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(a.shape[0], a.ndim)


def _tri_indices(name, n, k, m, upper):
    n = _concrete_index(n, f"{name}: n")
    k = _concrete_index(k, f"{name}: k")
    m = n if m is None else _concrete_index(m, f"{name}: m")
    rows = lax.broadcasted_iota(dtypes.int32, (n, m), 0)
    cols = lax.broadcasted_iota(dtypes.int32, (n, m), 1)
    diff = lax.sub(cols, rows)
    mask = lax.ge(diff, k) if upper else lax.le(diff, k)
    count = sum(max(0, min(m, i + k + 1) if not upper else m - max(0, i + k)) for i in range(n))
    return nonzero(mask, size=count)


def tril_indices(n, k=0, m=None):
    """Row and column indices of the lower triangle of an (n, m) array."""
    return _tri_indices("tril_indices", n, k, m, upper=False)


def triu_indices(n, k=0, m=None):
    """Row and column indices of the upper triangle of an (n, m) array."""
    return _tri_indices("triu_indices", n, k, m, upper=True)


def _indices_from(name, arr, k):
    check_arraylike(name, arr)
    a = to_array(arr)
    if a.ndim != 2:
        raise ValueError(f"{name} requires a 2-dimensional array, got shape {a.shape}")
    return a.shape[0], a.shape[1]


def tril_indices_from(arr, k=0):
    """`tril_indices` for the shape of a 2-D array."""
    n, m = _indices_from("tril_indices_from", arr, k)
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    """`triu_indices` for the shape of a 2-D array."""
    n, m = _indices_from("triu_indices_from", arr, k)
    return triu_indices(n, k, m)


def unravel_index(indices, shape):
    """Flat indices -> a tuple of coordinate arrays; out-of-range indices clamp (JAX)."""
    check_arraylike("unravel_index", indices)
    idx = to_array(indices)
    dtype, weak = idx.dtype, idx.weak_type
    try:
        shape = list(shape)
    except TypeError:
        shape = [shape]
    if any(np.ndim(s) != 0 for s in shape):
        raise ValueError("unravel_index: shape should be a scalar or 1D sequence.")
    shape = [_concrete_index(s, "unravel_index: shape") for s in shape]
    coords = [None] * len(shape)
    for i in reversed(range(len(shape))):
        idx, coords[i] = _floor_divmod(idx, shape[i])
    too_big = lax.gt(idx, _const(idx, 0))
    too_small = lax.lt(idx, _const(idx, -1)) if idx.dtype.kind == "i" else None
    out = []
    for s, c in zip(shape, coords):
        if too_small is not None:
            c = lax.select(too_small, lax.full_like(c, 0), c)
        out.append(lax.select(too_big, lax.full_like(c, s - 1), c))
    return tuple(_as_type(o, dtype, weak) for o in out)


def _floor_divmod(x, n):
    if n == 0:
        return lax.full_like(x, 0), lax.full_like(x, 0)
    q, r = lax.div(x, _const(x, n)), lax.rem(x, _const(x, n))
    if x.dtype.kind != "i":
        return q, r
    neg = lax.lt(r, _const(r, 0))
    return (lax.select(neg, lax.sub(q, _const(q, 1)), q),
            lax.select(neg, lax.add(r, _const(r, n)), r))


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """Coordinate arrays -> flat indices into an array of shape `dims`."""
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: len(multi_index)={len(multi_index)} != "
                         f"len(dims)={len(dims)}")
    dims = tuple(_concrete_index(d, "ravel_multi_index: dims") for d in dims)
    check_arraylike("ravel_multi_index", *multi_index)
    idx = [to_array(i) for i in multi_index]
    if dtype is None:
        dtype, _ = dtypes.result_type((dtypes.default_int(), True),
                                      *((i.dtype, i.weak_type) for i in idx))
    else:
        dtype = canonical_dtype(dtype, "ravel_multi_index")
    if dtype.kind not in "iu":
        raise ValueError(f"dtype={dtype} is not an integer type.")
    if int(np.prod(dims)) - 1 > np.iinfo(dtype).max:
        raise ValueError(f"kiln.numpy.ravel_multi_index: dtype={dtype} not large enough to hold "
                         f"flattened index for dims={dims}. Use the dtype argument to pass a "
                         f"suitable dtype.")
    if any(i.dtype.kind not in "iu" for i in idx):
        raise TypeError("only int indices permitted")
    idx = _ravel_mode(idx, dims, mode)
    if order == "C":
        strides = [int(np.prod(dims[k + 1:])) for k in range(len(dims))]
    elif order == "F":
        strides = [int(np.prod(dims[:k])) for k in range(len(dims))]
    else:
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
    shape = broadcast_shapes(*(i.shape for i in idx)) if idx else ()
    result = _zeros(shape, dtype, False)
    for i, s in zip(idx, strides):
        term = lax.mul(broadcast_to(_as_type(i, dtype, False), shape), np.asarray(s, dtype))
        result = lax.add(result, term)
    return result


def _ravel_mode(idx, dims, mode):
    if mode == "raise":
        for i, d in zip(idx, dims):
            bad = _any_outside(i, d)
            if _is_traced(bad):
                raise TypeError("ravel_multi_index with mode='raise' needs concrete indices: "
                                "under kiln.jit use mode='wrap' or mode='clip'")
            if bool(bad):
                raise ValueError("invalid entry in coordinates array")
        return idx
    if mode == "clip":
        return [lax.clamp(_const(i, 0), i, _const(i, d - 1)) for i, d in zip(idx, dims)]
    if mode == "wrap":
        return [_floor_mod(i, d) for i, d in zip(idx, dims)]
    if mode == "ignore":
        return idx
    raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or 'ignore'.")
