"""`kiln.ref`: JAX's `jax.ref` module, the functional spelling of a mutable array reference's
reads and writes (runtime/refs.py has the references themselves). `get(ref, idx)` is
`ref[idx]`, `set(ref, idx, value)` is `ref[idx] = value`, `swap(ref, idx, value)` writes and
returns the value it replaced, `addupdate(ref, idx, x)` adds `x` in place; `idx=None` is the
whole value (`...`). They run eagerly and inside compiled functions, in program order, as the
indexing they stand for. JAX's `AbstractRef` (the type `jax.typeof` gives a Ref) is not here:
`kiln.typeof(ref)` is the type of the value it holds (docs/differences.md)."""
from .refs import Ref, empty_ref, free_ref, freeze, new_ref

__all__ = ["Ref", "addupdate", "empty_ref", "free_ref", "freeze", "get", "new_ref", "set",
           "swap"]


def _index(idx):
    return ... if idx is None else idx


def get(ref, idx=None):
    """`ref[idx]` (the whole value for None)."""
    return ref[_index(idx)]


def set(ref, idx, value):   # noqa: A001  (JAX's name)
    """`ref[idx] = value`."""
    ref[_index(idx)] = value


def swap(ref, idx, value, _function_name="ref_swap"):
    """Write `value` at `idx` and return what was there."""
    index = _index(idx)
    old = ref[index]
    ref[index] = value
    return old


def addupdate(ref, idx, x):
    """`ref[idx] += x`, in place."""
    ref.addupdate(x, () if idx is None else idx)
