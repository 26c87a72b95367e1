"""Bit-level operations of `kiln.lax` written over the integer primitives: `mulhi`,
`reduce_precision`, and `rng_bit_generator` with JAX's `RandomAlgorithm`.

- mulhi: the high half of the double-width product, from half-width partial products
  (no wider type needed); signed operands correct the unsigned product (subtract y where
  x < 0 and x where y < 0).
- reduce_precision: XLA's rounding to a float format with fewer exponent/mantissa bits, on
  the bit pattern: round the mantissa to nearest even, then values whose exponent is out of
  the narrower range become signed infinities (above) or signed zeros (at or below the
  smallest normal's exponent, no subnormals); NaNs stay NaNs. Bit-for-bit JAX's results.
- rng_bit_generator: the key is XLA's state `uint32[4]`, read as two little-endian uint64:
  a threefry key and a block counter. RNG_THREE_FRY gives XLA's bits exactly (the counter's
  values hashed by threefry-2x32 with the key, both output words of a block consecutive, the
  counter advanced by the blocks used). XLA's RNG_DEFAULT is Philox on CPU and GPU; kiln's
  RNG_DEFAULT is the threefry generator above, so its bits differ from JAX's (the output
  shapes, dtypes and the key's advance by one counter per block are the same kind).
  RNG_PHILOX is not implemented (a ValueError says so).
"""
import enum
import math
import operator

import numpy as np

from ..array import to_array
from ..compiler.ir import dtypes
from ._ops import (_operands, add, bitcast_convert_type, bitwise_and, bitwise_or,
                   broadcast_in_dim, concatenate, convert_element_type, expand_dims, full_like,
                   gt, index_in_dim, iota, le, lt, mul, ne, reshape, select, shift_left,
                   shift_right_logical, slice_in_dim, sub)

__all__ = ["RandomAlgorithm", "mulhi", "reduce_precision", "rng_bit_generator"]


class RandomAlgorithm(enum.IntEnum):
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self):
        return self.name


def _const(x, value):
    return full_like(x, np.asarray(value, x.dtype))


def _unsigned_mulhi(x, y, bits):
    h = bits // 2
    mask, shift = _const(x, (1 << h) - 1), _const(x, h)
    x_lo, x_hi = bitwise_and(x, mask), shift_right_logical(x, shift)
    y_lo, y_hi = bitwise_and(y, mask), shift_right_logical(y, shift)
    lo_lo, hi_lo, lo_hi = mul(x_lo, y_lo), mul(x_hi, y_lo), mul(x_lo, y_hi)
    cross = add(add(shift_right_logical(lo_lo, shift), bitwise_and(hi_lo, mask)),
                bitwise_and(lo_hi, mask))
    return add(add(mul(x_hi, y_hi), add(shift_right_logical(hi_lo, shift),
                                        shift_right_logical(lo_hi, shift))),
               shift_right_logical(cross, shift))


def mulhi(x, y, /):
    """The high half of the product of two integers of one dtype (as if computed in twice the
    width), in that dtype."""
    x, y = _operands("mulhi", x, y)
    for i, a in enumerate((x, y)):
        if a.dtype.kind not in "iu":
            raise TypeError(f"mulhi does not accept dtype {a.dtype} at position {i}. Accepted "
                            f"dtypes at position {i} are subtypes of integer.")
    if x.dtype != y.dtype:
        raise TypeError(f"lax.mulhi requires arguments to have the same dtypes, got "
                        f"{x.dtype}, {y.dtype}.")
    bits = 8 * x.dtype.itemsize
    if x.dtype.kind == "u":
        return _unsigned_mulhi(x, y, bits)
    u = np.dtype(f"u{x.dtype.itemsize}")
    hi = bitcast_convert_type(_unsigned_mulhi(bitcast_convert_type(x, u),
                                              bitcast_convert_type(y, u), bits), x.dtype)
    zero = _const(x, 0)
    hi = sub(hi, select(lt(x, zero), y, zero))
    return sub(hi, select(lt(y, zero), x, zero))


_FORMATS = {2: (5, 10), 4: (8, 23), 8: (11, 52)}   # itemsize: (exponent, mantissa) bits


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """Round floats to the precision of a format with `exponent_bits` and `mantissa_bits`
    (XLA's ReducePrecision), keeping the operand's dtype."""
    x = to_array(operand, "lax.reduce_precision")
    exponent_bits, mantissa_bits = operator.index(exponent_bits), operator.index(mantissa_bits)
    if x.dtype.kind != "f":
        raise TypeError(f"reduce_precision does not accept dtype {x.dtype}. Accepted dtypes "
                        f"are subtypes of floating.")
    if exponent_bits < 1 or mantissa_bits < 0:
        raise ValueError(f"reduce_precision: exponent_bits must be >= 1 and mantissa_bits >= "
                         f"0, got {exponent_bits} and {mantissa_bits}")
    src_exp, src_man = _FORMATS[x.dtype.itemsize]
    nbits = 8 * x.dtype.itemsize
    v = bitcast_convert_type(x, np.dtype(f"u{x.dtype.itemsize}"))
    if mantissa_bits < src_man:
        drop = src_man - mantissa_bits
        last_bit = 1 << drop
        keep_last = shift_right_logical(bitwise_and(v, _const(v, last_bit)), _const(v, drop))
        v = add(v, add(keep_last, _const(v, (last_bit >> 1) - 1)))
        v = bitwise_and(v, _const(v, ~(last_bit - 1) & ((1 << nbits) - 1)))
    if exponent_bits < src_exp:
        exp_mask = ((1 << src_exp) - 1) << src_man
        bias, reduced_bias = (1 << (src_exp - 1)) - 1, (1 << (exponent_bits - 1)) - 1
        exponent = bitwise_and(v, _const(v, exp_mask))
        signed_zero = bitwise_and(v, _const(v, 1 << (nbits - 1)))
        signed_inf = bitwise_or(signed_zero, _const(v, exp_mask))
        v = select(gt(exponent, _const(v, (bias + reduced_bias) << src_man)), signed_inf,
                   select(le(exponent, _const(v, (bias - reduced_bias) << src_man)),
                          signed_zero, v))
    out = bitcast_convert_type(v, x.dtype)
    return select(ne(x, x), x, out)


def _u64_words(key, i):
    return index_in_dim(key, 2 * i, 0, False), index_in_dim(key, 2 * i + 1, 0, False)


def _advance(lo, hi, offsets):
    """The uint64 counter (hi, lo) plus uint32 `offsets`, as (lo, hi) word arrays."""
    lo_n = add(broadcast_in_dim(lo, offsets.shape, ()), offsets)
    carry = convert_element_type(lt(lo_n, broadcast_in_dim(lo, offsets.shape, ())), np.uint32)
    return lo_n, add(broadcast_in_dim(hi, offsets.shape, ()), carry)


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT, *,
                      out_sharding=None):
    """(new key, random bits of `shape` and the unsigned `dtype`) from a `uint32[4]` key."""
    from .._random import threefry2x32
    key = to_array(key, "lax.rng_bit_generator")
    if key.shape != (4,) or key.dtype != np.uint32:
        raise TypeError(f"rng_bit_generator: the key must be a uint32[4] array (XLA's generator "
                        f"state), got {key.dtype}{list(key.shape)}")
    dtype = dtypes.canonicalize(dtype)
    if dtype.kind != "u":
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype}")
    algorithm = RandomAlgorithm(algorithm)
    if algorithm is RandomAlgorithm.RNG_PHILOX:
        raise ValueError("rng_bit_generator: kiln has no Philox generator; use "
                         "RandomAlgorithm.RNG_THREE_FRY (XLA's bits) or RNG_DEFAULT")
    shape = tuple(operator.index(d) for d in shape)
    n = math.prod(shape)
    wide = dtype.itemsize == 8
    # 32-bit words come in pairs, one threefry block each: XLA halves the first even
    # dimension (without one, the largest, rounded up) and puts a block's two words next to
    # each other just inside it (then drops the extra row of an odd dimension)
    split = next((i for i, d in enumerate(shape) if d % 2 == 0), None)
    if split is None and shape:
        split = shape.index(max(shape))
    if wide or not shape:
        half = shape if wide else (1,)
    else:
        half = shape[:split] + ((shape[split] + 1) // 2,) + shape[split + 1:]
    blocks = math.prod(half)
    k1, k2 = _u64_words(key, 0)
    s_lo, s_hi = _u64_words(key, 1)
    c_lo, c_hi = _advance(s_lo, s_hi, reshape(iota(np.uint32, blocks), half))
    o1, o2 = threefry2x32(broadcast_in_dim(k1, half, ()), broadcast_in_dim(k2, half, ()),
                          c_lo, c_hi)
    if wide:
        bits = bitwise_or(convert_element_type(o1, dtype),
                          shift_left(convert_element_type(o2, dtype), full_like(o1, 32, dtype)))
    else:
        at = split or 0
        pairs = concatenate([expand_dims(o1, (at + 1,)), expand_dims(o2, (at + 1,))], at + 1)
        padded = half[:at] + (2 * half[at],) + half[at + 1:]
        words = slice_in_dim(reshape(pairs, padded), 0, shape[at] if shape else 1, 1, at)
        bits = convert_element_type(words, dtype)
    new_state = _advance(s_lo, s_hi, to_array(np.full((1,), blocks, np.uint32)))
    new_key = concatenate([reshape(k1, (1,)), reshape(k2, (1,))] + list(new_state), 0)
    return new_key, reshape(bits, shape)
