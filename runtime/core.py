"""`kiln.core`, as far as kiln has JAX's `jax.core`: `ShapedArray` (the abstract value of an
array: shape, dtype, weak type), `AbstractValue` (its base class), `Tracer` (the type of traced
values, for `isinstance`), `ensure_compile_time_eval`, and `eval_jaxpr`, which runs the SSA
form `make_jaxpr` gives (`closed.jaxpr` on `closed.consts`, as equinox's
`filter_closure_convert` does; `propagate_source_info` is accepted), and `trace_state_clean()`
(JAX's private `jax._src.core` function, which libraries call to ask whether a transformation
is tracing them: true outside kiln's specialisation of a function, false inside it). JAX's
trace classes and contexts have nothing to map to in kiln, which compiles source instead of
tracing (`kiln.extend.core.find_top_trace` gives the function being specialised,
`get_opaque_trace_state` the specialisation or eager context; docs/extend.md).

The names JAX 0.10.2 keeps under a deprecation warning that kiln has warn the same way
(`valid_jaxtype`, `primal_dtype_to_tangent_dtype`, `get_opaque_trace_state`); those JAX has
removed raise its AttributeError.
"""
import warnings

from .compiler.ir.abstract import AbstractValue, ShapedArray
from .tracer import Tracer
from .annotations import ensure_compile_time_eval
from .compiler.ir.builder import current as _current_builder

__all__ = ["AbstractValue", "ShapedArray", "Tracer", "ensure_compile_time_eval", "eval_jaxpr"]


def eval_jaxpr(jaxpr, consts, *args, propagate_source_info=True):
    """The outputs (a list) of `jaxpr`, the SSA form of a `make_jaxpr` result (`.jaxpr`), on
    `args` and the values it closes over, `consts` (`.consts`). While kiln specialises a
    function its equations are emitted into it; otherwise they run compiled."""
    from .compiler.ir.builder import current
    from .compiler.transforms.jvp import jvp_emit
    from .custom_derivatives import is_tracing
    jaxpr = getattr(jaxpr, "fn", jaxpr)   # make_jaxpr's Jaxpr: its SSA function
    inputs = [*args, *consts]
    if len(inputs) != len(jaxpr.invars):
        raise TypeError(f"eval_jaxpr: the jaxpr takes {len(jaxpr.invars)} inputs (arguments "
                        f"and consts), got {len(args)} arguments and {len(consts)} consts")
    if current() is None and not is_tracing(inputs):
        from .jit import jit
        return list(jit(lambda *xs: eval_jaxpr(jaxpr, (), *xs))(*inputs))
    outs, _ = jvp_emit(jaxpr, inputs, [None] * len(inputs))
    return list(outs)

_DEPRECATED = {
    "valid_jaxtype": "jax.core.valid_jaxtype is deprecated. Use jax.extend.core.valid_jaxtype.",
    "primal_dtype_to_tangent_dtype": "jax.core.primal_dtype_to_tangent_dtype is deprecated. "
                                     "Use jax.extend.core.primal_dtype_to_tangent_dtype.",
    "get_opaque_trace_state": "jax.core.get_opaque_trace_state is deprecated. Use "
                              "jax.extend.core.get_opaque_trace_state.",
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
