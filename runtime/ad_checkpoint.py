"""`kiln.ad_checkpoint` (JAX's `jax.ad_checkpoint`): `checkpoint`/`remat`, the
`checkpoint_policies`, `checkpoint_name`, the policy answers `Saveable`, `Recompute` and
`Offloadable`, and `print_saved_residuals`.

`checkpoint_name(x, name)` returns `x` (every leaf of a pytree) with its value unchanged;
while kiln specialises, each leaf goes through the `name` primitive (the identity, carrying
`name`), which is what the policies `save_only_these_names` and `save_any_names_but_these`
look for. `print_saved_residuals(f, *args)` prints what kiln's reverse mode of `f` keeps from
the forward pass for the backward one, one line per value, as JAX's does: its type and where
it comes from (an argument, the primitive and source line that computes it, or, for a value
that a `checkpoint` policy saves because of its name, `named '<name>'` and the line of the
`checkpoint_name`). kiln's list is its own: kiln differentiates the source and simplifies the
result, so it keeps other values than JAX's tracer does.
"""
import collections

from . import checkpoint_policies
from .ad import saved_residuals
from .custom_derivatives import checkpoint, remat
from .tree_util import tree_map
from .dispatch import bind, is_traced
from .compiler.primitives import PRIMITIVES

__all__ = ["checkpoint", "remat", "checkpoint_policies", "checkpoint_name",
           "print_saved_residuals", "saved_residuals", "Saveable", "Recompute", "Offloadable"]


class _PolicyAnswer:
    """What a policy may return for a value: save it or recompute it."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return self._name

    def __bool__(self):
        return self._name == "Saveable"   # what `checkpoint` does with the answer: save it


Saveable = _PolicyAnswer("Saveable")
Recompute = _PolicyAnswer("Recompute")
Offloadable = collections.namedtuple("Offloadable", ["src", "dst"])


def checkpoint_name(x, name):
    """`x` unchanged, every leaf tagged with `name` for a policy (the `name` primitive)."""
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name's name must be a string, got {name!r}")
    return tree_map(lambda leaf: bind(PRIMITIVES["name"], leaf, name=name)
                    if is_traced(leaf) else leaf, x)


def print_saved_residuals(f, *args, **kwargs):
    """Print each value kiln's reverse mode of `f` saves at these arguments, with its type."""
    for aval, where in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {where}")
