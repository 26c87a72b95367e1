"""lu: LAPACK's getrf, once per matrix of the batch, from a native loop; batches of small real
matrices take small_matrix.py's kernel instead (the same pivots, no call per matrix).

getrf works column-major and in place, so each matrix is copied transposed into the
equation's scratch memory (`_scratch_bytes`: one matrix and its pivot array), factored there,
and copied back transposed into the `lu` result. LAPACK's 1-based pivots become the 0-based
int32 `pivots`, and applying them in turn to range(m) gives `permutation`. getrf's `info` > 0
(a zero on U's diagonal) is not an error, as in JAX: the factors are returned as they are.
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
from .lower_structural import copy_nest

PTR = ir.PointerType()
_GETRF = ir.FunctionType(ir.VoidType(), [PTR] * 6)
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
        info = externs.stack_slot(b, ir.Constant(integer, 0))
        blas._call(b, blas.routine("getrf", dtype), _GETRF,
                   [blas._int(b, m), blas._int(b, n), work, blas._leading(b, m), ipiv, info])
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


LLVM[PRIMITIVES["lu"]] = _lu
LLVM_SCRATCH[PRIMITIVES["lu"]] = _scratch_bytes
