"""The SSA verifier: checks that a `Function` is well formed, after every pass in tests.

`verify(fn)` checks, for the function and (recursively) every region it holds:
- single assignment: every name, inputs and region names included, is assigned exactly once
  across the function and all its regions (one `NameSupply` names a whole specialisation); a
  region object used by several equations is checked once;
- names are Python identifiers that are not keywords and do not shadow the names printed SSA
  runs under (primitive spellings, dtype constructors, params types, `inf`, `nan`);
- scoping: every operand and result is an input or was defined by an earlier equation of the
  same function; regions are closed (they read only their own inputs and what they define);
- operands are `Var`s or rank-0 `Literal`s;
- types: each equation's results have the shapes and dtypes its primitive's `abstract_eval`
  gives for its operand types and params, and the same weak types unless a literal operand is
  involved (printed literals may read back with a different weak type);
- params are hashable (passes compare equations by them).

A violation raises `SSAVerificationError` naming the function (with the path of enclosing
functions for a region), the equation and what is wrong. It signals a compiler bug, not a user
error.
"""
import keyword

import numpy as np

from .registry import PRIMITIVES
from .printer import ssa_namespace
from .ssa import Literal, Var


class SSAVerificationError(Exception):
    """The SSA form is malformed: a bug in the pass or frontend that produced it."""


def verify(fn):
    """Check `fn` (see the module docstring); return it unchanged when it is well formed."""
    _Verifier().function(fn, fn.name)
    return fn


class _Verifier:
    def __init__(self):
        self.names = {}       # name -> where it was assigned (for the message)
        self.seen = set()     # ids of regions already checked
        self.reserved = set(ssa_namespace(dict.fromkeys(PRIMITIVES)))

    def fail(self, where, eqn, what):
        at = f": {eqn!r}" if eqn is not None else ""
        return SSAVerificationError(f"in function {where}{at}: {what}")

    def define(self, var, where, eqn, scope):
        if type(var) is not Var:
            raise self.fail(where, eqn, f"{var!r} is assigned but is not a Var")
        self.name(var.name, where, eqn)
        scope.add(var)

    def name(self, name, where, eqn):
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise self.fail(where, eqn, f"name {name!r} is not a Python identifier")
        if name in self.reserved:
            raise self.fail(where, eqn, f"name {name!r} shadows a name of the SSA namespace "
                                        f"(a primitive, dtype or constant)")
        first = self.names.get(name)
        if first is not None:
            raise self.fail(where, eqn, f"name {name!r} is assigned twice (first in "
                                        f"{first}); SSA names are assigned once")
        self.names[name] = where

    def use(self, x, where, eqn, scope, what, in_region):
        if type(x) is Literal:
            if np.ndim(x.value) != 0 or x.aval.shape != ():
                raise self.fail(where, eqn, f"{what} {x!r} is a literal of rank > 0")
        elif type(x) is not Var:
            raise self.fail(where, eqn, f"{what} {x!r} is neither a Var nor a Literal")
        elif x not in scope:
            region = " (regions are closed: pass outer values in as operands)" \
                if in_region else ""
            raise self.fail(where, eqn, f"{what} {x.name!r} is used before it is defined or "
                                        f"outside its function{region}")

    def function(self, fn, where, in_region=False):
        scope = set()
        for v in fn.invars:
            self.define(v, where, None, scope)
        for eqn in fn.eqns:
            for x in eqn.invars:
                self.use(x, where, eqn, scope, "operand", in_region)
            self.params(eqn, where)
            for region in eqn.regions():
                if id(region) not in self.seen:
                    self.seen.add(id(region))
                    self.name(region.name, where, eqn)
                    self.function(region, f"{where} > {region.name}", True)
            for v in eqn.outvars:
                self.define(v, where, eqn, scope)
            self.types(eqn, where)
        for x in fn.outvars:
            self.use(x, where, None, scope, "result", in_region)

    def params(self, eqn, where):
        for k, v in eqn.params.items():
            try:
                hash(v)
            except TypeError:
                raise self.fail(where, eqn, f"param {k}={v!r} is not hashable") from None

    def types(self, eqn, where):
        prim = eqn.prim
        try:
            out = prim.abstract_eval(*[x.aval for x in eqn.invars], **eqn.params)
        except (TypeError, ValueError) as e:
            raise self.fail(where, eqn, f"{prim.name} rejects its operands: {e}") from None
        expected = list(out) if prim.multiple_results else [out]
        if len(expected) != len(eqn.outvars):
            raise self.fail(where, eqn, f"{prim.name} produces {len(expected)} results, "
                                        f"{len(eqn.outvars)} are assigned")
        loose_weak = any(type(x) is Literal for x in eqn.invars)
        for v, want in zip(eqn.outvars, expected):
            got = v.aval
            if (got.shape != want.shape or got.dtype != want.dtype
                    or (got.weak_type != want.weak_type and not loose_weak)):
                raise self.fail(where, eqn, f"{v.name!r} is typed {got} but {prim.name} "
                                            f"gives {want}")
