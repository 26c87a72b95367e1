"""dot_general: the one contraction primitive (matmul, batched matmul, tensordot, einsum).

dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)); the result's
axes are (batch..., lhs free..., rhs free...), as in XLA. Operands of different dtypes give the
more precise one (XLA's HigherPrecisionType, as JAX), unless `preferred_element_type` names the
accumulation/result dtype. Boolean operands contract with or/and.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from . import batching as B
from .core import register, JVP, VJP, BATCH
from .rule_forms import tangent_rule, cotangent_rule


def free_axes(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _dot_general_eval(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    _check_dims(lhs, "lhs", lb, lc)
    _check_dims(rhs, "rhs", rb, rc)
    if len(lb) != len(rb):
        raise TypeError(f"dot_general requires equal numbers of lhs_batch and rhs_batch "
                        f"dimensions, got lhs_batch {tuple(lb)} and rhs_batch {tuple(rb)}.")
    for side, batch, contract in (("lhs", lb, lc), ("rhs", rb, rc)):
        if len(set(batch)) != len(batch):
            raise TypeError(f"dot_general requires {side} batch dimensions to be distinct, got "
                            f"{side}_batch {tuple(batch)}.")
        if len(set(contract)) != len(contract):
            raise TypeError(f"dot_general requires {side} contracting dimensions to be "
                            f"distinct, got {side}_contracting {tuple(contract)}.")
        if set(batch) & set(contract):
            raise TypeError(f"dot_general requires {side} batch dimensions to be disjoint from "
                            f"contracting dimensions, got {side}_batch {tuple(batch)} and "
                            f"{side}_contracting {tuple(contract)}.")
    for what, ld, rd in (("lhs batch dimensions and rhs batch", lb, rb), ("contracting", lc, rc)):
        ls, rs = tuple(lhs.shape[i] for i in ld), tuple(rhs.shape[i] for i in rd)
        if ls != rs:
            raise TypeError(f"dot_general requires {what} dimensions to have the same shape, "
                            f"got {ls} and {rs}.")
    shape = ([lhs.shape[i] for i in lb] + [lhs.shape[i] for i in free_axes(lhs.ndim, lc, lb)]
             + [rhs.shape[i] for i in free_axes(rhs.ndim, rc, rb)])
    dtype = _result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)


def _check_dims(x, side, batch, contract):
    if not all(0 <= d < x.ndim for d in tuple(batch) + tuple(contract)):
        raise TypeError(f"dot_general requires {side} dimension numbers to be nonnegative and "
                        f"less than the number of axes of the {side} value, got {side}_batch of "
                        f"{tuple(batch)} and {side}_contracting of {tuple(contract)} for {side} "
                        f"of rank {x.ndim}")


def _type_rank(dtype):
    """XLA's HigherPrecisionType order (JAX's `_dot_general_dtype_rule`)."""
    real = np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype
    bits = 1 if real.kind == "b" else real.itemsize * 8
    if real.kind == "f":
        info = np.finfo(real)
        return (dtype.kind == "c", info.maxexp, info.nmant, bits, True)
    return (False, -1, -1, bits, real.kind != "u")


def _result_dtype(a, b, preferred):
    ra, rb = _type_rank(a), _type_rank(b)
    if ra == rb and a != b:
        raise TypeError(f"lax.dot_general argument type error: {a}, {b}")
    out = a if ra >= rb else b
    if preferred is None or np.dtype(preferred) == out:
        return out
    preferred = np.dtype(preferred)
    if out.kind != "f" and _type_rank(preferred)[3] < _type_rank(out)[3]:
        raise TypeError(f"`preferred_element_type` must not be narrower than the original type, "
                        f"got preferred_element_type of {preferred} for result type of {out}.")
    return preferred


def _dot_general(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = _result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    lf, rf = free_axes(lhs.ndim, lc, lb), free_axes(rhs.ndim, rc, rb)
    bshape = [lhs.shape[i] for i in lb]
    m = [lhs.shape[i] for i in lf]
    n = [rhs.shape[i] for i in rf]
    k = int(np.prod([lhs.shape[i] for i in lc], dtype=np.int64))
    B, M, N = (int(np.prod(s, dtype=np.int64)) for s in (bshape, m, n))
    a = np.transpose(lhs, list(lb) + lf + list(lc))
    b = np.transpose(rhs, list(rb) + list(rc) + rf)
    if k == 1:  # an outer product: a broadcast multiply (matmul loops without BLAS here)
        out = np.multiply(a.reshape(B, M, 1).astype(out_dtype, copy=False),
                          b.reshape(B, 1, N).astype(out_dtype, copy=False))
    elif not lb:  # no batch axes: a plain 2-D product (BLAS takes transposed operands as they are)
        out = np.matmul(a.reshape(M, k).astype(out_dtype, copy=False),
                        b.reshape(k, N).astype(out_dtype, copy=False))
    else:
        out = np.matmul(a.reshape(B, M, k).astype(out_dtype, copy=False),
                        b.reshape(B, k, N).astype(out_dtype, copy=False))
    return out.reshape(bshape + m + n).astype(out_dtype, copy=False)


dot_general = register("dot_general", _dot_general_eval, _dot_general)


# ---------------------------------------------------------------------------- derivative rules
# Bilinear: the JVP is dot(dlhs, rhs) + dot(lhs, drhs); the VJP of each operand is JAX's
# transpose (`_dot_general_transpose_lhs/rhs`): contract the cotangent with the other operand
# over its free axes, then permute the result into the operand's axis order.


def _dot_general_jvp(primals, tangents, outs, *, dimension_numbers, precision=None,
                     preferred_element_type=None):
    (lhs, rhs), (tl, tr) = primals, tangents
    params = dict(dimension_numbers=dimension_numbers, precision=precision,
                  preferred_element_type=preferred_element_type)
    terms = ([E.dot_general(tl, rhs, **params)] if tl is not None else []) + \
            ([E.dot_general(lhs, tr, **params)] if tr is not None else [])
    return terms[0] if len(terms) == 1 else E.add(*terms)


def _transpose_lhs(g, x, y, dimension_numbers, precision, preferred_element_type, swap_ans):
    """The cotangent of `x` in dot_general(x, y) (of y, for swap_ans, with swapped numbers)."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_aval, y_ndim = E.aval(x), E.aval(y).ndim
    x_kept = free_axes(x_aval.ndim, x_contract, x_batch)
    y_kept = free_axes(y_ndim, y_contract, y_batch)
    nb = len(x_batch)
    ans_batch = tuple(range(nb))
    if swap_ans:
        ans_y = tuple(range(nb, nb + len(y_kept)))
    else:
        ans_y = tuple(range(nb + len(x_kept), nb + len(x_kept) + len(y_kept)))
    dims = ((ans_y, tuple(y_kept)), (ans_batch, tuple(y_batch)))
    x_contract_by_y = [x_contract[i] for i in np.argsort(y_contract, kind="stable")]
    unsorted = list(x_batch) + x_kept + x_contract_by_y
    out = E.dot_general(g, y, dimension_numbers=dims, precision=precision,
                        preferred_element_type=preferred_element_type)
    x_bar = E.transpose(out, permutation=tuple(int(i) for i in np.argsort(unsorted)))
    return E.cast_like(x_bar, x_aval)


def _dot_general_vjp(ct, primals, outs, *, dimension_numbers, precision=None,
                     preferred_element_type=None):
    lhs, rhs = primals
    (lc, rc), (lb, rb) = dimension_numbers
    swapped = ((rc, lc), (rb, lb))
    return [_transpose_lhs(ct, lhs, rhs, dimension_numbers, precision, preferred_element_type,
                           False) if E.is_float(lhs) else None,
            _transpose_lhs(ct, rhs, lhs, swapped, precision, preferred_element_type,
                           True) if E.is_float(rhs) else None]


def _dot_general_batch(args, dims, *, dimension_numbers, precision=None,
                       preferred_element_type=None):
    """One `dot_general`: a batch axis on both operands becomes the first batch dimension;
    on one operand, a free dimension of it (so the result stays a single matrix product).
    The operands are used as they are (as JAX's rule does: the backends read a batch
    dimension anywhere in place), except that a batch axis on one operand that would split
    its free dimensions (a contraction between them) moves to the front first, which keeps
    them one group of rows or columns that matrix-product kernels read in place."""
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = args
    ld, rd = dims
    if (ld is None) != (rd is None):
        operand, d, shared = (lhs, ld, lb + lc) if rd is None else (rhs, rd, rb + rc)
        free = [a + (a >= d) for a in range(len(E.aval(operand).shape) - 1) if a not in shared]
        free = sorted(free + [d])
        if free != list(range(free[0], free[0] + len(free))):
            if rd is None:
                lhs, ld = B.moveaxis(lhs, ld, 0), 0
            else:
                rhs, rd = B.moveaxis(rhs, rd, 0), 0

    def at(axes, batch):   # axes of one example, as axes of the operand holding `batch`
        return tuple(a + (batch is not None and a >= batch) for a in axes)
    lc, lb, rc, rb = at(lc, ld), at(lb, ld), at(rc, rd), at(rb, rd)
    if ld is not None and rd is not None:
        dn, out_dim = ((lc, rc), ((ld,) + lb, (rd,) + rb)), 0
    else:
        dn = ((lc, rc), (lb, rb))
        lfree = [d for d in range(len(E.aval(lhs).shape)) if d not in lb + lc]
        rfree = [d for d in range(len(E.aval(rhs).shape)) if d not in rb + rc]
        # the result: batch dims, lhs free dims, rhs free dims (each in order)
        out_dim = len(lb) + (lfree.index(ld) if ld is not None else
                             len(lfree) + rfree.index(rd))
    out = E.dot_general(lhs, rhs, dimension_numbers=dn, precision=precision,
                        preferred_element_type=preferred_element_type)
    return out, out_dim


JVP[dot_general] = tangent_rule(_dot_general_jvp)
VJP[dot_general] = cotangent_rule(_dot_general_vjp)
BATCH[dot_general] = _dot_general_batch
