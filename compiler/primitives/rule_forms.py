"""Derivative rules in the form they read best, adapted to the tables' one signature.

Most primitives' derivatives are a few lines of math over their operands and result:

    f(primals, tangents, out, **params) -> tangent(s)     `tangent_rule(f)` makes the JVP rule
    f(ct, primals, out, **params) -> operand cotangents   `cotangent_rule(f)` makes the VJP rule

(`out`, `ct` and the returned tangents are lists for multiple-result primitives). The JVP
rule replays the equation, then emits the tangents, dropping those of results that carry
none and naming the rest after their primal (`y_dot`); the VJP rule ignores the residuals,
which only control flow's forward rules produce.

Also here, because rules and transforms both need them: `replay_eqn` (one equation emitted
again) and `name_result` (derivative values named after their primal), `has_tangent`, and
`tangent_pattern`, the static analysis that control flow's JVP rules run on their regions.
"""
from ..ir.builder import current
from ..ir.ssa import Var


def has_tangent(aval):
    """Whether values of this type carry derivatives (inexact numbers and reverse mode's
    tapes; never integers or booleans: JAX's float0)."""
    return aval.dtype.kind in "fcO"


def replay_eqn(b, eqn, ins):
    """Emit `eqn` on the operands `ins` into builder `b`; its results as a list.

    When the operands are the equation's own variables (a transform replaying the function it
    was given, in the same name space), the equation itself is reused, so the derivative's
    forward section keeps the user's names (`h = tanh(t)`); otherwise the results are named
    after the originals (`h_1`)."""
    if b.claim(eqn, ins):
        return [b.tracer(v) for v in eqn.outvars]
    with b.naming(eqn.outvars[0].name if eqn.outvars else "t"):
        outs = b.bind(eqn.prim, ins, eqn.params)
    return list(outs) if eqn.prim.multiple_results else [outs]


def name_result(b, start, value, name):
    """Rename `value` to (a fresh variant of) `name` if it is the result of an equation that
    the builder `b` received at index `start` or later: derivative code then reads `y_dot`
    and `x_bar` where the value is the tangent of `y` or the cotangent of `x`."""
    var = getattr(value, "var", None)
    if var is None or getattr(value, "builder", None) is not b:
        return
    for eqn in b.eqns[start:]:
        if any(o is var for o in eqn.outvars):
            var.name = b.names.fresh(name)
            return


def tangent_rule(f):
    """The JVP rule `(eqn, primals, tangents) -> (outs, out_tangents)` of the math-form `f`."""
    def jvp(eqn, primals, tangents):
        b = current()
        multiple = eqn.prim.multiple_results
        outs = replay_eqn(b, eqn, primals)
        start = len(b.eqns)
        touts = f(primals, tangents, outs if multiple else outs[0], **eqn.params)
        touts = list(touts) if multiple else [touts]
        touts = [t if t is not None and has_tangent(v.aval) else None
                 for t, v in zip(touts, eqn.outvars)]
        for v, t in zip(eqn.outvars, touts):
            name_result(b, start, t, v.name + "_dot")
        return outs, touts
    jvp.__name__ = getattr(f, "__name__", "jvp")
    return jvp


def cotangent_rule(f):
    """The VJP rule `(ct, primals, out, residuals, **params)` of the math-form `f`."""
    def vjp(ct, primals, out, residuals, **params):
        return f(ct, primals, out, **params)
    vjp.__name__ = getattr(f, "__name__", "vjp")
    return vjp


def active_values(fn, nonzero):
    """The variables of `fn` (its inputs and its top-level equations' results) that get a
    non-zero tangent when the inputs flagged in `nonzero` have one (a conservative static
    propagation; control flow counts as one equation)."""
    live = {v for v, nz in zip(fn.invars, nonzero) if nz and has_tangent(v.aval)}
    for eqn in fn.eqns:
        if eqn.prim.zero_derivative:
            continue
        if any(isinstance(v, Var) and v in live for v in eqn.invars):
            live.update(v for v in eqn.outvars if has_tangent(v.aval))
    return live


def tangent_pattern(fn, nonzero):
    """Which outputs of `fn` get a non-zero tangent when the inputs flagged in `nonzero` have
    one (`active_values`)."""
    live = active_values(fn, nonzero)
    return [isinstance(v, Var) and v in live for v in fn.outvars]
