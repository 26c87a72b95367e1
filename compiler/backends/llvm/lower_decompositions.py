"""cholesky and triangular_solve: LAPACK's potrf and BLAS's trsm, called once per matrix of
the batch from a native loop; batches of small real matrices take small_matrix.py's kernels
instead (no call per matrix).

The routines come from the OpenBLAS that blas.py binds (NumPy's ILP64 one, or SciPy's through
`cython_blas`/`cython_lapack`), as extern function pointers (`kiln_dpotrf`, ...), so `kiln
compile` libraries bind them as they bind BLAS. Both work in place, column-major; kiln's
row-major matrix read column-major is its transpose, so:

- cholesky copies its operand to the result and calls potrf('U'): the upper factor of the
  column-major transpose is the row-major lower factor (conj(A^T) = A for Hermitian A). The
  strict upper triangle (the input's, untouched by potrf) is then zeroed. A matrix potrf
  refuses (info != 0: not positive definite) has NaN in its lower triangle, as JAX's.
- triangular_solve copies b to the result and calls trsm with the side and the triangle
  swapped (X op(A) = B row-major is op(A)^T X^T = B^T column-major). A zero pivot gives
  inf/NaN. A large solve is cut into panels of X's independent columns (rows for the right
  side), trsm calls run as tasks of the thread pool. Conjugating a complex `a` without
  transposing it has no trsm form: a BackendUnsupportedError.
"""
import llvmlite.ir as ir
import numpy as np

from ...errors import BackendUnsupportedError
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM
from . import blas, lapack_threads, small_matrix
from . import ltypes as T
from .buffers import element_pointer
from .loops import counted_loop
from .lower_structural import copy_nest
from .outline import parallel_range

PTR = ir.PointerType()
# A triangular solve of at least 2 * SPLIT_TASK_FLOPS multiply-adds (n * n * vectors) is cut
# into panels of X's independent columns (rows, for the right side) run as tasks of the
# thread pool, each at least SPLIT_TASK_FLOPS.
SPLIT_TASK_FLOPS = 1 << 22
_POTRF = ir.FunctionType(ir.VoidType(), [PTR] * 5)
_TRSM = ir.FunctionType(ir.VoidType(), [PTR] * 11)


def char(letter):
    return ir.Constant(ir.IntType(8), ord(letter))


def _matrices(builder, buffer, count, body):
    """body(b, pointer) for each of the `count` matrices of `buffer`, in a native loop."""
    size = buffer.aval.shape[-2] * buffer.aval.shape[-1]
    counted_loop(builder, T.i64(count),
                 lambda b, i, carried: body(b, element_pointer(b, buffer, b.mul(i, T.i64(size))))
                 or [], (), "matrix")


def _batch(aval):
    return int(np.prod(aval.shape[:-2], dtype=np.int64))


def _cholesky(ctx, outs, ins):
    (out,), (a,) = outs, ins
    n = a.aval.shape[-1]
    if a.aval.size == 0:
        return
    builder, dtype = ctx.builder, out.aval.dtype
    if small_matrix.fits(dtype, _batch(a.aval), a.aval.shape):
        small_matrix.run(ctx, _batch(a.aval), dtype,
                         [small_matrix.Operand(n * n, source=a, dest=out)],
                         small_matrix.cholesky_kernel(n), n ** 3 // 3 + n * n)
        return
    copy_nest(builder, a.aval.shape, a.view(), out.view())
    nan = T.const(dtype, float("nan"))
    zero = T.const(dtype, 0)

    def one(b, pointer):
        info = blas.externs.stack_slot(b, ir.Constant(blas.int_type(), 0))
        lapack_threads.emit_lapack(b, blas.routine("potrf", dtype), _POTRF,
                                   [char("U"), blas._int(b, n), pointer, blas._leading(b, n),
                                    info], lapack_threads.wanted(_batch(a.aval), n))
        failed = b.icmp_signed("!=", b.load(info, typ=blas.int_type()),
                               ir.Constant(blas.int_type(), 0))
        matrix = _Matrix(pointer, out.aval.dtype)
        with b.if_then(failed):
            counted_loop(b, T.i64(n * n), lambda c, k, acc: matrix.store(c, k, nan) or [],
                         (), "nan")

        def row(c, r, acc):   # zero the strict upper triangle of row r
            counted_loop(c, c.sub(T.i64(n - 1), r),
                         lambda d, j, acc2: matrix.store(
                             d, d.add(d.mul(r, T.i64(n)), d.add(r, d.add(j, T.i64(1)))),
                             zero) or [], (), "upper")
            return []
        counted_loop(b, T.i64(n), row, (), "row")
    _matrices(builder, out, _batch(out.aval), one)


class _Matrix:
    """Stores into one matrix of a result, at element offsets from its first element."""

    def __init__(self, pointer, dtype):
        self.pointer, self.dtype = pointer, dtype

    def store(self, builder, offset, value):
        builder.store(value, builder.gep(self.pointer, [offset], inbounds=True,
                                         source_etype=T.mem_type(self.dtype)))


def _trans(ctx, dtype, transpose_a, conjugate_a):
    conjugate = conjugate_a and np.dtype(dtype).kind == "c"
    if conjugate and not transpose_a:
        raise BackendUnsupportedError(
            "triangular_solve with conjugate_a=True and transpose_a=False has no BLAS form for "
            "complex matrices on the LLVM backend", ctx.eqn.info,
            "Conjugate a first (jnp.conj(a)) and pass conjugate_a=False.")
    return "C" if conjugate else ("T" if transpose_a else "N")


def _triangular_solve(ctx, outs, ins, *, left_side, lower, transpose_a, conjugate_a,
                      unit_diagonal):
    (out,), (a, b) = outs, ins
    dtype = out.aval.dtype
    trans = _trans(ctx, dtype, transpose_a, conjugate_a)
    builder = ctx.builder
    rows, cols = out.aval.shape[-2:]
    n = a.aval.shape[-1]
    if out.aval.size and a.const is not None:   # a splat literal: never triangular unless n == 1
        raise BackendUnsupportedError(
            "triangular_solve of a constant-filled matrix (a literal) is not lowered by the "
            "LLVM backend", ctx.eqn.info, "Pass the matrix as an argument.")
    if out.aval.size and small_matrix.fits(dtype, _batch(out.aval), a.aval.shape,
                                                    b.aval.shape):
        small_matrix.run(ctx, _batch(out.aval), dtype,
                         [small_matrix.Operand(n * n, source=a),
                          small_matrix.Operand(rows * cols, source=b, dest=out)],
                         small_matrix.triangular_solve_kernel(
                             n, rows, cols, left_side=left_side, lower=lower,
                             transpose_a=transpose_a, unit_diagonal=unit_diagonal),
                         n * n * max(rows, cols))
        return
    if out.aval.size:
        copy_nest(builder, b.aval.shape, b.view(), out.view())
    if out.aval.size == 0 or a.aval.size == 0:
        return
    size = n * n
    stride = rows * cols
    alpha = blas._float(blas._SCALAR[np.dtype(dtype)], 1.0)
    vectors = cols if left_side else rows   # the independent columns (rows) of X
    split = n * n * vectors >= 2 * SPLIT_TASK_FLOPS

    def solve(bb, pa, pb, lo, hi):   # vectors [lo, hi) of one matrix's X
        part = bb.sub(hi, lo)
        pb = bb.gep(pb, [lo if left_side else bb.mul(lo, T.i64(cols))],
                    source_etype=T.mem_type(dtype))
        blas._call(bb, blas.routine("trsm", dtype), _TRSM,
                   [char("R" if left_side else "L"), char("U" if lower else "L"), char(trans),
                    char("U" if unit_diagonal else "N"),
                    blas._int(bb, part if left_side else cols),
                    blas._int(bb, rows if left_side else part), alpha, pa,
                    blas._leading(bb, n), pb, blas._leading(bb, cols)])

    def one(bb, i, carried):
        pa = element_pointer(bb, a, bb.mul(i, T.i64(size)))
        pb = element_pointer(bb, out, bb.mul(i, T.i64(stride)))
        if split:
            parallel_range(ctx, [pa, pb], vectors, -(-SPLIT_TASK_FLOPS // (n * n)),
                           lambda c, pointer, lo, hi: solve(c.builder, pointer(pa),
                                                            pointer(pb), lo, hi))
        else:
            solve(bb, pa, pb, T.i64(0), T.i64(vectors))
        return []
    counted_loop(builder, T.i64(_batch(out.aval)), one, (), "matrix")


LLVM[PRIMITIVES["cholesky"]] = _cholesky
LLVM[PRIMITIVES["triangular_solve"]] = _triangular_solve
