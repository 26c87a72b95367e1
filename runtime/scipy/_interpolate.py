"""The implementation of `kiln.scipy.interpolate`: `RegularGridInterpolator`, as
`jax.scipy.interpolate` has it (`__all__`, re-exported there).

The grid is one increasing 1-D array of points per leading axis of `values`. For a query
point, each axis finds the cell [g[i], g[i + 1]] holding it (i = searchsorted(g, x) - 1,
clamped to the first and last cells, so points outside extrapolate from the edge cell) and
the point's fraction t of the way across. "linear" blends the cell's 2^ndim corners with
weights prod(1 - t or t); "nearest" takes the corner with t <= 0.5 rounding down. Points
outside the grid give `fill_value` (NaN by default; None extrapolates). `bounds_error=True`
is refused: it would need a check on traced values.
"""
import itertools

import numpy as np

from .. import numpy as jnp
from ..numpy._core import check_arraylike, promote_dtypes_inexact
from ..tree_util import register_pytree_node

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")


def _check_method(method):
    if method not in _METHODS:
        raise ValueError(f"method {method!r} is not defined")


def _query_points(xi, ndim):
    """`xi` as an (..., ndim) array: a tuple of coordinate arrays is broadcast and stacked."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        return jnp.stack(jnp.broadcast_arrays(*[jnp.asarray(x) for x in xi]), axis=-1)
    check_arraylike("RegularGridInterpolator", xi)
    xi = jnp.asarray(xi)
    if xi.ndim == 1 and ndim == 1:
        return xi[:, None]
    return xi


class RegularGridInterpolator:
    """Interpolation on a regular grid in any number of dimensions (linear or nearest),
    `scipy.interpolate.RegularGridInterpolator` as JAX has it."""

    def __init__(self, points, values, method="linear", bounds_error=False,
                 fill_value=np.nan):
        _check_method(method)
        if bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT: kiln cannot "
                                      "raise on traced query points; keep the default False")
        check_arraylike("RegularGridInterpolator", values)
        values = jnp.asarray(values)
        if len(points) > values.ndim:
            raise ValueError(f"there are {len(points)} point arrays, but values has "
                             f"{values.ndim} dimensions")
        (values,) = promote_dtypes_inexact(values)
        if fill_value is not None:
            check_arraylike("RegularGridInterpolator", fill_value)
            fill_value = jnp.asarray(fill_value)
            if not jnp.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError("fill_value must be either 'None' or of a type compatible "
                                 "with values")
        check_arraylike("RegularGridInterpolator", *points)
        self.method, self.bounds_error = method, bounds_error
        self.grid = tuple(jnp.asarray(p) for p in points)
        self.values, self.fill_value = values, fill_value

    def __call__(self, xi, method=None):
        method = self.method if method is None else method
        _check_method(method)
        ndim = len(self.grid)
        xi = _query_points(xi, ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[-1]}, "
                             f"but this RegularGridInterpolator has dimension {ndim}")
        shape = xi.shape
        xi = xi.reshape(-1, ndim)
        cells, fractions, outside = [], [], jnp.zeros(xi.shape[0], bool)
        for axis, g in enumerate(self.grid):
            x = xi[:, axis]
            i = jnp.clip(jnp.searchsorted(g, x) - 1, 0, g.size - 2)
            cells.append(i)
            fractions.append((x - g[i]) / (g[i + 1] - g[i]))
            outside = outside | (x < g[0]) | (x > g[-1])
        trailing = (slice(None),) + (None,) * (self.values.ndim - ndim)
        if method == "nearest":
            result = self.values[tuple(jnp.where(t <= 0.5, i, i + 1)
                                       for i, t in zip(cells, fractions))]
        else:
            result = None
            for corner in itertools.product((0, 1), repeat=ndim):
                weight = None
                for up, t in zip(corner, fractions):
                    w = t if up else 1 - t
                    weight = w if weight is None else weight * w
                term = self.values[tuple(i + up for i, up in zip(cells, corner))] * \
                    weight[trailing]
                result = term if result is None else result + term
        if self.fill_value is not None:
            keep = outside.reshape(outside.shape + (1,) * (result.ndim - 1))
            result = jnp.where(keep, self.fill_value, result)
        return result.reshape(shape[:-1] + self.values.shape[ndim:])


register_pytree_node(
    RegularGridInterpolator,
    lambda obj: ((obj.grid, obj.values, obj.fill_value), (obj.method, obj.bounds_error)),
    lambda aux, children: RegularGridInterpolator(*children[:2], *aux, children[2]))
