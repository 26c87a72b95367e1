"""`kiln.interpreters.mlir`: `register_lowering` and `lower_fun`, as JAX's
`jax.interpreters.mlir` has them, for user-defined primitives.

kiln compiles its own SSA form, not MLIR built through JAX's Python bindings, so a lowering
rule that builds MLIR operations (`hlo.AddOp(...)`, a custom call) can not run on kiln's
backends. `register_lowering` records the rule; a compiled function runs the primitive's
definition instead: the function given to `lower_fun` when the rule was made by it (JAX's
rule traced from a function over `lax`), an FFI call of the target when the rule was made by
`kiln.ffi.ffi_lowering` (docs/ffi.md), else the primitive's implementation (`def_impl`).
See docs/extend.md."""

__all__ = ["register_lowering", "lower_fun"]


class _LoweredFunction:
    """The lowering rule `lower_fun(fun, multiple_results)` makes: kiln runs `fun`."""

    def __init__(self, fun, multiple_results):
        self.fun = fun
        self.multiple_results = multiple_results

    def __repr__(self):
        return f"lower_fun({getattr(self.fun, '__name__', self.fun)!r})"


def lower_fun(fun, multiple_results=True):
    """The lowering rule of a primitive defined by `fun` (a function over kiln's operations,
    taking the operands and the primitive's parameters and returning a list of results, or
    one result when `multiple_results` is False)."""
    return _LoweredFunction(fun, multiple_results)


def register_lowering(prim, rule, platform=None, inline=True, cacheable=True):
    """Record `rule` as `prim`'s lowering for `platform` (None: every platform). A rule made
    by `lower_fun` or `kiln.ffi.ffi_lowering` defines the primitive in compiled code; any
    other rule is recorded only (kiln runs the primitive's implementation)."""
    if not (callable(rule) or isinstance(rule, _LoweredFunction)):
        raise TypeError(f"mlir.register_lowering: the rule for {prim} is not callable: "
                        f"{rule!r}")
    prim._lowerings[platform] = rule


def __dir__():
    return sorted(__all__)
