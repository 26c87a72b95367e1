"""eig: LAPACK's geev, once per matrix of the batch, from a native loop.

Each matrix is copied transposed (column-major) into the equation's scratch memory, so that
geev factors exactly the matrix JAX's call factors (the transpose's eigenvectors would be the
other side's). Complex matrices (cgeev/zgeev) write the eigenvalues straight into `w`; their
column-major eigenvectors are copied back transposed. Real matrices (sgeev/dgeev) give the
eigenvalues as two real arrays and the eigenvectors of a conjugate pair packed in two real
columns (re, im; the pair's second member is the conjugate); the results are unpacked into
complex `w`, `vl`, `vr` without branches: column j reads its real part from column j - 1 when
wi[j] < 0, and its imaginary part from column j + 1 (wi[j] > 0), from -column j (wi[j] < 0)
or is 0. The workspace is queried once per shape when the code is generated
(lapack_query.py); rwork (complex) has LAPACK's fixed size 2n. A matrix geev fails on
(info != 0) gives NaN in every result, as JAX.
"""
import llvmlite.ir as ir
import numpy as np

from ...ir.abstract import ShapedArray
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from ...primitives.eigh import real_dtype
from . import blas, externs, lapack_threads
from . import ltypes as T
from .buffers import Buffer, View, element_pointer, load, store
from .lapack_query import Array, Char, Int, workspace
from .loops import counted_loop, emit_nest
from .lower_decompositions import char
from .lower_eigh import _round
from .lower_structural import copy_nest

PTR = ir.PointerType()


class _Layout:
    """Workspace size (elements) and scratch offsets (bytes) of one eig equation."""

    def __init__(self, aval, left, right):
        self.n = n = aval.shape[-1]
        self.dtype = np.dtype(aval.dtype)
        self.complex = self.dtype.kind == "c"
        self.real = real_dtype(self.dtype)
        self.jobs = ("V" if left else "N", "V" if right else "N")
        self.routine = blas.routine("geev", self.dtype)
        size = self.dtype.itemsize
        self.lwork = self._lwork() if n else 0
        self.wr = _round(n * n * size)                     # (real: wr, wi; complex: unused)
        self.vl = self.wr + _round(2 * n * self.real.itemsize)
        self.vr = self.vl + _round(n * n * size)
        self.work = self.vr + _round(n * n * size)
        self.rwork = self.work + _round(self.lwork * size)
        self.bytes = self.rwork + 2 * n * self.real.itemsize

    def _lwork(self):
        n, ch, rch = self.n, self.dtype.char, self.real.char
        values = (Array(ch, n),) if self.complex else (Array(rch, n), Array(rch, n))
        args = ((Char(self.jobs[0]), Char(self.jobs[1]), Int(n), Array(ch, 1), Int(n))
                + values + (Array(ch, 1), Int(n), Array(ch, 1), Int(n), Array(ch, 1), Int(-1)))
        args += ((Array(rch, 2 * n),) if self.complex else ()) + (Int(0),)
        vectors = "V" in self.jobs
        least = 2 * n if self.complex else (4 * n if vectors else 3 * n)
        return workspace(self.routine, args, 10 if self.complex else 11, least)


def _scratch_bytes(eqn):
    p = eqn.params
    return _Layout(eqn.invars[0].aval, p["compute_left_eigenvectors"],
                   p["compute_right_eigenvectors"]).bytes


def _as_real(buffer, offset, size):
    """`size` complex elements of `buffer` from element `offset`, as 2 * size real ones."""
    dtype = real_dtype(buffer.aval.dtype)
    return lambda b, i: Buffer(element_pointer(b, buffer, b.mul(i, T.i64(offset))),
                               ShapedArray((2 * size,), dtype))


def _unpack(b, packed, wi, out, n):
    """The complex eigenvectors `out` (row-major) of geev's real column-major `packed`."""
    dtype = packed.aval.dtype
    zero = T.const(dtype, 0)

    def element(c, ix, acc):
        r, j = ix
        imag = load(c, wi, j)
        pos = c.fcmp_ordered(">", imag, zero)
        neg = c.fcmp_ordered("<", imag, zero)
        col_re = c.sub(j, c.zext(neg, T.I64))
        col_im = c.add(j, c.zext(pos, T.I64))
        re = load(c, packed, c.add(c.mul(col_re, T.i64(n)), r))
        x = load(c, packed, c.add(c.mul(col_im, T.i64(n)), r))
        im = c.select(pos, x, c.select(neg, c.fneg(x), zero))
        at = c.mul(c.add(c.mul(r, T.i64(n)), j), T.i64(2))
        store(c, out, at, re)
        store(c, out, c.add(at, T.i64(1)), im)
        return []
    emit_nest(b, (n, n), element, name="unpack")


def _fill_nan(b, out):
    """NaN + 0j in every element of the real view `out` of a complex result."""
    nan, zero = T.const(out.aval.dtype, float("nan")), T.const(out.aval.dtype, 0)
    emit_nest(b, (out.aval.size // 2, 2), lambda c, ix, acc: store(
        c, out, c.add(c.mul(ix[0], T.i64(2)), ix[1]),
        c.select(c.icmp_signed("==", ix[1], T.i64(0)), nan, zero)) or [], name="nan")


def _eig(ctx, outs, ins, *, compute_left_eigenvectors, compute_right_eigenvectors,
         enable_eigvec_derivs=False):
    (a,) = ins
    layout = _Layout(a.aval, compute_left_eigenvectors, compute_right_eigenvectors)
    n, dtype = layout.n, layout.dtype
    count = int(np.prod(a.aval.shape[:-2], dtype=np.int64))
    if count == 0 or n == 0:
        return
    builder, scratch = ctx.builder, ctx.scratch
    wr, vl, vr, work, rwork = (builder.gep(scratch, [T.i64(offset)], source_etype=ir.IntType(8))
                               for offset in (layout.wr, layout.vl, layout.vr, layout.work,
                                              layout.rwork))
    wi = builder.gep(wr, [T.i64(n)], source_etype=T.mem_type(layout.real))
    matrix = Buffer(scratch, ShapedArray((n, n), dtype))
    vectors = list(zip(outs[1:], [ptr for ptr, asked in ((vl, compute_left_eigenvectors),
                                                          (vr, compute_right_eigenvectors))
                                  if asked]))
    real_views = [_as_real(outs[0], n, n)] + [_as_real(out, n * n, n * n) for out, _ in vectors]

    def one(b, i, carried):
        src = Buffer(element_pointer(b, a, b.mul(i, T.i64(n * n))) if a.const is None else None,
                     ShapedArray((n, n), dtype), a.const)
        copy_nest(b, (n, n), View(src, 0, (1, n), (n, n)), matrix.view())
        info = externs.stack_slot(b, ir.Constant(blas.int_type(), 0))
        values = ([element_pointer(b, outs[0], b.mul(i, T.i64(n)))] if layout.complex
                  else [wr, wi])
        args = [char(layout.jobs[0]), char(layout.jobs[1]), blas._int(b, n), scratch,
                blas._leading(b, n)] + values
        args += [vl, blas._leading(b, n), vr, blas._leading(b, n), work,
                 blas._int(b, layout.lwork)] + ([rwork] if layout.complex else []) + [info]
        signature = ir.FunctionType(ir.VoidType(), [PTR] * len(args))
        lapack_threads.emit_lapack(b, layout.routine, signature, args,
                                   lapack_threads.wanted(count, n))
        failed = b.icmp_signed("!=", b.load(info, typ=blas.int_type()),
                               ir.Constant(blas.int_type(), 0))
        views = [view(b, i) for view in real_views]
        with b.if_else(failed) as (bad, good):
            with bad:
                for view in views:
                    _fill_nan(b, view)
            with good:
                _results(b, layout, views, vectors, wr, wi, i)
        return []
    counted_loop(builder, T.i64(count), one, (), "matrix")


def _results(b, layout, views, vectors, wr, wi, i):
    n, dtype = layout.n, layout.dtype
    if layout.complex:
        for (out, ptr) in vectors:
            dst = Buffer(element_pointer(b, out, b.mul(i, T.i64(n * n))), ShapedArray((n, n),
                                                                                      dtype))
            copy_nest(b, (n, n), View(Buffer(ptr, ShapedArray((n, n), dtype)), 0, (1, n),
                                      (n, n)), dst.view())
        return
    real = ShapedArray((n,), layout.real)
    wr_b, wi_b = Buffer(wr, real), Buffer(wi, real)
    w = views[0]

    def value(c, ix, acc):
        at = c.mul(ix[0], T.i64(2))
        store(c, w, at, load(c, wr_b, ix[0]))
        store(c, w, c.add(at, T.i64(1)), load(c, wi_b, ix[0]))
        return []
    emit_nest(b, (n,), value, name="w")
    for (_, ptr), view in zip(vectors, views[1:]):
        _unpack(b, Buffer(ptr, ShapedArray((n * n,), layout.real)), wi_b, view, n)


LLVM[PRIMITIVES["eig"]] = _eig
LLVM_SCRATCH[PRIMITIVES["eig"]] = _scratch_bytes
