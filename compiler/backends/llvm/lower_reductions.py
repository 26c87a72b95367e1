"""Lowerings of argmax/argmin and the cumulative ops (the monoid reductions are fused loops:
lower_fused.py).

argmax/argmin walk the reduced axis innermost, carrying (best value, its index) in registers:
an element replaces the best when it is strictly greater (less), or when it is NaN and the best
is not, so ties keep the first index and the first NaN wins (JAX's semantics).

cumsum/cumprod/cummax/cummin/cumlogsumexp scan along `axis` in order (`reverse` scans reversed
views of operand and output, so the code is the same). When no axis of size > 1 follows the
scanned one, the running value is a register carried along the innermost loop. Otherwise the
first slice along the axis is copied and each later element combines the previous *output*
element with the operand, in a nest whose inner loops run over the trailing axes (contiguous,
so they vectorise). The combination is sequential, in the reference's order; cumlogsumexp
combines as NumPy's logaddexp. A cumsum of float16, float32 or complex64 carries its running
sums in double precision (in the register, or, along an axis with others after it, in a
workspace row of running sums instead of the previous output), rounding each output once.
"""
import math

import numpy as np
import llvmlite.ir as ir

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from . import ltypes as T
from ...ir.abstract import ShapedArray
from .buffers import Buffer, View, load, store
from .calls import intrinsic
from .loops import collapse, contiguous_strides, emit_nest, affine_offset
from .lower_elementwise import max_value, min_value, convert, math as math_fn
from .lower_fused import _rev, _slice, _transpose, _identity, fill
from .lower_structural import copy_nest
from . import lower_complex


# ------------------------------------------------------------------------ argmax/argmin

def _arg_rule(better):
    def rule(ctx, outs, ins, *, axes, index_dtype):
        out, x = outs[0], ins[0]
        axis = axes[0]
        shape = x.aval.shape
        perm = [k for k in range(len(shape)) if k != axis] + [axis]
        view = _transpose(x.view(), perm)
        out_strides = out.view().strides
        dtype = x.aval.dtype
        start = _identity("reduce_min" if better == "<" else "reduce_max", dtype)

        def body(b, index, carried):
            best, best_i = carried
            v = load(b, view.buffer, affine_offset(b, view.offset, view.strides, index))
            take = _beats(b, better, v, best, dtype)
            return [b.select(take, v, best), b.select(take, index[-1], best_i)]

        def after(b, outer, final):
            off = affine_offset(b, 0, out_strides, outer)
            store(b, out, off, convert(b, final[1], np.dtype(np.int64), np.dtype(index_dtype)))
        emit_nest(ctx.builder, view.shape, body, [start, T.i64(0)], after)
    return rule


def _beats(b, op, v, best, dtype):
    kind = dtype.kind
    if kind == "f":
        strictly = b.fcmp_ordered(op, v, best)
        nan_first = b.and_(b.fcmp_unordered("uno", v, v), b.fcmp_ordered("ord", best, best))
        return b.or_(strictly, nan_first)
    return (b.icmp_signed if kind == "i" else b.icmp_unsigned)(op, v, best)


# ------------------------------------------------------------------------- cumulative ops

_LOG2 = math.log(2)


def _logaddexp(b, x, y):
    """NumPy's logaddexp, branch-free: x + log(2) on ties (infinities included), NaN stays."""
    ty = x.type
    diff = b.fsub(x, y)
    exp_neg_abs = math_fn(b, "exp", [b.fneg(intrinsic(b, "fabs", [diff]))])
    tail = math_fn(b, "log1p", [exp_neg_abs])
    larger = b.select(b.fcmp_ordered(">", diff, ir.Constant(ty, 0.0)), x, y)
    out = b.fadd(larger, tail)
    out = b.select(b.fcmp_unordered("uno", diff, diff), diff, out)
    return b.select(b.fcmp_ordered("==", x, y), b.fadd(x, ir.Constant(ty, _LOG2)), out)


def _sum(b, acc, x, dtype):
    if dtype.kind == "c":
        return lower_complex.add(b, acc, x)
    return b.fadd(acc, x) if dtype.kind == "f" else b.add(acc, x)


def _prod(b, acc, x, dtype):
    if dtype.kind == "c":
        return lower_complex.mul(b, acc, x)
    return b.fmul(acc, x) if dtype.kind == "f" else b.mul(acc, x)


_CUMULATIVE = {
    "cumsum": (_sum, "reduce_sum"),
    "cumprod": (_prod, "reduce_prod"),
    "cummax": (max_value, "reduce_max"),
    "cummin": (min_value, "reduce_min"),
    "cumlogsumexp": (lambda b, acc, x, dtype: _logaddexp(b, acc, x), "reduce_max"),
}


# A cumulative sum of a narrow float type carries its running sums in the wider type (float16,
# float32 -> float64; complex64 -> complex128) and rounds each output once: the
# running sum of n terms then errs by about n * 2^-53 relative, below float32's half ulp up to
# 2^28 terms, where a float32 running sum drifts by n * 2^-24 (2 % over 10^7 values).
_WIDE = {np.dtype(t): np.dtype(w) for t, w in (
    ("float16", "float64"), ("float32", "float64"), ("complex64", "complex128"))}


def _carry_dtype(name, dtype):
    return _WIDE.get(np.dtype(dtype), np.dtype(dtype)) if name == "cumsum" else np.dtype(dtype)


def _in_register(shape, axis):
    return all(d == 1 for d in shape[axis + 1:])


def _cumulative_scratch(name):
    """Bytes of workspace: the running sums of a wide-carried cumsum along an axis that has
    others after it (one per position of the other axes)."""
    def scratch(eqn):
        aval = eqn.invars[0].aval
        axis = eqn.params["axis"]
        carry = _carry_dtype(name, aval.dtype)
        if (carry == aval.dtype or aval.size == 0 or aval.shape[axis] <= 1
                or _in_register(aval.shape, axis)):
            return 0
        return aval.size // aval.shape[axis] * carry.itemsize
    return scratch


def _cumulative_rule(name):
    combine, monoid = _CUMULATIVE[name]

    def rule(ctx, outs, ins, *, axis, reverse=False):
        out, x = outs[0], ins[0]
        src, dst = x.view(), out.view()
        if reverse:
            src, dst = _rev(src, (axis,)), _rev(dst, (axis,))
        dtype = x.aval.dtype
        carry = _carry_dtype(name, dtype)
        shape = x.aval.shape
        if x.aval.size == 0:
            return
        if shape[axis] <= 1:   # every element is its own prefix
            copy_nest(ctx.builder, shape, src, dst)
        elif _in_register(shape, axis):
            _scan_in_register(ctx.builder, shape, axis, src, dst, combine, dtype, carry,
                              _identity(monoid, carry))
        elif carry != dtype:
            _scan_wide_in_memory(ctx, shape, axis, src, dst, combine, dtype, carry)
        else:
            _scan_in_memory(ctx.builder, shape, axis, src, dst, combine, dtype)
    return rule


def _scan_in_register(builder, shape, axis, src, dst, combine, dtype, carry, start):
    """The running value in a register along the innermost loop, of dtype `carry`."""
    space, (s_strides, d_strides), _ = collapse(shape, [src.strides, dst.strides], [{axis}])
    if space == (0,):
        return

    def body(b, index, carried):
        v = load(b, src.buffer, affine_offset(b, src.offset, s_strides, index))
        acc = combine(b, carried[0], convert(b, v, dtype, carry), carry)
        store(b, dst.buffer, affine_offset(b, dst.offset, d_strides, index),
              convert(b, acc, carry, dtype))
        return [acc]
    emit_nest(builder, space, body, [start])


def _scan_wide_in_memory(ctx, shape, axis, src, dst, combine, dtype, carry):
    """The running values (dtype `carry`) in the scratch, one per position of the other axes,
    updated in the nest's row-major order (so each receives its terms in order along `axis`)."""
    others = tuple(d for k, d in enumerate(shape) if k != axis)
    running = Buffer(ctx.scratch, ShapedArray(others, carry))
    fill(ctx.builder, running, _identity("reduce_sum", carry))
    it = iter(contiguous_strides(others))
    r_strides = [0 if k == axis else next(it) for k in range(len(shape))]
    space, (s_strides, d_strides, r_strides), _ = collapse(
        shape, [src.strides, dst.strides, r_strides])

    def body(b, index, carried):
        v = load(b, src.buffer, affine_offset(b, src.offset, s_strides, index))
        r_off = affine_offset(b, 0, r_strides, index)
        acc = combine(b, load(b, running, r_off), convert(b, v, dtype, carry), carry)
        store(b, running, r_off, acc)
        store(b, dst.buffer, affine_offset(b, dst.offset, d_strides, index),
              convert(b, acc, carry, dtype))
        return carried
    emit_nest(ctx.builder, space, body)


def _scan_in_memory(builder, shape, axis, src, dst, combine, dtype):
    n = shape[axis]
    if n == 0:
        return
    first = _along(shape, axis, 0, 1)
    copy_nest(builder, _sized(shape, axis, 1), _slice(src, *first), _slice(dst, *first))
    if n == 1:
        return
    rest = _along(shape, axis, 1, n)
    cur_src, cur_dst = _slice(src, *rest), _slice(dst, *rest)
    prev = _slice(dst, *_along(shape, axis, 0, n - 1))
    space, maps, _ = collapse(cur_src.shape, [cur_src.strides, cur_dst.strides, prev.strides])
    if space == (0,):
        return

    def body(b, index, carried):
        v = load(b, src.buffer, affine_offset(b, cur_src.offset, maps[0], index))
        p = load(b, dst.buffer, affine_offset(b, prev.offset, maps[2], index))
        store(b, dst.buffer, affine_offset(b, cur_dst.offset, maps[1], index),
              combine(b, p, v, dtype))
        return carried
    emit_nest(builder, space, body)


def _along(shape, axis, start, limit):
    """slice() arguments selecting [start, limit) along `axis` (all of the other axes)."""
    return ([start if k == axis else 0 for k in range(len(shape))],
            [limit if k == axis else d for k, d in enumerate(shape)])


def _sized(shape, axis, n):
    return tuple(n if k == axis else d for k, d in enumerate(shape))


LLVM[PRIMITIVES["argmax"]] = _arg_rule(">")
LLVM[PRIMITIVES["argmin"]] = _arg_rule("<")
for _name in _CUMULATIVE:
    LLVM[PRIMITIVES[_name]] = _cumulative_rule(_name)
LLVM_SCRATCH[PRIMITIVES["cumsum"]] = _cumulative_scratch("cumsum")
