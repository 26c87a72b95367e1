"""SSA -> Python: the canonical AST of a `Function`, and its readable text.

The AST form (`to_ast`) is what the reference backend compiles and what `parser.from_ast`
reads back. The text form (`to_source`) is that AST printed by astor, one statement per line,
with each statement's result types as a trailing comment and parameter/return types as
annotations:

    def predict(W: f32[3,4], x: f32[4]) -> f32[3]:
        t = dot_general(W, x, dimension_numbers=(((1,), (0,)), ((), ())), ...)  # f32[3]
        return t

Regions of structured control flow are nested `def`s printed just before the statement that
uses them. Literals print as Python scalars when weakly typed with the default dtype
(`2.0`) and as dtype constructors otherwise (`float16(2.0)`; a weak non-default literal reads
back as a strong one, which changes no result type after specialisation); dtypes as their names (`int32`), dimension-number
tuples as constructor calls. `ssa_namespace()` is the environment in which this text runs.
"""
import math

import numpy as np

from .. import astcompat as A
from .abstract import ShapedArray
from . import dtypes
from .ssa import Function, Literal, ssa_op_name

from .params import PARAM_TYPES as _TUPLE_TYPES


def type_node(aval):
    """The annotation for a value of type `aval`: the string "f32[3,4]" ("f32[]" for
    scalars; a string because an empty subscript is not Python syntax)."""
    return A.const(aval.str_short())


def _scalar_node(value):
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        base = A.name("nan" if math.isnan(value) else "inf")
        if value < 0:
            import gast
            return A.node(gast.UnaryOp, op=gast.USub(), operand=base)
        return base
    return A.const(value)


def literal_node(lit, typed=False):
    """A literal's spelling; `typed=True` spells weak literals with their dtype too (what the
    reference backend executes, so that `2.0` next to a float16 array stays float16)."""
    aval = lit.aval
    value = lit.value
    plain = aval.weak_type and aval.dtype == dtypes.default_for_kind(aval.dtype.kind)
    if plain and not typed:
        return _scalar_node(value if isinstance(value, (bool, int, float, complex))
                            else value.item())
    return A.call(np.dtype(aval.dtype).name, [_scalar_node(np.asarray(value).item())])


def param_node(value):
    if isinstance(value, Function):
        return A.name(value.name)
    if isinstance(value, np.dtype):
        return A.name(value.name)
    if isinstance(value, tuple) and type(value).__name__ in _TUPLE_TYPES:
        return A.call(type(value).__name__, [],
                      [(f, param_node(getattr(value, f))) for f in value._fields])
    if isinstance(value, (tuple, list)):
        return A.tuple_([param_node(v) for v in value])
    if value is None or isinstance(value, (bool, int, str)):
        return A.const(value)
    if isinstance(value, float):
        return _scalar_node(value)
    if isinstance(value, np.generic):
        return A.call(value.dtype.name, [_scalar_node(value.item())])
    raise TypeError(f"SSA params cannot hold a {type(value).__name__}: {value!r}")


def _operand_node(x, typed=False):
    return literal_node(x, typed) if isinstance(x, Literal) else A.name(x.name)


def eqn_node(eqn, typed=False):
    call = A.call(ssa_op_name(eqn.prim.name), [_operand_node(x, typed) for x in eqn.invars],
                  [(k, param_node(v)) for k, v in eqn.params.items()])
    if eqn.prim.multiple_results or len(eqn.outvars) != 1:
        target = A.tuple_([A.name(v.name, store=True) for v in eqn.outvars], store=True)
    else:
        target = A.name(eqn.outvars[0].name, store=True)
    return A.assign(target, call)


def _return_node(fn, typed=False):
    outs = [_operand_node(x, typed) for x in fn.outvars]
    return A.return_(outs[0] if len(outs) == 1 else A.tuple_(outs))


def _returns_annotation(fn):
    return A.const(_returns_text(fn))


def _returns_text(fn):
    rets = [v.aval.str_short() for v in fn.outvars]
    return rets[0] if len(rets) == 1 else "(" + ", ".join(rets) + ")"


def to_ast(fn, typed_literals=False):
    """The gast FunctionDef of `fn` (regions as nested defs before their use)."""
    body = []
    emitted = set()
    for eqn in fn.eqns:
        for region in eqn.regions():
            if id(region) not in emitted:
                emitted.add(id(region))
                body.append(to_ast(region, typed_literals))
        body.append(eqn_node(eqn, typed_literals))
    body.append(_return_node(fn, typed_literals))
    params = [(v.name, type_node(v.aval)) for v in fn.invars]
    return A.function_def(fn.name, params, body, _returns_annotation(fn))


def _types_comment(eqn):
    if not eqn.outvars:
        return ""
    return "  # " + ", ".join(v.aval.str_short() + ("{weak}" if v.aval.weak_type else "")
                              for v in eqn.outvars)


def _one_line(node):
    return A.to_source(A.module([node])).strip()


def to_source(fn, indent=""):
    """Readable SSA text: the AST printed by astor plus result types as comments."""
    params = ", ".join(f"{v.name}: '{v.aval.str_short()}'" for v in fn.invars)
    lines = [f"{indent}def {fn.name}({params}) -> '{_returns_text(fn)}':"]
    inner = indent + "    "
    emitted = set()
    for eqn in fn.eqns:
        for region in eqn.regions():
            if id(region) not in emitted:
                emitted.add(id(region))
                lines.append(to_source(region, inner).rstrip("\n"))
        lines.append(inner + _one_line(eqn_node(eqn)) + _types_comment(eqn))
    lines.append(inner + _one_line(_return_node(fn)))
    return "\n".join(lines) + "\n"


def ssa_namespace(primitive_impls):
    """Globals under which SSA text executes: primitives (by their SSA spelling), dtype
    constructors and names, params types, inf and nan."""
    ns = {ssa_op_name(name): impl for name, impl in primitive_impls.items()}
    for dt in dtypes.ALL:
        ns[dt.name] = DtypeConstructor(dt)
    ns.update(_TUPLE_TYPES)
    ns["inf"], ns["nan"] = math.inf, math.nan
    return ns


class DtypeConstructor:
    """`float32` in SSA text: a dtype when used as a param, a scalar constructor when called."""
    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)

    def __call__(self, value):
        return np.asarray(value, self.dtype)

    def __repr__(self):
        return self.dtype.name


def parse_type(text):
    """Parse `f32[3,4]`-style type text (with `{weak}` for a weak type) into a ShapedArray."""
    text = text.strip()
    if text.endswith("{weak}"):
        return parse_type(text[:-6]).update(weak_type=True)
    head, _, rest = text.partition("[")
    dims = rest.rstrip("]").strip()
    shape = tuple(int(d) for d in dims.split(",") if d.strip()) if dims else ()
    return ShapedArray(shape, dtypes.from_short_name(head))
