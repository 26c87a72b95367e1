"""eigh: LAPACK's syevd (heevd for complex), once per matrix of the batch, from a native loop.

Each matrix is copied transposed (column-major) into the equation's scratch memory and
factored with the same triangle flag, so that LAPACK takes the very path NumPy's eigh takes
(factoring the row-major data as it is, with the flag swapped, gives other eigenvector signs);
the eigenvalues are written straight into `w`, the eigenvectors copied back transposed into
`v`. The workspaces (work, and iwork, rwork) are queried once per shape
when the code is generated (lapack_query.py) and live in the scratch memory. A matrix LAPACK
fails on (info != 0) gives NaN in both results, as JAX.
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
    """Workspace sizes (elements) and scratch offsets (bytes) of one eigh equation."""

    def __init__(self, aval):
        self.n = n = aval.shape[-1]
        self.dtype = np.dtype(aval.dtype)
        self.complex = self.dtype.kind == "c"
        self.real = real_dtype(self.dtype)
        self.routine = blas.routine("heevd" if self.complex else "syevd", self.dtype)
        self.int_bytes = blas.library().int_bits // 8
        self.lwork, self.lrwork, self.liwork = self._sizes() if n else (0, 0, 0)
        self.work = _round(n * n * self.dtype.itemsize)
        self.rwork = self.work + _round(self.lwork * self.dtype.itemsize)
        self.iwork = self.rwork + _round(self.lrwork * self.real.itemsize)
        self.bytes = self.iwork + self.liwork * self.int_bytes

    def _sizes(self):
        n, ch, rch = self.n, self.dtype.char, self.real.char
        integer = "q" if self.int_bytes == 8 else "i"
        head = (Char("V"), Char("U"), Int(n), Array(ch, 1), Int(n), Array(rch, 1))
        if self.complex:   # work, lwork, rwork, lrwork, iwork, liwork, info
            args = head + (Array(ch, 1), Int(-1), Array(rch, 1), Int(-1), Array(integer, 1),
                           Int(-1), Int(0))
            return workspace(self.routine, args, (6, 8, 10),
                             (2 * n + n * n, 1 + 5 * n + 2 * n * n, 3 + 5 * n))
        args = head + (Array(ch, 1), Int(-1), Array(integer, 1), Int(-1), Int(0))
        lwork, liwork = workspace(self.routine, args, (6, 8), (1 + 6 * n + 2 * n * n, 3 + 5 * n))
        return lwork, 0, liwork


def _scratch_bytes(eqn):
    return _Layout(eqn.invars[0].aval).bytes


def _eigh(ctx, outs, ins, *, lower):
    (v, w), (a,) = outs, ins
    layout = _Layout(a.aval)
    n, dtype = layout.n, layout.dtype
    count = int(np.prod(a.aval.shape[:-2], dtype=np.int64))
    if count == 0 or n == 0:
        return
    builder = ctx.builder
    scratch = ctx.scratch
    work, rwork, iwork = (builder.gep(scratch, [T.i64(offset)], source_etype=ir.IntType(8))
                          for offset in (layout.work, layout.rwork, layout.iwork))
    matrix = Buffer(scratch, ShapedArray((n, n), dtype))
    nan_v, nan_w = T.const(dtype, float("nan")), T.const(layout.real, float("nan"))

    threaded = lapack_threads.wanted(count, n)
    def one(b, i, carried):
        src = Buffer(element_pointer(b, a, b.mul(i, T.i64(n * n))) if a.const is None else None,
                     ShapedArray((n, n), dtype), a.const)
        copy_nest(b, (n, n), View(src, 0, (1, n), (n, n)), matrix.view())
        vm = Buffer(element_pointer(b, v, b.mul(i, T.i64(n * n))), ShapedArray((n, n), dtype))
        wm = Buffer(element_pointer(b, w, b.mul(i, T.i64(n))), ShapedArray((n,), layout.real))
        info = externs.stack_slot(b, ir.Constant(blas.int_type(), 0))
        args = [char("V"), char("L" if lower else "U"), blas._int(b, n), scratch,
                blas._leading(b, n), wm.ptr, work, blas._int(b, layout.lwork)]
        if layout.complex:
            args += [rwork, blas._int(b, layout.lrwork)]
        args += [iwork, blas._int(b, layout.liwork), info]
        signature = ir.FunctionType(ir.VoidType(), [PTR] * len(args))
        lapack_threads.emit_lapack(b, layout.routine, signature, args, threaded)
        failed = b.icmp_signed("!=", b.load(info, typ=blas.int_type()),
                               ir.Constant(blas.int_type(), 0))
        with b.if_else(failed) as (bad, good):
            with bad:
                emit_nest(b, (n * n,), lambda c, ix, acc: store(c, vm, ix[0], nan_v) or [],
                          name="nan")
                emit_nest(b, (n,), lambda c, ix, acc: store(c, wm, ix[0], nan_w) or [],
                          name="nanw")
            with good:
                copy_nest(b, (n, n), View(matrix, 0, (1, n), (n, n)), vm.view())
        return []
    counted_loop(builder, T.i64(count), one, (), "matrix")


LLVM[PRIMITIVES["eigh"]] = _eigh
LLVM_SCRATCH[PRIMITIVES["eigh"]] = _scratch_bytes
