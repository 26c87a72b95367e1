"""The implementation of `kiln.scipy.signal`'s short-time spectra: stft, istft, csd and welch, as
SciPy defines them (and JAX follows). The signal is cut into windowed segments of `nperseg`
samples every `nperseg - noverlap` (a gather of static indices), each segment detrended and
transformed by `kiln.numpy.fft`; `csd` averages conj(X) Y over the segments (mean or
bias-corrected median) and `welch` is `csd(x, x).real`. `istft` inverts each segment, windows
it and overlap-adds the segments with one scatter-add, divided by the summed squared window.
Windows named by a string or tuple are SciPy's `get_window`, computed once on the host."""
import numpy as np
import scipy.signal as _host_signal

from .. import numpy as jnp
from ..numpy._core import canonicalize_axis, check_arraylike, promote_dtypes_inexact
from ._signal import detrend as _linear_detrend

__all__ = ["stft", "istft", "csd", "welch"]


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


def _lengths(nperseg, nfft, noverlap):
    """(nperseg, nfft, step) checked, with SciPy's defaults for nfft and noverlap."""
    if nperseg < 1:
        raise ValueError("nperseg must be a positive integer")
    nfft = nperseg if nfft is None else int(nfft)
    if nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    return nperseg, nfft, nperseg - noverlap


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
    nperseg, nfft, step = _lengths(min(int(nperseg), n), nfft, noverlap)
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


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,  # noqa: N803
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2):
    """The inverse of `stft` by weighted overlap-add: (times, x)."""
    check_arraylike("istft", Zxx)
    z, = promote_dtypes_inexact(jnp.asarray(Zxx))
    if z.ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    time_axis = canonicalize_axis(time_axis, z.ndim)
    freq_axis = canonicalize_axis(freq_axis, z.ndim)
    if time_axis == freq_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    nseg = z.shape[time_axis]
    n_default = 2 * (z.shape[freq_axis] - 1) if input_onesided else z.shape[freq_axis]
    nperseg, nfft, step = _lengths(n_default if nperseg is None else int(nperseg), nfft,
                                   noverlap)
    # (segment, time sample, ...batch): segments and samples first, for one scatter-add
    z = jnp.moveaxis(z, (time_axis, freq_axis), (0, 1))
    frames = (jnp.fft.irfft(z, nfft, axis=1) if input_onesided
              else jnp.fft.ifft(z, nfft, axis=1))[:, :nperseg]
    real_dtype = frames.real.dtype
    win = _host_signal.get_window(window, nperseg) if isinstance(window, (str, tuple)) \
        else np.asarray(window, np.float64)
    weights = jnp.asarray((win * win.sum()).astype(real_dtype))
    frames = frames * weights.reshape((nperseg,) + (1,) * (frames.ndim - 2))
    length = nperseg + (nseg - 1) * step
    index = (np.arange(nseg)[:, None] * step + np.arange(nperseg)[None, :]).reshape(-1)
    x = jnp.zeros((length,) + frames.shape[2:], frames.dtype)
    x = x.at[index].add(frames.reshape((nseg * nperseg,) + frames.shape[2:]))
    norm = np.zeros(length)
    np.add.at(norm, index, np.tile(win * win, nseg))
    if boundary:
        cut = nperseg // 2
        x, norm = x[cut:length - cut], norm[cut:length - cut]
    norm = np.where(norm > 1e-10, norm, 1.0)
    x = x / jnp.asarray(norm.astype(real_dtype)).reshape((-1,) + (1,) * (x.ndim - 1))
    if input_onesided:
        x = x.real
    # the samples where the time axis was (after removing the frequency axis)
    out_axis = time_axis - 1 if freq_axis < time_axis else time_axis
    x = jnp.moveaxis(x, 0, out_axis)
    times = np.arange(x.shape[0]) / fs
    return jnp.asarray(times.astype(real_dtype)), x
