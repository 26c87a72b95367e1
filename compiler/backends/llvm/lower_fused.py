"""A fused group of equations as one loop nest (`fusion`, and every elementwise, view, iota
and reduction equation lowered on its own as a group of one).

The group's *iteration space* is the shape its elementwise results have, or the operand shape
of its reductions. Inside the nest:
- group inputs and *views* of them are read in place through affine maps (buffers.View):
  `broadcast_in_dim`, `transpose`, `rev`, `slice`, `squeeze` and `reshape` build views and emit
  no code; rank-0 inputs are loaded once before the loops;
- elementwise equations are their scalar rules (lower_elementwise.py), so intermediates live
  in registers; `iota` is the loop index along its dimension;
- results of the iteration shape are stored at the contiguous offset;
- a reduction whose reduced axes include the innermost loop keeps a register accumulator
  across that loop (float additions and multiplications marked `reassoc`, the freedom XLA
  takes, so the accumulation vectorises), then stores it (or combines it into the output when
  outer axes are reduced as well); a float sum over a loop longer than a block runs in blocks
  whose totals add pairwise (pairwise.py). A reduction over outer axes only accumulates into
  its output in memory, which is initialised to the identity before the nest; a float16,
  float32 or complex64 sum adding many terms so accumulates in float64 (complex128) in the
  workspace instead, copied into the result after the nest (`wide_sums`).
Before emitting, the loops may be reordered (`loop_order`: a pure reduction of a permuted view
walks the operand in memory order), and `loops.collapse` drops unit axes and merges axes that
every affine map walks contiguously, so a chain of elementwise operations on contiguous arrays
is one flat loop.
A group that only computes elementwise on operands of one shape (`flat_size`) is one flat loop
whatever the shape; `lower_flat` emits it with a trip count given when it runs, so that one
kernel serves such groups of every size (codegen.py).
A nest costing at least PARALLEL_MIN_COST (iterations times the weight of the body, where
transcendental functions weigh more) is split across threads (outline.py,
parallel.py) along its outermost axis that no reduction reduces: each chunk replans the group
on the outlined function's pointers and runs the nest over its sub-range of that axis (a sum
over the leading axis splits the columns, so no two threads accumulate into one element). The
outputs of reductions that accumulate in memory are set to the identity before the split.
"""
import math

import numpy as np

from ...errors import CompileError
from ...ir.abstract import ShapedArray
from ...ir.ssa import Literal, Var
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_INPLACE, LLVM_SCALAR, LLVM_SCRATCH
from . import ltypes as T
from .buffers import Buffer, View, load, store
from .loops import collapse, contiguous_strides, emit_nest, affine_offset, counted_loop
from .lower_elementwise import max_value, min_value, convert
from . import lower_complex
from .outline import parallel_range
from . import pairwise

# A reduction's combines may be reassociated (vectorised), but keep signed zeros: with `nsz`
# LLVM may drop a sum's +0.0 start, and a sum of negative zeros must be +0.0 (XLA's, NumPy's).
REASSOC = ("reassoc",)
# Nests costing less than PARALLEL_MIN_COST (about a millisecond of work on one core) stay on
# the calling thread: this threshold was measured when each split started and joined its own
# threads (~20-50 us) and OpenBLAS's threads kept spinning after each product, where
# splitting the short kernels between products (an MLP step) lost more than it gained; the
# pool (pool.py) hands work over in a few microseconds. Costlier nests are split into blocks of at least
# CHUNK_MIN_COST. The cost of a nest is its iterations times the weight of its body: one per
# equation, TRANSCENDENTAL_WEIGHT for the functions that take tens of cycles per element.
PARALLEL_MIN_COST = 1 << 21
CHUNK_MIN_COST = 1 << 16
VECTOR_ALIGN = 64
TRANSCENDENTAL_WEIGHT = 8
TRANSCENDENTAL = frozenset({
    "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin",
    "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc",
    "erf_inv", "lgamma", "digamma", "pow", "cbrt", "igamma", "igammac", "bessel_i0e",
    "bessel_i1e", "random_gamma_grad"})


# ------------------------------------------------------------------------------ views

def _transpose(view, permutation):
    return View(view.buffer, view.offset, [view.strides[p] for p in permutation],
                [view.shape[p] for p in permutation])


def _broadcast_in_dim(view, shape, broadcast_dimensions):
    strides = [0] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        if view.shape[i] == shape[d]:
            strides[d] = view.strides[i]
    return View(view.buffer, view.offset, strides, shape)


def _rev(view, dimensions):
    offset, strides = view.offset, list(view.strides)
    for d in dimensions:
        offset += (view.shape[d] - 1) * strides[d] if view.shape[d] else 0
        strides[d] = -strides[d]
    return View(view.buffer, offset, strides, view.shape)


def _slice(view, start_indices, limit_indices, strides=None):
    steps = strides or (1,) * len(view.shape)
    offset = view.offset + sum(s * st for s, st in zip(start_indices, view.strides))
    shape = [-(-(lim - s) // k) for s, lim, k in zip(start_indices, limit_indices, steps)]
    return View(view.buffer, offset, [st * k for st, k in zip(view.strides, steps)], shape)


def _squeeze(view, dimensions):
    keep = [k for k in range(len(view.shape)) if k not in dimensions]
    return View(view.buffer, view.offset, [view.strides[k] for k in keep],
                [view.shape[k] for k in keep])


def _reshape(view, new_sizes, dimensions=None):
    if dimensions is not None:
        view = _transpose(view, dimensions)
    if _is_contiguous(view):
        return View(view.buffer, view.offset, contiguous_strides(new_sizes), new_sizes)
    big = [k for k, d in enumerate(view.shape) if d != 1]
    new_big = [k for k, d in enumerate(new_sizes) if d != 1]
    if [view.shape[k] for k in big] != [new_sizes[k] for k in new_big]:
        return None   # not a view: the fusion pass never fuses such a reshape
    strides = [0] * len(new_sizes)
    for k, j in zip(big, new_big):
        strides[j] = view.strides[k]
    return View(view.buffer, view.offset, strides, new_sizes)


def _is_contiguous(view):
    if 0 in view.shape:
        return True
    want = contiguous_strides(view.shape)
    return all(s == w for s, w, d in zip(view.strides, want, view.shape) if d != 1)


VIEWS = {"transpose": _transpose, "broadcast_in_dim": _broadcast_in_dim, "rev": _rev,
         "slice": _slice, "squeeze": _squeeze, "reshape": _reshape}


# ------------------------------------------------------------------------- reductions

def _identity(name, dtype, empty=False):
    """The value reduction `name` starts from; `empty`: its result over no elements, where
    that differs (complex max/min: lower_complex.FOLD_START)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c" and name in lower_complex.FOLD_START and not empty:
        return T.const(dtype, lower_complex.FOLD_START[name])
    inexact = dtype.kind in "fc"
    big = np.inf if inexact else (True if dtype.kind == "b" else np.iinfo(dtype).max)
    small = -np.inf if inexact else (False if dtype.kind == "b" else np.iinfo(dtype).min)
    value = {"reduce_sum": 0, "reduce_prod": 1, "reduce_max": small, "reduce_min": big,
             "reduce_and": -1 if dtype.kind in "iu" else True, "reduce_or": 0,
             "reduce_xor": 0}[name]
    return T.const(dtype, value)


def _combine(name, builder, acc, x, dtype):
    if dtype.kind == "c":
        return lower_complex.combine(name, builder, acc, x, REASSOC)
    is_float = dtype.kind == "f"
    if name == "reduce_sum":
        return builder.fadd(acc, x, flags=REASSOC) if is_float else builder.add(acc, x)
    if name == "reduce_prod":
        return builder.fmul(acc, x, flags=REASSOC) if is_float else builder.mul(acc, x)
    if name == "reduce_max":
        return max_value(builder, acc, x, dtype)
    if name == "reduce_min":
        return min_value(builder, acc, x, dtype)
    return {"reduce_and": builder.and_, "reduce_or": builder.or_,
            "reduce_xor": builder.xor}[name](acc, x)


REDUCTIONS = ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
              "reduce_or", "reduce_xor")
_NOT_ELEMENTWISE = frozenset(VIEWS) | frozenset(REDUCTIONS) | {"iota"}


class _Reduction:
    __slots__ = ("eqn", "buffer", "axes", "strides", "inner", "direct", "slot")

    def __init__(self, eqn, buffer):
        self.eqn = eqn
        self.buffer = buffer
        self.axes = set(eqn.params["axes"])
        shape = eqn.invars[0].aval.shape
        kept = contiguous_strides([d for k, d in enumerate(shape) if k not in self.axes])
        it = iter(kept)
        self.strides = tuple(0 if k in self.axes else next(it) for k in range(len(shape)))
        self.inner = self.direct = False   # set by the nest plan
        self.slot = None

    @property
    def dtype(self):
        """The accumulator's dtype: the result's, or the wider one of a wide accumulator."""
        return self.buffer.aval.dtype

    @property
    def operand_dtype(self):
        return self.eqn.invars[0].aval.dtype


# ------------------------------------------------------------------------------ groups

def lower_eqn(ctx, eqn, outs, ins):
    """An equation on its own: a group of one."""
    lower_group(ctx, [eqn], list(zip(eqn.invars, ins)), list(zip(eqn.outvars, outs)))


def lower_fusion(ctx, outs, ins, body):
    lower_group(ctx, body.eqns, list(zip(body.invars, ins)), list(zip(body.outvars, outs)))


def lower_group(ctx, eqns, inputs, outputs):
    """The nest of `eqns`; float sums that accumulate in memory accumulate in the workspace
    in the wider type (see wide_sums), copied into their results afterwards."""
    group = _Group(ctx, eqns, inputs, outputs)
    offset, wide = 0, []
    for eqn, carry in wide_sums(eqns) if ctx.scratch is not None else ():
        r = next(r for r in group.reductions if r.eqn is eqn)
        if not r.direct:
            at = ctx.builder.gep(ctx.scratch, [T.i64(offset)], inbounds=True, source_etype=T.I8)
            wide.append((Buffer(at, ShapedArray(r.buffer.aval.shape, carry)), r.buffer))
            group.replace_output(r, wide[-1][0])
        offset += _wide_bytes(eqn, carry)
    group.emit()
    for accumulator, result in wide:
        copy_converted(ctx.builder, accumulator, result)


# Float sums whose terms accumulate in memory (over leading axes: the innermost loop walks a
# kept axis, so each output element receives one term per outer iteration) add in the wider
# type, in a workspace array of the result's shape, when they add more than WIDE_MIN_TERMS terms
# each: a float32 accumulator adding n terms one by one errs by about n * 2^-24 (1e-2 for
# 10^6 rows), a float64 one by n * 2^-53. Sums along the innermost axis keep register
# accumulators (blocked and pairwise: pairwise.py) and need no workspace.
WIDE_MIN_TERMS = 64
WIDE_ACCUMULATOR = {np.dtype(t): np.dtype(w) for t, w in (
    ("float16", "float64"), ("float32", "float64"), ("complex64", "complex128"))}


def wide_sums(eqns):
    """(equation, wide dtype) of the sums in `eqns` that may accumulate in memory (a kept axis
    besides the reduced ones) more than WIDE_MIN_TERMS terms each: the workspace is reserved
    for them; they use it when the nest's plan accumulates them in memory."""
    out = []
    for eqn in eqns:
        if eqn.prim.name == "reduce_sum":
            shape = eqn.invars[0].aval.shape
            carry = wide_carry(eqn.outvars[0].aval,
                               math.prod(shape[a] for a in eqn.params["axes"]))
            if carry is not None:
                out.append((eqn, carry))
    return out


def wide_carry(result, terms):
    """The wide accumulator's dtype for a sum of `terms` terms per element into `result` (an
    aval), or None when it keeps its own type."""
    carry = WIDE_ACCUMULATOR.get(np.dtype(result.dtype))
    return carry if terms > WIDE_MIN_TERMS and result.size > 1 else None


def wide_bytes(result, carry):
    """Workspace bytes of a wide accumulator of `result`'s shape."""
    return -(-result.size * carry.itemsize // VECTOR_ALIGN) * VECTOR_ALIGN


def _wide_bytes(eqn, carry):
    return wide_bytes(eqn.outvars[0].aval, carry)


def scratch_bytes(eqn):
    """The LLVM_SCRATCH rule of a fusion or a reduction lowered on its own: its wide sums'
    accumulators."""
    eqns = eqn.params["body"].eqns if eqn.prim.name == "fusion" else [eqn]
    return sum(_wide_bytes(e, carry) for e, carry in wide_sums(eqns))


def copy_converted(builder, src, dst):
    """dst[:] = src[:] converted to dst's dtype (buffers of one shape)."""
    n = src.aval.size
    if n:
        counted_loop(builder, n, lambda b, i, acc: store(
            b, dst, i, convert(b, load(b, src, i), src.aval.dtype, dst.aval.dtype)) or [], (),
            "narrow")


def flat_size(eqn):
    """The element count n of an equation (a fusion or one elementwise equation) that only
    computes elementwise, on operands and results of one shape (rank-0 literals aside), and
    costs too little to be split across threads; None for any other equation. Its nest is one
    flat loop of n iterations whatever the shape, so one kernel taking n as an argument
    (`lower_flat`) serves every such equation of the same structure (codegen.py)."""
    body = eqn.params["body"] if eqn.prim.name == "fusion" else None
    eqns = [eqn] if body is None else body.eqns
    if any(e.prim.name in _NOT_ELEMENTWISE or e.prim not in LLVM_SCALAR
           for e in eqns):
        return None
    shape = eqn.outvars[0].aval.shape
    if any(isinstance(x, Var) and x.aval.shape != shape
           for e in [eqn] + eqns for x in e.invars + e.outvars):
        return None
    n = math.prod(shape)
    return n if n > 1 and n * weight(eqns) < PARALLEL_MIN_COST else None


def lower_flat(ctx, eqn, outs, ins, size):
    """`eqn` (for which `flat_size` is not None) as one loop over `size` (an i64 value)
    elements."""
    fn = eqn.params["body"] if eqn.prim.name == "fusion" else None
    eqns, invars, outvars = ([eqn], eqn.invars, eqn.outvars) if fn is None else \
        (fn.eqns, fn.invars, fn.outvars)
    _Group(ctx, eqns, list(zip(invars, ins)), list(zip(outvars, outs)), size).emit()


def weight(eqns):
    """The cost of one iteration of a nest computing `eqns` (see PARALLEL_MIN_COST)."""
    names = [e.prim.name for e in eqns if e.prim.name not in VIEWS]
    return max(1, sum(TRANSCENDENTAL_WEIGHT if n in TRANSCENDENTAL else 1 for n in names))


class _Group:
    """A group of equations lowered as one nest; `size`: an i64 value replacing the element
    count of a flat elementwise group (`lower_flat`)."""

    def __init__(self, ctx, eqns, inputs, outputs, size=None):
        self.ctx = ctx
        self.eqns = eqns
        self.size = size
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.views = {}          # Var -> View (inputs, and results of view equations)
        self.scalars = {}        # Var -> value loaded once before the loops
        for v, buf in inputs:
            if isinstance(v, Var):
                self.views[v] = buf.view()
        self.reductions = []
        out_buffers = {}
        for v, buf in outputs:
            out_buffers.setdefault(v, buf)
        for eqn in eqns:
            self.classify(eqn, out_buffers)
        self.space = self.iteration_space()
        self.shape = self.plan()

    def classify(self, eqn, out_buffers):
        name = eqn.prim.name
        if name in VIEWS:
            src = eqn.invars[0]
            if isinstance(src, Literal):
                operand = Buffer(None, src.aval, T.const(src.aval.dtype, src.value)).view()
            elif src in self.views:
                operand = self.views[src]
            else:
                raise CompileError(f"internal error: {name} of a value computed in the same "
                                   f"fused loop", eqn.info)
            view = VIEWS[name](operand, **eqn.params)
            if view is None:
                raise CompileError(f"internal error: {name} of a strided view in a fused loop",
                                   eqn.info)
            self.views[eqn.outvars[0]] = view
        elif name in REDUCTIONS:
            self.reductions.append(_Reduction(eqn, out_buffers[eqn.outvars[0]]))
        elif name != "iota" and eqn.prim not in LLVM_SCALAR:
            raise CompileError(f"the LLVM backend cannot fuse the primitive {name!r}",
                               eqn.info)

    def iteration_space(self):
        if self.reductions:
            return tuple(self.reductions[0].eqn.invars[0].aval.shape)
        computing = [e for e in self.eqns if e.prim.name not in VIEWS] or self.eqns
        for eqn in computing:
            for v in eqn.outvars:
                if v.aval.shape:
                    return tuple(v.aval.shape)
        return ()

    def replace_output(self, reduction, buffer):
        """Accumulate `reduction` in `buffer` (a wide accumulator) instead of its result."""
        old = reduction.buffer
        reduction.buffer = buffer
        self.outputs = [(v, buffer if buf is old else buf) for v, buf in self.outputs]

    # ------------------------------------------------------------------- planning
    def loaded(self):
        """Views read element by element (operands of the computing equations and stored
        results), each once, in order of first use."""
        used = [x for eqn in self.eqns if eqn.prim.name not in VIEWS for x in eqn.invars]
        used += [v for v, _ in self.outputs]
        out = []
        for v in used:
            if isinstance(v, Var) and v in self.views and v not in out:
                out.append(v)
        return out

    def plan(self):
        """Split the loaded views into per-element loads and rank-0 values, and collapse the
        iteration space; sets the (collapsed) strides of every access. The loop shape."""
        space = self.space
        loaded = self.loaded()
        self.loads = [v for v in loaded if space and tuple(self.views[v].shape) == space]
        self.preloads = [v for v in loaded if not self.views[v].shape]
        results = {r.eqn.outvars[0] for r in self.reductions}
        self.stores = [(v, buf) for v, buf in self.outputs if v not in results]
        iotas = [e for e in self.eqns if e.prim.name == "iota"]
        maps = ([self.views[v].strides for v in self.loads]
                + [contiguous_strides(space)] * len(self.stores)
                + [r.strides for r in self.reductions]
                + [_unit(space, e.params["dimension"]) for e in iotas])
        order = self.loop_order()
        shape, merged, red_axes = collapse(
            [space[k] for k in order], [[m[k] for k in order] for m in maps],
            [{order.index(a) for a in r.axes} for r in self.reductions])
        it = iter(merged)
        self.strides = {v: next(it) for v in self.loads}
        self.store_strides = [next(it) for _ in self.stores]
        for r, axes in zip(self.reductions, red_axes):
            r.strides = next(it)
            r.inner = bool(shape) and shape != (0,) and (len(shape) - 1) in axes
            r.direct = r.inner and axes == {len(shape) - 1}
        self.iota_strides = {e.outvars[0]: next(it) for e in iotas}
        return shape

    def loop_order(self):
        """The order of the loops over the iteration space: row-major, unless the group only
        reduces (no result of the iteration shape is stored) and reads its largest operand
        through a permuted view: then that operand's memory order, so that the innermost loop
        reads it contiguously (a reduction over a transposed array walks it row by row)."""
        order = list(range(len(self.space)))
        if self.stores or not self.loads:
            return order
        view = max((self.views[v] for v in self.loads), key=lambda w: w.buffer.aval.size)
        if 0 in view.strides:   # broadcast operands (dot_general): keep the planned order
            return order
        return sorted(order, key=lambda k: -abs(view.strides[k]))

    def emit(self):
        for r in self.reductions:
            if not r.direct:
                fill(self.ctx.builder, r.buffer,
                     _identity(r.eqn.prim.name, r.dtype, empty=self.shape == (0,)))
        if self.shape == (0,):
            return
        axis = None if self.size is not None else self.parallel_axis()
        if axis is None:
            self.emit_loops()
        else:
            self.emit_parallel(axis)

    def emit_loops(self, bounds=None):
        """The loop nest (over the sub-range `bounds` of an axis, in a parallel chunk)."""
        b = self.ctx.builder
        for v in self.preloads:
            view = self.views[v]
            self.scalars[v] = load(b, view.buffer, T.i64(view.offset))
        inner = [r for r in self.reductions if r.inner]
        for k, r in enumerate(inner):
            r.slot = k
        emit_nest(b, self.shape if self.size is None else (self.size,), self.body,
                  [_identity(r.eqn.prim.name, r.dtype) for r in inner],
                  self.after_inner if inner else None, bounds=bounds,
                  inner_loop=self.inner_loop(inner))

    @staticmethod
    def inner_loop(inner):
        """The innermost loop's emitter: in blocks with pairwise totals (pairwise.py) when it
        is longer than a block and carries a float sum, a plain counted loop otherwise."""
        sums = {r.slot for r in inner
                if r.eqn.prim.name == "reduce_sum" and r.dtype.kind in "fc"}

        def combine(builder, slot, a, b):
            return _combine(inner[slot].eqn.prim.name, builder, a, b, inner[slot].dtype)

        def emit(builder, count, body, inits, name):
            if not sums or not isinstance(count, int) or count <= pairwise.BLOCK:
                return counted_loop(builder, count, body, inits, name)
            return pairwise.blocked_loop(builder, count, body, inits, combine, sums, name)
        return emit

    # ------------------------------------------------------------------- threads
    def parallel_axis(self):
        """The loop axis to split across threads: the outermost one that no reduction reduces
        (so no two threads accumulate into one element), None for a cheap nest."""
        if math.prod(self.shape) * weight(self.eqns) < PARALLEL_MIN_COST:
            return None
        for k, d in enumerate(self.shape):
            if d > 1 and all(r.strides[k] for r in self.reductions):
                return k
        return None

    def emit_parallel(self, axis):
        """The nest outlined into chunks of `axis` (outline.py), each replanned on the
        chunk function's pointers."""
        buffers = [buf for _, buf in self.inputs + self.outputs if buf.const is None]
        pointers = list({id(buf.ptr): buf.ptr for buf in buffers}.values())
        per_step = math.prod(self.shape) // self.shape[axis] * weight(self.eqns)
        grain = -(-CHUNK_MIN_COST // per_step)
        if axis == len(self.shape) - 1:   # chunk boundaries on whole vectors
            grain = -(-grain // VECTOR_ALIGN) * VECTOR_ALIGN

        def chunk(ctx, pointer, lo, hi):
            def moved(pairs):
                return [(v, buf if buf.const is not None else Buffer(pointer(buf.ptr), buf.aval))
                        for v, buf in pairs]
            _Group(ctx, self.eqns, moved(self.inputs), moved(self.outputs)).emit_loops(
                {axis: (lo, hi)})
        parallel_range(self.ctx, pointers, self.shape[axis], grain, chunk)

    # ---------------------------------------------------------------------- code
    def body(self, builder, index, carried):
        values = {}

        def value(x):
            if isinstance(x, Literal):
                return T.const(x.aval.dtype, x.value)
            if x in self.scalars:
                return self.scalars[x]
            if x not in values:
                view = self.views[x]
                off = affine_offset(builder, view.offset, self.strides[x], index)
                values[x] = load(builder, view.buffer, off)
            return values[x]

        carried = list(carried)
        for eqn in self.eqns:
            name = eqn.prim.name
            if name in VIEWS:
                continue
            if name == "iota":
                out = eqn.outvars[0]
                pos = affine_offset(builder, 0, self.iota_strides[out], index)
                values[out] = convert(builder, pos, np.dtype(np.int64), out.aval.dtype)
            elif name in REDUCTIONS:
                self.reduce(builder, index, carried, eqn, value(eqn.invars[0]))
            else:
                rule = LLVM_SCALAR[eqn.prim]
                values[eqn.outvars[0]] = rule(self.ctx, builder,
                                              [value(x) for x in eqn.invars],
                                              [x.aval for x in eqn.invars],
                                              eqn.outvars[0].aval, **eqn.params)
        for (v, buf), strides in zip(self.stores, self.store_strides):
            store(builder, buf, affine_offset(builder, 0, strides, index), value(v))
        return carried

    def reduce(self, builder, index, carried, eqn, x):
        r = next(r for r in self.reductions if r.eqn is eqn)
        name = eqn.prim.name
        x = convert(builder, x, r.operand_dtype, r.dtype)
        if r.inner:
            carried[r.slot] = _combine(name, builder, carried[r.slot], x, r.dtype)
            return
        off = affine_offset(builder, 0, r.strides, index)
        store(builder, r.buffer, off, _combine(name, builder, load(builder, r.buffer, off),
                                                x, r.dtype))

    def after_inner(self, builder, outer_index, final):
        for r in self.reductions:
            if not r.inner:
                continue
            off = affine_offset(builder, 0, r.strides[:-1], outer_index)
            acc = final[r.slot]
            if not r.direct:
                acc = _combine(r.eqn.prim.name, builder, load(builder, r.buffer, off), acc,
                               r.dtype)
            store(builder, r.buffer, off, acc)


def _unit(shape, dimension):
    return tuple(1 if k == dimension else 0 for k in range(len(shape)))


def fill(builder, buffer, value):
    """buffer[:] = value."""
    n = buffer.aval.size
    if n == 1:
        store(builder, buffer, T.i64(0), value)
    elif n:
        counted_loop(builder, n, lambda b, i, acc: store(b, buffer, i, value) or [], (), "fill")


def in_place(eqn):
    """The `LLVM_INPLACE` rule of a fusion, or of an elementwise equation lowered on its own:
    (result j, operand i) pairs where operand i is read only element by element at the
    position result j is stored at (never through a view, no reduction in the group, every
    computed value of its shape) and has result j's shape and dtype. The nest loads a
    position's operands before it stores that position's results, so result j may be
    written over operand i (buffers.plan_storage picks at most one operand per result, and
    decides when)."""
    body = eqn.params["body"] if eqn.prim.name == "fusion" else None
    eqns, invars, outvars = ([eqn], eqn.invars, eqn.outvars) if body is None else \
        (body.eqns, body.invars, body.outvars)
    if any(e.prim.name in REDUCTIONS for e in eqns):
        return []
    viewed = {x for e in eqns if e.prim.name in VIEWS for x in e.invars}
    shapes = {v.aval.shape for e in eqns if e.prim.name not in VIEWS for v in e.outvars}
    return [(j, i) for i, v in enumerate(invars)
            if isinstance(v, Var) and v not in viewed and shapes == {v.aval.shape}
            for j, o in enumerate(outvars)
            if (o.aval.shape, o.aval.dtype) == (v.aval.shape, v.aval.dtype)]


def _register():
    names = list(VIEWS) + list(REDUCTIONS) + ["iota"]
    for name in names:
        LLVM[PRIMITIVES[name]] = _singleton
    LLVM[PRIMITIVES["fusion"]] = lower_fusion
    for name in ["fusion"] + list(REDUCTIONS):
        LLVM_SCRATCH[PRIMITIVES[name]] = scratch_bytes
    for prim in PRIMITIVES.values():
        if prim.name == "fusion" or (prim in LLVM_SCALAR and prim not in LLVM):
            LLVM_INPLACE[prim] = in_place


def _singleton(ctx, outs, ins, **params):
    lower_eqn(ctx, ctx.eqn, outs, ins)


_register()
