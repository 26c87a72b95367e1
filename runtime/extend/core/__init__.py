"""`kiln.extend.core`: user-defined primitives, as JAX's `jax.extend.core` has them.

`Primitive(name)` with `def_impl`, `def_abstract_eval` (or `def_effectful_abstract_eval`)
and `bind`; its JVP and transpose rules go in `kiln.interpreters.ad`, its batching rule in
`kiln.interpreters.batching`, its lowering in `kiln.interpreters.mlir`.

`bind` on concrete values calls the implementation. While kiln specialises a function (under
`jit`, `grad`, `jvp`, `vmap`, ...), `bind` calls the abstract evaluation rule, then emits one
`user_primitive` equation (compiler/primitives/user.py) whose region is the primitive's
definition: the function of an `mlir.lower_fun` lowering, specialised on the operands' types,
when there is one; else the implementation, called on the host with concrete values (a
`pure_callback` with the abstract evaluation's types), since JAX calls an implementation only
with concrete values (it may use NumPy). The transforms call the user's rules (the `_Rules` object below), which
the compiler reaches through the equation's `rules` token. `ClosedJaxpr` and `Jaxpr` are the
types of `make_jaxpr`'s result and of its `jaxpr` (kiln's SSA form laid out as a jaxpr), and
`find_top_trace` gives the function being specialised now (as JAX's gives the current trace),
and `get_opaque_trace_state` an `OpaqueTraceState` that tells the eager context and each
running specialisation apart (flax compares them to catch values leaking between scopes).
`Literal` is the type of the constant operands of kiln's SSA equations, `DebugInfo` that of
`kiln.api_util.debug_info`, and `primitives` names kiln's primitives as JAX's
`jax.extend.core.primitives` does. JAX's `Var` and tracing contexts are not here
(docs/extend.md).
"""
import functools
import weakref

import numpy as np

from ...compiler.ir.abstract import ShapedArray
from ...compiler.ir.builder import current, trace_region, close_regions
from ...compiler.ir.ssa import Literal
from ...compiler.primitives.user import user_primitive, user_rules
from ...compiler.primitives.rule_forms import has_tangent
from ...custom_derivatives import value_aval as _aval, is_tracing as _tracing
from ...interpreters import ad, batching
from ...introspection import ClosedJaxpr, Jaxpr

from ..linear_util import DebugInfo
from . import primitives  # noqa: F401

__all__ = ["ClosedJaxpr", "Jaxpr", "OpaqueTraceState", "Primitive", "find_top_trace",
           "get_opaque_trace_state", "Literal", "DebugInfo", "primitives", "mapped_aval",
           "unmapped_aval", "primal_dtype_to_tangent_dtype",
           "valid_jaxtype"]


class Primitive:
    """A primitive operation defined by the user's rules (see the module docstring)."""
    multiple_results = False
    call_primitive = False
    map_primitive = False

    def __init__(self, name):
        self.name = name
        self._lowerings = {}    # platform (None: all) -> rule (kiln.interpreters.mlir)
        self._rules = user_rules(_Rules(self))

    def __repr__(self):
        return self.name

    def def_impl(self, impl):
        """Set the implementation, `impl(*args, **params)`, called on concrete values."""
        self.impl = impl
        return impl

    def def_abstract_eval(self, abstract_eval):
        """Set the abstract evaluation rule, `abstract_eval(*avals, **params)` -> the result's
        ShapedArray (a sequence of them with `multiple_results`)."""
        self.abstract_eval = abstract_eval
        return abstract_eval

    def def_effectful_abstract_eval(self, effectful_abstract_eval):
        """Set an abstract evaluation rule that returns (types, effects); kiln keeps the
        types (a user primitive's effects are not tracked)."""
        def abstract_eval(*avals, **params):
            return effectful_abstract_eval(*avals, **params)[0]
        self.abstract_eval = abstract_eval
        return effectful_abstract_eval

    def impl(self, *args, **params):
        raise NotImplementedError(f"Evaluation rule for '{self.name}' not implemented")

    def abstract_eval(self, *args, **params):
        raise NotImplementedError(f"Abstract evaluation for '{self.name}' not implemented")

    def bind(self, *args, **params):
        """Apply the primitive: its implementation on concrete values, an equation of the
        function being specialised on traced ones."""
        if not _tracing(args):
            return self.impl(*args, **params)
        return _stage(self, args, params)

    def _definition(self, params, out_avals):
        """(the function compiled uses of the primitive run, whether it runs on the host):
        the function of an `mlir.lower_fun` lowering, staged into the caller; an FFI call of
        the target of a `kiln.ffi.ffi_lowering` rule, with the abstract evaluation's result
        types; else the implementation, called on the host with concrete values (as JAX
        promises it is)."""
        from ...ffi import FfiLowering
        from ...interpreters.mlir import _LoweredFunction
        from ...interpreters.xla import apply_primitive
        from ...introspection import ShapeDtypeStruct
        for rule in self._lowerings.values():
            if isinstance(rule, FfiLowering):
                specs = [ShapeDtypeStruct(a.shape, a.dtype) for a in out_avals]
                return (lambda *args: list(rule.call(args, specs, **params))), False
            if isinstance(rule, _LoweredFunction):
                fun = functools.partial(rule.fun, **params)
                if rule.multiple_results:
                    return fun, False
                return (lambda *args: [fun(*args)]), False
        impl = self.impl
        if isinstance(impl, functools.partial) and impl.func is apply_primitive:
            raise NotImplementedError(
                f"primitive '{self.name}' is implemented by xla.apply_primitive, which runs "
                "its MLIR lowering; kiln can not run MLIR lowering rules. Register the "
                "lowering with mlir.lower_fun(f) (f a function over kiln.lax / kiln.numpy), "
                "or give def_impl a function over kiln or NumPy operations.")
        impl = functools.partial(impl, **params)
        if self.multiple_results:
            return impl, True
        return (lambda *args: [impl(*args)]), True


def _shaped(aval, prim):
    if not (hasattr(aval, "shape") and hasattr(aval, "dtype")):
        raise TypeError(f"the abstract evaluation rule of primitive '{prim.name}' returned "
                        f"{aval!r}; it should return a ShapedArray (kiln.core.ShapedArray)")
    return ShapedArray(aval.shape, aval.dtype, getattr(aval, "weak_type", False))


def _fit(x, aval, prim):
    """A result of the primitive's definition, checked against its abstract evaluation."""
    from ... import lax
    a = _aval(x)
    if a.shape != aval.shape:
        raise TypeError(f"primitive '{prim.name}': its definition returned a result of "
                        f"shape {a.shape} where its abstract evaluation rule says "
                        f"{aval.str_short()}")
    if a.dtype != aval.dtype or a.weak_type != aval.weak_type:
        x = lax.convert_element_type(x, aval.dtype)
    return x


def _host(impl, out_avals):
    """The implementation as a host callback: results of the abstract evaluation's types."""
    def call(*args):
        outs = impl(*args)
        return [np.asarray(o, a.dtype) for o, a in zip(outs, out_avals)]
    return call


def _stage(prim, args, params):
    from ...callbacks import pure_callback
    from ...introspection import ShapeDtypeStruct
    b = current()
    in_avals = [_aval(x) for x in args]
    out = prim.abstract_eval(*in_avals, **params)
    out_avals = [_shaped(a, prim) for a in (out if prim.multiple_results else [out])]
    define, on_host = prim._definition(params, out_avals)

    def staged(inputs):
        return [_fit(o, a, prim) for o, a in zip(define(*inputs), out_avals)]

    def host(inputs):
        specs = [ShapeDtypeStruct(a.shape, a.dtype) for a in out_avals]
        outs = pure_callback(_host(define, out_avals), specs, *inputs)
        return [_fit(o, a, prim) for o, a in zip(outs, out_avals)]
    region = trace_region(b, prim.name, host if on_host else staged, in_avals)
    (fn,), outer = close_regions([region])
    outs = b.bind(user_primitive, list(outer) + list(args),
                  dict(call=fn, rules=prim._rules, name=prim.name, num_consts=len(outer),
                       params=tuple(sorted(params.items()))))
    return list(outs) if prim.multiple_results else outs[0]


def _value(x):
    """An operand of an equation as the user's rules see it."""
    return x.value if isinstance(x, Literal) else x


def _results(out, prim, what):
    """A rule's result(s) as a list."""
    if prim.multiple_results:
        if not isinstance(out, (list, tuple)):
            raise TypeError(f"the {what} rule of primitive '{prim.name}' (which has multiple "
                            f"results) returned {type(out).__name__}, not a list or tuple")
        return list(out)
    return [out]


def _symbolic(x):
    """None for a Zero tangent or cotangent (kiln's zero), the value otherwise."""
    return None if x is None or type(x) is ad.Zero else x


class _Rules:
    """The user's rules of one primitive, in the forms `user_primitive`'s rules call
    (compiler/primitives/user.py); the first `num_consts` operands are values the definition
    captured, which the user's rules do not see."""

    def __init__(self, prim):
        self.prim = prim

    def jvp(self, primals, tangents, *, num_consts, params):
        prim = self.prim
        rule = ad.primitive_jvps.get(prim)
        if rule is None:
            raise NotImplementedError(f"Differentiation rule for '{prim.name}' not "
                                      "implemented")
        args = [_value(x) for x in primals[num_consts:]]
        ts = [ad.Zero(_aval(x).strong()) if t is None else t
              for x, t in zip(args, tangents[num_consts:])]
        out = rule(tuple(args), tuple(ts), **dict(params))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"the JVP rule of primitive '{prim.name}' must return a pair "
                            f"(primal_out, tangent_out), got {type(out).__name__}")
        outs = _results(out[0], prim, "JVP")
        touts = [_symbolic(t) for t in _results(out[1], prim, "JVP")]
        return outs, touts

    def transpose(self, cts, primals, outs, linear, *, num_consts, params):
        prim = self.prim
        rule = ad.primitive_transposes.get(prim)
        if rule is None:
            raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) "
                                      f"for '{prim.name}' not implemented")
        args = [ad.UndefinedPrimal(_aval(x).strong()) if lin else _value(x)
                for x, lin in zip(primals[num_consts:], linear[num_consts:])]
        cts = [ad.Zero(_aval(o)) if c is None else c for c, o in zip(cts, outs)]
        out = rule(cts if prim.multiple_results else cts[0], *args, **dict(params))
        if not isinstance(out, (list, tuple)) or len(out) != len(args):
            raise TypeError(f"the transpose rule of primitive '{prim.name}' must return one "
                            f"cotangent (or None) per operand, {len(args)} of them; got "
                            f"{out!r}")
        return [None] * num_consts + [_symbolic(c) if lin else None
                                      for c, lin in zip(out, linear[num_consts:])]

    def batch(self, args, dims, *, num_consts, params):
        prim = self.prim
        rule = batching.primitive_batchers.get(prim)
        if rule is None:
            raise NotImplementedError(f"Batching rule for '{prim.name}' not implemented")
        out, out_dims = rule(tuple(_value(x) for x in args[num_consts:]),
                             tuple(dims[num_consts:]), **dict(params))
        if prim.multiple_results:
            return _results(out, prim, "batching"), list(out_dims)
        return [out], [out_dims]


def find_top_trace(xs):
    """The trace being built now, as JAX 0.10.2's (which also ignores `xs`): a
    `kiln.tracer.Trace` whose `main` is the builder of the function kiln is specialising, or
    None outside one. A traced value `x` of that function has `x._trace.main` the same."""
    from ...tracer import Trace
    return Trace(current())


def mapped_aval(size, axis, aval):
    """`aval` without its axis `axis` (of size `size`): one example's type."""
    if axis is None:
        return aval
    if aval.shape[axis] != size:
        raise ValueError(f"mapped_aval: axis {axis} of {aval} has size {aval.shape[axis]}, "
                         f"not {size}")
    return aval.update(shape=aval.shape[:axis] + aval.shape[axis + 1:])


def unmapped_aval(size, axis, aval, explicit_mesh_axis=None):
    """`aval` with a new axis `axis` of size `size`: the batched type."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])


def primal_dtype_to_tangent_dtype(primal_dtype):
    """The dtype of tangents of values of `primal_dtype` (float0 for integers and bools)."""
    from ...dtypes import float0
    dtype = np.dtype(primal_dtype)
    return dtype if has_tangent(ShapedArray((), dtype)) else float0


def valid_jaxtype(x):
    """Whether `x` is a value kiln can compute with (an array, a NumPy or Python scalar)."""
    try:
        _aval(x)
    except (TypeError, ValueError):
        return False
    return True


class OpaqueTraceState:
    """Which specialisation is running: equal for two states taken while the same one runs
    (or both outside any), unequal otherwise (a `jit`, `grad`, `vmap`, a control-flow body
    or a partial evaluation each specialise in a builder of their own)."""
    __hash__ = None   # compared, not hashed, as JAX's

    def __init__(self, builder_ref):
        self._builder_ref = builder_ref

    def __eq__(self, other):
        return isinstance(other, OpaqueTraceState) and other._builder_ref == self._builder_ref

    def __repr__(self):
        b = self._builder_ref() if self._builder_ref is not None else None
        return "OpaqueTraceState(eager)" if self._builder_ref is None else \
            f"OpaqueTraceState({b.name if b is not None else 'finished'})"


def get_opaque_trace_state(convention=None):
    """The OpaqueTraceState of this moment: the innermost specialisation running in this
    thread (a weak reference to its builder), or none (eager)."""
    del convention
    b = current()
    return OpaqueTraceState(None if b is None else weakref.ref(b))


def __dir__():
    return sorted(__all__)
