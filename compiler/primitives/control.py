"""Structured control flow: cond, while_loop, scan. Their bodies are regions: closed SSA
`Function`s held in params.

  outs = cond(index, *operands, branches=(f0, f1, ...))
      runs branches[clamp(index)] on operands; a bool index picks branches[0] for False.
  carry = while_loop(*consts, *carry, cond_fn=c, body_fn=b, num_consts=k)
      cond_fn(*consts, *carry) -> bool[]; body_fn(*consts, *carry) -> carry.
  outs = scan(*consts, *carry, *xs, body=f, length=n, reverse=False, num_consts=k, num_carry=m)
      body(*consts, *carry, *x_slices) -> (*carry, *y_slices); outs = (*final_carry, *stacked_ys)

The NumPy implementations run the regions with `interpret.run_function` (the reference
backend's interpreter). The derivative rules (JVP, VJP) and batching rules (vmap) follow the
declarations; both transform the regions with the transform that is running, reached
through `regions.py`.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from ..ir.ssa import Function, Var
from ..ir.builder import current, trace_region, close_regions
from . import emit as E
from . import batching as B
from .core import register, type_error, BATCH
from .rule_forms import cotangent_rule, tangent_pattern
from . import regions


def _same_types(a, b):
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype
                                     for x, y in zip(a, b))


def _types(avals):
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def run_region(region, *args):
    """Run a region: a `Function` (run by interpret.py, the reference backend), or — inside code
    the reference backend compiled — the Python function its nested `def` became."""
    if isinstance(region, Function):
        from .interpret import run_function
        return run_function(region, *args)
    out = region(*args)
    return out if isinstance(out, tuple) else (out,)


# ---------------------------------------------------------------------------------- cond

def _cond_eval(index, *operands, branches):
    if index.shape != () or index.dtype.kind not in "biu":
        raise type_error("cond", f"index must be a boolean or integer scalar, got "
                         f"{index.str_short()}")
    ins = [o for o in operands]
    outs0 = branches[0].out_avals
    for br in branches:
        if not _same_types([v.aval for v in br.invars], ins):
            raise type_error("cond", f"branch {br.name} takes {_types(br.in_avals)} but is "
                             f"given {_types(ins)}")
        if not _same_types(br.out_avals, outs0):
            raise type_error("cond", f"branches must return the same types: {branches[0].name} "
                             f"returns {_types(outs0)}, {br.name} returns "
                             f"{_types(br.out_avals)}")
    return tuple(ShapedArray(a.shape, a.dtype, a.weak_type) for a in outs0)


def _cond(index, *operands, branches):
    i = int(np.clip(int(index), 0, len(branches) - 1))
    return tuple(run_region(branches[i], *operands))


cond = register("cond", _cond_eval, _cond, multiple_results=True)


# ---------------------------------------------------------------------------- while_loop

def _while_eval(*args, cond_fn, body_fn, num_consts):
    carry = list(args[num_consts:])
    if not _same_types(body_fn.out_avals, carry):
        raise type_error("while_loop", f"body_fn output and input must have identical types: "
                         f"the carry is {_types(carry)} but the body returns "
                         f"{_types(body_fn.out_avals)}")
    c = cond_fn.out_avals
    if len(c) != 1 or c[0].shape != () or c[0].dtype != np.bool_:
        raise type_error("while_loop", f"cond_fn must return a boolean scalar, got {_types(c)}")
    return tuple(ShapedArray(a.shape, a.dtype, a.weak_type) for a in carry)


def _while(*args, cond_fn, body_fn, num_consts):
    consts, carry = list(args[:num_consts]), list(args[num_consts:])
    while bool(run_region(cond_fn, *consts, *carry)[0]):
        carry = run_region(body_fn, *consts, *carry)
    return tuple(carry)


while_loop = register("while_loop", _while_eval, _while, multiple_results=True)


# ---------------------------------------------------------------------------------- scan

def _scan_eval(*args, body, length, reverse=False, num_consts=0, num_carry=0):
    carry = list(args[num_consts:num_consts + num_carry])
    xs = list(args[num_consts + num_carry:])
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise type_error("scan", f"scanned operands must have leading dimension {length}, "
                             f"got {x.str_short()}")
    outs = body.out_avals
    if not _same_types(outs[:num_carry], carry):
        raise type_error("scan", f"the body's carry output {_types(outs[:num_carry])} must "
                         f"match its carry input {_types(carry)}")
    ys = [ShapedArray((length,) + a.shape, a.dtype, a.weak_type) for a in outs[num_carry:]]
    return tuple([ShapedArray(a.shape, a.dtype, a.weak_type) for a in carry] + ys)


def _scan(*args, body, length, reverse=False, num_consts=0, num_carry=0):
    consts = list(args[:num_consts])
    carry = list(args[num_consts:num_consts + num_carry])
    xs = list(args[num_consts + num_carry:])
    ys = []
    order = range(length - 1, -1, -1) if reverse else range(length)
    for i in order:
        out = run_region(body, *consts, *carry, *[x[i] for x in xs])
        carry, y = list(out[:num_carry]), out[num_carry:]
        ys.append(y)
    if reverse:
        ys.reverse()
    out_avals = _region_out_avals(body)
    stacked = [np.stack([y[j] for y in ys]) if ys else
               np.zeros((0,) + a.shape, a.dtype) for j, a in enumerate(out_avals[num_carry:])]
    return tuple(carry + stacked)


def _region_out_avals(region):
    """Result types of a region: from the Function, or from the return annotation of the
    Python function the reference backend made of it (`-> '(i32[], f32[3])'`)."""
    if isinstance(region, Function):
        return region.out_avals
    from ..ir.printer import parse_type
    text = region.__annotations__["return"].strip()
    if text[:1] in "'\"":  # under `from __future__ import annotations`: the literal's source
        text = text[1:-1]
    if text.startswith("("):
        text = text[1:-1]
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [parse_type(p) for p in parts]


scan = register("scan", _scan_eval, _scan, multiple_results=True)


# ------------------------------------------------------------------------ derivative rules
#
# Control flow differentiates structurally: the regions are transformed with the same JVP and
# VJP transforms as the enclosing function (compiler/transforms/jvp.py, vjp.py).
#   cond       JVP: a cond over the JVPs of the branches.
#              VJP: a cond over the VJPs of the branches (each recomputes its forward part).
#   while_loop JVP: tangents join the carry (to a fixed point of which carries have one).
#              VJP: the forward loop also pushes every carry on a tape and counts its trips;
#              the backward loop pops them in reverse, running the body's VJP, for as many
#              trips as the forward loop made: data-dependent trip counts reverse exactly.
#   scan       JVP: tangents join consts, carry, xs and ys.
#              VJP: the forward scan also stacks its input carries (the residuals); the
#              backward scan runs the other way over them with the body's VJP.

def _diff(aval):
    return aval.dtype.kind in "fcO"


def _diff_const(aval):
    """Loop constants get cotangents summed over the iterations; a tape cannot be summed, so
    a tape read (not carried) by a loop passes no cotangent back."""
    return aval.dtype.kind in "fc"


def _regions(names_fns, in_avals, hints=None):
    """Trace several Python callables as regions with the same inputs: (Functions, outer
    operands to pass first)."""
    b = current()
    traced = [trace_region(b, name, fn, in_avals, hints) for name, fn in names_fns]
    return close_regions(traced)


def _avals(xs):
    return [E.aval(x) for x in xs]


def _cond_jvp(eqn, ins, tins):
    index, ops, t_ops = ins[0], ins[1:], tins[1:]
    branches = eqn.params["branches"]
    nz_in = [t is not None for t in t_ops]
    nz_out = [any(col) for col in zip(*[tangent_pattern(br, nz_in) for br in branches])]
    op_avals = _avals(ops)
    t_avals = [a for a, nz in zip(op_avals, nz_in) if nz]
    n = len(ops)

    def branch_jvp(br):
        def body(inputs):
            it = iter(inputs[n:])
            tans = [next(it) if nz else None for nz in nz_in]
            outs, touts = regions.jvp(br, inputs[:n], tans)
            return list(outs) + [E.instantiate(t, v.aval) for t, v, nz
                                 in zip(touts, br.outvars, nz_out) if nz]
        return br.name + "_jvp", body
    fns, outer = _regions([branch_jvp(br) for br in branches], op_avals + t_avals)
    res = current().bind(cond, [index] + list(outer) + list(ops) +
                         [t for t in t_ops if t is not None], dict(branches=tuple(fns)))
    m = len(eqn.outvars)
    it = iter(res[m:])
    return list(res[:m]), [next(it) if nz else None for nz in nz_out]


def _cond_vjp(cts, primals, outs, *, branches):
    index, ops = primals[0], primals[1:]
    op_avals = _avals(ops)
    diff_in = [_diff(a) for a in op_avals]
    nz_ct = [c is not None for c in cts]
    ct_avals = [E.aval(c) for c in cts if c is not None]
    n = len(ops)

    def branch_vjp(br):
        def body(inputs):
            it = iter(inputs[n:])
            ct = [next(it) if nz else None for nz in nz_ct]
            _, cts_in = regions.vjp(br, inputs[:n], ct, diff_in)
            return [E.instantiate(c, a) for c, a, d in zip(cts_in, op_avals, diff_in) if d]
        return br.name + "_vjp", body
    fns, outer = _regions([branch_vjp(br) for br in branches], op_avals + ct_avals)
    res = current().bind(cond, [index] + list(outer) + list(ops) +
                         [c for c in cts if c is not None], dict(branches=tuple(fns)))
    it = iter(res)
    return [None] + [next(it) if d else None for d in diff_in]


cond.def_rules(jvp=_cond_jvp, vjp=cotangent_rule(_cond_vjp))


def _carry_pattern(pattern, body, before, carry, after=()):
    """Fixed point: which carries have a property (a tangent, a batch axis) once the body
    has run any number of times, given which of its inputs before the carries (consts) and
    after them (scanned slices) have it. `pattern(fn, flags)` propagates the property through
    one run. Returns (carry flags, flags of the body's other outputs)."""
    nz = list(carry)
    while True:
        out = pattern(body, list(before) + nz + list(after))
        new = [a or b for a, b in zip(nz, out[:len(nz)])]
        if new == nz:
            return nz, out[len(nz):]
        nz = new


def _while_jvp(eqn, ins, tins):
    k = eqn.params["num_consts"]
    cond_fn, body_fn = eqn.params["cond_fn"], eqn.params["body_fn"]
    consts, carry = ins[:k], ins[k:]
    t_consts, t_carry = tins[:k], tins[k:]
    nz_c = [t is not None for t in t_consts]
    nz, _ = _carry_pattern(tangent_pattern, body_fn, nz_c, [t is not None for t in t_carry])
    c_avals, k_avals = _avals(consts), _avals(carry)
    tc_avals = [a for a, z in zip(c_avals, nz_c) if z]
    tk_avals = [a for a, z in zip(k_avals, nz) if z]
    nc, ntc, nk = len(consts), len(tc_avals), len(carry)

    def split(inputs):
        cs, tcs = inputs[:nc], inputs[nc:nc + ntc]
        ks, tks = inputs[nc + ntc:nc + ntc + nk], inputs[nc + ntc + nk:]
        itc, itk = iter(tcs), iter(tks)
        return (cs, [next(itc) if z else None for z in nz_c], ks,
                [next(itk) if z else None for z in nz])

    def cond_body(inputs):
        cs, _, ks, _ = split(inputs)
        outs, _ = regions.jvp(cond_fn, list(cs) + list(ks), [None] * (nc + nk))
        return outs

    def body(inputs):
        cs, tcs, ks, tks = split(inputs)
        outs, touts = regions.jvp(body_fn, list(cs) + list(ks), tcs + tks)
        return list(outs) + [E.instantiate(t, a) for t, a, z in zip(touts, k_avals, nz) if z]
    in_avals = c_avals + tc_avals + k_avals + tk_avals
    (cf,), cond_outer = _regions([(cond_fn.name, cond_body)], in_avals)
    (bf,), body_outer = _regions([(body_fn.name + "_jvp", body)], in_avals)
    # Captures (rare: constants created by rules) become extra loop constants.
    cf, bf, extra = _share_captures(cf, cond_outer, bf, body_outer)
    init_t = [E.instantiate(t, a) for t, a, z in zip(t_carry, k_avals, nz) if z]
    operands = (list(extra) + list(consts) + [t for t in t_consts if t is not None] +
                list(carry) + init_t)
    res = current().bind(while_loop, operands,
                         dict(cond_fn=cf, body_fn=bf, num_consts=len(extra) + nc + ntc))
    it = iter(res[nk:])
    return list(res[:nk]), [next(it) if z else None for z in nz]


def _share_captures(cf, cond_outer, bf, body_outer):
    """Give a cond region and a body region, each closed over its own captures, one common
    list of leading inputs (loop constants): (cond Function, body Function, outer values)."""
    from ..ir.ssa import Var
    outer, index = [], {}
    for x in list(cond_outer) + list(body_outer):
        if id(x.var) not in index:
            index[id(x.var)] = len(outer)
            outer.append(x)

    def widen(fn, own):
        mine = {id(x.var): v for x, v in zip(own, fn.invars[:len(own)])}
        lead = [mine.get(id(x.var)) or Var(x.var.name + "_unused", x.var.aval) for x in outer]
        return Function(fn.name, lead + fn.invars[len(own):], fn.eqns, fn.outvars)
    return widen(cf, cond_outer), widen(bf, body_outer), outer


def _loop(cond_body, body, in_avals, num_consts, operands, cond_name, body_name):
    """Bind a while_loop from two Python region builders; returns its results."""
    (cf,), cond_outer = _regions([(cond_name, cond_body)], in_avals)
    (bf,), body_outer = _regions([(body_name, body)], in_avals)
    cf, bf, extra = _share_captures(cf, cond_outer, bf, body_outer)
    return current().bind(while_loop, list(extra) + list(operands),
                          dict(cond_fn=cf, body_fn=bf, num_consts=len(extra) + num_consts))


def _while_vjp_fwd(eqn, ins, active):
    from .autodiff import TAPE
    k = eqn.params["num_consts"]
    cond_fn, body_fn = eqn.params["cond_fn"], eqn.params["body_fn"]
    consts, carry = ins[:k], ins[k:]
    c_avals, k_avals = _avals(consts), _avals(carry)
    nc, nk = len(consts), len(carry)
    i32 = ShapedArray((), np.dtype(np.int32), False)

    def cond_body(inputs):
        outs, _ = regions.jvp(cond_fn, inputs[:nc + nk], [None] * (nc + nk))
        return outs

    def body(inputs):
        cs, ks, tape, n = inputs[:nc], inputs[nc:nc + nk], inputs[nc + nk], inputs[-1]
        tape = E.tape_push(tape, *ks)
        outs, _ = regions.jvp(body_fn, list(cs) + list(ks), [None] * (nc + nk))
        return list(outs) + [tape, E.add(n, 1)]
    res = _loop(cond_body, body, c_avals + k_avals + [TAPE, i32], nc,
                list(consts) + list(carry) + [E.tape_new(), E.scalar(0, i32)],
                cond_fn.name, body_fn.name + "_record")
    return list(res[:nk]), (res[nk], res[nk + 1])


def _while_vjp(cts, primals, outs, residuals, *, cond_fn, body_fn, num_consts):
    from .autodiff import TAPE, types_of
    tape, trips = residuals
    consts, carry = primals[:num_consts], primals[num_consts:]
    c_avals, k_avals = _avals(consts), _avals(carry)
    dc = [_diff_const(a) for a in c_avals]
    dk = [_diff(a) for a in k_avals]
    nc = len(consts)
    acc_avals = [a for a, d in zip(c_avals, dc) if d]
    ctk_avals = [a for a, d in zip(k_avals, dk) if d]
    na, nct = len(acc_avals), len(ctk_avals)
    i32 = ShapedArray((), np.dtype(np.int32), False)

    def cond_body(inputs):
        return [E.gt(inputs[-1], 0)]

    def body(inputs):
        cs = inputs[:nc]
        acc = inputs[nc:nc + na]
        ctk = inputs[nc + na:nc + na + nct]
        t, n = inputs[nc + na + nct], inputs[-1]
        popped = E.tape_pop(t, types=types_of(k_avals))
        t, ks = popped[0], list(popped[1:])
        it = iter(ctk)
        ct = [next(it) if d else None for d in dk]
        _, cts_in = regions.vjp(body_fn, list(cs) + ks, ct, dc + dk)
        c_in, k_in = cts_in[:nc], cts_in[nc:]
        ita = iter(acc)
        new_acc = []
        for c, d, a in zip(c_in, dc, c_avals):
            if d:
                prev = next(ita)
                new_acc.append(prev if c is None else E.add(prev, c))
        new_ct = [E.instantiate(c, a) for c, a, d in zip(k_in, k_avals, dk) if d]
        return list(new_acc) + new_ct + [t, E.sub(n, 1)]
    init_acc = [E.zeros(a) for a in acc_avals]
    init_ct = [E.instantiate(c, a) for c, a, d in zip(cts, k_avals, dk) if d]
    res = _loop(cond_body, body, c_avals + acc_avals + ctk_avals + [TAPE, i32], nc,
                list(consts) + init_acc + init_ct + [tape, trips],
                "while_bwd_cond", body_fn.name + "_bwd")
    ita, itk = iter(res[:na]), iter(res[na:na + nct])
    return [next(ita) if d else None for d in dc] + [next(itk) if d else None for d in dk]


while_loop.def_rules(jvp=_while_jvp, vjp_forward=_while_vjp_fwd, vjp=_while_vjp)


def _scan_jvp(eqn, ins, tins):
    p = eqn.params
    body_fn, nc, nk = p["body"], p["num_consts"], p["num_carry"]
    consts, carry, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
    t_c, t_k, t_x = tins[:nc], tins[nc:nc + nk], tins[nc + nk:]
    nz_c = [t is not None for t in t_c]
    nz_x = [t is not None for t in t_x]
    nz_k, nz_y = _carry_pattern(tangent_pattern, body_fn, nz_c,
                                [t is not None for t in t_k], nz_x)
    c_avals, k_avals = _avals(consts), _avals(carry)
    x_avals = [a.update(shape=a.shape[1:]) for a in _avals(xs)]
    sel = lambda avals, nz: [a for a, z in zip(avals, nz) if z]  # noqa: E731
    groups = [c_avals, sel(c_avals, nz_c), k_avals, sel(k_avals, nz_k), x_avals,
              sel(x_avals, nz_x)]
    sizes = [len(g) for g in groups]

    def body(inputs):
        parts, i = [], 0
        for s in sizes:
            parts.append(inputs[i:i + s])
            i += s
        cs, tcs, ks, tks, xsl, txs = parts

        def spread(vals, nz):
            it = iter(vals)
            return [next(it) if z else None for z in nz]
        outs, touts = regions.jvp(body_fn, list(cs) + list(ks) + list(xsl),
                                   spread(tcs, nz_c) + spread(tks, nz_k) + spread(txs, nz_x))
        o_avals = body_fn.out_avals
        tk_out = [E.instantiate(t, a) for t, a, z in zip(touts[:nk], o_avals[:nk], nz_k) if z]
        ty_out = [E.instantiate(t, a) for t, a, z in zip(touts[nk:], o_avals[nk:], nz_y) if z]
        return list(outs[:nk]) + tk_out + list(outs[nk:]) + ty_out
    (bf,), outer = _regions([(body_fn.name + "_jvp", body)], [a for g in groups for a in g])
    init_tk = [E.instantiate(t, a) for t, a, z in zip(t_k, k_avals, nz_k) if z]
    operands = (list(outer) + list(consts) + [t for t in t_c if t is not None] + list(carry)
                + init_tk + list(xs) + [t for t in t_x if t is not None])
    ntc, ntk = sum(nz_c), sum(nz_k)
    res = current().bind(scan, operands, dict(
        body=bf, length=p["length"], reverse=p["reverse"],
        num_consts=len(outer) + nc + ntc, num_carry=nk + ntk))
    ks_out, tk_res = res[:nk], res[nk:nk + ntk]
    ny = len(nz_y)
    ys, ty_res = res[nk + ntk:nk + ntk + ny], res[nk + ntk + ny:]
    itk, ity = iter(tk_res), iter(ty_res)
    return (list(ks_out) + list(ys),
            [next(itk) if z else None for z in nz_k] + [next(ity) if z else None for z in nz_y])


def _scan_vjp_fwd(eqn, ins, active):
    p = eqn.params
    body_fn, nc, nk = p["body"], p["num_consts"], p["num_carry"]
    in_avals = [v.aval for v in body_fn.invars]

    def body(inputs):
        outs, _ = regions.jvp(body_fn, inputs, [None] * len(inputs))
        return list(outs) + list(inputs[nc:nc + nk])
    (bf,), outer = _regions([(body_fn.name + "_record", body)], in_avals)
    res = current().bind(scan, list(outer) + list(ins), dict(
        body=bf, length=p["length"], reverse=p["reverse"], num_consts=len(outer) + nc,
        num_carry=nk))
    n_out = len(eqn.outvars)
    return list(res[:n_out]), list(res[n_out:])


def _scan_vjp(cts, primals, outs, residuals, *, body, length, reverse=False, num_consts=0,
              num_carry=0):
    nc, nk = num_consts, num_carry
    consts, carry, xs = primals[:nc], primals[nc:nc + nk], primals[nc + nk:]
    c_avals, k_avals = _avals(consts), _avals(carry)
    x_avals = [a.update(shape=a.shape[1:]) for a in _avals(xs)]
    y_avals = body.out_avals[nk:]
    dc = [_diff_const(a) for a in c_avals]
    dk, dx = ([_diff(a) for a in g] for g in (k_avals, x_avals))
    dy = [_diff(a) for a in y_avals]
    ct_k, ct_y = cts[:nk], cts[nk:]
    acc_avals = [a for a, d in zip(c_avals, dc) if d]
    ctk_avals = [a for a, d in zip(k_avals, dk) if d]
    cty_avals = [a for a, d in zip(y_avals, dy) if d]
    na, nct, nx = len(acc_avals), len(ctk_avals), len(xs)

    def bwd(inputs):
        cs = inputs[:nc]
        acc = inputs[nc:nc + na]
        ctk = inputs[nc + na:nc + na + nct]
        rest = inputs[nc + na + nct:]
        ks, xsl, cys = rest[:nk], rest[nk:nk + nx], rest[nk + nx:]
        itk, ity = iter(ctk), iter(cys)
        ct = ([next(itk) if d else None for d in dk] + [next(ity) if d else None for d in dy])
        _, cts_in = regions.vjp(body, list(cs) + list(ks) + list(xsl), ct, dc + dk + dx)
        c_in, k_in, x_in = cts_in[:nc], cts_in[nc:nc + nk], cts_in[nc + nk:]
        ita = iter(acc)
        new_acc = []
        for c, d in zip(c_in, dc):
            if d:
                prev = next(ita)
                new_acc.append(prev if c is None else E.add(prev, c))
        new_ct = [E.instantiate(c, a) for c, a, d in zip(k_in, k_avals, dk) if d]
        ct_xs = [E.instantiate(c, a) for c, a, d in zip(x_in, x_avals, dx) if d]
        return new_acc + new_ct + ct_xs
    in_avals = c_avals + acc_avals + ctk_avals + k_avals + x_avals + cty_avals
    (bf,), outer = _regions([(body.name + "_bwd", bwd)], in_avals)
    init_acc = [E.zeros(a) for a in acc_avals]
    init_ct = [E.instantiate(c, a) for c, a, d in zip(ct_k, k_avals, dk) if d]
    stacked_cy = [E.instantiate(c, a.update(shape=(length,) + a.shape))
                  for c, a, d in zip(ct_y, y_avals, dy) if d]
    res = current().bind(scan, list(outer) + list(consts) + init_acc + init_ct +
                         list(residuals) + list(xs) + stacked_cy, dict(
                             body=bf, length=length, reverse=not reverse,
                             num_consts=len(outer) + nc, num_carry=na + nct))
    ita, itk, itx = iter(res[:na]), iter(res[na:na + nct]), iter(res[na + nct:])
    return ([next(ita) if d else None for d in dc] + [next(itk) if d else None for d in dk] +
            [next(itx) if d else None for d in dx])


scan.def_rules(jvp=_scan_jvp, vjp_forward=_scan_vjp_fwd, vjp=_scan_vjp)


# ------------------------------------------------------------------------- batching rules
#
# Regions are batched with the same transform as the enclosing function
# (compiler/transforms/vmap.py `batch_emit`), inside new regions or inline.
#   cond       unbatched index: one cond over the batched branches; each result keeps the
#              batch axis all branches give it (axis 0 where they disagree; unbatched where
#              no branch batches it). Batched index: every branch runs, inline, and a
#              select_n per result picks each example's branch (the index clamped as cond
#              clamps it; a bool index picks branch 0 for False).
#   while_loop the batched carries are a fixed point (batched initially, or made batched by
#              the body). An unbatched predicate keeps one loop over the batched body. A
#              batched predicate runs the loop while any example's predicate holds, carrying
#              the per-example predicate: finished examples keep their carries (select_n),
#              so every carry the body changes is batched.
#   scan       consts, carries (fixed point, as for while_loop) and xs batched; the batch axis
#              of xs is never axis 0 (the scanned axis), and each y comes out with its batch
#              axis one further in than the body gives it.

def _batched_pattern(fn, batched):
    """Which outputs of `fn` get a batch axis from `batch_emit` when the inputs flagged in
    `batched` have one (a safe over-approximation: an equation without batched operands is
    replayed unbatched unless it is a collective over the batch axis)."""
    live = {v for v, b in zip(fn.invars, batched) if b}
    for eqn in fn.eqns:
        if B.reads_batch_axis(eqn) or any(isinstance(v, Var) and v in live for v in eqn.invars):
            live.update(eqn.outvars)
    return [isinstance(v, Var) and v in live for v in fn.outvars]


def _place(x, have, want, size):
    """`x`, batched on axis `have` (None: unbatched), with its batch on axis `want`."""
    if have == want:
        return x
    if have is None:
        x, have = B.to_front(x, None, size), 0
    return B.moveaxis(x, have, want)


def _agreed_axis(dims):
    """One batch axis for values batched on `dims`: theirs when they agree, else axis 0."""
    return dims[0] if len(set(dims)) == 1 else 0


def _lanes(mask, on_true, on_false, axis):
    """Per example: `on_true` where `mask` (bool[batch]) holds, else `on_false`; both are
    batched on `axis`."""
    shape = E.aval(on_true).shape
    if len(shape) > 1:
        mask = E.broadcast_in_dim(mask, shape=shape, broadcast_dimensions=(axis,))
    return E.select_n(mask, on_false, on_true)


def _cond_batch(args, dims, *, branches):
    size = B.batch_size(args, dims)
    ops, op_dims = list(args[1:]), list(dims[1:])
    if dims[0] is not None:
        return _cond_select(args[0], [regions.batch(br, ops, op_dims, size) for br in branches],
                            size)
    b = current()
    opened = []
    for br in branches:
        child = b.child(br.name + "_batched")
        with child:
            inputs = [child.new_input(E.aval(x), v.name) for x, v in zip(ops, br.invars)]
            opened.append((child,) + tuple(regions.batch(br, inputs, op_dims, size)))
    out_dims = [None if all(d is None for d in ds) else _agreed_axis(ds)
                for ds in zip(*[odims for _, _, odims in opened])]
    finished = []
    for child, outs, odims in opened:
        with child:
            placed = [_place(o, d, w, size) for o, d, w in zip(outs, odims, out_dims)]
            finished.append((child, [child.operand(o) for o in placed]))
    fns, outer = close_regions(finished)
    res = b.bind(cond, [args[0]] + list(outer) + ops, dict(branches=tuple(fns)))
    return list(res), out_dims


def _cond_select(index, results, size):
    """The results of a cond with a batched index from every branch's batched results."""
    if len(results) == 1:
        return results[0]
    which = index   # one scalar per example: bool[batch] or an integer vector
    if E.aval(which).dtype == np.bool_:
        results = results[:2]   # a bool reaches the first two branches only
    else:
        which = E.clamp(E.scalar(0, E.aval(which)), which,
                        E.scalar(len(results) - 1, E.aval(which)))
    outs, out_dims = [], []
    for cases in zip(*[list(zip(outs, odims)) for outs, odims in results]):
        axis = _agreed_axis([d for _, d in cases])
        axis = 0 if axis is None else axis
        placed = [_place(x, d, axis, size) for x, d in cases]
        shape = E.aval(placed[0]).shape
        w = which if len(shape) == 1 else E.broadcast_in_dim(which, shape=shape,
                                                            broadcast_dimensions=(axis,))
        outs.append(E.select_n(w, *placed))
        out_dims.append(axis)
    return outs, out_dims


BATCH[cond] = _cond_batch


def _carry_axes(init_dims, batched):
    """The batch axis of each carry: the initial value's, axis 0 for a carry that the body
    makes batched, None for one that stays unbatched."""
    return [None if not b else (0 if d is None else d) for d, b in zip(init_dims, batched)]


def _while_batch(args, dims, *, cond_fn, body_fn, num_consts):
    size = B.batch_size(args, dims)
    k = num_consts
    consts, c_dims = list(args[:k]), list(dims[:k])
    c_flags = [d is not None for d in c_dims]
    batched, _ = _carry_pattern(_batched_pattern, body_fn, c_flags,
                                [d is not None for d in dims[k:]])
    masked = _batched_pattern(cond_fn, c_flags + batched)[0]
    if masked:   # examples finish at different trips: every carry the body changes varies
        batched = [bt or o is not i for bt, o, i in zip(batched, body_fn.outvars,
                                                        body_fn.invars[k:])]
    k_dims = _carry_axes(dims[k:], batched)
    init = [_place(x, d, w, size) for x, d, w in zip(args[k:], dims[k:], k_dims)]
    in_dims = c_dims + k_dims

    def step(inputs):
        outs, odims = regions.batch(body_fn, inputs, in_dims, size)
        return [_place(o, d, w, size) for o, d, w in zip(outs, odims, k_dims)]

    def predicate(inputs):
        (p,), (d,) = regions.batch(cond_fn, inputs, in_dims, size)
        return p if not masked else B.to_front(p, d, size)
    in_avals = _avals(consts + init)
    if not masked:
        res = _loop(lambda ins: [predicate(ins)], step, in_avals, k, consts + init,
                    cond_fn.name + "_batched", body_fn.name + "_batched")
        return list(res), k_dims

    def masked_step(inputs):
        old, running = inputs[k:-1], inputs[-1]
        with B.active_lanes(running, size):   # finished examples' checks do not fail
            stepped = step(inputs[:-1])
        new = [n if w is None else _lanes(running, n, o, w)
               for n, o, w in zip(stepped, old, k_dims)]
        return new + [predicate(inputs[:k] + new)]
    running = predicate(consts + init)
    res = _loop(lambda ins: [E.reduce_or(ins[-1], axes=(0,))], masked_step,
                in_avals + [E.aval(running)], k, consts + init + [running],
                cond_fn.name + "_any", body_fn.name + "_masked")
    return list(res[:-1]), k_dims


BATCH[while_loop] = _while_batch


def _scan_batch(args, dims, *, body, length, reverse=False, num_consts=0, num_carry=0):
    size = B.batch_size(args, dims)
    nc, nk = num_consts, num_carry
    c_dims, x_dims = list(dims[:nc]), list(dims[nc + nk:])
    xs = [B.moveaxis(x, 0, 1) if d == 0 else x for x, d in zip(args[nc + nk:], x_dims)]
    slice_dims = [None if d is None else max(d, 1) - 1 for d in x_dims]
    batched, _ = _carry_pattern(_batched_pattern, body, [d is not None for d in c_dims],
                                [d is not None for d in dims[nc:nc + nk]],
                                [d is not None for d in x_dims])
    k_dims = _carry_axes(dims[nc:nc + nk], batched)
    init = [_place(x, d, w, size) for x, d, w in zip(args[nc:nc + nk], dims[nc:nc + nk], k_dims)]
    y_dims = []

    def step(inputs):
        outs, odims = regions.batch(body, inputs, c_dims + k_dims + slice_dims, size)
        y_dims[:] = [None if d is None else d + 1 for d in odims[nk:]]
        return [_place(o, d, w, size) for o, d, w in zip(outs[:nk], odims, k_dims)] + \
            list(outs[nk:])
    x_avals = [a.update(shape=a.shape[1:]) for a in _avals(xs)]
    (fn,), outer = _regions([(body.name + "_batched", step)],
                            _avals(list(args[:nc]) + init) + x_avals)
    res = current().bind(scan, list(outer) + list(args[:nc]) + init + xs, dict(
        body=fn, length=length, reverse=reverse, num_consts=len(outer) + nc, num_carry=nk))
    return list(res), k_dims + y_dims


BATCH[scan] = _scan_batch
