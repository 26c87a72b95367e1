"""The vocabulary that derivative and batching rules are written in.

Rules are short templates that read like the math (`mul(g, cos(x))`); each function here binds
one primitive into the innermost active `Builder`, so a rule run by a transform emits SSA
equations, which later passes simplify and which can be transformed again (higher orders).

- `emit.<primitive name>(*operands, **params)`: binds that primitive as-is (`emit.cos(x)`,
  `emit.reduce_sum(x, axes=(0,))`); module attribute lookup covers every registered primitive,
  with keyword spellings (`emit.and_`, `emit.not_`, `emit.slice_`, `emit.pow_`) for the ones
  that are Python keywords or builtins.
- Python numbers given to a binary helper (`add`, `sub`, `mul`, `div`, `max`, `min`, `pow_`,
  comparisons, `select`) take the dtype and weak type of the other operand, so `mul(x, 2)` is
  a multiplication by a literal of `x`'s type.
- helpers for what rules keep needing: `aval`, `zeros`, `zeros_like`, `ones_like`, `full`,
  `instantiate`, `convert`, `broadcast_to`, `sum_to_shape` (undo broadcasting), `select`,
  `cast_like`.

Operands are the builder's tracers, `Literal`s replayed from SSA, or static Python/NumPy
values. Rules must not use operators on tracers (those belong to the runtime's NumPy API).
"""
import numpy as np

from ..ir.abstract import ShapedArray
from ..ir.ssa import Literal
from ..ir import dtypes
from ..ir.builder import current
from .core import PRIMITIVES

_SPELLINGS = {"and_": "and", "or_": "or", "not_": "not", "slice_": "slice", "pow_": "pow",
              "abs_": "abs", "round_": "round", "max_": "max", "min_": "min"}


def bind(name, *args, **params):
    """Bind the primitive `name` into the current builder; its result(s)."""
    return current().bind(PRIMITIVES[name], args, params)


def _binder(name):
    def emit(*args, **params):
        return current().bind(PRIMITIVES[name], args, params)
    emit.__name__ = name
    return emit


def __getattr__(attr):
    name = _SPELLINGS.get(attr, attr)
    if name in PRIMITIVES:
        return _binder(name)
    raise AttributeError(f"kiln.compiler.primitives.emit has no {attr!r}")


# ---------------------------------------------------------------------------- types

def aval(x):
    """The abstract value of an operand (tracer, Literal, or static value)."""
    a = getattr(x, "aval", None)
    if a is not None:
        return a
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        dt, weak = dtypes.python_scalar_dtype(x)
        return ShapedArray((), dt, weak)
    v = getattr(x, "_value", None)
    if v is not None:
        return ShapedArray(v.shape, v.dtype, bool(getattr(x, "weak_type", False)))
    arr = np.asarray(x)
    return ShapedArray(arr.shape, dtypes.canonicalize(arr.dtype), False)


def scalar(value, like):
    """A rank-0 literal of `like`'s dtype and weak type."""
    a = like if isinstance(like, ShapedArray) else aval(like)
    return Literal(np.asarray(value, a.dtype)[()] if not a.weak_type
                   else np.asarray(value, a.dtype).item(), ShapedArray((), a.dtype, a.weak_type))


def _coerce(x, other):
    """Python numbers take the other operand's type."""
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return scalar(x, aval(other))
    return x


def _binary(name):
    def op(x, y):
        x, y = _coerce(x, y), _coerce(y, x)
        return current().bind(PRIMITIVES[name], (x, y), {})
    op.__name__ = name
    return op


add, sub, mul, div, rem, atan2 = (_binary(n) for n in ("add", "sub", "mul", "div", "rem", "atan2"))
max_, min_, pow_ = _binary("max"), _binary("min"), _binary("pow")
eq, ne, lt, le, gt, ge = (_binary(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))


def neg(x):
    return bind("neg", x)


def select(pred, on_true, on_false):
    """`on_true` where `pred`, else `on_false` (lax.select's argument order)."""
    on_true, on_false = _coerce(on_true, on_false), _coerce(on_false, on_true)
    return bind("select_n", pred, on_false, on_true)


def convert(x, dtype, weak_type=False):
    a = aval(x)
    dtype = np.dtype(dtype)
    if a.dtype == dtype and a.weak_type == weak_type:
        return x
    return bind("convert_element_type", x, new_dtype=dtype, weak_type=weak_type)


def cast_like(x, like):
    """`x` converted to the dtype and weak type of `like` (an operand or a ShapedArray)."""
    a = like if isinstance(like, ShapedArray) else aval(like)
    return convert(x, a.dtype, a.weak_type)


def full(shape, value, dtype, weak_type=False):
    lit = scalar(value, ShapedArray((), np.dtype(dtype), weak_type))
    shape = tuple(shape)
    if not shape:
        return bind("copy", lit)
    return bind("broadcast_in_dim", lit, shape=shape, broadcast_dimensions=())


def zeros(a):
    """Zeros of the abstract value `a` (empty tapes for reverse mode's tape type)."""
    if a.dtype.kind == "O":
        return broadcast_to(bind("tape_new"), a.shape)
    return full(a.shape, 0, a.dtype, a.weak_type)


def instantiate(t, aval):
    """A symbolic zero tangent or cotangent (None) made concrete: regions must return every
    one they declare."""
    return zeros(aval) if t is None else t


def zeros_like(x):
    return zeros(aval(x))


def ones_like(x):
    a = aval(x)
    return full(a.shape, 1, a.dtype, a.weak_type)


def broadcast_to(x, shape):
    """`x` (rank 0, or already of `shape`) broadcast to `shape`."""
    a = aval(x)
    shape = tuple(shape)
    if a.shape == shape:
        return x
    if a.shape:
        raise ValueError(f"broadcast_to: cannot broadcast {a.str_short()} to {shape}")
    return bind("broadcast_in_dim", x, shape=shape, broadcast_dimensions=())


def sum_to_shape(x, shape):
    """Undo the broadcast of an operand of `shape` (rank 0 or equal) to `x`'s shape."""
    a = aval(x)
    shape = tuple(shape)
    if a.shape == shape:
        return x
    if shape:
        raise ValueError(f"sum_to_shape: {a.str_short()} does not reduce to {shape}")
    return bind("reduce_sum", x, axes=tuple(range(len(a.shape))))


def is_float(x):
    """Whether values of this operand (or ShapedArray) carry derivatives (inexact numbers, and
    reverse mode's tapes)."""
    a = x if isinstance(x, ShapedArray) else aval(x)
    return a.dtype.kind in "fcO"
