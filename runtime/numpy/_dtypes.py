"""`kiln.numpy` dtype objects and dtype utilities.

`jnp.float32` and friends are classes usable as dtypes (`np.dtype(jnp.float32)`, `dtype=`
arguments) and as constructors (`jnp.float32(3)` returns a float32 `Array`), as in JAX.
"""
import abc

import numpy as np

from ..compiler.ir import dtypes as _d

__all__ = [
    "bool_", "can_cast", "cdouble", "complex128", "complex64", "complex_", "complexfloating",
    "csingle", "double", "dtype", "finfo", "float16", "float32", "float64", "float_",
    "float4_e2m1fn", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
    "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "floating", "generic", "half", "iinfo", "inexact", "int16", "int32", "int64", "int8",
    "int_", "integer", "isdtype", "issubdtype", "number", "promote_types", "result_type",
    "signedinteger", "single", "uint", "uint16", "uint32", "uint64", "uint8", "unsignedinteger"]

# NumPy's abstract scalar hierarchy, for issubdtype.
generic, number, inexact, floating, complexfloating = (np.generic, np.number, np.inexact,
                                                       np.floating, np.complexfloating)
integer, signedinteger, unsignedinteger = np.integer, np.signedinteger, np.unsignedinteger


class _ScalarMeta(type):
    def __hash__(cls):
        return hash(cls.dtype.type)

    def __eq__(cls, other):
        return cls is other or other == cls.dtype.type

    def __ne__(cls, other):
        return not cls == other

    def __instancecheck__(cls, instance):
        return isinstance(instance, cls.dtype.type)

    def __repr__(cls):
        return f"<class 'kiln.numpy.{cls.__name__}'>"


def _scalar_type(name, np_type):
    def __new__(cls, x=0):
        from ._creation import asarray
        return asarray(x, dtype=cls.dtype)
    return _ScalarMeta(name, (), {"dtype": np.dtype(np_type), "__new__": __new__,
                                  "__doc__": f"The {name} dtype; calling it builds an Array."})


bool_ = _scalar_type("bool_", np.bool_)
int8, int16, int32, int64 = (_scalar_type(n, n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_scalar_type(n, n) for n in ("uint8", "uint16", "uint32",
                                                              "uint64"))
float16, float32, float64 = (_scalar_type(n, n) for n in ("float16", "float32", "float64"))
complex64, complex128 = _scalar_type("complex64", "complex64"), _scalar_type("complex128",
                                                                             "complex128")
# As in JAX, the "default" scalar types name the 64-bit dtypes; arrays created with them are
# narrowed to 32 bits while x64 is off.
int_, uint, float_, complex_ = int64, uint64, float64, complex128
single, double = float32, float64
csingle, cdouble = complex64, complex128
half = float16


class _NarrowFloatMeta(type):
    """The type of JAX's narrow floating-point scalar types (float8, float4; ml_dtypes' in
    JAX), which kiln has no arrays of: the names exist, so that code naming them (flax's fp8
    layers' defaults) imports, and any use as a dtype is a TypeError saying so."""

    def __repr__(cls):
        return f"<class 'kiln.numpy.{cls.__name__}'>"

    @property
    def dtype(cls):   # read by np.dtype(cls), so every dtype= argument refuses it
        cls.refuse()

    def refuse(cls):
        raise TypeError(f"{cls.__name__} is one of JAX's narrow floating-point types; kiln has "
                        f"no arrays of it, since NumPy has no such dtype (docs/differences.md). "
                        f"Compute in float16 or float32 instead.")


def _narrow_float(name):
    def __new__(cls, x=0):
        cls.refuse()
    return _NarrowFloatMeta(name, (), {"__new__": __new__, "__doc__": f"JAX's {name} scalar "
                                       f"type, which kiln has no arrays of."})


(float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2,
 float8_e5m2fnuz, float8_e8m0fnu, float4_e2m1fn) = (_narrow_float(n) for n in (
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn"))


def dtype(obj, align=False, copy=False):
    """`jnp.dtype`: a NumPy dtype, with Python types mapped to kiln's defaults."""
    if isinstance(obj, _ScalarMeta):
        return obj.dtype
    if isinstance(obj, _NarrowFloatMeta):
        obj.refuse()
    return np.dtype(obj)  # Python int/float/complex are int64/float64/complex128, as in JAX


_dtype = dtype


class extended(np.generic):
    """The abstract type of dtypes NumPy does not have (typed PRNG keys); `kiln.dtypes`."""


class prng_key(extended):
    """The abstract type of typed PRNG keys' dtypes (`kiln.random.key(0).dtype.type`)."""


class ExtendedDType(abc.ABC):
    """The base class of dtypes NumPy does not have, as JAX's `ExtendedDType`: an instance
    names its scalar type (`type`, a subclass of `extended`) and may carry `_rules`. kiln's
    typed-key dtype is one; libraries define their own (flax's fp8 metadata dtype)."""

    @property
    @abc.abstractmethod
    def type(self):
        """The scalar type, a subclass of `extended`."""

    _rules = None


def issubdtype(arg1, arg2):
    a = arg1.dtype if isinstance(arg1, _ScalarMeta) else arg1
    b = arg2.dtype.type if isinstance(arg2, _ScalarMeta) else arg2
    if not isinstance(a, np.dtype) and isinstance(getattr(a, "type", None), type) \
            and issubclass(a.type, extended):  # a typed key's dtype
        return isinstance(b, type) and issubclass(a.type, b)
    return np.issubdtype(a, b)


def isdtype(dtype, kind):
    dt = _dtype(dtype)   # (the parameter has JAX's name, which hides the function)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    table = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
             "real floating": "f", "complex floating": "c", "numeric": "iufc"}
    for k in kinds:
        if isinstance(k, str):
            if dt.kind in table[k]:
                return True
        elif dtype(k) == dt:
            return True
    return False


def promote_types(a, b):
    """Python int/float/complex stand for weak types: promote_types(int, int8) is int8."""
    def norm(t):
        return t if t in (int, float, complex) else dtype(t)
    return _d.promote_types(norm(a), norm(b))


def result_type(*args):
    from ..array import Array
    if not args:
        raise ValueError("at least one array or dtype is required")
    pairs = []
    for x in args:
        if isinstance(x, Array):
            pairs.append((x.dtype, x.weak_type))
        elif isinstance(x, (bool, int, float, complex)):
            pairs.append(_d.python_scalar_dtype(x))
        elif x is int or x is float or x is complex:   # weak types, as JAX reads them
            pairs.append(_d.python_scalar_dtype(x(0)))
        elif isinstance(x, (np.ndarray, np.generic)):
            pairs.append((_d.canonicalize(x.dtype), False))
        else:
            pairs.append((_d.canonicalize(dtype(x)), False))
    return _d.result_type(*pairs)[0]


def can_cast(from_, to, casting="safe"):
    return np.can_cast(dtype(from_) if not hasattr(from_, "dtype") else from_.dtype, dtype(to),
                       casting)


def finfo(dt):
    return np.finfo(dtype(dt))


def iinfo(dt):
    return np.iinfo(dtype(dt))
