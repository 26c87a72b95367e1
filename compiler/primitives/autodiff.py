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
  tape' = tape_add(a, b)
      the sum of two cotangent tapes of one tape, record by record from the top.
  tape', *values = tape_pop(tape, types=(...))
      the record on top, and the tape below it (zeros from an empty tape: an empty cotangent
      tape stands for zeros) (its types are the `types` param,
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
tape_new.rules["distinct"] = True   # CSE keeps two empty tapes apart: each has its own history


def _push_eval(tape, *values):
    return TAPE


def _push(tape, *values):
    return Tape(values, tape)


tape_push = register("tape_push", _push_eval, _push)


def _pop_eval(tape, *, types):
    from ..ir.printer import parse_type
    return (TAPE,) + tuple(parse_type(t) for t in types)


def _pop(tape, *, types):
    if tape.below is None:   # an empty cotangent tape stands for zeros
        from ..ir.printer import parse_type
        return (tape,) + tuple(_zero_value(parse_type(t)) for t in types)
    return (tape.below,) + tuple(tape.values)


def _zero_value(aval):
    return Tape() if aval.dtype.kind == "O" else np.zeros(aval.shape, aval.dtype)


def _records(tape):
    out = []
    while tape.below is not None:
        out.append(tape.values)
        tape = tape.below
    return out   # top first


def _tape_add(a, b):
    """The sum of two cotangent tapes of one tape: record by record from the top (a shorter
    tape stands for zeros below its records)."""
    ra, rb = _records(a), _records(b)
    merged = []
    for i in range(max(len(ra), len(rb))):
        if i >= len(ra) or i >= len(rb):
            merged.append(ra[i] if i < len(ra) else rb[i])
        else:
            merged.append(tuple(_tape_add(x, y) if isinstance(x, Tape) else x + y
                                for x, y in zip(ra[i], rb[i])))
    out = Tape()
    for values in reversed(merged):
        out = Tape(values, out)
    return out


def _tape_add_eval(a, b):
    return TAPE


tape_add = register("tape_add", _tape_add_eval, _tape_add)
tape_add.rules.update(
    jvp=lambda primals, tangents, outs: _tape_sum(tangents),
    vjp=lambda ct, primals, outs: [ct, ct])


def _tape_sum(tapes):
    from ..transforms import emit
    present = [t for t in tapes if t is not None]
    if len(present) == 1:
        return present[0]
    return emit.tape_add(*present)


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


# ------------------------------------------------------------------ user-defined derivatives
#
#   outs = custom_jvp_call(*consts, *args, call=f, jvp=g, num_consts=k)
#       f(*consts, *args) -> outs; g(*consts, *args, *tangents of the inexact args)
#       -> (*outs, *tangents of the inexact outs). The JVP replays g; the VJP transposes g in
#       its tangent inputs (g is linear in them), as JAX does.
#   outs = custom_vjp_call(*consts, *args, call=f, fwd=F, bwd=B, num_consts=k)
#       F(*consts, *args) -> (*outs, *residuals); B(*consts, *residuals, *cotangents of the
#       inexact outs) -> cotangents of the inexact args. Forward mode is an error (as in JAX).
#   outs = remat(*args, body=f, prevent_cse=True)
#       f(*args), recomputed in the backward section instead of keeping its intermediate
#       values (`kiln.checkpoint`): the backward section is a `remat` over f's VJP.
# Closed-over values (`consts`) have no derivative through these (JAX's custom rules do not
# see them either).

def _run_region(region, *args):
    from .control import _run
    return _run(region, *args)


def _call_eval(*avals, call, **params):
    return tuple(call.out_avals)


def _call_impl(*args, call, **params):
    return tuple(_run_region(call, *args))


custom_jvp_call = register("custom_jvp_call", _call_eval, _call_impl, multiple_results=True)
custom_vjp_call = register("custom_vjp_call", _call_eval, _call_impl, multiple_results=True)


def _remat_eval(*avals, body, prevent_cse=True):
    return tuple(body.out_avals)


def _remat_impl(*args, body, prevent_cse=True):
    return tuple(_run_region(body, *args))


remat = register("remat", _remat_eval, _remat_impl, multiple_results=True)


def _inexact(a):
    return a.dtype.kind in "fc"


def _custom_jvp_jvp(eqn, ins, tins):
    from ..transforms import emit, jvp
    k = eqn.params["num_consts"]
    g = eqn.params["jvp"]
    args, t_args = ins[k:], tins[k:]
    tangents = [jvp.instantiate(t, emit.aval(x)) for x, t in zip(args, t_args)
                if _inexact(emit.aval(x))]
    res, _ = jvp.jvp_emit(g, list(ins) + tangents, [None] * (len(ins) + len(tangents)))
    n = len(eqn.outvars)
    it = iter(res[n:])
    return list(res[:n]), [next(it) if _inexact(v.aval) else None for v in eqn.outvars]


def _custom_jvp_vjp(cts, primals, outs, *, call, jvp, num_consts):
    from ..transforms import emit, vjp
    args = primals[num_consts:]
    arg_avals = [emit.aval(x) for x in args]
    zeros = [emit.zeros(a) for a in arg_avals if _inexact(a)]
    n_in = len(primals)
    active = [False] * n_in + [True] * len(zeros)
    ct = [None] * len(outs) + [c for c, o in zip(cts, outs) if _inexact(emit.aval(o))]
    _, cts_in = vjp.vjp_emit(jvp, list(primals) + zeros, ct, active)
    it = iter(cts_in[n_in:])
    return [None] * num_consts + [next(it) if _inexact(a) else None for a in arg_avals]


custom_jvp_call.rules.update(jvp_eqn=_custom_jvp_jvp, vjp=_custom_jvp_vjp)


def _custom_vjp_jvp(eqn, ins, tins):
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function. "
                    "Use reverse mode (grad, vjp, jacrev), or define the rule with "
                    "kiln.custom_jvp instead.")


def _custom_vjp_fwd(eqn, ins):
    from ..transforms import jvp
    res, _ = jvp.jvp_emit(eqn.params["fwd"], list(ins), [None] * len(ins))
    n = len(eqn.outvars)
    return list(res[:n]), list(res[n:])


def _custom_vjp_vjp(cts, primals, outs, residuals, *, call, fwd, bwd, num_consts):
    from ..transforms import emit, jvp
    consts, args = primals[:num_consts], primals[num_consts:]
    ct = [jvp.instantiate(c, emit.aval(o)) for c, o in zip(cts, outs)
          if _inexact(emit.aval(o))]
    ins = list(consts) + list(residuals) + ct
    res, _ = jvp.jvp_emit(bwd, ins, [None] * len(ins))
    it = iter(res)
    return [None] * num_consts + [next(it) if _inexact(emit.aval(x)) else None for x in args]


custom_vjp_call.rules.update(jvp_eqn=_custom_vjp_jvp, vjp_fwd=_custom_vjp_fwd,
                             vjp=_custom_vjp_vjp)


def _remat_jvp(eqn, ins, tins):
    from ..transforms import jvp
    outs, touts = jvp.jvp_emit(eqn.params["body"], list(ins), list(tins))
    return list(outs), list(touts)


def _remat_vjp(cts, primals, outs, *, body, prevent_cse=True):
    from ..transforms import emit, vjp
    from ..frontend.builder import current, trace_region, close_regions
    avals = [emit.aval(x) for x in primals]
    diff = [a.dtype.kind in "fcO" for a in avals]
    nz = [c is not None for c in cts]
    n = len(primals)

    def backward(inputs):
        it = iter(inputs[n:])
        ct = [next(it) if z else None for z in nz]
        _, cts_in = vjp.vjp_emit(body, inputs[:n], ct, diff)
        return [vjp.instantiate(c, a) for c, a, d in zip(cts_in, avals, diff) if d]
    b = current()
    child = trace_region(b, body.name + "_bwd", backward,
                         avals + [emit.aval(c) for c in cts if c is not None])
    (fn,), outer = close_regions([child])
    res = b.bind(remat, list(outer) + list(primals) + [c for c in cts if c is not None],
                 dict(body=fn, prevent_cse=prevent_cse))
    it = iter(res)
    return [next(it) if d else None for d in diff]


remat.rules.update(jvp_eqn=_remat_jvp, vjp=_remat_vjp)
