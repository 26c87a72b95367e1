"""JAX's mutable array references (`kiln.new_ref`, `kiln.Ref`, `kiln.empty_ref`,
`kiln.freeze`, `kiln.free_ref`) and `kiln.ds`.

A `Ref` holds one value and replaces it on every write: `ref[...]` / `ref[idx]` read (any
index an Array takes, `ds(...)` included), `ref[...] = v` / `ref[idx] = v` write (values
must have the Ref's dtype, as JAX requires, and are broadcast), `ref.addupdate(v, idx)` adds.
`freeze(ref)` returns the value and invalidates the Ref, `free_ref(ref)` invalidates it;
reading or writing an invalid Ref is a ValueError. `empty_ref(ty)` is a Ref of zeros of `ty`'s
shape and dtype (JAX leaves the contents undefined and allows it only under jit).

Eagerly a Ref holds a kiln Array. While kiln specialises a function, reads and writes happen
at specialisation, in program order, on traced values (refs are discharged into pure SSA):
- a Ref made there (`new_ref` in the function) is *traced*: it holds a traced value of the
  builder it was made in (`_home`); a write inside a loop body or branch is carried out of it
  by `ref_regions`, and one inside another transform's code (grad, vmap, ... in the function)
  is a CompileError with the line;
- a Ref made outside (closed over, or a global) is read and written through a traced *view*
  (a traced Ref) that the `jit` specialisation (`ref_staging.RefStaging`, in `STAGING.active`)
  makes on first use; `jit` passes its value in at each call and writes the new value back
  after it. Outside `jit` (grad, vmap, ... called eagerly) there is none, and using such a Ref
  is a TypeError that says to pass `ref[...]` and write the result back.

`ds(start, size, stride)` is JAX's `Slice`: `size` elements from `start`, `stride` apart; as an
index it selects those positions (a traced `start` is clamped so that the window fits, as
`lax.dynamic_slice` does when the stride is 1).
"""
import dataclasses

from .array import to_array
from .dispatch import is_traced
from .compiler.errors import CompileError
from .compiler.ir.builder import current, PerThread

# `active`: the RefStaging of the `jit` specialisation running in this thread, or None;
# `probes`: the region probes of ref_regions (innermost last; None blocks the ones below).
STAGING = PerThread(active=lambda: None, probes=list)


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


def _whole(idx):
    return idx is Ellipsis or idx == ()


class Ref:
    """A mutable array reference (`kiln.new_ref`)."""
    __slots__ = ("_value", "memory_space", "kind", "_home")
    _kiln_mutable = True   # the specialiser lets `ref[idx] = v` and `ref[idx] += v` through

    def __init__(self, value, memory_space=None, kind=None, home=None):
        self._value = value
        self.memory_space = memory_space
        self.kind = kind
        self._home = home   # the builder whose traced value it holds; None: an eager Ref

    def _target(self):
        """The Ref that reads and writes act on: itself, or while a function is specialised
        the traced view of an eager Ref."""
        ref = self
        if self._home is None:
            if current() is None:
                return self
            staging = STAGING.active
            if staging is None:
                raise TypeError(self._kiln_not_traceable())
            ref = staging.view(self)
        if STAGING.probes:
            _leave_sibling(ref)
        return ref

    def _live(self):
        ref = self._target()
        if ref._value is None:
            raise ValueError("this Ref was invalidated by kiln.freeze or kiln.free_ref; make a "
                             "new one with kiln.new_ref")
        return ref._value

    def _store(self, value):
        ref = self._target()
        b = current()
        if ref._home is not None and b is not ref._home:
            probes = STAGING.probes
            if not probes or probes[-1] is None:
                raise CompileError(
                    "writing a Ref here is not supported: this code is specialised apart from "
                    "the code that made the Ref (a function transformed by grad, vmap, ... "
                    "inside the compiled function), and the new value would stay inside it",
                    b.info, "Write the Ref outside the transformed function: return the new "
                    "value from it and write ref[...] = new after it.")
            probes[-1].record(ref)   # a loop body or branch: ref_regions carries the Ref
            ref._home = b
        ref._value = value

    shape = property(lambda self: self._live().shape)
    dtype = property(lambda self: self._live().dtype)
    ndim = property(lambda self: self._live().ndim)
    size = property(lambda self: self._live().size)

    def __len__(self):
        return len(self._live())

    def __getitem__(self, idx):
        value = self._live()
        return value if _whole(idx) else value[idx]

    def __setitem__(self, idx, new):
        import kiln.numpy as jnp
        value = self._live()
        new = jnp.asarray(new)
        if new.dtype != value.dtype:
            raise ValueError(f"Invalid dtype for a Ref write: the Ref holds {value.dtype}, the "
                             f"value is {new.dtype}; convert it with .astype (as JAX, writes "
                             f"do not convert)")
        self._store(jnp.broadcast_to(new, value.shape) if _whole(idx)
                    else value.at[idx].set(new))

    def addupdate(self, x, idx=()):
        """`ref[idx] += x`."""
        value = self._live()
        self._store(value + x if _whole(idx) else value.at[idx].add(x))

    def __repr__(self):
        if self._home is not None:
            return f"Ref<traced {self._value!r}>"
        if self._value is None:
            return "Ref(<invalidated>)"
        return "Ref" + repr(self._value)[len("Array"):]

    def _kiln_not_traceable(self):
        return ("kiln.Ref inside a function transformed by grad, vmap or another transform "
                "outside kiln.jit: only kiln.jit reads and writes Refs made outside the "
                "function; pass its value `ref[...]` in, return the new value and write it "
                "with `ref[...] = new` after the call (or make the Ref inside the function)")


def _leave_sibling(ref):
    """Under a region probe (ref_regions), a Ref that a region written earlier moved into
    itself, used from another region (a loop's condition after its body, the next branch),
    takes back the value it had before."""
    b = current()
    for probe in reversed(STAGING.probes):
        saved = None if probe is None else probe.saved.get(id(ref))
        if saved is not None:
            home = b
            while home is not None and home is not ref._home:
                home = home.parent
            if home is None:
                ref._home, ref._value = saved[1], saved[2]
            return


def new_ref(init_val, *, memory_space=None, kind=None):
    """A Ref holding `init_val` (a copy: later writes do not change `init_val`). Inside a
    function being specialised, a traced Ref of that function."""
    b = current()
    if b is not None:
        import kiln.numpy as jnp
        return Ref(jnp.asarray(init_val), memory_space, kind, home=b)
    if is_traced(init_val):
        raise TypeError("kiln.new_ref of a traced value outside the function that traced it")
    return Ref(to_array(init_val, "new_ref"), memory_space, kind)


def empty_ref(ty, memory_space=None):
    """A Ref of zeros with `ty`'s shape and dtype (a ShapeDtypeStruct or an array)."""
    import kiln.numpy as jnp
    return new_ref(jnp.zeros(ty.shape, ty.dtype), memory_space=memory_space)


def _invalidate(ref, what):
    if ref._home is None and current() is not None:
        raise TypeError(f"kiln.{what} of a Ref made outside the function kiln compiles: "
                        f"call it after the call, outside the function")
    value = ref._live()
    ref._value = None
    return value


def freeze(ref):
    """The Ref's value; the Ref is invalid afterwards."""
    return _invalidate(ref, "freeze")


def free_ref(ref):
    """Invalidate the Ref."""
    _invalidate(ref, "free_ref")


__all__ = ["Ref", "new_ref", "empty_ref", "freeze", "free_ref", "ds", "Slice"]
