"""The replay that the JVP and batching transforms share: a function's equations emitted again
into the current builder, each through the transform's own step, with a note carried beside
every value (its tangent for jvp, its batch axis for vmap). Reverse mode's forward section
(vjp.py) reads operands the same way.
"""
from ..ir.ssa import Var, Literal
from ..ir.builder import current


def read(env, v):
    """The value of an operand during a replay: a Literal stays itself, a Var is looked up."""
    return v if isinstance(v, Literal) else env[v]


def replay_annotated(fn, values, notes, step):
    """Replay `fn` into the current builder, carrying a note beside each value (its tangent
    for jvp, its batch axis for vmap; None for none). `step(eqn, ins, in_notes) -> (outs,
    out_notes)` emits one equation, with the builder's source location set to the
    equation's. Returns (fn's outputs, their notes)."""
    env, nenv = {}, {}
    for v, x, n in zip(fn.invars, values, notes):
        env[v] = x
        if n is not None:
            nenv[v] = n
    b = current()
    for eqn in fn.eqns:
        info = b.info
        if eqn.info is not None:
            b.info = eqn.info
        try:
            ins = [read(env, v) for v in eqn.invars]
            nins = [nenv.get(v) if isinstance(v, Var) else None for v in eqn.invars]
            outs, nouts = step(eqn, ins, nins)
        finally:
            b.info = info
        for v, o, n in zip(eqn.outvars, outs, nouts):
            env[v] = o
            if n is not None:
                nenv[v] = n
    return ([read(env, v) for v in fn.outvars],
            [nenv.get(v) if isinstance(v, Var) else None for v in fn.outvars])
