"""Compact texts that determine SSA code: the disk cache key, module names and kernel sharing.

`key_text(fn)` says everything the printed SSA form says (names, types and weak types,
primitives, literals, params, regions), in a form about twenty times quicker to produce than
the printer's (compiler/ir/printer.py), which goes through Python ASTs. The disk cache key
and module names hash it.

`structure_text(eqn)` says the same of one equation with every name (of its operands, its
results, its regions and their values) replaced by its order of first appearance: two
equations with equal structure texts compute alike on operands in the same positions, so the
code generator (codegen.py) emits one kernel for both. Operands that are one value stay one
name (`mul(x, x)` is not `mul(a, b)`), because a kernel may read such an operand once. With
`shapes=False` the types lose their shapes (`f32`), for kernels that take their size as an
argument.
"""
import functools

from ...ir import dtypes
from ...ir.ssa import Function


def key_text(fn):
    """Everything the SSA text of `fn` says, in a compact form that is quicker to produce than
    the printed SSA (names, types, primitives, literals, params, regions)."""
    writer = _Writer(_own_name, _shaped)
    writer.function(fn)
    return "\n".join(writer.lines)


def structure_text(eqn, shapes=True):
    """The text of `eqn` and its regions with names replaced by their order of appearance
    (and types without shapes unless `shapes`)."""
    writer = _Writer(_Numbering(), _shaped if shapes else _unshaped)
    writer.equation(eqn)
    return "\n".join(writer.lines)


def _own_name(x):
    return x.name


@functools.lru_cache(maxsize=4096)
def _shaped(aval):
    return aval.str_short() + ("~" if aval.weak_type else "")


@functools.lru_cache(maxsize=4096)
def _unshaped(aval):
    return dtypes.short_name(aval.dtype) + ("~" if aval.weak_type else "")


class _Numbering:
    """Names objects `%0`, `%1`, ... in the order they are first asked about."""

    def __init__(self):
        self.numbers = {}

    def __call__(self, x):
        number = self.numbers.get(id(x))
        if number is None:
            number = self.numbers[id(x)] = len(self.numbers)
        return f"%{number}"


class _Writer:
    def __init__(self, name, type_name):
        self.name = name
        self.type_name = type_name
        self.lines = []
        self.seen = set()

    def function(self, fn):
        self.lines.append(f"def {self.name(fn)}({self.operands(fn.invars)})")
        for eqn in fn.eqns:
            self.equation(eqn)
        self.lines.append(f"return {self.operands(fn.outvars)}")

    def equation(self, eqn):
        for region in eqn.regions():
            if id(region) not in self.seen:
                self.seen.add(id(region))
                self.function(region)
        params = ",".join(f"{k}={self.param(v)}" for k, v in eqn.params.items())
        self.lines.append(f"{self.operands(eqn.outvars)}={eqn.prim.name}"
                          f"({self.operands(eqn.invars)};{params})")

    def operands(self, xs):
        return ",".join(f"{self.name(x) if hasattr(x, 'name') else repr(x.value)}:"
                        f"{self.type_name(x.aval)}" for x in xs)

    def param(self, value):
        if type(value) in (tuple, list):
            return "(" + ",".join(map(self.param, value)) + ")"
        return f"@{self.name(value)}" if isinstance(value, Function) else repr(value)
