"""Window reductions and max/min pooling's derivatives as loop nests.

- reduce_window_sum/max/min: a loop over the result's elements; per element one loop over its
  window (flattened, unravelled) carrying the accumulator, which starts at the identity; an
  element of the window in the padding or in a hole of base dilation is the identity (its
  load is from offset 0 and discarded). The combination is the elementwise rule of add, max or
  min (lower_elementwise.py: JAX's NaN semantics), so every dtype those take works.
- select_and_gather_add / select_and_scatter_add: the same loop over a window finds its
  selected element (the first maximal one for "ge", minimal for "le": a later element replaces
  the current one only when `current >= new` (`<=`) is false, XLA's order), then reads the
  tangent there, or adds the cotangent there (into a zeroed result, serially: windows overlap).
"""
import math

import llvmlite.ir as ir

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCALAR
from ...primitives.windows import identity
from . import ltypes as T
from .buffers import load, store
from .loops import affine_offset, contiguous_strides, counted_loop, emit_nest, unravel
from .lower_fused import fill

_COMBINE = {"sum": "add", "max": "max", "min": "min"}


def window_offset(b, out_index, kidx, strides, wdil, lows, base, shape, elem_strides, off):
    """(valid, off + element offset) of the window element at `kidx` (i64 values) of the
    window at `out_index`: position out * stride + k * window dilation - low padding, valid
    when inside the base-dilated operand and not in a hole of its dilation (lower_conv.py's
    gather uses it too, with lhs dilation as the base dilation)."""
    valid = ir.Constant(T.I1, 1)
    for d in range(len(kidx)):
        pos = b.sub(b.add(b.mul(out_index[d], T.i64(strides[d])), b.mul(kidx[d], T.i64(wdil[d]))),
                    T.i64(lows[d]))
        valid = b.and_(valid, b.icmp_signed(">=", pos, T.i64(0)))
        if base[d] > 1:
            valid = b.and_(valid, b.icmp_signed("==", b.srem(pos, T.i64(base[d])), T.i64(0)))
            pos = b.sdiv(pos, T.i64(base[d]))
        valid = b.and_(valid, b.icmp_signed("<", pos, T.i64(shape[d])))
        off = b.add(off, b.mul(pos, T.i64(elem_strides[d])))
    return valid, off


class _Geometry:
    def __init__(self, shape, window_dimensions, window_strides, padding, base_dilation=None,
                 window_dilation=None):
        n = len(shape)
        self.window = list(window_dimensions)
        self.args = (window_strides, window_dilation or (1,) * n, [lo for lo, _ in padding],
                     base_dilation or (1,) * n, shape, contiguous_strides(shape))

    def position(self, b, out_index, k):
        """(valid, element offset) of window element `k` (flat) of the window at `out_index`;
        offset 0 where not valid."""
        valid, off = window_offset(b, out_index, unravel(b, k, self.window), *self.args,
                                   T.i64(0))
        return valid, b.select(valid, off, T.i64(0))


def _reduce_rule(kind):
    def rule(ctx, outs, ins, **params):
        x, out = ins[0], outs[0]
        dtype = out.aval.dtype
        if out.aval.size == 0:
            return
        if not x.aval.shape:   # no axis: one window, holding the value itself
            store(ctx.builder, out, T.i64(0), load(ctx.builder, x, T.i64(0)))
            return
        geo = _Geometry(x.aval.shape, **params)
        start = T.const(dtype, identity(kind, dtype))
        combine = LLVM_SCALAR[PRIMITIVES[_COMBINE[kind]]]
        ostrides = contiguous_strides(out.aval.shape)
        size = math.prod(geo.window)

        def element(b, index, carried):
            def step(b, k, acc):
                valid, off = geo.position(b, index, k)
                v = b.select(valid, load(b, x, off), start)
                return [combine(ctx, b, [acc[0], v], [x.aval, x.aval], out.aval)]
            total = counted_loop(b, size, step, [start], "w")[0] if size and x.aval.size else start
            store(b, out, affine_offset(b, 0, ostrides, index), total)
            return carried
        emit_nest(ctx.builder, out.aval.shape, element, name="o")
    return rule


def _replaces(b, dtype, select_prim, best, v):
    """Whether `v` replaces the current selection `best`: not (best >= v) (or <= for "le")."""
    if T.is_float(dtype):
        return b.fcmp_unordered("<" if select_prim == "ge" else ">", best, v)
    op = "<" if select_prim == "ge" else ">"
    return (b.icmp_signed if T.is_signed(dtype) else b.icmp_unsigned)(op, best, v)


def _select(b, geo, operand, index, select_prim):
    """(found, offset) of the selected element of the window at `index`."""
    dtype = operand.aval.dtype

    def step(b, k, carried):
        found, best, at = carried
        valid, off = geo.position(b, index, k)
        v = load(b, operand, off)
        take = b.and_(valid, b.or_(b.not_(found), _replaces(b, dtype, select_prim, best, v)))
        return [b.or_(found, take), b.select(take, v, best), b.select(take, off, at)]
    inits = [ir.Constant(T.I1, 0), T.const(dtype, 0), T.i64(0)]
    found, _, at = counted_loop(b, math.prod(geo.window), step, inits, "w")
    return found, at


def _gather(ctx, outs, ins, *, select_prim, **params):
    tangents, operand = ins
    out = outs[0]
    if out.aval.size == 0:
        return
    geo = _Geometry(operand.aval.shape, **params)
    ostrides = contiguous_strides(out.aval.shape)
    zero = T.const(out.aval.dtype, 0)

    def element(b, index, carried):
        found, at = _select(b, geo, operand, index, select_prim)
        value = b.select(found, load(b, tangents, at), zero)
        store(b, out, affine_offset(b, 0, ostrides, index), value)
        return carried
    emit_nest(ctx.builder, out.aval.shape, element, name="o")


def _scatter(ctx, outs, ins, *, select_prim, **params):
    source, operand = ins
    out = outs[0]
    dtype = out.aval.dtype
    fill(ctx.builder, out, T.const(dtype, 0))
    if source.aval.size == 0 or out.aval.size == 0:
        return
    geo = _Geometry(operand.aval.shape, **params)
    sstrides = contiguous_strides(source.aval.shape)
    add = LLVM_SCALAR[PRIMITIVES["add"]]

    def element(b, index, carried):
        found, at = _select(b, geo, operand, index, select_prim)
        with b.if_then(found):
            total = add(ctx, b, [load(b, out, at), load(b, source, affine_offset(b, 0, sstrides,
                                                                                 index))],
                        [out.aval, source.aval], out.aval)
            store(b, out, at, total)
        return carried
    emit_nest(ctx.builder, source.aval.shape, element, name="s")


for _kind in ("sum", "max", "min"):
    LLVM[PRIMITIVES[f"reduce_window_{_kind}"]] = _reduce_rule(_kind)
LLVM[PRIMITIVES["select_and_gather_add"]] = _gather
LLVM[PRIMITIVES["select_and_scatter_add"]] = _scatter
