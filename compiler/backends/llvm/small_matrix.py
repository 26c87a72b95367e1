"""Batches of small real matrices: cholesky, lu and triangular_solve as generated loops, no
LAPACK call per matrix.

A LAPACK call costs about as much as factoring an 8x8 matrix, so batches of small float32 or
float64 matrices (at most SMALL_MAX rows and columns, SINGLE_MAX for a single matrix; a
triangular solve's right-hand side of at most SMALL_MAX_ELEMENTS elements) take these kernels
instead. They run across the batch in SIMD
lanes: a group of `lanes(...)` matrices (LANE_BYTES of one element position of each) is copied
batch-major into stack scratch, where element e of matrix l sits at `e * width + l`, so every
operation of the algorithm is one vector operation over the group; the results are copied back.
A last group shorter than the width repeats the batch's last matrix in its spare lanes and
stores only its own. Groups are split over the thread pool (outline.py's `parallel_range`), a
task at least TASK_FLOPS lane operations.

The algorithms are LAPACK's unblocked ones, with its conventions:
- cholesky: column by column (potf2), the diagonal's square root, the column below scaled by
  its reciprocal; a lane whose diagonal is not positive (or NaN) gets NaN in its lower
  triangle; the strict upper triangle is zero.
- lu: partial pivoting as getf2: the pivot is the first entry of largest magnitude in the
  column, the rows are swapped (a select per lane), the column below is scaled by the pivot's
  reciprocal unless the pivot is zero, then the trailing matrix updated. Pivots and
  permutation are those of getrf.
- triangular_solve: substitution, each unknown scaled by the reciprocal of its diagonal
  entry (a zero gives inf/NaN, as trsm).
The kernels are not bit-for-bit LAPACK's (OpenBLAS's use FMA and blocked orders): the values
agree to rounding, and a pivot choice can differ only between entries of equal magnitude up to
rounding.
"""
from typing import NamedTuple

import llvmlite.ir as ir
import numpy as np

from . import ltypes as T
from .externs import opaque
from .buffers import Buffer, element_pointer, load
from .calls import intrinsic
from .loops import counted_loop
from .outline import parallel_range

# Measured on one thread, float32, against the LAPACK loop (docs/linalg.md): batches of 16 or
# 1000 matrices run faster natively up to n = 24 (inv: half LAPACK's time there, 1.4x it at
# 32) and beyond (cholesky); a single matrix only up to n = 8 (one lane, no SIMD).
SMALL_MAX = 24
SINGLE_MAX = 8
SMALL_MAX_ELEMENTS = SMALL_MAX * SMALL_MAX
LANE_BYTES = 64
TASK_FLOPS = 1 << 15
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def fits(dtype, count, *shapes):
    """Whether `count` matrices of `shapes` (the trailing two axes of each operand) and `dtype`
    take these kernels."""
    largest = SMALL_MAX if count > 1 else SINGLE_MAX
    return (np.dtype(dtype) in _DTYPES
            and all(max(s[-2:]) <= largest and s[-1] * s[-2] <= SMALL_MAX_ELEMENTS
                    for s in shapes))


def lanes(dtype, count):
    """Matrices per group: LANE_BYTES of elements, fewer (a power of 2) for a smaller batch."""
    width = 1
    while width < min(LANE_BYTES // np.dtype(dtype).itemsize, count):
        width *= 2
    return width


class Lanes:
    """One group's matrix in stack scratch, batch-major: `get(e)`/`set(e, v)` move the
    vector of element e of every matrix of the group (e an int or an i64 value)."""

    def __init__(self, builder, element, elements, width):
        self.builder, self.width = builder, width
        self.vector = ir.VectorType(element, width)
        entry = builder.function.entry_basic_block
        at_entry = builder
        if builder.block is not entry:   # (a second builder in this block would desync it)
            at_entry = ir.IRBuilder(entry)
            at_entry.position_at_start(entry)
        slot = at_entry.alloca(ir.ArrayType(element, elements * width))
        slot.align = LANE_BYTES
        self.slot = opaque(slot)
        self.element = element

    def _pointer(self, e, lane=None):
        b = self.builder
        e = T.i64(e) if isinstance(e, int) else e
        offset = b.mul(e, T.i64(self.width))
        if lane is not None:
            offset = b.add(offset, lane)
        return b.gep(self.slot, [offset], inbounds=True, source_etype=self.element)

    def get(self, e):
        return self.builder.load(self._pointer(e), typ=self.vector,
                                 align=self.width * _bytes(self.element))

    def set(self, e, value):
        self.builder.store(value, self._pointer(e), align=self.width * _bytes(self.element))

    def scalar(self, e, lane):
        return self._pointer(e, lane)


def _bytes(element):
    return {ir.FloatType: 4, ir.DoubleType: 8, ir.IntType: 4}[type(element)]


def splat(vector, value):
    return ir.Constant(vector, [ir.Constant(vector.element, value)] * vector.count)


def _broadcast(b, vector, value):
    """`value` (a register) in every lane of `vector`."""
    first = b.insert_element(ir.Constant(vector, ir.Undefined), value, ir.Constant(T.I32, 0))
    return b.shuffle_vector(first, ir.Constant(vector, ir.Undefined),
                            ir.Constant(ir.VectorType(T.I32, vector.count),
                                        [ir.Constant(T.I32, 0)] * vector.count))


def _each(b, count, body, name):
    """for i in range(count): body(b, i), nothing carried."""
    def step(c, i, acc):
        body(c, i)
        return []
    counted_loop(b, T.i64(count) if isinstance(count, int) else count, step, (), name)


def _range(b, start, stop, body, inits=(), name="r"):
    """for r in range(start, stop): body(b, r, carried) (i64 values or ints)."""
    start, stop = (T.i64(x) if isinstance(x, int) else x for x in (start, stop))
    return counted_loop(b, b.sub(stop, start),
                        lambda c, t, acc: body(c, c.add(start, t), acc), inits, name)


class Operand(NamedTuple):
    """One scratch matrix of a group: `size` elements per matrix (int32 ones when `integer`),
    copied in from `source` (a Buffer of the batch) and out to `dest` when given."""
    size: int
    source: object = None
    dest: object = None
    integer: bool = False


def run(ctx, count, dtype, operands, kernel, flops):
    """kernel(b, scratches) over the batch's `count` matrices, a group of `lanes(dtype,
    count)` at a time, one `Lanes` scratch per Operand; `flops`: lane operations per group."""
    width = lanes(dtype, count)
    groups = -(-count // width)
    element = T.reg_type(dtype)
    buffers = [buf for op in operands for buf in (op.source, op.dest) if buf is not None]
    pointers = list({id(buf.ptr): buf.ptr for buf in buffers if buf.const is None}.values())
    grain = max(1, -(-TASK_FLOPS // flops))

    def chunk(cctx, pointer, lo, hi):
        b = cctx.builder

        def moved(buf):
            return buf if buf.const is not None else Buffer(pointer(buf.ptr), buf.aval)
        scratches = [Lanes(b, T.I32 if op.integer else element, op.size, width)
                     for op in operands]

        def group(c, g, acc):
            first = c.mul(g, T.i64(width))
            last = T.i64(count - 1)
            for op, scratch in zip(operands, scratches):
                if op.source is not None:
                    _copy_in(c, moved(op.source), op.size, scratch, first, last)
            kernel(c, scratches)
            valid = c.sub(T.i64(count), first)
            valid = c.select(c.icmp_signed("<", valid, T.i64(width)), valid, T.i64(width))
            for op, scratch in zip(operands, scratches):
                if op.dest is not None:
                    _copy_out(c, moved(op.dest), op.size, scratch, first, valid)
            return []
        _range(b, lo, hi, group, (), "group")
    parallel_range(ctx, pointers, groups, grain, chunk)


def _transpose(b, rows):
    """The columns of the square matrix whose rows are the vectors `rows` (a power of 2 of
    them): log2(width) stages, each swapping the off-diagonal halves of 2h x 2h blocks with
    one pair of shuffles per pair of rows."""
    width = len(rows)
    rows = list(rows)
    h = 1
    while h < width:
        low = ir.Constant(ir.VectorType(T.I32, width), [
            p if not p & h else width + p - h for p in range(width)])
        high = ir.Constant(ir.VectorType(T.I32, width), [
            p + h if not p & h else width + p for p in range(width)])
        for i in range(width):
            if not i & h:
                rows[i], rows[i + h] = (b.shuffle_vector(rows[i], rows[i + h], low),
                                        b.shuffle_vector(rows[i], rows[i + h], high))
        h *= 2
    return rows


def _blocks(b, size, width, body):
    """body(b, e) for the first element e of each whole block of `width` elements of a matrix
    of `size`; the number of elements they cover."""
    _each(b, size // width, lambda c, k: body(c, c.mul(k, T.i64(width))), "block")
    return size // width * width


def _copy_in(b, source, size, scratch, first, last):
    """Each lane's matrix (the batch's last one past its end) into the scratch: blocks of
    `width` elements of every lane's matrix loaded as vectors and transposed in registers,
    the rest (and a constant's splat) element by element."""
    width = scratch.width
    bases = []
    for lane in range(width):
        matrix = b.add(first, T.i64(lane))
        matrix = b.select(b.icmp_signed("<", matrix, last), matrix, last)
        bases.append(b.mul(matrix, T.i64(size)))
    done = 0
    if source.const is None:
        def block(c, e):
            rows = [c.load(element_pointer(c, source, c.add(base, e)), typ=scratch.vector,
                           align=_bytes(scratch.element)) for base in bases]
            for j, column in enumerate(_transpose(c, rows)):
                scratch.set(c.add(e, T.i64(j)), column)
        done = _blocks(b, size, width, block)

    def element(c, e):
        e = c.add(e, T.i64(done))
        vector = ir.Constant(scratch.vector, ir.Undefined)
        for lane, base in enumerate(bases):
            vector = c.insert_element(vector, load(c, source, c.add(base, e)),
                                      ir.Constant(T.I32, lane))
        scratch.set(e, vector)
    _each(b, size - done, element, "e")


def _copy_out(b, dest, size, scratch, first, valid):
    """The scratch's first `valid` lanes into their matrices of `dest`: a full group by
    blocks transposed in registers (the rest element by element), the batch's last, shorter
    one lane by lane."""
    width = scratch.width
    full = b.icmp_signed("==", valid, T.i64(width))
    with b.if_else(full) as (whole, part):
        with whole:
            bases = [b.mul(b.add(first, T.i64(lane)), T.i64(size)) for lane in range(width)]

            def block(c, e):
                columns = [scratch.get(c.add(e, T.i64(j))) for j in range(width)]
                for base, row in zip(bases, _transpose(c, columns)):
                    c.store(row, element_pointer(c, dest, c.add(base, e)),
                            align=_bytes(scratch.element))
            done = _blocks(b, size, width, block)

            def element(c, e):
                e = c.add(e, T.i64(done))
                vector = scratch.get(e)
                for lane, base in enumerate(bases):
                    c.store(c.extract_element(vector, ir.Constant(T.I32, lane)),
                            element_pointer(c, dest, c.add(base, e)))
            _each(b, size - done, element, "e")
        with part:
            def lane(c, i, acc):
                base = c.mul(c.add(first, i), T.i64(size))
                _each(c, size, lambda d, e: d.store(
                    d.load(scratch.scalar(e, i), typ=scratch.element),
                    element_pointer(d, dest, d.add(base, e))), "e")
                return []
            counted_loop(b, valid, lane, (), "lane")


# ----------------------------------------------------------------------------- kernels

def _index(b, r, c, n):
    r, c = (T.i64(x) if isinstance(x, int) else x for x in (r, c))
    return b.add(b.mul(r, T.i64(n)), c)


def cholesky_kernel(n):
    """In place on the group's matrix: its lower Cholesky factor, NaN in the lower triangle of
    a lane that is not positive definite, zeros above the diagonal."""
    def kernel(b, scratches):
        (a,) = scratches
        vec = a.vector
        zero, one, nan = (splat(vec, x) for x in (0.0, 1.0, float("nan")))

        def column(c, j, acc):
            (ok,) = acc
            jj = _index(c, j, j, n)
            d, = counted_loop(c, j, lambda e, k, s: [e.fsub(s[0], e.fmul(
                a.get(_index(e, j, k, n)), a.get(_index(e, j, k, n))))], [a.get(jj)], "k")
            ok = c.and_(ok, c.fcmp_ordered(">", d, zero))
            root = intrinsic(c, "sqrt", [d])
            a.set(jj, root)
            scale = c.fdiv(one, root)

            def below(e, i, acc2):
                v, = counted_loop(e, j, lambda f, k, s: [f.fsub(s[0], f.fmul(
                    a.get(_index(f, i, k, n)), a.get(_index(f, j, k, n))))],
                    [a.get(_index(e, i, j, n))], "k")
                a.set(_index(e, i, j, n), e.fmul(v, scale))
                return []
            _range(c, c.add(j, T.i64(1)), n, below, (), "i")
            return [ok]
        ok, = counted_loop(b, T.i64(n), column, [splat(ir.VectorType(T.I1, vec.count), 1)], "j")

        def row(c, r, acc):
            def element(e, col, acc2):
                at = _index(e, r, col, n)
                upper = e.icmp_signed(">", col, r)
                e_value = e.select(ok, a.get(at), nan)
                a.set(at, e.select(upper, zero, e_value))
                return []
            counted_loop(c, T.i64(n), element, (), "c")
            return []
        counted_loop(b, T.i64(n), row, (), "r")
    return kernel


def lu_kernel(m, n):
    """In place on the group's (m, n) matrix, with its pivots and permutation (int32): getf2."""
    k = min(m, n)

    def kernel(b, scratches):
        a, piv, perm = scratches
        vec = a.vector
        ivec = ir.VectorType(T.I32, vec.count)
        zero, one = splat(vec, 0.0), splat(vec, 1.0)
        _each(b, m, lambda c, r: perm.set(r, _broadcast(c, ivec, c.trunc(r, T.I32))), "iota")

        def step(c, j, acc):
            def search(d, r, s):
                best, where = s
                v = intrinsic(d, "fabs", [a.get(_index(d, r, j, n))])
                bigger = d.fcmp_ordered(">", v, best)
                return [d.select(bigger, v, best),
                        d.select(bigger, _broadcast(d, ivec, d.trunc(r, T.I32)), where)]
            _, where = _range(c, c.add(j, T.i64(1)), m, search,
                              [intrinsic(c, "fabs", [a.get(_index(c, j, j, n))]),
                               _broadcast(c, ivec, c.trunc(j, T.I32))], "p")
            piv.set(j, where)

            def swap(d, r, s):
                mask = d.icmp_signed("==", where, _broadcast(d, ivec, d.trunc(r, T.I32)))

                def exchange(e, scratch, mine, theirs):
                    x, y = scratch.get(mine), scratch.get(theirs)
                    scratch.set(mine, e.select(mask, y, x))
                    scratch.set(theirs, e.select(mask, x, y))
                exchange(d, perm, j, r)
                _each(d, n, lambda e, col: exchange(e, a, _index(e, j, col, n),
                                                    _index(e, r, col, n)), "c")
                return []
            _range(c, c.add(j, T.i64(1)), m, swap, (), "s")
            pivot = a.get(_index(c, j, j, n))
            nonzero = c.fcmp_unordered("!=", pivot, zero)
            scale = c.fdiv(one, pivot)

            def eliminate(d, r, s):
                at = _index(d, r, j, n)
                x = a.get(at)
                factor = d.select(nonzero, d.fmul(x, scale), x)
                a.set(at, factor)

                def update(e, col, s2):
                    here = _index(e, r, col, n)
                    a.set(here, e.fsub(a.get(here), e.fmul(factor, a.get(_index(e, j, col, n)))))
                    return []
                _range(d, d.add(j, T.i64(1)), n, update, (), "c")
                return []
            _range(c, c.add(j, T.i64(1)), m, eliminate, (), "r")
            return []
        counted_loop(b, T.i64(k), step, (), "j")
    return kernel


def triangular_solve_kernel(n, rows, cols, *, left_side, lower, transpose_a, unit_diagonal):
    """In place on the group's right-hand side (rows, cols): X with op(a) X = b (left_side) or
    X op(a) = b. Written as one system S x = y per vector of X: S = op(a) for the left side,
    op(a)^T for the right (whose vectors are X's rows)."""
    swap = bool(transpose_a) ^ (not left_side)
    forward = bool(lower) ^ swap
    vectors = cols if left_side else rows

    def s_index(b, u, k):
        return _index(b, k, u, n) if swap else _index(b, u, k, n)

    def x_index(b, u, v):
        return _index(b, u, v, cols) if left_side else _index(b, v, u, cols)

    def kernel(b, scratches):
        a, x = scratches
        one = splat(a.vector, 1.0)

        def unknown(c, t, acc):
            u = t if forward else c.sub(T.i64(n - 1), t)
            scale = None if unit_diagonal else c.fdiv(one, a.get(s_index(c, u, u)))

            def vector(d, v, acc2):
                def term(e, kk, s):
                    return [e.fsub(s[0], e.fmul(a.get(s_index(e, u, kk)),
                                                x.get(x_index(e, kk, v))))]
                start, stop = (0, u) if forward else (d.add(u, T.i64(1)), n)
                y, = _range(d, start, stop, term, [x.get(x_index(d, u, v))], "k")
                x.set(x_index(d, u, v), y if scale is None else d.fmul(y, scale))
                return []
            counted_loop(c, T.i64(vectors), vector, (), "v")
            return []
        counted_loop(b, T.i64(n), unknown, (), "u")
    return kernel

