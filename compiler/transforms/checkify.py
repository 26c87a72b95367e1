"""checkify as a transform of the SSA form.

`checkify_emit(fn, args, err, enabled)` replays `fn` into the current builder carrying the
error value `err` (a `primitives.checks.ErrorState`, updated in place): each equation goes
through its primitive's rule in the `CHECKIFY` table,

    CHECKIFY[prim](eqn, ins, err, enabled) -> outs

which emits it with the checks of the error categories in `enabled` (the `check` primitive's
rule discharges user checks; the rules live beside the categories in primitives/checks.py);
an equation without a rule is replayed unchanged. Returns `fn`'s outputs. The runtime's
`kiln.experimental.checkify` stages the user's function and runs this on it.
"""
from ..ir.builder import current
from ..primitives import regions
from ..primitives.core import CHECKIFY
from ..primitives.rule_forms import replay_eqn
from .replay import replay_annotated


def checkify_emit(fn, args, err, enabled):
    """Emit `fn` on `args` with run-time checks; its outputs (the error is in `err`)."""
    def step(eqn, ins, _):
        rule = CHECKIFY.get(eqn.prim)
        outs = rule(eqn, ins, err, enabled) if rule is not None else \
            replay_eqn(current(), eqn, ins)
        return outs, [None] * len(outs)
    outs, _ = replay_annotated(fn, list(args), [None] * len(args), step)
    return outs


regions.provide("checkify", checkify_emit)
