"""The implementation of `kiln.scipy.signal`'s short-time spectra: stft, csd and welch, as
SciPy defines them (and JAX follows). The signal is cut into windowed segments of `nperseg`
samples every `nperseg - noverlap` (a gather of static indices), each segment detrended and
transformed by `kiln.numpy.fft`; `csd` averages conj(X) Y over the segments (mean or
bias-corrected median) and `welch` is `csd(x, x).real`. Windows named by a string or tuple are
SciPy's `get_window`, computed once on the host."""
import numpy as np
import scipy.signal as _host_signal

from .. import numpy as jnp
from ..numpy._core import canonicalize_axis, check_arraylike, promote_dtypes_inexact
from ._signal import detrend as _linear_detrend

__all__ = ["stft", "csd", "welch"]


def _window(window, nperseg, dtype):
    if isinstance(window, (str, tuple)):
        win = _host_signal.get_window(window, nperseg)
    else:
        win = np.asarray(window)
        if win.ndim != 1 or win.shape[0] != nperseg:
            raise ValueError(f"window must be 1-D with nperseg={nperseg} samples, got shape "
                             f"{win.shape}")
    return jnp.asarray(win.astype(dtype))


def _detrend(segments, detrend):
    if detrend is False or detrend is None:
        return segments
    if callable(detrend):
        return detrend(segments)
    if detrend == "constant":
        return segments - segments.mean(-1, keepdims=True)
    if detrend == "linear":
        return _linear_detrend(segments, axis=-1, type="linear")
    raise ValueError(f"Unknown detrend type {detrend!r}")


def _segments(x, nperseg, step):
    n = x.shape[-1]
    count = (n - nperseg) // step + 1
    index = np.arange(count)[:, None] * step + np.arange(nperseg)[None, :]
    return x[..., index]


def _spectral(name, x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
              scaling, axis, mode, boundary, padded):
    """(freqs, times, result) for mode "psd" (conj(X) Y, scaled) or "stft" (X, scaled):
    the result has the frequencies along `axis` and the segments last."""
    if scaling not in ("density", "spectrum"):
        raise ValueError(f"Unknown scaling: {scaling!r}")
    if boundary not in (None, "zeros"):
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: "
                         f"['zeros', None]")
    same = y is None
    check_arraylike(name, x, *([] if same else [y]))
    x, = promote_dtypes_inexact(jnp.asarray(x))
    axis = canonicalize_axis(axis, x.ndim)
    x = jnp.moveaxis(x, axis, -1)
    if not same:
        y, = promote_dtypes_inexact(jnp.asarray(y))
        y = jnp.moveaxis(y, canonicalize_axis(axis, y.ndim), -1)
        x, y = promote_dtypes_inexact(x, y)
        x, y = jnp.broadcast_arrays(x, y)
    n = x.shape[-1]
    if nperseg is None:
        nperseg = 256 if isinstance(window, (str, tuple)) else len(window)
    nperseg = min(int(nperseg), n)
    if nperseg < 1:
        raise ValueError("nperseg must be a positive integer")
    nfft = nperseg if nfft is None else int(nfft)
    if nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    step = nperseg - noverlap
    real = x.dtype.kind == "f"
    dtype = x.real.dtype
    win = _window(window, nperseg, dtype)

    def prepare(s):
        if boundary == "zeros":
            s = jnp.pad(s, [(0, 0)] * (s.ndim - 1) + [(nperseg // 2, nperseg // 2)])
        if padded:
            extra = (-(s.shape[-1] - nperseg) % step) % nperseg
            s = jnp.pad(s, [(0, 0)] * (s.ndim - 1) + [(0, extra)])
        segs = _detrend(_segments(s, nperseg, step), detrend) * win
        if return_onesided and real:
            return jnp.fft.rfft(segs, nfft, axis=-1)
        return jnp.fft.fft(segs, nfft, axis=-1)

    scale = 1.0 / (fs * jnp.sum(win * win)) if scaling == "density" \
        else 1.0 / jnp.sum(win) ** 2
    fx = prepare(x)
    if mode == "stft":
        result = fx * jnp.sqrt(scale)
    else:
        fy = fx if same else prepare(y)
        result = jnp.conj(fx) * fy * scale
        if return_onesided and real:
            end = -1 if nfft % 2 == 0 else None
            result = result.at[..., 1:end].multiply(2)
    onesided = return_onesided and real
    freqs = (np.fft.rfftfreq(nfft, 1 / fs) if onesided else np.fft.fftfreq(nfft, 1 / fs))
    length = n + (2 * (nperseg // 2) if boundary == "zeros" else 0)
    if padded:
        length += (-(length - nperseg) % step) % nperseg
    times = np.arange(nperseg / 2, length - nperseg / 2 + 1, step) / fs
    if boundary is not None:
        times = times - (nperseg / 2) / fs
    # (..., segment, freq) -> the frequency axis at `axis`, the segments last
    result = jnp.moveaxis(result, -1, axis)
    return jnp.asarray(freqs.astype(dtype)), jnp.asarray(times.astype(dtype)), result


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
    """The short-time Fourier transform: (frequencies, segment times, Zxx[..., f, t])."""
    return _spectral("stft", x, None, fs, window, nperseg, noverlap, nfft, detrend,
                     return_onesided, "spectrum", axis, "stft", boundary, padded)


def _median_bias(n):
    k = np.arange(1, (n - 1) // 2 + 1)
    return 1 + np.sum(1.0 / (2 * k + 1) - 1.0 / (2 * k))


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1,
        average="mean"):
    """The cross power spectral density of `x` and `y` (Welch's method)."""
    if average not in ("mean", "median"):
        raise ValueError(f"average must be 'median' or 'mean', got {average}")
    freqs, _, pxy = _spectral("csd", x, y, fs, window, nperseg, noverlap, nfft, detrend,
                              return_onesided, scaling, axis, "psd", None, False)
    if pxy.ndim >= 2 and pxy.size > 0:
        if pxy.shape[-1] > 1:
            if average == "median":
                bias = _median_bias(pxy.shape[-1])
                if jnp.iscomplexobj(pxy):
                    pxy = (jnp.median(pxy.real, -1) + 1j * jnp.median(pxy.imag, -1))
                else:
                    pxy = jnp.median(pxy, -1)
                pxy = pxy / bias
            else:
                pxy = pxy.mean(-1)
        else:
            pxy = pxy.reshape(pxy.shape[:-1])
    return freqs, pxy


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """The power spectral density of `x` by Welch's method: `csd(x, x).real`."""
    freqs, pxx = csd(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     scaling, axis, average)
    return freqs, pxx.real
