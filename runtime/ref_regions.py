"""Refs written inside regions: the bodies of loops and the branches of `cond`s that kiln
specialises separately (`lax.while_loop`, `lax.fori_loop`, `lax.scan`, `lax.cond`,
`lax.switch`, and Python `if`/`while`/`for` on traced values).

A Ref's value is a traced value of one builder (refs.py), so a region cannot simply replace
it. `written_in(emit, carry)` emits the construct once under a *probe* (`refs.STAGING.probes`):
a write inside a region to a Ref of an enclosing builder is recorded, and the Ref is moved
into the region for the rest of that trace. Without such writes that first emission stands.
With them, its equations are dropped, every recorded Ref is put back as it was, and
`carry(refs, values)` emits the construct again with the Refs' values as extra carried values
(loops) or extra operands and results (branches): each region starts with `enter(refs, ...)`
(the Refs take the region's inputs) and ends by returning `values(refs)`. The construct's
results are then written to the Refs, in the enclosing builder (which may be a region under a
probe itself: nested loops carry the Ref outward level by level).
"""
from .compiler.ir.builder import current
from .refs import STAGING


class _Probe:
    """The Refs written in the regions of one construct, with their home and value before."""

    def __init__(self):
        self.saved = {}

    def record(self, ref):
        self.saved.setdefault(id(ref), (ref, ref._home, ref._value))

    def restore(self):
        for ref, home, value in self.saved.values():
            ref._home, ref._value = home, value


def enter(refs, values):
    """At the start of a region: the Refs `refs` hold the region's `values`."""
    b = current()
    for ref, v in zip(refs, values):
        ref._home, ref._value = b, v


def values(refs):
    return [ref._value for ref in refs]


def written_in(emit, carry):
    """`emit()`'s results, or `carry(refs, values)`'s when the regions `emit` traces write
    Refs of enclosing builders (see the module docstring); `carry` returns (results, the
    Refs' new values)."""
    b = current()
    start = len(b.eqns)
    probe = _Probe()
    probes = STAGING.probes
    probes.append(probe)
    try:
        out = emit()
    finally:
        probes.pop()
        probe.restore()
    if not probe.saved:
        return out
    del b.eqns[start:]
    refs = [ref for ref, _, _ in probe.saved.values()]
    probes.append(None)   # a write the probe did not see stays an error
    try:
        out, new = carry(refs, values(refs))
    finally:
        probes.pop()
        probe.restore()
    for ref, v in zip(refs, new):
        ref._store(v)
    return out
