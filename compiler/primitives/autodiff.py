"""Primitives that exist for differentiation: `stop_gradient`, `no_derivative`, and the tape
that reverse mode records loop carries on.

  y = stop_gradient(x)
      the identity, with a zero derivative (JAX's `lax.stop_gradient`).
  y = no_derivative(x, name='tridiagonal')
      the identity, whose derivative is an error: NotImplementedError naming the operation
      `name` (an operation kiln composes from differentiable primitives but JAX defines no
      derivative for, such as `lax.linalg.tridiagonal`, puts it on its input).
  y = name(x, name='layer1')
      the identity, its value tagged with `name` for checkpoint policies
      (`kiln.ad_checkpoint.checkpoint_name`; JAX's `name` primitive); its derivative is the
      identity's.
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

Tapes can also come as arrays (`tape[4]`: four independent tapes; `vmap` makes them, one tape
per example): every operation then applies tape by tape, values pushed on tapes of shape S
have S as their leading axes, and a pop's results are S followed by the `types`.

Reverse mode turns a `while_loop` whose trip count depends on data into a forward loop that
pushes its carries and a backward loop that pops them (Tangent's model). The reference
backend represents a tape as a linked list of `Tape` cells. Derivatives of tape operations are
tape operations: the tangent of a tape is a tape of tangents, and the cotangent of a push is a
pop from the cotangent tape (the orders match because reverse mode also reverses the loop), so
reverse-over-reverse works.
"""
import functools

import numpy as np

from ..ir.abstract import ShapedArray
from ..ir.ssa import Function, Var
from ..ir.builder import current, trace_region, close_regions
from . import emit as E
from . import batching as B
from . import regions
from .core import register, type_error, BATCH, JVP, VJP, VJP_FORWARD
from .rule_forms import tangent_rule, cotangent_rule, active_values
from ..errors import CompileError

TAPE = ShapedArray((), np.dtype(object), False)


def tape_type(shape=()):
    """The abstract value of an array of tapes of this shape (`tape[]`: one tape)."""
    return ShapedArray(tuple(shape), np.dtype(object), False)


def _identity_eval(x):
    return x


stop_gradient = register("stop_gradient", _identity_eval, lambda x: x)
stop_gradient.zero_derivative = True
BATCH[stop_gradient] = lambda args, dims: (E.stop_gradient(args[0]), dims[0])


def _no_derivative_eval(x, *, name):
    return x


def underivable(name):
    """Raise JAX's error for differentiating the operation `name`."""
    raise NotImplementedError(f"Differentiation rule for '{name}' not implemented (JAX "
                              f"defines none either)")


no_derivative = register("no_derivative", _no_derivative_eval, lambda x, *, name: x)
JVP[no_derivative] = lambda eqn, primals, tangents: underivable(eqn.params["name"])
VJP[no_derivative] = lambda ct, primals, out, residuals, *, name: underivable(name)
BATCH[no_derivative] = lambda args, dims, *, name: (E.no_derivative(args[0], name=name),
                                                    dims[0])


def _name_eval(x, *, name):
    return x


name_p = register("name", _name_eval, lambda x, *, name: x)
name_p.def_rules(jvp=tangent_rule(lambda primals, tangents, out, *, name: tangents[0]),
                 vjp=cotangent_rule(lambda ct, primals, out, *, name: [ct]))
BATCH[name_p] = lambda args, dims, *, name: (E.name(args[0], name=name), dims[0])


def _constraint_eval(x, *, mesh, devices, spec):
    if len(spec) != len(x.shape):
        raise type_error(f"sharding_constraint: a spec of {len(spec)} dimensions for an "
                         f"array of rank {len(x.shape)}")
    return x


# JAX's `with_sharding_constraint` of a traced value over a mesh of PJRT devices: the value
# itself, with the sharding it should have there. `mesh`: ((axis name, size), ...), `devices`:
# the mesh's device ids in row-major order, `spec`: per dimension the axis names it is split
# over. The StableHLO lowering writes it as `sdy.sharding_constraint` (or GSPMD's `@Sharding`)
# in a module partitioned over that mesh; everywhere else it is the identity.
sharding_constraint = register("sharding_constraint", _constraint_eval,
                               lambda x, *, mesh, devices, spec: x)


def _constrained(t, params):
    """A tangent or cotangent under the same constraint as its primal, as in JAX."""
    return None if t is None else E.sharding_constraint(t, **params)


sharding_constraint.def_rules(
    jvp=tangent_rule(lambda primals, tangents, out, **params: _constrained(tangents[0], params)),
    vjp=cotangent_rule(lambda ct, primals, out, **params: [_constrained(ct, params)]))


def _constraint_batch(args, dims, *, mesh, devices, spec):
    d = dims[0]
    spec = spec if d is None else spec[:d] + ((),) + spec[d:]
    return E.sharding_constraint(args[0], mesh=mesh, devices=devices, spec=spec), d


BATCH[sharding_constraint] = _constraint_batch


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


# ------------------------------------------------------------------ runtime values of tapes
#
# A tape value of shape S is an object array of shape S whose elements are `Tape` cells (a
# bare cell, as a scan's slice of stacked tapes gives, is a rank-0 one). A record pushed on
# an array of tapes is split along the leading axes S (cell i keeps `value[i]`), and a pop
# stacks the cells' records back; so the array operations that batching and masked loops
# apply to values (broadcast, select, transpose, stack) work on tapes unchanged.

def _cells(tape):
    return tape if isinstance(tape, np.ndarray) else _wrap(tape)


def _wrap(cell):
    out = np.empty((), object)
    out[()] = cell
    return out


def _unwrap(value):
    """A rank-0 object array's element (what an element of an object array must hold)."""
    if isinstance(value, np.ndarray) and value.dtype == object and not value.shape:
        return value[()]
    return value


def _tape_array(shape, cell_at):
    out = np.empty(shape, object)
    for i in np.ndindex(*shape):
        out[i] = cell_at(i)
    return out


def _zero_value(aval):
    if aval.dtype.kind == "O":
        return _tape_array(aval.shape, lambda i: Tape())
    return np.zeros(aval.shape, aval.dtype)


def _check_tape(op, aval):
    if aval.dtype.kind != "O":
        raise type_error(op, f"takes a tape, got {aval.str_short()}")


tape_new = register("tape_new", lambda: TAPE, lambda: _wrap(Tape()))
tape_new.zero_derivative = True
tape_new.distinct = True   # CSE keeps two empty tapes apart: each has its own history


def _push_eval(tape, *values):
    _check_tape("tape_push", tape)
    for v in values:
        if v.shape[:len(tape.shape)] != tape.shape:
            raise type_error("tape_push", f"values pushed on tapes of shape {tape.shape} must "
                             f"have that shape as their leading axes, got {v.str_short()}")
    return tape_type(tape.shape)


def _push(tape, *values):
    cells = _cells(tape)
    if not cells.shape:
        return _wrap(Tape(values, cells[()]))
    return _tape_array(cells.shape, lambda i: Tape(tuple(v[i] for v in values), cells[i]))


tape_push = register("tape_push", _push_eval, _push)


def _record_avals(types):
    from ..ir.printer import parse_type
    return [parse_type(t) for t in types]


def _pop_eval(tape, *, types):
    _check_tape("tape_pop", tape)
    return (tape_type(tape.shape),) + tuple(
        a.update(shape=tape.shape + a.shape) for a in _record_avals(types))


def _pop_cell(cell, avals):
    if cell.below is None:   # an empty cotangent tape stands for zeros
        return cell, tuple(_zero_value(a) for a in avals)
    return cell.below, cell.values


def _pop(tape, *, types):
    cells = _cells(tape)
    avals = _record_avals(types)
    if not cells.shape:
        below, values = _pop_cell(cells[()], avals)
        return (_wrap(below),) + tuple(values)
    below = np.empty(cells.shape, object)
    outs = [np.empty(cells.shape + a.shape, a.dtype) for a in avals]
    for i in np.ndindex(*cells.shape):
        below[i], values = _pop_cell(cells[i], avals)
        for out, v in zip(outs, values):
            out[i] = _unwrap(v)
    return (below,) + tuple(outs)


tape_pop = register("tape_pop", _pop_eval, _pop, multiple_results=True)


def _records(cell):
    out = []
    while cell.below is not None:
        out.append(cell.values)
        cell = cell.below
    return out   # top first


def _add_values(x, y):
    if isinstance(x, Tape) or (isinstance(x, np.ndarray) and x.dtype == object):
        return _tape_add(x, y)
    return x + y


def _add_cells(a, b):
    """The sum of two cotangent tapes of one tape: record by record from the top (a shorter
    tape stands for zeros below its records)."""
    ra, rb = _records(a), _records(b)
    merged = []
    for i in range(max(len(ra), len(rb))):
        if i >= len(ra) or i >= len(rb):
            merged.append(ra[i] if i < len(ra) else rb[i])
        else:
            merged.append(tuple(_add_values(x, y) for x, y in zip(ra[i], rb[i])))
    out = Tape()
    for values in reversed(merged):
        out = Tape(values, out)
    return out


def _tape_add(a, b):
    ca, cb = _cells(a), _cells(b)
    return _tape_array(ca.shape, lambda i: _add_cells(ca[i], cb[i]))


def _tape_add_eval(a, b):
    _check_tape("tape_add", a)
    _check_tape("tape_add", b)
    if a.shape != b.shape:
        raise type_error("tape_add", f"adds tapes of one shape, got {a.str_short()} and "
                         f"{b.str_short()}")
    return tape_type(a.shape)


tape_add = register("tape_add", _tape_add_eval, _tape_add)
tape_add.def_rules(
    jvp=tangent_rule(lambda primals, tangents, outs: _tape_sum(tangents)),
    vjp=cotangent_rule(lambda ct, primals, outs: [ct, ct]))


def _tape_sum(tapes):
    present = [t for t in tapes if t is not None]
    if len(present) == 1:
        return present[0]
    return E.tape_add(*present)


def _diff(aval):
    return aval.dtype.kind in "fcO"


def _push_jvp(primals, tangents, outs):
    t_tape = tangents[0] if tangents[0] is not None else E.zeros_like(primals[0])
    vals = [E.zeros_like(p) if t is None else t for p, t in zip(primals[1:], tangents[1:])
            if _diff(E.aval(p))]
    return E.tape_push(t_tape, *vals)


def types_of(avals, tape_shape=()):
    """The `types` param of a pop of values of these avals from tapes of `tape_shape`."""
    n = len(tape_shape)
    return tuple(str(a.update(shape=a.shape[n:])) for a in avals)


def _pop_jvp(primals, tangents, outs, *, types):
    if tangents[0] is None:
        return [None] * len(outs)
    diff = [_diff(E.aval(o)) for o in outs[1:]]
    popped = E.tape_pop(tangents[0], types=tuple(t for t, d in zip(types, diff) if d))
    it = iter(popped[1:])
    return [popped[0]] + [next(it) if d else None for d in diff]


def _push_vjp(ct, primals, outs):
    avals = [E.aval(p) for p in primals[1:]]
    shape = E.aval(primals[0]).shape
    popped = E.tape_pop(ct, types=types_of([a for a in avals if _diff(a)], shape))
    it = iter(popped[1:])
    return [popped[0]] + [next(it) if _diff(a) else None for a in avals]


def _pop_vjp(cts, primals, outs, *, types):
    avals = [E.aval(o) for o in outs[1:]]
    ct_tape = cts[0] if cts[0] is not None else E.zeros_like(primals[0])
    vals = [E.zeros(a) if c is None else c for c, a in zip(cts[1:], avals) if _diff(a)]
    return [E.tape_push(ct_tape, *vals)]


tape_push.def_rules(jvp=tangent_rule(_push_jvp), vjp=cotangent_rule(_push_vjp))
tape_pop.def_rules(jvp=tangent_rule(_pop_jvp), vjp=cotangent_rule(_pop_vjp))


# Batching: a batched tape is an array of tapes with the batch axis first, one tape per
# example; an unbatched tape meeting batched values is broadcast first (its cells are shared,
# which persistent tapes allow), so a masked loop's lanes push and pop independently.

def _push_batch(args, dims):
    return E.tape_push(*B.bdim_at_front(args, dims)), 0


def _pop_batch(args, dims, *, types):
    outs = E.tape_pop(B.moveaxis(args[0], dims[0], 0), types=types)
    return list(outs), [0] * len(outs)


def _tape_add_batch(args, dims):
    return E.tape_add(*B.bdim_at_front(args, dims)), 0


BATCH[tape_push] = _push_batch
BATCH[tape_pop] = _pop_batch
BATCH[tape_add] = _tape_add_batch


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
#   *outs, *saved = remat(*args, body=f, prevent_cse=True, num_saved=k)
#       the same, where `checkpoint(policy=...)` accepted some of f's top-level equations
#       (`with_policy`): f also returns their results, the last k outputs, and the backward
#       section reads those instead of recomputing them (only those of equations on the
#       differentiated path are passed to it).
# Closed-over values (`consts`) have no derivative through these (JAX's custom rules do not
# see them either): differentiating one the function depends on is a CompileError
# (`check_closed_over`, called by the JVP and VJP transforms), as JAX raises there.
#   A rule region may also be an int: the token of a *deferred* rule (`defer_region`), which
#   is specialised only when a transform needs it (`region_of`), as JAX traces a rule only
#   then. A custom function called inside its own rule always gets deferred rules, so
#   derivatives of any order use the user's rules and specialisation still ends.

_DEFERRED = []     # token -> (name, fn, takes_active); fn(inputs) -> outputs, traced by region_of


def defer_region(name, fn, takes_active=False):
    """The token of a region to specialise later: `fn(inputs)` with inputs of the types the
    transform gives (the primitive's consts first) returns its outputs. With `takes_active`,
    `fn(inputs, active)` also gets the flags of the inputs being differentiated, where the
    transform specialising it knows them (a custom_vjp's fwd under reverse mode), else None."""
    _DEFERRED.append((name, fn, takes_active))
    return len(_DEFERRED) - 1


def region_of(region, in_avals, active=None):
    """(region, []) for a region; for the token of a deferred rule, the rule specialised now,
    in the current builder, on `in_avals` (and `active`, the differentiated inputs' flags, for
    a rule that takes them), and the values it captured from around it (such as array
    constants of the enclosing function): the caller passes them first."""
    if not isinstance(region, int):
        return region, []
    name, body, takes_active = _DEFERRED[region]
    if takes_active:
        body = functools.partial(body, active=active)
    (fn,), outer = close_regions([trace_region(current(), name, body, list(in_avals))])
    return fn, outer


def _run_region(region, *args):
    from .control import run_region   # control imports this module (TAPE)
    return run_region(region, *args)


def _call_eval(*avals, call, **params):
    return tuple(call.out_avals)


def _call_impl(*args, call, **params):
    return tuple(_run_region(call, *args))


custom_jvp_call = register("custom_jvp_call", _call_eval, _call_impl, multiple_results=True)
custom_vjp_call = register("custom_vjp_call", _call_eval, _call_impl, multiple_results=True)


def _remat_eval(*avals, body, prevent_cse=True, num_saved=0):
    return tuple(body.out_avals)


def _remat_impl(*args, body, prevent_cse=True, num_saved=0):
    return tuple(_run_region(body, *args))


remat = register("remat", _remat_eval, _remat_impl, multiple_results=True)


def with_policy(fn, policy):
    """(`fn` also returning the results of the top-level equations `policy` accepts, their
    count): the body and `num_saved` of a `remat` under `checkpoint(policy=...)`. `policy` is
    JAX's predicate `policy(primitive, *input avals, **params)`; an answer is saved when it
    is true (`Recompute` is false). Equations with a `vjp_forward` rule (loops, custom VJPs)
    are recomputed whatever it says: their backward pass needs values from inside them as
    well."""
    saved = [v for eqn in fn.eqns if eqn.prim not in VJP_FORWARD
             and bool(policy(eqn.prim, *[v.aval for v in eqn.invars], **eqn.params))
             for v in eqn.outvars]
    return Function(fn.name, fn.invars, fn.eqns, list(fn.outvars) + saved), len(saved)


def _inexact(a):
    return a.dtype.kind in "fc"


def _custom_jvp_jvp(eqn, ins, tins):
    k = eqn.params["num_consts"]
    args, t_args = ins[k:], tins[k:]
    tangents = [E.instantiate(t, E.aval(x)) for x, t in zip(args, t_args)
                if _inexact(E.aval(x))]
    g, extra = region_of(eqn.params["jvp"], [E.aval(x) for x in list(ins) + tangents])
    inputs = extra + list(ins) + tangents
    res, _ = regions.jvp(g, inputs, [None] * len(inputs))
    n = len(eqn.outvars)
    it = iter(res[n:])
    return list(res[:n]), [next(it) if _inexact(v.aval) else None for v in eqn.outvars]


def _custom_jvp_vjp(cts, primals, outs, *, call, jvp, num_consts):
    args = primals[num_consts:]
    arg_avals = [E.aval(x) for x in args]
    zeros = [E.zeros(a) for a in arg_avals if _inexact(a)]
    n_in = len(primals)
    active = [False] * n_in + [True] * len(zeros)
    ct = [None] * len(outs) + [c for c, o in zip(cts, outs) if _inexact(E.aval(o))]
    jvp, extra = region_of(jvp, [E.aval(x) for x in list(primals) + zeros])
    _, cts_in = regions.vjp(jvp, extra + list(primals) + zeros, ct,
                            [False] * len(extra) + active)
    it = iter(cts_in[len(extra) + n_in:])
    return [None] * num_consts + [next(it) if _inexact(a) else None for a in arg_avals]


custom_jvp_call.def_rules(jvp=_custom_jvp_jvp, vjp=cotangent_rule(_custom_jvp_vjp))


def _custom_vjp_jvp(eqn, ins, tins):
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function. "
                    "Use reverse mode (grad, vjp, jacrev), or define the rule with "
                    "kiln.custom_jvp instead.")


def _custom_vjp_fwd(eqn, ins, active):
    fwd, extra = region_of(eqn.params["fwd"], [E.aval(x) for x in ins], active)
    res, _ = regions.jvp(fwd, extra + list(ins), [None] * (len(extra) + len(ins)))
    n = len(eqn.outvars)
    return list(res[:n]), list(res[n:])


def _custom_vjp_vjp(cts, primals, outs, residuals, *, call, fwd, bwd, num_consts):
    consts, args = primals[:num_consts], primals[num_consts:]
    ct = [E.instantiate(c, E.aval(o)) for c, o in zip(cts, outs)
          if _inexact(E.aval(o))]
    ins = list(consts) + list(residuals) + ct
    bwd, extra = region_of(bwd, [E.aval(x) for x in ins])
    res, _ = regions.jvp(bwd, extra + ins, [None] * (len(extra) + len(ins)))
    it = iter(res)
    return [None] * num_consts + [next(it) if _inexact(E.aval(x)) else None for x in args]


# The custom-rule primitives, whose first `num_consts` inputs are values the function or its
# rules close over, with what to call them in an error: the rules give those values no
# derivative, so differentiating through one of them is an error, as in JAX (an
# UnexpectedTracerError there), rather than a derivative silently dropped.
CLOSED_OVER = {custom_jvp_call: "custom_jvp", custom_vjp_call: "custom_vjp"}


def check_closed_over(eqn, differentiated):
    """Raise CompileError if the custom-rule equation `eqn`'s function depends on a value it
    closes over that is differentiated (`differentiated`: one flag per input): the rule would
    drop that derivative. Values the function does not depend on (its frame's other
    variables, which a rule may reach) have a zero derivative through it and pass."""
    k = eqn.params["num_consts"]
    call = eqn.params["call"]
    for i, (v, flag) in enumerate(zip(eqn.invars[:k], differentiated[:k])):
        if flag and isinstance(v, Var) and _inexact(v.aval) and any(
                out in active_values(call, [j == i for j in range(len(call.invars))])
                for out in call.outvars):
            kind = CLOSED_OVER[eqn.prim]
            raise CompileError(
                f"a {kind} function closes over {v.name!r}, a value being differentiated: "
                f"its {kind} rule gives values it closes over no derivative, so this one's "
                f"would be lost (JAX raises UnexpectedTracerError here)", eqn.info,
                f"Pass {v.name!r} to the {kind} function as an argument (its rule then returns "
                f"its derivative too), or stop_gradient it if it needs none.")


custom_vjp_call.def_rules(jvp=_custom_vjp_jvp, vjp_forward=_custom_vjp_fwd,
                          vjp=_custom_vjp_vjp)


def _remat_jvp(eqn, ins, tins):
    outs, touts = regions.jvp(eqn.params["body"], list(ins), list(tins))
    return list(outs), list(touts)


def _remat_vjp(cts, primals, outs, *, body, prevent_cse=True, num_saved=0):
    avals = [E.aval(x) for x in primals]
    diff = [a.dtype.kind in "fcO" for a in avals]
    n = len(primals)
    active = active_values(body, diff)
    first = len(outs) - num_saved
    inputs = set(body.invars)
    given = list({v: (v, o) for v, o in zip(body.outvars[first:], outs[first:])
                  if isinstance(v, Var) and v in active and v not in inputs}.values())
    fn, outer = _remat_backward(body, avals, diff, cts, given)
    k = len(outer) + n
    used = _used_inputs(fn)
    kept = [g for g, v in zip(given, fn.invars[k:k + len(given)]) if v in used]
    if len(kept) < len(given):   # saved values the backward pass does not read stay out
        given = kept
        fn, outer = _remat_backward(body, avals, diff, cts, given)
    res = current().bind(remat, list(outer) + list(primals) + [o for _, o in given]
                         + [c for c in cts if c is not None],
                         dict(body=fn, prevent_cse=prevent_cse))
    it = iter(res)
    return [next(it) if d else None for d in diff]


def _remat_backward(body, avals, diff, cts, given):
    """(the region of a `remat`'s backward section, the values it captured): inputs are the
    primals, the saved values (`given`: pairs of a result of `body` and its forward value),
    then the non-zero cotangents; it recomputes `body` but for the saved values, and returns
    the cotangents of the differentiable primals."""
    nz = [c is not None for c in cts]
    n, m = len(avals), len(avals) + len(given)

    def backward(inputs):
        it = iter(inputs[m:])
        ct = [next(it) if z else None for z in nz]
        reads = {v: x for (v, _), x in zip(given, inputs[n:m])}
        _, cts_in = regions.vjp(body, inputs[:n], ct, diff, reads)
        return [E.instantiate(c, a) for c, a, d in zip(cts_in, avals, diff) if d]
    child = trace_region(current(), body.name + "_bwd", backward,
                         avals + [E.aval(o) for _, o in given]
                         + [E.aval(c) for c in cts if c is not None])
    (fn,), outer = close_regions([child])
    return fn, outer


def _used_inputs(fn):
    """The inputs of `fn` that its results or effects depend on (a conservative liveness:
    an equation with regions counts as an effect)."""
    live = {v for v in fn.outvars if isinstance(v, Var)}
    for eqn in reversed(fn.eqns):
        if eqn.prim.effect or eqn.regions() or any(v in live for v in eqn.outvars):
            live.update(v for v in eqn.invars if isinstance(v, Var))
    return live


remat.def_rules(jvp=_remat_jvp, vjp=cotangent_rule(_remat_vjp))


# Batching: each region is batched into a new region of the same primitive (JAX batches the
# function and its rules), so a derivative taken after vmap still uses the user's rule. Inputs
# keep their batch axes (a tangent or cotangent has its primal's); the call region fixes where
# each result carries its batch (axis 0 for one it leaves unbatched), and the rule regions put
# their copies of the results, tangents and cotangents on the same axes.

def batched_region(region, in_avals, in_dims, size, place):
    """A traced region running `region` batched; `place(outs, dims)` gives its results."""

    def body(inputs):
        return place(*regions.batch(region, inputs, in_dims, size))
    return trace_region(current(), region.name + "_batched", body, in_avals)


def to_axis(x, have, want, size):
    """`x`, batched on axis `have` (None: unbatched), with its batch on axis `want`."""
    if have is None:
        x, have = B.to_front(x, None, size), 0
    return B.moveaxis(x, have, want)


def _call_region(call, avals, dims, size, record):
    """The batched primal region; records its result axes in `record["dims"]`."""
    def place(outs, odims):
        record["dims"] = [0 if d is None else d for d in odims]
        return _placed(outs, odims, record["dims"], size)
    return batched_region(call, avals, dims, size, place)


def _placed(outs, odims, want, size):
    return [to_axis(o, d, w, size) for o, d, w in zip(outs, odims, want)]


def _batched_rule(rule, rule_avals, in_avals, in_dims, size, place, lead, traced=None):
    """The batched copy of a rule region: traced now, or, for a deferred rule, deferred too
    (batching it now would batch the deferred rules of its own nested calls, without end),
    passing on the flags of the differentiated inputs to a rule that takes them, and
    appending the rule's unbatched region to `traced` (a list) when it is specialised.
    `rule_avals` and `in_dims` are callables (a custom_vjp's bwd learns its residuals' axes
    from its fwd); `lead` is filled with the count of consts the primitive gets in front."""
    if not isinstance(rule, int):
        return batched_region(rule, in_avals, in_dims(), size, place)

    def body(inputs, active=None):
        region, extra = region_of(rule, rule_avals(),
                                  None if active is None else active[lead[0]:])
        if traced is not None:
            traced.append(region)
        return place(*regions.batch(region, extra + inputs[lead[0]:],
                                    [None] * len(extra) + in_dims(), size))
    return defer_region(_DEFERRED[rule][0] + "_batched", body, _DEFERRED[rule][2])


def _close_batched(children, lead):
    """`close_regions` of the traced children; deferred ones (tokens) stay in place."""
    fns, outer = close_regions([c for c in children if not isinstance(c, int)])
    lead.append(len(outer))
    it = iter(fns)
    return [c if isinstance(c, int) else next(it) for c in children], outer


def _custom_jvp_batch(args, dims, *, call, jvp, num_consts):
    size = B.batch_size(args, dims)
    avals = [E.aval(x) for x in args]
    tangent = [i for i in range(num_consts, len(args)) if _inexact(avals[i])]
    record, lead = {}, []
    f = _call_region(call, avals, dims, size, record)

    def place_jvp(outs, odims):
        want = record["dims"] + [d for d, a in zip(record["dims"], call.out_avals)
                                 if _inexact(a)]
        return _placed(outs, odims, want, size)
    g = _batched_rule(jvp, lambda: call.in_avals + [call.in_avals[i] for i in tangent],
                      avals + [avals[i] for i in tangent],
                      lambda: list(dims) + [dims[i] for i in tangent], size, place_jvp, lead)
    (f, g), outer = _close_batched([f, g], lead)
    outs = current().bind(custom_jvp_call, list(outer) + list(args),
                          dict(call=f, jvp=g, num_consts=len(outer) + num_consts))
    return list(outs), record["dims"]


def _cotangent_to(ct, have, want, size):
    """A per-example cotangent batched on `have`, for an argument batched on `want`: an
    argument shared by every example (`want` None) gets the sum over the batch."""
    if want is None:
        return ct if have is None else E.reduce_sum(ct, axes=(have,))
    return to_axis(ct, have, want, size)


def _custom_vjp_batch(args, dims, *, call, fwd, bwd, num_consts):
    size = B.batch_size(args, dims)
    avals = [E.aval(x) for x in args]
    n_out = len(call.out_avals)
    record, lead = {}, []
    f = _call_region(call, avals, dims, size, record)
    ct_dims = [d for d, a in zip(record["dims"], call.out_avals) if _inexact(a)]
    arg_dims = [d for d, a in zip(dims[num_consts:], avals[num_consts:]) if _inexact(a)]

    def place_fwd(outs, odims):
        record["res"] = list(odims[n_out:])   # residuals stay where the batched fwd put them
        return _placed(outs[:n_out], odims, record["dims"], size) + list(outs[n_out:])

    def place_bwd(outs, odims):
        return [_cotangent_to(o, d, w, size) for o, d, w in zip(outs, odims, arg_dims)]

    fwd_traced = []   # the deferred fwd, as reverse mode specialised it (with its flags)

    def bwd_avals():
        region = fwd_traced[-1] if fwd_traced else region_of(fwd, call.in_avals)[0]
        res = region.out_avals[n_out:]
        return call.in_avals[:num_consts] + res + [a for a in call.out_avals if _inexact(a)]
    F = _batched_rule(fwd, lambda: call.in_avals, avals, lambda: dims, size, place_fwd, lead,
                      fwd_traced)
    if isinstance(F, int):
        bwd_in = None   # the deferred bwd is given its input types when it is specialised
    else:
        bwd_in = (avals[:num_consts] + [v.aval for v in F[1][n_out:]]
                  + [v.aval for v, a in zip(f[1], call.out_avals) if _inexact(a)])
    Bw = _batched_rule(bwd, bwd_avals, bwd_in,
                       lambda: list(dims[:num_consts]) + record["res"] + ct_dims, size,
                       place_bwd, lead)
    (f, F, Bw), outer = _close_batched([f, F, Bw], lead)
    outs = current().bind(custom_vjp_call, list(outer) + list(args),
                          dict(call=f, fwd=F, bwd=Bw, num_consts=len(outer) + num_consts))
    return list(outs), record["dims"]


def _remat_batch(args, dims, *, body, prevent_cse=True, num_saved=0):
    record = {}

    def place(outs, odims):
        record["dims"] = list(odims)
        return outs
    child = batched_region(body, [E.aval(x) for x in args], dims,
                            B.batch_size(args, dims), place)
    (fn,), outer = close_regions([child])
    params = dict(body=fn, prevent_cse=prevent_cse)
    if num_saved:
        params["num_saved"] = num_saved
    outs = current().bind(remat, list(outer) + list(args), params)
    return list(outs), record["dims"]


BATCH[custom_jvp_call] = _custom_jvp_batch
BATCH[custom_vjp_call] = _custom_vjp_batch
BATCH[remat] = _remat_batch


# ------------------------------------------------------------------- user-defined batching
#
#   outs = custom_vmap_call(*consts, *args, call=f, rule=token, num_consts=k)
#       f(*consts, *args) -> outs, the function of `kiln.custom_batching.custom_vmap`; `token`
#       names (in `_VMAP_RULES`) the user's batching rule `rule(size, batched, inputs) ->
#       (outs, outs_batched)`, `batched` a bool per input, with batched inputs' batch on axis
#       0, and batched outputs' on axis 0. Batching calls the rule, which is specialised then
#       and there, with the batch known. Derivatives differentiate `f` (as `remat` would:
#       the rule is for batching only).

_VMAP_RULES = []


def custom_vmap_rule(rule):
    """The token of a batching rule for `custom_vmap_call`'s `rule` parameter."""
    _VMAP_RULES.append(rule)
    return len(_VMAP_RULES) - 1


def _custom_vmap_batch(args, dims, *, call, rule, num_consts):
    size = B.batch_size(args, dims)
    if any(d is not None for d in dims[:num_consts]):
        # A closed-over value batched by an outer transform: the rule cannot see it.
        outs, odims = regions.batch(call, list(args), list(dims), size)
        return list(outs), list(odims)
    inputs = [x if d is None else to_axis(x, d, 0, size) for x, d in zip(args, dims)]
    outs, batched = _VMAP_RULES[rule](size, [d is not None for d in dims[num_consts:]],
                                      inputs[:num_consts], inputs[num_consts:])
    return list(outs), [0 if b else None for b in batched]


def _custom_vmap_jvp(eqn, ins, tins):
    outs, touts = regions.jvp(eqn.params["call"], list(ins), list(tins))
    return list(outs), list(touts)


def _custom_vmap_vjp(cts, primals, outs, *, call, rule, num_consts):
    return _remat_vjp(cts, primals, outs, body=call)


custom_vmap_call = register("custom_vmap_call", _call_eval, _call_impl, multiple_results=True)
custom_vmap_call.def_rules(jvp=_custom_vmap_jvp, vjp=cotangent_rule(_custom_vmap_vjp))
BATCH[custom_vmap_call] = _custom_vmap_batch
