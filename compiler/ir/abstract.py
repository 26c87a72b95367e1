"""Abstract values: what the compiler knows about an array without its contents.

A `ShapedArray` is (shape, dtype, weak_type). Abstract evaluation rules map the abstract values
of a primitive's operands to those of its results; the specialiser uses them to type every SSA
name, and eager execution uses them to validate operands before calling NumPy.
"""
import numpy as np

from . import dtypes


class ShapedArray:
    __slots__ = ("shape", "dtype", "weak_type", "_hash")

    def __init__(self, shape, dtype, weak_type=False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self._hash = None

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
