"""The implementation of `kiln.scipy.signal`: its public names (`__all__`, re-exported there)
and the helpers they use. `kiln.scipy.signal`'s docstring describes them."""
import numpy as np

from .. import lax
from .. import numpy as jnp
from ..numpy._core import canonicalize_axis, check_arraylike, promote_dtypes_inexact

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve", "detrend"]

_MODES = ("full", "same", "valid")


def _check_mode(mode):
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {list(_MODES)}, got {mode!r}")


def _real_conv(lhs, rhs, padding, precision):
    out = lax.conv_general_dilated(lhs[None, None], rhs[None, None], (1,) * lhs.ndim, padding,
                                   precision=precision)
    return out[0, 0]


def _conv(lhs, rhs, padding, precision):
    """Correlation of `lhs` with `rhs` (`lax.conv_general_dilated`'s operation); complex
    operands as four real correlations."""
    if not jnp.iscomplexobj(lhs):
        return _real_conv(lhs, rhs, padding, precision)
    a, b, c, d = lhs.real, lhs.imag, rhs.real, rhs.imag
    real = _real_conv(a, c, padding, precision) - _real_conv(b, d, padding, precision)
    imag = _real_conv(a, d, padding, precision) + _real_conv(b, c, padding, precision)
    return lax.complex(real, imag)


def _convolve_nd(in1, in2, mode, precision):
    _check_mode(mode)
    check_arraylike("convolve", in1, in2)
    in1, in2 = promote_dtypes_inexact(jnp.asarray(in1), jnp.asarray(in2))
    if in1.ndim != in2.ndim:
        raise ValueError(f"in1 and in2 must have the same number of dimensions, got "
                         f"{in1.ndim} and {in2.ndim}")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"zero-size arrays not supported in convolutions, got shapes "
                         f"{in1.shape} and {in2.shape}.")
    bigger = all(s1 >= s2 for s1, s2 in zip(in1.shape, in2.shape))
    smaller = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape))
    if not (bigger or smaller):
        raise ValueError("One input must be smaller than the other in every dimension.")
    kept = in2.shape
    if not bigger:
        in1, in2 = in2, in1
    k = in2.shape
    if mode == "full":
        padding = [(s - 1, s - 1) for s in k]
    elif mode == "same":
        padding = [(s - 1 - (o - 1) // 2, s - o + (o - 1) // 2) for s, o in zip(k, kept)]
    else:
        padding = [(0, 0)] * len(k)
    return _conv(in1, jnp.flip(in2), padding, precision)


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """The N-dimensional convolution of `in1` and `in2` (`method="fft"`: `fftconvolve`)."""
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method not in ("auto", "direct"):
        raise ValueError(f"Got method={method!r}; expected 'auto', 'fft', or 'direct'.")
    return _convolve_nd(in1, in2, mode, precision)


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """The N-dimensional cross-correlation: `convolve(in1, flip(conj(in2)))`."""
    check_arraylike("correlate", in1, in2)
    return convolve(in1, jnp.flip(jnp.conj(jnp.asarray(in2))), mode, method, precision)


def _check_2d(name, in1, in2, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0")
    if np.ndim(in1) != 2 or np.ndim(in2) != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs.")


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-D convolution (zero fill at the boundary only)."""
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _convolve_nd(in1, in2, mode, precision)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-D cross-correlation (zero fill at the boundary only), as SciPy orients it when
    `in2` is the larger input."""
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    in1, in2 = jnp.asarray(in1), jnp.asarray(in2)
    swap = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape)) and in1.shape != in2.shape
    if swap and mode != "same":
        out = _convolve_nd(jnp.flip(in2), jnp.conj(in1), mode, precision)
        return out if mode == "valid" else jnp.conj(out)
    return jnp.flip(_convolve_nd(jnp.flip(in1), jnp.conj(in2), mode, precision))


def _centered(x, shape, axes):
    index = [slice(None)] * x.ndim
    for ax, n in zip(axes, shape):
        start = (x.shape[ax] - n) // 2
        index[ax] = slice(start, start + n)
    return x[tuple(index)]


def fftconvolve(in1, in2, mode="full", axes=None):
    """Convolution through the FFT, over `axes` (all by default); the other axes must match
    and are convolved independently."""
    check_arraylike("fftconvolve", in1, in2)
    _check_mode(mode)
    in1, in2 = promote_dtypes_inexact(jnp.asarray(in1), jnp.asarray(in2))
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    if axes is None:
        axes = tuple(range(in1.ndim))
    else:
        axes = tuple(canonicalize_axis(a, in1.ndim) for a in np.atleast_1d(axes).tolist())
    mapped = [i for i in range(in1.ndim) if i not in axes]
    if any(in1.shape[i] != in2.shape[i] for i in mapped):
        raise ValueError(f"mapped axes must have same shape; got in1.shape={in1.shape} "
                         f"in2.shape={in2.shape} axes={axes}")
    if in1.size == 0 or in2.size == 0:
        return jnp.zeros([0 if i in axes else in1.shape[i] for i in range(in1.ndim)],
                         in1.dtype)
    if mode == "valid":
        if not all(in1.shape[a] >= in2.shape[a] for a in axes):
            if all(in1.shape[a] <= in2.shape[a] for a in axes):
                in1, in2 = in2, in1
            else:
                raise ValueError("For 'valid' mode, one must be at least as large as the "
                                 "other in every dimension")
    full = [in1.shape[a] + in2.shape[a] - 1 for a in axes]
    if jnp.iscomplexobj(in1):
        out = jnp.fft.ifftn(jnp.fft.fftn(in1, full, axes) * jnp.fft.fftn(in2, full, axes),
                            full, axes)
    else:
        out = jnp.fft.irfftn(jnp.fft.rfftn(in1, full, axes) * jnp.fft.rfftn(in2, full, axes),
                             full, axes).astype(in1.dtype)
    if mode == "same":
        return _centered(out, [in1.shape[a] for a in axes], axes)
    if mode == "valid":
        return _centered(out, [in1.shape[a] - in2.shape[a] + 1 for a in axes], axes)
    return out


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):
    """`data` minus its mean (`type="constant"`) or minus a least-squares line on each
    segment between the breakpoints `bp` (`type="linear"`) along `axis`."""
    if overwrite_data is not None:
        raise NotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    check_arraylike("detrend", data)
    x, = promote_dtypes_inexact(jnp.asarray(data))
    if type == "constant":
        return x - x.mean(axis, keepdims=True)
    n = x.shape[axis]
    bps = np.unique(np.r_[0, bp, n])
    if bps[0] < 0 or bps[-1] > n:
        raise ValueError("Breakpoints must be non-negative and less than length of data "
                         "along given axis.")
    x = jnp.moveaxis(x, axis, 0)
    pieces = []
    for lo, hi in zip(bps[:-1], bps[1:]):
        seg = x[lo:hi]
        t = jnp.arange(hi - lo, dtype=seg.real.dtype).reshape((-1,) + (1,) * (x.ndim - 1))
        t = t - t.mean()
        slope = (t * seg).sum(0) / jnp.maximum((t * t).sum(), 1)
        pieces.append(seg - seg.mean(0) - t * slope)
    return jnp.moveaxis(jnp.concatenate(pieces, 0), 0, axis)
