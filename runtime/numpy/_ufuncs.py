"""`kiln.numpy` elementwise functions: NumPy's ufuncs as JAX defines them, over `kiln.lax`.

Each function checks its arguments (lists are refused, as in JAX), promotes dtypes on JAX's
lattice (weak Python scalars keep the array's dtype), broadcasts, and calls `lax`. Functions
that NumPy computes in floating point (`sin`, `true_divide`, ...) promote integers and bools to
the default float first. Integer semantics are NumPy's where JAX keeps them (`floor_divide`
floors, `remainder` takes the divisor's sign), built from lax's C-style `div`/`rem`.

The functions follow JAX's own definitions step by step, so that values, dtypes, weak types and
error messages agree: constants are made as JAX makes them (`_const` is weak only next to a
weak scalar, `_constant_like` is always strong), which decides the weak type of results such
as `log2(2)` or `hypot(True_array, 3)`. Invalid dtypes are left to the primitives, whose
messages are JAX's (`jnp.bitwise_and(1.0, 1)`: "and does not accept dtype float32 ...").

Eager fast path: when both operands are already arrays of one dtype and shape, binary
functions bind their primitive directly (the general path would reach the same call, with
NumPy's floating-point warnings off likewise). With debug_nans or debug_infs on, the general
path runs, for its checks.
"""
import operator

import numpy as np

from ..array import Array, to_array
from ..custom_derivatives import custom_jvp
from ..dispatch import apply_binary
from ..array import TYPED, _SHARDINGS, placed_on
from ..sharding_propagation import one_shape_free
from ..execution_guards import STATE as _GUARDS
from ..float_checks import STATE as _FLOAT_CHECKS
from ..compiler.primitives.quiet import ignore as _quiet, restore as _restore
from .. import lax
from ..compiler.ir import dtypes
from ..compiler.primitives import PRIMITIVES
from ._core import (check_arraylike, promote_args, promote_args_inexact, promote_args_numeric,
                    promote_dtypes, promote_dtypes_inexact, promote_dtypes_numeric,
                    canonical_dtype, broadcast_shapes, broadcast_to)

__all__ = []


def _export(fn, *names):
    for name in (fn.__name__,) + names:
        globals()[name] = fn
        __all__.append(name)
    return fn


_PROMOTE = {"any": promote_args, "inexact": promote_args_inexact, "numeric": promote_args_numeric}
_FAST_KINDS = {"any": "biufc", "inexact": "fc", "numeric": "iufc"}


def _unary(name, lax_fn, promote="inexact", *aliases):
    promote_fn = _PROMOTE[promote]

    def fn(x, /):
        (x,) = promote_fn(name, x)
        return lax_fn(x)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}`, as `numpy.{name}` (JAX's dtype rules)."
    return _export(fn, *aliases)


def _binary(name, lax_fn, promote="any", *aliases, prim=None, fast_kinds=None):
    """A binary ufunc. `prim` enables the eager fast path for operands of the `fast_kinds`
    (default: what `promote` yields) that the primitive accepts as they are."""
    promote_fn = _PROMOTE[promote]
    fast_kinds = fast_kinds or _FAST_KINDS[promote]
    p = PRIMITIVES[prim] if prim else None
    impl = p.impl if p else None
    fast = {}  # (dtype, shape, weak, dtype, shape, weak) -> result weak_type

    def fn(x1, x2, /):
        where = None   # operands committed to one device (or one mesh, whole): placed after
        if TYPED and (id(x1) in TYPED or id(x2) in TYPED):   # (others: dispatch places)
            where = one_shape_free([_SHARDINGS.get(id(x1)), _SHARDINGS.get(id(x2))])
        if p is not None and type(x1) is Array and (where is not None or not (
                TYPED and (id(x1) in TYPED or id(x2) in TYPED))):
            t2 = type(x2)
            if t2 is float or t2 is int:
                x2 = _weak_scalar_like(x1, x2) or x2
                t2 = type(x2)
            if t2 is Array:
                v1, v2 = x1._value, x2._value
                key = (v1.dtype, v1.shape, x1.weak_type, v2.dtype, v2.shape, x2.weak_type)
                weak = fast.get(key)
                if weak is None and _fast_ok(v1, v2, x1, x2, fast_kinds):
                    weak = fast[key] = apply_binary(p, x1, x2).weak_type
                if weak is not None and type(v1) is np.ndarray is type(v2) and \
                        not (_GUARDS.no_execution or _FLOAT_CHECKS.on):   # host data
                    token = _quiet()
                    try:
                        value = impl(v1, v2)
                    finally:
                        _restore(token)
                    if type(value) is np.ndarray:
                        out = _new(Array)
                        out._value = value
                        out.weak_type = weak
                        return out if where is None else placed_on(out, where)
        x1, x2 = promote_fn(name, x1, x2)
        return lax_fn(x1, x2)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}`, as `numpy.{name}` (JAX's promotion and broadcasting)."
    return _export(fn, *aliases)


def _fast_ok(v1, v2, x1, x2, kinds):
    """Operands that need no promotion or broadcasting: the primitive applies directly."""
    return ((v1.dtype == v2.dtype and v1.dtype.kind in kinds)
            and (v1.shape == v2.shape or not v2.shape)
            and (x1.weak_type == x2.weak_type or (x2.weak_type and not v2.shape)))


_new = object.__new__


def _weak_scalar_like(x, s):
    """A Python scalar as a weak rank-0 array of x's dtype, when promotion would keep that
    dtype exactly (float scalars with inexact arrays, small ints with int32/inexact arrays)."""
    dtype = x._value.dtype
    kind = dtype.kind
    if kind in "fc" or (type(s) is int and dtype == dtypes.default_int()
                         and -2**31 <= s < 2**31):
        return _make_weak(np.asarray(s, dtype))
    return None


def _make_weak(value):
    a = object.__new__(Array)
    a._value = value
    a.weak_type = True
    return a


# ----------------------------------------------------------------------------- constants

def _const(x, value):
    """JAX's `lax._const`: a constant of x's dtype that is weakly typed only when x is a weak
    rank-0 value (a Python scalar); mixing it in decides the weak type of the result."""
    return lax.full_like(x, value, None if x.weak_type and not x.ndim else x.dtype)


def _constant_like(x, value):
    """JAX's `_constant_like`: a strongly typed constant of x's dtype."""
    return lax.full_like(x, value, x.dtype)


def _zero(x):
    return lax.full_like(x, 0)


def _one(x):
    return lax.full_like(x, 1)


def _strong(x):
    return lax.convert_element_type(x, x.dtype)


# ------------------------------------------------------------------------- arithmetic

def _add(x, y):
    return lax.bitwise_or(x, y) if x.dtype == dtypes.bool_ else lax.add(x, y)


def _mul(x, y):
    return lax.bitwise_and(x, y) if x.dtype == dtypes.bool_ else lax.mul(x, y)


_binary("add", _add, prim="add", fast_kinds="iufc")
_binary("subtract", lax.sub, prim="sub", fast_kinds="iufc")
_binary("multiply", _mul, prim="mul", fast_kinds="iufc")
_binary("true_divide", lax.div, "inexact", "divide", prim="div")


def _int_floor_div(x, y):
    q = lax.div(x, y)
    if x.dtype.kind == "u":
        return q
    fix = lax.bitwise_and(lax.ne(lax.sign(x), lax.sign(y)), lax.ne(lax.rem(x, y), _zero(x)))
    return lax.select(fix, lax.sub(q, _one(q)), q)


def _float_divmod(x, y):
    """NumPy's float divmod as JAX computes it (a zero divisor gives inf/nan quotients)."""
    mod = lax.rem(x, y)
    div = lax.div(where(lax.eq(y, _zero(y)), x, lax.sub(x, mod)), y)  # noqa: F821
    ind = lax.bitwise_and(lax.ne(mod, _zero(mod)), lax.ne(lax.sign(y), lax.sign(mod)))
    mod = lax.select(ind, lax.add(mod, y), mod)
    div = lax.select(ind, lax.sub(div, _one(div)), div)
    return lax.round(div), mod


def _floor_divide(x, y):
    if x.dtype.kind in "iu":
        return _int_floor_div(x, y)
    if x.dtype.kind == "c":
        raise TypeError("floor_divide does not support complex-valued inputs")
    return _float_divmod(x, y)[0]


def _nonzero_divisor(y):
    """Integer zero divisors become 1, as in JAX (`x % 0` and `fmod(x, 0)` are 0)."""
    if y.dtype.kind not in "iu":
        return y
    return lax.select(lax.eq(y, _zero(y)), _one(y), y)


def _remainder(x, y):
    zero = _constant_like(x, 0)
    y = _nonzero_divisor(y)
    mod = lax.rem(x, y)
    fix = lax.bitwise_and(lax.ne(lax.lt(mod, zero), lax.lt(y, zero)), lax.ne(mod, zero))
    return lax.select(fix, lax.add(mod, y), mod)


_binary("floor_divide", _floor_divide, "numeric")
_binary("remainder", _remainder, "numeric", "mod")


@_export
def fmod(x1, x2, /):
    """C's fmod: the remainder takes the dividend's sign. Integer zero divisors give 0."""
    x, y = promote_args("fmod", x1, x2)
    if x.dtype.kind in "iu":  # as JAX: only when the operands' common type is an integer
        y = _nonzero_divisor(y)
    return lax.rem(*promote_dtypes_numeric(x, y))


@_export
def divmod(x1, x2, /):  # noqa: A001
    """`(floor_divide(x1, x2), remainder(x1, x2))`, computed together for floats."""
    x, y = promote_args_numeric("divmod", x1, x2)
    if x.dtype.kind in "iu":
        return floor_divide(x, y), remainder(x, y)  # noqa: F821
    return _float_divmod(x, y)


def power(x1, x2, /):
    """`x1 ** x2`. A concrete integer exponent (Python int, NumPy integer or rank-0 integer
    array) becomes `lax.integer_pow`, exact as in JAX; integer arrays use six steps of binary
    exponentiation, as JAX does (exponents of 64 and more only keep their low six bits)."""
    check_arraylike("power", x1, x2)
    exponent = _concrete_index(x2)
    if exponent is None:
        return _power(x1, x2)
    (x,) = promote_dtypes_numeric(x1)
    if exponent < 0 and x.dtype.kind in "iu":
        shape = ",".join(map(str, x.shape))
        raise TypeError(f"Integers cannot be raised to negative powers, got "
                        f"integer_pow({x.dtype.name}[{shape}], {exponent})")
    return lax.integer_pow(x, exponent)


def _concrete_index(x):
    """`operator.index(x)` for a concrete value, None for traced or non-integer values."""
    if getattr(type(x), "_kiln_trace", None) is not None:
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def _power(x1, x2):
    x1, x2 = to_array(x1), to_array(x2)
    x, y = promote_args_numeric("power", x1, x2)
    if x.dtype.kind in "iu":
        return _pow_int_int(x, y)
    out = lax.pow(x, y)
    if x1.dtype.kind in "fc" and x2.dtype.kind in "iu" and not x2.weak_type:
        return _strong(out)  # JAX applies lax.pow to the integer exponent unpromoted
    return out


def _pow_int_int(x, y):
    zero, one = _constant_like(y, 0), _constant_like(y, 1)
    acc = where(lax.bitwise_and(lax.eq(x, zero), lax.ne(y, zero)), zero, one)  # noqa: F821
    for _ in range(6):  # larger exponents overflow for every |x| > 1
        acc = where(lax.bitwise_and(y, one), lax.mul(acc, x), acc)  # noqa: F821
        x = lax.mul(x, x)
        y = lax.shift_right_logical(y, one)
    return acc


_export(power, "pow")


@_export
def float_power(x1, x2, /):
    x, y = promote_args_inexact("float_power", x1, x2)
    return lax.pow(x, y)


_unary("negative", lax.neg, "any")


@_export
def positive(x, /):
    (x,) = promote_args("positive", x)
    return x


def _abs(x):
    return x if x.dtype.kind in "ub" else lax.abs(x)


_unary("absolute", _abs, "any", "abs")


@_export
def fabs(x, /):
    check_arraylike("fabs", x)
    if to_array(x).dtype.kind == "c":
        raise TypeError("ufunc 'fabs' does not support complex dtypes")
    (x,) = promote_args_inexact("fabs", x)
    return lax.abs(x)


_unary("sign", lax.sign, "any")
_unary("reciprocal", lambda x: lax.integer_pow(x, -1))
_binary("maximum", lax.max, "any", prim="max")
_binary("minimum", lax.min, "any", prim="min")


@_export
def fmax(x1, x2):
    """Elementwise maximum that ignores NaNs (NumPy's `fmax`)."""
    return where(logical_or(greater(x1, x2), isnan(x2)), x1, x2)  # noqa: F821


@_export
def fmin(x1, x2):
    """Elementwise minimum that ignores NaNs (NumPy's `fmin`)."""
    return where(logical_or(less(x1, x2), isnan(x2)), x1, x2)  # noqa: F821


# ------------------------------------------------------------- exponentials, logs, roots

_unary("exp", lax.exp)
_unary("exp2", lax.exp2)
_unary("expm1", lax.expm1)
_unary("log", lax.log)
_unary("log1p", lax.log1p)
_unary("sqrt", lax.sqrt)
_unary("cbrt", lax.cbrt)


def _log_scaled(scale):
    """log(x) * scale(x), applied to the real and imaginary parts of complex logs."""
    def fn(x):
        r = lax.log(x)
        if x.dtype.kind != "c":
            return scale(r)
        return lax.complex(scale(lax.real(r)), scale(lax.imag(r)))
    return fn


_unary("log2", _log_scaled(lambda r: lax.div(r, lax.log(_constant_like(r, 2)))))
_unary("log10", _log_scaled(lambda r: lax.mul(r, _constant_like(r, 0.4342944819032518))))
_unary("square", lax.square, "numeric")


def _wrap_between(x, a):
    """x wrapped into [-a, a)."""
    a_, two_a, zero = _const(x, a), _const(x, 2 * a), _const(x, 0)
    rem = lax.rem(lax.add(x, a_), two_a)
    return lax.sub(lax.select(lax.lt(rem, zero), lax.add(rem, two_a), rem), a_)


def _replace_posinf(x):
    """`x` with +inf (in the real part) replaced by 0, as JAX's logaddexp JVP uses it."""
    re = lax.real(x) if x.dtype.kind == "c" else x
    return lax.select(lax.eq(re, _constant_like(re, np.inf)), lax.full_like(x, 0), x)


def _logaddexp_with(exp_fn, scale, period):
    """log(exp(x) + exp(y)) in base e or 2 without overflow; complex inputs as JAX does. As in
    JAX, a custom JVP gives each input the weight exp(x - out) (+inf taken as 0 there), so the
    derivative at x == y is 1/2 each rather than what max and abs would give."""
    def fn(x, y):
        amax = lax.max(x, y)
        inv_log = _const(amax, scale) if scale != 1 else None

        def scaled(v):
            return v if inv_log is None else lax.mul(inv_log, v)
        if x.dtype.kind == "f":
            delta = lax.sub(x, y)
            return lax.select(lax.ne(delta, delta), lax.add(x, y),
                              lax.add(amax, scaled(lax.log1p(exp_fn(lax.neg(lax.abs(delta)))))))
        delta = lax.sub(lax.add(x, y), lax.mul(amax, _const(amax, 2)))
        out = lax.add(amax, scaled(lax.log1p(exp_fn(delta))))
        return lax.complex(lax.real(out), _wrap_between(lax.imag(out), period))
    fn = custom_jvp(fn)

    def fn_jvp(primals, tangents):
        out = fn(*primals)
        terms = [lax.mul(t, exp_fn(lax.sub(_replace_posinf(v), _replace_posinf(out))))
                 for v, t in zip(primals, tangents)]
        return out, lax.add(*terms)
    fn.defjvp(fn_jvp)
    return fn


_binary("logaddexp", _logaddexp_with(lax.exp, 1, np.pi), "inexact")
_binary("logaddexp2", _logaddexp_with(lax.exp2, 1 / np.log(2), np.pi / np.log(2)), "inexact")


# ------------------------------------------------------------------------ trigonometry

for _name, _fn in (("sin", lax.sin), ("cos", lax.cos), ("tan", lax.tan), ("sinh", lax.sinh),
                   ("cosh", lax.cosh), ("tanh", lax.tanh)):
    _unary(_name, _fn)
# The array-API spellings (asin, atan2, ...) are functions of their own, as in JAX, so that
# error messages name the function that was called.
for _name, _fn in (("arcsin", lax.asin), ("arccos", lax.acos), ("arctan", lax.atan),
                   ("arcsinh", lax.asinh), ("arccosh", lax.acosh), ("arctanh", lax.atanh)):
    _unary(_name, _fn)
    _unary(_name.replace("arc", "a"), _fn)
_binary("arctan2", lax.atan2, "inexact")
_binary("atan2", lax.atan2, "inexact")


def _hypot(x, y):
    if x.dtype.kind == "c":
        raise ValueError("jnp.hypot is not well defined for complex-valued inputs. Please "
                         "convert to real values first, such as by using abs(x)")
    x, y = lax.abs(x), lax.abs(y)
    idx_inf = lax.bitwise_or(_isposinf(x), _isposinf(y))
    big, small = lax.max(x, y), lax.min(x, y)
    big_is_zero = lax.eq(big, _zero(big))
    ratio = lax.div(small, lax.select(big_is_zero, _one(big), big))
    out = lax.select(big_is_zero, big,
                     lax.mul(big, lax.sqrt(lax.add(_one(ratio), lax.square(ratio)))))
    return where(idx_inf, _const(out, np.inf), out)  # noqa: F821


_binary("hypot", _hypot, "inexact")
_unary("deg2rad", lambda x: lax.mul(x, _const(x, np.pi / 180)), "inexact", "radians")
_unary("rad2deg", lambda x: lax.mul(x, _const(x, 180 / np.pi)), "inexact", "degrees")


def _sinc(x):
    eq_zero = lax.eq(x, _const(x, 0))
    pi_x = lax.mul(_const(x, np.pi), x)
    safe_pi_x = where(eq_zero, _const(x, 1), pi_x)  # noqa: F821
    return where(eq_zero, _const(pi_x, 1.0), lax.div(lax.sin(safe_pi_x), safe_pi_x))  # noqa: F821


_unary("sinc", _sinc)


# ------------------------------------------------------------------------------ rounding

def _rounding(name, lax_fn):
    """floor/ceil: integers and bools pass through; floats round; complex is the primitive's
    error."""
    def fn(x, /):
        check_arraylike(name, x)
        x = to_array(x)
        if x.dtype.kind in "iub":
            return x
        (x,) = promote_args_inexact(name, x)
        return lax_fn(x)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}`, as `numpy.{name}`; integers are returned unchanged."
    return fn


_export(_rounding("floor", lax.floor))
_export(_rounding("ceil", lax.ceil))


def _trunc(x):
    return where(lax.lt(x, _const(x, 0)), lax.ceil(x), lax.floor(x))  # noqa: F821


_trunc_rounded = _rounding("trunc", _trunc)


@_export
def trunc(x):
    """Round towards zero (integers and bools pass through)."""
    return _trunc_rounded(x)


_export(_rounding("fix", _trunc))  # NumPy's name for trunc (JAX 0.10 no longer has it)


def _rint(x):
    if x.dtype.kind in "iub":
        return lax.convert_element_type(x, dtypes.default_float())
    if x.dtype.kind == "c":
        return lax.complex(_rint(lax.real(x)), _rint(lax.imag(x)))
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


_unary("rint", _rint, "any")


def round(a, decimals=0, out=None):  # noqa: A001
    """Round to `decimals` decimal places, halves to even (NumPy's `round`).

    Integers are unchanged for `decimals >= 0`; negative `decimals` round integers to tens,
    hundreds, ... exactly, halves to even, as NumPy does (JAX raises NotImplementedError)."""
    check_arraylike("round", a)
    decimals = operator.index(decimals)
    _no_out("round", out)
    x = to_array(a)
    kind = x.dtype.kind
    if kind in "iu":
        return _round_int(x, decimals) if decimals < 0 else x
    if kind == "b":
        raise ValueError(f"jnp.round: data type {np.bool_} not inexact; convert booleans to a "
                         f"number type first")
    if decimals > np.log10(np.finfo(x.dtype).max):
        return x
    if kind == "c":
        return lax.complex(_round_float(lax.real(x), decimals),
                           _round_float(lax.imag(x), decimals))
    return _round_float(x, decimals)


def _round_float(x, decimals):
    if decimals == 0:
        return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
    dtype = x.dtype
    if dtype == dtypes.float16:  # as JAX: scale in float32, where 10**decimals is finite
        x = lax.convert_element_type(x, dtypes.float32)
    factor = _const(x, 10 ** decimals)
    # XLA turns the division by the constant into a multiplication by its reciprocal; doing
    # the same gives JAX's bits.
    inverse = _const(x, 10.0 ** -decimals)
    out = lax.mul(lax.round(lax.mul(x, factor), lax.RoundingMethod.TO_NEAREST_EVEN), inverse)
    return lax.convert_element_type(out, dtype) if dtype == dtypes.float16 else out


def _round_int(x, decimals):
    """Integers to a multiple of 10**-decimals, halves to even (0 when that exceeds the
    dtype's range, as NumPy)."""
    factor = 10 ** -decimals
    if factor > np.iinfo(x.dtype).max:
        return _zero(x)
    f = _const(x, factor)
    q = _int_floor_div(x, f)
    r = lax.sub(x, lax.mul(q, f))  # 0 <= r < f
    rest = lax.sub(f, r)
    odd = lax.ne(lax.bitwise_and(q, _one(q)), _zero(q))
    up = lax.bitwise_or(lax.gt(r, rest), lax.bitwise_and(lax.eq(r, rest), odd))
    return lax.mul(lax.select(up, lax.add(q, _one(q)), q), f)


_export(round, "around")


def _no_out(name, out):
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported.")


# --------------------------------------------------------------------------- predicates

def _isnan(x):
    return lax.ne(x, x) if x.dtype.kind in "fc" else lax.full_like(x, False, dtypes.bool_)


def _isinf(x):
    if x.dtype.kind == "c":
        return lax.bitwise_or(_isinf(lax.real(x)), _isinf(lax.imag(x)))
    if x.dtype.kind != "f":
        return lax.full_like(x, False, dtypes.bool_)
    return lax.eq(lax.abs(x), _constant_like(x, np.inf))


def _isfinite(x):
    if x.dtype.kind == "c":
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.is_finite(x) if x.dtype.kind == "f" else lax.full_like(x, True, dtypes.bool_)


_unary("isnan", _isnan, "any")
_unary("isinf", _isinf, "any")
_unary("isfinite", _isfinite, "any")


def _isposneginf(infinity):
    def fn(x):
        if x.dtype.kind == "c":
            raise ValueError("isposinf/isneginf are not well defined for complex types")
        if x.dtype.kind != "f":
            return lax.full_like(x, False, dtypes.bool_)
        return lax.eq(x, _constant_like(x, infinity))
    return fn


_isposinf = _isposneginf(np.inf)
_isneginf = _isposneginf(-np.inf)


@_export
def isposinf(x, /, out=None):
    """Whether each element is +inf (False for integers and bools; complex is refused)."""
    _no_out("isposinf", out)
    return _isposinf(*promote_args("isposinf", x))


@_export
def isneginf(x, /, out=None):
    """Whether each element is -inf (False for integers and bools; complex is refused)."""
    _no_out("isneginf", out)
    return _isneginf(*promote_args("isneginf", x))


def _signbit(x):
    kind = x.dtype.kind
    if kind == "b":
        return lax.full_like(x, False, dtypes.bool_)
    if kind in "iu":
        return lax.lt(x, _constant_like(x, 0))
    if kind != "f":
        raise ValueError(f"jnp.signbit is not well defined for {x.dtype}")
    bits = lax.bitcast_convert_type(x, np.dtype(f"i{x.dtype.itemsize}"))
    return lax.lt(bits, _zero(bits))


_unary("signbit", _signbit, "any")


def _copysign(x, y):
    if x.dtype.kind == "c":
        raise TypeError("copysign does not support complex-valued inputs")
    return where(_signbit(y), lax.neg(lax.abs(x)), lax.abs(x))  # noqa: F821


_binary("copysign", _copysign, "inexact")
_binary("nextafter", lax.nextafter, "inexact")


@_export
def heaviside(x1, x2, /):
    """0 where x1 < 0, 1 where x1 > 0, x2 where x1 == 0 (NaN stays NaN). As in JAX, the
    operands are not broadcast before the constants are made (a scalar x1 keeps them weak)."""
    check_arraylike("heaviside", x1, x2)
    x, h0 = promote_dtypes_inexact(x1, x2)
    zero = _const(x, 0)
    return where(lax.lt(x, zero), zero,  # noqa: F821
                 where(lax.gt(x, zero), _const(x, 1), where(_isnan(x), x, h0)))  # noqa: F821


# ---------------------------------------------------------------- logical and bitwise

def _to_bool(x):
    return x if x.dtype == dtypes.bool_ else lax.ne(x, _zero(x))


def _logical(lax_fn):
    def fn(x, y):
        return lax_fn(_to_bool(x), _to_bool(y))
    return fn


_binary("logical_and", _logical(lax.bitwise_and))
_binary("logical_or", _logical(lax.bitwise_or))
_binary("logical_xor", _logical(lax.bitwise_xor))
_unary("logical_not", lambda x: lax.bitwise_not(_to_bool(x)), "any")
_binary("bitwise_and", lax.bitwise_and, "any", prim="and", fast_kinds="biu")
_binary("bitwise_or", lax.bitwise_or, "any", prim="or", fast_kinds="biu")
_binary("bitwise_xor", lax.bitwise_xor, "any", prim="xor", fast_kinds="biu")
for _name in ("invert", "bitwise_not", "bitwise_invert"):
    _unary(_name, lax.bitwise_not, "any")
_binary("left_shift", lax.shift_left, "numeric")
_binary("bitwise_left_shift", lax.shift_left, "numeric")


def _right_shift(x, y):
    if x.dtype.kind == "u":
        return lax.shift_right_logical(x, y)
    return lax.shift_right_arithmetic(x, y)


_binary("right_shift", _right_shift, "numeric", "bitwise_right_shift")


def _integer_args(name, x1, x2):
    check_arraylike(name, x1, x2)
    x1, x2 = promote_dtypes(x1, x2)
    if x1.dtype.kind not in "iu":
        raise ValueError(f"Arguments to jnp.{name} must be integers.")
    return x1, x2


def _gcd_cond(carry):
    b = carry[1]
    return lax.reduce_or(lax.ne(b, _zero(b)), tuple(range(b.ndim)))


def _gcd_body(carry):
    a, b = carry
    nonzero = lax.ne(b, _zero(b))
    a, b = where(nonzero, b, a), where(nonzero, lax.rem(a, b), _const(b, 0))  # noqa: F821
    swap = lax.lt(a, b)
    return where(swap, b, a), where(swap, a, b)  # noqa: F821


@_export
def gcd(x1, x2):
    """Greatest common divisor of integers (NumPy's `gcd`; `gcd(0, 0) == 0`). Signed integers
    run Euclid's loop on their magnitudes as unsigned integers, where abs(INT_MIN) exists (on
    it, JAX's loop never ends); the result's weak type is JAX's (weak for weak scalars)."""
    x1, x2 = _integer_args("gcd", x1, x2)
    shape = broadcast_shapes(x1.shape, x2.shape)
    a, b = _abs(broadcast_to(x1, shape)), _abs(broadcast_to(x2, shape))
    if a.dtype.kind == "u":
        return lax.while_loop(_gcd_cond, _gcd_body, (a, b))[0]
    unsigned = np.dtype(f"u{a.dtype.itemsize}")
    magnitudes = (lax.convert_element_type(a, unsigned), lax.convert_element_type(b, unsigned))
    out = lax.while_loop(_gcd_cond, _gcd_body, magnitudes)[0]
    return lax.convert_element_type(out, int if a.weak_type and not shape else a.dtype)


@_export
def lcm(x1, x2):
    """Least common multiple of integers (NumPy's `lcm`; 0 when either is 0)."""
    x1, x2 = _integer_args("lcm", x1, x2)
    x1, x2 = _abs(x1), _abs(x2)
    d = gcd(x1, x2)
    return where(lax.eq(d, _zero(d)), _const(d, 0),  # noqa: F821
                 multiply(x1, floor_divide(x2, d)))  # noqa: F821


# -------------------------------------------------------------------------- comparisons

def _complex_comparison(lax_fn):
    """Orders complex numbers lexicographically (real part, then imaginary), as JAX."""
    def fn(x, y):
        if x.dtype.kind != "c":
            return lax_fn(x, y)
        re_x, re_y = lax.real(x), lax.real(y)
        return lax.select(lax.eq(re_x, re_y), lax_fn(lax.imag(x), lax.imag(y)),
                          lax_fn(re_x, re_y))
    return fn


_binary("equal", lax.eq, prim="eq")
_binary("not_equal", lax.ne, prim="ne")
for _name, _fn, _prim in (("less", lax.lt, "lt"), ("less_equal", lax.le, "le"),
                          ("greater", lax.gt, "gt"), ("greater_equal", lax.ge, "ge")):
    _binary(_name, _complex_comparison(_fn), prim=_prim, fast_kinds="biuf")


# ------------------------------------------------------------------- complex and dtype

def _real(x):
    return lax.real(x) if x.dtype.kind == "c" else x


def _imag(x):
    return lax.imag(x) if x.dtype.kind == "c" else lax.full_like(x, 0)


_unary("real", _real, "any")
_unary("imag", _imag, "any")
_unary("conjugate", lambda x: lax.conj(x) if x.dtype.kind == "c" else x, "any", "conj")


@_export
def angle(z, deg=False):
    """The complex argument, in radians (degrees with `deg=True`)."""
    check_arraylike("angle", z)
    z = to_array(z)
    re, im = _real(z), _imag(z)
    if re.dtype.kind not in "fc" or (z.dtype.kind == "f" and z.ndim == 0):
        re = lax.convert_element_type(re, dtypes.default_float())
        im = lax.convert_element_type(im, dtypes.default_float())
    out = lax.atan2(im, re)
    return rad2deg(out) if deg else out  # noqa: F821


@_export
def astype(x, dtype, /, *, copy=False, device=None):
    """Convert to `dtype` (the default float when None); float to int truncates and
    saturates, NaN becomes 0, as in JAX."""
    check_arraylike("astype", x)
    x = to_array(x)
    dtype = dtypes.default_float() if dtype is None else canonical_dtype(dtype, "astype")
    if x.dtype.kind == "c" and dtype == dtypes.bool_:
        return lax.ne(x, _zero(x))  # as JAX: nonzero, not "real part nonzero"
    return lax.convert_element_type(x, dtype)


# ------------------------------------------------------------------ selection, clipping

@_export
def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """`where(c, x, y)` selects elementwise; `where(c)` is `nonzero(c)`."""
    if x is None and y is None:
        from ._indexing import nonzero
        check_arraylike("where", condition)
        return nonzero(condition, size=size, fill_value=fill_value)
    check_arraylike("where", condition, x, y)
    if size is not None or fill_value is not None:
        raise ValueError("size and fill_value arguments cannot be used in three-term where "
                         "function.")
    c = _to_bool(to_array(condition))
    x, y = promote_dtypes(x, y)
    shape = broadcast_shapes(c.shape, x.shape, y.shape)
    return lax.select_n(broadcast_to(c, shape), broadcast_to(y, shape), broadcast_to(x, shape))


@_export
def clip(arr=None, /, min=None, max=None):  # noqa: A002
    """Clamp values into [min, max]; either bound may be None. Complex values are refused."""
    if arr is None:
        raise ValueError("No input was provided to the clip function.")
    check_arraylike("clip", arr)
    if any(_is_complex(t) for t in (arr, min, max)):
        raise ValueError("Clip received a complex value either through the input or the "
                         "min/max keywords. Complex values have no ordering and cannot be "
                         "clipped. Please convert to a real value or array by taking the real "
                         "or imaginary components via jax.numpy.real/imag respectively.")
    if min is not None:
        arr = maximum(min, arr)  # noqa: F821
    if max is not None:
        arr = minimum(max, arr)  # noqa: F821
    return to_array(arr)


def _is_complex(x):
    return isinstance(x, complex) or getattr(getattr(x, "dtype", None), "kind", None) == "c"


@_export
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN to `nan`, infinities to `posinf`/`neginf` (default: the dtype's extremes)."""
    check_arraylike("nan_to_num", x)
    x = to_array(x)
    if x.dtype.kind == "c":
        return lax.complex(nan_to_num(_real(x), nan=nan, posinf=posinf, neginf=neginf),
                           nan_to_num(_imag(x), nan=nan, posinf=posinf, neginf=neginf))
    if x.dtype.kind != "f":
        return x
    info = np.finfo(x.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = where(_isnan(x), _constant_like(x, nan), x)
    out = where(_isposinf(out), _constant_like(x, posinf), out)
    return where(_isposneginf(-np.inf)(out), _constant_like(x, neginf), out)


@_export
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| elementwise, computed in floating point (infinities are
    close only to themselves)."""
    a, b = promote_args_inexact("isclose", *promote_args("isclose", a, b))
    real = np.finfo(a.dtype).dtype
    rtol = lax.convert_element_type(rtol, real)
    atol = lax.convert_element_type(atol, real)
    in_range = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol, lax.mul(rtol, lax.abs(b))))
    out = lax.bitwise_or(lax.eq(a, b), lax.bitwise_and(_isfinite(b), in_range))
    if equal_nan:
        out = lax.bitwise_or(out, lax.bitwise_and(_isnan(a), _isnan(b)))
    return out


def _all(x):
    return lax.reduce_and(x, tuple(range(x.ndim)))


@_export
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of `a` is close to `b` (see `isclose`)."""
    check_arraylike("allclose", a, b)
    return _all(isclose(a, b, rtol, atol, equal_nan))


@_export
def array_equal(a1, a2, equal_nan=False):
    """Same shape and equal elements (NaNs equal each other with `equal_nan`). Lists are
    accepted, as in JAX."""
    from ._creation import asarray
    a1, a2 = asarray(a1), asarray(a2)
    if a1.shape != a2.shape:
        return to_array(False)
    eq = equal(a1, a2)  # noqa: F821
    if equal_nan:
        eq = lax.bitwise_or(eq, lax.bitwise_and(isnan(a1), isnan(a2)))  # noqa: F821
    return _all(eq)


@_export
def array_equiv(a1, a2):
    """Equal after broadcasting; False when the shapes do not broadcast (NumPy's rule)."""
    from ._creation import asarray
    a1, a2 = asarray(a1), asarray(a2)
    try:
        eq = equal(a1, a2)  # noqa: F821
    except ValueError:
        return to_array(False)
    return _all(eq)


@_export
def modf(x, /, out=None):
    """(fractional part, integral part), both with x's sign."""
    check_arraylike("modf", x)
    _no_out("modf", out)
    (x,) = promote_dtypes_inexact(x)
    whole = where(lax.ge(x, _zero(x)), lax.floor(x), lax.ceil(x))
    return lax.sub(x, whole), whole


@_export
def ldexp(x1, x2, /):
    """x1 * 2**x2 for an integer (or bool) exponent, without intermediate overflow."""
    check_arraylike("ldexp", x1, x2)
    x1, x2 = to_array(x1), to_array(x2)
    if x1.dtype.kind == "c" or x2.dtype.kind in "fc":
        raise ValueError(f"ldexp not supported for input types {(x1.dtype, x2.dtype)}")
    (x1,) = promote_args_inexact("ldexp", x1)
    x2 = lax.convert_element_type(x2, x1.dtype)
    m, e = frexp(x1)
    e = add(lax.convert_element_type(e, x2.dtype), x2)  # noqa: F821
    positive_e = greater(e, 0)  # noqa: F821
    m = where(positive_e, multiply(m, 2), m)  # noqa: F821
    e = where(positive_e, subtract(e, 1), e)  # noqa: F821
    out = multiply(m, power(2, e))  # noqa: F821
    return where(logical_or(isinf(x1), equal(x1, 0)), x1, out)  # noqa: F821


_INT_OF_BITS = {16: dtypes.int16, 32: dtypes.int32, 64: dtypes.int64}


@_export
def frexp(x, /):
    """(mantissa in [0.5, 1), int32 exponent) with x == m * 2**e, read from x's bits."""
    check_arraylike("frexp", x)
    (x,) = promote_dtypes_inexact(x)
    if x.dtype.kind == "c":
        raise TypeError("frexp does not support complex-valued inputs")
    info = np.finfo(x.dtype)
    int_t = _INT_OF_BITS[info.bits]
    mask = (1 << info.nexp) - 1
    bias = 1 - info.minexp
    # Subnormals are scaled up by 2**nmant first.
    tiny = lax.lt(lax.abs(x), _constant_like(x, info.tiny))
    bits = lax.bitcast_convert_type(
        where(tiny, lax.mul(x, _const(x, 1 << info.nmant)), x), int_t)
    e = lax.convert_element_type(where(tiny, -info.nmant, 0), int_t)
    nmant = lax.full_like(bits, info.nmant)
    e = lax.add(e, lax.sub(lax.bitwise_and(lax.shift_right_arithmetic(bits, nmant),
                                           lax.full_like(bits, mask)),
                           lax.full_like(bits, bias - 1)))
    bits = lax.bitwise_and(bits, lax.full_like(bits, ~(mask << info.nmant)))
    bits = lax.bitwise_or(bits, lax.full_like(bits, (bias - 1) << info.nmant))
    special = lax.bitwise_or(lax.bitwise_or(_isinf(x), _isnan(x)), lax.eq(x, _zero(x)))
    e = lax.select(special, _zero(e), e)
    return (where(special, x, lax.bitcast_convert_type(bits, x.dtype)),
            lax.convert_element_type(e, dtypes.int32))
