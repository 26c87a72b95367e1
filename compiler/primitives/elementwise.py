"""Elementwise primitives: unary math, binary arithmetic, comparisons, bit operations,
select_n, clamp, and dtype conversion.

All operands of an n-ary elementwise primitive share one shape (rank-0 operands broadcast) and (except shifts' and
select_n's predicate) one dtype: broadcasting and promotion happen above, in `kiln.numpy` and
`kiln.lax`. The result is weakly typed only when every operand is. Integer semantics follow XLA,
not NumPy: `div` truncates towards zero, `rem` takes the dividend's sign, division by zero gives
-1 (`div`) and the dividend (`rem`), shifts by the bit width or more give 0 (or the sign fill).
"""
import importlib

import numpy as np

from ..ir.abstract import ShapedArray
from ..ir import dtypes
from .core import (register, check_same_dtypes, check_same_shapes, check_dtype_kinds, type_error,
                   elementwise_shape)

FLOAT = "f"
INEXACT = "fc"
INT = "iu"
INT_BOOL = "iub"
NUMBER = "iufc"
ANY = "biufc"
REAL_NUMBER = "iuf"
ORDERED = "biuf"

_KIND_TEXT = {
    FLOAT: "subtypes of floating",
    INEXACT: "subtypes of floating, complexfloating",
    INT: "subtypes of integer",
    INT_BOOL: "subtypes of integer, bool",
    NUMBER: "subtypes of number",
    ANY: "any dtype",
    REAL_NUMBER: "subtypes of integer, floating",
    ORDERED: "bool or subtypes of integer, floating",
}


def _same(aval):
    return aval.dtype


def _to_bool(aval):
    return dtypes.bool_


def _to_real(aval):
    return np.dtype(aval.dtype.char.lower()) if aval.dtype.kind == "c" else aval.dtype


def _real_of_complex(aval):
    return {np.dtype(np.complex64): dtypes.float32,
            np.dtype(np.complex128): dtypes.float64}.get(aval.dtype, aval.dtype)


def unary(name, np_fn, kinds, out_dtype=_same, keep_weak=True):
    """Factory: a one-operand elementwise primitive."""
    def abstract_eval(x, **params):
        check_dtype_kinds(name, x, kinds, _KIND_TEXT[kinds])
        return ShapedArray(x.shape, out_dtype(x), x.weak_type and keep_weak)
    return register(name, abstract_eval, np_fn)


def nary(name, np_fn, kinds, out_dtype=_same, arity=2):
    """Factory: an n-operand elementwise primitive with equal shapes and dtypes."""
    def abstract_eval(*avals, **params):
        if len(avals) != arity:
            raise type_error(name, f"takes {arity} operands, got {len(avals)}")
        check_same_dtypes(name, avals)
        for a in avals:
            check_dtype_kinds(name, a, kinds, _KIND_TEXT[kinds])
        check_same_shapes(name, avals)
        out = out_dtype(avals[0])
        weak = all(a.weak_type for a in avals) and out != dtypes.bool_
        return ShapedArray(elementwise_shape(avals), out, weak)
    return register(name, abstract_eval, np_fn)


# ------------------------------------------------------------------------------ unary math

def _round(x, rounding_method=0):
    if x.dtype.kind != "f":
        return x
    if rounding_method == 1:  # TO_NEAREST_EVEN
        return np.round(x)
    return (np.sign(x) * np.floor(np.abs(x) + np.asarray(0.5, x.dtype))).astype(x.dtype)


def _sign(x):
    if x.dtype.kind == "u":
        return (x > 0).astype(x.dtype)
    if x.dtype.kind == "c":
        a = np.abs(x)
        return np.where(a == 0, 0, x / np.where(a == 0, 1, a)).astype(x.dtype)
    return np.sign(x)


def _rsqrt(x):
    return (np.asarray(1, x.dtype) / np.sqrt(x)).astype(x.dtype)


def _special(name):
    """A scipy.special ufunc, imported on first use (keeps `import kiln` fast)."""
    fn = None

    def impl(x):
        nonlocal fn
        if fn is None:
            fn = getattr(importlib.import_module("scipy.special"), name)
        return fn(x).astype(x.dtype, copy=False)
    impl.__name__ = name
    return impl


def _population_count(x):
    bits = x.dtype.itemsize * 8
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    count = np.zeros(x.shape, dtype=x.dtype)
    for i in range(bits):
        count += ((u >> np.asarray(i, u.dtype)) & np.asarray(1, u.dtype)).astype(x.dtype)
    return count


def _clz(x):
    bits = x.dtype.itemsize * 8
    u = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    out = np.full(x.shape, bits, dtype=np.int64)
    for i in range(bits):  # highest set bit wins
        out = np.where((u >> np.uint64(i)) & np.uint64(1), bits - 1 - i, out)
    return out.astype(x.dtype)


def _not(x):
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


neg = unary("neg", np.negative, NUMBER)
sign = unary("sign", _sign, NUMBER)
floor = unary("floor", np.floor, FLOAT)
ceil = unary("ceil", np.ceil, FLOAT)
round_ = unary("round", _round, FLOAT)
is_finite = unary("is_finite", np.isfinite, FLOAT, _to_bool, keep_weak=False)
exp = unary("exp", np.exp, INEXACT)
exp2 = unary("exp2", np.exp2, INEXACT)
log = unary("log", np.log, INEXACT)
log1p = unary("log1p", np.log1p, INEXACT)
expm1 = unary("expm1", np.expm1, INEXACT)
tanh = unary("tanh", np.tanh, INEXACT)
logistic = unary("logistic", _special("expit"), INEXACT)
sin = unary("sin", np.sin, INEXACT)
cos = unary("cos", np.cos, INEXACT)
tan = unary("tan", np.tan, INEXACT)
asin = unary("asin", np.arcsin, INEXACT)
acos = unary("acos", np.arccos, INEXACT)
atan = unary("atan", np.arctan, INEXACT)
sinh = unary("sinh", np.sinh, INEXACT)
cosh = unary("cosh", np.cosh, INEXACT)
asinh = unary("asinh", np.arcsinh, INEXACT)
acosh = unary("acosh", np.arccosh, INEXACT)
atanh = unary("atanh", np.arctanh, INEXACT)
sqrt = unary("sqrt", np.sqrt, INEXACT)
rsqrt = unary("rsqrt", _rsqrt, INEXACT)
cbrt = unary("cbrt", np.cbrt, FLOAT)
abs_ = unary("abs", np.abs, NUMBER, _to_real)
not_ = unary("not", _not, INT_BOOL)
population_count = unary("population_count", _population_count, INT)
clz = unary("clz", _clz, INT)
erf = unary("erf", _special("erf"), FLOAT)
erfc = unary("erfc", _special("erfc"), FLOAT)
erf_inv = unary("erf_inv", _special("erfinv"), FLOAT)
lgamma = unary("lgamma", _special("gammaln"), FLOAT)
digamma = unary("digamma", _special("psi"), FLOAT)
real = unary("real", np.real, "c", _real_of_complex)
imag = unary("imag", np.imag, "c", _real_of_complex)
conj = unary("conj", np.conj, "c")
square = unary("square", np.square, NUMBER)
copy_p = unary("copy", np.copy, ANY)


def _integer_pow_eval(x, *, y):
    check_dtype_kinds("integer_pow", x, NUMBER, _KIND_TEXT[NUMBER])
    if not isinstance(y, int):
        raise TypeError(f"integer_pow: exponent must be a Python int, got {y!r}")
    if y < 0 and x.dtype.kind in "iu":
        raise TypeError(f"integer_pow: negative exponent {y} with integer dtype {x.dtype}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _integer_pow(x, *, y):
    # Repeated squaring, as XLA expands integer_pow: same rounding as the compiled code.
    if y == 0:
        return np.ones_like(x)
    base, acc, n = x, None, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else acc * base
        n >>= 1
        if n:
            base = base * base
    return (np.asarray(1, x.dtype) / acc).astype(x.dtype) if y < 0 else acc.astype(x.dtype)


integer_pow = register("integer_pow", _integer_pow_eval, _integer_pow)


# ----------------------------------------------------------------------------- binary math

def _int_div(a, b):
    if a.dtype.kind not in "iu":
        return np.true_divide(a, b).astype(a.dtype)
    safe_b = np.where(b == 0, 1, b).astype(a.dtype)
    q = np.floor_divide(a, safe_b)
    if a.dtype.kind == "i":
        fix = (np.remainder(a, safe_b) != 0) & ((a < 0) != (safe_b < 0))
        q = q + fix.astype(a.dtype)
    return np.where(b == 0, np.asarray(-1).astype(a.dtype), q).astype(a.dtype)


def _rem(a, b):
    if a.dtype.kind not in "iu":
        return np.fmod(a, b)
    safe_b = np.where(b == 0, 1, b).astype(a.dtype)
    return np.where(b == 0, a, np.fmod(a, safe_b)).astype(a.dtype)


def _pow(a, b):
    if a.dtype.kind in "iu":
        return np.power(a, np.maximum(b, 0)).astype(a.dtype)
    return np.power(a, b)


def _max(a, b):
    return np.maximum(a, b)


def _min(a, b):
    return np.minimum(a, b)


def _bits_of(dtype):
    return dtype.itemsize * 8


def _unsigned(dtype):
    return np.dtype(f"u{dtype.itemsize}")


def _shift_left(a, b):
    bits = _bits_of(a.dtype)
    u = a.view(_unsigned(a.dtype)) if a.dtype.kind == "i" else a
    s = b.astype(np.int64)
    out = np.where((s < 0) | (s >= bits), 0, u << np.clip(s, 0, bits - 1).astype(u.dtype))
    return out.astype(u.dtype).view(a.dtype)


def _shift_right_logical(a, b):
    bits = _bits_of(a.dtype)
    u = a.view(_unsigned(a.dtype))
    s = b.astype(np.int64)
    out = np.where((s < 0) | (s >= bits), 0, u >> np.clip(s, 0, bits - 1).astype(u.dtype))
    return out.astype(u.dtype).view(a.dtype)


def _shift_right_arithmetic(a, b):
    bits = _bits_of(a.dtype)
    signed = np.dtype(f"i{a.dtype.itemsize}")
    v = a.view(signed)
    s = np.clip(b.astype(np.int64), 0, bits - 1).astype(signed)
    s = np.where((b.astype(np.int64) < 0) | (b.astype(np.int64) >= bits), bits - 1, s).astype(signed)
    return (v >> s).astype(signed).view(a.dtype)


def _shift_eval(name):
    def abstract_eval(a, b):
        check_same_dtypes(name, (a, b))
        check_dtype_kinds(name, a, INT, _KIND_TEXT[INT])
        check_same_shapes(name, (a, b))
        return ShapedArray(elementwise_shape((a, b)), a.dtype, a.weak_type and b.weak_type)
    return abstract_eval


def _bitwise(np_bool_fn, np_int_fn):
    def impl(a, b):
        return np_bool_fn(a, b) if a.dtype == np.bool_ else np_int_fn(a, b)
    return impl


def _nextafter(a, b):
    return np.nextafter(a, b)


def _complex(a, b):
    out = dtypes.complex128 if a.dtype == dtypes.float64 else dtypes.complex64
    return (a + 1j * b.astype(out)).astype(out)


add = nary("add", np.add, NUMBER)
sub = nary("sub", np.subtract, NUMBER)
mul = nary("mul", np.multiply, NUMBER)
div = nary("div", _int_div, NUMBER)
rem = nary("rem", _rem, REAL_NUMBER)
pow_ = nary("pow", _pow, NUMBER)
max_ = nary("max", _max, ANY)
min_ = nary("min", _min, ANY)
atan2 = nary("atan2", np.arctan2, FLOAT)
nextafter = nary("nextafter", _nextafter, FLOAT)
and_ = nary("and", _bitwise(np.logical_and, np.bitwise_and), INT_BOOL)
or_ = nary("or", _bitwise(np.logical_or, np.bitwise_or), INT_BOOL)
xor = nary("xor", _bitwise(np.logical_xor, np.bitwise_xor), INT_BOOL)
complex_ = nary("complex", _complex, FLOAT,
                lambda a: dtypes.complex128 if a.dtype == dtypes.float64 else dtypes.complex64)
shift_left = register("shift_left", _shift_eval("shift_left"), _shift_left)
shift_right_logical = register("shift_right_logical", _shift_eval("shift_right_logical"),
                               _shift_right_logical)
shift_right_arithmetic = register("shift_right_arithmetic", _shift_eval("shift_right_arithmetic"),
                                  _shift_right_arithmetic)

eq = nary("eq", np.equal, ANY, _to_bool)
ne = nary("ne", np.not_equal, ANY, _to_bool)
lt = nary("lt", np.less, ORDERED, _to_bool)
le = nary("le", np.less_equal, ORDERED, _to_bool)
gt = nary("gt", np.greater, ORDERED, _to_bool)
ge = nary("ge", np.greater_equal, ORDERED, _to_bool)


# ------------------------------------------------------------------- select_n and clamp

def _select_n_eval(which, *cases):
    if not cases:
        raise TypeError("select_n requires at least one case")
    check_same_dtypes("select_n", cases)
    check_same_shapes("select_n", cases)
    if which.shape and which.shape != cases[0].shape:
        raise type_error("select_n", f"requires the predicate shape {which.shape} to be () or "
                         f"equal to the case shape {cases[0].shape}")
    if which.dtype == dtypes.bool_:
        if len(cases) > 2:
            raise type_error("select_n", "with a boolean predicate takes at most two cases")
    elif which.dtype.kind not in "iu":
        raise type_error("select_n", f"predicate must be bool or int32, got {which.dtype}")
    return ShapedArray(cases[0].shape, cases[0].dtype, all(c.weak_type for c in cases))


def _select_n(which, *cases):
    if len(cases) == 1:
        return cases[0]
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0])
    return np.choose(np.clip(which, 0, len(cases) - 1), np.broadcast_arrays(*cases))


select_n = register("select_n", _select_n_eval, _select_n)


def _clamp_eval(lo, x, hi):
    check_same_dtypes("clamp", (lo, x, hi))
    for bound in (lo, hi):
        if bound.shape and bound.shape != x.shape:
            raise type_error("clamp", f"requires bounds of shape () or {x.shape}, got "
                             f"{bound.shape}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


clamp = register("clamp", _clamp_eval, lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi))


# -------------------------------------------------------------------------- conversions

def _convert_eval(x, *, new_dtype, weak_type=False):
    return ShapedArray(x.shape, new_dtype, weak_type)


def _convert(x, *, new_dtype, weak_type=False):
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        x = np.real(x)
    if x.dtype.kind == "f" and new_dtype.kind in "iu":
        # XLA: NaN -> 0, out-of-range values saturate.
        info = np.iinfo(new_dtype)
        with np.errstate(invalid="ignore"):
            y = np.where(np.isnan(x), 0, np.clip(np.trunc(x), info.min, info.max))
            return np.where(y >= float(info.max), info.max,
                            np.where(y <= float(info.min), info.min,
                                     y.astype(new_dtype))).astype(new_dtype)
    if new_dtype == np.bool_:
        return x != 0
    return x.astype(new_dtype)


convert_element_type = register("convert_element_type", _convert_eval, _convert)


def _bitcast_eval(x, *, new_dtype):
    a, b = x.dtype.itemsize, new_dtype.itemsize
    if a == b:
        shape = x.shape
    elif a > b:
        shape = x.shape + (a // b,)
    else:
        if not x.shape or x.shape[-1] != b // a:
            raise type_error("bitcast_convert_type", f"from {x.dtype} to {new_dtype} requires "
                             f"a last dimension of {b // a}, got shape {x.shape}")
        shape = x.shape[:-1]
    return ShapedArray(shape, new_dtype, False)


def _bitcast(x, *, new_dtype):
    a, b = x.dtype.itemsize, new_dtype.itemsize
    x = np.ascontiguousarray(x)
    if a == b:
        return x.view(new_dtype)
    if a > b:
        return x.view(new_dtype).reshape(x.shape + (a // b,))
    return x.view(new_dtype).reshape(x.shape[:-1])


bitcast_convert_type = register("bitcast_convert_type", _bitcast_eval, _bitcast)
