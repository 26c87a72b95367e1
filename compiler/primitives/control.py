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
