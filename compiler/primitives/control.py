"""Structured control flow: cond, while_loop, scan. Their bodies are regions: closed SSA
`Function`s held in params.

  outs = cond(index, *operands, branches=(f0, f1, ...))
      runs branches[clamp(index)] on operands; a bool index picks branches[0] for False.
  carry = while_loop(*consts, *carry, cond_fn=c, body_fn=b, num_consts=k)
      cond_fn(*consts, *carry) -> bool[]; body_fn(*consts, *carry) -> carry.
  outs = scan(*consts, *carry, *xs, body=f, length=n, reverse=False, num_consts=k, num_carry=m)
      body(*consts, *carry, *x_slices) -> (*carry, *y_slices); outs = (*final_carry, *stacked_ys)

The NumPy implementations interpret the regions with the reference backend.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from ..ir.ssa import Function
from .core import register, type_error


def _same_types(a, b):
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype
                                     for x, y in zip(a, b))


def _types(avals):
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _run(region, *args):
    """Run a region: a `Function` (interpreted by the reference backend), or — inside code
    the reference backend compiled — the Python function its nested `def` became."""
    if isinstance(region, Function):
        from ..backends.reference import run_function
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
    return tuple(_run(branches[i], *operands))


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
    while bool(_run(cond_fn, *consts, *carry)[0]):
        carry = _run(body_fn, *consts, *carry)
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
        out = _run(body, *consts, *carry, *[x[i] for x in xs])
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

def _ad():
    from ..transforms import emit, jvp, vjp
    from ..frontend.builder import current, trace_region, close_regions
    return emit, jvp, vjp, current, trace_region, close_regions


def _diff(aval):
    return aval.dtype.kind in "fcO"


def _diff_const(aval):
    """Loop constants get cotangents summed over the iterations; a tape cannot be summed, so
    a tape read (not carried) by a loop passes no cotangent back."""
    return aval.dtype.kind in "fc"


def _regions(names_fns, in_avals, hints=None):
    """Trace several Python callables as regions with the same inputs: (Functions, outer
    operands to pass first)."""
    _, _, _, current, trace_region, close_regions = _ad()
    b = current()
    traced = [trace_region(b, name, fn, in_avals, hints) for name, fn in names_fns]
    return close_regions(traced)


def _avals(xs):
    emit = _ad()[0]
    return [emit.aval(x) for x in xs]


def _cond_jvp(eqn, ins, tins):
    emit, jvp, _, current, _, _ = _ad()
    index, ops, t_ops = ins[0], ins[1:], tins[1:]
    branches = eqn.params["branches"]
    nz_in = [t is not None for t in t_ops]
    nz_out = [any(col) for col in zip(*[jvp.tangent_pattern(br, nz_in) for br in branches])]
    op_avals = _avals(ops)
    t_avals = [a for a, nz in zip(op_avals, nz_in) if nz]
    n = len(ops)

    def branch_jvp(br):
        def body(inputs):
            it = iter(inputs[n:])
            tans = [next(it) if nz else None for nz in nz_in]
            outs, touts = jvp.jvp_emit(br, inputs[:n], tans)
            return list(outs) + [jvp.instantiate(t, v.aval) for t, v, nz
                                 in zip(touts, br.outvars, nz_out) if nz]
        return br.name + "_jvp", body
    fns, outer = _regions([branch_jvp(br) for br in branches], op_avals + t_avals)
    res = current().bind(cond, [index] + list(outer) + list(ops) +
                         [t for t in t_ops if t is not None], dict(branches=tuple(fns)))
    m = len(eqn.outvars)
    it = iter(res[m:])
    return list(res[:m]), [next(it) if nz else None for nz in nz_out]


def _cond_vjp(cts, primals, outs, *, branches):
    emit, _, vjp, current, _, _ = _ad()
    index, ops = primals[0], primals[1:]
    op_avals = _avals(ops)
    diff_in = [_diff(a) for a in op_avals]
    nz_ct = [c is not None for c in cts]
    ct_avals = [emit.aval(c) for c in cts if c is not None]
    n = len(ops)

    def branch_vjp(br):
        def body(inputs):
            it = iter(inputs[n:])
            ct = [next(it) if nz else None for nz in nz_ct]
            _, cts_in = vjp.vjp_emit(br, inputs[:n], ct, diff_in)
            return [vjp.instantiate(c, a) for c, a, d in zip(cts_in, op_avals, diff_in) if d]
        return br.name + "_vjp", body
    fns, outer = _regions([branch_vjp(br) for br in branches], op_avals + ct_avals)
    res = current().bind(cond, [index] + list(outer) + list(ops) +
                         [c for c in cts if c is not None], dict(branches=tuple(fns)))
    it = iter(res)
    return [None] + [next(it) if d else None for d in diff_in]


cond.rules.update(jvp_eqn=_cond_jvp, vjp=_cond_vjp)


def _carry_pattern(body, nz_consts, nz_carry, n_extra_out=0):
    """Fixed point: which carries have tangents once the body has run any number of times."""
    _, jvp, _, _, _, _ = _ad()
    nz = list(nz_carry)
    while True:
        out = jvp.tangent_pattern(body, list(nz_consts) + nz)
        new = [a or b for a, b in zip(nz, out[:len(nz)])]
        if new == nz:
            return nz, out[len(nz):]
        nz = new


def _while_jvp(eqn, ins, tins):
    emit, jvp, _, current, _, _ = _ad()
    k = eqn.params["num_consts"]
    cond_fn, body_fn = eqn.params["cond_fn"], eqn.params["body_fn"]
    consts, carry = ins[:k], ins[k:]
    t_consts, t_carry = tins[:k], tins[k:]
    nz_c = [t is not None for t in t_consts]
    nz, _ = _carry_pattern(body_fn, nz_c, [t is not None for t in t_carry])
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
        outs, _ = jvp.jvp_emit(cond_fn, list(cs) + list(ks), [None] * (nc + nk))
        return outs

    def body(inputs):
        cs, tcs, ks, tks = split(inputs)
        outs, touts = jvp.jvp_emit(body_fn, list(cs) + list(ks), tcs + tks)
        return list(outs) + [jvp.instantiate(t, a) for t, a, z in zip(touts, k_avals, nz) if z]
    in_avals = c_avals + tc_avals + k_avals + tk_avals
    (cf,), cond_outer = _regions([(cond_fn.name, cond_body)], in_avals)
    (bf,), body_outer = _regions([(body_fn.name + "_jvp", body)], in_avals)
    # Captures (rare: constants created by rules) become extra loop constants.
    cf, bf, extra = _share_captures(cf, cond_outer, bf, body_outer)
    init_t = [jvp.instantiate(t, a) for t, a, z in zip(t_carry, k_avals, nz) if z]
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
    _, _, _, current, _, _ = _ad()
    (cf,), cond_outer = _regions([(cond_name, cond_body)], in_avals)
    (bf,), body_outer = _regions([(body_name, body)], in_avals)
    cf, bf, extra = _share_captures(cf, cond_outer, bf, body_outer)
    return current().bind(while_loop, list(extra) + list(operands),
                          dict(cond_fn=cf, body_fn=bf, num_consts=len(extra) + num_consts))


def _while_vjp_fwd(eqn, ins):
    emit, jvp, _, _, _, _ = _ad()
    from .autodiff import TAPE
    k = eqn.params["num_consts"]
    cond_fn, body_fn = eqn.params["cond_fn"], eqn.params["body_fn"]
    consts, carry = ins[:k], ins[k:]
    c_avals, k_avals = _avals(consts), _avals(carry)
    nc, nk = len(consts), len(carry)
    i32 = ShapedArray((), np.dtype(np.int32), False)

    def cond_body(inputs):
        outs, _ = jvp.jvp_emit(cond_fn, inputs[:nc + nk], [None] * (nc + nk))
        return outs

    def body(inputs):
        cs, ks, tape, n = inputs[:nc], inputs[nc:nc + nk], inputs[nc + nk], inputs[-1]
        tape = emit.tape_push(tape, *ks)
        outs, _ = jvp.jvp_emit(body_fn, list(cs) + list(ks), [None] * (nc + nk))
        return list(outs) + [tape, emit.add(n, 1)]
    res = _loop(cond_body, body, c_avals + k_avals + [TAPE, i32], nc,
                list(consts) + list(carry) + [emit.tape_new(), emit.scalar(0, i32)],
                cond_fn.name, body_fn.name + "_record")
    return list(res[:nk]), (res[nk], res[nk + 1])


def _while_vjp(cts, primals, outs, residuals, *, cond_fn, body_fn, num_consts):
    emit, _, vjp, _, _, _ = _ad()
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
        return [emit.gt(inputs[-1], 0)]

    def body(inputs):
        cs = inputs[:nc]
        acc = inputs[nc:nc + na]
        ctk = inputs[nc + na:nc + na + nct]
        t, n = inputs[nc + na + nct], inputs[-1]
        popped = emit.tape_pop(t, types=types_of(k_avals))
        t, ks = popped[0], list(popped[1:])
        it = iter(ctk)
        ct = [next(it) if d else None for d in dk]
        _, cts_in = vjp.vjp_emit(body_fn, list(cs) + ks, ct, dc + dk)
        c_in, k_in = cts_in[:nc], cts_in[nc:]
        ita = iter(acc)
        new_acc = []
        for c, d, a in zip(c_in, dc, c_avals):
            if d:
                prev = next(ita)
                new_acc.append(prev if c is None else emit.add(prev, c))
        new_ct = [vjp.instantiate(c, a) for c, a, d in zip(k_in, k_avals, dk) if d]
        return list(new_acc) + new_ct + [t, emit.sub(n, 1)]
    init_acc = [emit.zeros(a) for a in acc_avals]
    init_ct = [vjp.instantiate(c, a) for c, a, d in zip(cts, k_avals, dk) if d]
    res = _loop(cond_body, body, c_avals + acc_avals + ctk_avals + [TAPE, i32], nc,
                list(consts) + init_acc + init_ct + [tape, trips],
                "while_bwd_cond", body_fn.name + "_bwd")
    ita, itk = iter(res[:na]), iter(res[na:na + nct])
    return [next(ita) if d else None for d in dc] + [next(itk) if d else None for d in dk]


while_loop.rules.update(jvp_eqn=_while_jvp, vjp_fwd=_while_vjp_fwd, vjp=_while_vjp)


def _scan_jvp(eqn, ins, tins):
    emit, jvp, _, current, _, _ = _ad()
    p = eqn.params
    body_fn, nc, nk = p["body"], p["num_consts"], p["num_carry"]
    consts, carry, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
    t_c, t_k, t_x = tins[:nc], tins[nc:nc + nk], tins[nc + nk:]
    nz_c = [t is not None for t in t_c]
    nz_x = [t is not None for t in t_x]
    nz_k = [t is not None for t in t_k]
    while True:
        out = jvp.tangent_pattern(body_fn, nz_c + nz_k + nz_x)
        new = [a or b for a, b in zip(nz_k, out[:nk])]
        if new == nz_k:
            break
        nz_k = new
    nz_y = out[nk:]
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
        outs, touts = jvp.jvp_emit(body_fn, list(cs) + list(ks) + list(xsl),
                                   spread(tcs, nz_c) + spread(tks, nz_k) + spread(txs, nz_x))
        o_avals = body_fn.out_avals
        tk_out = [jvp.instantiate(t, a) for t, a, z in zip(touts[:nk], o_avals[:nk], nz_k) if z]
        ty_out = [jvp.instantiate(t, a) for t, a, z in zip(touts[nk:], o_avals[nk:], nz_y) if z]
        return list(outs[:nk]) + tk_out + list(outs[nk:]) + ty_out
    (bf,), outer = _regions([(body_fn.name + "_jvp", body)], [a for g in groups for a in g])
    init_tk = [jvp.instantiate(t, a) for t, a, z in zip(t_k, k_avals, nz_k) if z]
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


def _scan_vjp_fwd(eqn, ins):
    emit, jvp, _, current, _, _ = _ad()
    p = eqn.params
    body_fn, nc, nk = p["body"], p["num_consts"], p["num_carry"]
    in_avals = [v.aval for v in body_fn.invars]

    def body(inputs):
        outs, _ = jvp.jvp_emit(body_fn, inputs, [None] * len(inputs))
        return list(outs) + list(inputs[nc:nc + nk])
    (bf,), outer = _regions([(body_fn.name + "_record", body)], in_avals)
    res = current().bind(scan, list(outer) + list(ins), dict(
        body=bf, length=p["length"], reverse=p["reverse"], num_consts=len(outer) + nc,
        num_carry=nk))
    n_out = len(eqn.outvars)
    return list(res[:n_out]), list(res[n_out:])


def _scan_vjp(cts, primals, outs, residuals, *, body, length, reverse=False, num_consts=0,
              num_carry=0):
    emit, _, vjp, current, _, _ = _ad()
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
        _, cts_in = vjp.vjp_emit(body, list(cs) + list(ks) + list(xsl), ct, dc + dk + dx)
        c_in, k_in, x_in = cts_in[:nc], cts_in[nc:nc + nk], cts_in[nc + nk:]
        ita = iter(acc)
        new_acc = []
        for c, d in zip(c_in, dc):
            if d:
                prev = next(ita)
                new_acc.append(prev if c is None else emit.add(prev, c))
        new_ct = [vjp.instantiate(c, a) for c, a, d in zip(k_in, k_avals, dk) if d]
        ct_xs = [vjp.instantiate(c, a) for c, a, d in zip(x_in, x_avals, dx) if d]
        return new_acc + new_ct + ct_xs
    in_avals = c_avals + acc_avals + ctk_avals + k_avals + x_avals + cty_avals
    (bf,), outer = _regions([(body.name + "_bwd", bwd)], in_avals)
    init_acc = [emit.zeros(a) for a in acc_avals]
    init_ct = [vjp.instantiate(c, a) for c, a, d in zip(ct_k, k_avals, dk) if d]
    stacked_cy = [vjp.instantiate(c, a.update(shape=(length,) + a.shape))
                  for c, a, d in zip(ct_y, y_avals, dy) if d]
    res = current().bind(scan, list(outer) + list(consts) + init_acc + init_ct +
                         list(residuals) + list(xs) + stacked_cy, dict(
                             body=bf, length=length, reverse=not reverse,
                             num_consts=len(outer) + nc, num_carry=na + nct))
    ita, itk, itx = iter(res[:na]), iter(res[na:na + nct]), iter(res[na + nct:])
    return ([next(ita) if d else None for d in dc] + [next(itk) if d else None for d in dk] +
            [next(itx) if d else None for d in dx])


scan.rules.update(jvp_eqn=_scan_jvp, vjp_fwd=_scan_vjp_fwd, vjp=_scan_vjp)
