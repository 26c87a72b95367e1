"""fft: the discrete Fourier transform over the trailing 1-3 axes (JAX's `fft_p`).

Params: `fft_type`, one of FFT_TYPES ("FFT", "IFFT", "RFFT", "IRFFT": JAX's `FftType` names),
and `fft_lengths`, the lengths of the transformed axes (the operand's trailing axes; for IRFFT
the result's: the operand's last axis holds fft_lengths[-1] // 2 + 1 coefficients).
- FFT/IFFT: complex64/complex128 to the same type and shape (IFFT divides by the product of
  the lengths, as NumPy's `ifftn`);
- RFFT: float32/float64 to complex64/complex128, the last axis cut to n // 2 + 1;
- IRFFT: complex to real, the last axis the Hermitian half of a line of n.
The shape and dtype rule raises JAX's ValueErrors. The NumPy implementation is numpy.fft's
functions (`transform`, which the CUDA backend runs with CuPy's), cast to the result type (an
empty result is zeros).

The transform is linear: the JVP transforms the tangent; the VJP is JAX's transpose (FFT and
IFFT are symmetric matrices, so each is its own transpose; RFFT's and IRFFT's transposes weigh
the coefficients that stand for two (all but the zero and the n / 2 one) by 2, as JAX's
`_rfft_transpose` and `_irfft_transpose` do). Batching moves the batch axis to the front.
"""
import math

import numpy as np

from ..ir.abstract import ShapedArray
from . import batching as B
from . import emit as E
from .core import register, JVP, VJP, BATCH
from .rule_forms import cotangent_rule, tangent_rule

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")
_REAL = {np.dtype(np.float32): np.dtype(np.complex64),
         np.dtype(np.float64): np.dtype(np.complex128)}
_COMPLEX = {c: r for r, c in _REAL.items()}


def _fft_eval(x, *, fft_type, fft_lengths):
    lengths = tuple(fft_lengths)
    if fft_type not in FFT_TYPES:
        raise ValueError(f"Unknown FFT type '{fft_type}'")
    if not 1 <= len(lengths) <= 3:
        raise ValueError(f"FFT takes 1 to 3 fft_lengths, got {lengths}.")
    if len(lengths) > x.ndim:
        raise ValueError(f"FFT input shape {x.shape} must have at least as many input "
                         f"dimensions as fft_lengths {lengths}.")
    k = len(lengths)
    if fft_type == "RFFT":
        if x.dtype not in _REAL:
            raise ValueError(f"RFFT input must be float32 or float64, got {x.dtype}")
        if x.shape[-k:] != lengths:
            raise ValueError(f"RFFT input shape {x.shape} minor dimensions must be equal to "
                             f"fft_lengths {lengths}")
        return ShapedArray(x.shape[:-k] + lengths[:-1] + (lengths[-1] // 2 + 1,),
                           _REAL[x.dtype], x.weak_type)
    if x.dtype not in _COMPLEX:
        raise ValueError(f"{fft_type} input must be complex64 or complex128, got {x.dtype}")
    if fft_type == "IRFFT":
        if x.shape[-k:-1] != lengths[:-1]:
            raise ValueError(f"IRFFT input shape {x.shape} minor dimensions must be equal to "
                             f"all except the last fft_length, got fft_lengths={lengths}")
        return ShapedArray(x.shape[:-k] + lengths, _COMPLEX[x.dtype], x.weak_type)
    if x.shape[-k:] != lengths:
        raise ValueError(f"FFT input shape {x.shape} minor dimensions must be equal to "
                         f"fft_lengths {lengths}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)   # JAX keeps the weak type


def transform(xp, x, fft_type, fft_lengths):
    """The transform with the array module `xp` (NumPy; CuPy on a GPU: cuFFT). IRFFT over
    several axes is an inverse transform of the others, then one over the last axis (cuFFT's
    multi-axis C2R would assume Hermitian symmetry along every axis)."""
    out = _fft_eval(ShapedArray(x.shape, x.dtype), fft_type=fft_type, fft_lengths=fft_lengths)
    if out.size == 0:
        return xp.zeros(out.shape, out.dtype)
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if fft_type == "FFT":
        result = xp.fft.fftn(x, axes=axes)
    elif fft_type == "IFFT":
        result = xp.fft.ifftn(x, axes=axes)
    elif fft_type == "RFFT":
        result = xp.fft.rfftn(x, axes=axes)
    else:
        if len(axes) > 1:
            x = xp.fft.ifftn(x, axes=axes[:-1])
        result = xp.fft.irfft(x, n=fft_lengths[-1], axis=-1)
    return xp.asarray(result).astype(out.dtype, copy=False)


def _fft(x, *, fft_type, fft_lengths):
    return transform(np, x, fft_type, fft_lengths)


fft = register("fft", _fft_eval, _fft)


def _fft_jvp(primals, tangents, out, *, fft_type, fft_lengths):
    return E.fft(tangents[0], fft_type=fft_type, fft_lengths=fft_lengths)


def _mask(m, n, dtype):
    """JAX's Hermitian weights of the last axis: 2, except 1 for the zero coefficient and, for
    even n, the n / 2 one."""
    mask = np.full(m, 2, dtype)
    mask[0] = 1
    if n % 2 == 0:
        mask[m - 1] = 1
    return mask


def _last_axis(weights, shape):
    return E.broadcast_in_dim(weights, shape=tuple(shape), broadcast_dimensions=(len(shape) - 1,))


def _fft_vjp(ct, primals, out, *, fft_type, fft_lengths):
    params = dict(fft_lengths=fft_lengths)
    if fft_type in ("FFT", "IFFT"):
        return [E.fft(ct, fft_type=fft_type, **params)]
    ct_aval = E.aval(ct)
    if fft_type == "RFFT":
        weights = _mask(ct_aval.shape[-1], fft_lengths[-1], ct_aval.dtype)
        g = E.div(E.conj(ct), _last_axis(weights, ct_aval.shape))
        x = E.fft(g, fft_type="IRFFT", **params)
        return [E.mul(x, math.prod(fft_lengths))]
    x = E.fft(ct, fft_type="RFFT", **params)
    shape = E.aval(x).shape
    dtype = _REAL[ct_aval.dtype]
    weights = (_mask(shape[-1], fft_lengths[-1], dtype) / math.prod(fft_lengths)).astype(dtype)
    return [E.conj(E.mul(_last_axis(weights, shape), x))]


def _fft_batch(args, dims, *, fft_type, fft_lengths):
    return E.fft(B.moveaxis(args[0], dims[0], 0), fft_type=fft_type,
                 fft_lengths=fft_lengths), 0


JVP[fft] = tangent_rule(_fft_jvp)
VJP[fft] = cotangent_rule(_fft_vjp)
BATCH[fft] = _fft_batch
