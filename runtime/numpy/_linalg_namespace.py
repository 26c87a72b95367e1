"""The implementation of `kiln.numpy.linalg`: its public names (`__all__`, re-exported there)
and the helpers they use. `kiln.numpy.linalg`'s docstring describes them."""
import operator

import numpy as np

from ..array import to_array
from ..compiler.ir import dtypes
from ._core import check_arraylike, canonicalize_axis, promote_dtypes_inexact
from . import _linalg, _reductions, _shape, _ufuncs

from . import _linalg_solvers
from ._linalg_solvers import *  # noqa: F401,F403

__all__ = ["norm", "vector_norm", "matrix_norm", "matmul", "tensordot", "vecdot", "outer",
           "cross", "diagonal", "trace", "matrix_transpose"] + _linalg_solvers.__all__


def _arr(fun_name, x):
    check_arraylike(fun_name, x)
    return to_array(x, fun_name)


def _sum_squares(x, axis, keepdims):
    return _ufuncs.sqrt(_reductions.sum(_ufuncs.real(_ufuncs.multiply(x, _ufuncs.conj(x))),
                                        axis=axis, keepdims=keepdims))


def _power_norm(x, p, axis, keepdims):
    x, = promote_dtypes_inexact(x)
    abs_x = _ufuncs.abs(x)
    total = _reductions.sum(_ufuncs.power(abs_x, _ufuncs.astype(p, abs_x.dtype)), axis=axis,
                            keepdims=keepdims)
    return _ufuncs.power(total, _ufuncs.astype(1.0 / p, abs_x.dtype))


def _count_nonzero(x, axis, keepdims):
    real = np.finfo(x.dtype).dtype if dtypes.is_inexact(x.dtype) else dtypes.default_float()
    return _reductions.sum(_ufuncs.not_equal(x, 0), axis=axis, keepdims=keepdims, dtype=real)


_VECTOR_ORDERS = {
    2: _sum_squares,
    1: lambda x, axis, keepdims: _reductions.sum(_ufuncs.abs(x), axis=axis, keepdims=keepdims),
    np.inf: lambda x, axis, keepdims: _reductions.max(_ufuncs.abs(x), axis=axis,
                                                      keepdims=keepdims, initial=0),
    -np.inf: lambda x, axis, keepdims: _reductions.min(_ufuncs.abs(x), axis=axis,
                                                       keepdims=keepdims),
    0: _count_nonzero,
}


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """Vector p-norm over `axis` (all axes by default): ord 2 (None), 1, inf, -inf, 0 (number
    of non-zeros) or any other number p, (sum |x|^p)^(1/p)."""
    x = _arr("jnp.linalg.vector_norm", x)
    if isinstance(ord, str):
        hint = {"inf": " Use 'jax.numpy.inf' instead.", "-inf": " Use '-jax.numpy.inf' instead."}
        raise ValueError(f"Invalid order '{ord}' for vector norm.{hint.get(ord, '')}")
    ord = 2 if ord is None else ord
    fn = _VECTOR_ORDERS.get(ord)
    if fn is None:
        return _power_norm(x, ord, axis, keepdims)
    return fn(x, axis, keepdims)


def _matrix_norm(x, ord, rows, cols, keepdims):
    """The entrywise-sum matrix norms over axes (rows, cols)."""
    if ord is None or ord in ("f", "fro"):
        return _sum_squares(x, (rows, cols), keepdims)
    if ord in (2, -2, "nuc"):
        s = _linalg_solvers.svdvals(_shape.moveaxis(x, (rows, cols), (-2, -1)))
        if ord == "nuc":
            out = _reductions.sum(s, axis=-1)
        else:
            out = (_reductions.max if ord == 2 else _reductions.min)(s, axis=-1)
        if keepdims:
            out = _shape.expand_dims(out, (rows, cols))
        return out
    if ord not in (1, -1, np.inf, -np.inf):
        raise ValueError(f"Invalid order '{ord}' for matrix norm.")
    # ord 1/-1: max/min over columns of the column sums; inf/-inf: the same over rows.
    summed, other = (rows, cols) if ord in (1, -1) else (cols, rows)
    if not keepdims and other > summed:
        other -= 1
    sums = _reductions.sum(_ufuncs.abs(x), axis=summed, keepdims=keepdims)
    if ord > 0:
        return _reductions.max(sums, axis=other, keepdims=keepdims, initial=0)
    return _reductions.min(sums, axis=other, keepdims=keepdims)


def _norm_axes(axis, ndim):
    if isinstance(axis, (tuple, list)):
        axes = tuple(canonicalize_axis(a, ndim, "jnp.linalg.norm") for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(f"duplicate value in 'axis': {tuple(axis)}")
        return axes
    return (canonicalize_axis(operator.index(axis), ndim, "jnp.linalg.norm"),)


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norm (one axis) or matrix norm (two axes) of `x`, promoted to inexact; with
    axis=None and ord=None, the 2-norm of the flattened array."""
    x = _arr("jnp.linalg.norm", x)
    x, = promote_dtypes_inexact(x)
    if axis is None:
        if ord is None:
            return _sum_squares(x, None, keepdims)
        axis = tuple(range(x.ndim))
    axes = _norm_axes(axis, x.ndim)
    if len(axes) == 1:
        return vector_norm(x, ord=2 if ord is None else ord, axis=axes, keepdims=keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes[0], axes[1], keepdims)
    raise ValueError(f"Improper number of axes for norm: axis={axes}. Pass one axis to compute "
                     f"a vector-norm, or two axes to compute a matrix-norm.")


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Matrix norm over the last two axes."""
    return norm(_arr("jnp.linalg.matrix_norm", x), ord=ord, axis=(-2, -1), keepdims=keepdims)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """`kiln.numpy.matmul`."""
    return _linalg.matmul(x1, x2, preferred_element_type=preferred_element_type)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    """`kiln.numpy.tensordot` with keyword `axes`."""
    return _linalg.tensordot(x1, x2, axes, preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """`kiln.numpy.vecdot`."""
    return _linalg.vecdot(x1, x2, axis=axis, preferred_element_type=preferred_element_type)


def outer(x1, x2, /):
    """Outer product of two 1-D arrays."""
    x1, x2 = _arr("jnp.linalg.outer", x1), _arr("jnp.linalg.outer", x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={x1.ndim} x2.ndim={x2.ndim}")
    return _linalg.outer(x1, x2)


def cross(x1, x2, /, *, axis=-1):
    """Cross product of 3-element vectors along `axis`."""
    x1, x2 = _arr("jnp.linalg.cross", x1), _arr("jnp.linalg.cross", x2)
    n1 = x1.shape[canonicalize_axis(axis, x1.ndim, "jnp.linalg.cross")]
    n2 = x2.shape[canonicalize_axis(axis, x2.ndim, "jnp.linalg.cross")]
    if n1 != 3 or n2 != 3:
        raise ValueError(f"Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they have x1.shape[axis]={n1} and x2.shape[axis]={n2}")
    return _linalg.cross(x1, x2, axis=axis)


def diagonal(x, /, *, offset=0):
    """Diagonals of the matrices in the last two axes."""
    return _shape.diagonal(_arr("jnp.linalg.diagonal", x), offset, -2, -1)


def trace(x, /, *, offset=0, dtype=None):
    """Traces of the matrices in the last two axes."""
    return _shape.trace(_arr("jnp.linalg.trace", x), offset, -2, -1, dtype)


def matrix_transpose(x, /):
    """Swap the last two axes."""
    return _shape.matrix_transpose(_arr("jnp.linalg.matrix_transpose", x))
