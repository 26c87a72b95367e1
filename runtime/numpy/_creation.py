"""`kiln.numpy` array creation: `array`/`asarray`, filled arrays, ranges, grids, eye and tri.

`array` and `asarray` ingest host data: nested lists/tuples of Python scalars and NumPy values
are converted to one buffer by NumPy (data ingestion, not computation); lists that hold kiln
arrays are stacked with `lax.concatenate`, as JAX does. Everything else (`zeros`, `full`,
`arange`, `linspace`, `eye`, `meshgrid`, ...) is built from `lax` (broadcast, iota, arithmetic)
so that the compiler can specialise it like any other code.

Dtype rules are JAX's: Python scalars give weakly typed results (`array(1.0)` is a weak
float32), lists give strong results of their lattice-promoted dtype, 64-bit values are narrowed
when x64 is off, and `dtype=` takes kiln/NumPy dtypes, dtype strings and Python types.
"""
import operator
import types

import numpy as np

from ..dispatch import is_traced as _is_traced
from ..array import Array
from .. import lax, _default_device as default_device
from ..placement import device_put
from ..compiler.ir import dtypes
from ._core import (check_arraylike, is_arraylike, canonical_dtype, broadcast_shapes,
                    broadcast_to, canonicalize_axis, _convert)
from ._core import as_array as _as_array
from ._dtypes import result_type
from ._ufuncs import add, subtract, multiply, true_divide, power, sign, log10, floor
from ..sharding_types import out_sharding_keyword, device_keyword

__all__ = ["array", "asarray", "from_dlpack", "copy", "zeros", "ones", "empty", "full", "zeros_like",
           "ones_like", "empty_like", "full_like", "arange", "linspace", "logspace", "geomspace",
           "eye", "identity", "tri", "meshgrid"]


# ------------------------------------------------------------------------ argument checks


def _is_array(x):
    return type(x) is Array or _is_traced(x)


def _user_dtype(dtype, name):
    """A user's `dtype=` argument as a canonical NumPy dtype (TypeError naming `name`)."""
    if isinstance(dtype, (Array, np.ndarray)) or _is_traced(dtype):
        raise ValueError("Passing an array as a dtype argument is no longer supported; instead "
                         "of dtype=arr use dtype=arr.dtype.")
    return canonical_dtype(dtype, name)


def _check_forgot_shape_tuple(name, shape, dtype):
    if isinstance(dtype, int) and isinstance(shape, int):
        raise TypeError(f"Cannot interpret '{dtype}' as a data type.\n\nDid you accidentally "
                        f"write `jax.numpy.{name}({shape}, {dtype})` when you meant "
                        f"`jax.numpy.{name}(({shape}, {dtype}))`, i.e. with a single tuple "
                        f"argument for the shape?")


def _shape_arg(shape, name):
    """A shape argument (an int, a sequence of ints, or a 0-d/1-d integer array) as a tuple."""
    if isinstance(shape, types.GeneratorType):
        raise TypeError(f"{name}: expected sequence object with len >= 0 or a single integer "
                        f"for the shape, got a generator")
    if not isinstance(shape, (tuple, list)) and np.ndim(shape) == 0:
        shape = (shape,)
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{name}: shapes must be 1D sequences of concrete values of integer "
                        f"type, got {tuple(shape)!r}.") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"{name}: negative dimensions are not allowed, got shape {dims}.")
    return dims


def _dim_arg(n, name, what):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: {what} must be an integer, got {n!r}.") from None
    if n < 0:
        raise ValueError(f"{name}: negative dimensions are not allowed, got {what}={n}.")
    return n


def _to_inexact(dtype):
    """JAX's `to_inexact_dtype`: (u)int64 -> float64, other integers and bool -> float32."""
    if dtypes.is_inexact(dtype):
        return dtype
    return dtypes.canonicalize(dtypes.float64 if dtype.itemsize == 8 else dtypes.float32)


# ---------------------------------------------------------------------- array / asarray

def _leaves(obj):
    if isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _leaves(o)
    else:
        yield obj


def _resolve(obj):
    """Nested lists/tuples with `__jax_array__` leaves converted and None refused."""
    if isinstance(obj, (list, tuple)):
        return [_resolve(o) for o in obj]
    if obj is None:
        raise ValueError("None is not a valid value for jnp.array")
    if not _is_array(obj) and hasattr(obj, "__jax_array__"):
        return obj.__jax_array__()
    return obj


_PY_SCALARS = (bool, int, float, complex)


def _leaf_type(leaf):
    """(dtype, weak_type) of one leaf on JAX's lattice (host values are canonicalised)."""
    if type(leaf) in _PY_SCALARS:
        return dtypes.python_scalar_dtype(leaf)
    if _is_array(leaf):
        return leaf.dtype, leaf.weak_type
    dtype = np.asarray(leaf).dtype if not isinstance(leaf, (np.ndarray, np.generic)) \
        else leaf.dtype
    if dtype.kind not in "biufc":
        raise TypeError(f"Value {leaf!r} with dtype {dtype} is not a valid kiln array type. "
                        f"Only arrays of numeric types (bool, integer, floating, complex) are "
                        f"supported.")
    return dtypes.canonicalize(dtype), False


def _is_weak(obj):
    if type(obj) in _PY_SCALARS:
        return type(obj) is not bool
    return _is_array(obj) and obj.weak_type


@device_keyword
@out_sharding_keyword
def array(object, dtype=None, copy=True, order="K", ndmin=0):  # noqa: A002
    """`jnp.array`: an Array from an array, scalar, or nested lists/tuples of them."""
    if order is not None and order != "K":
        raise NotImplementedError(f"jnp.array: only order='K' (or None) is supported, got "
                                  f"order={order!r}; kiln arrays have no user-visible memory "
                                  f"layout.")
    if dtype is not None:
        dtype = _user_dtype(dtype, "array")
    weak = dtype is None and _is_weak(object)
    obj = _resolve(object)
    leaves = list(_leaves(obj))
    leaf_types = [_leaf_type(leaf) for leaf in leaves]  # refuses strings, objects, ...
    if dtype is None:
        dtype = dtypes.result_type(*leaf_types)[0] if leaves else dtypes.default_float()
    if not any(_is_array(leaf) for leaf in leaves):
        with np.errstate(all="ignore"):  # out-of-range casts wrap silently, as in JAX
            out = Array(np.array(obj, dtype=dtype), weak_type=weak)
    elif _is_array(obj):
        out = _convert(lax.copy_p(obj) if copy else obj, dtype, weak)
    else:
        parts = [lax.expand_dims(array(o, dtype=dtype, copy=False), (0,)) for o in obj]
        out = lax.concatenate(parts, 0)
    ndmin = operator.index(ndmin)
    if ndmin > out.ndim:
        out = lax.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    if type(out) is Array and default_device.current() is not None:
        out = device_put(out, default_device.current())
    return out


@device_keyword
@out_sharding_keyword
def asarray(a, dtype=None, order=None, *, copy=None):
    """`jnp.asarray`: like `array`, but an Array that needs no conversion is returned as is."""
    if dtype is None and type(a) is Array and order in (None, "K") and not copy:
        return a
    if dtype is not None:
        dtype = _user_dtype(dtype, "asarray")
    return array(a, dtype=dtype, copy=bool(copy), order=order)


def from_dlpack(x, /, *, device=None, copy=None):
    """`jnp.from_dlpack`: `kiln.dlpack.from_dlpack`, an Array over the memory of a DLPack
    producer, without a copy where kiln can."""
    from ..dlpack import from_dlpack as dlpack_from_dlpack
    return dlpack_from_dlpack(x, device=device, copy=copy)


def copy(a, order=None):
    """`jnp.copy`: a copy of an array (kiln arrays are immutable, so this is rarely needed)."""
    check_arraylike("copy", a)
    return array(a, copy=True, order=order)


# -------------------------------------------------------------------- filled arrays

def _filled(name, shape, value, dtype):
    _check_forgot_shape_tuple(name, shape, dtype)
    dtype = _user_dtype(float if dtype is None else dtype, name)
    return lax.broadcast(np.array(value, dtype), _shape_arg(shape, name))


@device_keyword
@out_sharding_keyword
def zeros(shape, dtype=None):
    """An array of zeros (default dtype: the default float)."""
    return _filled("zeros", shape, 0, dtype)


@device_keyword
@out_sharding_keyword
def ones(shape, dtype=None):
    """An array of ones (default dtype: the default float)."""
    return _filled("ones", shape, 1, dtype)


@device_keyword
@out_sharding_keyword
def empty(shape, dtype=None):
    """`jnp.empty`: as in JAX, an array of zeros (arrays are immutable, so never uninitialised)."""
    return _filled("empty", shape, 0, dtype)


@device_keyword
@out_sharding_keyword
def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with `fill_value` (a scalar, or an array broadcast to shape)."""
    if dtype is not None:
        dtype = _user_dtype(dtype, "full")
    check_arraylike("full", fill_value)
    shape = _shape_arg(shape, "full")
    if np.ndim(fill_value) == 0:
        return lax.full(shape, fill_value, dtype)
    return broadcast_to(asarray(fill_value, dtype=dtype), shape)


def _prototype(a, name, *others):
    """(shape, dtype, weak_type) of the `*_like` prototype; lists are refused."""
    if not (hasattr(a, "dtype") and hasattr(a, "shape")):
        check_arraylike(name, a, *others)
        a = _as_array(a, name)
    else:
        check_arraylike(name, 0, *others)
    return tuple(a.shape), dtypes.canonicalize(a.dtype), bool(getattr(a, "weak_type", False))


def _full_like(name, a, fill_value, dtype, shape):
    proto_shape, proto_dtype, proto_weak = _prototype(a, name, fill_value)
    target = proto_dtype if dtype is None else _user_dtype(dtype, name)
    shape = proto_shape if shape is None else _shape_arg(shape, name)
    if np.ndim(fill_value) != 0:
        return broadcast_to(asarray(fill_value, dtype=target), shape)
    value = lax.convert_element_type(fill_value, target)
    return lax.broadcast(_convert(value, target, dtype is None and proto_weak), shape)


@device_keyword
@out_sharding_keyword
def zeros_like(a, dtype=None, shape=None):
    """Zeros with the shape and dtype (and weak type) of `a`, unless overridden."""
    return _full_like("zeros_like", a, 0, dtype, shape)


@device_keyword
@out_sharding_keyword
def ones_like(a, dtype=None, shape=None):
    """Ones with the shape and dtype (and weak type) of `a`, unless overridden."""
    return _full_like("ones_like", a, 1, dtype, shape)


@device_keyword
def empty_like(prototype, dtype=None, shape=None):
    """`jnp.empty_like`: zeros like `prototype` (as in JAX)."""
    return _full_like("empty_like", prototype, 0, dtype, shape)


@device_keyword
@out_sharding_keyword
def full_like(a, fill_value, dtype=None, shape=None):
    """`fill_value` with the shape and dtype (and weak type) of `a`, unless overridden."""
    return _full_like("full_like", a, fill_value, dtype, shape)


# ------------------------------------------------------------------------------ ranges

def _static_scalar(x):
    """The concrete value of a scalar range argument (arrays must be concrete here)."""
    return np.asarray(x)[()] if _is_array(x) else x


def _arange_size(start, stop, step):
    try:
        return max(0, int(np.ceil(stop - start if step is None else (stop - start) / step)))
    except (OverflowError, ValueError) as e:
        raise type(e)(f"arange: cannot compute the number of elements from start={start}, "
                      f"stop={stop}, step={step}: {e}") from None


@device_keyword
@out_sharding_keyword
def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop) (JAX's dtype rules; bounds must be concrete)."""
    if dtype is not None:
        dtype = _user_dtype(dtype, "arange")
    if start is None:
        raise TypeError("arange: the first argument (start, or stop when it is the only one) "
                        "must be a scalar, got None")
    for pos, v in enumerate((start, stop, step)):
        if v is not None and not is_arraylike(v):
            raise TypeError(f"arange requires ndarray, scalar, or None arguments, got {type(v)} "
                            f"at position {pos}.")
    start_name = "stop" if stop is None and step is None else "start"
    for name, v in ((start_name, start), ("stop", stop), ("step", step)):
        if v is not None and np.ndim(v) != 0:
            raise ValueError(f"jax.numpy.arange: arguments must be scalars; got {name}={v}")
    args = [v for v in (start, stop, step) if v is not None]
    if any(dtypes.is_complex(result_type(v)) for v in args):
        raise ValueError("Passing complex start/stop/step to jnp.arange is not supported (as in "
                         "JAX >= 0.10); use jnp.linspace, or build the real and imaginary parts "
                         "separately.")
    if dtype is None:
        dtype = result_type(*args)
    if dtype == dtypes.bool_:
        raise TypeError("arange: iota does not accept dtype bool. Accepted dtypes are subtypes "
                        "of integer, floating, complexfloating; use an integer dtype instead.")
    if stop is None:
        start, stop = 0, start
    start_v, stop_v, step_v = map(_static_scalar, (start, stop, step))
    if step is None:
        size = _arange_size(start_v, stop_v, None)
        if start_v == 0:
            return lax.iota(dtype, size)
        return lax.add(lax.convert_element_type(start, dtype), lax.iota(dtype, size))
    if step_v == 0:
        raise ZeroDivisionError("arange: step must not be zero")
    working = dtypes.float32 if dtype.kind == "f" and dtype.itemsize < 4 else dtype
    ramp = lax.mul(lax.convert_element_type(step, working),
                   lax.iota(working, _arange_size(start_v, stop_v, step_v)))
    return lax.convert_element_type(lax.add(lax.convert_element_type(start, working), ramp), dtype)


@device_keyword
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """`num` evenly spaced samples from `start` to `stop` (inclusive when `endpoint`)."""
    num = operator.index(num)
    axis = operator.index(axis)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    check_arraylike("linspace", start, stop)
    start, stop = _as_array(start, "linspace"), _as_array(stop, "linspace")
    dtype = _to_inexact(result_type(start, stop)) if dtype is None \
        else _user_dtype(dtype, "linspace")
    cdtype = _to_inexact(dtype)
    bounds = list(broadcast_shapes(start.shape, stop.shape))
    lo = broadcast_to(lax.convert_element_type(start, cdtype), bounds)
    hi = broadcast_to(lax.convert_element_type(stop, cdtype), bounds)
    axis = canonicalize_axis(axis, len(bounds) + 1, "linspace")
    out_shape = bounds[:axis] + [1] + bounds[axis:]
    div = num - 1 if endpoint else num
    if num > 1:
        delta = true_divide(subtract(hi, lo), asarray(div, dtype=cdtype))
        iota_shape = [1] * len(out_shape)
        iota_shape[axis] = div
        real = np.dtype(np.finfo(cdtype).dtype)
        step = true_divide(lax.reshape(lax.iota(real, div), iota_shape), asarray(div, real))
        step = lax.convert_element_type(step, cdtype)
        out = add(multiply(lax.reshape(lo, out_shape), subtract(1, step)),
                  multiply(lax.reshape(hi, out_shape), step))
        if endpoint:
            out = lax.concatenate([out, lax.reshape(hi, out_shape)], axis)
    elif num == 1:
        delta = asarray(np.nan, dtype=cdtype) if endpoint else subtract(hi, lo)
        out = lax.reshape(lo, out_shape)
    else:
        delta = lax.full((), np.nan, cdtype)
        out = zeros(bounds[:axis] + [0] + bounds[axis:], dtype)
    if dtypes.is_integer(dtype) and not dtypes.is_integer(out.dtype):
        out = floor(out)
    result = lax.convert_element_type(out, dtype)
    return (result, delta) if retstep else result


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """`base ** linspace(start, stop, num)`."""
    num = operator.index(num)
    axis = operator.index(axis)
    check_arraylike("logspace", start, stop)
    dtype = _to_inexact(result_type(start, stop)) if dtype is None \
        else _user_dtype(dtype, "logspace")
    cdtype = _to_inexact(dtype)
    start = lax.convert_element_type(start, cdtype)
    stop = lax.convert_element_type(stop, cdtype)
    lin = linspace(start, stop, num, endpoint=endpoint, axis=axis)
    return lax.convert_element_type(power(base, lin), dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """Samples evenly spaced on a log scale from `start` to `stop` (same sign)."""
    num = operator.index(num)
    axis = operator.index(axis)
    check_arraylike("geomspace", start, stop)
    dtype = _to_inexact(result_type(start, stop)) if dtype is None \
        else _user_dtype(dtype, "geomspace")
    cdtype = _to_inexact(dtype)
    start = lax.convert_element_type(start, cdtype)
    stop = lax.convert_element_type(stop, cdtype)
    s = sign(start)
    res = multiply(s, logspace(log10(true_divide(start, s)), log10(true_divide(stop, s)), num,
                               endpoint=endpoint, base=10.0, dtype=cdtype, axis=0))
    axis = canonicalize_axis(axis, res.ndim, "geomspace")
    if axis:
        res = lax.transpose(res, (*range(1, axis + 1), 0, *range(axis + 1, res.ndim)))
    return lax.convert_element_type(res, dtype)


# ------------------------------------------------------------------- matrices and grids

def _offset(k, name):
    """The diagonal offset `k` as a scalar integer array (Python ints clipped to int32)."""
    if isinstance(k, int) and not isinstance(k, bool):
        info = np.iinfo(np.int32)
        k = min(max(k, int(info.min)), int(info.max))
    check_arraylike(name, k)
    offset = _as_array(k, name)
    if offset.shape != () or not dtypes.is_integer(offset.dtype):
        raise ValueError(f"{name}: k must be a scalar integer; got {k!r}")
    return offset


def _shifted_rows_and_cols(n, m, offset):
    """(row + offset, column) index arrays of an (n, m) matrix: their comparison is a band."""
    i = lax.broadcasted_iota(offset.dtype, (n, m), 0)
    j = lax.broadcasted_iota(offset.dtype, (n, m), 1)
    return lax.add(i, offset), j


@device_keyword
def eye(N, M=None, k=0, dtype=None):  # noqa: N803
    """A 2-D array with ones on the k-th diagonal and zeros elsewhere."""
    dtype = _user_dtype(float if dtype is None else dtype, "eye")
    offset = _offset(k, "eye")
    n = _dim_arg(N, "eye", "N")
    m = n if M is None else _dim_arg(M, "eye", "M")
    ik, j = _shifted_rows_and_cols(n, m, offset)
    return lax.convert_element_type(lax.eq(ik, j), dtype)


def identity(n, dtype=None):
    """The n x n identity matrix."""
    if dtype is not None:
        dtype = _user_dtype(dtype, "identity")
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):  # noqa: N803
    """Ones at and below the k-th diagonal (default dtype float32, as in JAX)."""
    dtype = dtypes.float32 if dtype is None else _user_dtype(dtype, "tri")
    n = _dim_arg(N, "tri", "N")
    m = n if M is None else _dim_arg(M, "tri", "M")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"tri: k must be an integer, got {k!r}") from None
    ik, j = _shifted_rows_and_cols(n, m, _offset(k, "tri"))
    return lax.convert_element_type(lax.ge(ik, j), dtype)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-D coordinate vectors (a list, as in JAX)."""
    check_arraylike("meshgrid", *xi)
    args = [_as_array(x, "meshgrid") for x in xi]
    if not copy:
        raise ValueError("jax.numpy.meshgrid only supports copy=True")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
    if any(a.ndim != 1 for a in args):
        raise ValueError(f"Arguments to jax.numpy.meshgrid must be 1D, got shapes "
                         f"{[a.shape for a in args]}")
    swap = indexing == "xy" and len(args) >= 2
    if swap:
        args[0], args[1] = args[1], args[0]
    dense = [a.shape[0] for a in args]
    out = []
    for i, a in enumerate(args):
        shape = [1] * len(args) if sparse else list(dense)
        shape[i] = a.shape[0]
        out.append(lax.broadcast_in_dim(a, shape, (i,)))
    if swap:
        out[0], out[1] = out[1], out[0]
    return out
