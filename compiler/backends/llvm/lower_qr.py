"""qr: LAPACK's geqrf then orgqr (ungqr for complex), once per matrix of the batch, from a
native loop.

Each matrix is copied transposed (column-major) into the equation's scratch memory, which has
room for max(n, q's columns) columns of m, so that orgqr can expand the reflectors into the
full m x m Q in place. R is read from the upper triangle after geqrf, Q after orgqr, each
copied back transposed into its result. The workspace of both routines is queried once per
shape when the code is generated (lapack_query.py) and is part of the scratch memory; the
routines never fail for valid arguments. An empty matrix gives the identity's columns as Q
and zeros as R, as LAPACK would.
"""
import llvmlite.ir as ir
import numpy as np

from ...ir.abstract import ShapedArray
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from . import blas, externs, lapack_threads
from . import ltypes as T
from .buffers import Buffer, View, element_pointer, load, store
from .lapack_query import Array, Int, workspace
from .loops import counted_loop, emit_nest
from .lower_structural import copy_nest

PTR = ir.PointerType()
_GEQRF = ir.FunctionType(ir.VoidType(), [PTR] * 8)
_ORGQR = ir.FunctionType(ir.VoidType(), [PTR] * 9)


def _round(nbytes):
    return -(-nbytes // 64) * 64


class _Layout:
    """Sizes and scratch offsets (bytes) of one qr equation."""

    def __init__(self, a_aval, q_aval):
        *_, self.m, self.n = a_aval.shape
        self.dtype = np.dtype(a_aval.dtype)
        self.k = min(self.m, self.n)
        self.q_cols = q_aval.shape[-1]
        self.columns = max(self.n, self.q_cols)
        size = self.dtype.itemsize
        self.tau = _round(self.m * self.columns * size)
        self.work = self.tau + _round(self.k * size)
        self.lwork = self._lwork() if self.k else 0
        self.bytes = self.work + self.lwork * size

    def _lwork(self):
        m, k, ch = self.m, self.k, self.dtype.char
        geqrf = workspace(blas.routine("geqrf", self.dtype),
                          (Int(m), Int(self.n), Array(ch, 1), Int(max(1, m)), Array(ch, 1),
                           Array(ch, 1), Int(-1), Int(0)), 5, self.n)
        orgqr = workspace(_orgqr(self.dtype),
                          (Int(m), Int(self.q_cols), Int(k), Array(ch, 1), Int(max(1, m)),
                           Array(ch, 1), Array(ch, 1), Int(-1), Int(0)), 6, self.q_cols)
        return max(geqrf, orgqr)


def _orgqr(dtype):
    prefix = blas.routine("geqrf", dtype)[0]
    return prefix + ("ungqr" if np.dtype(dtype).kind == "c" else "orgqr")


def _scratch_bytes(eqn):
    return _Layout(eqn.invars[0].aval, eqn.outvars[0].aval).bytes


def _qr(ctx, outs, ins, *, full_matrices):
    (q, r), (a,) = outs, ins
    layout = _Layout(a.aval, q.aval)
    m, n, k, dtype = layout.m, layout.n, layout.k, layout.dtype
    count = int(np.prod(a.aval.shape[:-2], dtype=np.int64))
    if count == 0:
        return
    builder = ctx.builder
    zero, one = T.const(dtype, 0), T.const(dtype, 1)
    q_size, r_size = m * layout.q_cols, r.aval.shape[-2] * n
    if ctx.scratch is not None:
        work = ctx.scratch
        tau, lwork_ptr = (builder.gep(work, [T.i64(offset)], source_etype=ir.IntType(8))
                          for offset in (layout.tau, layout.work))

    def matrix(b, i):
        qm = Buffer(element_pointer(b, q, b.mul(i, T.i64(q_size))),
                    ShapedArray((m, layout.q_cols), dtype))
        rm = Buffer(element_pointer(b, r, b.mul(i, T.i64(r_size))),
                    ShapedArray(r.aval.shape[-2:], dtype))
        if not k:   # Q: the identity's columns; R: empty or zeros
            emit_nest(b, (m, layout.q_cols), lambda c, ix, acc: store(
                c, qm, c.add(c.mul(ix[0], T.i64(layout.q_cols)), ix[1]),
                c.select(c.icmp_signed("==", ix[0], ix[1]), one, zero)) or [], name="eye")
            emit_nest(b, rm.aval.shape, lambda c, ix, acc: store(
                c, rm, c.add(c.mul(ix[0], T.i64(n)), ix[1]), zero) or [], name="zero")
            return []
        src = Buffer(element_pointer(b, a, b.mul(i, T.i64(m * n))) if a.const is None else None,
                     ShapedArray((m, n), dtype), a.const)
        column_major = Buffer(work, ShapedArray((layout.columns, m), dtype))
        copy_nest(b, (n, m), View(src, 0, (1, n), (n, m)),
                  View(column_major, 0, (m, 1), (n, m)))
        info = externs.stack_slot(b, ir.Constant(blas.int_type(), 0))
        lwork = blas._int(b, layout.lwork)
        lapack_threads.emit_lapack(b, blas.routine("geqrf", dtype), _GEQRF,
                                   [blas._int(b, m), blas._int(b, n), work, blas._leading(b, m),
                                    tau, lwork_ptr, lwork, info], threaded)

        def r_entry(c, ix, acc):
            row, col = ix
            value = load(c, column_major, c.add(c.mul(col, T.i64(m)), row))
            store(c, rm, c.add(c.mul(row, T.i64(n)), col),
                  c.select(c.icmp_signed("<=", row, col), value, zero))
            return []
        emit_nest(b, rm.aval.shape, r_entry, name="r")
        lapack_threads.emit_lapack(b, _orgqr(dtype), _ORGQR,
                                   [blas._int(b, m), blas._int(b, layout.q_cols), blas._int(b, k),
                                    work, blas._leading(b, m), tau, lwork_ptr, lwork, info],
                                   threaded)
        copy_nest(b, (m, layout.q_cols), View(column_major, 0, (1, m), (m, layout.q_cols)),
                  qm.view())
        return []
    threaded = lapack_threads.wanted(count, m, n)
    counted_loop(builder, T.i64(count), lambda b, i, acc: matrix(b, i), (), "matrix")


LLVM[PRIMITIVES["qr"]] = _qr
LLVM_SCRATCH[PRIMITIVES["qr"]] = _scratch_bytes
