"""The primitive object and its registry.

A primitive is declared once, with every rule side by side (Autodidax's "one object per
primitive"):

  abstract_eval(*avals, **params) -> ShapedArray | tuple of them   (shape/dtype rule; raises
                                                                     TypeError naming the op)
  impl(*ndarrays, **params)       -> ndarray | tuple of them        (the NumPy definition: what
                                                                     the reference backend and
                                                                     eager mode execute)

Later stages attach further rules by name to the same object (`rules["jvp"]`, `rules["vjp"]`,
`rules["batch"]`, `rules["llvm"]`, ...), each with a fixed signature documented where that table
is consumed. Families of similar primitives are built by the small factories in the family
modules (elementwise, structural, ...). Params must be hashable: eager execution caches abstract
evaluation on (primitive, operand types, params).
"""
import numpy as np

from ..ir.abstract import ShapedArray, shape_str

PRIMITIVES = {}


class Primitive:
    __slots__ = ("name", "abstract_eval", "impl", "multiple_results", "rules", "doc")

    def __init__(self, name, abstract_eval, impl, *, multiple_results=False, doc=""):
        self.name = name
        self.abstract_eval = abstract_eval
        self.impl = impl
        self.multiple_results = multiple_results
        self.rules = {}
        self.doc = doc

    def __repr__(self):
        return f"<primitive {self.name}>"


def register(name, abstract_eval, impl, **kw):
    """Declare a primitive; names are unique across the whole registry."""
    if name in PRIMITIVES:
        raise RuntimeError(f"primitive {name!r} declared twice")
    prim = Primitive(name, abstract_eval, impl, **kw)
    PRIMITIVES[name] = prim
    return prim


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
