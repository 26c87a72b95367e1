"""`kiln.numpy`'s small helpers on values and bits: packbits, unpackbits, bitwise_count,
spacing, iscomplex, isreal, iscomplexobj, isrealobj, isscalar, iterable.

`packbits`/`unpackbits` move bits between uint8 bytes and 0/1 arrays along an axis (NumPy's
`big` and `little` bit orders, padded with zeros to whole bytes). `isscalar` is JAX's: a
0-d array counts as a scalar, unlike in NumPy.
"""
import numpy as np

from ..array import Array, to_array
from .. import lax
from ._core import check_arraylike
from .. import numpy as jnp

__all__ = ["packbits", "unpackbits", "bitwise_count", "spacing", "iscomplex", "isreal",
           "iscomplexobj", "isrealobj", "isscalar", "iterable"]


def _shifts(bitorder):
    if bitorder not in ("big", "little"):
        raise ValueError("'order' must be either 'little' or 'big'")
    s = jnp.arange(8, dtype=jnp.uint8)
    return s[::-1] if bitorder == "big" else s


def packbits(a, axis=None, bitorder="big"):
    """The 0/1 values of `a` along `axis` packed into uint8 bytes."""
    check_arraylike("packbits", a)
    a = to_array(a, "packbits")
    if a.dtype.kind not in "biu":
        raise TypeError("Expected an input array of integer or boolean data type")
    bits = (a != 0).astype(jnp.uint8)
    if axis is None:
        bits, axis = jnp.ravel(bits), 0
    bits = jnp.moveaxis(bits, axis, -1)
    pad = -bits.shape[-1] % 8
    bits = jnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, pad)])
    bits = jnp.reshape(bits, bits.shape[:-1] + (-1, 8))
    packed = jnp.sum(bits << _shifts(bitorder), axis=-1, dtype=jnp.uint8)
    return jnp.moveaxis(packed, -1, axis)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of the uint8 array `a` along `axis` (flattened if None), as 0/1 uint8."""
    check_arraylike("unpackbits", a)
    a = to_array(a, "unpackbits")
    if a.dtype != np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    bits = (a[..., None] >> _shifts(bitorder)) & jnp.uint8(1)
    if axis is None:
        bits, axis = jnp.ravel(bits), 0
    else:
        bits = jnp.moveaxis(bits, axis, -2)
        bits = jnp.moveaxis(jnp.reshape(bits, bits.shape[:-2] + (-1,)), -1, axis)
    if count is not None:
        n = bits.shape[axis]
        idx = [slice(None)] * bits.ndim
        idx[axis] = slice(0, count if count >= 0 else n + count)
        bits = bits[tuple(idx)]
        if count > n:
            widths = [(0, 0)] * bits.ndim
            widths[axis] = (0, count - n)
            bits = jnp.pad(bits, widths)
    return bits


def bitwise_count(x, /):
    """The number of one bits in the absolute value of each integer."""
    check_arraylike("bitwise_count", x)
    x = to_array(x, "bitwise_count")
    if x.dtype.kind not in "biu":
        raise TypeError(f"bitwise_count requires integer input, got {x.dtype}")
    if x.dtype.kind == "b":
        x = x.astype(jnp.uint8)
    return lax.population_count(jnp.abs(x) if x.dtype.kind == "i" else x).astype(jnp.uint8)


def spacing(x, /):
    """The distance from `x` to the next float of the same type away from zero."""
    check_arraylike("spacing", x)
    x = to_array(x, "spacing")
    if x.dtype.kind not in "f":
        x = x.astype(jnp.result_type(x.dtype, float))
    return jnp.where(x < 0, jnp.nextafter(x, -jnp.inf), jnp.nextafter(x, jnp.inf)) - x


def iscomplex(x):
    """Elementwise: has a non-zero imaginary part."""
    x = jnp.asarray(x)
    return jnp.imag(x) != 0 if x.dtype.kind == "c" else jnp.zeros(x.shape, bool)


def isreal(x):
    """Elementwise: has a zero imaginary part."""
    x = jnp.asarray(x)
    return jnp.imag(x) == 0 if x.dtype.kind == "c" else jnp.ones(x.shape, bool)


def iscomplexobj(x):
    """Whether `x` has a complex dtype (a Python bool)."""
    if x is None:
        return False
    dtype = getattr(x, "dtype", None)
    return (np.dtype(dtype) if dtype is not None else np.asarray(x).dtype).kind == "c"


def isrealobj(x):
    return not iscomplexobj(x)


def isscalar(element):
    """JAX's `isscalar`: Python and NumPy scalars, and 0-d arrays."""
    if hasattr(element, "__jax_array__"):
        element = element.__jax_array__()
    if isinstance(element, (Array, np.ndarray)) or getattr(type(element), "_kiln_trace",
                                                           None) is not None:
        return element.ndim == 0
    return bool(np.isscalar(element))


iterable = np.iterable
