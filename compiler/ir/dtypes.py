"""Dtypes, weak types and JAX's type-promotion lattice.

Every abstract value carries a NumPy dtype and a `weak_type` flag. Python scalars are weakly
typed: `f32_array * 2.0` stays float32. Promotion is the least upper bound on JAX's lattice

    b1 -> i* -> u8 -> u16 -> u32 -> u64 -> f*          i* -> i8 -> i16 -> i32 -> i64 -> f*
    u8 -> i16,  u16 -> i32,  u32 -> i64
    f* -> bf16/f16 -> f32 -> f64 -> c128,  f* -> c* -> c64 -> c128,  f32 -> c64

where `i*`, `f*`, `c*` are the weak (Python scalar) types. With `enable_x64` off (the default)
64-bit results are narrowed to 32 bits, as in JAX. bfloat16 is not available (NumPy has no such
dtype and kiln does not depend on ml_dtypes).
"""
import functools

import numpy as np

from ..config import config

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

SIGNED = (int8, int16, int32, int64)
UNSIGNED = (uint8, uint16, uint32, uint64)
FLOATS = (float16, float32, float64)
COMPLEX = (complex64, complex128)
ALL = (bool_,) + SIGNED + UNSIGNED + FLOATS + COMPLEX
FLOAT0 = np.dtype([("float0", np.void, 0)])   # JAX's float0: the tangents of integers and bools

# Weak types as lattice nodes: Python's own scalar types stand for them.
_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX = int, float, complex

_LATTICE = {
    bool_: [_WEAK_INT],
    _WEAK_INT: [uint8, int8],
    uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64], uint64: [_WEAK_FLOAT],
    int8: [int16], int16: [int32], int32: [int64], int64: [_WEAK_FLOAT],
    _WEAK_FLOAT: [float16, _WEAK_COMPLEX],
    float16: [float32], float32: [float64, complex64], float64: [complex128],
    _WEAK_COMPLEX: [complex64], complex64: [complex128], complex128: [],
}
# With x64 off JAX avoids forming a 64-bit type from 32-bit inputs: u32 x i32 -> i32.
_LATTICE_X32 = {**_LATTICE, uint32: [int32, uint64]}


def _upper_bounds(lattice):
    ub = {}
    def visit(node):
        if node in ub:
            return ub[node]
        out = {node}
        for nxt in lattice[node]:
            out |= visit(nxt)
        ub[node] = frozenset(out)
        return ub[node]
    for node in lattice:
        visit(node)
    return ub


_UPPER = _upper_bounds(_LATTICE)
_UPPER_X32 = _upper_bounds(_LATTICE_X32)
_WEAK_KIND = {"b": bool_, "i": _WEAK_INT, "u": _WEAK_INT, "f": _WEAK_FLOAT, "c": _WEAK_COMPLEX}
_NARROW = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


def x64_enabled():
    return config.read("enable_x64")


def canonicalize(dtype):
    """The dtype kiln really stores for `dtype` under the current x64 setting, in the machine's
    byte order (a big-endian `>f4` array is converted, as JAX converts it)."""
    dtype = np.dtype(dtype)
    if not dtype.isnative:
        dtype = dtype.newbyteorder("=")
    if dtype not in _UPPER and dtype.kind not in "biufc":
        raise TypeError(f"dtype {dtype} is not a valid kiln array type; use one of bool, "
                        f"(u)int8/16/32/64, float16/32/64, complex64/128")
    if not x64_enabled():
        return _NARROW.get(dtype, dtype)
    return dtype


def default_int():
    return int64 if x64_enabled() else int32


def default_uint():
    return uint64 if x64_enabled() else uint32


def default_float():
    return float64 if x64_enabled() else float32


def default_complex():
    return complex128 if x64_enabled() else complex64


def default_for_kind(kind):
    return {"b": bool_, "i": default_int(), "u": default_uint(), "f": default_float(),
            "c": default_complex()}[kind]


def python_scalar_dtype(x):
    """(dtype, weak_type) of a Python scalar, JAX style: int -> weak int32, etc."""
    if isinstance(x, bool):
        return bool_, False
    if isinstance(x, int):
        return default_int(), True
    if isinstance(x, float):
        return default_float(), True
    if isinstance(x, complex):
        return default_complex(), True
    raise TypeError(f"{type(x).__name__} is not a Python scalar")


def _node(dtype, weak):
    return _WEAK_KIND[dtype.kind] if weak else dtype


@functools.lru_cache(maxsize=4096)
def _lub(nodes, x64):
    upper = _UPPER if x64 else _UPPER_X32
    common = functools.reduce(frozenset.intersection, (upper[n] for n in nodes))
    for cand in common:
        if common <= upper[cand]:  # the least common upper bound lies below all others
            return cand
    raise TypeError(f"no common type for {nodes}")  # cannot happen: c128 bounds everything


@functools.lru_cache(maxsize=4096)
def _result_type_cached(pairs, x64):
    dtypes = {d for d, _ in pairs}
    weaks = [w for _, w in pairs]
    if len(dtypes) == 1 and not all(weaks):
        out, weak = next(iter(dtypes)), False
    elif all(weaks):
        out = _lub(frozenset(dtypes), x64)
        weak = True
    else:
        out = _lub(frozenset(_node(d, w) for d, w in pairs), x64)
        weak = any(out is t for t in (_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX))  # dtype == type
        if weak:
            out = {_WEAK_INT: default_int(), _WEAK_FLOAT: default_float(),
                   _WEAK_COMPLEX: default_complex()}[out]
    out = np.dtype(out)
    if not x64:
        out = _NARROW.get(out, out)
    return out, (weak and out != bool_)


def result_type(*pairs):
    """Promote (dtype, weak_type) pairs; returns (dtype, weak_type)."""
    return _result_type_cached(tuple((np.dtype(d), bool(w)) for d, w in pairs), x64_enabled())


def promote_types(a, b):
    """`jnp.promote_types` (no canonicalisation). The Python types int, float and complex stand
    for weak types, as in JAX: promote_types(int, int8) is int8."""
    nodes = frozenset(t if any(t is w for w in (_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX))
                      else np.dtype(t) for t in (a, b))
    return np.dtype(_lub(nodes, x64_enabled()))


def is_complex(dtype):
    return np.dtype(dtype).kind == "c"


def is_inexact(dtype):
    return np.dtype(dtype).kind in "fc"


def is_integer(dtype):
    return np.dtype(dtype).kind in "iu"


def is_bool(dtype):
    return np.dtype(dtype).kind == "b"


def short_name(dtype):
    """`f32`, `i32`, `u8`, `bool`, `c64`: the SSA printer's and the CLI's dtype spelling."""
    dtype = np.dtype(dtype)
    if dtype == bool_:
        return "bool"
    if dtype.kind == "O":   # reverse mode's tapes (compiler/primitives/autodiff.py)
        return "tape"
    if dtype.kind == "V":   # JAX's float0, the type of integers' cotangents (kiln.export)
        return "float0"
    return {"i": "i", "u": "u", "f": "f", "c": "c"}[dtype.kind] + str(dtype.itemsize * 8)


_SHORT = {short_name(d): d for d in ALL}
_SHORT["tape"] = np.dtype(object)


def from_short_name(name):
    if name not in _SHORT:
        raise ValueError(f"unknown dtype {name!r}; expected one of {', '.join(_SHORT)}")
    return _SHORT[name]

