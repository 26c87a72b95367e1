"""`kiln.stages`: the types of JAX's ahead-of-time stages, for annotations and `isinstance`:
`Traced` (`jit(f).trace(...)`), `Lowered` (`.lower(...)`), `Compiled` (`.compile()`) are
kiln's classes (runtime/jit.py); `Wrapped` is the protocol a jitted function meets (callable,
with `trace` and `lower`); `CompilerOptions` is JAX's alias for a dict of option names to
strings or bools; `ArgInfo` describes an argument of a lowered function (its type and whether
it is donated), as JAX's."""
import dataclasses
import typing

from .jit import Compiled, Lowered, Traced

__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Traced", "Wrapped"]

CompilerOptions = dict[str, typing.Union[str, bool]]


@typing.runtime_checkable
class Wrapped(typing.Protocol):
    """A function `jit` made: callable, with `trace(*args)` and `lower(*args)`."""

    def __call__(self, *args, **kwargs): ...

    def trace(self, *args, **kwargs): ...

    def lower(self, *args, **kwargs): ...


@dataclasses.dataclass(frozen=True)
class ArgInfo:
    """An argument of a lowered function: `_aval` its type, `donated` whether its buffer may be
    reused for a result; `shape` and `dtype` are the type's."""
    _aval: typing.Any
    donated: bool

    @property
    def shape(self):
        return self._aval.shape

    @property
    def dtype(self):
        return self._aval.dtype
