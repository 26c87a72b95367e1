"""`kiln.numpy` elementwise functions: NumPy's ufuncs as JAX defines them, over `kiln.lax`.

Each function checks its arguments (lists are refused, as in JAX), promotes dtypes on JAX's
lattice (weak Python scalars keep the array's dtype), broadcasts, and calls `lax`. Functions
that NumPy computes in floating point (`sin`, `true_divide`, ...) promote integers and bools to
the default float first. Integer semantics are NumPy's where JAX keeps them (`floor_divide`
floors, `remainder` takes the divisor's sign), built from lax's C-style `div`/`rem`.

Eager fast path: when both operands are already arrays of one dtype and shape, binary
functions bind their primitive directly (the general path would reach the same call).
"""
import operator

import numpy as np

from ..array import Array, to_array
from ..dispatch import apply_binary
from .. import lax
from ..compiler.ir import dtypes
from ..compiler.primitives import PRIMITIVES
from ._core import (check_arraylike, promote_args, promote_args_inexact, promote_args_numeric,
                    promote_dtypes, canonical_dtype, broadcast_shapes, broadcast_to)

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


def _binary(name, lax_fn, promote="any", *aliases, prim=None):
    promote_fn = _PROMOTE[promote]
    fast_kinds = _FAST_KINDS[promote]
    p = PRIMITIVES[prim] if prim else None
    impl = p.impl if p else None
    fast = {}  # (dtype, shape, weak, dtype, shape, weak) -> result weak_type

    def fn(x1, x2, /):
        if p is not None and type(x1) is Array:
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
                if weak is not None:
                    value = impl(v1, v2)
                    if type(value) is np.ndarray:
                        out = _new(Array)
                        out._value = value
                        out.weak_type = weak
                        return out
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


# ------------------------------------------------------------------------- arithmetic

def _check_not_bool(name, x):
    if x.dtype == dtypes.bool_:
        raise TypeError(f"{name} does not accept dtype bool. Accepted dtypes are subtypes of "
                        f"number.")


def _sub(x, y):
    _check_not_bool("subtract", x)
    return lax.sub(x, y)


def _add(x, y):
    return lax.bitwise_or(x, y) if x.dtype == dtypes.bool_ else lax.add(x, y)


def _mul(x, y):
    return lax.bitwise_and(x, y) if x.dtype == dtypes.bool_ else lax.mul(x, y)


_binary("add", _add, prim="add")
_binary("subtract", _sub, prim="sub")
_binary("multiply", _mul, prim="mul")
_binary("true_divide", lax.div, "inexact", "divide", prim="div")


def _int_floor_div(x, y):
    q = lax.div(x, y)
    if x.dtype.kind == "u":
        return q
    fix = lax.bitwise_and(lax.ne(lax.sign(x), lax.sign(y)), lax.ne(lax.rem(x, y), _zero(x)))
    return lax.select(fix, lax.sub(q, _one(q)), q)


def _float_divmod(x, y):
    mod = lax.rem(x, y)
    div = lax.div(lax.sub(x, mod), y)
    ind = lax.bitwise_and(lax.ne(mod, _zero(mod)), lax.ne(lax.sign(y), lax.sign(mod)))
    mod = lax.select(ind, lax.add(mod, y), mod)
    div = lax.select(ind, lax.sub(div, _one(div)), div)
    return lax.round(div, lax.RoundingMethod.TO_NEAREST_EVEN), mod


def _zero(x):
    return lax.full_like(x, 0)


def _one(x):
    return lax.full_like(x, 1)


def _floor_divide(x, y):
    if x.dtype == dtypes.bool_:
        raise TypeError("floor_divide does not accept dtype bool")
    if x.dtype.kind in "iu":
        return _int_floor_div(x, y)
    if x.dtype.kind == "c":
        raise TypeError("floor_divide does not support complex-valued inputs")
    return _float_divmod(x, y)[0]


def _remainder(x, y):
    if x.dtype == dtypes.bool_:
        raise TypeError("remainder does not accept dtype bool")
    if x.dtype.kind == "c":
        raise TypeError("remainder does not support complex-valued inputs")
    r = lax.rem(x, y)
    if x.dtype.kind == "u":
        return r
    fix = lax.bitwise_and(lax.ne(r, _zero(r)), lax.ne(lax.sign(r), lax.sign(y)))
    return lax.select(fix, lax.add(r, y), r)


_binary("floor_divide", _floor_divide, "numeric")
_binary("remainder", _remainder, "numeric", "mod")
_binary("fmod", lambda x, y: lax.rem(x, y), "numeric")


@_export
def divmod(x1, x2, /):  # noqa: A001
    return floor_divide(x1, x2), remainder(x1, x2)  # noqa: F821


def _int_power(x, y):
    """x ** y for integer arrays by binary exponentiation over y's bits (y < 0 gives 0/±1)."""
    bits = y.dtype.itemsize * 8
    acc = _one(x)
    base = x
    e = y
    for _ in range(bits):
        acc = lax.select(lax.ne(lax.bitwise_and(e, _one(e)), _zero(e)), lax.mul(acc, base), acc)
        e = lax.shift_right_logical(e, _one(e))
        base = lax.mul(base, base)
    return acc


@_export
def power(x1, x2, /):
    """`x1 ** x2`. A static Python-int exponent becomes `lax.integer_pow` (exact, as JAX)."""
    check_arraylike("power", x1, x2)
    if isinstance(x2, int) and not isinstance(x2, bool) and is_array(x1):
        x = to_array(x1)
        if x.dtype.kind in "iu" and x2 < 0:
            raise ValueError("Integers to negative integer powers are not allowed.")
        if x.dtype == dtypes.bool_:
            (x,) = promote_args_numeric("power", x)
        return lax.integer_pow(x, x2)
    x, y = promote_args_numeric("power", x1, x2)
    if x.dtype.kind in "iu":
        return _int_power(x, y)
    return lax.pow(x, y)


def is_array(x):
    return isinstance(x, (Array, np.ndarray, np.generic)) or \
        getattr(type(x), "_kiln_trace", None) is not None


_export(power, "pow")


@_export
def float_power(x1, x2, /):
    x, y = promote_args_inexact("float_power", x1, x2)
    return lax.pow(x, y)


@_export
def negative(x, /):
    (x,) = promote_args("negative", x)
    _check_not_bool("negative", x)
    return lax.neg(x)


@_export
def positive(x, /):
    (x,) = promote_args("positive", x)
    return x


def _abs(x):
    return x if x.dtype.kind in "ub" else lax.abs(x)


_unary("absolute", _abs, "any", "abs")
_unary("fabs", lax.abs, "inexact")


def _sign(x):
    return x if x.dtype == dtypes.bool_ else lax.sign(x)


_unary("sign", _sign, "any")


@_export
def reciprocal(x, /):
    (x,) = promote_args_inexact("reciprocal", x)
    return lax.div(_one(x), x)


def _maximum(x, y):
    return lax.max(x, y)


_binary("maximum", lax.max, "any", prim="max")
_binary("minimum", lax.min, "any", prim="min")


def _fmax(x, y):
    if x.dtype.kind not in "fc":
        return lax.max(x, y)
    return where(isnan(x), y, where(isnan(y), x, lax.max(x, y)))  # noqa: F821


def _fmin(x, y):
    if x.dtype.kind not in "fc":
        return lax.min(x, y)
    return where(isnan(x), y, where(isnan(y), x, lax.min(x, y)))  # noqa: F821


_binary("fmax", _fmax)
_binary("fmin", _fmin)


# ------------------------------------------------------------- exponentials, logs, roots

_unary("exp", lax.exp)
_unary("exp2", lax.exp2)
_unary("expm1", lax.expm1)
_unary("log", lax.log)
_unary("log1p", lax.log1p)
_unary("sqrt", lax.sqrt)
_unary("cbrt", lax.cbrt)


def _log_base(base):
    def fn(x):
        return lax.div(lax.log(x), lax.log(lax.full_like(x, base)))
    return fn


_unary("log2", _log_base(2.0))
_unary("log10", _log_base(10.0))


def _square(x):
    return lax.integer_pow(x, 2)


_unary("square", _square, "numeric")


def _logaddexp(x, y):
    amax = lax.max(x, y)
    delta = lax.sub(x, y)
    return lax.select(lax.ne(delta, delta), lax.add(x, y),
                      lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta))))))


def _logaddexp2(x, y):
    ln2 = lax.full_like(x, np.log(2))
    return lax.div(_logaddexp(lax.mul(x, ln2), lax.mul(y, ln2)), ln2)


_binary("logaddexp", _logaddexp, "inexact")
_binary("logaddexp2", _logaddexp2, "inexact")


# ------------------------------------------------------------------------ trigonometry

for _name, _fn in (("sin", lax.sin), ("cos", lax.cos), ("tan", lax.tan), ("sinh", lax.sinh),
                   ("cosh", lax.cosh), ("tanh", lax.tanh)):
    _unary(_name, _fn)
for _name, _fn in (("arcsin", lax.asin), ("arccos", lax.acos), ("arctan", lax.atan),
                   ("arcsinh", lax.asinh), ("arccosh", lax.acosh), ("arctanh", lax.atanh)):
    _unary(_name, _fn, "inexact", _name.replace("arc", "a"))
_binary("arctan2", lax.atan2, "inexact", "atan2")


def _hypot(x, y):
    x, y = lax.abs(x), lax.abs(y)
    big, small = lax.max(x, y), lax.min(x, y)
    safe = lax.select(lax.eq(big, _zero(big)), _one(big), big)
    r = lax.div(small, safe)
    out = lax.mul(big, lax.sqrt(lax.add(_one(r), lax.mul(r, r))))
    return lax.select(lax.eq(big, _zero(big)), _zero(big),
                      lax.select(isinf(big), big, out))  # noqa: F821


_binary("hypot", _hypot, "inexact")
_unary("deg2rad", lambda x: lax.mul(x, lax.full_like(x, np.pi / 180)), "inexact", "radians")
_unary("rad2deg", lambda x: lax.mul(x, lax.full_like(x, 180 / np.pi)), "inexact", "degrees")


def _sinc(x):
    eq0 = lax.eq(x, _zero(x))
    safe = lax.select(eq0, _one(x), x)
    pix = lax.mul(safe, lax.full_like(x, np.pi))
    return lax.select(eq0, _one(x), lax.div(lax.sin(pix), pix))


_unary("sinc", _sinc)


# ------------------------------------------------------------------------------ rounding

def _float_or_identity(fn):
    def g(x):
        return fn(x) if x.dtype.kind == "f" else x
    return g


_unary("floor", _float_or_identity(lax.floor), "numeric")
_unary("ceil", _float_or_identity(lax.ceil), "numeric")


def _trunc(x):
    return lax.select(lax.lt(x, _zero(x)), lax.ceil(x), lax.floor(x))


_unary("trunc", _float_or_identity(_trunc), "numeric", "fix")
_unary("rint", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
       if x.dtype.kind == "f" else lax.convert_element_type(x, dtypes.default_float())
       if x.dtype.kind in "iub" else x, "any")


@_export
def round(a, decimals=0, out=None):  # noqa: A001
    check_arraylike("round", a)
    _no_out("round", out)
    decimals = operator.index(decimals)
    (x,) = promote_dtypes(a)
    if x.dtype.kind in "iub":
        if decimals < 0:
            factor = lax.full_like(x, 10 ** (-decimals))
            return lax.mul(_int_floor_div(lax.add(x, lax.div(factor, lax.full_like(x, 2))),
                                          factor), factor)
        return x
    if x.dtype.kind == "c":
        return lax.complex(round(lax.real(x), decimals), round(lax.imag(x), decimals))
    if decimals == 0:
        return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
    factor = lax.full_like(x, 10.0 ** decimals)
    return lax.div(lax.round(lax.mul(x, factor), lax.RoundingMethod.TO_NEAREST_EVEN), factor)


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
    return lax.eq(lax.abs(x), lax.full_like(x, np.inf))


def _isfinite(x):
    if x.dtype.kind == "c":
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.is_finite(x) if x.dtype.kind == "f" else lax.full_like(x, True, dtypes.bool_)


_unary("isnan", _isnan, "any")
_unary("isinf", _isinf, "any")
_unary("isfinite", _isfinite, "any")
_unary("isposinf", lambda x: lax.eq(x, lax.full_like(x, np.inf)) if x.dtype.kind == "f"
       else lax.full_like(x, False, dtypes.bool_), "any")
_unary("isneginf", lambda x: lax.eq(x, lax.full_like(x, -np.inf)) if x.dtype.kind == "f"
       else lax.full_like(x, False, dtypes.bool_), "any")


def _signbit(x):
    if x.dtype.kind == "u" or x.dtype == dtypes.bool_:
        return lax.full_like(x, False, dtypes.bool_)
    if x.dtype.kind == "i":
        return lax.lt(x, _zero(x))
    bits = x.dtype.itemsize * 8
    int_t = np.dtype(f"i{x.dtype.itemsize}")
    return lax.ne(lax.shift_right_logical(lax.bitcast_convert_type(x, int_t),
                                          lax.full_like(lax.bitcast_convert_type(x, int_t),
                                                        bits - 1)),
                  lax.full_like(lax.bitcast_convert_type(x, int_t), 0))


_unary("signbit", _signbit, "any")


def _copysign(x, y):
    return where(_signbit(y), lax.neg(lax.abs(x)), lax.abs(x))  # noqa: F821


_binary("copysign", _copysign, "inexact")
_binary("nextafter", lax.nextafter, "inexact")


def _heaviside(x, h0):
    return where(lax.lt(x, _zero(x)), _zero(x),  # noqa: F821
                 where(lax.gt(x, _zero(x)), _one(x), h0))  # noqa: F821


_binary("heaviside", _heaviside, "inexact")


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


def _bitwise(name, lax_fn):
    def fn(x, y):
        if x.dtype.kind not in "iub":
            raise TypeError(f"{name} requires integer or boolean arguments, got {x.dtype}")
        return lax_fn(x, y)
    return fn


_binary("bitwise_and", _bitwise("bitwise_and", lax.bitwise_and), "any", prim="and")
_binary("bitwise_or", _bitwise("bitwise_or", lax.bitwise_or), "any", prim="or")
_binary("bitwise_xor", _bitwise("bitwise_xor", lax.bitwise_xor), "any", prim="xor")


def _invert(x):
    if x.dtype.kind not in "iub":
        raise TypeError(f"invert requires integer or boolean arguments, got {x.dtype}")
    return lax.bitwise_not(x)


_unary("invert", _invert, "any", "bitwise_not", "bitwise_invert")


def _shift(name, signed_fn, unsigned_fn):
    def fn(x, y):
        if x.dtype.kind not in "iu":
            raise TypeError(f"{name} requires integer arguments, got {x.dtype}")
        return (signed_fn if x.dtype.kind == "i" else unsigned_fn)(x, y)
    return fn


_binary("left_shift", _shift("left_shift", lax.shift_left, lax.shift_left), "any",
        "bitwise_left_shift")
_binary("right_shift", _shift("right_shift", lax.shift_right_arithmetic,
                              lax.shift_right_logical), "any", "bitwise_right_shift")


def _gcd(x, y):
    x, y = lax.abs(x), lax.abs(y)

    def cond(c):
        return any_nonzero(c[1])

    def body(c):
        a, b = c
        safe_b = lax.select(lax.eq(b, _zero(b)), _one(b), b)
        return (lax.select(lax.eq(b, _zero(b)), a, b),
                lax.select(lax.eq(b, _zero(b)), b, lax.rem(a, safe_b)))
    return lax.while_loop(cond, body, (x, y))[0]


def any_nonzero(x):
    return lax.reduce_or(lax.ne(x, _zero(x)), tuple(range(x.ndim)))


def _integer_only(name, fn):
    def g(x, y):
        if x.dtype.kind not in "iu":
            raise TypeError(f"{name} requires integer arguments, got {x.dtype}")
        return fn(x, y)
    return g


def _lcm(x, y):
    g = _gcd(x, y)
    safe = lax.select(lax.eq(g, _zero(g)), _one(g), g)
    return lax.select(lax.eq(g, _zero(g)), _zero(g), lax.abs(lax.mul(lax.div(x, safe), y)))


_binary("gcd", _integer_only("gcd", _gcd))
_binary("lcm", _integer_only("lcm", _lcm))


# -------------------------------------------------------------------------- comparisons

def _comparison(name, lax_fn, prim):
    def fn(x, y):
        if x.dtype.kind == "c" and name not in ("equal", "not_equal"):
            raise TypeError(f"{name} does not support complex-valued inputs")
        return lax_fn(x, y)
    _binary(name, fn, "any", prim=prim if name in ("equal", "not_equal") else None)


for _name, _fn, _prim in (("equal", lax.eq, "eq"), ("not_equal", lax.ne, "ne"),
                          ("less", lax.lt, "lt"), ("less_equal", lax.le, "le"),
                          ("greater", lax.gt, "gt"), ("greater_equal", lax.ge, "ge")):
    _comparison(_name, _fn, _prim)


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
    (z,) = promote_args_inexact("angle", z)
    out = lax.atan2(_imag(z), _real(z)) if z.dtype.kind == "c" else \
        lax.atan2(lax.full_like(z, 0), z)
    return lax.mul(out, lax.full_like(out, 180 / np.pi)) if deg else out


@_export
def astype(x, dtype, /, *, copy=False, device=None):
    check_arraylike("astype", x)
    x = to_array(x)
    dtype = canonical_dtype(dtype, "astype")
    return lax.convert_element_type(x, dtype)


# ------------------------------------------------------------------ selection, clipping

@_export
def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """`where(c, x, y)` selects elementwise; `where(c)` is `nonzero(c)`."""
    if x is None and y is None:
        from ._indexing import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("Either both or neither of the x and y arguments should be provided "
                         "to jnp.where.")
    check_arraylike("where", condition, x, y)
    c = to_array(condition)
    x, y = promote_dtypes(x, y)
    c = _to_bool(c)
    shape = broadcast_shapes(c.shape, x.shape, y.shape)
    return lax.select_n(broadcast_to(c, shape), broadcast_to(y, shape), broadcast_to(x, shape))


@_export
def clip(arr=None, /, min=None, max=None, *, a=None, a_min=None, a_max=None):  # noqa: A002
    """Clamp values into [min, max]; either bound may be None."""
    arr = a if arr is None else arr
    min = a_min if min is None else min  # noqa: A001
    max = a_max if max is None else max  # noqa: A001
    check_arraylike("clip", arr)
    if min is not None:
        arr = maximum(min, arr)  # noqa: F821
    if max is not None:
        arr = minimum(max, arr)  # noqa: F821
    return to_array(arr)


@_export
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
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
    out = where(_isnan(x), lax.full_like(x, nan), x)
    out = where(isposinf(out), lax.full_like(x, posinf), out)  # noqa: F821
    return where(isneginf(out), lax.full_like(x, neginf), out)  # noqa: F821


@_export
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = promote_args("isclose", a, b)
    if a.dtype.kind not in "fc":
        return lax.eq(a, b)
    rtol_a = lax.full_like(lax.abs(b), rtol)
    atol_a = lax.full_like(lax.abs(b), atol)
    out = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol_a, lax.mul(rtol_a, lax.abs(b))))
    # Infinities: close only when equal.
    a_inf, b_inf = _isinf(a), _isinf(b)
    both = lax.bitwise_or(a_inf, b_inf)
    out = lax.select(both, lax.bitwise_and(lax.bitwise_and(a_inf, b_inf), lax.eq(a, b)), out)
    if equal_nan:
        out = lax.bitwise_or(out, lax.bitwise_and(_isnan(a), _isnan(b)))
    return out


@_export
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    c = isclose(a, b, rtol, atol, equal_nan)
    return lax.reduce_and(c, tuple(range(c.ndim)))


@_export
def array_equal(a1, a2, equal_nan=False):
    check_arraylike("array_equal", a1, a2)
    a1, a2 = to_array(a1), to_array(a2)
    if a1.shape != a2.shape:
        return to_array(False)
    a1, a2 = promote_dtypes(a1, a2)
    eq = lax.eq(a1, a2)
    if equal_nan:
        eq = lax.bitwise_or(eq, lax.bitwise_and(_isnan(a1), _isnan(a2)))
    return lax.reduce_and(eq, tuple(range(eq.ndim)))


@_export
def array_equiv(a1, a2):
    check_arraylike("array_equiv", a1, a2)
    a1, a2 = to_array(a1), to_array(a2)
    try:
        a1, a2 = promote_args("array_equiv", a1, a2)
    except ValueError:
        return to_array(False)
    eq = lax.eq(a1, a2)
    return lax.reduce_and(eq, tuple(range(eq.ndim)))


@_export
def modf(x, /):
    (x,) = promote_args_inexact("modf", x)
    whole = _trunc(x)
    return lax.sub(x, whole), whole


@_export
def ldexp(x1, x2, /):
    check_arraylike("ldexp", x1, x2)
    x2a = to_array(x2)
    if x2a.dtype.kind not in "iu":
        raise TypeError(f"ldexp requires an integer exponent, got {x2a.dtype}")
    (x,) = promote_args_inexact("ldexp", x1)
    x, e = promote_args("ldexp", x, lax.convert_element_type(x2a, x.dtype))
    return lax.mul(x, lax.exp2(e))


@_export
def frexp(x, /):
    (x,) = promote_args_inexact("frexp", x)
    zero_or_special = lax.bitwise_or(lax.eq(x, _zero(x)), lax.bitwise_not(_isfinite(x)))
    safe = lax.select(zero_or_special, _one(x), x)
    e = lax.add(lax.floor(lax.div(lax.log(lax.abs(safe)), lax.log(lax.full_like(x, 2.0)))),
                _one(x))
    m = lax.div(safe, lax.exp2(e))
    # Correct off-by-one from rounding in log2.
    big = lax.ge(lax.abs(m), _one(m))
    m = lax.select(big, lax.div(m, lax.full_like(m, 2.0)), m)
    e = lax.select(big, lax.add(e, _one(e)), e)
    small = lax.lt(lax.abs(m), lax.full_like(m, 0.5))
    m = lax.select(small, lax.mul(m, lax.full_like(m, 2.0)), m)
    e = lax.select(small, lax.sub(e, _one(e)), e)
    m = lax.select(zero_or_special, x, m)
    e = lax.select(zero_or_special, _zero(e), e)
    return m, lax.convert_element_type(e, dtypes.int32)
