"""Window reductions and max/min pooling's derivatives as loop nests.

- reduce_window_sum/max/min: a loop over the result's elements; per element one pass over its
  window carrying the accumulator, which starts at the identity; an element of the window in
  the padding or in a hole of base dilation is the identity. The combination is the
  elementwise rule of add, max or min (lower_elementwise.py: JAX's NaN semantics), so every
  dtype those take works.
- select_and_gather_add / select_and_scatter_add: the same pass over a window finds its
  selected element (the first maximal one for "ge", minimal for "le": a later element replaces
  the current one only when `current >= new` (`<=`) is false, XLA's order), then reads the
  tangent there, or adds the cotangent there (into a zeroed result: windows overlap).

Windows of at most UNROLL elements are unrolled (each element's position is then a constant
offset from the window's corner), and every element's load reads a position clamped into the
operand, its value replaced by the identity when the position is padding: so the loop over
the innermost result axis is straight-line code over consecutive addresses, which LLVM
vectorises (NHWC pooling's channels). Larger windows loop. A nest costing at least
lower_fused.PARALLEL_MIN_COST is split across threads (outline.py) along its outermost axis
of more than one element; select_and_scatter_add only along an axis whose windows do not
overlap (window extent <= stride), so that no two threads add into one element, else it runs
on one thread.
"""
import itertools
import math

import llvmlite.ir as ir

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCALAR
from ...primitives.windows import identity
from . import ltypes as T
from .buffers import Buffer, load, store
from .loops import affine_offset, contiguous_strides, counted_loop, emit_nest, unravel
from .lower_fused import CHUNK_MIN_COST, PARALLEL_MIN_COST, fill
from .outline import parallel_range

_COMBINE = {"sum": "add", "max": "max", "min": "min"}


def window_offset(b, out_index, kidx, strides, wdil, lows, base, shape, elem_strides, off,
                  clamp=False):
    """(valid, off + element offset) of the window element at `kidx` (i64 values) of the
    window at `out_index`: position out * stride + k * window dilation - low padding, valid
    when inside the base-dilated operand and not in a hole of its dilation (lower_conv.py's
    gather uses it too, with lhs dilation as the base dilation). With `clamp`, the offset is
    of the position clamped into the operand, so that it can always be loaded."""
    valid = ir.Constant(T.I1, 1)
    for d in range(len(kidx)):
        pos = b.sub(b.add(b.mul(out_index[d], T.i64(strides[d])), b.mul(kidx[d], T.i64(wdil[d]))),
                    T.i64(lows[d]))
        valid = b.and_(valid, b.icmp_signed(">=", pos, T.i64(0)))
        if base[d] > 1:
            valid = b.and_(valid, b.icmp_signed("==", b.srem(pos, T.i64(base[d])), T.i64(0)))
            pos = b.sdiv(pos, T.i64(base[d]))
        valid = b.and_(valid, b.icmp_signed("<", pos, T.i64(shape[d])))
        if clamp:
            pos = b.select(b.icmp_signed("<", pos, T.i64(0)), T.i64(0), pos)
            last = T.i64(shape[d] - 1)
            pos = b.select(b.icmp_signed(">", pos, last), last, pos)
        off = b.add(off, b.mul(pos, T.i64(elem_strides[d])))
    return valid, off


UNROLL = 32   # windows of at most this many elements are unrolled (module docstring)
_WEIGHT = 4   # the cost of one window element, in lower_fused's units (a load, a compare,
#               a select and the position's arithmetic)


class _Geometry:
    def __init__(self, shape, window_dimensions, window_strides, padding, base_dilation=None,
                 window_dilation=None):
        n = len(shape)
        self.window = list(window_dimensions)
        self.strides = list(window_strides)
        self.wdil = list(window_dilation or (1,) * n)
        self.args = (window_strides, self.wdil, [lo for lo, _ in padding],
                     base_dilation or (1,) * n, shape, contiguous_strides(shape))

    def fold(self, b, out_index, step, inits):
        """`step(b, valid, offset, carried) -> carried` over the window's elements in order
        (`offset` clamped into the operand), unrolled for small windows."""
        def position(kidx):
            return window_offset(b, out_index, kidx, *self.args, T.i64(0), clamp=True)
        if math.prod(self.window) <= UNROLL:
            carried = list(inits)
            for kidx in itertools.product(*(range(w) for w in self.window)):
                carried = step(b, *position([T.i64(k) for k in kidx]), carried)
            return carried
        return counted_loop(b, math.prod(self.window), lambda b, k, acc: step(
            b, *position(unravel(b, k, self.window)), acc), inits, "w")

    def tiles(self, out_shape):
        """Whether the windows of a result of `out_shape` do not overlap and none reaches
        into the padding or a hole: every element of every window is an operand element,
        each in one window."""
        strides, wdil, lows, base, shape, _ = self.args
        return all(self.disjoint(d) and lows[d] == 0 and
                   base[d] == 1 and (o - 1) * strides[d] + (w - 1) * wdil[d] < shape[d]
                   for d, (o, w) in enumerate(zip(out_shape, self.window)))

    def disjoint(self, d):
        """Whether the windows along axis `d` do not overlap."""
        return (self.window[d] - 1) * self.wdil[d] + 1 <= self.strides[d]


def _over(ctx, shape, buffers, element, cost, split_ok=lambda d: True):
    """`element(b, index, buffers)` for every index of `shape`, split across threads along
    the outermost axis of more than one element that `split_ok` allows when the nest costs
    at least PARALLEL_MIN_COST (`buffers`: the Buffers it reads and writes, moved to the
    threads' function)."""
    axis = next((d for d, n in enumerate(shape) if n > 1 and split_ok(d)), None)
    if axis is None or math.prod(shape) * cost < PARALLEL_MIN_COST:
        emit_nest(ctx.builder, shape, lambda b, index, c: element(b, index, buffers) or c,
                  name="o")
        return
    pointers = list({id(buf.ptr): buf.ptr for buf in buffers}.values())
    per_step = math.prod(shape) // shape[axis] * cost
    grain = -(-CHUNK_MIN_COST // per_step)

    def chunk(cctx, pointer, lo, hi):
        moved = [Buffer(pointer(buf.ptr), buf.aval) for buf in buffers]
        emit_nest(cctx.builder, shape, lambda b, index, c: element(b, index, moved) or c,
                  name="o", bounds={axis: (lo, hi)})
    parallel_range(ctx, pointers, shape[axis], grain, chunk)


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

        def element(b, index, bufs):
            xb, ob = bufs

            def step(b, valid, off, acc):
                v = b.select(valid, load(b, xb, off), start)
                return [combine(ctx, b, [acc[0], v], [x.aval, x.aval], out.aval)]
            total = geo.fold(b, index, step, [start])[0] if x.aval.size else start
            store(b, ob, affine_offset(b, 0, ostrides, index), total)
        _over(ctx, out.aval.shape, [x, out], element, _WEIGHT * math.prod(geo.window))
    return rule


def _replaces(b, dtype, select_prim, best, v):
    """Whether `v` replaces the current selection `best`: not (best >= v) (or <= for "le")."""
    if T.is_float(dtype):
        return b.fcmp_unordered("<" if select_prim == "ge" else ">", best, v)
    op = "<" if select_prim == "ge" else ">"
    return (b.icmp_signed if T.is_signed(dtype) else b.icmp_unsigned)(op, best, v)


def _select(b, geo, operand, index, select_prim):
    """(found, offset) of the selected element of the window at `index` of `operand` (a
    Buffer holding at least one element)."""
    dtype = operand.aval.dtype

    def step(b, valid, off, carried):
        found, best, at = carried
        v = load(b, operand, off)
        take = b.and_(valid, b.or_(b.not_(found), _replaces(b, dtype, select_prim, best, v)))
        return [b.or_(found, take), b.select(take, v, best), b.select(take, off, at)]
    inits = [ir.Constant(T.I1, 0), T.const(dtype, 0), T.i64(0)]
    found, _, at = geo.fold(b, index, step, inits)
    return found, at


def _gather(ctx, outs, ins, *, select_prim, **params):
    tangents, operand = ins
    out = outs[0]
    if out.aval.size == 0:
        return
    zero = T.const(out.aval.dtype, 0)
    if operand.aval.size == 0:   # every window is padding
        fill(ctx.builder, out, zero)
        return
    geo = _Geometry(operand.aval.shape, **params)
    ostrides = contiguous_strides(out.aval.shape)

    def element(b, index, bufs):
        tb, xb, ob = bufs
        found, at = _select(b, geo, xb, index, select_prim)
        value = b.select(found, load(b, tb, at), zero)
        store(b, ob, affine_offset(b, 0, ostrides, index), value)
    _over(ctx, out.aval.shape, [tangents, operand, out], element,
          _WEIGHT * math.prod(geo.window))


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

    tiled = geo.tiles(source.aval.shape)

    def element(b, index, bufs):
        sb, xb, ob = bufs
        if tiled:   # each operand element in one window, every window inside: plain stores
            src = load(b, sb, affine_offset(b, 0, sstrides, index))
            _, at = _select(b, geo, xb, index, select_prim)
            zero = T.const(dtype, 0)
            geo.fold(b, index, lambda b, valid, off, c: store(
                b, ob, off, b.select(b.icmp_signed("==", off, at), src, zero)) or c, [])
            return
        found, at = _select(b, geo, xb, index, select_prim)
        with b.if_then(found):
            total = add(ctx, b, [load(b, ob, at), load(b, sb, affine_offset(b, 0, sstrides,
                                                                               index))],
                        [out.aval, source.aval], out.aval)
            store(b, ob, at, total)
    _over(ctx, source.aval.shape, [source, operand, out], element,
          _WEIGHT * math.prod(geo.window), geo.disjoint)


for _kind in ("sum", "max", "min"):
    LLVM[PRIMITIVES[f"reduce_window_{_kind}"]] = _reduce_rule(_kind)
LLVM[PRIMITIVES["select_and_gather_add"]] = _gather
LLVM[PRIMITIVES["select_and_scatter_add"]] = _scatter
