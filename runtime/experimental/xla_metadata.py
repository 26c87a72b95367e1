"""`kiln.experimental.xla_metadata`: JAX's `set_xla_metadata(x=None, **kwargs)`.

JAX attaches the keyword arguments, as strings, to StableHLO operations as their
`mhlo.frontend_attributes`, hints for XLA's passes: to every operation made inside the
`with` block or the decorated function, or, given `x` (a pytree), to the operations that
produce its leaves. kiln accepts all three forms and computes the same values, eagerly and
under `jit`, `grad` and `vmap`; its SSA statements carry no such attributes, so kiln's
StableHLO (the pjrt backend's `lower(...).as_text()`) does not show them (docs/compat.md)."""
import contextlib

__all__ = ["set_xla_metadata"]


class _Annotated(contextlib.ContextDecorator):
    """The `with` block and decorator form: the code inside runs as it is."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def set_xla_metadata(x=None, **kwargs):
    """Given `x`, `x` itself; otherwise a context manager, usable as a decorator, for the
    operations inside."""
    return _Annotated() if x is None else x
