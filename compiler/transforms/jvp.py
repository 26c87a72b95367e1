"""Forward-mode differentiation (JVP) as a transform of the SSA form.

`jvp_emit(fn, primals, tangents)` replays `fn` into the current builder and, next to every
equation whose operands carry tangents, emits that primitive's JVP rule: the result is SSA that
computes the primal outputs and their tangents, in the exact form

    ...                           # each primal equation, with its tangent equations after it

(the API wraps it into a function of the primals and tangents returning both results).

Tangents are symbolic: `None` is a zero tangent and costs nothing; integer and boolean values
never carry tangents (JAX's float0). Each primitive's rule is in the `JVP` table, with the one
signature documented in `compiler/primitives/core.py`; primitives marked `zero_derivative`
give zero tangents; control flow (cond, while_loop, scan) transforms its regions with this
same function. Tangent names derive from the
primal's: the tangent of `y` is `y_dot`.
"""
from ..errors import CompileError
from ..ir.builder import current
from ..primitives.core import JVP
from ..primitives.rule_forms import has_tangent, replay_eqn
from ..primitives import regions
from ..primitives.autodiff import CLOSED_OVER, check_closed_over
from .replay import replay_annotated


def no_rule_error(eqn, rule):
    """A primitive reached a transform without the rule it needs: name it and the user line."""
    return CompileError(f"kiln cannot differentiate the primitive {eqn.prim.name!r}: it has "
                        f"no {rule} rule", eqn.info,
                        "Wrap the computation in kiln.lax.stop_gradient if it needs no "
                        "derivative, or give it a rule with kiln.custom_jvp / kiln.custom_vjp.")


def jvp_eqn(eqn, ins, tins):
    """Emit one equation and its tangent; returns (outs list, tangent list)."""
    prim = eqn.prim
    if all(t is None for t in tins) or prim.zero_derivative:
        outs = replay_eqn(current(), eqn, ins)
        return outs, [None] * len(outs)
    if prim in CLOSED_OVER:
        check_closed_over(eqn, [t is not None for t in tins])
    rule = JVP.get(prim)
    if rule is None:
        raise no_rule_error(eqn, "JVP")
    return rule(eqn, ins, tins)


def jvp_emit(fn, primals, tangents):
    """Emit `fn`'s primal and tangent computation into the current builder.

    `primals` are the values of `fn.invars` (tracers, Literals or static values); `tangents`
    are aligned, `None` for zero. Returns (primal outputs, tangent outputs or None)."""
    tangents = [t if t is not None and has_tangent(v.aval) else None
                for v, t in zip(fn.invars, tangents)]
    return replay_annotated(fn, primals, tangents, jvp_eqn)


regions.provide("jvp", jvp_emit)
