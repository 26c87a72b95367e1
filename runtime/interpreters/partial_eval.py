"""`kiln.interpreters.partial_eval`, as far as kiln has JAX's `jax.interpreters.partial_eval`:
`PartialVal` and `trace_to_jaxpr_nounits`, partial evaluation of a function some of whose
inputs are known now and the others only by their types.

`trace_to_jaxpr_nounits(fun, pvals)` calls the `WrappedFun` `fun` (kiln.extend.linear_util)
with the known values as they are and tracers of a fresh specialisation for the unknown
ones (a region of the function being specialised, when there is one). What the function
computes from known values alone is known: outside a specialisation its value is computed,
inside one it is emitted into the enclosing function, as JAX's partial evaluation hands it
to the enclosing trace. Each output comes back as `PartialVal.known(value)` or, where it
depends on an unknown input, `PartialVal.unknown(type)`. The first result is kiln's SSA
Function of the unknown part (JAX's is a jaxpr), taking the residuals (the third result,
known values it reads) then the unknown inputs. Flax computes `Module.lazy_init` and the
loop-invariant values of `nn.scan` this way.
"""
import numpy as np

from ..compiler.ir.builder import Builder, current
from ..compiler.ir.ssa import Literal, Var
from ..compiler.primitives.interpret import run_function
from ..compiler.primitives.rule_forms import replay_eqn
from ..compiler.transforms.partial_eval import split, unknown_values
from ..dispatch import _wrap_as
from ..tracer import Tracer

__all__ = ["PartialVal", "trace_to_jaxpr_nounits"]


class PartialVal(tuple):
    """`(aval, None)` for an unknown value of type `aval`, `(None, value)` for a known one."""

    def __new__(cls, xs):
        pv, const = xs
        return tuple.__new__(cls, (pv, const))

    @classmethod
    def known(cls, const):
        return cls((None, const))

    @classmethod
    def unknown(cls, aval):
        return cls((aval, None))

    def is_known(self):
        return self[0] is None

    def get_known(self):
        """The value, if known (else None)."""
        return self[1] if self[0] is None else None

    def get_aval(self):
        """The type: the unknown value's, or the known value's."""
        from ..api_util import shaped_abstractify
        return self[0] if self[0] is not None else shaped_abstractify(self[1])


def trace_to_jaxpr_nounits(fun, pvals, instantiate=False):
    """(the unknown part's SSA Function, one PartialVal per output, residual values); see
    the module docstring. `instantiate` (a bool, or one per output) makes known outputs
    unknown too."""
    outer = current()
    b = Builder("partial_eval") if outer is None else outer.child("partial_eval")
    with b:
        args = [pv.get_known() if pv.is_known() else b.new_input(pv.get_aval(), "unknown")
                for pv in pvals]
        outs = list(fun.call_wrapped(*args))
    n_unknown_in = len(b.invars)
    flags = instantiate if isinstance(instantiate, (list, tuple)) else [instantiate] * len(outs)
    traced = [isinstance(o, Tracer) and o.builder is b for o in outs]
    ours = [b.operand(o) if t or f else None for o, t, f in zip(outs, traced, flags)]
    everything = b.build([])
    unk = unknown_values(everything, [i < n_unknown_in
                                      for i in range(len(everything.invars))])[0]
    late = [v is not None and (f or (isinstance(v, Var) and v in unk))
            for v, f in zip(ours, flags)]
    early = [o for o, t, lt in zip(outs, traced, late) if t and not lt]
    fn = b.build(early + [o for o, lt in zip(outs, late) if lt])
    known, unknown_fn, n_res = split(fn, [True] * n_unknown_in + [False] * (
        len(fn.invars) - n_unknown_in), len(early))
    values = iter(_evaluate(known, b, outer))
    out_pvals = []
    for o, v, t, lt in zip(outs, ours, traced, late):
        if lt:
            out_pvals.append(PartialVal.unknown(v.aval))
        else:
            out_pvals.append(PartialVal.known(next(values) if t else o))
    residuals = list(values)
    assert len(residuals) == n_res
    return unknown_fn, out_pvals, residuals


def _evaluate(known, b, outer):
    """The outputs of `known` (inputs: what `b` captured, then its constants): computed now
    outside a specialisation, emitted into `outer` inside one."""
    inputs = [t for t, _ in b.captured.values()] + [x for _, _, x in (b.consts or ())]
    if outer is None:
        values = [value for _, value, _ in b.consts]
        out = run_function(known, *values)
        return [_wrap_as(x, v.aval) for x, v in zip(out, known.outvars)]
    env = {id(v): x for v, x in zip(known.invars, inputs)}

    def read(v):
        return env.get(id(v), v) if isinstance(v, Var) else v
    for eqn in known.eqns:
        for v, x in zip(eqn.outvars, replay_eqn(outer, eqn, [read(v) for v in eqn.invars])):
            env[id(v)] = x
    return [_wrap_as(np.asarray(v.value), v.aval) if isinstance(v, Literal) else read(v)
            for v in known.outvars]
