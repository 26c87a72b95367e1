"""`kiln.core`, as far as kiln has JAX's `jax.core`: `ShapedArray` (the abstract value of an
array: shape, dtype, weak type), `Tracer` (the type of traced values, for `isinstance`) and
`ensure_compile_time_eval`, and `trace_state_clean()` (JAX's private `jax._src.core` function,
which libraries call to ask whether a transformation is tracing them: true outside kiln's
specialisation of a function, false inside it). JAX's jaxpr machinery (`Trace`, `Jaxpr`, `eval_jaxpr`, ...) has
nothing to map to in kiln, which compiles source instead of tracing (docs/extend.md).

The names JAX 0.10.2 keeps under a deprecation warning that kiln has warn the same way
(`valid_jaxtype`, `primal_dtype_to_tangent_dtype`); those JAX has removed raise its
AttributeError.
"""
import warnings

from .compiler.ir.abstract import ShapedArray
from .tracer import Tracer
from .annotations import ensure_compile_time_eval
from .compiler.ir.builder import current as _current_builder

__all__ = ["ShapedArray", "Tracer", "ensure_compile_time_eval"]

_DEPRECATED = {
    "valid_jaxtype": "jax.core.valid_jaxtype is deprecated. Use jax.extend.core.valid_jaxtype.",
    "primal_dtype_to_tangent_dtype": "jax.core.primal_dtype_to_tangent_dtype is deprecated. "
                                     "Use jax.extend.core.primal_dtype_to_tangent_dtype.",
}
_REMOVED = {
    "get_aval": "jax.core.get_aval was deprecated in JAX v0.8.2 and removed in JAX v0.10.0; "
                "use jax.typeof instead.",
    **{name: f"jax.core.{name} was deprecated in JAX v0.8.2 and removed in JAX v0.10.0. Use "
             f"jax.extend.core.{name}." for name in ("mapped_aval", "unmapped_aval")},
}


def trace_state_clean():
    """Whether no function is being specialised (by `jit`, `grad`, `vmap`, a control-flow
    body, ...) here, as JAX's `jax._src.core.trace_state_clean` says whether nothing traces."""
    return _current_builder() is None


def __getattr__(name):
    if name in _DEPRECATED:
        warnings.warn(_DEPRECATED[name].replace("jax.", "kiln."), DeprecationWarning,
                      stacklevel=2)
        from .extend import core
        return getattr(core, name)
    if name in _REMOVED:
        raise AttributeError(_REMOVED[name].replace("jax.", "kiln."))
    raise AttributeError(f"module 'kiln.core' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
