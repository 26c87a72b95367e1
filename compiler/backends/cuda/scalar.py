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

- shifts by a negative amount or the bit width or more give 0 (the sign's fill for an
  arithmetic right shift), as XLA's; `population_count` and `clz` count in the operand's width;
- `round` is C's `round` (half away from zero) or `rint` (half to even), `sign` keeps -0.0
  and NaN, `bitcast_convert_type` between types of one width reinterprets the bits.
Only the primitives below have rules today (not `digamma`, complex numbers, float16); the code
generator refuses any other with a BackendUnsupportedError naming it.
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


def _math(name):
    """CUDA's function `name` of the operands (expf(x), atan2f(y, x), fmaf(a, b, c), ...)."""
    def rule(args, in_avals, out_aval, **params):
        return f"{_fn(out_aval, name)}({', '.join(args)})"
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


def _round(args, in_avals, out_aval, rounding_method=0):
    # C's round is half away from zero (XLA's default); rint rounds half to even under the
    # default rounding mode (XLA's TO_NEAREST_EVEN)
    return f"{_fn(out_aval, 'rint' if int(rounding_method) == 1 else 'round')}({args[0]})"


def _sign(args, in_avals, out_aval, **params):
    x, t = args[0], ctype(out_aval.dtype)
    if not _is_float(out_aval):   # (for unsigned types x < 0 is false)
        return f"(({t})((({x}) > 0) - (({x}) < 0)))"
    # NaN stays NaN, -0.0 stays -0.0 (XLA)
    return f"(({x}) == 0 || ({x}) != ({x}) ? ({x}) : {_fn(out_aval, 'copysign')}(({t})1, {x}))"


def _is_finite(args, in_avals, out_aval, **params):
    return f"((bool)isfinite({args[0]}))"


def _identity(args, in_avals, out_aval, **params):
    return f"({args[0]})"


def _clamp(args, in_avals, out_aval, **params):
    lo, x, hi = args
    return _RULES["min"]([_RULES["max"]([x, lo], in_avals, out_aval), hi], in_avals, out_aval)


def _unsigned_type(dtype):
    return ctype(np.dtype(f"u{np.dtype(dtype).itemsize}"))


def _shift(direction, arithmetic=False):
    """XLA's shifts: by a negative amount or the bit width or more, 0 (or the sign's fill for
    an arithmetic right shift); computed on the unsigned (or signed) type of the width."""
    def rule(args, in_avals, out_aval, **params):
        a, b = args
        dtype = np.dtype(out_aval.dtype)
        bits, t = dtype.itemsize * 8, ctype(dtype)
        out_of_range = f"((unsigned long long)({b}) >= {bits}ULL)"
        if arithmetic:
            signed = ctype(np.dtype(f"i{dtype.itemsize}"))
            amount = f"({out_of_range} ? {bits - 1} : (int)({b}))"
            return f"(({t})(({signed})({a}) >> {amount}))"
        u = _unsigned_type(dtype)
        return f"({out_of_range} ? ({t})0 : ({t})(({u})(({u})({a}) {direction} (int)({b}))))"
    return rule


def _population_count(args, in_avals, out_aval, **params):
    dtype = np.dtype(out_aval.dtype)
    u = _unsigned_type(dtype)
    if dtype.itemsize == 8:
        return f"(({ctype(dtype)})__popcll(({u})({args[0]})))"
    return f"(({ctype(dtype)})__popc((unsigned int)({u})({args[0]})))"


def _clz(args, in_avals, out_aval, **params):
    dtype = np.dtype(out_aval.dtype)
    u = _unsigned_type(dtype)
    if dtype.itemsize == 8:
        return f"(({ctype(dtype)})__clzll((long long)({u})({args[0]})))"
    return (f"(({ctype(dtype)})(__clz((int)(unsigned int)({u})({args[0]})) - "
            f"{32 - dtype.itemsize * 8}))")


# CUDA's same-width reinterpretations between float and integer registers
_REINTERPRET = {4: ("__float_as_int", "__int_as_float", "int"),
                8: ("__double_as_longlong", "__longlong_as_double", "long long")}


def _bitcast(args, in_avals, out_aval, *, new_dtype):
    source, target = np.dtype(in_avals[0].dtype), np.dtype(new_dtype)
    x, to = args[0], ctype(target)   # (one width: another changes the shape, refused before)
    if source.kind == "f" and target.kind == "f" or source == target:
        return f"({x})"
    if source.kind == "f":
        return f"(({to}){_REINTERPRET[source.itemsize][0]}({x}))"
    if target.kind == "f":
        _, to_float, integer = _REINTERPRET[target.itemsize]
        return f"{to_float}(({integer})({x}))"
    return f"(({to})({x}))"   # integers of one width: the same bits (two's complement)


_RULES = {
    "add": _binary("+"), "sub": _binary("-"), "mul": _binary("*"), "div": _div, "rem": _rem,
    "neg": _neg, "abs": _abs, "square": _square, "max": _extremum(True),
    "min": _extremum(False), "integer_pow": _integer_pow, "pow": _pow,
    "exp": _math("exp"), "log": _math("log"), "sin": _math("sin"),
    "cos": _math("cos"), "tanh": _math("tanh"), "sqrt": _math("sqrt"),
    "log1p": _math("log1p"), "expm1": _math("expm1"), "rsqrt": _math("rsqrt"),
    "logistic": _logistic, "floor": _math("floor"), "ceil": _math("ceil"),
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"), "le": _compare("<="),
    "gt": _compare(">"), "ge": _compare(">="), "and": _logical("&", "&&"),
    "or": _logical("|", "||"), "xor": _logical("^", "!="), "not": _not,
    "select_n": _select_n, "convert_element_type": _convert,
    "exp2": _math("exp2"), "tan": _math("tan"), "asin": _math("asin"),
    "acos": _math("acos"), "atan": _math("atan"), "sinh": _math("sinh"),
    "cosh": _math("cosh"), "asinh": _math("asinh"),
    "acosh": _math("acosh"), "atanh": _math("atanh"),
    "cbrt": _math("cbrt"), "erf": _math("erf"), "erfc": _math("erfc"),
    "erf_inv": _math("erfinv"), "lgamma": _math("lgamma"),
    "atan2": _math("atan2"), "nextafter": _math("nextafter"), "fma": _math("fma"),
    "round": _round, "sign": _sign, "is_finite": _is_finite, "copy": _identity, "name": _identity,
    "stop_gradient": _identity, "no_derivative": _identity, "clamp": _clamp, "shift_left": _shift("<<"),
    "sharding_constraint": _identity,
    "shift_right_logical": _shift(">>"), "shift_right_arithmetic": _shift(">>", True),
    "population_count": _population_count, "clz": _clz, "bitcast_convert_type": _bitcast,
}

for _name, _rule in _RULES.items():
    CUDA_SCALAR[PRIMITIVES[_name]] = _rule
