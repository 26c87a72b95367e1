"""Traced values: what a jitted function's code sees in place of arrays while kiln specialises it.

A `Tracer` wraps an SSA `Var` of the builder that created it. It behaves like an `Array` for
everything that depends only on shape and dtype (operators, methods, indexing, `.at[]` — all
forwarded to `kiln.numpy`, which binds primitives and so emits SSA), and refuses what needs
its value (`bool()`, `float()`, `int()`, NumPy conversion) with a `ConcretizationError` that
says to mark the argument static. `Trace` stands for the function a Tracer belongs to, as JAX's
trace objects do.
"""
from .array import ArrayMethods
from .compiler.ir import builder as _builder
from .compiler.errors import ConcretizationError


class Trace:
    """A function being specialised, as JAX's trace objects stand for what is being traced:
    `main` is its builder (None outside any specialisation). `kiln.extend.core.find_top_trace`
    gives the current one and a traced value's `_trace` its own, so that `x._trace.main is
    find_top_trace(args).main` says whether `x` was computed in the function being traced
    (equinox's `filter_jvp` tells outputs with a derivative so)."""
    __slots__ = ("main",)

    def __init__(self, main):
        self.main = main

    def __repr__(self):
        return f"Trace({self.main!r})"


class Tracer(ArrayMethods):
    __slots__ = ("var", "builder", "__weakref__")

    def __init__(self, var, builder):
        self.var = var
        self.builder = builder

    @property
    def _kiln_trace(self):
        return self.builder

    @property
    def _trace(self):
        return Trace(self.builder)

    @property
    def aval(self):
        return self.var.aval

    @property
    def shape(self):
        return self.var.aval.shape

    @property
    def dtype(self):
        return self.var.aval.dtype

    @property
    def weak_type(self):
        return self.var.aval.weak_type

    @property
    def ndim(self):
        return len(self.var.aval.shape)

    @property
    def size(self):
        return self.var.aval.size

    def __repr__(self):
        return f"Traced<{self.var.aval.str_short()}>{self.var.name}"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def _concrete(self, what):
        raise ConcretizationError(
            f"{what} needs a concrete value, but this is a traced value "
            f"({self.var.aval.str_short()}) whose value is only known when the compiled "
            f"function runs.", self.builder.info,
            "Mark the argument it comes from as static with static_argnums/static_argnames, "
            "or keep the computation in kiln.numpy/lax (e.g. jnp.where instead of a Python "
            "branch on an element).")

    def __bool__(self):
        self._concrete("bool() of an array")

    def __int__(self):
        self._concrete("int() of an array")

    def __float__(self):
        self._concrete("float() of an array")

    def __complex__(self):
        self._concrete("complex() of an array")

    def __index__(self):
        self._concrete("Using an array as a Python index")

    def __array__(self, dtype=None, copy=None):
        self._concrete("Converting to a NumPy array")

    def item(self, *args):
        self._concrete(".item()")

    def tolist(self):
        self._concrete(".tolist()")

    def block_until_ready(self):
        return self


_builder.TRACER_TYPE = Tracer
