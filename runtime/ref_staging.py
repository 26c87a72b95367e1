"""The Refs a function compiled by `kiln.jit` uses that were made outside it (closed over,
globals, arguments): how they enter and leave the compiled code.

While `jit` specialises a function, `RefStaging` (in `refs.STAGING.active`, set by `staging`) gives each such
Ref one traced view (`view`, `argument`): a traced Ref of the top-level builder whose value
starts as an input of the compiled function. A closed-over Ref's input is added on first use,
after the arguments' inputs; an argument Ref's input is its own argument leaf. Reads and writes
go to the view, in program order. When specialisation ends, `finish` makes the final value of
every view that was written an extra output, after the function's own outputs, and returns a
`RefIO`: what each call passes in (the closed-over Refs' values at call time) and writes back
(the new values, into the caller's Ref objects) — the way writes to globals are assigned.
"""
from .array import Array
from .compiler.ir.abstract import ShapedArray
from .refs import Ref


class RefStaging:
    """The views of the eager Refs a `jit` specialisation (top-level `builder`) uses."""

    def __init__(self, builder):
        self.builder = builder
        self.views = {}     # id(eager Ref) -> (target, view, its input tracer)
        self.inputs = []    # the closed-over Refs, in the order of their inputs

    def view(self, ref):
        """The traced view of the closed-over Ref `ref` (its input made on first use)."""
        hit = self.views.get(id(ref))
        if hit is not None:
            return hit[1]
        value = ref._value
        if value is None:
            raise ValueError("this Ref was invalidated by kiln.freeze or kiln.free_ref; make a "
                             "new one with kiln.new_ref")
        tracer = self.builder.new_input(ShapedArray(value.shape, value.dtype, value.weak_type),
                                        "ref")
        self.inputs.append(ref)
        return self._add(ref, ref, tracer)

    def argument(self, ref, tracer, index):
        """The traced view of the Ref passed as dynamic argument leaf `index` (input
        `tracer`)."""
        if id(ref) in self.views:
            raise ValueError(f"only one reference to a mutable array may be passed as an "
                             f"argument to a function compiled by kiln.jit, but the Ref of "
                             f"type Ref{{{tracer.aval.str_short()}}} appears at argument "
                             f"leaves {self.views[id(ref)][0]} and {index}")
        return self._add(ref, index, tracer)

    def _add(self, ref, target, tracer):
        view = Ref(tracer, ref.memory_space, ref.kind, home=self.builder)
        self.views[id(ref)] = (target, view, tracer)
        return view

    def finish(self, out_leaves):
        """The RefIO of this specialisation; the written views' values are appended to
        `out_leaves`."""
        writes = []
        for target, view, tracer in self.views.values():
            if view._value is not tracer:
                writes.append((target, len(out_leaves)))
                out_leaves.append(view._value)
        return RefIO(self.inputs, writes) if self.inputs or writes else None


class RefIO:
    """A compiled function's Refs at run time: `inputs` (closed-over Refs, read at each call)
    and `writes` ((a Ref or an argument leaf's index, the output holding its new value))."""
    __slots__ = ("inputs", "writes")

    def __init__(self, inputs, writes):
        self.inputs = inputs
        self.writes = writes

    def values(self):
        """The closed-over Refs' values, as the compiled code takes them."""
        out = []
        for ref in self.inputs:
            value = ref._value
            if value is None:
                raise ValueError("a Ref the compiled function uses was invalidated by "
                                 "kiln.freeze or kiln.free_ref; make a new one with "
                                 "kiln.new_ref")
            out.append(value._dense() if type(value) is Array else value)
        return out

    def assign(self, outs, leaves):
        """Write each new value (kiln Arrays `outs`) into its Ref (`leaves`: the call's
        dynamic argument leaves)."""
        for target, k in self.writes:
            ref = leaves[target] if type(target) is int else target
            ref._value = outs[k]
