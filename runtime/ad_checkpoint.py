"""`kiln.ad_checkpoint` (JAX's `jax.ad_checkpoint`): `checkpoint`/`remat`, the
`checkpoint_policies`, `checkpoint_name`, the policy answers `Saveable`, `Recompute` and
`Offloadable`, and `print_saved_residuals`.

`checkpoint_name(x, name)` returns `x` (every leaf of a pytree) unchanged: kiln's
`checkpoint` recomputes everything but the checkpointed function's arguments whatever the
policy says (docs/differences.md), so a name changes nothing. `print_saved_residuals(f,
*args)` prints what kiln's reverse mode of `f` keeps from the forward pass for the backward
one, one line per value, as JAX's does: its type and where it comes from (an argument, or the
primitive and source line that computes it). kiln's list is its own: kiln differentiates the
source and simplifies the result, so it keeps other values than JAX's tracer does.
"""
import collections

from . import checkpoint_policies
from .ad import saved_residuals
from .custom_derivatives import checkpoint, remat
from .tree_util import tree_map

__all__ = ["checkpoint", "remat", "checkpoint_policies", "checkpoint_name",
           "print_saved_residuals", "saved_residuals", "Saveable", "Recompute", "Offloadable"]


class _PolicyAnswer:
    """What a policy may return for a value: save it or recompute it."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return self._name


Saveable = _PolicyAnswer("Saveable")
Recompute = _PolicyAnswer("Recompute")
Offloadable = collections.namedtuple("Offloadable", ["src", "dst"])


def checkpoint_name(x, name):
    """`x` unchanged, every leaf tagged with `name` for a policy (a no-op in kiln)."""
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name's name must be a string, got {name!r}")
    return tree_map(lambda leaf: leaf, x)


def print_saved_residuals(f, *args, **kwargs):
    """Print each value kiln's reverse mode of `f` saves at these arguments, with its type."""
    for aval, where in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {where}")
