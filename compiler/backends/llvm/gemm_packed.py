"""Larger real matrix products as kiln's own packed, cache-blocked kernel (no library call).

`emit_packed_gemm` computes the row-major C (m x n, row stride ldc) = op(A) (m x k) @ op(B)
(k x n), or adds it to C (`accumulate` nonzero), for float32 and float64, k >= 1, with
op(A)[i, p] at `a + i * sam + p * sak` and op(B)[p, j] at `b + p * sbk + j * sbn` (element
strides; transposed operands are read in place). The sizes and strides are run-time values, so
one function per dtype (`kiln_gemm_<dtype>`, in the runtime library, rtlib.py) serves every
product, and the thread pool's panels (lower_linalg.py) call it on their share of C.

The kernel is the classic blocked form (Goto's algorithm, as BLIS and OpenBLAS arrange it):

    for jc in range(0, n, NC):                     # a block of columns of C
      for pc in range(0, k, KC):                   # a block of the contraction
        Bp = pack(op(B)[pc:pc+KC, jc:jc+NC])       # tiles of NR columns, [tile][p][NR], zeros
        for ic in range(0, m, MR):                 #   past n; KC x NC elements: stays in L2
          Ap = pack(op(A)[ic:ic+MR, pc:pc+KC])     # [p][MR]: stays in L1
          for each tile t of Bp:                   # the micro-kernel: an MR x NR block of C
            prefetch(C's block; share t of op(A)[ic+MR:ic+2*MR, pc:pc+KC])
            acc = sum over p of Ap[p, :, None] * Bp[t, p, None, :]
            C[ic:ic+MR, jc+t*NR : ...] (+)= acc    # stored at pc == 0, added after (and
                                                   #   at pc == 0 with `accumulate`)

The micro-kernel holds its MR x NR block of C in vector registers for the whole block of the
contraction: each step loads NR / lanes vectors of Bp and broadcasts MR elements of Ap, and
multiply-adds (`contract`: FMAs where the target has them). With AVX-512 (32 registers) the
block is 8 rows x 2 vectors of 64 bytes (16 accumulators); otherwise (16 registers: AVX2 and
below) 6 rows x 1 vector of 64 bytes (two ymm registers: the 6 x 16 float32 block of the
Haswell kernels). Rows past m read row m - 1 (never stored); columns past n are zeros in Bp and
are left out of the masked loads and stores of C. Bp and Ap live on the stack: Bp takes 512 KiB
with AVX-512 (a quarter to a half of those CPUs' L2 caches: 1-2 MiB per core; NC = 512 float32
columns) and 256 KiB otherwise (half of Zen 1's 512 KiB L2), Ap at most 8 KiB.

Packing B reads a row-major op(B) row by row across the whole block (one row of NC elements
after another, so the reads stream from memory). Before each micro-kernel the kernel asks for
(prefetches) C's block, which `store` loads at pc > 0, and a share of the next row block of
op(A), so that packing it does not wait for memory either: these cost 5-10% of the time of a
1024^3 product before (docs/llvm.md, "Larger matrix products").

Sums are in a different order than a serial loop's (blocks of KC terms, each in order), as in
BLAS. Measured against OpenBLAS: docs/llvm.md, "Matrix products".
"""
from __future__ import annotations

from typing import NamedTuple

import llvmlite.ir as ir
import numpy as np

from . import externs, target
from . import ltypes as T
from .externs import opaque
from .gemm import (CONTRACT, DTYPES, VECTOR_BYTES, lane_mask, masked_load, masked_store, splat,
                   zero_vector)
from .loops import counted_loop

KC = 256                     # contraction block (elements)


class Micro(NamedTuple):
    rows: int                # MR
    vectors: int             # NR / lanes (vectors of VECTOR_BYTES)
    pack_bytes: int          # Bp: KC x NC elements (NC a multiple of NR)


# has AVX-512 -> the micro-kernel block and Bp's size (see the module docstring)
MICRO = {True: Micro(8, 2, 512 * 1024), False: Micro(6, 1, 256 * 1024)}


def micro() -> Micro:
    """The micro-kernel block and packed B's size for the CPU code is generated for."""
    return MICRO["+avx512f" in target.jit_cpu()[1].split(",")]


ARGS = [T.PTR, T.I64, T.I64, T.PTR, T.I64, T.I64, T.PTR, T.I64, T.I64, T.I64, T.I64, T.I64]
FUNCTION_TYPE = ir.FunctionType(T.VOID, ARGS)   # a, sam, sak, b, sbk, sbn, c, ldc, m, n, k,
#                                                 accumulate


NAMES = {dtype: f"kiln_gemm_{dtype.name}" for dtype in DTYPES}


def emit_packed_gemm(builder, dtype, m, n, k, a, a_strides, b, b_strides, c, ldc,
                     accumulate=0) -> None:
    """Call the runtime library's packed kernel for C = op(A) @ op(B) (C += op(A) @ op(B)
    where `accumulate` is nonzero); sizes, strides and the flag are ints or i64 values."""
    args = [a, *a_strides, b, *b_strides, c, ldc, m, n, k, accumulate]
    externs.call(builder, NAMES[np.dtype(dtype)], FUNCTION_TYPE,
                 [T.i64(x) if isinstance(x, int) else x for x in args])


def emit(module):
    """Define `kiln_gemm_float32` and `kiln_gemm_float64` (external) in `module`."""
    for dtype, name in NAMES.items():
        fn = ir.Function(module, FUNCTION_TYPE, name)
        for arg in (fn.args[0], fn.args[3], fn.args[6]):
            arg.add_attribute("noalias")
        _Kernel(fn, dtype).emit()


def transpose(b, rows):
    """The columns of a square block given as its rows (`lanes` vectors of `lanes` elements):
    log2(lanes) rounds that interleave the first and second halves of the rows."""
    lanes = len(rows)
    half = lanes // 2
    low = ir.Constant(ir.VectorType(T.I32, lanes),
                      [t // 2 + (lanes if t % 2 else 0) for t in range(lanes)])
    high = ir.Constant(ir.VectorType(T.I32, lanes),
                       [half + t // 2 + (lanes if t % 2 else 0) for t in range(lanes)])
    for _ in range(lanes.bit_length() - 1):
        rows = [x for i in range(half) for x in (b.shuffle_vector(rows[i], rows[i + half], low),
                                                  b.shuffle_vector(rows[i], rows[i + half], high))]
    return rows


def _prefetch(b, pointer, write, locality):
    """llvm.prefetch of the cache line at `pointer` (data; locality 3 keeps it in every
    cache level, 2 in L2 and below)."""
    fn = b.module.declare_intrinsic("llvm.prefetch", [T.PTR],
                                    ir.FunctionType(T.VOID, [T.PTR, T.I32, T.I32, T.I32]))
    b.call(fn, [pointer, T.I32(int(write)), T.I32(locality), T.I32(1)])


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _ceil_div(b, x, y: int):
    return b.udiv(b.add(x, T.i64(y - 1)), T.i64(y))


class _Kernel:
    """The body of `kiln_gemm_<dtype>` (see the module docstring)."""

    def __init__(self, fn, dtype):
        self.fn, self.dtype = fn, dtype
        self.scalar, self.size = T.reg_type(dtype), dtype.itemsize
        self.lanes = VECTOR_BYTES // self.size
        self.mr, vectors, pack_bytes = micro()
        self.nr = vectors * self.lanes
        self.nc = pack_bytes // (KC * self.size) // self.nr * self.nr
        self.vector = ir.VectorType(self.scalar, self.lanes)

    def at(self, b, base, offset):
        return b.gep(base, [offset], inbounds=True, source_etype=self.scalar)

    def outside(self, b, base, offset):
        """An address that may lie past the operand (for prefetches only): no `inbounds`."""
        return b.gep(base, [offset], source_etype=self.scalar)

    def emit(self):
        b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        a, sam, sak, bm, sbk, sbn, c, ldc, m, n, k, accumulate = self.fn.args
        elements = ir.ArrayType(self.scalar, KC * self.nc)
        bp = b.alloca(elements)
        bp.align = 64
        ap = b.alloca(ir.ArrayType(self.scalar, KC * self.mr))
        ap.align = 64
        bp, ap = opaque(bp), opaque(ap)

        def column_block(b, jb, _):
            jc = b.mul(jb, T.i64(self.nc))
            nc = _min(b, T.i64(self.nc), b.sub(n, jc))

            def depth_block(b, kb, _):
                pc = b.mul(kb, T.i64(KC))
                kc = _min(b, T.i64(KC), b.sub(k, pc))
                self.pack_b(b, bp, bm, sbk, sbn, pc, jc, kc, nc, n)
                added = b.or_(b.icmp_signed(">", pc, T.i64(0)),
                              b.icmp_signed("!=", accumulate, T.i64(0)))

                def row_block(b, ib, _):
                    ic = b.mul(ib, T.i64(self.mr))
                    rows = _min(b, T.i64(self.mr), b.sub(m, ic))
                    self.pack_a(b, ap, a, sam, sak, ic, pc, kc, m)
                    tiles = _ceil_div(b, nc, self.nr)
                    lines = b.mul(T.i64(self.mr), _ceil_div(b, kc, self.lanes))
                    share = b.udiv(b.add(lines, b.sub(tiles, T.i64(1))), tiles)

                    def tile(b, t, _):
                        j0 = b.mul(t, T.i64(self.nr))
                        cols = _min(b, T.i64(self.nr), b.sub(nc, j0))
                        corner = self.at(b, c, b.add(b.mul(ic, ldc), b.add(jc, j0)))
                        self.prefetch(b, corner, ldc)
                        self.prefetch_a(b, a, sam, sak, b.add(ic, T.i64(self.mr)), pc, lines,
                                        b.mul(t, share), share)
                        accs = self.micro_kernel(b, ap, self.at(b, bp, b.mul(j0, kc)), kc)
                        self.store(b, accs, corner, ldc, rows, cols, added)
                        return []
                    counted_loop(b, tiles, tile, name="t")
                    return []
                counted_loop(b, _ceil_div(b, m, self.mr), row_block, name="ib")
                return []
            counted_loop(b, _ceil_div(b, k, KC), depth_block, name="kb")
            return []
        counted_loop(b, _ceil_div(b, n, self.nc), column_block, name="jb")
        b.ret_void()

    def pack_b(self, b, bp, bm, sbk, sbn, pc, jc, kc, nc, n):
        """Bp[t][p][j] = op(B)[pc + p, jc + t * NR + j], zero past n. B's rows contiguous:
        each row of the block read in order across every tile (so the reads stream), vectors
        masked at the edge; B stored transposed (its columns contiguous): lanes x lanes blocks
        loaded along the columns and transposed in registers; otherwise (and for the last
        kc % lanes steps) element by element."""
        lanes, vectors = self.lanes, self.nr // self.lanes
        last = b.sub(n, T.i64(1))
        tiles = _ceil_div(b, nc, self.nr)
        with b.if_else(b.icmp_signed("==", sbn, T.i64(1))) as (by_rows, other):
            with by_rows:
                def row(b, p, _):
                    src = b.add(b.mul(b.add(pc, p), sbk), jc)

                    def tile(b, t, _):
                        j = b.mul(t, T.i64(self.nr))
                        dst = self.at(b, bp, b.add(b.mul(j, kc), b.mul(p, T.i64(self.nr))))
                        for v in range(vectors):
                            first = b.add(j, T.i64(v * lanes))
                            mask = lane_mask(b, b.sub(b.sub(n, jc), first), lanes)
                            x = masked_load(b, self.at(b, bm, b.add(src, first)), self.vector,
                                            mask, self.size)
                            b.store(x, self.at(b, dst, T.i64(v * lanes)), align=64)
                        return []
                    counted_loop(b, tiles, tile, name="bt")
                    return []
                counted_loop(b, kc, row, name="p")
            with other:
                def tile(b, t, _):
                    j0 = b.add(jc, b.mul(t, T.i64(self.nr)))
                    dst = self.at(b, bp, b.mul(b.mul(t, T.i64(self.nr)), kc))
                    blocks = b.select(b.icmp_signed("==", sbk, T.i64(1)),
                                      b.udiv(kc, T.i64(lanes)), T.i64(0))

                    def block(b, q, _):   # steps p0 .. p0 + lanes of every column
                        p0 = b.mul(q, T.i64(lanes))
                        for v in range(vectors):
                            first = b.add(j0, T.i64(v * lanes))
                            columns = [b.load(self.at(b, bm, b.add(b.mul(_min(b, b.add(
                                first, T.i64(j)), last), sbn), b.add(pc, p0))),
                                typ=self.vector, align=self.size) for j in range(lanes)]
                            mask = lane_mask(b, b.sub(n, first), lanes)
                            for p, x in enumerate(transpose(b, columns)):
                                x = b.select(mask, x, zero_vector(self.scalar, lanes))
                                at = b.add(b.mul(b.add(p0, T.i64(p)), T.i64(self.nr)),
                                           T.i64(v * lanes))
                                b.store(x, self.at(b, dst, at), align=64)
                        return []
                    counted_loop(b, blocks, block, name="q")
                    done = b.mul(blocks, T.i64(lanes))

                    def element(b, f, _):   # the rest, one element at a time
                        p, j = b.add(done, b.udiv(f, T.i64(self.nr))), b.urem(f, T.i64(self.nr))
                        column = b.add(j0, j)
                        src = b.add(b.mul(b.add(pc, p), sbk), b.mul(_min(b, column, last), sbn))
                        x = b.load(self.at(b, bm, src), typ=self.scalar)
                        x = b.select(b.icmp_signed("<", column, n), x,
                                     ir.Constant(self.scalar, 0.0))
                        b.store(x, self.at(b, dst, b.add(b.mul(p, T.i64(self.nr)), j)))
                        return []
                    counted_loop(b, b.mul(b.sub(kc, done), T.i64(self.nr)), element, name="e")
                    return []
                counted_loop(b, tiles, tile, name="bt")

    def pack_a(self, b, ap, a, sam, sak, ic, pc, kc, m):
        """Ap[p][r] = op(A)[min(ic + r, m - 1), pc + p] (rows past m: anything). A's rows
        contiguous: lanes x lanes blocks loaded along the rows and transposed in registers (MR
        of the rows real), the last kc % lanes steps element by element; A stored transposed:
        MR contiguous elements (masked past m) per step; otherwise element by element."""
        lanes, mr = self.lanes, self.mr
        last = b.sub(m, T.i64(1))
        rows = [b.mul(_min(b, b.add(ic, T.i64(r)), last), sam) for r in range(mr)]
        blocks = b.select(b.icmp_signed("==", sak, T.i64(1)), b.udiv(kc, T.i64(lanes)),
                          T.i64(0))
        undefined = ir.Constant(self.vector, ir.Undefined)
        first_mr = ir.Constant(ir.VectorType(T.I32, mr), list(range(mr)))

        def block(b, q, _):
            p0 = b.add(pc, b.mul(q, T.i64(lanes)))
            loaded = [b.load(self.at(b, a, b.add(row, p0)), typ=self.vector, align=self.size)
                      for row in rows]
            for p, x in enumerate(transpose(b, loaded + [undefined] * (lanes - mr))):
                at = b.mul(b.add(b.mul(q, T.i64(lanes)), T.i64(p)), T.i64(mr))
                b.store(b.shuffle_vector(x, undefined, first_mr), self.at(b, ap, at),
                        align=self.size)
            return []
        counted_loop(b, blocks, block, name="qa")
        done = b.mul(blocks, T.i64(lanes))

        columns = b.icmp_signed("==", sam, T.i64(1))   # A stored transposed: MR in a row
        short = ir.VectorType(self.scalar, mr)
        valid = lane_mask(b, b.sub(m, ic), mr)

        def step(b, p, _):
            column = b.mul(b.add(pc, p), sak)
            dst = self.at(b, ap, b.mul(p, T.i64(mr)))
            with b.if_else(columns) as (vector, elements):
                with vector:
                    at = self.at(b, a, b.add(b.mul(ic, sam), column))
                    b.store(masked_load(b, at, short, valid, self.size), dst, align=self.size)
                with elements:
                    for r, offset in enumerate(rows):
                        x = b.load(self.at(b, a, b.add(offset, column)), typ=self.scalar)
                        b.store(x, self.at(b, dst, T.i64(r)))
            return []
        counted_loop(b, b.sub(kc, done), lambda b, p, c: step(b, b.add(done, p), c), name="pa")

    def prefetch_a(self, b, a, sam, sak, ic, pc, lines, first, count):
        """Ask for the part [first, first + count) of op(A)[ic:ic+MR, pc:pc+kc] (the next row
        block's, packed after this one's tiles) into L2, so that pack_a does not wait for
        memory: each tile of a row block asks for its share. Part u is the element
        (ic + u % MR, pc + lanes * (u // MR)), one cache line of a row of A when A's rows are
        contiguous; `lines` = MR * ceil(kc / lanes) parts in all."""
        count = _min(b, count, b.sub(lines, _min(b, first, lines)))

        def part(b, u, _):
            u = b.add(first, u)
            row, step = b.urem(u, T.i64(self.mr)), b.udiv(u, T.i64(self.mr))
            at = b.add(b.mul(b.add(ic, row), sam),
                       b.mul(b.add(pc, b.mul(step, T.i64(self.lanes))), sak))
            _prefetch(b, self.outside(b, a, at), write=False, locality=2)
            return []
        counted_loop(b, count, part, name="pfa")

    def prefetch(self, b, corner, ldc):
        """Ask for the cache lines of C's MR x NR block (to be written) before the micro-kernel
        runs, so that its loads in `store` do not wait for memory. Rows past m (and parts of
        A past it above) are harmless: a prefetch never faults."""
        for r in range(self.mr):
            row = self.outside(b, corner, b.mul(T.i64(r), ldc))
            for offset in range(0, self.nr * self.size, 64):
                _prefetch(b, self.outside(b, row, T.i64(offset // self.size)), write=True,
                          locality=3)

    def micro_kernel(self, b, ap, bp, kc):
        """The MR x NR block's accumulators after kc steps (MR * vectors values)."""
        vectors = self.nr // self.lanes

        def step(b, p, accs):
            row = self.at(b, bp, b.mul(p, T.i64(self.nr)))
            ys = [b.load(self.at(b, row, T.i64(v * self.lanes)), typ=self.vector, align=64)
                  for v in range(vectors)]
            xs = self.at(b, ap, b.mul(p, T.i64(self.mr)))
            out = []
            for r in range(self.mr):
                x = splat(b, b.load(self.at(b, xs, T.i64(r)), typ=self.scalar), self.lanes)
                for v in range(vectors):
                    acc = accs[r * vectors + v]
                    out.append(b.fadd(acc, b.fmul(x, ys[v], flags=CONTRACT), flags=CONTRACT))
            return out
        return counted_loop(b, kc, step, [zero_vector(self.scalar, self.lanes)] *
                            (self.mr * vectors), name="mk")

    def store(self, b, accs, corner, ldc, rows, cols, added):
        """C's block (rows x cols of it) = accs, or += accs when `added`."""
        vectors = self.nr // self.lanes
        masks = [lane_mask(b, b.sub(cols, T.i64(v * self.lanes)), self.lanes)
                 for v in range(vectors)]
        for r in range(self.mr):
            with b.if_then(b.icmp_signed("<", T.i64(r), rows)):
                row = self.at(b, corner, b.mul(T.i64(r), ldc))
                for v, mask in enumerate(masks):
                    ptr = self.at(b, row, T.i64(v * self.lanes))
                    value = accs[r * vectors + v]
                    old = masked_load(b, ptr, self.vector, mask, self.size)
                    value = b.select(added, b.fadd(value, old), value)
                    masked_store(b, value, ptr, mask, self.size)
