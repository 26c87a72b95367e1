"""The writer of one StableHLO module: SSA names, operations, constants, regions.

A `Value` is an MLIR SSA name (`%7`, `%arg0`, `%3#1`) with kiln's abstract value. `Emitter`
writes the body of `@main` line by line; rules (the `STABLEHLO` table) call

    ctx.emit(text, aval)          one operation with one result; `text` is everything after
                                  `%n = ` (with its type signature); returns its Value
    ctx.constant(value, dtype)    a rank-0 constant (a complex one from two real parts)
    ctx.splat(value, aval), ctx.scalar_like(value, x)   the same, of `aval`'s / `x`'s type
    ctx.broadcast(x, shape, dims=())   stablehlo.broadcast_in_dim (x itself if it has the shape)
    ctx.convert(x, dtype)         stablehlo.convert (x itself if it has the dtype)
    ctx.unary(op, x), ctx.binary(op, a, b), ctx.compare(direction, a, b), ctx.select(p, a, b)
                                  the common operations in JAX's pretty-printed form
    ctx.generic(op, args, out_avals, regions, attrs)   an operation in generic form with
                                  `<{attrs}>` and regions, each (block argument avals,
                                  body(block Values) -> Values to return); returns its results
    ctx.lower_function(fn, args)  the equations of an SSA Function (a region of control flow)
                                  on `args`; returns its results' Values
    ctx.error(message)            a BackendUnsupportedError at the equation's source line

and read `ctx.eqn` (the equation being lowered), `ctx.out_avals` and `ctx.dots` (the custom-call
targets of matrix products the module's compiler provides, lower_module's `dots`). Every name is fresh in
the whole module (one counter), so nested regions never shadow; names are deterministic.
"""
import contextlib

import numpy as np

from ...errors import BackendUnsupportedError
from ...ir.abstract import ShapedArray
from ...ir.ssa import Literal
from ...primitives.core import STABLEHLO
from .types import tensor_type, scalar_text, signedness


class Value:
    __slots__ = ("name", "aval")

    def __init__(self, name, aval):
        self.name = name
        self.aval = aval

    @property
    def type(self):
        return tensor_type(self.aval)

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"{self.name}: {self.type}"


def signature(args, outs):
    """The `(tensor<..>, ...) -> tensor<..>` trailer of a generic operation."""
    ins = ", ".join(a.type for a in args)
    res = [tensor_type(a) for a in outs]
    return f"({ins}) -> " + (res[0] if len(res) == 1 else "(" + ", ".join(res) + ")")


class Emitter:
    def __init__(self):
        self.lines = []
        self.depth = 2
        self.count = 0
        self.eqn = None
        self.dots = {}   # {(dtype, lhs order, rhs order): custom-call target}
        self.partitioning = None   # module.Partitioning of a partitioned module
        self.manual = False   # lowering a shard_map's body: collectives name partitions
        # {(axis names, sizes): name}: the other meshes of the module's devices that
        # shard_maps in it run over, which a Shardy module declares (`@mesh_0`, ...)
        self.meshes = {}

    # ------------------------------------------------------------------ writing
    def line(self, text):
        self.lines.append("  " * self.depth + text)

    def fresh(self):
        name = f"%{self.count}"
        self.count += 1
        return name

    def emit(self, text, aval):
        name = self.fresh()
        self.line(f"{name} = {text}")
        return Value(name, aval)

    @property
    def out_avals(self):
        return [v.aval for v in self.eqn.outvars]

    def error(self, message):
        return BackendUnsupportedError(message, self.eqn.info if self.eqn else None)

    # ------------------------------------------------------------------ helpers
    def constant(self, value, dtype):
        dtype = np.dtype(dtype)
        aval = ShapedArray((), dtype, False)
        if dtype.kind == "c":
            part = np.dtype(f"f{dtype.itemsize // 2}")
            z = complex(value)
            re, im = self.constant(z.real, part), self.constant(z.imag, part)
            return self.emit(f"stablehlo.complex {re}, {im} : {tensor_type(aval)}", aval)
        return self.emit(f"stablehlo.constant dense<{scalar_text(value, dtype)}> : "
                         f"{tensor_type(aval)}", aval)

    def broadcast(self, x, shape, dims=()):
        shape = tuple(shape)
        if x.aval.shape == shape:
            return x
        aval = x.aval.update(shape=shape)
        return self.emit(f"stablehlo.broadcast_in_dim {x}, dims = {list(dims)} : "
                         f"({x.type}) -> {tensor_type(aval)}", aval)

    def convert(self, x, dtype):
        dtype = np.dtype(dtype)
        if x.aval.dtype == dtype:
            return x
        aval = x.aval.update(dtype=dtype, weak_type=False)
        return self.emit(f"stablehlo.convert {x} : ({x.type}) -> {tensor_type(aval)}", aval)

    def unary(self, op, x, aval=None):
        aval = aval or x.aval
        if aval.dtype == x.aval.dtype:
            return self.emit(f"{op} {x} : {x.type}", aval)
        return self.emit(f"{op} {x} : ({x.type}) -> {tensor_type(aval)}", aval)

    def binary(self, op, a, b, aval=None):
        aval = aval or a.aval
        return self.emit(f"{op} {a}, {b} : {tensor_type(aval)}", aval)

    def compare(self, direction, a, b, kind=None):
        aval = a.aval.update(dtype=np.dtype(bool), weak_type=False)
        kind = kind or signedness(a.aval.dtype)
        return self.emit(f"stablehlo.compare {direction}, {a}, {b}, {kind} : "
                         f"({a.type}, {b.type}) -> {tensor_type(aval)}", aval)

    def select(self, pred, on_true, on_false):
        return self.emit(f"stablehlo.select {pred}, {on_true}, {on_false} : "
                         f"{pred.type}, {on_true.type}", on_true.aval)

    def splat(self, value, aval):
        """A constant of `aval`'s dtype and shape."""
        return self.broadcast(self.constant(value, aval.dtype), aval.shape)

    def scalar_like(self, value, x):
        return self.splat(value, x.aval)

    # ------------------------------------------------------------------ regions
    @contextlib.contextmanager
    def region(self, avals):
        """The block `^bb0(%a: t, ...): ...` of one region of a generic operation."""
        args = [Value(self.fresh(), a) for a in avals]
        params = ", ".join(repr(a) for a in args)
        self.depth += 1
        if args:
            self.line(f"^bb0({params}):")
        self.depth += 1
        try:
            yield args
        finally:
            self.depth -= 2

    def ret(self, values):
        types = ", ".join(v.type for v in values)
        names = ", ".join(v.name for v in values)
        self.line(f"stablehlo.return {names} : {types}" if values else "stablehlo.return")

    def generic(self, op, args, out_avals, regions, attrs=None):
        """A generic-form operation with regions: `"op"(args) <{attrs}> ({...}, {...}) : sig`.
        `regions` is a list of (block argument avals, body(args) -> results); returns the
        results' Values."""
        attr = f" <{{{attrs}}}>" if attrs else ""
        first = self.fresh()
        n = len(out_avals)
        head = "" if n == 0 else (f"{first} = " if n == 1 else f"{first}:{n} = ")
        names = ", ".join(a.name for a in args)
        self.line(f'{head}"{op}"({names}){attr} ({{' if regions else
                  f'{head}"{op}"({names}){attr} : {signature(args, out_avals)}')
        for k, (avals, body) in enumerate(regions):
            if k:
                self.line("}, {")
            with self.region(avals) as block:
                self.ret(body(block))
        if regions:
            self.line(f"}}) : {signature(args, out_avals)}")
        if n == 1:
            return [Value(first, out_avals[0])]
        return [Value(f"{first}#{i}", a) for i, a in enumerate(out_avals)]

    # ------------------------------------------------------------------ functions
    def operand(self, x, env):
        if isinstance(x, Literal):
            return self.constant(x.value, x.aval.dtype)
        return env[x]

    def lower_function(self, fn, args):
        env = dict(zip(fn.invars, args))
        for eqn in fn.eqns:
            rule = STABLEHLO.get(eqn.prim)
            saved, self.eqn = self.eqn, eqn
            try:
                if rule is None:
                    raise self.error(f"the StableHLO backend has no lowering for "
                                     f"{eqn.prim.name!r}")
                ins = [self.operand(x, env) for x in eqn.invars]
                outs = rule(self, ins, **eqn.params)
            finally:
                self.eqn = saved
            for v, out in zip(eqn.outvars, outs):
                env[v] = out
        return [self.operand(x, env) for x in fn.outvars]

