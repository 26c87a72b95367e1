"""schur and hessenberg: LAPACK's gees and gehrd, once per matrix of the batch, from a native
loop.

Each matrix is copied transposed (column-major) into the equation's scratch memory, reduced in
place there, and copied back transposed into the first result (T, or gehrd's packed h); gees
writes the Schur vectors column-major into scratch, copied back transposed the same way, and
gehrd its scalar factors straight into `taus`. gees runs without sorting (a null `select`).
Workspaces are queried once per shape when the code is generated (lapack_query.py). A matrix
gees fails on (info != 0) gives NaN in its results, as JAX.
"""
import llvmlite.ir as ir
import numpy as np

from ...ir.abstract import ShapedArray
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from ...primitives.eigh import real_dtype
from . import blas, externs
from . import ltypes as T
from .buffers import Buffer, View, element_pointer
from .lapack_query import Array, Char, Int, workspace
from .loops import counted_loop
from .lower_decompositions import char
from .lower_eigh import _round
from .lower_structural import copy_nest
from .lower_svd import fill_nan, one_of

PTR = ir.PointerType()


def _integer():
    return "q" if blas.library().int_bits == 64 else "i"


class _Layout:
    """Scratch offsets (bytes) and workspace length of one schur or hessenberg equation:
    matrix, vs (schur), values (schur's w or wr, wi), work, rwork (complex schur), bwork."""

    def __init__(self, aval, schur):
        self.n = n = aval.shape[-1]
        self.dtype = np.dtype(aval.dtype)
        self.complex = self.dtype.kind == "c"
        self.real = real_dtype(self.dtype)
        size = self.dtype.itemsize
        self.schur = schur
        self.routine = blas.routine("gees" if schur else "gehrd", self.dtype)
        self.lwork = (self._gees() if schur else self._gehrd()) if n else 0
        self.vs = _round(n * n * size)
        self.values = self.vs + (_round(n * n * size) if schur else 0)
        self.work = self.values + _round(2 * n * self.real.itemsize)
        self.rwork = self.work + _round(self.lwork * size)
        self.bwork = self.rwork + _round(n * self.real.itemsize)
        self.bytes = self.bwork + n * blas.library().int_bits // 8

    def _gees(self):
        n, ch, rch = self.n, self.dtype.char, self.real.char
        values = (Array(ch, n),) if self.complex else (Array(rch, n), Array(rch, n))
        args = ((Char("V"), Char("N"), Array(ch, 1), Int(n), Array(ch, 1), Int(n),
                 Array(_integer(), 1)) + values + (Array(ch, 1), Int(n), Array(ch, 1), Int(-1))
                + ((Array(rch, n),) if self.complex else ()) + (Array(_integer(), n), Int(0)))
        return workspace(self.routine, args, 10 if self.complex else 11,
                         2 * n if self.complex else 3 * n)

    def _gehrd(self):
        n, ch = self.n, self.dtype.char
        args = (Int(n), Int(1), Int(n), Array(ch, 1), Int(n), Array(ch, n), Array(ch, 1),
                Int(-1), Int(0))
        return workspace(self.routine, args, 6, n)


def _scratch_bytes(eqn):
    return _Layout(eqn.invars[0].aval, eqn.prim.name == "schur").bytes


def _each(ctx, a, layout, call):
    """Copy each matrix of `a` transposed into scratch, then call(b, i, info, pointers)."""
    n, dtype = layout.n, layout.dtype
    count = int(np.prod(a.aval.shape[:-2], dtype=np.int64))
    if count == 0 or n == 0:
        return
    builder, scratch = ctx.builder, ctx.scratch
    pointers = {name: builder.gep(scratch, [T.i64(getattr(layout, name))],
                                  source_etype=ir.IntType(8))
                for name in ("vs", "values", "work", "rwork", "bwork")}
    matrix = Buffer(scratch, ShapedArray((n, n), dtype))

    def one(b, i, carried):
        src = Buffer(element_pointer(b, a, b.mul(i, T.i64(n * n))) if a.const is None else None,
                     ShapedArray((n, n), dtype), a.const)
        copy_nest(b, (n, n), View(src, 0, (1, n), (n, n)), matrix.view())
        info = externs.stack_slot(b, ir.Constant(blas.int_type(), 0))
        call(b, i, info, pointers)
        return []
    counted_loop(builder, T.i64(count), one, (), "matrix")


def _back(b, ptr, out, i, n):
    """The column-major n x n matrix at `ptr` into example i of `out`, transposed."""
    dtype = out.aval.dtype
    dst = one_of(b, out, i, 2)
    copy_nest(b, (n, n), View(Buffer(ptr, ShapedArray((n, n), dtype)), 0, (1, n), (n, n)),
              dst.view())


def _schur(ctx, outs, ins, *, compute_schur_vectors):
    (a,) = ins
    layout = _Layout(a.aval, True)
    n = layout.n

    def call(b, i, info, p):
        values = [p["values"]] if layout.complex else [
            p["values"], b.gep(p["values"], [T.i64(n)], source_etype=T.mem_type(layout.real))]
        sdim = externs.stack_slot(b, ir.Constant(blas.int_type(), 0))
        args = [char("V" if compute_schur_vectors else "N"), char("N"), ir.Constant(PTR, None),
                blas._int(b, n), ctx.scratch, blas._leading(b, n), sdim] + values
        args += [p["vs"], blas._leading(b, n), p["work"], blas._int(b, layout.lwork)]
        args += ([p["rwork"]] if layout.complex else []) + [p["bwork"], info]
        blas._call(b, layout.routine, ir.FunctionType(ir.VoidType(), [PTR] * len(args)), args)
        failed = b.icmp_signed("!=", b.load(info, typ=blas.int_type()),
                               ir.Constant(blas.int_type(), 0))
        with b.if_else(failed) as (bad, good):
            with bad:
                fill_nan(b, [one_of(b, out, i, 2) for out in outs])
            with good:
                for out, ptr in zip(outs, (ctx.scratch, p["vs"])):
                    _back(b, ptr, out, i, n)
    _each(ctx, a, layout, call)


def _hessenberg(ctx, outs, ins):
    (a,), (h, taus) = ins, outs
    layout = _Layout(a.aval, False)
    n = layout.n

    def call(b, i, info, p):
        tau = element_pointer(b, taus, b.mul(i, T.i64(n - 1))) if n > 1 else p["values"]
        args = [blas._int(b, n), blas._int(b, 1), blas._int(b, n), ctx.scratch,
                blas._leading(b, n), tau, p["work"], blas._int(b, layout.lwork), info]
        blas._call(b, layout.routine, ir.FunctionType(ir.VoidType(), [PTR] * len(args)), args)
        _back(b, ctx.scratch, h, i, n)
    _each(ctx, a, layout, call)


LLVM[PRIMITIVES["schur"]] = _schur
LLVM[PRIMITIVES["hessenberg"]] = _hessenberg
LLVM_SCRATCH[PRIMITIVES["schur"]] = LLVM_SCRATCH[PRIMITIVES["hessenberg"]] = _scratch_bytes
