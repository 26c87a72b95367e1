"""`kiln.typing`: the annotation types of `jax.typing`.

`ArrayLike` is anything kiln's functions accept as an array (a kiln `Array`, a NumPy array or
scalar, a Python number); `DTypeLike` is anything `jnp.dtype` accepts. Both are `typing.Union`s,
usable in annotations and with `isinstance`.
"""
import typing

import numpy as np

from .array import Array

__all__ = ["ArrayLike", "DTypeLike"]

ArrayLike = typing.Union[Array, np.ndarray, np.bool_, np.number, bool, int, float, complex]
DTypeLike = typing.Union[str, type, np.dtype]


def __dir__():
    return sorted(__all__)
