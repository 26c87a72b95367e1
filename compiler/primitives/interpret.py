"""SSA functions executed as Python over the primitives' NumPy implementations.

`Executable(fn)` turns the SSA function's canonical AST (`printer.to_ast`) into a Python
function by compiling it under `ssa_namespace`, where each primitive's spelling is bound to its
NumPy implementation and structured control flow (`cond`, `while_loop`, `scan`) to the region
interpreters its primitive declares. So the program that runs is exactly the program that
`kiln show --stage ssa` prints. It is the reference backend (backends/reference.py), and
`run_function` is how control-flow primitives' implementations run their regions.
"""
import numpy as np

from .. import astcompat as A
from ..ir.printer import to_ast, ssa_namespace, DtypeConstructor
from ..ir.ssa import Function
from .core import PRIMITIVES
from .autodiff import Tape
from .quiet import ignore, restore

_PASS_THROUGH = (np.ndarray, Tape)  # values handed over as they are (tapes are not arrays)


def _impl_wrapper(prim):
    impl = prim.impl

    def call(*args, **params):
        for k, v in params.items():
            if type(v) is DtypeConstructor:
                params[k] = v.dtype
        for a in args:
            if type(a) is not np.ndarray:   # (a literal, or a NumPy scalar a primitive made)
                args = [a if isinstance(a, _PASS_THROUGH) else np.asarray(a) for a in args]
                break
        return impl(*args, **params)
    call.__name__ = prim.name
    return call


_NAMESPACE = None


def namespace():
    global _NAMESPACE
    if _NAMESPACE is None:
        _NAMESPACE = ssa_namespace({name: _impl_wrapper(p) for name, p in PRIMITIVES.items()})
    return _NAMESPACE


class Executable:
    """A compiled SSA function: call it with NumPy arrays, get a list of NumPy arrays."""

    def __init__(self, fn):
        self.function = fn
        scope = dict(namespace())
        if fn.name in scope:   # a user function named like a primitive must not shadow it
            fn = Function(_free_name(fn.name, scope), fn.invars, fn.eqns, fn.outvars)
        tree = A.module([to_ast(fn, typed_literals=True)])
        code = compile(A.to_python_ast(tree), f"<kiln ssa {fn.name}>", "exec",
                       flags=_ANNOTATIONS_FLAG, dont_inherit=True)
        exec(code, scope)
        self._py = scope[fn.name]
        self._multi = len(fn.outvars) != 1

    def __call__(self, *args):
        token = ignore()   # IEEE results without NumPy's warnings, as compiled code gives them
        try:
            out = self._py(*args)
        finally:
            restore(token)
        outs = out if self._multi else (out,)
        return [o if isinstance(o, _PASS_THROUGH) else np.asarray(o) for o in outs]

    def as_text(self):
        from ..ir.printer import to_source
        return to_source(self.function)


import __future__  # noqa: E402

_ANNOTATIONS_FLAG = __future__.annotations.compiler_flag


def _free_name(name, scope):
    while name in scope:
        name += "_"
    return name


_REGIONS = {}  # id(region Function) -> (Function, Executable): regions compile once


def run_function(fn, *args):
    """Run a region (control-flow primitives call this on every iteration)."""
    hit = _REGIONS.get(id(fn))
    if hit is None or hit[0] is not fn:
        hit = _REGIONS[id(fn)] = (fn, Executable(fn))
    return hit[1](*args)
