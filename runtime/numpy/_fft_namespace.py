"""The implementation of `kiln.numpy.fft`: its public names (`__all__`, re-exported there)
and the helpers they use. `kiln.numpy.fft`'s docstring describes them."""
import math
import operator

import numpy as np

from .. import lax
from ..array import to_array
from ..compiler.ir import dtypes
from ._core import check_arraylike
from . import _creation, _shape, _ufuncs

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
           "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_FFT, _IFFT, _RFFT, _IRFFT = (lax.FftType.FFT, lax.FftType.IFFT, lax.FftType.RFFT,
                              lax.FftType.IRFFT)


def _norm_factor(size, func_name, norm):
    """JAX's `_fft_norm`: the factor the transform is multiplied by (None for none, and for
    an empty result, which has nothing to scale)."""
    if norm not in (None, "backward", "ortho", "forward"):
        raise ValueError(f'Invalid norm value {norm}; should be "backward","ortho" or '
                         '"forward".')
    if norm is None or norm == "backward" or size == 0:
        return None
    inverse = func_name.startswith("i")
    if norm == "ortho":
        return math.sqrt(size) if inverse else 1 / math.sqrt(size)
    return size if inverse else 1 / size


def _core(func_name, fft_type, a, s, axes, norm):
    full_name = f"jax.numpy.fft.{func_name}"
    check_arraylike(full_name, a)
    arr = to_array(a, full_name)
    if s is not None:
        s = tuple(map(operator.index, s))
        if any(x <= 0 for x in s):
            raise ValueError("Shape should be positive.")
    if s is not None and axes is not None and len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    orig_axes = axes
    if axes is None:
        axes = range(arr.ndim) if s is None else range(arr.ndim - len(s), arr.ndim)
    axes = tuple(axes)
    if len(axes) != len(set(axes)):
        raise ValueError(f"{full_name} does not support repeated axes. Got axes {axes}.")
    if orig_axes is not None:
        axes = tuple(range(arr.ndim - len(axes), arr.ndim))
        arr = _shape.moveaxis(arr, tuple(orig_axes), axes)
    if s is not None:
        in_s = list(arr.shape)
        for axis, x in zip(axes, s):
            in_s[axis] = x
        if fft_type == _IRFFT:
            in_s[-1] = in_s[-1] // 2 + 1
        arr = arr[tuple(slice(x) for x in in_s)]
        widths = [(0, x - y) for x, y in zip(in_s, arr.shape)]
        if any(w for _, w in widths):
            arr = _shape.pad(arr, widths)
    elif fft_type == _IRFFT:
        s = [arr.shape[axis] for axis in axes[:-1]]
        if axes:
            s += [max(0, 2 * (arr.shape[axes[-1]] - 1))]
    else:
        s = [arr.shape[axis] for axis in axes]
    out = _core_nd(arr, fft_type, tuple(s))
    factor = _norm_factor(math.prod(s), func_name, norm)
    if factor is not None:
        out = _ufuncs.multiply(out, factor)
    if orig_axes is not None:
        out = _shape.moveaxis(out, axes, tuple(orig_axes))
    return out


def _core_nd(arr, fft_type, s):
    """More than 3 axes: the transform in groups of at most 3 (JAX's `_fft_core_nd`)."""
    if len(s) <= 3:
        return lax.fft(arr, fft_type, s)
    n = 2 if len(s) == 4 else 3
    src = tuple(range(arr.ndim - len(s), arr.ndim - n))
    dst = tuple(range(arr.ndim - len(s) + n, arr.ndim))
    if fft_type in (_RFFT, _FFT):
        arr = lax.fft(arr, fft_type, s[-n:])
        arr = _shape.moveaxis(arr, src, dst)
        arr = _core_nd(arr, _FFT, s[:-n])
        return _shape.moveaxis(arr, dst, src)
    arr = _shape.moveaxis(arr, src, dst)
    arr = _core_nd(arr, _IFFT, s[:-n])
    arr = _shape.moveaxis(arr, dst, src)
    return lax.fft(arr, fft_type, s[-n:])


def fftn(a, s=None, axes=None, norm=None):
    return _core("fftn", _FFT, a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    return _core("ifftn", _IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    return _core("rfftn", _RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    return _core("irfftn", _IRFFT, a, s, axes, norm)


def _check_1d(func_name, axis):
    if isinstance(axis, (list, tuple)):
        full_name = f"jax.numpy.fft.{func_name}"
        raise ValueError(f"{full_name} does not support multiple axes. Please use {full_name}n. "
                         f"Got axis = {axis!r}.")


def _core_1d(func_name, fft_type, a, n, axis, norm):
    _check_1d(func_name, axis)
    return _core(func_name, fft_type, a, None if n is None else [n],
                 None if axis is None else [axis], norm)


def fft(a, n=None, axis=-1, norm=None):
    return _core_1d("fft", _FFT, a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
    return _core_1d("ifft", _IFFT, a, n, axis, norm)


def rfft(a, n=None, axis=-1, norm=None):
    return _core_1d("rfft", _RFFT, a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
    return _core_1d("irfft", _IRFFT, a, n, axis, norm)


def hfft(a, n=None, axis=-1, norm=None):
    conj_a = _ufuncs.conj(a)
    _check_1d("hfft", axis)
    nn = (conj_a.shape[axis] - 1) * 2 if n is None else n
    return _ufuncs.multiply(_core_1d("hfft", _IRFFT, conj_a, n, axis, norm), nn)


def ihfft(a, n=None, axis=-1, norm=None):
    _check_1d("ihfft", axis)
    arr = _creation.asarray(a)
    nn = arr.shape[axis] if n is None else n
    out = _core_1d("ihfft", _RFFT, arr, n, axis, norm)
    return _ufuncs.multiply(_ufuncs.conj(out), 1 / nn)


def _core_2d(func_name, fft_type, a, s, axes, norm):
    if len(axes) != 2:
        raise ValueError(f"jax.numpy.fft.{func_name} only supports 2 axes. Got axes = {axes!r}.")
    return _core(func_name, fft_type, a, s, axes, norm)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    return _core_2d("fft2", _FFT, a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    return _core_2d("ifft2", _IFFT, a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    return _core_2d("rfft2", _RFFT, a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    return _core_2d("irfft2", _IRFFT, a, s, axes, norm)


def _check_freq_args(name, n, d):
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of jax.numpy.fft.{name} only takes an int. "
                         f"Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of jax.numpy.fft.{name} only takes a single value. "
                         f"Got d = {list(d)}.")


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    _check_freq_args("fftfreq", n, d)
    out_dtype = dtype or dtypes.default_float()
    work = np.dtype(out_dtype) if dtypes.is_inexact(out_dtype) else dtypes.default_float()
    i = _creation.arange(n, dtype=work)
    k = _ufuncs.subtract(_ufuncs.remainder(_ufuncs.add(i, n // 2), n), n // 2)
    result = _ufuncs.divide(k, _creation.asarray(d * n, dtype=work))
    return _ufuncs.astype(result, out_dtype)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    _check_freq_args("rfftfreq", n, d)
    dtype = dtype or dtypes.default_float()
    k = _creation.arange(0, n // 2 + 1, dtype=dtype)
    return _ufuncs.divide(k, _creation.asarray(d * n, dtype=dtype))


def _shifts(x, axes, sign):
    if axes is None:
        return tuple(range(x.ndim)), [sign * (dim // 2) for dim in x.shape]
    if isinstance(axes, int):
        return axes, sign * (x.shape[axes] // 2)
    return axes, [sign * (x.shape[ax] // 2) for ax in axes]


def fftshift(x, axes=None):
    check_arraylike("fftshift", x)
    x = to_array(x, "fftshift")
    axes, shift = _shifts(x, axes, 1)
    return _shape.roll(x, shift, axes)


def ifftshift(x, axes=None):
    check_arraylike("ifftshift", x)
    x = to_array(x, "ifftshift")
    axes, shift = _shifts(x, axes, -1)
    return _shape.roll(x, shift, axes)
