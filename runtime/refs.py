"""JAX's mutable array references (`kiln.new_ref`, `kiln.Ref`, `kiln.empty_ref`,
`kiln.freeze`, `kiln.free_ref`) and `kiln.ds`, outside compiled code.

A `Ref` holds one kiln Array and replaces it on every write: `ref[...]` / `ref[idx]` read (any
index an Array takes, `ds(...)` included), `ref[...] = v` / `ref[idx] = v` write (values cast
of the Ref's dtype, as JAX requires, broadcast), `ref.addupdate(v, idx)` adds. `freeze(ref)` returns
the value and invalidates the Ref, `free_ref(ref)` invalidates it; reading or writing an
invalid Ref is a ValueError. `empty_ref(ty)` is a Ref of zeros of `ty`'s shape and dtype (JAX
leaves the contents undefined and allows it only under jit). A Ref is not an array: it is
neither a pytree leaf kiln can trace nor an operand of kiln.numpy, so passing one to (or
reading one inside) a jitted or transformed function is a TypeError that says to pass
`ref[...]` and write the result back (docs/differences.md).

`ds(start, size, stride)` is JAX's `Slice`: `size` elements from `start`, `stride` apart; as an
index it selects those positions (a traced `start` is clamped so that the window fits, as
`lax.dynamic_slice` does when the stride is 1).
"""
import dataclasses

from .array import Array, to_array
from .dispatch import is_traced
from .compiler.ir.builder import current


@dataclasses.dataclass(slots=True)
class Slice:
    """`size` elements from `start`, `stride` apart (`kiln.ds`)."""
    start: object
    size: int
    stride: int = 1

    def __post_init__(self):
        if self.stride < 0:
            raise ValueError("`stride` must be >= 0.")


def ds(start, size=None, stride=None):
    """JAX's `ds`: `ds(None)` is `:`, `ds(j)` is `:j`, `ds(i, j)` is `j` elements from `i`,
    `ds(i, j, s)` every `s`-th of them."""
    if start is None:
        return slice(None)
    if stride is None:
        stride = 1
    if not isinstance(stride, int):
        raise ValueError("Non-static stride in `dslice`")
    if size is None:
        start, size = 0, start
    return Slice(start, size, stride)


class Ref:
    """A mutable array reference (`kiln.new_ref`)."""
    __slots__ = ("_value", "memory_space", "kind")

    def __init__(self, value, memory_space=None, kind=None):
        self._value = value
        self.memory_space = memory_space
        self.kind = kind

    def _live(self):
        if current() is not None:
            raise TypeError(self._kiln_not_traceable())
        if self._value is None:
            raise ValueError("this Ref was invalidated by kiln.freeze or kiln.free_ref; make a "
                             "new one with kiln.new_ref")
        return self._value

    shape = property(lambda self: self._live().shape)
    dtype = property(lambda self: self._live().dtype)
    ndim = property(lambda self: self._live().ndim)
    size = property(lambda self: self._live().size)

    def __len__(self):
        return len(self._live())

    def __getitem__(self, idx):
        value = self._live()
        return value if idx is Ellipsis or idx == () else value[idx]

    def __setitem__(self, idx, new):
        import kiln.numpy as jnp
        value = self._live()
        new = jnp.asarray(new)
        if new.dtype != value.dtype:
            raise ValueError(f"Invalid dtype for a Ref write: the Ref holds {value.dtype}, the "
                             f"value is {new.dtype}; convert it with .astype (as JAX, writes "
                             f"do not convert)")
        if idx is Ellipsis or idx == ():
            self._value = jnp.broadcast_to(new, value.shape)
        else:
            self._value = value.at[idx].set(new)

    def addupdate(self, x, idx=()):
        """`ref[idx] += x`."""
        value = self._live()
        self._value = value + x if idx is Ellipsis or idx == () else value.at[idx].add(x)

    def __repr__(self):
        if self._value is None:
            return "Ref(<invalidated>)"
        return "Ref" + repr(self._value)[len("Array"):]

    def _kiln_not_traceable(self):
        return ("kiln.Ref inside a compiled or transformed function: a Ref is mutable state, which compiled and transformed functions do not "
                "take: pass its value `ref[...]` in, return the new value and write it with "
                "`ref[...] = new` after the call")


def new_ref(init_val, *, memory_space=None, kind=None):
    """A Ref holding `init_val` (a copy: later writes do not change `init_val`)."""
    if is_traced(init_val):
        raise TypeError("kiln.new_ref inside a compiled or transformed function: kiln has no "
                        "mutable references in compiled code; use a value and .at[].set")
    return Ref(to_array(init_val, "new_ref"), memory_space, kind)


def empty_ref(ty, memory_space=None):
    """A Ref of zeros with `ty`'s shape and dtype (a ShapeDtypeStruct or an array)."""
    import kiln.numpy as jnp
    return Ref(jnp.zeros(ty.shape, ty.dtype), memory_space)


def freeze(ref):
    """The Ref's value; the Ref is invalid afterwards."""
    value = ref._live()
    ref._value = None
    return value


def free_ref(ref):
    """Invalidate the Ref."""
    ref._live()
    ref._value = None


__all__ = ["Ref", "new_ref", "empty_ref", "freeze", "free_ref", "ds", "Slice"]
