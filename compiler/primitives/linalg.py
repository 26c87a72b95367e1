"""dot_general: the one contraction primitive (matmul, batched matmul, tensordot, einsum).

dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)); the result's
axes are (batch..., lhs free..., rhs free...), as in XLA. Operands share a dtype unless
`preferred_element_type` names the accumulation/result dtype.
"""
import numpy as np

from ..ir.abstract import ShapedArray, shape_str
from .core import register, type_error, check_axes


def _free(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _dot_general_eval(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    check_axes("dot_general", tuple(lc) + tuple(lb), lhs.ndim, "lhs dimensions")
    check_axes("dot_general", tuple(rc) + tuple(rb), rhs.ndim, "rhs dimensions")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise type_error("dot_general", f"requires equal numbers of lhs and rhs contracting and "
                         f"batch dimensions, got {dimension_numbers}")
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        if lhs.shape[a] != rhs.shape[b]:
            raise type_error("dot_general", f"requires contracting and batch dimensions to have "
                             f"the same shape, got lhs {shape_str(lhs.shape)} and rhs "
                             f"{shape_str(rhs.shape)} with dimension_numbers {dimension_numbers}")
    if lhs.dtype != rhs.dtype and preferred_element_type is None:
        raise type_error("dot_general", f"requires operands of the same dtype, got {lhs.dtype} "
                         f"and {rhs.dtype}")
    if lhs.dtype.kind == "b":
        raise type_error("dot_general", "does not accept boolean operands")
    shape = ([lhs.shape[i] for i in lb] + [lhs.shape[i] for i in _free(lhs.ndim, lc, lb)]
             + [rhs.shape[i] for i in _free(rhs.ndim, rc, rb)])
    dtype = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)


def _dot_general(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    lf, rf = _free(lhs.ndim, lc, lb), _free(rhs.ndim, rc, rb)
    bshape = [lhs.shape[i] for i in lb]
    m = [lhs.shape[i] for i in lf]
    n = [rhs.shape[i] for i in rf]
    k = int(np.prod([lhs.shape[i] for i in lc], dtype=np.int64))
    B, M, N = (int(np.prod(s, dtype=np.int64)) for s in (bshape, m, n))
    a = np.transpose(lhs, list(lb) + lf + list(lc)).reshape(B, M, k).astype(out_dtype)
    b = np.transpose(rhs, list(rb) + list(rc) + rf).reshape(B, k, N).astype(out_dtype)
    return np.matmul(a, b).reshape(bshape + m + n).astype(out_dtype)


dot_general = register("dot_general", _dot_general_eval, _dot_general)
