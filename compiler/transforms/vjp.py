"""Reverse-mode differentiation (VJP) by adjoint code generation on the SSA form (Tangent's
model): the output is straight SSA with a forward section followed by a backward section.

`vjp_emit(fn, primals, cts, active)` emits into the current builder

    ...                      # forward: every equation of fn, replayed (names kept)
    ...                      # backward: for each active equation, last to first, its VJP
                             # rule, reading forward values as residuals; cotangents of
                             # values used more than once are summed
and returns (primal outputs, cotangents of fn's inputs). The cotangent of `y` is named `y_bar`.

Activity analysis keeps the backward section small: a value is *active* when it depends on a
differentiated input through primitives that have a derivative; only active equations get an
adjoint, and only active values receive cotangents. Integer and boolean values are never active
(JAX's float0).

Rules are in the `VJP` table, with the one signature documented in
`compiler/primitives/core.py`: `vjp(ct, primals, outs, residuals, **params)` returns a list of
cotangents aligned with the operands (`None` for none). Control flow needs values from inside
its regions in the backward section, so its forward section is its `VJP_FORWARD` rule,
`vjp_forward(eqn, ins, active) -> (outs, residuals)` (`active` flags the differentiated
operands) (a `while_loop` that also records its carries on
a tape, a `scan` that also stacks its carries); other equations are replayed as they are, with
no residuals.
"""
from ..ir.ssa import Var
from ..ir.builder import current
from ..primitives.core import VJP, VJP_FORWARD
from ..primitives.rule_forms import has_tangent, name_result, replay_eqn
from ..primitives import emit, regions
from ..primitives.autodiff import CLOSED_OVER, check_closed_over
from .jvp import no_rule_error
from .replay import read


def _replay_forward(eqn, ins, active):
    """The forward section of an equation without a `vjp_forward` rule: itself."""
    return replay_eqn(current(), eqn, ins), None


class ForwardState:
    """What the backward section needs from the forward one."""
    __slots__ = ("fn", "outs", "active", "tape", "act")


def vjp_forward(fn, primals, active, reads=None):
    """Emit the forward section of `fn` into the current builder: `fn`'s equations replayed,
    control flow in its recording form where it is active. `active` flags the inputs being
    differentiated. `reads` maps results of `fn`'s equations to values already computed (a
    checkpoint's saved values): an equation all of whose results are there is not replayed,
    its results are read from there (its VJP rule still runs in the backward section).
    Returns the state `vjp_backward` continues from (`state.outs` are the primal outputs)."""
    reads = reads or {}
    b = current()
    env = {}
    act = set()
    for v, x, a in zip(fn.invars, primals, active):
        env[v] = x
        if a and has_tangent(v.aval):
            act.add(v)
    tape = []   # (eqn, ins, outs, residuals) of active equations, in program order
    for eqn in fn.eqns:
        ins = [read(env, v) for v in eqn.invars]
        is_active = not eqn.prim.zero_derivative and any(isinstance(v, Var) and v in act
                                                  for v in eqn.invars)
        if is_active and eqn.prim in CLOSED_OVER:
            check_closed_over(eqn, [isinstance(v, Var) and v in act for v in eqn.invars])
        info = b.info
        if eqn.info is not None:
            b.info = eqn.info
        try:
            forward = VJP_FORWARD.get(eqn.prim, _replay_forward) if is_active \
                else _replay_forward
            if eqn.outvars and all(v in reads for v in eqn.outvars) \
                    and eqn.prim not in VJP_FORWARD:
                outs, res = [reads[v] for v in eqn.outvars], None
            else:
                outs, res = forward(eqn, ins, [isinstance(v, Var) and v in act
                                               for v in eqn.invars])
        finally:
            b.info = info
        for v, o in zip(eqn.outvars, outs):
            env[v] = o
        if is_active:
            act.update(v for v in eqn.outvars if has_tangent(v.aval))
            tape.append((eqn, ins, outs, res))
    state = ForwardState()
    state.fn, state.active, state.tape, state.act = fn, list(active), tape, act
    state.outs = [read(env, v) for v in fn.outvars]
    return state


def vjp_backward(state, cts):
    """Emit the backward section into the current builder (which may be a region nested in
    the forward one's: forward values are then captured). `cts` are the cotangents of the
    outputs (None for zero); returns the cotangents of the inputs (None for zero or inactive)."""
    b = current()
    fn, act = state.fn, state.act
    ctenv = {}
    for v, ct in zip(fn.outvars, cts):
        if ct is not None and isinstance(v, Var) and v in act:
            _accumulate(ctenv, v, ct)
    for eqn, ins, eqn_outs, res in reversed(state.tape):
        cts_out = [ctenv.pop(v, None) for v in eqn.outvars]
        if all(c is None for c in cts_out):
            continue
        rule = VJP.get(eqn.prim)
        if rule is None:
            raise no_rule_error(eqn, "VJP")
        info = b.info
        if eqn.info is not None:
            b.info = eqn.info
        start = len(b.eqns)
        try:
            if eqn.prim.multiple_results:
                ct_arg, out_arg = cts_out, eqn_outs
            else:
                ct_arg, out_arg = cts_out[0], eqn_outs[0]
            cts_in = rule(ct_arg, ins, out_arg, res, **eqn.params)
        finally:
            b.info = info
        for v, c in zip(eqn.invars, cts_in):
            if c is not None and isinstance(v, Var) and v in act:
                name_result(b, start, c, v.name + "_bar")
                _accumulate(ctenv, v, c)
    return [ctenv.get(v) if a else None for v, a in zip(fn.invars, state.active)]


def vjp_emit(fn, primals, cts, active, reads=None):
    """Forward then backward section of `fn` in the current builder: (outs, input cts);
    `reads` as for `vjp_forward`."""
    state = vjp_forward(fn, primals, active, reads)
    return state.outs, vjp_backward(state, cts)


def _accumulate(ctenv, v, ct):
    ct = _fit(ct, v.aval)
    prev = ctenv.get(v)
    if prev is None:
        ctenv[v] = ct
    else:
        with current().naming(v.name + "_bar"):
            ctenv[v] = (emit.tape_add if v.aval.dtype.kind == "O" else emit.add)(prev, ct)


def _fit(ct, aval):
    """A rule's cotangent in its primal's shape and dtype (literals broadcast). Its weak type
    is the one the rules gave it, as JAX's transposes do: a cotangent of a weak input is weak
    when the rules keep it weak (JAX's promotions convert back to weak on the way down), and
    strong where a rule makes it so (`real` of a weak complex input transposes to
    complex(ct, strong 0))."""
    a = emit.aval(ct)
    if a.shape != aval.shape:
        ct = emit.broadcast_to(ct, aval.shape)
    if aval.dtype.kind == "O":
        return ct
    if a.dtype != aval.dtype:
        ct = emit.convert(ct, aval.dtype, aval.weak_type)
    return ct


regions.provide("vjp", vjp_emit)
