"""`kiln.lax.scaled_dot`: JAX's block-scaled dot product, `(lhs * lhs_scale) @ (rhs *
rhs_scale)` with each scale repeated over its block of the contracting dimensions.

JAX computes it in bfloat16: the operands, the scales and their products are rounded to
bfloat16 before `dot_general`, whose result has `preferred_element_type` (bfloat16 by default).
NumPy has no bfloat16, so kiln holds the bfloat16 values in float32: every rounding JAX makes is
`reduce_precision(x, 8, 7)` (bfloat16's 8 exponent and 7 mantissa bits, XLA's rounding), and
the default result is float32 rounded to bfloat16's values. The float8 operand and scale types
JAX's docstring uses do not exist in kiln; float and integer operands do. Integer
`preferred_element_type`s are refused. Unlike JAX's, the result is differentiable: each
rounding passes the derivative through unchanged.
"""
import numpy as np

from ..array import to_array
from ..compiler.ir import dtypes
from . import _ops
from ._bits import reduce_precision

__all__ = ["scaled_dot"]


def _bf16(x):
    """`x`'s values rounded to bfloat16, held in float32; the derivative passes straight through
    the rounding (x + (rounded - x) is exactly the rounded value)."""
    x = _ops.convert_element_type(x, np.float32)
    return _ops.add(x, _ops.stop_gradient(_ops.sub(reduce_precision(x, 8, 7), x)))


def _check_operand_scale(side, operand, scale, contracting):
    for i, size in enumerate(operand.shape):
        if i in contracting:
            if scale.shape[i] == 0 or size % scale.shape[i]:
                raise TypeError(f"{side} contracting dim {i} of size {size} must be divisible "
                                f"by its scale's dim size {scale.shape[i]}.")
            if size // scale.shape[i] < 2:
                raise TypeError(f"The ratio of {side} contracting dim {i} to its scale's dim "
                                f"size ({size // scale.shape[i]}) must be at least 2.")
        elif scale.shape[i] != size:
            raise TypeError(f"{side} dim {i} of size {size} does not match scale dim size "
                            f"{scale.shape[i]}.")


def _check(lhs, rhs, lhs_scale, rhs_scale, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if len({x.ndim for x in (lhs, rhs, lhs_scale, rhs_scale)}) != 1:
        raise TypeError(f"All input tensors must have the same rank. Got lhs rank: {lhs.ndim} "
                        f"rhs rank: {rhs.ndim} lhs_scale rank: {lhs_scale.ndim} rhs_scale "
                        f"rank: {rhs_scale.ndim}.")
    if len(lb) != len(rb):
        raise TypeError(f"LHS and RHS must have the same number of batch dimensions, got "
                        f"{len(lb)} and {len(rb)}.")
    if len(lc) != len(rc):
        raise TypeError(f"LHS and RHS must have the same number of contracting dimensions, got "
                        f"{len(lc)} and {len(rc)}.")
    for i, j in zip(lb, rb):
        if len({lhs.shape[i], rhs.shape[j], lhs_scale.shape[i], rhs_scale.shape[j]}) != 1:
            raise TypeError(f"All input tensors must have the same batch dimension size for "
                            f"batch dims ({i}, {j}).")
    for i, j in zip(lc, rc):
        if lhs.shape[i] != rhs.shape[j]:
            raise TypeError(f"LHS contracting dim {i} of size {lhs.shape[i]} does not match RHS "
                            f"contracting dim {j} of size {rhs.shape[j]}.")
    _check_operand_scale("LHS", lhs, lhs_scale, lc)
    _check_operand_scale("RHS", rhs, rhs_scale, rc)


def _unit_scale(x, contracting):
    """JAX's scale for an operand given none: ones, of size 1 along the contracting dims."""
    return _ops.full(tuple(1 if i in contracting else n for i, n in enumerate(x.shape)), 1.0,
                     np.float32)


def _scaled(x, scale, contracting):
    """bfloat16(x * scale), the scale repeated over its blocks of the contracting dims."""
    x, scale = _bf16(x), _bf16(scale)
    for i in contracting:
        block = x.shape[i] // scale.shape[i]
        wide = scale.shape[:i + 1] + (block,) + scale.shape[i + 1:]
        dims = tuple(d for d in range(len(wide)) if d != i + 1)
        scale = _ops.reshape(_ops.broadcast_in_dim(scale, wide, dims),
                             scale.shape[:i] + (x.shape[i],) + scale.shape[i + 1:])
    return _bf16(_ops.mul(x, scale))


def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None,
               preferred_element_type=None):
    """`dot_general(lhs * lhs_scale, rhs * rhs_scale)` over bfloat16 values (JAX's), the scales
    repeated over blocks of the contracting dimensions; float32 holding bfloat16 values unless
    `preferred_element_type` names a float type."""
    lhs, rhs = to_array(lhs, "lax.scaled_dot"), to_array(rhs, "lax.scaled_dot")
    scales = [None if s is None else to_array(s, "lax.scaled_dot") for s in (lhs_scale, rhs_scale)]
    for x in [lhs, rhs] + [s for s in scales if s is not None]:
        if x.dtype.kind not in "iuf":
            raise TypeError(f"lax.scaled_dot takes float or integer operands and scales, got "
                            f"{x.dtype}")
    if dimension_numbers is None:
        if lhs.ndim < 2:
            raise TypeError("scaled_dot does not support 0-rank and 1-rank operands.")
        n = lhs.ndim
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    (lc, rc), (lb, rb) = dimension_numbers
    dimension_numbers = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    scales = [_unit_scale(x, dims) if s is None else s
              for x, s, dims in zip((lhs, rhs), scales, dimension_numbers[0])]
    _check(lhs, rhs, *scales, dimension_numbers)
    out_type = None if preferred_element_type is None else \
        dtypes.canonicalize(preferred_element_type)
    if out_type is not None and out_type.kind != "f":
        raise TypeError(f"lax.scaled_dot: preferred_element_type must be a float type in kiln, "
                        f"got {out_type}")
    a = _scaled(lhs, scales[0], dimension_numbers[0][0])
    b = _scaled(rhs, scales[1], dimension_numbers[0][1])
    if out_type is None:
        return _bf16(_ops.dot_general(a, b, dimension_numbers))
    if out_type.itemsize > 4:   # float64 sums; narrower results are float32 sums, rounded
        a, b = _ops.convert_element_type(a, out_type), _ops.convert_element_type(b, out_type)
    return _ops.convert_element_type(_ops.dot_general(a, b, dimension_numbers), out_type)
