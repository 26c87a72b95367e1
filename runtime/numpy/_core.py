"""Shared helpers of `kiln.numpy`: argument checks, dtype promotion, broadcasting, axes.

Everything in `kiln.numpy` is plain Python over `kiln.lax`, so that the compiler can later
specialise it like user code. These helpers are the NumPy layer's conventions:

* `check_arraylike(name, *args)`: JAX refuses lists and tuples where NumPy would convert them
  (`jnp.sum([1, 2])` is a TypeError naming the position).
* `promote_dtypes(*xs)`: JAX's lattice promotion with weak types.
* `promote_args(name, *xs)`: check, promote and broadcast (NumPy rules) in one step.
* `canonicalize_axis(axis, ndim, name)`: negative axes, range checks with NumPy's error.
"""
import operator
import warnings

import numpy as np

from ..array import Array, to_array
from .. import lax
from ..compiler.config import config
from ..compiler.ir import dtypes

_ARRAYLIKE = (Array, np.ndarray, np.generic, int, float, complex, bool)


def is_arraylike(x):
    return isinstance(x, _ARRAYLIKE) or getattr(type(x), "_kiln_trace", None) is not None \
        or hasattr(x, "__jax_array__")


def check_arraylike(fun_name, *args):
    for pos, arg in enumerate(args):
        if not is_arraylike(arg):
            raise TypeError(f"{fun_name} requires ndarray or scalar arguments, got "
                            f"{type(arg)} at position {pos}.")


def as_array(x, fun_name="kiln.numpy"):
    return to_array(x, fun_name)


def promote_dtypes(*args):
    """Convert arrays to their common JAX dtype (weak types respected)."""
    arrs = [to_array(a) for a in args]
    if len(arrs) < 2:
        return arrs
    first = arrs[0]
    if all(a.dtype == first.dtype and a.weak_type == first.weak_type for a in arrs):
        return arrs
    dtype, weak = dtypes.result_type(*((a.dtype, a.weak_type) for a in arrs))
    return [_convert(a, dtype, weak) for a in arrs]


def _convert(a, dtype, weak):
    if a.dtype == dtype and a.weak_type == weak:
        return a
    if weak:
        return lax.convert_element_type(a, {"b": bool, "i": int, "u": int, "f": float,
                                            "c": complex}[dtype.kind]) \
            if dtype == dtypes.default_for_kind(dtype.kind) else lax.convert_element_type(a, dtype)
    return lax.convert_element_type(a, dtype)


def promote_dtypes_inexact(*args):
    """Promote, then make floating as jnp.sin does (JAX's to_inexact_dtype: (u)int64 -> float64,
    smaller integers and bool -> float32, even with x64 on)."""
    arrs = promote_dtypes(*args)
    dtype, weak = arrs[0].dtype, all(a.weak_type for a in arrs)
    if dtype.kind not in "fc":
        target = dtypes.float64 if dtype.itemsize == 8 else dtypes.float32
        return [_convert(a, target, weak) for a in arrs]
    return arrs


def promote_dtypes_numeric(*args):
    arrs = promote_dtypes(*args)
    if arrs and arrs[0].dtype == dtypes.bool_:
        return [lax.convert_element_type(a, dtypes.int32) for a in arrs]  # JAX: even with x64
    return arrs


def broadcast_shapes(*shapes):
    """NumPy's broadcasting rule; ValueError naming the shapes on mismatch."""
    shapes = [tuple(s) for s in shapes]
    if len(set(shapes)) == 1:
        return shapes[0]
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(nd):
        sizes = {s[i - nd + len(s)] for s in shapes if i - nd + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError("Incompatible shapes for broadcasting: shapes="
                             + str([tuple(s) for s in shapes]))
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to(x, shape):
    x = to_array(x)
    shape = tuple(shape)
    if x.shape == shape:
        return x
    nd = len(shape)
    if x.ndim > nd:
        raise ValueError(f"Cannot broadcast to shape with fewer dimensions: arr_shape={x.shape} "
                         f"shape={shape}")
    lead = nd - x.ndim
    for i, d in enumerate(x.shape):
        if d not in (1, shape[lead + i]):
            raise ValueError(f"Incompatible shapes for broadcasting: {x.shape} and requested "
                             f"shape {shape}")
    # Squeeze size-1 axes that expand, then broadcast_in_dim the rest.
    keep = [i for i, d in enumerate(x.shape) if d == shape[lead + i]]
    if len(keep) != x.ndim:
        x = lax.reshape(x, tuple(x.shape[i] for i in keep))
    return lax.broadcast_in_dim(x, shape, tuple(lead + i for i in keep))


def check_rank_promotion(fun_name, shapes):
    """JAX's `numpy_rank_promotion` option: operands of different ranks (scalars aside) warn
    or raise when it is "warn" or "raise"."""
    mode = config.read("numpy_rank_promotion")
    if mode == "allow" or len({len(s) for s in shapes if s}) < 2:
        return
    msg = (f"Operands could not be broadcast together for {fun_name} on shapes "
           f"{' '.join(str(tuple(s)) for s in shapes)} and with the config option "
           f"jax_numpy_rank_promotion='{mode}'. For more information, see "
           f"https://docs.jax.dev/en/latest/rank_promotion_warning.html.")
    if mode == "raise":
        raise ValueError(msg)
    warnings.warn(msg, stacklevel=4)


def promote_shapes(*arrs, fun_name="broadcasting"):
    """Broadcast operands to their common shape. Rank-0 operands stay rank 0 (elementwise
    primitives broadcast them), so scalars stay scalars in compiled code."""
    arrs = list(arrs)
    if len({a.shape for a in arrs if a.shape}) <= 1:
        return arrs
    check_rank_promotion(fun_name, [a.shape for a in arrs])
    shape = broadcast_shapes(*(a.shape for a in arrs))
    return [broadcast_to(a, shape) if a.shape else a for a in arrs]


def promote_args(fun_name, *args):
    check_arraylike(fun_name, *args)
    return promote_shapes(*promote_dtypes(*args), fun_name=fun_name)


def promote_args_inexact(fun_name, *args):
    check_arraylike(fun_name, *args)
    return promote_shapes(*promote_dtypes_inexact(*args), fun_name=fun_name)


def promote_args_numeric(fun_name, *args):
    check_arraylike(fun_name, *args)
    return promote_shapes(*promote_dtypes_numeric(*args))


def canonicalize_axis(axis, ndim, fun_name="axis"):
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{fun_name}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else axis


def canonicalize_axes(axis, ndim, fun_name="axis"):
    """None -> all axes; int or tuple -> sorted tuple of non-negative axes (no duplicates)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(canonicalize_axis(a, ndim, fun_name) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{fun_name}: repeated axis in {tuple(axis)}")
        return tuple(sorted(axes))
    return (canonicalize_axis(axis, ndim, fun_name),)


def canonical_dtype(dtype, fun_name="dtype"):
    """Normalise a user dtype (np dtype, str, Python type, kiln scalar type) to a NumPy dtype."""
    if dtype is None:
        return None
    if isinstance(dtype, type) and hasattr(dtype, "dtype") and isinstance(
            getattr(dtype, "dtype"), np.dtype):
        dtype = dtype.dtype
    if dtype is int:
        return dtypes.default_int()
    if dtype is float:
        return dtypes.default_float()
    if dtype is complex:
        return dtypes.default_complex()
    if dtype is bool:
        return dtypes.bool_
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{fun_name}: data type {dtype!r} not understood") from None
    if d.kind not in "biufc":
        raise TypeError(f"{fun_name}: data type {d} is not a valid kiln array type")
    return dtypes.canonicalize(d)


def weak_scalar_dtype_kind(x):
    return isinstance(x, (int, float, complex)) and not isinstance(x, bool)
