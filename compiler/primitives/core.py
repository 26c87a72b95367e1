"""The primitive object, its registry, and the rule tables.

A primitive is declared once, with every rule side by side (Autodidax's "one object per
primitive, one table per transform"). Two parts every primitive has are fields, given to
`register`:

  abstract_eval(*avals, **params) -> ShapedArray | tuple of them   (shape/dtype rule; raises
                                                                     TypeError naming the op)
  impl(*ndarrays, **params)       -> ndarray | tuple of them        (the NumPy definition: what
                                                                     the reference backend and
                                                                     eager mode execute)

Everything else a transform or a backend needs is a rule in a `RuleTable`, one table per kind of
rule, each with one fixed signature documented beside it below (`TABLES` lists them). A family
module registers its primitives' rules right after declaring them,
`prim.def_rules(jvp=..., vjp=..., batch=...)`; a backend registers its lowerings the same way.
A rule of an unknown kind is a TypeError at import. A new backend adds its table here in one
line: `CUDA = rule_table("cuda", "cuda(ctx, outs, ins, **params) -> None")`.

Properties that are not rules are fields, False unless the declaration says otherwise:
`effect` (simplification never removes or merges it: a host callback), `zero_derivative`
(its results never carry tangents; it has no JVP or VJP rule), `distinct` (each result is a
new object, so CSE never merges two equations of it: a fresh tape), `collective` (it reduces
over named axes, `params["axis_name"]`, and has a `batch_collective` rule), `host` (it calls
a Python function on the host, so it is never evaluated while compiling: a `pure_callback`
with constant operands still runs when the compiled code does, as in JAX).

Families of similar primitives are built by the small factories in the family modules
(elementwise, structural, ...). Params must be hashable: eager execution caches abstract
evaluation on (primitive, operand types, params).
"""
import numpy as np

from ..ir.abstract import ShapedArray, shape_str
from ..ir.registry import PRIMITIVES

FLAGS = ("effect", "zero_derivative", "distinct", "collective", "host")


class Primitive:
    __slots__ = ("name", "abstract_eval", "impl", "multiple_results", "doc") + FLAGS

    def __init__(self, name, abstract_eval, impl, *, multiple_results=False, doc="",
                 effect=False, zero_derivative=False, distinct=False, collective=False,
                 host=False):
        self.name = name
        self.abstract_eval = abstract_eval
        self.impl = impl
        self.multiple_results = multiple_results
        self.doc = doc
        self.effect = effect
        self.zero_derivative = zero_derivative
        self.distinct = distinct
        self.collective = collective
        self.host = host

    def def_rules(self, **rules):
        """Register rules by kind (`jvp=..., vjp=..., batch=...`) in their tables."""
        for kind, rule in rules.items():
            table = TABLES.get(kind)
            if table is None:
                raise TypeError(f"primitive {self.name!r}: unknown rule kind {kind!r}; the "
                                f"rule kinds are {', '.join(sorted(TABLES))} (see "
                                "kiln/compiler/primitives/core.py)")
            table[self] = rule
        return self

    def __repr__(self):
        return f"<primitive {self.name}>"


def register(name, abstract_eval, impl, **kw):
    """Declare a primitive; names are unique across the whole registry."""
    if name in PRIMITIVES:
        raise RuntimeError(f"primitive {name!r} declared twice")
    prim = Primitive(name, abstract_eval, impl, **kw)
    PRIMITIVES[name] = prim
    return prim


# ---------------------------------------------------------------------------- rule tables


class RuleTable(dict):
    """Primitive -> rule of one kind; every rule in it has the table's `signature`."""

    def __init__(self, kind, signature):
        super().__init__()
        self.kind = kind
        self.signature = signature

    def __setitem__(self, prim, rule):
        if not isinstance(prim, Primitive):
            raise TypeError(f"the {self.kind} table is keyed by primitives, not {prim!r}")
        if not callable(rule):
            raise TypeError(f"the {self.kind} rule of {prim.name!r} is not callable: {rule!r}")
        super().__setitem__(prim, rule)

    def __repr__(self):
        return f"<rule table {self.kind}: {len(self)} rules>"


TABLES = {}


def rule_table(kind, signature):
    """Declare a table of rules of one kind (one line per kind, below)."""
    if kind in TABLES:
        raise RuntimeError(f"rule table {kind!r} declared twice")
    TABLES[kind] = table = RuleTable(kind, signature)
    return table


# Forward mode (transforms/jvp.py). Emits the equation on `primals` and the tangents of its
# results into the current builder; `tangents` and the returned tangents are aligned lists,
# None for a zero tangent. Control flow transforms its regions here; the rules of ordinary
# primitives are written as `f(primals, tangents, out, **params) -> tangent(s)` and adapted by
# `rule_forms.tangent_rule`.
JVP = rule_table("jvp", "jvp(eqn, primals, tangents) -> (outs, out_tangents)")

# Reverse mode (transforms/vjp.py). `ct` and `out` are the results' cotangents and values (one
# value, or lists for multiple results; a None cotangent is zero); returns the operands'
# cotangents, a list aligned with `primals`, None for none. `residuals` are what the
# primitive's `vjp_forward` rule returned (None without one). Rules that need no residuals are
# written as `f(ct, primals, out, **params)` and adapted by `rule_forms.cotangent_rule`.
VJP = rule_table("vjp", "vjp(ct, primals, out, residuals, **params) -> operand cotangents")

# Reverse mode's forward section, for primitives whose backward pass needs values from inside
# their regions (a while_loop that also tapes its carries, a scan that also stacks them):
# emits the equation's forward form; without this rule the equation is replayed as it is.
# `active` flags the operands being differentiated (a user primitive's transpose rule needs
# to know which of its operands are linear).
VJP_FORWARD = rule_table("vjp_forward",
                         "vjp_forward(eqn, primals, active) -> (outs, residuals)")

# Batching (transforms/vmap.py, vocabulary in batching.py). `dims[i]` is the batch axis of
# `args[i]`, None if unbatched (at least one is batched); returns the results and the axis of
# each that carries the batch (lists for multiple results).
BATCH = rule_table("batch", "batch(args, dims, **params) -> (outs, out_dims)")

# Batching a collective (`collective` primitives) over the very axis it reduces over
# (`vmap(..., axis_name=...)`): a computation across the batch of `size` examples.
BATCH_COLLECTIVE = rule_table(
    "batch_collective", "batch_collective(args, dims, *, size, axis, **params) -> (outs, out_dims)")

# checkify (transforms/checkify.py, vocabulary in checks.py): emits the equation on `ins` with
# the run-time checks of the error categories in `enabled` (FailedCheckError, NaNError, ...),
# merging each into `err` (a checks.ErrorState, updated in place); returns the results (a
# list). Equations without a rule are replayed unchanged.
CHECKIFY = rule_table("checkify", "checkify(eqn, ins, err, enabled) -> outs")

# Taylor mode (transforms/jet.py, `kiln.experimental.jet`; rules in taylor.py). `series[i]`
# is the list of operand i's Taylor coefficients x_1..x_K (not scaled by factorials), zeros
# where it has none; emits the equation and returns its results and, per result, its list of
# coefficients (None for none). Primitives marked `zero_derivative` need no rule.
JET = rule_table("jet", "jet(eqn, primals, series) -> (outs, out_series)")

# LLVM lowering of a whole equation (backends/llvm/codegen.py): `ctx` is the kernel being
# built, `outs`/`ins` are its Buffers; the rule emits loops and calls.
LLVM = rule_table("llvm", "llvm(ctx, outs, ins, **params) -> None")

# LLVM lowering of one element of an elementwise primitive (backends/llvm/lower_fused.py,
# lower_elementwise.py): returns the result's scalar value.
LLVM_SCALAR = rule_table(
    "llvm_scalar", "llvm_scalar(ctx, builder, args, in_avals, out_aval, **params) -> value")

# The (result, operand) pairs of `eqn` the LLVM backend may compute in place (buffers.py).
LLVM_INPLACE = rule_table("llvm_inplace", "llvm_inplace(eqn) -> ((result, operand), ...)")

# Bytes of scratch memory `eqn` needs beside its results (sort's workspace, regions' own).
LLVM_SCRATCH = rule_table("llvm_scratch", "llvm_scratch(eqn) -> int")

# CUDA C of one element of an elementwise primitive (backends/cuda/scalar.py): the expression
# computing the result from the operands' expressions `args` (C source text).
CUDA_SCALAR = rule_table(
    "cuda_scalar", "cuda_scalar(args, in_avals, out_aval, **params) -> C expression")

# StableHLO lowering of a whole equation (backends/stablehlo/): `ctx` is the function being
# written (its `eqn`, `out_avals`, `emit`, `constant`, `region`), `args` its operands as
# `Value`s (an MLIR SSA name and an abstract value); returns one `Value` per result.
STABLEHLO = rule_table("stablehlo", "stablehlo(ctx, args, **params) -> [Value per result]")


# ---------------------------------------------------------------------------- rule helpers


def type_error(op, msg):
    """A TypeError from a shape/dtype rule; message starts with the operation's name."""
    return TypeError(f"{op} {msg}")


# lax primitive -> the `jnp` function that promotes (JAX's tip in the same-dtypes error).
_JNP_EQUIVALENT = {
    "abs": "fabs", "acos": "arccos", "acosh": "arccosh", "add": "add", "asin": "arcsin",
    "asinh": "arcsinh", "atan": "arctan", "atan2": "arctan2", "atanh": "arctanh",
    "cbrt": "cbrt", "ceil": "ceil", "concatenate": "concatenate", "cos": "cos", "cosh": "cosh",
    "div": "divide", "eq": "equal", "exp": "exp", "expm1": "expm1", "floor": "floor",
    "log": "log", "log1p": "log1p", "max": "maximum", "min": "minimum", "mul": "multiply",
    "ne": "not_equal", "neg": "negative", "nextafter": "nextafter", "pow": "float_power",
    "round": "round", "select_n": "where", "shift_left": "left_shift",
    "shift_right_logical": "right_shift", "shift_right_arithmetic": "right_shift",
    "sign": "sign", "sin": "sin", "sinh": "sinh", "sqrt": "sqrt", "sub": "subtract",
    "tan": "tan", "tanh": "tanh",
}


def check_same_dtypes(op, avals):
    """JAX's error: `lax.add requires arguments to have the same dtypes, got float32, int32.`"""
    if len({a.dtype for a in avals}) > 1:
        name = "select" if op == "select_n" else op
        msg = (f"lax.{name} requires arguments to have the same dtypes, got "
               + ", ".join(str(a.dtype) for a in avals) + ".")
        if op in _JNP_EQUIVALENT:
            msg += (f" (Tip: jnp.{_JNP_EQUIVALENT[op]} is a similar function that does "
                    "automatic type promotion on inputs).")
        raise TypeError(msg)


def check_same_shapes(op, avals):
    """Elementwise operands share one shape; rank-0 operands broadcast (as in lax)."""
    shapes = {a.shape for a in avals if a.shape}
    if len(shapes) > 1:
        raise type_error(op, "got incompatible shapes for broadcasting: "
                         + ", ".join(shape_str(a.shape) for a in avals) + ".")


def elementwise_shape(avals):
    for a in avals:
        if a.shape:
            return a.shape
    return ()


def check_dtype_kinds(op, aval, kinds, what, position=None):
    """JAX's error: `exp does not accept dtype int32. Accepted dtypes are subtypes of ...`."""
    if aval.dtype.kind not in kinds:
        at = "" if position is None else f" at position {position}"
        raise type_error(op, f"does not accept dtype {aval.dtype}{at}. Accepted dtypes{at} "
                             f"are {what}.")


def check_axes(op, axes, ndim, name="axes"):
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or not 0 <= ax < ndim:
            raise ValueError(f"{op}: {name} {tuple(axes)} out of range for an array of rank {ndim}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: duplicate entries in {name} {tuple(axes)}")


def check_shape(op, shape, what="shape"):
    """JAX's `_check_shapelike`: a sequence of non-negative Python/NumPy ints."""
    for d in shape:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
            raise TypeError(f"{op} {what} must have every element be an integer type, got "
                            f"{tuple(type(v) for v in shape)}.")
    if any(d < 0 for d in shape):
        raise TypeError(f"{op} {what} must have every element be nonnegative, got "
                        f"{tuple(int(d) for d in shape)}.")
    return tuple(int(d) for d in shape)


def aval_of(shape, dtype, weak_type=False):
    return ShapedArray(shape, dtype, weak_type)
