"""The implementation of `kiln.scipy.fft`: the type-II discrete cosine transform and its
inverse, as `jax.scipy.fft` has them (`__all__`, re-exported there).

The DCT-II of x (length N) is X[k] = 2 sum_n x[n] cos(pi k (2n + 1) / (2N)) (SciPy's
"backward" normalisation; "ortho" scales X[0] by 1/sqrt(4N) and the rest by 1/sqrt(2N)). It
is computed through one complex FFT of length N (Makhoul's reordering): v holds x's even
elements, then its odd ones reversed, and X[k] = 2 re(exp(-i pi k / (2N)) fft(v)[k]). The
inverse undoes each step: V[k] = exp(i pi k / (2N)) (X[k] - i X[N - k]) / 2 (X[N] = 0),
v = ifft(V), and x's even elements are v's first half, its odd ones the rest reversed.
Complex input transforms its real and imaginary parts. The n-D forms apply the 1-D transform
along each axis in turn.
"""
import numpy as np

from .. import lax
from .. import numpy as jnp
from ..numpy._core import canonicalize_axis, check_arraylike

__all__ = ["dct", "dctn", "idct", "idctn"]

_NORMS = (None, "backward", "ortho")


def _check(name, type, norm):
    if type != 2:
        raise NotImplementedError(f"kiln.scipy.fft.{name}: only DCT type 2 is implemented "
                                  f"(as in JAX), got type={type}")
    if norm not in _NORMS:
        raise ValueError(f"kiln.scipy.fft.{name}: norm={norm!r} is not implemented; use None, "
                         "'backward' or 'ortho'")


def _resize(x, n, axis):
    """`x` zero-padded or truncated to length `n` along `axis`."""
    if n is None or n == x.shape[axis]:
        return x
    if n < 1:
        raise ValueError(f"invalid number of data points ({n}) specified")
    if n < x.shape[axis]:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    widths = [(0, n - x.shape[axis] if a == axis else 0, 0) for a in range(x.ndim)]
    return lax.pad(x, jnp.zeros((), x.dtype), widths)


def _along(k, axis, ndim):
    """`k` (1-D) shaped to broadcast along `axis` of an `ndim`-dimensional array."""
    return k.reshape([-1 if a == axis else 1 for a in range(ndim)])


def _ortho_scale(n, axis, ndim, dtype):
    scale = np.full(n, np.sqrt(1.0 / (2 * n)))
    scale[0] = np.sqrt(1.0 / (4 * n))
    return _along(jnp.asarray(scale, dtype), axis, ndim)


def _real_dtype(x):
    return jnp.finfo(x.dtype).dtype


def _split_complex(transform, x, *args):
    if jnp.iscomplexobj(x):
        return lax.complex(transform(x.real, *args), transform(x.imag, *args))
    return transform(x, *args)


def _dct(x, axis, norm):
    n = x.shape[axis]
    evens = lax.slice_in_dim(x, 0, None, 2, axis=axis)
    odds = lax.rev(lax.slice_in_dim(x, 1, None, 2, axis=axis), (axis,))
    v = lax.concatenate([evens, odds], axis)
    k = jnp.arange(n, dtype=_real_dtype(v))
    twiddle = _along(jnp.exp(-0.5j * np.pi * k / n), axis, x.ndim)
    out = 2 * (jnp.fft.fft(v, axis=axis) * twiddle).real
    if norm == "ortho":
        out = out * _ortho_scale(n, axis, x.ndim, out.dtype)
    return out


def _idct(x, axis, norm):
    n = x.shape[axis]
    if norm == "ortho":
        x = x / _ortho_scale(n, axis, x.ndim, x.dtype)
    k = jnp.arange(n, dtype=x.dtype)
    # X[N - k] for k = 1 .. N - 1, and 0 for k = 0
    mirrored = lax.concatenate([jnp.zeros_like(lax.slice_in_dim(x, 0, 1, axis=axis)),
                                lax.rev(lax.slice_in_dim(x, 1, None, axis=axis), (axis,))],
                               axis)
    twiddle = _along(jnp.exp(0.5j * np.pi * k / n), axis, x.ndim)
    v = jnp.fft.ifft(twiddle * lax.complex(x, -mirrored) / 2, axis=axis).real
    half = (n + 1) // 2
    evens = lax.slice_in_dim(v, 0, half, axis=axis)
    odds = lax.rev(lax.slice_in_dim(v, half, None, axis=axis), (axis,))
    # interleave: evens at 0, 2, 4 ..., odds at 1, 3, ...
    if n % 2:
        odds = lax.pad(odds, jnp.zeros((), v.dtype),
                       [(0, 1 if a == axis else 0, 0) for a in range(v.ndim)])
    both = jnp.stack([evens, odds], axis=axis + 1)
    shape = list(v.shape)
    shape[axis] = 2 * half
    return lax.slice_in_dim(both.reshape(shape), 0, n, axis=axis)


def _prepare(name, x, type, norm):
    check_arraylike(f"scipy.fft.{name}", x)
    _check(name, type, norm)
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(x.dtype, jnp.float32))
    return x


def dct(x, type=2, n=None, axis=-1, norm=None):
    """The discrete cosine transform (type 2) of `x` along `axis` (scipy.fft.dct)."""
    x = _prepare("dct", x, type, norm)
    axis = canonicalize_axis(axis, x.ndim)
    return _split_complex(lambda y: _dct(_resize(y, n, axis), axis, norm), x)


def idct(x, type=2, n=None, axis=-1, norm=None):
    """The inverse of `dct` along `axis` (scipy.fft.idct of type 2)."""
    x = _prepare("idct", x, type, norm)
    axis = canonicalize_axis(axis, x.ndim)
    return _split_complex(lambda y: _idct(_resize(y, n, axis), axis, norm), x)


def _axes_and_sizes(name, x, s, axes):
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = tuple(canonicalize_axis(a, x.ndim) for a in np.atleast_1d(axes))
    if len(set(axes)) != len(axes):
        raise ValueError(f"scipy.fft.{name}: axes must be unique, got {axes}")
    sizes = (None,) * len(axes) if s is None else tuple(np.atleast_1d(s))
    if len(sizes) != len(axes):
        raise ValueError(f"scipy.fft.{name}: s ({len(sizes)} sizes) and axes "
                         f"({len(axes)} axes) must have the same length")
    return axes, sizes


def _along_axes(name, one_d, x, type, s, axes, norm):
    x = _prepare(name, x, type, norm)
    axes, sizes = _axes_and_sizes(name, x, s, axes)

    def transform(y):
        for axis, size in zip(axes, sizes):
            y = one_d(_resize(y, size, axis), axis, norm)
        return y
    return _split_complex(transform, x)


def dctn(x, type=2, s=None, axes=None, norm=None):
    """The n-dimensional DCT (type 2) over `axes` (all by default), `s` the sizes."""
    return _along_axes("dctn", _dct, x, type, s, axes, norm)


def idctn(x, type=2, s=None, axes=None, norm=None):
    """The inverse of `dctn` over `axes`."""
    return _along_axes("idctn", _idct, x, type, s, axes, norm)
