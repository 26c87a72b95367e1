"""Abstract values: what the compiler knows about an array without its contents.

A `ShapedArray` is (shape, dtype, weak_type); its `sharding` is None (the runtime's typed
avals, for arrays placed over a mesh, subclass it with a sharding). `AbstractValue` is the base
class of abstract values, as JAX's `jax.core.AbstractValue`. Abstract evaluation rules map the abstract values
of a primitive's operands to those of its results; the specialiser uses them to type every SSA
name, and eager execution uses them to validate operands before calling NumPy.
"""
import numpy as np

from . import dtypes


# The largest array kiln represents: its byte size must fit a signed 64-bit integer, as every
# offset and element count in compiled code does (so they never wrap around).
MAX_ARRAY_BYTES = (1 << 63) - 1


def too_large(shape, dtype):
    """The message for an array of `shape` and `dtype` larger than MAX_ARRAY_BYTES."""
    n = 1
    for d in shape:
        n *= d
    return (f"an array of shape {tuple(shape)} and dtype {np.dtype(dtype).name} would hold "
            f"{n} elements ({n * np.dtype(dtype).itemsize:.3g} bytes), more than the 2^63 - 1 "
            f"bytes an array can address; use a smaller shape")


class AbstractValue:
    """The base class of abstract values."""
    __slots__ = ()


class ShapedArray(AbstractValue):
    __slots__ = ("shape", "dtype", "weak_type", "_hash")
    sharding = None   # the type carries no sharding (the runtime's TypedAval's does)

    def __init__(self, shape, dtype, weak_type=False, *, sharding=None):
        if sharding is not None:
            raise TypeError("ShapedArray(..., sharding=...): kiln types arrays with a sharding "
                            "itself, when they are placed over a mesh (jax.device_put, "
                            "reshard); a ShapedArray made by hand carries none. Leave "
                            "sharding=None.")
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self._hash = None
        n = 1
        for d in self.shape:
            n *= d
        if n * self.dtype.itemsize > MAX_ARRAY_BYTES:
            raise ValueError(too_large(self.shape, self.dtype))

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def update(self, shape=None, dtype=None, weak_type=None):
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strong(self):
        return self if not self.weak_type else ShapedArray(self.shape, self.dtype, False)

    def to_tangent_aval(self):
        """The type of this value's tangents, as JAX's: its own for inexact dtypes, float0
        (of the same shape) otherwise."""
        if self.dtype.kind in "fc":
            return ShapedArray(self.shape, self.dtype, self.weak_type)
        return ShapedArray(self.shape, dtypes.FLOAT0, self.weak_type)

    def __eq__(self, other):
        return (isinstance(other, ShapedArray) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        if self._hash is None:
            self._hash = hash((self.shape, self.dtype, self.weak_type))
        return self._hash

    def str_short(self):
        """`f32[3,4]`, the spelling used by the SSA printer, error messages and the CLI."""
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __str__(self):
        return self.str_short() + ("{weak}" if self.weak_type else "")

    def __repr__(self):
        return f"ShapedArray({self.str_short()}{', weak_type=True' if self.weak_type else ''})"


def shape_str(shape):
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def contiguous_strides(shape):
    """The element strides of a C-contiguous (row-major) array of `shape`."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))
