"""Splitting a function into the part that is known now and the part that must wait.

`split(fn, unknown, n_known_outputs)` partitions `fn`'s equations by whether they depend on
the inputs flagged `unknown` (control flow counts as one equation), and returns two Functions:

    def fn_known(*known_inputs):                    # runs now
        ...equations that do not depend on unknown inputs...
        return (*fn.outvars[:n_known_outputs], *residuals)

    def fn_unknown(*residuals, *unknown_inputs):    # runs later
        ...the other equations...
        return fn.outvars[n_known_outputs:]

Residuals are the known values the second part reads. This is how `kiln.vjp` runs the forward
section once, at `vjp(...)` time, and only the backward section for each cotangent, and how
`kiln.linearize` keeps the primal computation out of its JVP function (JAX's partial
evaluation, on the SSA form). Effects in the known part run once, when it runs.
"""
from ..ir.ssa import Var, Function


def unknown_values(fn, unknown):
    """(the Vars of `fn` that depend on the inputs flagged `unknown`, the equations that
    compute them, the other equations)."""
    unk = {v for v, u in zip(fn.invars, unknown) if u}
    known_eqns, unknown_eqns = [], []
    for eqn in fn.eqns:
        if any(isinstance(v, Var) and v in unk for v in eqn.invars):
            unknown_eqns.append(eqn)
            unk.update(eqn.outvars)
        else:
            known_eqns.append(eqn)
    return unk, unknown_eqns, known_eqns


def split(fn, unknown, n_known_outputs):
    """(known Function, unknown Function, number of residuals)."""
    unk, unknown_eqns, known_eqns = unknown_values(fn, unknown)
    head, tail = fn.outvars[:n_known_outputs], fn.outvars[n_known_outputs:]
    for v in head:
        if isinstance(v, Var) and v in unk:
            raise ValueError(f"split: output {v.name} of {fn.name} depends on unknown inputs")
    residuals, seen = [], set()

    def need(v):
        if isinstance(v, Var) and v not in unk and id(v) not in seen:
            seen.add(id(v))
            residuals.append(v)
    for eqn in unknown_eqns:
        for v in eqn.invars:
            need(v)
    for v in tail:
        need(v)
    known_in = [v for v, u in zip(fn.invars, unknown) if not u]
    unknown_in = [v for v, u in zip(fn.invars, unknown) if u]
    known = Function(fn.name + "_known", known_in, known_eqns, list(head) + residuals)
    later = Function(fn.name + "_unknown", residuals + unknown_in, unknown_eqns, list(tail))
    return known, later, len(residuals)
