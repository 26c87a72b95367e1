"""The implementation of `kiln.scipy.ndimage`: `map_coordinates`, as `jax.scipy.ndimage` has it
(`__all__`, re-exported there).

Each output value interpolates `input` at one point given by `coordinates` (one array per
input axis, broadcast together). Order 0 takes the nearest sample (coordinates rounded half
away from zero); order 1 the 2^ndim neighbours (floor and floor + 1 per axis) weighted
linearly. A neighbour outside the array is mapped back by `mode`: "nearest" clamps, "wrap"
is periodic, "mirror" reflects about the edge samples (d c b | a b c d | c b a), "reflect"
about the edges themselves (d c b a | a b c d | d c b a); with "constant" a neighbour
outside contributes `cval`. Integer inputs are rounded half away from zero to their dtype.
"""
import itertools

import numpy as np

from .. import lax
from .. import numpy as jnp

__all__ = ["map_coordinates"]


def _mirror(index, size):
    if size == 1:
        return jnp.zeros_like(index)
    period = 2 * (size - 1)
    return jnp.abs((index + size - 1) % period - (size - 1))


def _reflect(index, size):
    folded = index % (2 * size)
    return jnp.where(folded < size, folded, 2 * size - 1 - folded)


_MODES = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _nearest(coordinate):
    if jnp.issubdtype(coordinate.dtype, jnp.integer):
        return [(coordinate.astype(np.int32), None)]
    return [(lax.round(coordinate).astype(np.int32), None)]


def _linear(coordinate):
    below = jnp.floor(coordinate)
    above_weight = coordinate - below
    index = below.astype(np.int32)
    return [(index, 1 - above_weight), (index + 1, above_weight)]


_ORDERS = {0: _nearest, 1: _linear}


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):
    """`input` interpolated at `coordinates` (scipy.ndimage.map_coordinates, orders 0 and 1;
    modes "constant", "nearest", "wrap", "mirror", "reflect")."""
    image = jnp.asarray(input)
    points = [jnp.asarray(c) for c in coordinates]
    if len(points) != image.ndim:
        raise ValueError(f"coordinates must be a sequence of length input.ndim, but "
                         f"{len(points)} != {image.ndim}")
    if mode not in _MODES:
        raise NotImplementedError(f"kiln.scipy.ndimage.map_coordinates does not support mode "
                                  f"{mode!r}; the modes are {sorted(_MODES)}")
    if order not in _ORDERS:
        raise NotImplementedError("kiln.scipy.ndimage.map_coordinates supports order 0 "
                                  f"(nearest) and 1 (linear), got {order}")
    fill = jnp.asarray(cval, image.dtype)
    per_axis = []
    for point, size in zip(points, image.shape):
        per_axis.append([(_MODES[mode](index, size), (index >= 0) & (index < size), weight)
                         for index, weight in _ORDERS[order](point)])
    total = None
    for corner in itertools.product(*per_axis):
        indices = tuple(index for index, _, _ in corner)
        value = image[indices]
        if mode == "constant":
            inside = corner[0][1]
            for _, valid, _ in corner[1:]:
                inside = inside & valid
            value = jnp.where(inside, value, fill)
        weights = [w for _, _, w in corner if w is not None]
        for w in weights:
            value = value * w
        total = value if total is None else total + value
    if jnp.issubdtype(image.dtype, jnp.integer) and jnp.issubdtype(total.dtype, jnp.floating):
        total = lax.round(total)
    return total.astype(image.dtype)
