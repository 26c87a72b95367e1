"""dot_general: kiln's own kernels for real products, BLAS for complex products of matrices in
memory, a fused loop nest otherwise.

`plan_blas` decides, from the static shapes alone, whether a product is a matrix product in
memory. It is when both operands and the result have the same dtype, float32, float64,
complex64 or complex128, the contraction is longer than 1, and each operand, with its batch axes
set aside, is a matrix in memory: its contracting axes flatten to one stride, and its rows (the
lhs's free axes) or columns (the rhs's) to another, one of the two being 1 (or neither: a batch
axis after them, Strided; copied for the packed kernel and BLAS, `staged`). An operand whose contracting axes come first
(a transposed matrix as it is stored) is read in place (its strides, or BLAS's transpose flag),
never copied. Batch axes become a loop of products, one per batch element, at affine offsets (the
batch axes may sit anywhere in the operands). Free axes that do not flatten to one stride (on
both sides of the contraction: `einsum('ikj,kn->ijn')`) loop over products too: one run of them
forms the rows or columns (`matrix_axes`), the others join the loop, and C's rows then have a
stride of their own (`ldc`). A contraction over zero elements fills the result with zeros.

Each product of the plan then runs, by `inline` and `packed`:
- float32/float64 products of at most INLINE_MAX_FLOPS multiply-adds (INLINE_MAX_VECTOR_FLOPS
  for a matrix times a vector), or of at most INLINE_MAX_ROWS rows or one vector's width
  (rows form), that gemm.py can read in place: gemm.py's register-blocked loop nest,
  generated into the kernel (no call, no packing, no threads);
- other float32/float64 matrix products: gemm_packed.py's packed, cache-blocked kernel (one
  function per dtype, in the runtime library); a Strided operand is first copied into the
  workspace in matrix order (`staged`);
- complex matrix products and matrix-vector products: BLAS, blas.py's row-major emitters of
  cgemm/zgemm and the gemv routines (extern function pointers bound at load time), OpenBLAS on
  one thread; a Strided operand is copied first, as for the packed kernel.
An operand may be read through strides other than its own (`read_transposes`: a transpose
that only the product reads, joined to it as one fusion equation).
A matrix product of at least SPLIT_MIN_FLOPS multiply-adds is cut into panels of rows or
columns of the result, run as tasks of the thread pool (pool.py) that each call the packed
kernel (or BLAS), so the product follows whichever threads get cores on a busy machine.
Products below MIN_BLAS_FLOPS that gemm.py's loop nest does not take, or that contract more
than 64 float32 terms (the fused loop nest sums them in float64: lower_fused.wide_carry), are
not planned: they take the fused loop nest.

Everything else is the fused loop nest: the product written as a fused group over the
iteration space (batch..., lhs free..., contracting..., rhs free...):
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

import llvmlite.ir as ir
import numpy as np

from ...ir.abstract import ShapedArray
from ...ir.ssa import Eqn, Function, Literal, Var
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_INPLACE, LLVM_SCRATCH
from ...primitives.linalg import free_axes
from . import blas, externs, gemm, gemm_packed, parallel, pool
from . import ltypes as T
from .buffers import Buffer, View, element_pointer, nbytes
from .loops import affine_offset, collapse, contiguous_strides, emit_nest
from .lower_fused import fill, lower_fusion, lower_group, wide_bytes, wide_carry
from .lower_fused import in_place as fused_in_place, scratch_bytes as fused_scratch
from .lower_structural import copy_nest

P = PRIMITIVES
# Below this many multiply-adds a fused loop beats the call into the library (measured on
# AVX-512: a 16x16x16 product costs about as much either way); real products that gemm.py's
# kernel computes run it instead, up to INLINE_MAX_FLOPS.
MIN_BLAS_FLOPS = 16 * 16 * 16
# Real products of at most this many multiply-adds run gemm.py's register-blocked loop nest
# instead of the packed kernel (packing costs more than it saves below it); a matrix times a
# vector (m or n is 1), of at most INLINE_MAX_VECTOR_FLOPS (gemv streams the matrix faster);
# in the rows form at any size, products of at most INLINE_MAX_ROWS rows (one pass over B
# either way) or at most one vector (gemm.VECTOR_BYTES) wide (the packed kernel's tiles would
# be mostly padding). Measured with AVX2 and AVX-512 code: docs/llvm.md, "Matrix products".
INLINE_MAX_FLOPS = 1 << 19
INLINE_MAX_VECTOR_FLOPS = 1 << 12
INLINE_MAX_ROWS = 8
# Matrix products (gemm) of at least SPLIT_MIN_FLOPS multiply-adds run as panels on the thread
# pool (`_emit_panels`), PANELS_PER_THREAD per thread, each of at least TASK_FLOPS multiply-adds
# and PANEL_ALIGN rows or columns; the packed kernel and OpenBLAS run on one thread each.
TASK_FLOPS = 1 << 22
SPLIT_MIN_FLOPS = 2 * TASK_FLOPS
PANELS_PER_THREAD = 2
PANEL_ALIGN = 64
_BLAS_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


# ------------------------------------------------------------------------- the BLAS plan

class Matrix(NamedTuple):
    """How BLAS reads one operand: stored transposed or not, and its row stride as stored (the
    leading dimension)."""
    trans: bool
    ld: int


class Strided(NamedTuple):
    """An operand of a real product with no unit stride in the matrix (a batch axis after its
    rows or columns): op(X)[i, j] at i * rows + j * cols. The packed kernel and gemm.py's rows
    form read it in place; BLAS cannot."""
    rows: int
    cols: int


class BlasPlan(NamedTuple):
    kind: str               # "gemm", "gemv_lhs" (lhs is the matrix), "gemv_rhs", "zeros"
    m: int
    n: int
    k: int
    lhs: Matrix             # or Strided (real "gemm" products only)
    rhs: Matrix
    incs: tuple             # (lhs, rhs) strides along the contraction (for gemv's vector)
    batch: tuple            # the shape of the loop of products: batch axes, then free axes
    batch_strides: tuple    # outside the matrices; (lhs, rhs, out) element strides over it
    ldc: int                # C's row stride


def flat_group(shape, strides, axes):
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


def matrix_axes(shape, strides, axes, last):
    """The run of `axes` (an operand's free axes, in order) that forms the rows (the columns,
    with `last`) of each product: all of them when they flatten to one stride; otherwise, for
    columns, the run that ends with the last axis (C's columns must be contiguous), and for
    rows the run with unit stride (each product then reads whole cache lines of the operand:
    a run with a larger stride would read a line once per product looping over the others),
    or else the largest. The other axes loop over products."""
    axes = [a for a in axes if shape[a] != 1]
    runs = []
    for a in axes:
        if runs and strides[runs[-1][-1]] == strides[a] * shape[a]:
            runs[-1].append(a)
        else:
            runs.append([a])
    if len(runs) <= 1 or last:
        return runs[-1] if runs else []
    return max(runs, key=lambda run: (strides[run[-1]] == 1, math.prod(shape[a] for a in run)))


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


def plan_blas(la, ra, out_aval, dimension_numbers, strides=(None, None)):
    """The BlasPlan of dot_general(lhs: la, rhs: ra) -> out_aval, or None (loop nest);
    `strides`: each operand's element strides (None: contiguous; a transposed operand read in
    place, `through_views`)."""
    (lc, rc), (lb, rb) = dimension_numbers
    dtype = out_aval.dtype
    if dtype not in _BLAS_DTYPES or la.dtype != dtype or ra.dtype != dtype:
        return None
    ls, rs = (contiguous_strides(aval.shape) if given is None else list(given)
              for aval, given in zip((la, ra), strides))
    os_ = contiguous_strides(out_aval.shape)
    pairs = sorted(zip(lc, rc))   # the contraction order: the lhs's memory order
    lhs_k = flat_group(la.shape, ls, [a for a, _ in pairs])
    rhs_k = flat_group(ra.shape, rs, [b for _, b in pairs])
    lf, rf = free_axes(la.ndim, lc, lb), free_axes(ra.ndim, rc, rb)
    rows = matrix_axes(la.shape, ls, lf, last=False)
    cols = matrix_axes(ra.shape, rs, rf, last=True)
    m, lhs_m = flat_group(la.shape, ls, rows)
    n, rhs_n = flat_group(ra.shape, rs, cols)
    k = lhs_k[0]
    # the products' loop: batch axes, then the free axes outside the rows and the columns
    nb, nl = len(lb), len(lf)
    outer_l = [a for a in lf if a not in rows]
    outer_r = [b for b in rf if b not in cols]
    batch = tuple(la.shape[a] for a in lb) + tuple(la.shape[a] for a in outer_l) + \
        tuple(ra.shape[b] for b in outer_r)
    batch_strides = ([ls[a] for a in lb] + [ls[a] for a in outer_l] + [0] * len(outer_r),
                     [rs[b] for b in rb] + [0] * len(outer_l) + [rs[b] for b in outer_r],
                     list(os_[:nb]) + [os_[nb + lf.index(a)] for a in outer_l] +
                     [os_[nb + nl + rf.index(b)] for b in outer_r])
    ldc = os_[nb + lf.index(rows[-1])] if rows else n
    if k == 0 and m * n:
        return BlasPlan("zeros", m, n, k, None, None, None, tuple(out_aval.shape[:nb]),
                        (), ldc)
    if k <= 1 or m * n == 1 or lhs_k[1] is None or rhs_k[1] is None:
        return None
    a, b = _matrix((m, lhs_m), lhs_k), _matrix(rhs_k, (n, rhs_n))
    if a is None or b is None:   # complex ones are copied for BLAS (`staged`)
        a, b = a or Strided(lhs_m, lhs_k[1]), b or Strided(rhs_k[1], rhs_n)
        kind = "gemm"
    else:
        kind = "gemv_lhs" if n == 1 else "gemv_rhs" if m == 1 else "gemm"
    if kind == "gemv_lhs" and ldc != 1 and m > 1:   # gemv writes a contiguous vector
        if dtype not in gemm.DTYPES:
            return None
        kind = "gemm"
    shape, maps, _ = collapse(batch, batch_strides)
    incs = (lhs_k[1] or 1, rhs_k[1] or 1)
    plan = BlasPlan(kind, m, n, k, a, b, incs, shape, tuple(maps), ldc)
    if m * n * k >= MIN_BLAS_FLOPS:
        return plan
    # below it, the loop nest's float64 accumulator keeps long float32 contractions accurate
    return plan if inline(plan, dtype) and wide_carry(out_aval, k) is None else None


# -------------------------------------------------------------------------- emission

def _strides(matrix):
    """(row, column) element strides of op(X) for a Matrix or a Strided operand."""
    if isinstance(matrix, Strided):
        return tuple(matrix)
    return (1, matrix.ld) if matrix.trans else (matrix.ld, 1)


def inline(plan, dtype):
    """Whether this product runs gemm.py's unpacked loop nest (rather than the packed kernel
    or BLAS)."""
    if plan.kind == "zeros":
        return False
    form = gemm.inline_form(dtype, plan.m, plan.n, _strides(plan.lhs), _strides(plan.rhs))
    limit = INLINE_MAX_FLOPS if plan.kind == "gemm" else INLINE_MAX_VECTOR_FLOPS
    narrow = plan.m <= INLINE_MAX_ROWS or plan.n * np.dtype(dtype).itemsize <= gemm.VECTOR_BYTES
    return form is not None and (plan.m * plan.n * plan.k <= limit or
                                 (plan.kind == "gemm" and form == "rows" and narrow))


def packed(dtype):
    """Whether matrix products of this dtype that gemm.py's loop nest does not take run
    gemm_packed.py's kernel (float32, float64) rather than BLAS (complex)."""
    return np.dtype(dtype) in gemm.DTYPES


def _call(builder, plan, dtype, a, b, c):
    """One product at element pointers a (lhs), b (rhs), c (out)."""
    lhs, rhs = plan.lhs, plan.rhs
    if inline(plan, dtype):
        gemm.emit_gemm(builder, dtype, plan.m, plan.n, plan.k, a, _strides(lhs), b,
                       _strides(rhs), c, plan.ldc)
    elif plan.kind == "gemm" and packed(dtype):
        gemm_packed.emit_packed_gemm(builder, dtype, plan.m, plan.n, plan.k, a, _strides(lhs),
                                     b, _strides(rhs), c, plan.ldc)
    elif plan.kind == "gemm":
        blas.emit_gemm(builder, dtype, plan.m, plan.n, plan.k, a, b, c, trans_a=lhs.trans,
                       trans_b=rhs.trans, lda=lhs.ld, ldb=rhs.ld, ldc=plan.ldc)
    elif plan.kind == "gemv_lhs":   # out (m) = op(lhs) @ rhs vector
        rows, cols = (plan.k, plan.m) if lhs.trans else (plan.m, plan.k)
        blas.emit_gemv(builder, dtype, rows, cols, a, b, c, trans_a=lhs.trans, lda=lhs.ld,
                       incx=plan.incs[1])
    else:                           # out (n) = op(rhs)^T @ lhs vector
        rows, cols = (plan.n, plan.k) if rhs.trans else (plan.k, plan.n)
        blas.emit_gemv(builder, dtype, rows, cols, b, a, c, trans_a=not rhs.trans, lda=rhs.ld,
                       incx=plan.incs[0])


def _emit_blas(ctx, plan, lhs, rhs, out):
    builder, dtype = ctx.builder, out.aval.dtype
    if plan.kind == "zeros":
        fill(builder, out, T.const(dtype, 0))
        return
    if split(plan, dtype):
        _emit_panels(ctx, plan, lhs, rhs, out)
        return

    def body(b, index, carried):
        pointers = [element_pointer(b, buf, affine_offset(b, 0, strides, index))
                    for buf, strides in zip((lhs, rhs, out), plan.batch_strides)]
        _call(b, plan, dtype, *pointers)
        return carried
    if plan.batch == (0,):
        return
    emit_nest(builder, plan.batch, body, name="batch")


# ----------------------------------------------------------- products split into panels

def split(plan, dtype):
    """Whether this product runs as panels on the thread pool (see `_emit_panels`)."""
    return (plan.kind == "gemm" and plan.m * plan.n * plan.k >= SPLIT_MIN_FLOPS
            and not inline(plan, dtype))


def _emit_panels(ctx, plan, lhs, rhs, out):
    """The product (each one of the batch) cut into panels of C, whole rows when C has more
    rows than columns, else whole columns, each computed by the packed kernel (a
    single-threaded BLAS call for complex products), run as dynamic tasks of the thread pool
    (pool.py): whichever threads get cores compute the panels, so a thread the OS deschedules
    holds up at most one panel. The number of panels is decided when the code runs:
    PANELS_PER_THREAD per thread (`kiln_num_threads`), no more than TASK_FLOPS multiply-adds
    each would give, each at least PANEL_ALIGN rows or columns wide (a multiple of it, but the
    last)."""
    module, builder, dtype = ctx.module, ctx.builder, out.aval.dtype
    by_rows = plan.m > plan.n
    length = plan.m if by_rows else plan.n
    most = max(1, min(plan.m * plan.n * plan.k // TASK_FLOPS, -(-length // PANEL_ALIGN)))
    threads = builder.load(externs.declare(module, "kiln_num_threads"), typ=T.I64)
    width, panels = panel_split(builder, T.i64(length), T.i64(most), threads)
    batch = math.prod(plan.batch)
    if batch == 0:
        return
    task = _panel_task(ctx, plan, dtype, by_rows, length)
    env = parallel.pack_env(builder, [lhs.ptr, rhs.ptr, out.ptr, width, panels])
    pool.emit_run_tasks(builder, task, env, builder.mul(panels, T.i64(batch)), False)


def panel_split(builder, length, most, threads):
    """(width, count) of the panels `length` rows or columns are cut into (i64 values):
    PANELS_PER_THREAD per thread, at most `most` (and at least one), each a multiple of
    PANEL_ALIGN wide but the last."""
    def smaller(x, y):
        return builder.select(builder.icmp_signed("<", x, y), x, y)
    one, align = T.i64(1), T.i64(PANEL_ALIGN)
    panels = smaller(builder.mul(threads, T.i64(PANELS_PER_THREAD)), most)
    panels = builder.select(builder.icmp_signed("<", panels, one), one, panels)
    aligned = builder.udiv(builder.add(length, T.i64(PANEL_ALIGN - 1)), align)
    width = builder.mul(builder.udiv(builder.add(aligned, builder.sub(panels, one)), panels),
                        align)   # ceil(aligned blocks / panels) blocks
    return width, builder.udiv(builder.add(length, builder.sub(width, one)), width)


def _panel_task(ctx, plan, dtype, by_rows, length):
    """`task(env, i)`: panel i % panels of product i // panels of the batch."""
    module = ctx.module
    task = ir.Function(module, pool.TASK_TYPE, module.get_unique_name(f"{ctx.function.name}.panel"))
    task.linkage = "internal"
    b = ir.IRBuilder(task.append_basic_block("entry"))
    env, i = task.args
    a, bp, c, width, panels = parallel.unpack_env(b, env, [T.PTR] * 3 + [T.I64] * 2)
    element = T.mem_type(dtype)
    rest, index = b.udiv(i, panels), []
    for size in reversed(plan.batch):   # the batch index, unravelled
        index.insert(0, b.urem(rest, T.i64(size)))
        rest = b.udiv(rest, T.i64(size))
    a, bp, c = (b.gep(p, [affine_offset(b, 0, strides, index)], source_etype=element)
                for p, strides in zip((a, bp, c), plan.batch_strides))
    start = b.mul(b.urem(i, panels), width)
    stop = b.add(start, width)
    size = b.sub(b.select(b.icmp_signed("<", stop, T.i64(length)), stop, T.i64(length)), start)
    lhs_rows, _ = _strides(plan.lhs)
    _, rhs_cols = _strides(plan.rhs)
    if by_rows:   # rows [start, start + size) of op(A) and of C
        a = b.gep(a, [b.mul(start, T.i64(lhs_rows))], source_etype=element)
        c = b.gep(c, [b.mul(start, T.i64(plan.ldc))], source_etype=element)
        m, n = size, plan.n
    else:         # columns of op(B) and of C
        bp = b.gep(bp, [b.mul(start, T.i64(rhs_cols))], source_etype=element)
        c = b.gep(c, [start], source_etype=element)
        m, n = plan.m, size
    if packed(dtype):
        gemm_packed.emit_packed_gemm(b, dtype, m, n, plan.k, a, _strides(plan.lhs), bp,
                                     _strides(plan.rhs), c, plan.ldc)
    else:
        blas.emit_gemm(b, dtype, m, n, plan.k, a, bp, c, trans_a=plan.lhs.trans,
                       trans_b=plan.rhs.trans, lda=plan.lhs.ld, ldb=plan.rhs.ld, ldc=plan.ldc)
    b.ret_void()
    return task


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
    _product(ctx, outs[0], ins, dimension_numbers)


def _product(ctx, out, ins, dimension_numbers, strides=(None, None)):
    """The product into `out` of operands `ins` (Buffers holding the operands' elements at
    `strides`, None: contiguous; only planned products take other strides)."""
    lhs, rhs = ins
    plan = None
    if lhs.const is None and rhs.const is None:
        plan = plan_blas(lhs.aval, rhs.aval, out.aval, dimension_numbers, strides)
    if plan is None:
        _loop_nest(ctx, [out], ins, dimension_numbers)
    elif staged(plan, out.aval.dtype):
        _emit_staged(ctx, lhs, rhs, out, dimension_numbers, strides)
    else:
        _emit_blas(ctx, plan, lhs, rhs, out)


# ------------------------------------------- operands without a unit stride, packed kernel

def staged(plan, dtype):
    """Whether the packed kernel's operands with no unit stride in their matrices (Strided:
    a batch axis after the rows or columns) are first copied into the workspace, batch axes,
    then rows (columns), then contraction, in memory order. Read in place, each product of
    the batch reads a whole cache line for each element it packs (the lines hold the other
    products' elements): 64 float32 products of 256^3 with the batch last in one operand
    took 47-50 ms of CPU in the kernel, against 17 ms for contiguous operands, and a copy
    streams the operand once (docs/llvm.md, "Operands read through strides"). BLAS (complex
    products) needs a unit stride, so they are always copied."""
    return plan.kind == "gemm" and not inline(plan, dtype) and \
        (isinstance(plan.lhs, Strided) or isinstance(plan.rhs, Strided))


def _staged_orders(la, ra, dimension_numbers):
    """The axis orders the staged operands are copied in (module docstring of `staged`)."""
    (lc, rc), (lb, rb) = dimension_numbers
    pairs = sorted(zip(lc, rc))
    lhs = list(lb) + free_axes(la.ndim, lc, lb) + [a for a, _ in pairs]
    rhs = list(rb) + [b for _, b in pairs] + free_axes(ra.ndim, rc, rb)
    return lhs, rhs


def _staged_bytes(plan, la, ra):
    """Workspace bytes of the staged copies, each 64-byte aligned: [lhs, rhs] (0: read in
    place)."""
    return [-(-nbytes(aval) // 64) * 64 if isinstance(side, Strided) else 0
            for side, aval in ((plan.lhs, la), (plan.rhs, ra))]


def _emit_staged(ctx, lhs, rhs, out, dimension_numbers, strides=(None, None)):
    """The product with its Strided operands copied into the workspace (see `staged`), then
    read from the copies. A copy's innermost loop runs along the copy's contiguous axis and
    the next along the operand's, so the cache lines one pass of the inner loop reads are
    read again by the next passes before they leave the cache."""
    (lc, rc), (lb, rb) = dimension_numbers
    la, ra = lhs.aval, rhs.aval
    plan = plan_blas(la, ra, out.aval, dimension_numbers, strides)
    orders = _staged_orders(la, ra, dimension_numbers)
    offset, operands, kept = 0, [], []
    for buf, order, size, given in zip((lhs, rhs), orders, _staged_bytes(plan, la, ra),
                                       strides):
        if not size:
            operands.append((buf, list(range(buf.aval.ndim))))
            kept.append(given)
            continue
        aval = ShapedArray(tuple(buf.aval.shape[a] for a in order), buf.aval.dtype)
        copy = Buffer(ctx.builder.gep(ctx.scratch, [T.i64(offset)], source_etype=T.I8), aval)
        dense = contiguous_strides(aval.shape)
        source = contiguous_strides(buf.aval.shape) if given is None else given
        # the loops: the copy's order, the source's unit-stride axis second
        unit = min(range(buf.aval.ndim), key=lambda x: (source[x], -x))
        loops = [x for x in order[:-1] if x != unit] + [unit] * (order[-1] != unit) + order[-1:]
        shape = [buf.aval.shape[x] for x in loops]
        copy_nest(ctx.builder, shape, View(buf, 0, [source[x] for x in loops], shape),
                  View(copy, 0, [dense[order.index(x)] for x in loops], shape))
        operands.append((copy, order))
        kept.append(None)
        offset += size
    (a, lorder), (b, rorder) = operands
    dims = ((tuple(lorder.index(x) for x in lc), tuple(rorder.index(x) for x in rc)),
            (tuple(lorder.index(x) for x in lb), tuple(rorder.index(x) for x in rb)))
    _emit_blas(ctx, plan_blas(a.aval, b.aval, out.aval, dims, tuple(kept)), a, b, out)


def _scratch_bytes(eqn):
    """The workspace of a product: its staged operands' copies (`staged`), or, computed by
    the loop nest, its wide accumulator (a float32 contraction of many terms sums in float64:
    lower_fused.wide_sums)."""
    lhs, rhs = eqn.invars
    out = eqn.outvars[0].aval
    dimension_numbers = eqn.params["dimension_numbers"]
    if not any(isinstance(x, Literal) for x in eqn.invars):
        plan = plan_blas(lhs.aval, rhs.aval, out, dimension_numbers)
        if plan is not None:
            return sum(_staged_bytes(plan, lhs.aval, rhs.aval)) if staged(plan, out.dtype) \
                else 0
    carry = wide_carry(out, math.prod(lhs.aval.shape[d] for d in dimension_numbers[0][0]))
    return 0 if carry is None else wide_bytes(out, carry)


# ------------------------------------------ transposes read in place by matrix products

def read_transposes(fn):
    """`fn` with each transpose that one dot_general alone reads (not a result of `fn`) joined
    to it as `fusion(x, ..., body={t = transpose(x); dot_general(t, ...)})` where the product
    then has a plan (plan_blas) reading x through the transpose's strides: the packed kernel
    (or gemm.py's loop nest) reads x in place, or `staged` copies it once in the order the
    kernel wants, instead of a transposed copy and then the product. simplify folds the
    transposes that keep an operand's free axes in order into the dot_general itself; this
    takes the others: vmap(matmul, in_axes=(2, None)) moves the batch, a free axis of the lhs
    after its contraction, to the front. Regions of control flow are left as they are."""
    users, made = {}, {}
    for i, eqn in enumerate(fn.eqns):
        for x in eqn.invars:
            if isinstance(x, Var):
                users.setdefault(x, set()).add(i)
        if eqn.prim.name == "transpose" and isinstance(eqn.invars[0], Var):
            made[eqn.outvars[0]] = i
    for v in fn.outvars:
        users.setdefault(v, set()).add(-1)
    joined, absorbed = {}, set()
    for i, eqn in enumerate(fn.eqns):
        if eqn.prim.name != "dot_general" or not all(isinstance(x, Var) for x in eqn.invars):
            continue
        views = [made[x] for x in dict.fromkeys(eqn.invars) if x in made and users[x] == {i}]
        fused = _product_fusion([fn.eqns[j] for j in views] + [eqn]) if views else None
        if fused is not None and _view_plan(fused.params["body"]) is not None:
            joined[i] = fused
            absorbed.update(views)
    if not joined:
        return fn
    eqns = [joined.get(i, eqn) for i, eqn in enumerate(fn.eqns) if i not in absorbed]
    return Function(fn.name, fn.invars, eqns, fn.outvars)


def _product_fusion(members):
    """The fusion equation of transposes `members[:-1]` and the dot_general reading them."""
    dot = members[-1]
    made = {e.outvars[0] for e in members[:-1]}
    inputs = list(dict.fromkeys(x for e in members for x in e.invars if x not in made))
    region = Function(f"{dot.outvars[0].name}_product", inputs, members, dot.outvars)
    return Eqn(dot.outvars, PRIMITIVES["fusion"], inputs, {"body": region}, dot.info)


def through_views(body):
    """For a fusion `read_transposes` made: (the dot_general, [(index of the operand's
    buffer among the fusion's inputs, its element strides or None) for lhs and rhs]); else
    None."""
    *views, dot = body.eqns
    if dot.prim.name != "dot_general" or not views or \
            any(e.prim.name != "transpose" for e in views):
        return None
    made = {e.outvars[0]: e for e in views}
    sides = []
    for x in dot.invars:
        view = made.get(x)
        if view is None:
            sides.append((body.invars.index(x), None))
            continue
        source = view.invars[0]
        dense = contiguous_strides(source.aval.shape)
        sides.append((body.invars.index(source),
                      tuple(dense[p] for p in view.params["permutation"])))
    return dot, sides


def _view_plan(body):
    """The plan of the product of a fusion `read_transposes` makes (its `body`), reading the
    transposes' operands through their strides, or None."""
    dot, sides = through_views(body)
    (lhs, rhs), out = dot.invars, dot.outvars[0].aval
    return plan_blas(lhs.aval, rhs.aval, out, dot.params["dimension_numbers"],
                     tuple(s for _, s in sides))


def _fusion(ctx, outs, ins, body):
    found = through_views(body)
    if found is None:
        lower_fusion(ctx, outs, ins, body)
        return
    dot, sides = found
    operands = [Buffer(ins[k].ptr, x.aval) for (k, _), x in zip(sides, dot.invars)]
    _product(ctx, outs[0], operands, dot.params["dimension_numbers"],
             tuple(s for _, s in sides))


def _fusion_scratch(eqn):
    body = eqn.params["body"]
    if through_views(body) is None:
        return fused_scratch(eqn)
    plan, dot = _view_plan(body), body.eqns[-1]
    (la, ra), out = (x.aval for x in dot.invars), dot.outvars[0].aval
    return sum(_staged_bytes(plan, la, ra)) if staged(plan, out.dtype) else 0


def _fusion_in_place(eqn):
    """A product never writes over its operands."""
    return [] if through_views(eqn.params["body"]) else fused_in_place(eqn)


LLVM[PRIMITIVES["dot_general"]] = _dot_general
LLVM_SCRATCH[PRIMITIVES["dot_general"]] = _scratch_bytes
LLVM[PRIMITIVES["fusion"]] = _fusion
LLVM_SCRATCH[PRIMITIVES["fusion"]] = _fusion_scratch
LLVM_INPLACE[PRIMITIVES["fusion"]] = _fusion_in_place
