"""`kiln.dtypes`: JAX's dtype helpers (`jax.dtypes`).

`canonicalize_dtype` narrows 64-bit types while x64 is off, `scalar_type_of` gives the Python
type of a value's kind, `extended` and `prng_key` are the abstract types typed PRNG keys
(`kiln.random.key`) are sub-dtypes of, so `jnp.issubdtype(k.dtype, kiln.dtypes.prng_key)` tells a
typed key from an array, as in JAX. `ExtendedDType` is the base class of such dtypes (kiln's
key dtype, or a library's own, such as flax's fp8 metadata dtype); `DType` is NumPy's dtype class,
and `supports_inf` tells whether a dtype has infinities, as JAX's `jax._src.dtypes` has them (under
`KILN_AS_JAX=1` that private module is this one, docs/compat.md).
"""
import numpy as np

from .compiler.ir import dtypes as _d
from .ad import float0
from .numpy._dtypes import (finfo, iinfo, issubdtype, result_type, extended, prng_key,
                            ExtendedDType, dtype as _dtype)

__all__ = ["DType", "ExtendedDType", "TypePromotionError", "canonicalize_dtype", "extended",
           "finfo", "float0", "iinfo", "issubdtype", "itemsize_bits", "prng_key", "result_type",
           "scalar_type_of", "supports_inf"]

DType = np.dtype


class TypePromotionError(ValueError):
    """Raised where dtypes cannot be promoted (kiln's promotion is JAX's standard lattice)."""


def canonicalize_dtype(dtype, allow_extended_dtype=False):
    """The dtype kiln stores for `dtype` under the current x64 setting."""
    if issubdtype(dtype, extended):
        if not allow_extended_dtype:
            raise ValueError(f"canonicalize_dtype called on extended dtype {dtype} with "
                             f"allow_extended_dtype=False")
        return dtype
    return _d.canonicalize(_dtype(dtype))


_SCALAR_TYPE = {"b": bool, "i": int, "u": int, "f": float, "c": complex}


def scalar_type_of(x):
    """The Python scalar type (bool, int, float, complex) of `x`'s dtype kind."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        dt = np.dtype(_d.python_scalar_dtype(x)[0]) if isinstance(x, (bool, int, float, complex)) \
            else np.asarray(x).dtype
    return _SCALAR_TYPE[np.dtype(dt).kind]


def itemsize_bits(dtype):
    """The number of bits one element of `dtype` takes."""
    return 8 * _dtype(dtype).itemsize


def supports_inf(dtype):
    """Whether `dtype` has infinities: the inexact dtypes (kiln has no float8 types, JAX's
    exceptions)."""
    return bool(np.issubdtype(_dtype(dtype), np.inexact))


def __dir__():
    return sorted(__all__)
