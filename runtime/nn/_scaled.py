"""`kiln.nn.scaled_matmul`, `scaled_dot_general`, `get_scaled_dot_general_config`: JAX's
block-scaled (microscaling) matrix products, emulated in float32.

JAX runs these on cuDNN with float8/float4 operands (`float8_e4m3fn`, `float4_e2m1fn`) and
float8 scales (`float8_e8m0fnu`, `float8_e4m3fn`), types NumPy cannot hold. kiln computes the
same numbers in float32: `scaled_matmul` multiplies each block of `block_size` elements along
the contracting axis by its scale and contracts in float32 (JAX's stated equivalence), and
`scaled_dot_general` quantizes as JAX's `quantize` does — per-block scales from the block's
largest magnitude (mxfp8: a power of two rounded up, as an e8m0 exponent; nvfp4: divided by the
global scale and rounded to e4m3fn), values clipped and rounded to the nearest value of the
narrow format (ties to even) — but keeps those values in float32. The configs name the narrow
types by their JAX names (strings) instead of dtypes. The backward pass is JAX's custom VJP:
the transposed products, quantized for mxfp8 and plain for nvfp4 (with its straight-through
mask for clipped inputs).
"""
import dataclasses
import warnings

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..array import to_array
from ..compiler.ir import dtypes

__all__ = ["scaled_matmul", "scaled_dot_general", "get_scaled_dot_general_config"]

# JAX's narrow float types: (mantissa bits, smallest normal exponent, largest value).
_FORMATS = {"float8_e4m3fn": (3, -6, 448.0), "float4_e2m1fn": (1, 0, 6.0)}


@dataclasses.dataclass(slots=True)
class BlockScaleConfig:
    """How `scaled_dot_general` quantizes one operand (JAX's `BlockScaleConfig`)."""
    mode: str
    block_size: int
    data_type: str
    scale_type: str
    global_scale: object
    infer_only: bool


def get_scaled_dot_general_config(mode, global_scale=None):
    """The config JAX builds for 'nvfp4' (float4 blocks of 16, e4m3fn scales, a global
    scale) or 'mxfp8' (e4m3fn blocks of 32, e8m0 scales)."""
    if mode == "nvfp4":
        return BlockScaleConfig(
            mode="nvfp4", block_size=16, data_type="float4_e2m1fn", scale_type="float8_e4m3fn",
            global_scale=jnp.ones((1,), np.float32) if global_scale is None else global_scale,
            infer_only=False)
    if mode == "mxfp8":
        return BlockScaleConfig(mode="mxfp8", block_size=32, data_type="float8_e4m3fn",
                                scale_type="float8_e8m0fnu", global_scale=None,
                                infer_only=False)
    raise ValueError(f"Unsupported mode: {mode}")


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """`einsum('BMK,BNK->BMN')` of the operands with each block of `K // K_scales` elements
    multiplied by its scale; computed in float32."""
    a, b, a_scales, b_scales = (to_array(x, "scaled_matmul")
                                for x in (lhs, rhs, lhs_scales, rhs_scales))
    if not all(x.ndim == 3 for x in (a, b, a_scales, b_scales)):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays")
    (B_a, M_a, K_a), (B_b, N_b, K_b) = a.shape, b.shape
    if K_a != K_b or B_a != B_b:
        raise ValueError(f"scaled_matmul requires inputs a and b to have matching batch (B) "
                         f"and contract (K) dimensions, but got shapes {a.shape} and "
                         f"{b.shape}")
    (B_as, M_as, K_as), (B_bs, N_bs, K_bs) = a_scales.shape, b_scales.shape
    if K_as != K_bs or B_as != B_bs:
        raise ValueError(f"scaled_matmul requires scales to have matching batch (B) and "
                         f"contract (K) dimensions, but got shapes {a_scales.shape} and "
                         f"{b_scales.shape}")
    if M_as != M_a or N_bs != N_b:
        raise ValueError(f"scaled_matmul requires scales to match non-contract dimensions of "
                         f"inputs, but got shapes a: {a.shape}, b: {b.shape}, a_scales: "
                         f"{a_scales.shape}, b_scales: {b_scales.shape}")
    out_dtype = jnp.dtype(preferred_element_type)

    def scaled(x, scales):
        x = x.astype(np.float32)
        return x * jnp.repeat(scales.astype(np.float32), x.shape[-1] // scales.shape[-1], -1)
    out = lax.dot_general(scaled(a, a_scales), scaled(b, b_scales), (((2,), (2,)), ((0,), (0,))),
                          preferred_element_type=np.float32)
    return out.astype(out_dtype)


# ------------------------------------------------------------------------ quantization

def _pow2(e):
    """2**e for int32 exponents in float32's normal range, built from the bits."""
    return lax.bitcast_convert_type(lax.shift_left(e + 127, jnp.int32(23)), np.float32)


def _round_to_format(x, name):
    """float32 `x` rounded to the nearest value of the narrow float type `name` (ties to
    even; `x` is already within its range)."""
    mantissa, min_exp, _ = _FORMATS[name]
    bits = lax.bitcast_convert_type(x, np.uint32)
    exp = lax.shift_right_logical(bits, jnp.uint32(23)) & jnp.uint32(0xFF)
    exp = jnp.maximum(exp.astype(np.int32) - 127, min_exp)
    step = _pow2(exp - mantissa)
    return jnp.round(x / step) * step


def _e8m0_scale(amax, dtype):
    """JAX's mxfp8 scale: the e8m0 exponent of `amax` rounded up, as a value of `dtype`
    (an exponent of 0 reads as 2**-127, or 2**-15 in float16)."""
    bits = lax.bitcast_convert_type(amax.astype(np.float32), np.uint32)
    exp = lax.shift_right_logical(bits, jnp.uint32(23))
    mant = bits & jnp.uint32(0x7FFFFF)
    round_up = (mant > 0) & (exp != 0xFE) & ~((exp == 0) & (mant <= 0x400000))
    exp = jnp.where(round_up, exp + 1, exp).astype(np.uint8).astype(np.uint32)
    value = lax.bitcast_convert_type(lax.shift_left(exp, jnp.uint32(23)), np.float32)
    tiny = 2.0 ** -15 if dtype == np.float16 else 2.0 ** -127
    return jnp.where(value == 0, jnp.array(tiny, np.float32), value).astype(dtype)


def _quantize(x, config):
    """(values on the narrow grid, per-block scales), both float32, as JAX's `quantize`."""
    shape, block = x.shape, config.block_size
    if not (shape[-1] >= block and shape[-1] % block == 0):
        raise ValueError(f"scaled_dot_general: the contracting size {shape[-1]} must be a "
                         f"multiple of the block size {block} (config {config.mode!r})")
    x = x.reshape(shape[:-1] + (shape[-1] // block, block))
    top = jnp.array(_FORMATS[config.data_type][2], x.dtype)

    def block_scales(x):
        return jnp.max(jnp.abs(x), axis=-1, keepdims=True) / top
    if config.mode == "mxfp8":
        scales = _e8m0_scale(block_scales(x), x.dtype)
        scaled = x / scales
    elif config.mode == "nvfp4":
        x = x / config.global_scale
        scale_top = _FORMATS[config.scale_type][2]
        scales = _round_to_format(jnp.clip(block_scales(x), 0, scale_top).astype(np.float32),
                                  config.scale_type)
        scaled = x / scales
    else:
        raise ValueError(f"Unrecognized mode: {config.mode}.")
    values = _round_to_format(jnp.clip(scaled, -top, top).astype(np.float32), config.data_type)
    return values.reshape(shape), scales.astype(np.float32).reshape(scales.shape[:-1])


def _to_3d(x, contract, batch):
    """`x` as (batch, rows, contracted): JAX's `shape_normalization`."""
    rows = [d for d in range(x.ndim) if d not in contract and d not in batch]
    order = sorted(batch) + rows + sorted(contract)
    sizes = [int(np.prod([x.shape[d] for d in ds], dtype=int))
             for ds in (batch, rows, contract)]
    return jnp.reshape(jnp.transpose(x, order), sizes)


def _dot_shape(lhs_shape, rhs_shape, lhs_dn, rhs_dn):
    (lc, lb), (rc, rb) = lhs_dn, rhs_dn
    return (tuple(d for i, d in enumerate(lhs_shape) if i in lb)
            + tuple(d for i, d in enumerate(lhs_shape) if i not in lc and i not in lb)
            + tuple(d for i, d in enumerate(rhs_shape) if i not in rc and i not in rb))


def _scaled_dot(lhs, rhs, lhs_dn, rhs_dn, out_dtype, configs, quantized=True):
    a, b = _to_3d(lhs, *lhs_dn), _to_3d(rhs, *rhs_dn)
    if quantized:
        (a, a_scales), (b, b_scales) = _quantize(a, configs[0]), _quantize(b, configs[1])
        out = scaled_matmul(a, b, a_scales, b_scales, out_dtype)
    else:
        out = jnp.matmul(a, jnp.transpose(b, (0, 2, 1)), preferred_element_type=out_dtype)
    return jnp.reshape(out, _dot_shape(lhs.shape, rhs.shape, lhs_dn, rhs_dn))


def _forward(lhs, rhs, dn, out_dtype, configs):
    (lc, rc), (lb, rb) = dn
    nvfp4 = configs[0].mode == "nvfp4"
    out = _scaled_dot(lhs, rhs, (lc, lb), (rc, rb), np.float32 if nvfp4 else out_dtype,
                      configs)
    if nvfp4:
        out = (out * (configs[0].global_scale * configs[1].global_scale)).astype(out_dtype)
    return out


def _transpose_lhs(g, x, y, dn, out_dtype, configs, swap_ans=False):
    """The cotangent of `x` in `dot(x, y)` (JAX's `scaled_dot_general_transpose_lhs`)."""
    (xc, yc), (xb, yb) = dn
    x_kept = [d for d in range(x.ndim) if d not in xc and d not in xb]
    y_kept = [d for d in range(y.ndim) if d not in yc and d not in yb]
    nb, nx, ny = len(xb), len(x_kept), len(y_kept)
    ans_batch = tuple(range(nb))
    ans_y = tuple(range(nb, nb + ny)) if swap_ans else tuple(range(nb + nx, nb + nx + ny))
    xc_by_y = [xc[i] for i in np.argsort(yc)]
    out_axes = tuple(int(i) for i in np.argsort(list(xb) + x_kept + xc_by_y))
    out = _scaled_dot(g, y, (ans_y, ans_batch), (tuple(y_kept), tuple(yb)), out_dtype, configs,
                      quantized=configs[0].mode != "nvfp4")
    return lax.transpose(out, out_axes)


def _with_vjp(dn, out_dtype, configs):
    from ..custom_derivatives import custom_vjp

    @custom_vjp
    def dot(lhs, rhs):
        return _forward(lhs, rhs, dn, out_dtype, configs)

    def fwd(lhs, rhs):
        return dot(lhs, rhs), (lhs, rhs)

    def bwd(res, g):
        lhs, rhs = res
        (lc, rc), (lb, rb) = dn
        grad_lhs = _transpose_lhs(g, lhs, rhs, dn, out_dtype, [configs[2], configs[1]])
        grad_rhs = _transpose_lhs(g, rhs, lhs, ((rc, lc), (rb, lb)), out_dtype,
                                  [configs[2], configs[0]], swap_ans=True)
        if configs[2].mode == "nvfp4":   # straight through, zero where the input was clipped
            top = _FORMATS[configs[0].data_type][2] * _FORMATS[configs[0].scale_type][2]
            grad_lhs = jnp.where(jnp.abs(lhs) <= configs[0].global_scale * top, grad_lhs, 0)
            grad_rhs = jnp.where(jnp.abs(rhs) <= configs[1].global_scale * top, grad_rhs, 0)
        return grad_lhs, grad_rhs
    dot.defvjp(fwd, bwd)
    return dot


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32,
                       configs=None, implementation=None):
    """`lax.dot_general` with both operands quantized to blocks (`configs`: lhs, rhs and
    gradient configs from `get_scaled_dot_general_config`); without configs, `dot_general`."""
    if implementation is not None:
        warnings.warn("Backend selector, now ignored. The system chooses the backend "
                      "automatically.", DeprecationWarning, stacklevel=2)
    if configs is None:
        return lax.dot_general(lhs, rhs, dimension_numbers,
                               preferred_element_type=preferred_element_type)
    out_dtype = jnp.dtype(preferred_element_type)
    if out_dtype not in (dtypes.float32, dtypes.float16) and out_dtype.name != "bfloat16":
        raise TypeError(f"Only support preferred_element_type in (f32, bf16, f16), but got "
                        f"{out_dtype}")
    lhs, rhs = to_array(lhs, "scaled_dot_general"), to_array(rhs, "scaled_dot_general")
    (lc, rc), (lb, rb) = (tuple(d) for d in dimension_numbers[0]), \
        (tuple(d) for d in dimension_numbers[1])
    squeeze = not lb or not rb
    if not lb:   # a batch axis of 1 at the end, squeezed from the result
        lhs, lb = jnp.expand_dims(lhs, lhs.ndim), (lhs.ndim,)
    if not rb:
        rhs, rb = jnp.expand_dims(rhs, rhs.ndim), (rhs.ndim,)
    out = _with_vjp(((lc, rc), (lb, rb)), out_dtype, configs)(lhs, rhs)
    return jnp.squeeze(out, axis=0) if squeeze else out
