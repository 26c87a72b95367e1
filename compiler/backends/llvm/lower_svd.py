"""svd: LAPACK's gesdd, once per matrix of the batch, from a native loop.

Each matrix is copied transposed (column-major) into the equation's scratch memory; gesdd
writes the singular values straight into `s` and the column-major U and V^T into scratch,
which are copied back transposed into `u` and `vt` (job 'A' for full matrices, 'S' for reduced
ones, 'N' for singular values alone). The workspace is queried once per shape when the code is
generated (lapack_query.py); rwork (complex matrices) and iwork have LAPACK's fixed sizes. A
matrix gesdd fails on (info != 0) gives NaN in every result, as JAX. An empty matrix gives the
identity's columns as u and vt.
"""
import llvmlite.ir as ir
import numpy as np

from ...ir.abstract import ShapedArray
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from ...primitives.eigh import real_dtype
from . import blas, externs, lapack_threads
from . import ltypes as T
from .buffers import Buffer, View, element_pointer, store
from .lapack_query import Array, Char, Int, workspace
from .loops import counted_loop, emit_nest
from .lower_decompositions import char
from .lower_structural import copy_nest

PTR = ir.PointerType()


def _round(nbytes):
    return -(-nbytes // 64) * 64


class _Layout:
    """Sizes (elements) and scratch offsets (bytes) of one svd equation."""

    def __init__(self, a_aval, params):
        *_, self.m, self.n = a_aval.shape
        m, n = self.m, self.n
        self.k = k = min(m, n)
        self.dtype = np.dtype(a_aval.dtype)
        self.real = real_dtype(self.dtype)
        self.complex = self.dtype.kind == "c"
        self.vectors = params["compute_uv"]
        self.job = "N" if not self.vectors else ("A" if params["full_matrices"] else "S")
        self.u_cols = m if self.job == "A" else k
        self.vt_rows = n if self.job == "A" else k
        if not self.vectors:
            self.u_cols = self.vt_rows = 0
        size = self.dtype.itemsize
        self.u = _round(m * n * size)
        self.vt = self.u + _round(m * self.u_cols * size)
        self.work = self.vt + _round(self.vt_rows * n * size)
        self.lwork = self._lwork() if k else 0
        self.lrwork = (max(1, k * max(5 * k + 7, 2 * max(m, n) + 2 * k + 1))
                       if self.complex else 0)
        self.rwork = self.work + _round(self.lwork * size)
        self.iwork = self.rwork + _round(self.lrwork * self.real.itemsize)
        self.bytes = self.iwork + 8 * k * blas.library().int_bits // 8
        self.routine = blas.routine("gesdd", self.dtype)

    def _lwork(self):
        m, n, k, ch = self.m, self.n, self.k, self.dtype.char
        integer = "q" if blas.library().int_bits == 64 else "i"
        args = (Char(self.job), Int(m), Int(n), Array(ch, 1), Int(max(1, m)),
                Array(self.real.char, 1), Array(ch, 1), Int(max(1, m)), Array(ch, 1),
                Int(max(1, self.vt_rows)), Array(ch, 1), Int(-1))
        args += ((Array(self.real.char, 1),) if self.complex else ()) + (Array(integer, 8 * k),
                                                                          Int(0))
        return workspace(blas.routine("gesdd", self.dtype), args, 10, self._least())

    def _least(self):
        """LAPACK's documented minimum lwork."""
        k, most = self.k, max(self.m, self.n)
        if self.complex:
            return k * k + 2 * k + most if self.vectors else 2 * k + most
        if self.vectors:
            return 3 * k * k + max(most, 4 * k * k + 4 * k)
        return 3 * k + max(most, 7 * k)


def _scratch_bytes(eqn):
    return _Layout(eqn.invars[0].aval, eqn.params).bytes


def _identity(b, buffer, rows, cols):
    one, zero = T.const(buffer.aval.dtype, 1), T.const(buffer.aval.dtype, 0)
    emit_nest(b, (rows, cols), lambda c, ix, acc: store(
        c, buffer, c.add(c.mul(ix[0], T.i64(cols)), ix[1]),
        c.select(c.icmp_signed("==", ix[0], ix[1]), one, zero)) or [], name="eye")


def one_of(builder, out, i, rank):
    """Example i of a result whose trailing `rank` axes are one example."""
    shape = out.aval.shape[-rank:]
    size = int(np.prod(shape, dtype=np.int64))
    return Buffer(element_pointer(builder, out, builder.mul(i, T.i64(size))),
                  ShapedArray(shape, out.aval.dtype))


def fill_nan(b, buffers):
    """NaN in every element of each of `buffers`."""
    for buffer in buffers:
        nan = T.const(buffer.aval.dtype, float("nan"))
        emit_nest(b, (buffer.aval.size,), lambda c, ix, acc, r=buffer, x=nan: store(
            c, r, ix[0], x) or [], name="nan")


def _svd(ctx, outs, ins, *, full_matrices, compute_uv):
    (a,) = ins
    layout = _Layout(a.aval, {"full_matrices": full_matrices, "compute_uv": compute_uv})
    m, n, k, dtype = layout.m, layout.n, layout.k, layout.dtype
    count = int(np.prod(a.aval.shape[:-2], dtype=np.int64))
    if count == 0:
        return
    u_cols, vt_rows = (outs[1].aval.shape[-1], outs[2].aval.shape[-2]) if compute_uv else (0, 0)
    builder, scratch = ctx.builder, ctx.scratch
    if k:
        u_ptr, vt_ptr, work, rwork, iwork = (
            builder.gep(scratch, [T.i64(offset)], source_etype=ir.IntType(8))
            for offset in (layout.u, layout.vt, layout.work, layout.rwork, layout.iwork))

    threaded = lapack_threads.wanted(count, m, n)
    def one(b, i, carried):
        results = [one_of(b, out, i, 1 if j == 0 else 2) for j, out in enumerate(outs)]
        if not k:
            if compute_uv:
                _identity(b, results[1], m, u_cols)
                _identity(b, results[2], vt_rows, n)
            return []
        src = Buffer(element_pointer(b, a, b.mul(i, T.i64(m * n))) if a.const is None else None,
                     ShapedArray((m, n), dtype), a.const)
        matrix = Buffer(scratch, ShapedArray((n, m), dtype))
        copy_nest(b, (n, m), View(src, 0, (1, n), (n, m)), matrix.view())
        info = externs.stack_slot(b, ir.Constant(blas.int_type(), 0))
        args = [char(layout.job), blas._int(b, m), blas._int(b, n), scratch,
                blas._leading(b, m), results[0].ptr, u_ptr, blas._leading(b, m), vt_ptr,
                blas._leading(b, max(1, layout.vt_rows)), work, blas._int(b, layout.lwork)]
        args += ([rwork] if layout.complex else []) + [iwork, info]
        signature = ir.FunctionType(ir.VoidType(), [PTR] * len(args))
        lapack_threads.emit_lapack(b, layout.routine, signature, args, threaded)
        failed = b.icmp_signed("!=", b.load(info, typ=blas.int_type()),
                               ir.Constant(blas.int_type(), 0))
        with b.if_else(failed) as (bad, good):
            with bad:
                fill_nan(b, results)
            with good:
                if compute_uv:
                    u_cm = Buffer(u_ptr, ShapedArray((u_cols, m), dtype))
                    copy_nest(b, (m, u_cols), View(u_cm, 0, (1, m), (m, u_cols)),
                              results[1].view())
                    vt_cm = Buffer(vt_ptr, ShapedArray((n, vt_rows), dtype))
                    copy_nest(b, (vt_rows, n), View(vt_cm, 0, (1, vt_rows), (vt_rows, n)),
                              results[2].view())
        return []
    counted_loop(builder, T.i64(count), one, (), "matrix")


LLVM[PRIMITIVES["svd"]] = _svd
LLVM_SCRATCH[PRIMITIVES["svd"]] = _scratch_bytes
