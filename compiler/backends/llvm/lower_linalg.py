"""dot_general: generated kernels for small real products, BLAS for larger float products of
matrices in memory, a fused loop nest otherwise.

`plan_blas` decides, from the static shapes alone, whether a product is a matrix product in
memory. It is when both operands and the result have the same dtype, float32, float64,
complex64 or complex128, the contraction is longer than 1, and each operand, with its batch axes
set aside, is a matrix in memory: its free axes flatten to one stride and its contracting axes to
another, one of the two being 1. An operand whose contracting axes come first (a transposed
matrix as it is stored) is read in place (BLAS's transpose flag), never copied. Batch axes become a
loop of products, one per batch element, at affine offsets (the batch axes may sit anywhere in the
operands). A contraction over zero elements fills the result with zeros.

Each product of the plan then runs, by `inline`:
- for float32/float64 products of at most INLINE_MAX_FLOPS multiply-adds (INLINE_MAX_VECTOR_FLOPS
  for a matrix times a vector) that gemm.py can read in place: gemm.py's register-blocked loop
  nest, generated into the kernel (no call, no packing, no threads);
- otherwise BLAS: blas.py's row-major emitters of sgemm/dgemm/cgemm/zgemm or the gemv routines
  (extern function pointers bound at load time). A matrix product of at least PANEL_MIN_FLOPS
  multiply-adds with at least two panels of columns is cut into column panels (C[:, lo:hi] =
  op(A) @ op(B)[:, lo:hi]) that the runtime library's thread pool hands out one at a time
  (outline.parallel_range), each a single-threaded BLAS call (OpenBLAS's per-thread
  `openblas_set_num_threads_local(1)` around it): the work follows whichever threads actually
  get cores, so a busy machine slows a product down by the cores it lost and no more
  (OpenBLAS's own threads split the product into fixed shares and wait for the slowest). Products below MIN_BLAS_FLOPS that the
  kernel does not take, or that contract more than 64 float32 terms (the loop nest sums them
  in float64: lower_fused.wide_carry; above MIN_BLAS_FLOPS they went to BLAS's float32
  sums before the kernel too), are not planned: they take the loop nest.

Everything else is the loop nest: the product written as a fused group over the iteration space
(batch..., lhs free..., contracting..., rhs free...):
    l = broadcast(transpose(lhs)), r = broadcast(transpose(rhs))   (views: no code)
    out = reduce_sum(convert(l) * convert(r), axes=contracting)
(`and`/`reduce_or` for bools) lowered by lower_fused.py. The innermost loop runs over the rhs
free axes (contiguous in rhs and in the output, accumulating into the output: the i-k-j order,
which vectorises); without rhs free axes it runs over the contracting axes with a register
accumulator. That covers integer and bool products, mixed dtypes and `preferred_element_type`
conversions, outer products (a contraction of length 1: a broadcast multiply), dot products,
and the products the plan leaves out (complex ones below MIN_BLAS_FLOPS, small real ones gemm.py
cannot read in place).
"""
import math
from typing import NamedTuple

import numpy as np

from ...ir.abstract import ShapedArray
from ...ir.ssa import Eqn, Literal, Var
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from ...primitives.linalg import free_axes
from . import blas, gemm, outline
from . import ltypes as T
from .buffers import element_pointer
from .loops import affine_offset, collapse, contiguous_strides, emit_nest
from .lower_fused import fill, lower_group, wide_bytes, wide_carry

P = PRIMITIVES
# Below this many multiply-adds a fused loop beats the call into the library (measured on
# AVX-512: a 16x16x16 product costs about as much either way); real products that gemm.py's
# kernel computes run it instead, up to INLINE_MAX_FLOPS.
MIN_BLAS_FLOPS = 16 * 16 * 16
# Real products of at most this many multiply-adds run gemm.py's register-blocked kernel
# instead of BLAS; a matrix times a vector (m or n is 1), of at most INLINE_MAX_VECTOR_FLOPS
# (gemv streams the matrix faster). Measured with AVX2 and AVX-512 code: docs/llvm.md, "Small
# matrix products".
INLINE_MAX_FLOPS = 1 << 19
INLINE_MAX_VECTOR_FLOPS = 1 << 12
# Matrix products of at least this many multiply-adds are cut into column panels of at least
# PANEL_COLUMNS (a multiple of 16), PANELS_WANTED of them when the columns allow.
PANEL_MIN_FLOPS = 1 << 21
PANEL_COLUMNS = 32
PANELS_WANTED = 4
_BLAS_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


# ------------------------------------------------------------------------- the BLAS plan

class Matrix(NamedTuple):
    """How BLAS reads one operand: stored transposed or not, and its row stride as stored (the
    leading dimension)."""
    trans: bool
    ld: int


class BlasPlan(NamedTuple):
    kind: str               # "gemm", "gemv_lhs" (lhs is the matrix), "gemv_rhs", "zeros"
    m: int
    n: int
    k: int
    lhs: Matrix
    rhs: Matrix
    incs: tuple             # (lhs, rhs) strides along the contraction (for gemv's vector)
    batch: tuple            # batch shape
    batch_strides: tuple    # (lhs, rhs, out) element strides over the batch shape


def _group(shape, strides, axes):
    """(size, stride) of `axes` flattened in that order: stride None when they do not flatten
    to one stride; 0 for a group of size 1 (any stride will do)."""
    axes = [a for a in axes if shape[a] != 1]
    size = math.prod(shape[a] for a in axes)
    if not axes:
        return size, 0
    for a, b in zip(axes, axes[1:]):
        if strides[a] != strides[b] * shape[b]:
            return size, None
    return size, strides[axes[-1]]


def _matrix(rows, cols):
    """The Matrix storing op(X) (rows x cols, each a (size, stride) group), or None."""
    (r, rs), (c, cs) = rows, cols
    if rs is None or cs is None:
        return None
    if c == 1 or cs == 1:
        ld = rs if r > 1 else c
        if ld >= c:
            return Matrix(False, ld)
    if r == 1 or rs == 1:
        ld = cs if c > 1 else r
        if ld >= r:
            return Matrix(True, ld)
    return None


def plan_blas(la, ra, out_aval, dimension_numbers):
    """The BlasPlan of dot_general(lhs: la, rhs: ra) -> out_aval, or None (loop nest)."""
    (lc, rc), (lb, rb) = dimension_numbers
    dtype = out_aval.dtype
    if dtype not in _BLAS_DTYPES or la.dtype != dtype or ra.dtype != dtype:
        return None
    ls, rs = contiguous_strides(la.shape), contiguous_strides(ra.shape)
    pairs = sorted(zip(lc, rc))   # the contraction order: the lhs's memory order
    lhs_k = _group(la.shape, ls, [a for a, _ in pairs])
    rhs_k = _group(ra.shape, rs, [b for _, b in pairs])
    m, lhs_m = _group(la.shape, ls, free_axes(la.ndim, lc, lb))
    n, rhs_n = _group(ra.shape, rs, free_axes(ra.ndim, rc, rb))
    k = lhs_k[0]
    batch = tuple(la.shape[a] for a in lb)
    out_strides = contiguous_strides(out_aval.shape)[:len(lb)]
    batch_strides = ([ls[a] for a in lb], [rs[b] for b in rb], list(out_strides))
    if k == 0 and m * n:
        return BlasPlan("zeros", m, n, k, None, None, None, batch, batch_strides)
    if k <= 1 or m * n == 1:
        return None
    a, b = _matrix((m, lhs_m), lhs_k), _matrix(rhs_k, (n, rhs_n))
    if a is None or b is None:
        return None
    kind = "gemv_lhs" if n == 1 else "gemv_rhs" if m == 1 else "gemm"
    shape, maps, _ = collapse(batch, batch_strides)
    incs = (lhs_k[1] or 1, rhs_k[1] or 1)
    plan = BlasPlan(kind, m, n, k, a, b, incs, shape, tuple(maps))
    if m * n * k >= MIN_BLAS_FLOPS:
        return plan
    # below it, the loop nest's float64 accumulator keeps long float32 contractions accurate
    return plan if inline(plan, dtype) and wide_carry(out_aval, k) is None else None


# -------------------------------------------------------------------------- emission

def _strides(matrix):
    """(row, column) element strides of op(X) for a Matrix."""
    return (1, matrix.ld) if matrix.trans else (matrix.ld, 1)


def inline(plan, dtype):
    """Whether this product runs gemm.py's generated kernel rather than BLAS."""
    limit = INLINE_MAX_FLOPS if plan.kind == "gemm" else INLINE_MAX_VECTOR_FLOPS
    return (plan.kind != "zeros" and plan.m * plan.n * plan.k <= limit
            and gemm.inline_form(dtype, plan.m, plan.n, _strides(plan.lhs),
                                 _strides(plan.rhs)) is not None)


def _call(builder, plan, dtype, a, b, c):
    """One product at element pointers a (lhs), b (rhs), c (out)."""
    lhs, rhs = plan.lhs, plan.rhs
    if inline(plan, dtype):
        gemm.emit_gemm(builder, dtype, plan.m, plan.n, plan.k, a, _strides(lhs), b,
                       _strides(rhs), c)
    elif plan.kind == "gemm":
        blas.emit_gemm(builder, dtype, plan.m, plan.n, plan.k, a, b, c, trans_a=lhs.trans,
                       trans_b=rhs.trans, lda=lhs.ld, ldb=rhs.ld, ldc=plan.n)
    elif plan.kind == "gemv_lhs":   # out (m) = op(lhs) @ rhs vector
        rows, cols = (plan.k, plan.m) if lhs.trans else (plan.m, plan.k)
        blas.emit_gemv(builder, dtype, rows, cols, a, b, c, trans_a=lhs.trans, lda=lhs.ld,
                       incx=plan.incs[1])
    else:                           # out (n) = op(rhs)^T @ lhs vector
        rows, cols = (plan.n, plan.k) if rhs.trans else (plan.k, plan.n)
        blas.emit_gemv(builder, dtype, rows, cols, b, a, c, trans_a=not rhs.trans, lda=rhs.ld,
                       incx=plan.incs[0])


def _panel_width(plan):
    """The columns per panel of a product split into panels, or None to keep it whole."""
    if plan.kind != "gemm" or plan.m * plan.n * plan.k < PANEL_MIN_FLOPS or \
            any(d != 1 for d in plan.batch):
        return None
    width = max(PANEL_COLUMNS, -(-plan.n // PANELS_WANTED + 15) // 16 * 16)
    return width if plan.n >= 2 * width else None


def _emit_panels(ctx, plan, dtype, a, b, c, width):
    """The product as column panels run by the thread pool (see the module docstring)."""
    lhs, rhs = plan.lhs, plan.rhs
    element = T.mem_type(dtype)

    def panel(pctx, pointer, lo, hi):
        bl = pctx.builder
        previous = blas.emit_local_threads(bl, 1)
        b_panel = bl.gep(pointer(b), [bl.mul(lo, T.i64(rhs.ld)) if rhs.trans else lo],
                         source_etype=element)
        c_panel = bl.gep(pointer(c), [lo], source_etype=element)
        blas.emit_gemm(bl, dtype, plan.m, bl.sub(hi, lo), plan.k, pointer(a), b_panel, c_panel,
                       trans_a=lhs.trans, trans_b=rhs.trans, lda=lhs.ld, ldb=rhs.ld,
                       ldc=plan.n)
        blas.emit_local_threads(bl, previous)
    outline.parallel_range(ctx, [a, b, c], plan.n, width, panel)


def _emit_blas(ctx, plan, lhs, rhs, out):
    builder, dtype = ctx.builder, out.aval.dtype
    if plan.kind == "zeros":
        fill(builder, out, T.const(dtype, 0))
        return
    width = _panel_width(plan)
    if width is not None and not inline(plan, dtype):
        _emit_panels(ctx, plan, dtype, lhs.ptr, rhs.ptr, out.ptr, width)
        return

    def body(b, index, carried):
        pointers = [element_pointer(b, buf, affine_offset(b, 0, strides, index))
                    for buf, strides in zip((lhs, rhs, out), plan.batch_strides)]
        _call(b, plan, dtype, *pointers)
        return carried
    if plan.batch == (0,):
        return
    emit_nest(builder, plan.batch, body, name="batch")


# ------------------------------------------------------------------------ the loop nest

def _loop_nest(ctx, outs, ins, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = ins
    out = outs[0]
    la, ra, dtype = lhs.aval, rhs.aval, out.aval.dtype
    lf, rf = free_axes(la.ndim, lc, lb), free_axes(ra.ndim, rc, rb)
    nb, nl, nc = len(lb), len(lf), len(lc)
    space = ([la.shape[i] for i in lb] + [la.shape[i] for i in lf] + [la.shape[i] for i in lc]
             + [ra.shape[i] for i in rf])
    names = iter(f"dot_{k}" for k in range(16))

    def var(shape, dt):
        return Var(next(names), ShapedArray(shape, dt))

    def spread(x, aval, order, positions):
        """x transposed into `order` and broadcast to the iteration space at `positions`."""
        t = var([aval.shape[i] for i in order], aval.dtype)
        b = var(space, aval.dtype)
        eqns = [Eqn([t], P["transpose"], [x], {"permutation": tuple(order)}),
                Eqn([b], P["broadcast_in_dim"], [t], {"shape": tuple(space),
                                                      "broadcast_dimensions": tuple(positions)})]
        if aval.dtype == dtype:
            return b, eqns
        c = var(space, dtype)
        return c, eqns + [Eqn([c], P["convert_element_type"], [b],
                              {"new_dtype": dtype, "weak_type": False})]

    lhs_v, rhs_v = var(la.shape, la.dtype), var(ra.shape, ra.dtype)
    contract_pos = list(range(nb + nl, nb + nl + nc))
    l, l_eqns = spread(lhs_v, la, list(lb) + lf + list(lc),
                       list(range(nb)) + list(range(nb, nb + nl)) + contract_pos)
    r, r_eqns = spread(rhs_v, ra, list(rb) + list(rc) + rf,
                       list(range(nb)) + contract_pos + list(range(nb + nl + nc, len(space))))
    boolean = dtype.kind == "b"
    prod = var(space, dtype)
    result = var(out.aval.shape, dtype)
    eqns = l_eqns + r_eqns + [
        Eqn([prod], P["and" if boolean else "mul"], [l, r], {}),
        Eqn([result], P["reduce_or" if boolean else "reduce_sum"], [prod],
            {"axes": tuple(contract_pos)})]
    lower_group(ctx, eqns, [(lhs_v, lhs), (rhs_v, rhs)], [(result, out)])


def _dot_general(ctx, outs, ins, *, dimension_numbers, precision=None,
                 preferred_element_type=None):
    lhs, rhs = ins
    plan = None
    if lhs.const is None and rhs.const is None:
        plan = plan_blas(lhs.aval, rhs.aval, outs[0].aval, dimension_numbers)
    if plan is None:
        _loop_nest(ctx, outs, ins, dimension_numbers)
    else:
        _emit_blas(ctx, plan, lhs, rhs, outs[0])


def _scratch_bytes(eqn):
    """The workspace of a product computed by the loop nest: its wide accumulator (a float32
    contraction of many terms sums in float64: lower_fused.wide_sums)."""
    lhs, rhs = eqn.invars
    out = eqn.outvars[0].aval
    dimension_numbers = eqn.params["dimension_numbers"]
    if not any(isinstance(x, Literal) for x in eqn.invars) and \
            plan_blas(lhs.aval, rhs.aval, out, dimension_numbers) is not None:
        return 0
    carry = wide_carry(out, math.prod(lhs.aval.shape[d] for d in dimension_numbers[0][0]))
    return 0 if carry is None else wide_bytes(out, carry)


LLVM[PRIMITIVES["dot_general"]] = _dot_general
LLVM_SCRATCH[PRIMITIVES["dot_general"]] = _scratch_bytes
