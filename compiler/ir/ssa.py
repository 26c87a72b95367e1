"""The SSA form: kiln's intermediate representation between specialisation and the backends.

A `Function` is a flat list of typed input `Var`s, a list of equations and a list of results.
Each `Eqn` is one statement `outs = primitive(operands..., **params)`: every name is assigned
exactly once, operands are `Var`s or rank-0 `Literal`s, and every `Var` carries its abstract
value. Structured control flow (`cond`, `while_loop`, `scan`) keeps its regions as nested
`Function`s in the equation's params; regions are closed (everything they read arrives as an
explicit operand), as in jaxprs.

This object graph is the working form of the passes; its canonical, printable and executable
form is a restricted Python AST (`compiler/ir/printer.py` builds it, `compiler/ir/parser.py`
reads it back, and the two round-trip exactly). The printed text is valid Python over the
primitive names, with each statement's type as a trailing comment.
"""
import keyword

import numpy as np

from .abstract import ShapedArray
from . import dtypes


class Var:
    """An SSA name with its abstract value."""
    __slots__ = ("name", "aval")

    def __init__(self, name, aval):
        self.name = name
        self.aval = aval

    def __repr__(self):
        return f"{self.name}:{self.aval.str_short()}"


class Literal:
    """A rank-0 constant operand (Python scalar for weak values, NumPy scalar otherwise)."""
    __slots__ = ("value", "aval")

    def __init__(self, value, aval):
        self.value = value
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.value!r}, {self.aval})"


class Eqn:
    """`outvars = prim(*invars, **params)`; `info` is the user source location, if any."""
    __slots__ = ("outvars", "prim", "invars", "params", "info")

    def __init__(self, outvars, prim, invars, params, info=None):
        self.outvars = list(outvars)
        self.prim = prim
        self.invars = list(invars)
        self.params = dict(params)
        self.info = info

    @property
    def primitive(self):
        """`prim`, under the name JAX's jaxpr equations give it."""
        return self.prim

    def regions(self):
        """The nested Functions held in params (control-flow bodies)."""
        out = []
        for v in self.params.values():
            if isinstance(v, Function):
                out.append(v)
            elif isinstance(v, tuple):
                out.extend(x for x in v if isinstance(x, Function))
        return out

    def __repr__(self):
        outs = ", ".join(map(repr, self.outvars))
        ins = ", ".join(map(repr, self.invars))
        return f"{outs} = {self.prim.name}({ins})"


class Function:
    """A specialised function (or a control-flow region) in SSA form."""
    __slots__ = ("name", "invars", "eqns", "outvars")

    def __init__(self, name, invars, eqns, outvars):
        self.name = name
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    def __str__(self):
        from .printer import to_source
        return to_source(self)

    def __repr__(self):
        return f"<SSA function {self.name}: {len(self.eqns)} equations>"


# ------------------------------------------------------------------------------- naming

def ssa_op_name(prim_name):
    """The Python spelling of a primitive in printed SSA (`and` is a keyword: `and_`)."""
    return prim_name + "_" if keyword.iskeyword(prim_name) else prim_name


class NameSupply:
    """Deterministic fresh names: user names where known, counters otherwise.

    `fresh("x")` gives `x`, then `x_1`, `x_2`, ...; names that are not identifiers or collide
    with Python keywords, builtins used by the printer, or primitive spellings are suffixed.
    """

    def __init__(self, reserved=()):
        self.used = set(reserved)
        self.counters = {}

    def fresh(self, hint="t"):
        base = _sanitize(hint)
        if base not in self.used:
            self.used.add(base)
            return base
        n = self.counters.get(base, 0)
        while True:
            n += 1
            name = f"{base}_{n}"
            if name not in self.used:
                self.counters[base] = n
                self.used.add(name)
                return name


def _sanitize(hint):
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in str(hint)) or "t"
    if name[0].isdigit():
        name = "v" + name
    if keyword.iskeyword(name):
        name += "_"
    return name


def literal(value, dtype=None, weak=None):
    """A Literal for a Python or NumPy scalar, typed as kiln would type it."""
    if dtype is None:
        if isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic):
            dtype, w = dtypes.python_scalar_dtype(value)
            weak = w if weak is None else weak
        else:
            dtype = dtypes.canonicalize(np.asarray(value).dtype)
    dtype = np.dtype(dtype)
    weak = bool(weak)
    value = np.asarray(value, dtype)[()]
    if weak:
        value = value.item()
    return Literal(value, ShapedArray((), dtype, weak))
