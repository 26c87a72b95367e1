"""Primitives that exist for differentiation: `stop_gradient`, and the tape that reverse mode
records loop carries on.

  y = stop_gradient(x)
      the identity, with a zero derivative (JAX's `lax.stop_gradient`).
  tape = tape_new()
      an empty last-in-first-out tape (an opaque value of type `tape[]`).
  tape' = tape_push(tape, *values)
      a tape with `values` on top; tapes are persistent values (`tape` itself is unchanged),
      so the order of pushes and pops is data flow, and replaying a pop (rematerialisation in
      reverse mode) gives the same record again.
  tape', *values = tape_pop(tape, types=(...))
      the record on top, and the tape below it (its types are the `types` param,
      type strings such as `'f32[3]'`, `'f32[]{weak}'`).

Reverse mode turns a `while_loop` whose trip count depends on data into a forward loop that
pushes its carries and a backward loop that pops them (Tangent's model). The reference
backend represents a tape as a linked list of `Tape` cells. Derivatives of tape operations are tape operations: the tangent of a tape is a tape of
tangents, and the cotangent of a push is a pop from the cotangent tape (the orders match
because reverse mode also reverses the loop), so reverse-over-reverse works.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from .core import register

TAPE = ShapedArray((), np.dtype(object), False)


def _identity_eval(x):
    return x


stop_gradient = register("stop_gradient", _identity_eval, lambda x: x)
stop_gradient.rules["zero_derivative"] = True


def _tape_new_eval():
    return TAPE


class Tape:
    """A persistent stack: the record on top and the tape below (`None` for the empty one)."""
    __slots__ = ("values", "below")

    def __init__(self, values=None, below=None):
        self.values = values
        self.below = below

    def __repr__(self):
        n, t = 0, self
        while t.below is not None:
            n, t = n + 1, t.below
        return f"<tape of {n} records>"


tape_new = register("tape_new", _tape_new_eval, lambda: Tape())
tape_new.rules["zero_derivative"] = True


def _push_eval(tape, *values):
    return TAPE


def _push(tape, *values):
    return Tape(values, tape)


tape_push = register("tape_push", _push_eval, _push)


def _pop_eval(tape, *, types):
    from ..ir.printer import parse_type
    return (TAPE,) + tuple(parse_type(t) for t in types)


def _pop(tape, *, types):
    if tape.below is None:
        raise RuntimeError("tape_pop from an empty tape: the backward loop ran more "
                           "iterations than the forward loop recorded")
    return (tape.below,) + tuple(tape.values)


tape_pop = register("tape_pop", _pop_eval, _pop, multiple_results=True)


def _push_jvp(primals, tangents, outs):
    from ..transforms import emit
    t_tape = tangents[0] if tangents[0] is not None else emit.tape_new()
    vals = [emit.zeros_like(p) if t is None else t for p, t in zip(primals[1:], tangents[1:])
            if emit.aval(p).dtype.kind in "fcO"]
    return emit.tape_push(t_tape, *vals)


def types_of(avals):
    """The `types` param of a pop of values of these avals."""
    return tuple(str(a) for a in avals)


def _pop_jvp(primals, tangents, outs, *, types):
    from ..transforms import emit
    if tangents[0] is None:
        return [None] * len(outs)
    avals = [emit.aval(o) for o in outs[1:]]
    diff = [a for a in avals if a.dtype.kind in "fcO"]
    popped = emit.tape_pop(tangents[0], types=types_of(diff))
    it = iter(popped[1:])
    return [popped[0]] + [next(it) if a.dtype.kind in "fcO" else None for a in avals]


def _push_vjp(ct, primals, outs):
    from ..transforms import emit
    diff = tuple(emit.aval(p) for p in primals[1:] if emit.aval(p).dtype.kind in "fcO")
    popped = emit.tape_pop(ct, types=types_of(diff))
    it = iter(popped[1:])
    return [popped[0]] + [next(it) if emit.aval(p).dtype.kind in "fcO" else None
                          for p in primals[1:]]


def _pop_vjp(cts, primals, outs, *, types):
    from ..transforms import emit
    avals = [emit.aval(o) for o in outs[1:]]
    ct_tape = cts[0] if cts[0] is not None else emit.tape_new()
    vals = [emit.zeros(a) if c is None else c for c, a in zip(cts[1:], avals)
            if a.dtype.kind in "fcO"]
    return [emit.tape_push(ct_tape, *vals)]


tape_push.rules.update(jvp=_push_jvp, vjp=_push_vjp)
tape_pop.rules.update(jvp=_pop_jvp, vjp=_pop_vjp)
