"""A compact text that determines an SSA function: the disk cache key and module names hash it.

`key_text(fn)` says everything the printed SSA form says (names, types and weak types,
primitives, literals, params, regions), in a form about twenty times quicker to produce than
the printer's (compiler/ir/printer.py), which goes through Python ASTs.
"""
from ...ir.ssa import Function


def key_text(fn):
    """Everything the SSA text of `fn` says, in a compact form that is quicker to produce than
    the printed SSA (names, types, primitives, literals, params, regions)."""
    lines = []
    _key_lines(fn, lines, set())
    return "\n".join(lines)


def _key_lines(fn, lines, seen):
    lines.append(f"def {fn.name}({_operands(fn.invars)})")
    for eqn in fn.eqns:
        for region in eqn.regions():
            if id(region) not in seen:
                seen.add(id(region))
                _key_lines(region, lines, seen)
        params = ",".join(f"{k}={_param(v)}" for k, v in eqn.params.items())
        lines.append(f"{_operands(eqn.outvars)}={eqn.prim.name}({_operands(eqn.invars)};{params})")
    lines.append(f"return {_operands(fn.outvars)}")


def _operands(xs):
    return ",".join(f"{getattr(x, 'name', None) or repr(x.value)}:{x.aval.str_short()}"
                    f"{'~' if x.aval.weak_type else ''}" for x in xs)


def _param(value):
    if type(value) in (tuple, list):
        return "(" + ",".join(map(_param, value)) + ")"
    return f"@{value.name}" if isinstance(value, Function) else repr(value)
