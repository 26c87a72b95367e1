"""Small real matrix products as generated, register-blocked loop nests (no library call).

A BLAS call has a fixed cost (argument checks, packing both operands into its own layout,
waking its threads) that a product of a few thousand to a few hundred thousand multiply-adds
does not repay; XLA emits an inline loop for those. `emit_gemm` computes the row-major
C (m x n, row stride ldc) = op(A) (m x k) @ op(B) (k x n) for float32 and float64, with op(A)[i, p]
at `a + i * a_strides[0] + p * a_strides[1]` and op(B)[p, j] at `b + p * b_strides[0] + j *
b_strides[1]` (element strides, so transposed operands are read in place), in one of two forms:

- rows ("axpy"), when op(B)'s rows are contiguous (b_strides[1] == 1): C is cut into blocks of
  `rows` rows by one 64-byte vector (16 floats, 8 doubles; the last block of a row is loaded
  and stored under a lane mask when narrower). A block's accumulators stay in registers over
  the whole contraction; each step loads one vector of a row of B, broadcasts one element of
  A per row, and multiply-adds. B streams through once per block of rows of C, A once per
  block column.
- dots, when op(A)'s rows and op(B)'s columns are both contiguous along the contraction
  (B stored transposed) and C has at most DOT_MAX_ROWS rows: each element of a 4 x 2 block of
  C is a dot product of two contiguous vectors, accumulated in a vector register over the contraction and summed across
  its lanes at the end; the last k % lanes terms are added one by one.

The blocks fill the target's vector registers (`BLOCKS`): with AVX-512 (32 registers of 64
bytes) 8 rows in the rows form and 64-byte steps in the dots form; otherwise (16 registers,
AVX2 and below) 4 rows and 32-byte steps, since the larger blocks spill there and run at half
speed (docs/llvm.md, "Small matrix products").

The vectors are LLVM vectors of a fixed byte size, not the target's: LLVM splits or widens them
for each target (two ymm registers on AVX2, one zmm on AVX-512, four xmm on the x86-64
baseline), so the same IR is right, and register-blocked, on every x86-64. Multiplies and adds
are marked `contract` (fused into FMAs where the target has them) and the dot form's lanes
`reassoc` (its partial sums are added in a different order than a serial loop would; BLAS does
the same).

`inline_form` says which form applies, or None (the caller then takes gemm_packed.py's kernel,
or BLAS). `lane_mask`, `masked_load` and `masked_store` serve both kernels.
"""
from __future__ import annotations

from typing import NamedTuple

import llvmlite.ir as ir
import numpy as np

from . import ltypes as T
from . import target
from .calls import intrinsic
from .loops import counted_loop, emit_nest

VECTOR_BYTES = 64        # bytes of C per block row in the rows form
DOT_ROWS, DOT_COLS = 4, 2
DOT_MAX_ROWS = 8         # the dots form's products have at most this many rows


class Blocks(NamedTuple):
    rows: int            # rows of C per block in the rows form
    dot_bytes: int       # bytes of the contraction per step in the dots form


BLOCKS = {True: Blocks(8, 64), False: Blocks(4, 32)}   # has AVX-512 -> blocks


def blocks() -> Blocks:
    """The register blocks for the CPU code is generated for."""
    return BLOCKS["+avx512f" in target.jit_cpu()[1].split(",")]
CONTRACT = ("contract",)
REASSOC = ("contract", "reassoc", "nsz")
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def inline_form(dtype, m, n, a_strides, b_strides) -> str | None:
    """'rows', 'dots' or None: the form that computes this product (see the docstring). The
    rows form needs a few columns to fill its vectors: a product with fewer (a matrix times
    a vector) takes the dots form where it can. The dots form reads B once per block of rows
    and sums lanes for every element of C: beyond DOT_MAX_ROWS rows BLAS is faster."""
    if np.dtype(dtype) not in DTYPES:
        return None
    rows = b_strides[1] == 1 or n == 1
    dots = a_strides[1] == 1 and b_strides[0] == 1 and m <= DOT_MAX_ROWS
    if rows and (n >= 4 or not dots):
        return "rows"
    return "dots" if dots else None


def emit_gemm(builder, dtype, m, n, k, a, a_strides, b, b_strides, c, ldc=None) -> None:
    """C = op(A) @ op(B) at element pointers a, b, c (see the module docstring); m, n, k, the
    strides and C's row stride `ldc` (n when None) are Python ints, and `inline_form` must not
    be None for them."""
    emit = {"rows": _rows_form, "dots": _dots_form}[inline_form(dtype, m, n, a_strides,
                                                                b_strides)]
    emit(builder, np.dtype(dtype), m, n, k, a, a_strides, b, b_strides, c,
         n if ldc is None else ldc)


# ------------------------------------------------------------------------- helpers

def _blocks(size, step):
    """[(start, count, width)]: `count` blocks of `width` from `start` covering [0, size)."""
    full = size // step
    out = [(0, full, step)] if full else []
    if size % step:
        out.append((full * step, 1, size % step))
    return out


def _at(builder, base, scalar, offset):
    return builder.gep(base, [offset], inbounds=True, source_etype=scalar)


def _offset(builder, *terms):
    """sum(index * stride) + constant as an i64 value; terms are (index value, stride) pairs
    or plain ints."""
    total = T.i64(0)
    for term in terms:
        if isinstance(term, int):
            value = T.i64(term)
        else:
            index, stride = term
            value = builder.mul(index, T.i64(stride), flags=("nsw",))
        total = builder.add(total, value, flags=("nsw",))
    return total


def splat(builder, value, lanes):
    vector = ir.VectorType(value.type, lanes)
    single = builder.insert_element(ir.Constant(vector, ir.Undefined), value, T.I32(0))
    return builder.shuffle_vector(single, ir.Constant(vector, ir.Undefined),
                                  ir.Constant(ir.VectorType(T.I32, lanes), [0] * lanes))


def zero_vector(scalar, lanes):
    return ir.Constant(ir.VectorType(scalar, lanes), [ir.Constant(scalar, 0.0)] * lanes)


def lane_mask(builder, count, lanes):
    """<lanes x i1>: lane l < count (an i64 value)."""
    indices = ir.Constant(ir.VectorType(T.I64, lanes), list(range(lanes)))
    return builder.icmp_signed("<", indices, splat(builder, count, lanes))


def masked_load(builder, ptr, vector, mask, align):
    """The lanes of `vector` type at `ptr` (aligned to `align` bytes) that `mask` selects,
    zeros elsewhere; the others are not read."""
    zeros = zero_vector(vector.element, vector.count)
    return intrinsic(builder, "masked.load", [ptr, T.I32(align), mask, zeros], ret=vector,
                     overloads=[vector, T.PTR])


def masked_store(builder, value, ptr, mask, align):
    """Store the lanes of `value` that `mask` selects at `ptr` (aligned to `align` bytes); the
    others are not written."""
    intrinsic(builder, "masked.store", [value, ptr, T.I32(align), mask], ret=T.VOID,
              overloads=[value.type, T.PTR])


def _madd(builder, x, y, acc):
    return builder.fadd(acc, builder.fmul(x, y, flags=CONTRACT), flags=CONTRACT)


# ---------------------------------------------------------------------- the rows form

def _rows_form(builder, dtype, m, n, k, a, a_strides, b, b_strides, c, ldc):
    (sam, sak), (sbk, _) = a_strides, b_strides
    scalar, align = T.reg_type(dtype), dtype.itemsize
    lanes = VECTOR_BYTES // align
    vector = ir.VectorType(scalar, lanes)
    for row0, row_blocks, rows in _blocks(m, blocks().rows):
        for col0, col_blocks, width in _blocks(n, lanes):
            # a narrower last block of a row: whole vectors, loaded and stored under a mask
            mask = None if width == lanes else lane_mask(builder, T.i64(width), lanes)

            def block(bld, index, carried, row0=row0, col0=col0, rows=rows, mask=mask):
                i0 = bld.add(T.i64(row0), bld.mul(index[0], T.i64(rows)))
                j0 = bld.add(T.i64(col0), bld.mul(index[1], T.i64(lanes)))

                def step(bl, p, accs):
                    at = _at(bl, b, scalar, bl.add(_offset(bl, (p, sbk)), j0))
                    row = bl.load(at, typ=vector, align=align) if mask is None else \
                        masked_load(bl, at, vector, mask, align)
                    out = []
                    for r, acc in enumerate(accs):
                        i = bl.add(i0, T.i64(r))
                        x = bl.load(_at(bl, a, scalar, _offset(bl, (i, sam), (p, sak))),
                                    typ=scalar)
                        out.append(_madd(bl, splat(bl, x, lanes), row, acc))
                    return out
                accs = counted_loop(bld, k, step, [zero_vector(scalar, lanes)] * rows, name="p")
                for r, acc in enumerate(accs):
                    at = _at(bld, c, scalar,
                             bld.add(_offset(bld, (bld.add(i0, T.i64(r)), ldc)), j0))
                    if mask is None:
                        bld.store(acc, at, align=align)
                    else:
                        masked_store(bld, acc, at, mask, align)
                return carried
            emit_nest(builder, [row_blocks, col_blocks], block, name="blk")


# ---------------------------------------------------------------------- the dots form

def _lane_sum(builder, vector, lanes):
    """The sum of a vector's lanes, halving it each step (reassociated like the dot)."""
    while lanes > 1:
        half = lanes // 2
        low = builder.shuffle_vector(vector, vector,
                                     ir.Constant(ir.VectorType(T.I32, half), list(range(half))))
        high = builder.shuffle_vector(vector, vector, ir.Constant(
            ir.VectorType(T.I32, half), list(range(half, lanes))))
        vector, lanes = builder.fadd(low, high, flags=REASSOC), half
    return builder.extract_element(vector, T.I32(0))


def _dots_form(builder, dtype, m, n, k, a, a_strides, b, b_strides, c, ldc):
    (sam, _), (_, sbn) = a_strides, b_strides
    scalar, align = T.reg_type(dtype), dtype.itemsize
    lanes = min(blocks().dot_bytes // align, 1 << (k.bit_length() - 1))
    vector = ir.VectorType(scalar, lanes)
    chunks, tail = k // lanes, k % lanes
    for row0, row_blocks, rows in _blocks(m, DOT_ROWS):
        for col0, col_blocks, cols in _blocks(n, DOT_COLS):
            def block(bld, index, carried, row0=row0, col0=col0, rows=rows, cols=cols):
                i0 = bld.add(T.i64(row0), bld.mul(index[0], T.i64(rows)))
                j0 = bld.add(T.i64(col0), bld.mul(index[1], T.i64(cols)))
                a_rows = [_offset(bld, (bld.add(i0, T.i64(r)), sam)) for r in range(rows)]
                b_cols = [_offset(bld, (bld.add(j0, T.i64(s)), sbn)) for s in range(cols)]

                def step(bl, q, accs, width, typ, base):
                    start = bl.add(T.i64(base), bl.mul(q, T.i64(width)))
                    xs = [bl.load(_at(bl, a, scalar, bl.add(o, start)), typ=typ, align=align)
                          for o in a_rows]
                    ys = [bl.load(_at(bl, b, scalar, bl.add(o, start)), typ=typ, align=align)
                          for o in b_cols]
                    return [_madd(bl, xs[r], ys[s], accs[r * cols + s])
                            for r in range(rows) for s in range(cols)]
                accs = counted_loop(
                    bld, chunks, lambda bl, q, accs: step(bl, q, accs, lanes, vector, 0),
                    [zero_vector(scalar, lanes)] * (rows * cols), name="q")
                sums = [_lane_sum(bld, acc, lanes) for acc in accs]
                sums = counted_loop(
                    bld, tail, lambda bl, q, accs: step(bl, q, accs, 1, scalar, chunks * lanes),
                    sums, name="t")
                for r in range(rows):
                    for s in range(cols):
                        at = bld.add(_offset(bld, (bld.add(i0, T.i64(r)), ldc)),
                                     bld.add(j0, T.i64(s)))
                        bld.store(sums[r * cols + s], _at(bld, c, scalar, at), align=align)
                return carried
            emit_nest(builder, [row_blocks, col_blocks], block, name="blk")
