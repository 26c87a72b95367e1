"""CUDA C for one element of an elementwise primitive: the `CUDA_SCALAR` rules.

Each rule returns a C expression over its operands' expressions (already of the operands' C
types: `ctype`). Every expression is parenthesised, so rules nest without precedence surprises.
The semantics are the reference backend's (NumPy's, with XLA's choices where they differ):
- `max`/`min` propagate NaN and order -0.0 below 0.0 (XLA), unlike CUDA's fmaxf;
- integer `div` truncates toward zero and `rem` takes the dividend's sign (C's), with a zero
  divisor giving the reference's results (-1 / the dividend: `_SAFE_DIV`);
- `convert_element_type` from float to integer saturates and maps NaN to 0 (XLA's), a C cast
  would be undefined there;
- booleans are `bool` in registers and one byte in memory.
Transcendental functions call CUDA's (float: `expf`, ...; double: `exp`, ...) as NVCC's
default flags compile them (no fast-math): their errors in ulps are CUDA's documented ones
(docs/cuda.md).

Only the primitives below have rules today; the code generator refuses any other with a
BackendUnsupportedError naming it.
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import CUDA_SCALAR

_CTYPES = {"bool": "bool", "int8": "signed char", "int16": "short", "int32": "int",
           "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
           "uint32": "unsigned int", "uint64": "unsigned long long", "float32": "float",
           "float64": "double"}


def ctype(dtype):
    """The C type of a `dtype` element in a register (None: not supported by the backend)."""
    return _CTYPES.get(np.dtype(dtype).name)


def int_constant(dtype, value):
    """A C integer constant of `dtype` (the most negative int64 written as an expression: its
    literal does not exist in C)."""
    dtype = np.dtype(dtype)
    wide = dtype.itemsize == 8
    suffix = ("ULL" if wide else "U") if dtype.kind == "u" else ("LL" if wide else "")
    value = int(value)
    if value < 0:
        return f"(({ctype(dtype)})({value + 1}{suffix} - 1))"
    return f"(({ctype(dtype)}){value}{suffix})"


def _is_float(aval):
    return aval.dtype.kind == "f"


def _fn(aval, name):
    """CUDA's math function `name` for the aval's float type (expf for float32)."""
    return name + "f" if aval.dtype == np.float32 else name


def _binary(op):
    def rule(args, in_avals, out_aval, **params):
        return f"({args[0]} {op} {args[1]})"
    return rule


def _unary_math(name):
    def rule(args, in_avals, out_aval, **params):
        return f"{_fn(out_aval, name)}({args[0]})"
    return rule


def _extremum(greater):
    def rule(args, in_avals, out_aval, **params):
        a, b = args
        if not _is_float(out_aval):
            return f"(({a}) {'>' if greater else '<'} ({b}) ? ({a}) : ({b}))"
        # NaN first; equal values: 0.0 over -0.0 for max, -0.0 for min (XLA)
        sign = "!" if greater else ""
        return (f"(({a}) != ({a}) ? ({a}) : ({b}) != ({b}) ? ({b}) : "
                f"({a}) {'>' if greater else '<'} ({b}) ? ({a}) : "
                f"({a}) == ({b}) && {sign}signbit({a}) ? ({a}) : ({b}))")
    return rule


def _div(args, in_avals, out_aval, **params):
    a, b = args
    if _is_float(out_aval):
        return f"({a} / {b})"
    minus_one = "-1" if out_aval.dtype.kind == "i" else f"(({ctype(out_aval.dtype)})-1)"
    return f"(({b}) == 0 ? {minus_one} : ({a}) / ({b}))"


def _rem(args, in_avals, out_aval, **params):
    a, b = args
    if _is_float(out_aval):
        return f"{_fn(out_aval, 'fmod')}({a}, {b})"
    return f"(({b}) == 0 ? ({a}) : ({a}) % ({b}))"


def _neg(args, in_avals, out_aval, **params):
    return f"(-{args[0]})"


def _abs(args, in_avals, out_aval, **params):
    a = args[0]
    if _is_float(out_aval):
        return f"{_fn(out_aval, 'fabs')}({a})"
    if out_aval.dtype.kind == "u":
        return f"({a})"
    return f"(({a}) < 0 ? -({a}) : ({a}))"


def _square(args, in_avals, out_aval, **params):
    return f"(({args[0]}) * ({args[0]}))"


def _rsqrt(args, in_avals, out_aval, **params):
    return f"{_fn(out_aval, 'rsqrt')}({args[0]})"


def _logistic(args, in_avals, out_aval, **params):
    one = "1.0f" if out_aval.dtype == np.float32 else "1.0"
    return f"({one} / ({one} + {_fn(out_aval, 'exp')}(-({args[0]}))))"


def _integer_pow(args, in_avals, out_aval, *, y):
    x = args[0]
    if y == 0:
        return f"(({ctype(out_aval.dtype)})1)"
    power = " * ".join([f"({x})"] * abs(y))
    return f"(({ctype(out_aval.dtype)})1 / ({power}))" if y < 0 else f"({power})"


def _pow(args, in_avals, out_aval, **params):
    base, exponent = args
    if in_avals[1].dtype.kind in "iu":
        exponent = f"(({ctype(out_aval.dtype)}){exponent})"
    return f"{_fn(out_aval, 'pow')}({base}, {exponent})"


def _compare(op):
    def rule(args, in_avals, out_aval, **params):
        return f"(({args[0]}) {op} ({args[1]}))"
    return rule


def _logical(op, boolean_op):
    def rule(args, in_avals, out_aval, **params):
        chosen = boolean_op if out_aval.dtype.kind == "b" else op
        return f"(({args[0]}) {chosen} ({args[1]}))"
    return rule


def _not(args, in_avals, out_aval, **params):
    return f"(!({args[0]}))" if out_aval.dtype.kind == "b" else f"(~({args[0]}))"


def _select_n(args, in_avals, out_aval, **params):
    which, *cases = args
    if len(cases) == 1:
        return f"({cases[0]})"
    if len(cases) == 2:
        return f"(({which}) ? ({cases[1]}) : ({cases[0]}))"
    out = f"({cases[-1]})"
    for k in reversed(range(len(cases) - 1)):
        out = f"(({which}) == {k} ? ({cases[k]}) : {out})"
    return out


def _convert(args, in_avals, out_aval, *, new_dtype, weak_type=False, sharding=None):
    x, source, target = args[0], in_avals[0].dtype, np.dtype(new_dtype)
    to = ctype(target)
    if target.kind == "b":
        return f"(({x}) != 0)"
    if source.kind == "f" and target.kind in "iu":
        info = np.iinfo(target)
        low, high = int_constant(target, info.min), int_constant(target, info.max)
        return (f"(({x}) != ({x}) ? ({to})0 : ({x}) <= ({ctype(source)}){low} ? {low} : "
                f"({x}) >= ({ctype(source)}){high} ? {high} : ({to})({x}))")
    return f"(({to})({x}))"


def _round_to(name):
    def rule(args, in_avals, out_aval, **params):
        return f"{_fn(out_aval, name)}({args[0]})"
    return rule


_RULES = {
    "add": _binary("+"), "sub": _binary("-"), "mul": _binary("*"), "div": _div, "rem": _rem,
    "neg": _neg, "abs": _abs, "square": _square, "max": _extremum(True),
    "min": _extremum(False), "integer_pow": _integer_pow, "pow": _pow,
    "exp": _unary_math("exp"), "log": _unary_math("log"), "sin": _unary_math("sin"),
    "cos": _unary_math("cos"), "tanh": _unary_math("tanh"), "sqrt": _unary_math("sqrt"),
    "log1p": _unary_math("log1p"), "expm1": _unary_math("expm1"), "rsqrt": _rsqrt,
    "logistic": _logistic, "floor": _round_to("floor"), "ceil": _round_to("ceil"),
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"), "le": _compare("<="),
    "gt": _compare(">"), "ge": _compare(">="), "and": _logical("&", "&&"),
    "or": _logical("|", "||"), "xor": _logical("^", "!="), "not": _not,
    "select_n": _select_n, "convert_element_type": _convert,
}

for _name, _rule in _RULES.items():
    CUDA_SCALAR[PRIMITIVES[_name]] = _rule
