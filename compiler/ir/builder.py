"""The SSA builder: where specialisation emits equations.

While a function is specialised, every traced value is a tracer (the runtime's `Tracer`, an
array-like object wrapping an SSA `Var`). Binding a primitive with a tracer operand appends an
equation to the innermost active `Builder` and returns tracers for its results, typed by the
primitive's abstract evaluation (and, for operands whose type carries a sharding, by the
runtime's `TYPED_RESULTS` rule). Operands that are not tracers are static: rank-0 values
become `Literal`s; larger arrays (globals, closures, constants computed at specialisation time)
become implicit arguments of the top-level function (`consts`). A tracer from an enclosing
builder used inside a region is captured: the region receives it as an extra input, so regions
stay closed.

Builders nest for regions (`cond` branches, loop bodies); names come from one `NameSupply` per
top-level function, so printed SSA is deterministic. The stack of active builders is per
thread (`STATE.stack`), so several threads can specialise functions at the same time;
`ACTIVE[0]` counts the active builders of all threads (a native jit call reads it instead of
this thread's stack, and leaves the call to Python while it is not 0).
"""
import contextlib
import threading

import numpy as np

from .abstract import ShapedArray
from . import dtypes
from .registry import PRIMITIVES
from .ssa import Eqn, Function, Var, Literal, NameSupply

TRACER_TYPE = None  # set by the runtime (kiln.tracer): the array-like wrapper around a Var
# Set by the runtime once a type carries a sharding (kiln.sharding_types):
# `typed(prim, in_avals, params, out_avals)`, the result types of an equation with an operand
# whose type carries a sharding (`.sharding`).
TYPED_RESULTS = [None]



class PerThread(threading.local):
    """Attributes with a value of their own in every thread: `PerThread(stack=list)` starts
    each thread's `stack` as `list()`."""

    def __init__(self, **factories):
        for name, make in factories.items():
            setattr(self, name, make())


STATE = PerThread(stack=list)   # `stack`: this thread's active builders, innermost last
# The number of active builders in all threads: while it is not 0, a native call of a jitted
# function goes through Python, which reads this thread's stack (runtime/jit.py).
ACTIVE = [0]
_ACTIVE_LOCK = threading.Lock()
_RESERVED = []


def reserved_names():
    """Names SSA variables must not take: primitive spellings, dtype names, printer names."""
    if not _RESERVED:
        from .printer import ssa_namespace   # gast: not needed by code that only runs
        _RESERVED.append(frozenset(ssa_namespace({n: None for n in PRIMITIVES})))
    return _RESERVED[0]


def current():
    """The innermost active builder, or None outside specialisation."""
    stack = STATE.stack
    return stack[-1] if stack else None


class Builder:
    def __init__(self, name, parent=None, names=None):
        self.name = name
        self.parent = parent
        self.names = names if names is not None else (
            parent.names if parent else NameSupply(reserved_names()))
        self.invars = []
        self.eqns = []
        self.captured = {}      # id(outer Var) -> (outer tracer, inner Var)
        self.aliases = {}       # id(outer Var) -> the Var of this region that stands for it
        self.consts = [] if parent is None else None   # top level: [(Var, ndarray)]
        self._const_ids = {}
        # Source location of the expression being specialised (a region starts at the
        # enclosing one's: the `lax.fori_loop(...)` call whose body it is).
        self.info = parent.info if parent is not None else None
        self.effects = False
        self.hint = "t"         # the name new results take (transforms set `y_dot`, `x_bar`)
        self.claimed = set() if parent is None else None  # ids of reused results (`claim`)

    # -------------------------------------------------------------------- context
    def __enter__(self):
        STATE.stack.append(self)
        with _ACTIVE_LOCK:
            ACTIVE[0] += 1
        return self

    def __exit__(self, *exc):
        STATE.stack.pop()
        with _ACTIVE_LOCK:
            ACTIVE[0] -= 1

    @property
    def root(self):
        b = self
        while b.parent is not None:
            b = b.parent
        return b

    # -------------------------------------------------------------------- values
    def new_input(self, aval, hint="arg"):
        v = Var(self.names.fresh(hint), aval)
        self.invars.append(v)
        return TRACER_TYPE(v, self)

    def tracer(self, var):
        return TRACER_TYPE(var, self)

    def operand(self, x):
        """The SSA operand (Var or Literal) for a tracer or a static value."""
        if type(x) is TRACER_TYPE:
            if x.builder is self:
                return x.var
            return self._capture(x)
        if type(x) is Literal:  # replayed by a transform: keeps its exact type
            return x
        return self._static(x)

    def alias(self, outer, inner):
        """In this region (and the regions inside it) the tracer `outer`, possibly of a
        specialisation that has finished, is this region's value `inner`."""
        self.aliases[id(outer.var)] = self.operand(inner)

    def _capture(self, t):
        key = id(t.var)
        alias = self.aliases.get(key)
        if alias is not None:
            return alias
        hit = self.captured.get(key)
        if hit is not None:
            return hit[1]
        if self.parent is None:
            raise RuntimeError(f"value {t.var.name} belongs to a specialisation that has "
                               f"finished; do not keep traced values between calls")
        self.parent.operand(t)  # make sure every enclosing level has it too
        inner = Var(self.names.fresh(t.var.name), t.var.aval)
        self.captured[key] = (t, inner)
        return inner

    def _static(self, x):
        value, weak = _static_value(x)
        if value.ndim == 0:
            return Literal(value[()] if not weak else value.item(),
                           ShapedArray((), value.dtype, weak))
        root = self.root
        key = id(x)
        var = root._const_ids.get(key)
        if var is None:
            var = Var(root.names.fresh("const"), ShapedArray(value.shape, value.dtype, weak))
            root.consts.append((var, value, x))
            root._const_ids[key] = var
        if root is self:
            return var
        return self._capture(TRACER_TYPE(var, root))

    def is_constant(self, tracer):
        """Whether `tracer` stands for a concrete array the function reads (one of the
        top-level function's `consts`), not a traced value."""
        return any(var is tracer.var for var, _, _ in self.root.consts)

    # -------------------------------------------------------------------- emission
    def bind(self, prim, args, params):
        operands = [self.operand(a) for a in args]
        in_avals = [o.aval for o in operands]
        out = prim.abstract_eval(*in_avals, **params)
        avals = list(out) if prim.multiple_results else [out]
        if TYPED_RESULTS[0] is not None and \
                any(getattr(a, "sharding", None) is not None for a in in_avals):
            avals = TYPED_RESULTS[0](prim, in_avals, params, avals)
        outvars = [Var(self.names.fresh(self.hint), a) for a in avals]
        self.eqns.append(Eqn(outvars, prim, operands, params, self.info))
        tracers = [TRACER_TYPE(v, self) for v in outvars]
        return tuple(tracers) if prim.multiple_results else tracers[0]

    @contextlib.contextmanager
    def naming(self, hint):
        """Name the results bound inside this block after `hint`."""
        old, self.hint = self.hint, hint
        try:
            yield
        finally:
            self.hint = old

    def claim(self, eqn, ins):
        """Append `eqn` itself if `ins` are exactly its operands (as this builder's values)
        and its results are not yet defined anywhere in this top-level function; a transform
        replaying a function in its own name space keeps the original names this way. An
        equation without variable operands is never claimed: it may be a region's, which a
        rule inlines (and its results are defined in the region already)."""
        if self.parent is not None or len(ins) != len(eqn.invars):
            return False   # a region's equations may still be in use where it came from
        if not any(type(v) is Var for v in eqn.invars):
            return False
        for x, v in zip(ins, eqn.invars):
            if x is v:
                continue
            if type(x) is not TRACER_TYPE or x.var is not v or x.builder is not self:
                return False
        claimed = self.root.claimed  # the equations (kept alive in eqns) keep their ids
        if any(id(v) in claimed for v in eqn.outvars):
            return False
        claimed.update(id(v) for v in eqn.outvars)
        self.eqns.append(eqn)
        return True

    def child(self, name):
        return Builder(self.names.fresh(name), parent=self)

    def build(self, outputs):
        """Finish: the Function whose inputs are (declared inputs, captured values, consts)."""
        outvars = [self.operand(o) for o in outputs]
        captured = [inner for _, inner in self.captured.values()]
        invars = list(self.invars) + captured
        if self.consts is not None:
            invars += [v for v, _, _ in self.consts]
        return Function(self.name, invars, self.eqns, outvars)



def _static_value(x):
    """(ndarray, weak) for a static operand: Python scalar, NumPy value or eager Array."""
    if isinstance(x, (bool, int, float, complex)):
        dtype, weak = dtypes.python_scalar_dtype(x)
        return np.asarray(x, dtype), weak
    value = getattr(x, "_value", None)
    if value is not None:
        return value, bool(getattr(x, "weak_type", False))
    arr = np.asarray(x)
    return arr.astype(dtypes.canonicalize(arr.dtype), copy=False), False


def trace_region(parent, name, fn, in_avals, hints=None):
    """Specialise the Python callable `fn` on fresh inputs of types `in_avals` as a region.

    `fn` takes the input tracers and returns a list of outputs (tracers or static values).
    Returns (the child builder, its output operands); `close_regions` turns one or more of
    these into Functions with a common signature.
    """
    child = parent.child(name)
    hints = hints or ["x"] * len(in_avals)
    with child:
        inputs = [child.new_input(a, h) for a, h in zip(in_avals, hints)]
        outputs = fn(inputs)
        outvars = [child.operand(o) for o in outputs]
    return child, outvars


def close_regions(children_outvars):
    """Give regions of one primitive a common signature: inputs are (the union of everything
    any of them captured, in first-seen order) followed by each region's own inputs.
    Returns (Functions, outer tracers to pass as the leading operands)."""
    order, outers = [], {}
    for child, _ in children_outvars:
        for key, (outer, _) in child.captured.items():
            if key not in outers:
                outers[key] = outer
                order.append(key)
    fns = []
    for child, outvars in children_outvars:
        cap = []
        for key in order:
            hit = child.captured.get(key)
            if hit is not None:
                cap.append(hit[1])
            else:
                outer = outers[key]
                cap.append(Var(child.names.fresh(outer.var.name), outer.var.aval))
        fns.append(Function(child.name, cap + list(child.invars), child.eqns, outvars))
    return fns, [outers[k] for k in order]
