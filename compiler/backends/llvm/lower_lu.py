"""lu: LAPACK's getrf, once per matrix of the batch, from a native loop; batches of small real
matrices take small_matrix.py's kernel instead (the same pivots, no call per matrix).

getrf works column-major and in place, so each matrix is copied transposed into the
equation's scratch memory (`_scratch_bytes`: one matrix and its pivot array), factored there,
and copied back transposed into the `lu` result. LAPACK's 1-based pivots become the 0-based
int32 `pivots`, and applying them in turn to range(m) gives `permutation`. getrf's `info` > 0
(a zero on U's diagonal) is not an error, as in JAX: the factors are returned as they are.
A matrix with min(m, n) >= BLOCKED_MIN is factored in two column blocks whose trailing update
(trsm and gemm) runs in panels on the thread pool (`_blocked_getrf`), the pivots unchanged.
The routine comes from the same OpenBLAS as BLAS (lower_decompositions.py).
"""
import llvmlite.ir as ir
import numpy as np

from ...ir.abstract import ShapedArray
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from . import blas, externs, small_matrix
from . import ltypes as T
from .buffers import Buffer, View, element_pointer
from .loops import counted_loop
from .lower_decompositions import _TRSM, char
from .lower_structural import copy_nest
from .outline import parallel_range

PTR = ir.PointerType()
_GETRF = ir.FunctionType(ir.VoidType(), [PTR] * 6)
# Matrices with min(m, n) of at least BLOCKED_MIN factor in two column blocks, the trailing
# update in panels of PANEL columns on the thread pool (`_blocked_getrf`).
BLOCKED_MIN = 256
PANEL = 64
I32 = ir.IntType(32)


def _pivot_bytes(k):
    return k * blas.library().int_bits // 8


def _matrix_bytes(aval):
    m, n = aval.shape[-2:]
    return -(-m * n * aval.dtype.itemsize // 64) * 64


def _scratch_bytes(eqn):
    a = eqn.invars[0].aval
    if small_matrix.fits(a.dtype, int(np.prod(a.shape[:-2], dtype=np.int64)), a.shape):
        return 0
    return _matrix_bytes(a) + _pivot_bytes(min(a.shape[-2:]))


def _lu(ctx, outs, ins):
    (lu, pivots, permutation), (a,) = outs, ins
    *batch, m, n = a.aval.shape
    k = min(m, n)
    count = int(np.prod(batch, dtype=np.int64))
    dtype = a.aval.dtype
    if count == 0:
        return
    if a.aval.size and small_matrix.fits(dtype, count, a.aval.shape):
        small_matrix.run(ctx, count, dtype,
                         [small_matrix.Operand(m * n, source=a, dest=lu),
                          small_matrix.Operand(k, dest=pivots, integer=True),
                          small_matrix.Operand(m, dest=permutation, integer=True)],
                         small_matrix.lu_kernel(m, n), 2 * m * n * k)
        return
    builder = ctx.builder
    integer = blas.int_type()
    if k:
        work = ctx.scratch
        ipiv = builder.gep(work, [T.i64(_matrix_bytes(a.aval))], source_etype=ir.IntType(8))

    def one(b, i, carried):
        perm = element_pointer(b, permutation, b.mul(i, T.i64(m)))

        def iota(c, r, acc):
            c.store(c.trunc(r, I32), c.gep(perm, [r], source_etype=I32))
            return []
        counted_loop(b, T.i64(m), iota, (), "iota")
        if not k:
            return []
        src = Buffer(element_pointer(b, a, b.mul(i, T.i64(m * n))) if a.const is None else None,
                     ShapedArray((m, n), dtype), a.const)
        column_major = Buffer(work, ShapedArray((n, m), dtype))
        copy_nest(b, (n, m), View(src, 0, (1, n), (n, m)), column_major.view())
        if k >= BLOCKED_MIN:
            _blocked_getrf(ctx, b, dtype, m, n, work, ipiv)
        else:
            _getrf_at(b, dtype, m, n, work, m, ipiv)
        dst = Buffer(element_pointer(b, lu, b.mul(i, T.i64(m * n))), ShapedArray((m, n), dtype))
        copy_nest(b, (m, n), View(column_major, 0, (1, m), (m, n)), dst.view())
        piv = element_pointer(b, pivots, b.mul(i, T.i64(k)))

        def swap(c, j, acc):
            p = c.sub(c.load(c.gep(ipiv, [j], source_etype=integer), typ=integer),
                      ir.Constant(integer, 1))
            p = c.trunc(p, I32) if integer.width > 32 else p
            c.store(p, c.gep(piv, [j], source_etype=I32))
            here, there = (c.gep(perm, [x], source_etype=I32) for x in (j, c.sext(p, T.I64)))
            mine, theirs = c.load(here, typ=I32), c.load(there, typ=I32)
            c.store(theirs, here)
            c.store(mine, there)
            return []
        counted_loop(b, T.i64(k), swap, (), "pivot")
        return []
    counted_loop(builder, T.i64(count), one, (), "matrix")


def _getrf_at(b, dtype, m, n, at, ld, ipiv):
    """getrf of the column-major (m, n) matrix at `at` (leading dimension `ld`), its 1-based
    pivots into `ipiv`."""
    info = externs.stack_slot(b, ir.Constant(blas.int_type(), 0))
    blas._call(b, blas.routine("getrf", dtype), _GETRF,
               [blas._int(b, m), blas._int(b, n), at, blas._leading(b, ld), ipiv, info])


def _blocked_getrf(ctx, b, dtype, m, n, work, ipiv):
    """getrf in two column blocks [A1 A2] (right-looking, one level): getrf of A1 (m x n1),
    its row swaps applied to A2, A12 = L11^-1 A12 (trsm) and A22 -= A21 A12 (gemm) in panels
    of columns on the thread pool, getrf of A22, its swaps applied to A21 and its pivots
    shifted by n1. The same pivots as one getrf call (partial pivoting in the same order);
    half of the work, the update, runs on every core."""
    integer, element = blas.int_type(), T.mem_type(dtype)
    k = min(m, n)
    n1 = max(1, (k // 2) // PANEL * PANEL)

    def at(row, col):
        return b.gep(work, [T.i64(col * m + row)], source_etype=element)
    _getrf_at(b, dtype, m, n1, work, m, ipiv)
    _swap_rows(b, dtype, work, m, ipiv, 0, n1, n1, n, 0)
    one = blas._float(blas._SCALAR[np.dtype(dtype)], 1.0)
    minus = blas._float(blas._SCALAR[np.dtype(dtype)], -1.0)
    n2, rest = n - n1, m - n1
    a12, a21, a22 = at(0, n1), at(n1, 0), at(n1, n1)

    def update(c, pointer, lo, hi):   # columns [lo, hi) of A2
        bb = c.builder
        width = bb.sub(hi, lo)
        col12 = bb.gep(pointer(a12), [bb.mul(lo, T.i64(m))], source_etype=element)
        col22 = bb.gep(pointer(a22), [bb.mul(lo, T.i64(m))], source_etype=element)
        blas._call(bb, blas.routine("trsm", dtype), _TRSM,
                   [char("L"), char("L"), char("N"), char("U"), blas._int(bb, n1),
                    blas._int(bb, width), one, pointer(work), blas._leading(bb, m), col12,
                    blas._leading(bb, m)])
        if rest:   # row-major view: A22^T (width x rest) -= A12^T (width x n1) A21^T
            blas.emit_gemm(bb, dtype, width, rest, n1, col12, pointer(a21), col22,
                           lda=m, ldb=m, ldc=m, alpha=minus, beta=one)
    if n2:
        parallel_range(ctx, [work, a12, a21, a22], n2, PANEL, update)
    if rest and n2:
        _getrf_at(b, dtype, rest, n2, a22, m, b.gep(ipiv, [T.i64(n1)], source_etype=integer))
        _swap_rows(b, dtype, work, m, ipiv, n1, k, 0, n1, n1)


def _swap_rows(b, dtype, work, m, ipiv, first, last, lo, hi, offset):
    """Apply pivots ipiv[first:last] (1-based, relative to row `offset`) to columns [lo, hi)
    of the column-major matrix at `work`, then make those pivots relative to row 0."""
    integer, element = blas.int_type(), T.mem_type(dtype)

    def pivot(c, j):
        p = c.add(c.load(c.gep(ipiv, [j], source_etype=integer), typ=integer),
                  ir.Constant(integer, offset - 1))
        return c.sext(p, T.I64) if integer.width < 64 else p

    def column(c, col, acc):
        base = c.mul(col, T.i64(m))

        def row(d, t, acc2):
            j = d.add(t, T.i64(first))
            p = pivot(d, j)
            here, there = (d.gep(work, [d.add(base, x)], source_etype=element) for x in (j, p))
            x, y = d.load(here, typ=element), d.load(there, typ=element)
            d.store(y, here)
            d.store(x, there)
            return []
        counted_loop(c, T.i64(last - first), row, (), "swap")
        return []
    counted_loop(b, T.i64(hi - lo), lambda c, t, acc: column(c, c.add(t, T.i64(lo)), acc),
                 (), "column")
    if offset:   # the pivots, made relative to row 0
        def shift_one(c, t, acc):
            slot = c.gep(ipiv, [c.add(t, T.i64(first))], source_etype=integer)
            c.store(c.add(c.load(slot, typ=integer), ir.Constant(integer, offset)), slot)
            return []
        counted_loop(b, T.i64(last - first), shift_one, (), "shift")


LLVM[PRIMITIVES["lu"]] = _lu
LLVM_SCRATCH[PRIMITIVES["lu"]] = _scratch_bytes
