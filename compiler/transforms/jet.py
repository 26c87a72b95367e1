"""Taylor-mode differentiation (`kiln.experimental.jet`) as a transform of the SSA form.

`jet_emit(fn, primals, series)` replays `fn` into the current builder and, next to every
equation whose operands carry Taylor coefficients, emits its primitive's rule from the `JET`
table (rules in `compiler/primitives/taylor.py`, signature in `core.py`): the result is SSA
that computes the primal outputs and the coefficients x_1..x_K of each (not scaled by
factorials; the API scales).

A series is a list of K coefficients, or None for a value that has none (zero): an equation
whose operands have none is replayed unchanged, as are primitives marked `zero_derivative`.
Before a rule runs, missing series are made zeros (the rules read full lists, as JAX's do). A
primitive without a rule is a CompileError naming it and the user's line. The coefficients
of `y` are named `y_t1`, `y_t2`, ...
"""
from ..errors import CompileError
from ..ir.builder import current
from ..primitives import emit as E, regions
from ..primitives.core import JET
from ..primitives.rule_forms import replay_eqn
from .replay import replay_annotated


_CONTROL = {"cond": "a Python `if` on traced values or lax.cond",
            "while_loop": "a Python `while` on traced values or lax.while_loop",
            "scan": "a Python `for` loop over a range, lax.fori_loop or lax.scan"}


def no_rule_error(eqn):
    name = eqn.prim.name
    what = f" ({_CONTROL[name]} compiles to it)" if name in _CONTROL else ""
    return CompileError(
        f"kiln.experimental.jet has no Taylor rule for the primitive {name!r}{what}; JAX's "
        f"jet has none either", eqn.info,
        "jet covers elementwise arithmetic, exp/log/sin/cos/tanh/logistic/pow/sqrt/erf and "
        "friends, dot_general, reductions, shape operations, select (jnp.where), cumulative "
        "sums, products and extrema, and the zero-derivative operations; use kiln.jvp "
        "repeatedly for this function, or kiln.lax.stop_gradient where it needs no series.")


def jet_eqn(eqn, ins, series):
    """Emit one equation and its series; returns (outs, out_series)."""
    if all(s is None for s in series) or eqn.prim.zero_derivative:
        outs = replay_eqn(current(), eqn, ins)
        return outs, [None] * len(outs)
    rule = JET.get(eqn.prim)
    if rule is None:
        raise no_rule_error(eqn)
    order = len(next(s for s in series if s is not None))
    full = [[E.zeros_like(x) for _ in range(order)] if s is None else s
            for x, s in zip(ins, series)]
    return rule(eqn, ins, full)


def jet_emit(fn, primals, series):
    """Emit `fn`'s primal and Taylor computation into the current builder.

    `primals` are the values of `fn.invars`; `series` are aligned, each a list of K
    coefficients or None. Returns (primal outputs, their series or None)."""
    return replay_annotated(fn, primals, list(series), jet_eqn)


regions.provide("jet", jet_emit)
