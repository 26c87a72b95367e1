"""`lax.approx_max_k` and `lax.approx_min_k` with JAX's signature, shapes and outputs on CPU,
where JAX's approximate top-k is exact (recall 1): the operand is sorted along the reduction
dimension (ties, -0.0 and 0.0 among them, by lower index, as JAX's comparator `>` / `<` with a
stable sort) and the first entries kept. JAX's order of NaNs is its sort's accident (`>` is no
order on them); kiln places them as `lax.top_k` does (NaN largest, -NaN smallest).

With `aggregate_to_topk=True` that is `k` entries. Without it, JAX returns the approximate
algorithm's partial reduction, whose size XLA fixes from the input size, the operand's rank,
`k`, `recall_target` and `reduction_input_size_override` (`reduction_output_size`, the same
arithmetic as XLA's `ApproxTopKReductionOutputSize`); kiln returns that many of the best
entries, sorted, as JAX's CPU backend does.
"""
import math
import operator

import numpy as np

from ..array import to_array
from ..compiler.ir import dtypes
from ._ops import (_canonical_axis, _total_order_key, bitwise_not, eq, first_by_key, full_like,
                   select)

__all__ = ["approx_max_k", "approx_min_k"]

_LANE_TILING, _CHUNK_TILING = 128, 1024   # XLA's TPU tilings, which fix the output size


def reduction_output_size(input_size, rank, k, recall_target, aggregate_to_topk,
                          input_size_override=-1):
    """(output size along the reduction dimension, log2 of the reduction), as XLA has them."""
    if aggregate_to_topk:
        return k, -1
    tiling = _CHUNK_TILING if rank == 1 else _LANE_TILING
    if input_size <= tiling:
        return input_size, 0
    if 0 <= input_size_override < input_size:
        raise ValueError(f"reduction_input_size_override: {input_size_override} should be "
                         f"greater equals to operands[reduction_dim]: {input_size}")
    logical = input_size_override if input_size_override >= 0 else input_size
    chunks = -(-input_size // tiling)
    if k == 1:   # one window per tile: the reduction goes as far as it can
        log2 = _log2_ceil(-(-logical // tiling))
        return -(-chunks // (1 << log2)) * tiling, log2
    recall = float(np.float32(recall_target))
    if recall == 1.0:
        return input_size, 0
    if not 0.0 < recall <= 1.0:
        raise ValueError("recall_target should range in (0,1]")
    windows = min(max(int((1.0 - k) / math.log(recall)), tiling), logical)
    log2 = _log2_floor(logical // windows)
    if log2 == 0:
        return input_size, 0
    log2 = min(log2, _log2_ceil(input_size // tiling))
    return -(-chunks // (1 << log2)) * tiling, log2


def _log2_floor(v):
    return v.bit_length() - 1 if v > 0 else 0


def _log2_ceil(v):
    return (v - 1).bit_length() if v > 0 else 0


def _approx_k(name, largest, operand, k, reduction_dimension, recall_target,
              reduction_input_size_override, aggregate_to_topk):
    x = to_array(operand, f"lax.{name}")
    k = operator.index(k)
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    if x.ndim == 0:
        raise TypeError(f"approx_top_k operand must have >= 1 dimension, got {x.shape}")
    axis = _canonical_axis(reduction_dimension, x.ndim)
    if x.shape[axis] < k:
        raise ValueError(f"k must be smaller than the size of reduction_dim {x.shape[axis]}, "
                         f"got {k}")
    if not dtypes.is_inexact(x.dtype) or dtypes.is_complex(x.dtype):
        raise ValueError("operand must be a floating type")
    size, _ = reduction_output_size(x.shape[axis], x.ndim, k, recall_target,
                                    bool(aggregate_to_topk),
                                    operator.index(reduction_input_size_override))
    zero = full_like(x, 0)
    key = _total_order_key(select(eq(x, zero), zero, x))   # -0.0 ties with 0.0, as GT has it
    return first_by_key(x, bitwise_not(key) if largest else key, axis, size)


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The largest entries along `reduction_dimension` and their indices (int32), largest
    first."""
    return _approx_k("approx_max_k", True, operand, k, reduction_dimension, recall_target,
                     reduction_input_size_override, aggregate_to_topk)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The smallest entries along `reduction_dimension` and their indices (int32), smallest
    first."""
    return _approx_k("approx_min_k", False, operand, k, reduction_dimension, recall_target,
                     reduction_input_size_override, aggregate_to_topk)
