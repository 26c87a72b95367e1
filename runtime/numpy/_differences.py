"""`kiln.numpy` differences, integrals and correlations: diff, ediff1d, gradient, trapezoid,
unwrap, convolve, correlate, cov, corrcoef.

NumPy's formulas over `kiln.numpy`. `gradient` uses central differences inside and one-sided
ones at the edges (NumPy's `edge_order=1`; spacings may be scalars or coordinate arrays).
`convolve` and `correlate` are 1-D: the sliding windows of the zero-padded longer input are
gathered into a matrix multiplied by the reversed shorter one (O(n*m) memory, one matrix
product), with NumPy's `full`, `same` and `valid` modes.
"""
import numpy as np

from ..array import to_array
from ._core import check_arraylike
from .. import numpy as jnp

__all__ = ["diff", "ediff1d", "gradient", "trapezoid", "unwrap", "convolve", "correlate",
           "cov", "corrcoef"]


def _arr(name, *xs):
    check_arraylike(name, *xs)
    return [to_array(x, name) for x in xs]


def _slice(ndim, axis, sl):
    idx = [slice(None)] * ndim
    idx[axis] = sl
    return tuple(idx)


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The `n`-th discrete difference along `axis` (`not_equal` for booleans)."""
    (arr,) = _arr("diff", a)
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    if n == 0:
        return arr
    if arr.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional; got "
                         f"{arr.shape}")
    axis = axis + arr.ndim if axis < 0 else axis
    def edge(extra):
        e = to_array(extra, "diff")
        if e.ndim == 0:
            shape = list(arr.shape)
            shape[axis] = 1
            e = jnp.broadcast_to(e, tuple(shape))
        return e
    parts = ([edge(prepend)] if prepend is not None else []) + [arr] + \
        ([edge(append)] if append is not None else [])
    arr = jnp.concatenate(parts, axis=axis) if len(parts) > 1 else arr
    for _ in range(n):
        hi, lo = arr[_slice(arr.ndim, axis, slice(1, None))], \
            arr[_slice(arr.ndim, axis, slice(None, -1))]
        arr = jnp.not_equal(hi, lo) if arr.dtype == bool else hi - lo
    return arr


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of consecutive elements of the flattened array, with optional ends."""
    (arr,) = _arr("ediff1d", ary)
    flat = jnp.ravel(arr)
    parts = [flat[1:] - flat[:-1]]
    if to_begin is not None:
        parts.insert(0, jnp.ravel(jnp.asarray(to_begin, dtype=flat.dtype)))
    if to_end is not None:
        parts.append(jnp.ravel(jnp.asarray(to_end, dtype=flat.dtype)))
    return jnp.concatenate(parts) if len(parts) > 1 else parts[0]


def _gradient_1d(f, h, axis):
    n = f.shape[axis]
    if n < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         "(edge_order + 1) elements are required.")
    at = lambda sl: f[_slice(f.ndim, axis, sl)]   # noqa: E731
    shape = [1] * f.ndim
    shape[axis] = -1
    if jnp.ndim(h) == 0:
        inner = (at(slice(2, None)) - at(slice(None, -2))) / (2.0 * h)
        first = (at(slice(1, 2)) - at(slice(0, 1))) / h
        last = (at(slice(-1, None)) - at(slice(-2, -1))) / h
    else:
        dx = jnp.diff(jnp.asarray(h))
        d1 = jnp.reshape(dx[:-1], shape)
        d2 = jnp.reshape(dx[1:], shape)
        a = -d2 / (d1 * (d1 + d2))
        b = (d2 - d1) / (d1 * d2)
        c = d1 / (d2 * (d1 + d2))
        inner = a * at(slice(None, -2)) + b * at(slice(1, -1)) + c * at(slice(2, None))
        first = (at(slice(1, 2)) - at(slice(0, 1))) / dx[0]
        last = (at(slice(-1, None)) - at(slice(-2, -1))) / dx[-1]
    return jnp.concatenate([first, inner, last], axis=axis)


def gradient(f, *varargs, axis=None, edge_order=None):
    """The gradient of `f` sampled on a grid: one array per axis (one array for one axis)."""
    (arr,) = _arr("gradient", f)
    if edge_order is not None and edge_order != 1:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    if not jnp.issubdtype(arr.dtype, jnp.inexact):
        arr = arr.astype(jnp.float32 if arr.dtype.itemsize < 8 else jnp.result_type(float))
    axes = tuple(range(arr.ndim)) if axis is None else \
        ((axis,) if isinstance(axis, int) else tuple(axis))
    axes = tuple(a + arr.ndim if a < 0 else a for a in axes)
    if len(varargs) == 0:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and jnp.ndim(varargs[0]) == 0:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError("Invalid number of spacing arguments")
    out = [_gradient_1d(arr, h, ax) for h, ax in zip(spacing, axes)]
    return out[0] if len(out) == 1 else out


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of `y` along `axis` by the trapezoidal rule (samples `x` or spacing `dx`)."""
    (arr,) = _arr("trapezoid", y)
    xs = None if x is None else jnp.asarray(x)
    # JAX's promote_dtypes_inexact of y and x together (int32 with float16 is float16);
    # booleans add as numbers
    common = jnp.result_type(arr.dtype) if xs is None else jnp.result_type(arr, xs)
    if common.kind not in "fc":
        common = jnp.result_type(common, float)
    arr = jnp.moveaxis(arr.astype(common), axis, -1)
    if xs is None:
        d = dx
    else:
        xs = xs.astype(common)
        d = jnp.diff(xs) if xs.ndim == 1 else jnp.diff(jnp.moveaxis(xs, axis, -1), axis=-1)
    return 0.5 * jnp.sum(d * (arr[..., 1:] + arr[..., :-1]), axis=-1)


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """`p` with jumps larger than `discont` along `axis` replaced by their `period`
    complements (NumPy's algorithm)."""
    (arr,) = _arr("unwrap", p)
    if arr.dtype.kind not in "fc":
        arr = arr.astype(jnp.result_type(arr.dtype, float))
    discont = period / 2 if discont is None else discont
    dd = jnp.diff(arr, axis=axis)
    lo, hi = -period / 2, period / 2
    ddmod = jnp.mod(dd - lo, period) + lo
    ddmod = jnp.where((ddmod == lo) & (dd > 0), hi, ddmod)
    correction = jnp.where(jnp.abs(dd) < discont, 0, ddmod - dd)
    axis = axis + arr.ndim if axis < 0 else axis
    zeros = jnp.zeros_like(arr[_slice(arr.ndim, axis, slice(0, 1))])
    return arr + jnp.concatenate([zeros, jnp.cumsum(correction, axis=axis)], axis=axis)


def _convolve(name, a, v, mode, precision, preferred_element_type):
    """The convolution of 1-D `a` and `v` (commutative: the longer one slides)."""
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"{name}() only support 1-dimensional inputs.")
    if a.size == 0 or v.size == 0:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {a.shape} and "
                         f"{v.shape}.")
    dtype = jnp.result_type(a, v) if preferred_element_type is None else preferred_element_type
    a, v = a.astype(dtype), v.astype(dtype)
    if v.size > a.size:
        a, v = v, a
    n, m = a.size, v.size
    padded = jnp.pad(a, (m - 1, m - 1))
    windows = padded[jnp.arange(n + m - 1)[:, None] + jnp.arange(m)[None, :]]
    full = jnp.matmul(windows, v[::-1], precision=precision)
    if mode == "full":
        return full
    if mode == "same":
        start = (m - 1) // 2
        return full[start:start + n]
    if mode == "valid":
        return full[m - 1:n]
    raise ValueError(f"mode must be one of ['full', 'same', 'valid'], got {mode!r}")


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """The discrete linear convolution of two 1-D arrays (NumPy's modes)."""
    a, v = _arr("convolve", a, v)
    return _convolve("convolve", a, v, mode, precision, preferred_element_type)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation of two 1-D arrays: `sum(a[n + k] * conj(v[n]))`."""
    a, v = _arr("correlate", a, v)
    if v.size > a.size:   # NumPy slides the shorter `a` and reverses the result
        return jnp.conj(_convolve("correlate", v, jnp.conj(a)[::-1], mode, precision,
                                  preferred_element_type))[::-1]
    return _convolve("correlate", a, jnp.conj(v)[::-1], mode, precision,
                     preferred_element_type)


def _check_inexact(name, dtype):
    if dtype is not None and not jnp.issubdtype(dtype, np.inexact):
        raise ValueError(f"{name}: dtype must be a subclass of float or complex; got "
                         f"dtype={dtype}")


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    """The covariance matrix of the variables in the rows (columns with `rowvar=False`),
    computed in `dtype` when given (a float or complex type, as JAX)."""
    _check_inexact("cov", dtype)
    (x,) = _arr("cov", m)
    if x.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    x = jnp.atleast_2d(x)
    if not rowvar and x.shape[0] != 1:
        x = x.T
    if y is not None:
        yy = jnp.atleast_2d(jnp.asarray(y))
        if not rowvar and yy.shape[0] != 1:
            yy = yy.T
        x = jnp.concatenate([x, yy], axis=0)
    if x.dtype.kind not in "fc":
        x = x.astype(jnp.result_type(x.dtype, float))
    ddof = (0 if bias else 1) if ddof is None else ddof
    w = None
    if fweights is not None:
        w = jnp.asarray(fweights)
    if aweights is not None:
        aw = jnp.asarray(aweights)
        w = aw if w is None else w * aw
    if dtype is not None:
        x = x.astype(dtype)
        w = None if w is None else w.astype(dtype)
    if w is None:
        avg = jnp.mean(x, axis=1)
        fact = x.shape[1] - ddof
        w_sum = None
    else:
        w_sum = jnp.sum(w)
        avg = jnp.sum(x * w, axis=1) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * jnp.sum(w * jnp.asarray(aweights)) / w_sum
    xc = x - avg[:, None]
    xw = xc if w is None else xc * w
    c = jnp.matmul(xw, jnp.conj(xc).T) / fact
    return jnp.squeeze(c)


def corrcoef(x, y=None, rowvar=True, dtype=None):
    """Pearson correlation coefficients: the covariance normalised by the deviations."""
    _check_inexact("corrcoef", dtype)
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = jnp.diag(c)
    sd = jnp.sqrt(jnp.real(d))
    c = c / sd[:, None] / sd[None, :]
    if c.dtype.kind == "c":
        return jnp.clip(jnp.real(c), -1, 1) + 1j * jnp.clip(jnp.imag(c), -1, 1)
    return jnp.clip(c, -1, 1)
