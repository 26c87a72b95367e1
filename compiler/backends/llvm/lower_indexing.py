"""Lowerings of the indexing primitives: dynamic_slice, dynamic_update_slice, gather and the
scatter family (scatter, scatter_add, scatter_mul, scatter_min, scatter_max).

Semantics are the reference implementations' (compiler/primitives/indexing.py), which are
XLA's:
- dynamic slices clamp each start index into [0, dim - size] (exactly, for every index dtype:
  unsigned starts compare as unsigned);
- a gather or scatter index is read as int64 (the reference's `astype(int64)`: signed indices
  sign-extend, unsigned ones zero-extend, uint64 wraps) and placed at its operand dimension
  (`start_index_map` / `scatter_dims_to_operand_dims`; other dimensions start at 0);
- gather clamps every window start in modes "clip" and "promise_in_bounds"; in mode "fill" a
  window that does not fit unclamped is `fill_value` (default: NaN, True, the integer minimum
  or, unsigned, maximum);
- a scatter in mode "clip" clamps its window starts, in "drop" and "promise_in_bounds" it skips
  windows that do not fit; updates are applied one window after the other in the order of the
  indices' batch positions (row-major), each window in row-major order, so repeated indices
  overwrite in order (the last one wins) or combine in order (add, mul; bools: or, and; min and
  max propagate NaN and keep the update of two equal zeros), exactly like the reference's
  NumPy `ufunc.at`.

Code shape: one loop nest over the indices' batch positions; in it the index vector is loaded,
converted and clamped, giving the window's base offset in the operand; an inner nest over the
window (affine views of operand, output and updates, collapsed to flat loops where the window
is contiguous) copies or combines. A scatter's (and a dynamic_update_slice's) output starts as
a copy of its operand, or is the operand itself, updated in place, when nothing reads the
operand afterwards (its `LLVM_INPLACE` rule, buffers.plan_storage).
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_INPLACE
from ...primitives.indexing import default_fill
from . import ltypes as T
from .buffers import Buffer, View, load, store, element_pointer
from .calls import intrinsic
from .loops import collapse, emit_nest, affine_offset, contiguous_strides
from .lower_elementwise import convert, max_value, min_value
from . import lower_complex
from .lower_structural import copy_nest

I64 = np.dtype(np.int64)


# ------------------------------------------------------------------------------ helpers

def at_offset(builder, buffer, offset):
    """`buffer` moved by `offset` elements (an i64 value): the base of a window."""
    if buffer.const is not None:
        return buffer
    return Buffer(element_pointer(builder, buffer, offset), buffer.aval)


def _nest(builder, shape, views, body):
    """`body(builder, offsets)` for every index of `shape`, with the element offsets of each
    View in `views` (the nest collapsed to the fewest loops)."""
    space, maps, _ = collapse(shape, [v.strides for v in views])
    if space == (0,):
        return

    def inner(b, index, carried):
        body(b, [affine_offset(b, v.offset, m, index) for v, m in zip(views, maps)])
        return carried
    emit_nest(builder, space, inner)


def _fill_view(builder, view, value):
    _nest(builder, view.shape, [view], lambda b, offs: store(b, view.buffer, offs[0], value))


def _index_i64(builder, value, dtype):
    """An index element as int64, as the reference's `astype(np.int64)`."""
    return convert(builder, value, dtype, I64)


def _base_offset(builder, starts, strides):
    """sum(start_d * stride_d) for i64 start values."""
    total = T.i64(0)
    for s, stride in zip(starts, strides):
        if stride:
            total = builder.add(total, builder.mul(s, T.i64(stride), flags=("nsw",)),
                                flags=("nsw",))
    return total


def _start_from(builder, x, out):
    """The result of an update starts as a copy of its operand, unless it is computed in
    place (buffers.plan_storage: the operand dies here, and codegen hands the rule one Buffer
    for both)."""
    if x is not out:
        copy_nest(builder, x.aval.shape, x.view(), out.view())


def _update_in_place(eqn):
    """The `LLVM_INPLACE` rule: the result of an update may take its operand's storage."""
    return [(0, 0)]


# ------------------------------------------------------------------------- dynamic slices

def _clamped_start(builder, start, dtype, limit):
    """A dynamic-slice start clamped into [0, limit] (exactly, whatever its integer type)."""
    if np.dtype(dtype).kind == "u":
        wide = convert(builder, start, dtype, np.dtype(np.uint64))
        return intrinsic(builder, "umin", [wide, T.i64(limit)])
    wide = convert(builder, start, dtype, I64)
    return intrinsic(builder, "smin", [intrinsic(builder, "smax", [wide, T.i64(0)]),
                                       T.i64(limit)])


def _slice_base(builder, operand_shape, sizes, starts):
    """The element offset (i64) of the clamped window `sizes` of a row-major operand."""
    b = builder
    clamped = [_clamped_start(b, load(b, s, T.i64(0)), s.aval.dtype, d - z)
               for s, d, z in zip(starts, operand_shape, sizes)]
    return _base_offset(b, clamped, contiguous_strides(operand_shape))


def _dynamic_slice(ctx, outs, ins, *, slice_sizes):
    (out, (x, *starts)), b = (outs[0], ins), ctx.builder
    if out.aval.size == 0:
        return
    base = _slice_base(b, x.aval.shape, slice_sizes, starts)
    src = View(at_offset(b, x, base), 0, contiguous_strides(x.aval.shape), slice_sizes)
    copy_nest(b, slice_sizes, src, out.view())


def _dynamic_update_slice(ctx, outs, ins):
    (out, (x, update, *starts)), b = (outs[0], ins), ctx.builder
    _start_from(b, x, out)
    shape = update.aval.shape
    if update.aval.size == 0:
        return
    base = _slice_base(b, x.aval.shape, shape, starts)
    dst = View(at_offset(b, out, base), 0, contiguous_strides(x.aval.shape), shape)
    copy_nest(b, shape, update.view(), dst)


# -------------------------------------------------------------------------------- windows

class _Windows:
    """The windows a gather or scatter addresses: one per batch position of `indices` (all
    its axes but the last, the index vector), in an operand of `operand_shape`; `window[d]` is
    the window's size along operand dimension `d`; index component k is the start along
    operand dimension `index_map[k]`."""

    def __init__(self, indices, index_map, operand_shape, window):
        self.indices = indices
        self.index_map = index_map
        self.operand_shape = operand_shape
        self.window = window
        self.batch_shape = indices.aval.shape[:-1]
        self.index_strides = contiguous_strides(indices.aval.shape)

    def starts(self, builder, batch_index):
        """(clamped i64 starts, one per operand dimension; i1: the window fits unclamped)."""
        b = builder
        row = affine_offset(b, 0, self.index_strides[:-1], batch_index)
        raw = {}
        for k, d in enumerate(self.index_map):   # a repeated dimension: the last one counts
            offset = b.add(row, T.i64(k)) if k else row
            raw[d] = _index_i64(b, load(b, self.indices, offset), self.indices.aval.dtype)
        starts, fits = [], T.I1(1)
        for d, (n, z) in enumerate(zip(self.operand_shape, self.window)):
            if d not in raw:
                starts.append(T.i64(0))
                continue
            s, limit = raw[d], T.i64(max(n - z, 0))
            inside = b.and_(b.icmp_signed(">=", s, T.i64(0)), b.icmp_signed("<=", s, limit))
            fits = b.and_(fits, inside)
            starts.append(intrinsic(b, "smin", [intrinsic(b, "smax", [s, T.i64(0)]), limit]))
        return starts, fits


def _positions(rank, window_dims):
    """The axes of an array of `rank` axes that are not window axes (its batch axes)."""
    return [i for i in range(rank) if i not in window_dims]


# --------------------------------------------------------------------------------- gather

def _fill_constant(dtype, fill_value):
    fill = default_fill(dtype) if fill_value is None else fill_value
    return T.const(dtype, np.asarray(fill, dtype))


def _gather(ctx, outs, ins, *, dimension_numbers, slice_sizes, mode="clip", fill_value=None):
    (out, (x, indices)), b, dn = (outs[0], ins), ctx.builder, dimension_numbers
    if out.aval.size == 0:
        return
    windows = _Windows(indices, dn.start_index_map, x.aval.shape, slice_sizes)
    window_dims = [d for d in range(x.aval.ndim) if d not in dn.collapsed_slice_dims]
    shape = [slice_sizes[d] for d in window_dims]
    x_strides = contiguous_strides(x.aval.shape)
    out_strides = contiguous_strides(out.aval.shape)
    src_strides = [x_strides[d] for d in window_dims]
    dst_strides = [out_strides[p] for p in dn.offset_dims]
    batch_strides = [out_strides[p] for p in _positions(out.aval.ndim, dn.offset_dims)]
    fill = _fill_constant(x.aval.dtype, fill_value) if mode == "fill" else None

    def body(b, batch_index, carried):
        starts, fits = windows.starts(b, batch_index)
        src = View(at_offset(b, x, _base_offset(b, starts, x_strides)), 0, src_strides, shape)
        dst = View(at_offset(b, out, affine_offset(b, 0, batch_strides, batch_index)), 0,
                   dst_strides, shape)
        if fill is None:
            copy_nest(b, shape, src, dst)
            return carried
        with b.if_else(fits) as (inside, outside):
            with inside:
                copy_nest(b, shape, src, dst)
            with outside:
                _fill_view(b, dst, fill)
        return carried
    emit_nest(b, windows.batch_shape, body, name="g")


# -------------------------------------------------------------------------------- scatter

def _add(b, old, new, dtype):
    """The reference's np.add.at: logical or on bools."""
    if dtype.kind == "b":
        return b.or_(old, new)
    if dtype.kind == "c":
        return lower_complex.add(b, old, new)
    return b.fadd(old, new) if dtype.kind == "f" else b.add(old, new)


def _mul(b, old, new, dtype):
    """The reference's np.multiply.at: logical and on bools."""
    if dtype.kind == "b":
        return b.and_(old, new)
    if dtype.kind == "c":
        return lower_complex.mul(b, old, new)
    return b.fmul(old, new) if dtype.kind == "f" else b.mul(old, new)


# name -> combine(builder, old value, update value, dtype) (None: the update replaces it);
# min/max as XLA's (NaN wins, -0.0 below 0.0)
_COMBINE = {"scatter": None, "scatter_add": _add, "scatter_mul": _mul,
            "scatter_min": min_value, "scatter_max": max_value}


def _scatter_for(name):
    combine = _COMBINE[name]

    def rule(ctx, outs, ins, *, dimension_numbers, mode="drop"):
        (out, (x, indices, updates)), b, dn = (outs[0], ins), ctx.builder, dimension_numbers
        _start_from(b, x, out)
        if updates.aval.size == 0 or x.aval.size == 0:   # (clip: windows of 1 in a 0)
            return
        u_shape, dtype = updates.aval.shape, x.aval.dtype
        window_dims = [d for d in range(x.aval.ndim) if d not in dn.inserted_window_dims]
        sizes = dict(zip(window_dims, (u_shape[u] for u in dn.update_window_dims)))
        window = [sizes.get(d, 1) for d in range(x.aval.ndim)]
        windows = _Windows(indices, dn.scatter_dims_to_operand_dims, x.aval.shape, window)
        shape = [window[d] for d in window_dims]
        x_strides = contiguous_strides(x.aval.shape)
        u_strides = contiguous_strides(u_shape)
        dst_strides = [x_strides[d] for d in window_dims]
        src_strides = [u_strides[u] for u in dn.update_window_dims]
        batch_strides = [u_strides[p] for p in _positions(len(u_shape), dn.update_window_dims)]

        def apply(b, dst, src):
            def element(b2, offsets):
                new = load(b2, src.buffer, offsets[1])
                if combine is not None:
                    new = combine(b2, load(b2, dst.buffer, offsets[0]), new, dtype)
                store(b2, dst.buffer, offsets[0], new)
            _nest(b, shape, [dst, src], element)

        def body(b, batch_index, carried):
            starts, fits = windows.starts(b, batch_index)
            dst = View(at_offset(b, out, _base_offset(b, starts, x_strides)), 0, dst_strides, shape)
            src = View(at_offset(b, updates, affine_offset(b, 0, batch_strides, batch_index)), 0,
                       src_strides, shape)
            if mode == "clip":
                apply(b, dst, src)
            else:
                with b.if_then(fits):
                    apply(b, dst, src)
            return carried
        emit_nest(b, windows.batch_shape, body, name="s")
    rule.__name__ = f"_{name}"
    return rule


LLVM[PRIMITIVES["dynamic_slice"]] = _dynamic_slice
LLVM[PRIMITIVES["dynamic_update_slice"]] = _dynamic_update_slice
LLVM_INPLACE[PRIMITIVES["dynamic_update_slice"]] = _update_in_place
LLVM[PRIMITIVES["gather"]] = _gather
for _name in _COMBINE:
    LLVM[PRIMITIVES[_name]] = _scatter_for(_name)
    LLVM_INPLACE[PRIMITIVES[_name]] = _update_in_place
