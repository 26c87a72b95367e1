"""Python -> SSA: read the printed SSA form back into a `Function`.

Accepts exactly what `printer.to_ast`/`to_source` produce: a `def` with typed parameters whose
body is nested region `def`s, single-call assignments `outs = op(operands, **params)` and one
final `return`. Result types are recomputed with each primitive's abstract evaluation, so a
parsed program is type-checked as it is read. Anything else raises `SSASyntaxError` naming the
line.
"""
import gast
import numpy as np

from .. import astcompat as A
from .registry import PRIMITIVES
from .abstract import ShapedArray
from . import dtypes
from .printer import _TUPLE_TYPES, parse_type
from .ssa import Eqn, Function, Var, Literal, ssa_op_name

_BY_SPELLING = None


class SSASyntaxError(SyntaxError):
    """The text is not in the SSA form."""


def _prims():
    global _BY_SPELLING
    if _BY_SPELLING is None:
        _BY_SPELLING = {ssa_op_name(n): p for n, p in PRIMITIVES.items()}
    return _BY_SPELLING


def from_source(text):
    tree = A.parse(text)
    defs = [n for n in tree.body if isinstance(n, gast.FunctionDef)]
    if len(defs) != 1:
        raise SSASyntaxError("SSA text must hold exactly one top-level function")
    return from_ast(defs[0])


def _fail(node, msg):
    line = getattr(node, "lineno", "?")
    return SSASyntaxError(f"line {line}: {msg}")


def _type_of(node):
    if not isinstance(node, gast.Constant) or not isinstance(node.value, str):
        raise _fail(node, "parameters need a type annotation like 'f32[3,4]'")
    try:
        return parse_type(node.value)
    except ValueError as e:
        raise _fail(node, str(e)) from None


def _const_value(node):
    if isinstance(node, gast.Constant):
        return node.value
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        return -_const_value(node.operand)
    if isinstance(node, gast.Name) and node.id in ("inf", "nan"):
        return float(node.id)
    if isinstance(node, gast.BinOp) and isinstance(node.op, (gast.Add, gast.Sub)):
        left, right = _const_value(node.left), _const_value(node.right)  # complex: (1+2j)
        return left + right if isinstance(node.op, gast.Add) else left - right
    raise _fail(node, f"expected a constant, got {type(node).__name__}")


def from_ast(fdef, regions_scope=None):
    env = {}
    invars = []
    for arg in fdef.args.args:
        v = Var(arg.id, _type_of(arg.annotation))
        env[arg.id] = v
        invars.append(v)
    regions = dict(regions_scope or {})
    eqns = []
    for stmt in fdef.body:
        if isinstance(stmt, gast.FunctionDef):
            regions[stmt.name] = from_ast(stmt, regions)
        elif isinstance(stmt, gast.Assign):
            eqns.append(_eqn(stmt, env, regions))
        elif isinstance(stmt, gast.Return):
            vals = stmt.value.elts if isinstance(stmt.value, gast.Tuple) else [stmt.value]
            outvars = [_operand(v, env) for v in vals]
            return Function(fdef.name, invars, eqns, outvars)
        else:
            raise _fail(stmt, f"{type(stmt).__name__} statements are not part of the SSA form")
    raise _fail(fdef, f"function {fdef.name} has no return")


def _operand(node, env):
    if isinstance(node, gast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, gast.Call) and isinstance(node.func, gast.Name):
        dtype = np.dtype(node.func.id)
        value = np.asarray(_const_value(node.args[0]), dtype)[()]
        return Literal(value, ShapedArray((), dtype, False))
    value = _const_value(node)
    dtype, weak = dtypes.python_scalar_dtype(value)
    return Literal(value, ShapedArray((), dtype, weak))


def _param(node, regions):
    if isinstance(node, gast.Tuple):
        return tuple(_param(e, regions) for e in node.elts)
    if isinstance(node, gast.Name):
        if node.id in regions:
            return regions[node.id]
        if node.id in ("inf", "nan"):
            return float(node.id)
        return np.dtype(node.id)
    if isinstance(node, gast.Call):
        fname = node.func.id
        if fname in _TUPLE_TYPES:
            return _TUPLE_TYPES[fname](**{k.arg: _param(k.value, regions)
                                          for k in node.keywords})
        return np.asarray(_const_value(node.args[0]), np.dtype(fname))[()]
    return _const_value(node)


def _eqn(stmt, env, regions):
    call = stmt.value
    if not isinstance(call, gast.Call) or not isinstance(call.func, gast.Name):
        raise _fail(stmt, "each statement must assign the result of one primitive call")
    prim = _prims().get(call.func.id)
    if prim is None:
        raise _fail(stmt, f"unknown primitive {call.func.id!r}")
    invars = [_operand(a, env) for a in call.args]
    params = {k.arg: _param(k.value, regions) for k in call.keywords}
    out = prim.abstract_eval(*[v.aval for v in invars], **params)
    out_avals = list(out) if prim.multiple_results else [out]
    target = stmt.targets[0]
    names = [t.id for t in target.elts] if isinstance(target, gast.Tuple) else [target.id]
    if len(names) != len(out_avals):
        raise _fail(stmt, f"{prim.name} produces {len(out_avals)} results, "
                          f"{len(names)} names assigned")
    outvars = []
    for n, aval in zip(names, out_avals):
        if n in env:
            raise _fail(stmt, f"{n!r} is assigned twice (SSA names are assigned once)")
        env[n] = Var(n, aval)
        outvars.append(env[n])
    return Eqn(outvars, prim, invars, params)
