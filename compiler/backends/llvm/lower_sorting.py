"""Lowering of `sort`: a stable bottom-up merge sort of every row along `dimension`.

Semantics are the reference's (compiler/primitives/sorting.py): the first `num_keys` operands
are keys compared lexicographically, every operand is permuted the same way, and the sort is
stable whatever `is_stable` says (the reference's always is). Floats order -0.0 equal to 0.0
(their order is kept) and every NaN equal to every other NaN, after all numbers; signed and
unsigned integers compare as such, False before True.

Each row (the elements along `dimension` at one position of the other axes) is copied, all
operands side by side, into scratch arrays A (one per operand) of the row's length n, then
merged in ceil(log2 n) passes of doubling run width, alternating between A and a second set B.
A merge is branch-free (a select picks the left or right record; of equal ones, the left one
goes first, hence stability) and fills its output from both ends at once (two independent
dependence chains); it moves whole records, so no operand is read through an index
permutation. The sorted row is copied out from whichever set the last pass wrote. The scratch
space (2 n elements per operand) comes from the workspace: the primitive's
Its `LLVM_SCRATCH` rule tells the storage planner how many bytes (buffers.plan_storage).
"""
import numpy as np

from ...ir.abstract import ShapedArray
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from . import ltypes as T
from .buffers import Buffer, View, load, store, ALIGN
from .calls import intrinsic
from .loops import counted_loop, emit_nest, affine_offset, contiguous_strides
from .lower_indexing import at_offset
from .lower_structural import copy_nest
from . import lower_complex


def _region(n, dtype):
    """Bytes of one operand's scratch (its A and B arrays), 64-byte aligned."""
    size = 2 * n * np.dtype(dtype).itemsize
    return -(-size // ALIGN) * ALIGN


def _scratch_bytes(eqn):
    n = eqn.params["dimension"]
    length = eqn.invars[0].aval.shape[n]
    if length <= 1:
        return 0
    return sum(_region(length, x.aval.dtype) for x in eqn.invars)


# ------------------------------------------------------------------------------ order

def _less(b, x, y, dtype):
    """x < y in the sort's order (i1); complex numbers by (real, imaginary) part."""
    kind = dtype.kind
    if kind == "c":
        part = lower_complex.part_dtype(dtype)
        return _lex_less(b, lower_complex.parts(b, x), lower_complex.parts(b, y), [part] * 2)
    if kind == "f":   # NaNs last: y is NaN and x is not
        nan_after = b.and_(b.fcmp_ordered("uno", y, y), b.fcmp_ordered("ord", x, x))
        return b.or_(b.fcmp_ordered("<", x, y), nan_after)
    return (b.icmp_signed if kind == "i" else b.icmp_unsigned)("<", x, y)


def _lex_less(b, xs, ys, dtypes):
    """The lexicographic order of key tuples: x0 < y0, or neither is less and the rest is."""
    result = _less(b, xs[-1], ys[-1], dtypes[-1])
    for x, y, dt in reversed(list(zip(xs[:-1], ys[:-1], dtypes[:-1]))):
        greater = _less(b, y, x, dt)
        result = b.or_(_less(b, x, y, dt), b.and_(b.not_(greater), result))
    return result


# ---------------------------------------------------------------------------- lowering

class _RowSort:
    """Merge sort of one row of every operand (see the module docstring)."""

    def __init__(self, ctx, outs, ins, dimension, num_keys):
        shape = ins[0].aval.shape
        self.b = ctx.builder
        self.outs, self.ins = outs, ins
        self.n = shape[dimension]
        self.num_keys = num_keys
        self.dtypes = [x.aval.dtype for x in ins]
        self.key_dtypes = self.dtypes[:num_keys]
        strides = contiguous_strides(shape)
        self.stride = strides[dimension]
        self.outer_shape = [d for k, d in enumerate(shape) if k != dimension]
        self.outer_strides = [s for k, s in enumerate(strides) if k != dimension]
        self.a, self.b_ = self._scratch(ctx.scratch)

    def _scratch(self, pointer):
        """The A and B arrays of every operand, carved out of the scratch bytes."""
        first, second, offset = [], [], 0
        for dtype in self.dtypes:
            row = ShapedArray((self.n,), dtype)
            half = self.n * np.dtype(dtype).itemsize
            start = self.b.gep(pointer, [T.i64(offset)], inbounds=True, source_etype=T.I8)
            first.append(Buffer(start, row))
            second.append(Buffer(self.b.gep(start, [T.i64(half)], inbounds=True,
                                            source_etype=T.I8), row))
            offset += _region(self.n, dtype)
        return first, second

    def emit(self):
        emit_nest(self.b, self.outer_shape, self.row, name="row")

    def _row_view(self, builder, buffer, base):
        return View(at_offset(builder, buffer, base), 0, (self.stride,), (self.n,))

    def row(self, builder, index, carried):
        base = affine_offset(builder, 0, self.outer_strides, index)
        for x, a in zip(self.ins, self.a):
            copy_nest(builder, (self.n,), self._row_view(builder, x, base), a.view())
        passes = (self.n - 1).bit_length()
        counted_loop(builder, passes, self.merge_pass, name="pass")
        final = self.a if passes % 2 == 0 else self.b_
        for out, f in zip(self.outs, final):
            copy_nest(builder, (self.n,), f.view(), self._row_view(builder, out, base))
        return carried

    def merge_pass(self, b, p, carried):
        """Pass p: runs of width 2**p, from A to B when p is even, else from B to A."""
        odd = b.trunc(p, T.I1)
        src = [Buffer(b.select(odd, y.ptr, x.ptr), x.aval) for x, y in zip(self.a, self.b_)]
        dst = [Buffer(b.select(odd, x.ptr, y.ptr), x.aval) for x, y in zip(self.a, self.b_)]
        width = b.shl(T.i64(1), p)
        shift = b.add(p, T.i64(1))
        pairs = b.add(b.lshr(T.i64(self.n - 1), shift), T.i64(1))

        def pair(b2, c, acc):
            lo = b2.shl(c, shift)
            mid = intrinsic(b2, "smin", [b2.add(lo, width), T.i64(self.n)])
            hi = intrinsic(b2, "smin", [b2.add(mid, width), T.i64(self.n)])
            self.merge(b2, src, dst, lo, mid, hi)
            return acc
        counted_loop(b, pairs, pair, name="run")
        return carried

    def merge(self, b, src, dst, lo, mid, hi):
        """dst[lo:hi] = the stable merge of src[lo:mid] and src[mid:hi], built from both ends
        at once: two independent dependence chains (the smallest records forward, the
        largest backward) run twice as fast as one."""
        last = b.sub(hi, T.i64(1))
        count = b.sub(hi, lo)
        half = b.lshr(count, T.i64(1))

        def front(b2, k, i, j):
            """The smallest record left: the right run's head only if strictly smaller."""
            right = self.pick(b2, src, dst, k, intrinsic(b2, "smin", [i, last]),
                              intrinsic(b2, "smin", [j, last]),
                              lambda smaller: b2.and_(b2.icmp_signed("<", j, hi),
                                                      b2.or_(b2.icmp_signed(">=", i, mid),
                                                             smaller)))
            return [b2.add(i, b2.sub(T.i64(1), right)), b2.add(j, right)]

        def back(b2, k, i, j):
            """The largest record left: the left run's tail only if strictly greater."""
            clamped = intrinsic(b2, "smin", [intrinsic(b2, "smax", [j, mid]), last])
            right = self.pick(b2, src, dst, k, intrinsic(b2, "smax", [i, lo]), clamped,
                              lambda smaller: b2.not_(b2.and_(
                                  b2.icmp_signed(">=", i, lo),
                                  b2.or_(b2.icmp_signed("<", j, mid), smaller))))
            return [b2.sub(i, b2.sub(T.i64(1), right)), b2.sub(j, right)]

        def both_ends(b2, t, acc):
            return (front(b2, b2.add(lo, t), *acc[:2])
                    + back(b2, b2.sub(last, t), *acc[2:]))
        ends = counted_loop(b, half, both_ends, [lo, mid, b.sub(mid, T.i64(1)), last],
                            name="merge")
        middle = b.add(lo, half)   # an odd count leaves one record for the front
        counted_loop(b, b.and_(count, T.i64(1)), lambda b2, t, acc: front(b2, middle, *acc),
                     ends[:2], name="middle")

    def pick(self, b, src, dst, k, left, right, take_right):
        """dst[k] = the record at `right` if `take_right(right < left)` (an i1) is true, else
        the one at `left`; returns 1 if it took the right one, else 0 (i64)."""
        keys = self.num_keys
        left_keys = [load(b, s, left) for s in src[:keys]]
        right_keys = [load(b, s, right) for s in src[:keys]]
        take = take_right(_lex_less(b, right_keys, left_keys, self.key_dtypes))
        for d, r, l in zip(dst, right_keys, left_keys):
            store(b, d, k, b.select(take, r, l))
        where = b.select(take, right, left)
        for s, d in zip(src[keys:], dst[keys:]):
            store(b, d, k, load(b, s, where))
        return b.zext(take, T.I64)


def _sort(ctx, outs, ins, *, dimension, is_stable=True, num_keys=1):
    shape = ins[0].aval.shape
    if ins[0].aval.size == 0:
        return
    if shape[dimension] == 1:
        for out, x in zip(outs, ins):
            copy_nest(ctx.builder, shape, x.view(), out.view())
        return
    _RowSort(ctx, outs, ins, dimension, num_keys).emit()


LLVM[PRIMITIVES["sort"]] = _sort
LLVM_SCRATCH[PRIMITIVES["sort"]] = _scratch_bytes
