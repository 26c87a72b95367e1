"""Primitives that users define (`kiln.extend.core.Primitive`, JAX's `jax.extend.core`).

  *outs = user_primitive(*consts, *args, call=f, rules=token, name='multiply_add',
                         num_consts=k, params=(...))
      f(*consts, *args) -> outs, the primitive's definition (its implementation, specialised
      where it is bound; `consts` are values it captured); `token` names (in `_RULES`) the
      runtime's object that holds the user's rules for the primitive `name`, called with the
      user's keyword parameters `params` (sorted (key, value) pairs). Backends run `f`.
      Transforms call the user's rules, each given the equation's operands (consts first)
      and `num_consts=k, params=params` as keywords:
      - forward mode calls `rules.jvp(primals, tangents) -> (outs, tangents)` (tangents None
        for zero), which emits the user's JVP rule into the current builder;
      - reverse mode linearizes: it traces the user's JVP rule with tangents for the
        differentiated operands and transposes that tangent computation (JAX's grad is the
        transpose of the JVP). Inside that transposition (`transposing`), an equation of a
        user primitive is linear in its differentiated operands, and its VJP calls
        `rules.transpose(cts, primals, outs, linear) -> operand cotangents`, the user's
        transpose rule;
      - batching calls `rules.batch(args, dims) -> (outs, out_dims)`, the user's batching
        rule.
The forward rule of reverse mode records which operands are differentiated (the residuals),
since a transpose rule needs to know which of its operands are linear.
"""
import contextlib

from ..ir.builder import PerThread, current, trace_region, close_regions
from . import emit as E
from . import batching as B
from . import regions
from .core import register, JVP, VJP, VJP_FORWARD, BATCH
from .rule_forms import has_tangent, replay_eqn

_RULES = []   # token -> the runtime's rules object of one user primitive
_STATE = PerThread(linear=lambda: [0])   # > 0 while a user JVP rule is being transposed


def user_rules(rules):
    """The token of a user primitive's rules object (`user_primitive`'s `rules` param)."""
    _RULES.append(rules)
    return len(_RULES) - 1


@contextlib.contextmanager
def transposing():
    """While reverse mode transposes the tangent computation of a JVP rule: equations of user
    primitives met then are linear in their differentiated operands."""
    _STATE.linear[0] += 1
    try:
        yield
    finally:
        _STATE.linear[0] -= 1


def _eval(*avals, call, **params):
    return tuple(call.out_avals)


def _impl(*args, call, **params):
    from .control import run_region   # control imports autodiff, which needs nothing here
    return tuple(run_region(call, *args))


user_primitive = register("user_primitive", _eval, _impl, multiple_results=True)


def _jvp(eqn, ins, tins):
    outs, touts = _RULES[eqn.params["rules"]].jvp(list(ins), list(tins),
                                                  num_consts=eqn.params["num_consts"],
                                                  params=eqn.params["params"])
    return list(outs), [t if has_tangent(v.aval) else None for t, v in zip(touts, eqn.outvars)]


def _vjp_forward(eqn, ins, active):
    return replay_eqn(current(), eqn, ins), tuple(active)


def _vjp(cts, primals, outs, active, *, call, rules, name, num_consts, params):
    rule = _RULES[rules]
    given = dict(num_consts=num_consts, params=params)
    linear = [i >= num_consts and bool(a) and has_tangent(E.aval(x))
              for i, (a, x) in enumerate(zip(active, primals))]
    if _STATE.linear[0]:
        return rule.transpose(list(cts), list(primals), list(outs), linear, **given)
    # Not inside a transposition: linearize with the user's JVP rule, then transpose.
    n = len(primals)
    where = [i for i in range(n) if linear[i]]
    t_avals = [E.aval(primals[i]).strong() for i in where]

    def tangent_computation(inputs):
        tins = [None] * n
        for i, t in zip(where, inputs[n:]):
            tins[i] = t
        outs_, touts = rule.jvp(list(inputs[:n]), tins, **given)
        return [E.instantiate(t, E.aval(o)) for t, o in zip(touts, outs_)]
    region = trace_region(current(), name + "_jvp", tangent_computation,
                          [E.aval(x) for x in primals] + t_avals)
    (fn,), outer = close_regions([region])
    inputs = list(outer) + list(primals) + [E.zeros(a) for a in t_avals]
    flags = [False] * (len(outer) + n) + [True] * len(t_avals)
    with transposing():
        _, cts_in = regions.vjp(fn, inputs, list(cts), flags)
    result = [None] * n
    for i, c in zip(where, cts_in[len(outer) + n:]):
        result[i] = c
    return result


def _batch(args, dims, *, call, rules, name, num_consts, params):
    if any(d is not None for d in dims[:num_consts]):
        # A value the definition captured, batched by an outer transform: the user's rule
        # can not see it, so the definition itself is batched.
        outs, out_dims = regions.batch(call, list(args), list(dims), B.batch_size(args, dims))
        return list(outs), list(out_dims)
    outs, out_dims = _RULES[rules].batch(list(args), list(dims), num_consts=num_consts,
                                         params=params)
    return list(outs), list(out_dims)


user_primitive.def_rules(jvp=_jvp, vjp_forward=_vjp_forward, vjp=_vjp, batch=_batch)
