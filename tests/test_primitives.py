"""Every primitive of `kiln.compiler.primitives.PRIMITIVES`: shape/dtype rule against the NumPy
implementation, values against independent NumPy references, and errors against JAX 0.10.2.

`CASES` maps each primitive name to a hypothesis strategy of `Case`s (operands drawn with 0- and
1-sized axes and several dtypes, static params, a reference function). The registry must be
covered exactly: a new primitive without a case fails `test_every_primitive_has_a_case`. For
each case, `abstract_eval` must predict the shape, dtype and weak type that the implementation
and eager `bind` produce, and the values must match the reference.

XLA's integer semantics (truncating division, remainder sign, division by zero, shifts by the
bit width or more, float->int saturation and NaN->0) are checked against values recorded from
JAX 0.10.2 (`/tmp/jaxenv/bin/python`), as are the dtypes each elementwise primitive accepts and
the messages of its TypeErrors.
"""
import ctypes
import math
from fractions import Fraction
from typing import Any, Callable, NamedTuple

import numpy as np
import pytest
import scipy.special as sps
from hypothesis import given, settings, strategies as st
import hypothesis.extra.numpy as hnp

from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.parser import from_source
from kiln.compiler.primitives import PRIMITIVES
from kiln.compiler.primitives.autodiff import custom_vmap_rule
from kiln.compiler.primitives.indexing import GatherDimensionNumbers, ScatterDimensionNumbers
from kiln.dispatch import apply_eager
from kiln.array import Array
from kiln.extend.core import Primitive
from kiln.interpreters import batching

SETTINGS = settings(max_examples=12, deadline=None)

BOOL = [np.dtype(np.bool_)]
SINT = [np.dtype(t) for t in (np.int8, np.int16, np.int32)]
UINT = [np.dtype(t) for t in (np.uint8, np.uint16, np.uint32)]
INT = SINT + UINT
FLOAT = [np.dtype(np.float16), np.dtype(np.float32)]
COMPLEX = [np.dtype(np.complex64)]
INEXACT = FLOAT + COMPLEX
NUMBER = INT + INEXACT
ORDERED = BOOL + INT + FLOAT
ALL = BOOL + NUMBER


class Case(NamedTuple):
    args: list                    # NumPy operands
    params: dict                  # static params
    ref: Callable | None          # ref(*args) -> expected value(s); None: checked elsewhere
    weak: tuple = ()              # weak_type of each operand (default: all strong)
    rtol: Any = None              # tolerance override for inexact results


# ------------------------------------------------------------------------- strategies

def shapes(min_dims=0, max_dims=3):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=4)


def elements(dtype, lo=-4.0, hi=4.0, specials=False):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(int(info.min), int(info.max))
    t = np.float32 if dtype.kind == "c" else dtype.type
    lo_, hi_ = t(lo), t(hi)  # bounds exactly representable in the dtype, inside [lo, hi]
    lo_ = lo_ if lo_ >= lo else np.nextafter(lo_, t(np.inf))
    hi_ = hi_ if hi_ <= hi else np.nextafter(hi_, t(-np.inf))
    finite = st.floats(float(lo_), float(hi_), width=np.dtype(t).itemsize * 8)
    if dtype.kind == "c":
        return st.builds(complex, finite, finite)
    if specials:
        return st.one_of(finite, st.sampled_from([np.nan, np.inf, -np.inf, -0.0, 0.0]))
    return finite


def array(draw, dtype, shape, **kw):
    return draw(hnp.arrays(np.dtype(dtype), shape, elements=elements(dtype, **kw)))


def wide(dtype):
    """The float64/complex128 type a reference computes in."""
    return np.complex128 if np.dtype(dtype).kind == "c" else np.float64


def in_wide(fn):
    """Reference computed in double precision, rounded to the operand dtype."""
    def ref(x, *rest, **kw):
        return np.asarray(fn(x.astype(wide(x.dtype)), *(r.astype(wide(x.dtype)) for r in rest),
                             **kw)).astype(x.dtype)
    return ref


# --------------------------------------------------------------------- elementwise cases

def _sign_ref(x):
    if x.dtype.kind == "u":
        return (x > 0).astype(x.dtype)
    if x.dtype.kind == "c":
        z = x.astype(np.complex128)
        return np.where(z == 0, 0, z / np.where(z == 0, 1, np.abs(z))).astype(x.dtype)
    return np.sign(x.astype(np.float64)).astype(x.dtype)


def _round_ref(x, rounding_method=0):
    v = x.astype(np.float64)
    if rounding_method == 1:
        return np.round(v).astype(x.dtype)
    return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(x.dtype)


def _bits(dtype):
    return np.dtype(dtype).itemsize * 8


def _as_unsigned(x):
    return [int(v) % (1 << _bits(x.dtype)) for v in x.reshape(-1).tolist()]


def _popcount_ref(x):
    return np.array([bin(v).count("1") for v in _as_unsigned(x)], x.dtype).reshape(x.shape)


def _clz_ref(x):
    n = _bits(x.dtype)
    return np.array([n - v.bit_length() for v in _as_unsigned(x)], x.dtype).reshape(x.shape)


def _logistic_ref(x):
    return 1 / (1 + np.exp(-x))


UNARY = {
    # name: (dtypes, reference, element range)
    "neg": (NUMBER, np.negative, (-4, 4)),
    "sign": (NUMBER, _sign_ref, (-4, 4)),
    "floor": (FLOAT, np.floor, (-40, 40)),
    "ceil": (FLOAT, np.ceil, (-40, 40)),
    "is_finite": (FLOAT, np.isfinite, None),
    "exp": (INEXACT, in_wide(np.exp), (-4, 4)),
    "exp2": (INEXACT, in_wide(np.exp2), (-4, 4)),
    "log": (INEXACT, in_wide(np.log), (-4, 4)),
    "log1p": (INEXACT, in_wide(np.log1p), (-0.9, 4)),
    "expm1": (INEXACT, in_wide(np.expm1), (-4, 4)),
    "tanh": (INEXACT, in_wide(np.tanh), (-4, 4)),
    "logistic": (INEXACT, in_wide(_logistic_ref), (-4, 4)),
    "sin": (INEXACT, in_wide(np.sin), (-4, 4)),
    "cos": (INEXACT, in_wide(np.cos), (-4, 4)),
    "tan": (INEXACT, in_wide(np.tan), (-1.2, 1.2)),
    "asin": (INEXACT, in_wide(np.arcsin), (-1, 1)),
    "acos": (INEXACT, in_wide(np.arccos), (-1, 1)),
    "atan": (INEXACT, in_wide(np.arctan), (-4, 4)),
    "sinh": (INEXACT, in_wide(np.sinh), (-4, 4)),
    "cosh": (INEXACT, in_wide(np.cosh), (-4, 4)),
    "asinh": (INEXACT, in_wide(np.arcsinh), (-4, 4)),
    "acosh": (INEXACT, in_wide(np.arccosh), (1, 4)),
    "atanh": (INEXACT, in_wide(np.arctanh), (-0.9, 0.9)),
    "sqrt": (INEXACT, in_wide(np.sqrt), (0, 4)),
    "rsqrt": (INEXACT, in_wide(lambda v: 1 / np.sqrt(v)), (0.1, 4)),
    "cbrt": (FLOAT, in_wide(np.cbrt), (-8, 8)),
    "abs": (NUMBER, np.abs, (-4, 4)),
    "not": (INT + BOOL, np.invert, None),
    "population_count": (INT, _popcount_ref, None),
    "clz": (INT, _clz_ref, None),
    "erf": (FLOAT, in_wide(sps.erf), (-3, 3)),
    "erfc": (FLOAT, in_wide(sps.erfc), (-3, 3)),
    "erf_inv": (FLOAT, in_wide(sps.erfinv), (-0.99, 0.99)),
    "lgamma": (FLOAT, in_wide(sps.gammaln), (0.1, 6)),
    "digamma": (FLOAT, in_wide(sps.psi), (0.1, 6)),
    "real": (COMPLEX, np.real, (-4, 4)),
    "imag": (COMPLEX, np.imag, (-4, 4)),
    "conj": ([np.dtype(np.float32)] + COMPLEX,
             lambda x: np.conj(x.astype(np.complex64)), (-4, 4)),
    "square": (NUMBER, lambda x: x * x, (-4, 4)),
    "copy": (ALL, np.copy, (-4, 4)),
    "stop_gradient": (ALL, lambda x: x, (-4, 4)),
}


def unary_case(name):
    dtypes_, ref, rng = UNARY[name]

    @st.composite
    def strategy(draw):
        dtype = draw(st.sampled_from(dtypes_))
        kw = {} if rng is None or dtype.kind not in "fc" else {"lo": rng[0], "hi": rng[1]}
        x = array(draw, dtype, draw(shapes()), **kw)
        return Case([x], {}, ref, (draw(st.booleans()),))
    return strategy()


@st.composite
def identity_case(draw, name):
    x = array(draw, draw(st.sampled_from(ALL)), draw(shapes()), lo=-4, hi=4)
    return Case([x], {"name": name}, lambda v, **_: v, (draw(st.booleans()),))


@st.composite
def constraint_case(draw):
    """sharding_constraint: the value itself, its spec one entry per dimension (a mesh of
    2 x 2 PJRT device ids: outside a partitioned module it is the identity)."""
    x = array(draw, draw(st.sampled_from(ALL)), draw(shapes()), lo=-4, hi=4)
    spec = tuple(draw(st.sampled_from([(), ("x",), ("y",)])) for _ in x.shape)
    return Case([x], {"mesh": (("x", 2), ("y", 2)), "devices": (0, 1, 2, 3), "spec": spec},
                lambda v, **_: v, (draw(st.booleans()),))


@st.composite
def round_case(draw):
    dtype = draw(st.sampled_from(FLOAT))
    method = draw(st.sampled_from([0, 1]))
    x = array(draw, dtype, draw(shapes()), lo=-8, hi=8, specials=True)
    return Case([x], {"rounding_method": method}, lambda v, **p: _round_ref(v, **p))


def _int_div_ref(a, b):
    if a.dtype.kind not in "iu":
        return a / b
    q = [0 if y == 0 else (abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1)
         for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())]
    q = np.array(q, np.int64).reshape(a.shape)
    return np.where(b == 0, np.array(-1).astype(a.dtype), q.astype(a.dtype)).astype(a.dtype)


def _rem_ref(a, b):
    if a.dtype.kind not in "iu":
        return np.fmod(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    q = _int_div_ref(a, b).astype(np.int64)
    r = a.astype(np.int64) - b.astype(np.int64) * q
    return np.where(b == 0, a, r.astype(a.dtype)).astype(a.dtype)


def _shift_ref(kind):
    def ref(a, b):
        n, out = _bits(a.dtype), []
        for x, s in zip(_as_unsigned(a), b.astype(np.int64).reshape(-1).tolist()):
            signed = x - (1 << n) if x >> (n - 1) else x
            if kind == "left":
                v = (x << s) if 0 <= s < n else 0
            elif kind == "logical":
                v = (x >> s) if 0 <= s < n else 0
            else:
                v = signed >> (s if 0 <= s < n else n - 1)
            out.append(v % (1 << n))
        return np.array(out, np.uint64).astype(f"u{a.dtype.itemsize}").view(a.dtype).reshape(
            a.shape)
    return ref


def _atan2_ref(y, x):
    if y.dtype.kind != "c":
        return np.arctan2(y.astype(np.float64), x.astype(np.float64)).astype(y.dtype)
    # XLA's formula, in the operands' precision: like JAX, atan2(0j, 0j) and tiny operands
    # whose squares underflow give NaN.
    return (-1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y))).astype(y.dtype)


BINARY = {
    # name: (dtypes, reference, element range)
    "add": (NUMBER, np.add, (-100, 100)),
    "sub": (NUMBER, np.subtract, (-100, 100)),
    "mul": (NUMBER, np.multiply, (-100, 100)),
    "div": (NUMBER, _int_div_ref, (-100, 100)),
    "rem": (INT + FLOAT, _rem_ref, (-100, 100)),
    "max": (ALL, np.maximum, (-4, 4)),
    "min": (ALL, np.minimum, (-4, 4)),
    "atan2": (INEXACT, _atan2_ref, (-4, 4)),
    "nextafter": (FLOAT, np.nextafter, (-4, 4)),
    "and": (INT + BOOL, np.bitwise_and, None),
    "or": (INT + BOOL, np.bitwise_or, None),
    "xor": (INT + BOOL, np.bitwise_xor, None),
    "complex": ([np.dtype(np.float32)], lambda a, b: a + 1j * b.astype(np.complex64), (-4, 4)),
    "eq": (ALL, np.equal, (-2, 2)),
    "ne": (ALL, np.not_equal, (-2, 2)),
    "lt": (ORDERED, np.less, (-2, 2)),
    "le": (ORDERED, np.less_equal, (-2, 2)),
    "gt": (ORDERED, np.greater, (-2, 2)),
    "ge": (ORDERED, np.greater_equal, (-2, 2)),
}


def binary_case(name):
    dtypes_, ref, rng = BINARY[name]

    @st.composite
    def strategy(draw):
        dtype = draw(st.sampled_from(dtypes_))
        shape = draw(shapes())
        kw = {} if rng is None or dtype.kind not in "fc" else {"lo": rng[0], "hi": rng[1]}
        shape_a, shape_b = draw(st.sampled_from([(shape, shape), ((), shape), (shape, ())]))
        a, b = array(draw, dtype, shape_a, **kw), array(draw, dtype, shape_b, **kw)
        weak = (draw(st.booleans()), draw(st.booleans()))
        return Case([a, b], {}, lambda x, y: ref(*np.broadcast_arrays(x, y)), weak)
    return strategy()


@st.composite
def shift_case(draw, kind):
    dtype = draw(st.sampled_from(INT))
    shape = draw(shapes())
    a = array(draw, dtype, shape)
    n = _bits(dtype)
    amounts = st.integers(0, n + 2) if dtype.kind == "u" else st.integers(-2, n + 2)
    b = draw(hnp.arrays(dtype, shape, elements=amounts))
    return Case([a, b], {}, _shift_ref(kind))


@st.composite
def pow_case(draw):
    dtype = draw(st.sampled_from(INEXACT))
    shape = draw(shapes())
    base = draw(hnp.arrays(dtype, shape, elements=elements(dtype, 0.25, 4)))
    if draw(st.booleans()):
        exponent = draw(hnp.arrays(np.int32, shape, elements=st.integers(-3, 4)))
    else:
        exponent = array(draw, dtype, shape, lo=-2, hi=2)

    def ref(a, e):
        return np.power(a.astype(wide(a.dtype)), e.astype(wide(a.dtype))).astype(a.dtype)
    return Case([base, exponent], {}, ref)


@st.composite
def integer_pow_case(draw):
    dtype = draw(st.sampled_from(NUMBER))
    y = draw(st.integers(-3 if dtype.kind in "fc" else 0, 6))
    x = array(draw, dtype, draw(shapes()), lo=0.5, hi=2)

    def ref(v, y):
        if v.dtype.kind in "iu":
            out = np.ones_like(v)
            for _ in range(y):
                out = out * v
            return out
        return np.power(v.astype(wide(v.dtype)), y).astype(v.dtype)
    return Case([x], {"y": y}, ref, (draw(st.booleans()),))


def _round_exact(value, dtype):
    """The `dtype` number nearest to the rational `value`, ties to even."""
    guess = np.asarray(float(value)).astype(dtype)
    t = guess.dtype.type
    candidates = [np.nextafter(guess, t(-np.inf)), guess, np.nextafter(guess, t(np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - value),
                                          int(c.view(f"u{c.dtype.itemsize}")) & 1))


def _fma_ref(a, b, c):
    """a * b + c in exact rationals, rounded once; an exact zero sum takes IEEE's sign, which
    float64 arithmetic gives (products of float16/float32 numbers are exact there)."""
    a, b, c = np.broadcast_arrays(a, b, c)
    out = []
    for x, y, z in zip(*(v.reshape(-1).tolist() for v in (a, b, c))):
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        out.append(_round_exact(exact, a.dtype) if exact else np.asarray(x * y + z, a.dtype))
    return np.asarray(out, a.dtype).reshape(a.shape)


@st.composite
def fma_case(draw):
    """Operands of one shape or rank 0; half the time the addend cancels the rounded product,
    so that the result is the product's rounding error (wrong unless rounded once)."""
    dtype = draw(st.sampled_from(FLOAT))
    shape = draw(shapes())
    a, b, c = (array(draw, dtype, draw(st.sampled_from([shape, ()])), lo=-100, hi=100)
               for _ in range(3))
    if draw(st.booleans()):
        c = np.negative(a.astype(np.float64) * b).astype(dtype)
    return Case([a, b, c], {}, _fma_ref, rtol=0.0)


@st.composite
def select_n_case(draw):
    dtype = draw(st.sampled_from(ALL))
    shape = draw(shapes())
    boolean = draw(st.booleans())
    n = draw(st.integers(1, 2)) if boolean else draw(st.integers(1, 4))
    cases = [array(draw, dtype, draw(st.sampled_from([shape, ()]))) for _ in range(n)]
    which_shape = draw(st.sampled_from([(), shape]))
    shape = np.broadcast_shapes(*(c.shape for c in cases))
    which_shape = which_shape if shape else ()
    which = draw(hnp.arrays(np.bool_, which_shape) if boolean else
                 hnp.arrays(np.int32, which_shape, elements=st.integers(0, n - 1)))

    def ref(w, *cs):
        idx = np.broadcast_to(w, shape).astype(np.int64)
        cs = np.broadcast_arrays(*cs)
        return np.choose(idx, cs) if cs[0].size and len(cs) > 1 else cs[0]
    return Case([which] + cases, {}, ref, (False,) + tuple(draw(st.booleans()) for _ in cases))


@st.composite
def clamp_case(draw):
    dtype = draw(st.sampled_from(ORDERED))
    shape = draw(shapes())
    x = array(draw, dtype, shape)
    lo = array(draw, dtype, draw(st.sampled_from([(), shape])))
    hi = array(draw, dtype, draw(st.sampled_from([(), shape])))
    return Case([lo, x, hi], {}, lambda a, v, b: np.minimum(np.maximum(v, a), b))


def _convert_ref(x, new_dtype, weak_type=False):
    """XLA's conversion: complex -> real drops the imaginary part (also for bool), float -> int
    truncates, saturates and maps NaN to 0; anything -> bool is `!= 0`."""
    new_dtype = np.dtype(new_dtype)
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        x = np.real(x)
    if new_dtype == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and new_dtype.kind in "iu":
        info = np.iinfo(new_dtype)
        out = [0 if math.isnan(v) else max(int(info.min), min(int(info.max), int(v)))
               if math.isfinite(v) else (int(info.max) if v > 0 else int(info.min))
               for v in x.astype(np.float64).reshape(-1).tolist()]
        return np.array(out, dtype=new_dtype).reshape(x.shape)
    return x.astype(new_dtype)


@st.composite
def convert_case(draw):
    src = draw(st.sampled_from(ALL))
    dst = draw(st.sampled_from(ALL))
    kw = {"lo": -1e6, "hi": 1e6, "specials": True} if src.kind == "f" else {}
    if src == np.float16:
        kw["lo"], kw["hi"] = -6e4, 6e4
    x = array(draw, src, draw(shapes()), **kw)
    weak = draw(st.booleans()) and dst.kind != "b"
    return Case([x], {"new_dtype": dst, "weak_type": weak},
                lambda v, new_dtype, weak_type: _convert_ref(v, new_dtype))


BITCASTABLE = INT + FLOAT


@st.composite
def bitcast_case(draw):
    src = draw(st.sampled_from(BITCASTABLE))
    dst = draw(st.sampled_from(BITCASTABLE))
    shape = draw(shapes())
    if src.itemsize < dst.itemsize:
        shape = shape + (dst.itemsize // src.itemsize,)
    x = array(draw, src, shape, specials=True)

    def ref(v, new_dtype):
        v = np.array(v, order="C")
        if v.dtype.itemsize > new_dtype.itemsize:
            return v.reshape(v.shape + (1,)).view(new_dtype)
        if v.dtype.itemsize < new_dtype.itemsize:
            return v.view(new_dtype).reshape(v.shape[:-1])
        return v.view(new_dtype)
    return Case([x], {"new_dtype": dst}, ref)


# ---------------------------------------------------------------------- structural cases

@st.composite
def iota_case(draw):
    shape = draw(shapes(min_dims=1))
    dim = draw(st.integers(0, len(shape) - 1))
    dtype = draw(st.sampled_from([d for d in NUMBER if d != np.float16]))

    def ref(**params):
        view = [1] * len(shape)
        view[dim] = shape[dim]
        return np.broadcast_to(np.arange(shape[dim]).reshape(view), shape).astype(dtype)
    return Case([], {"dtype": dtype, "shape": shape, "dimension": dim}, ref)


@st.composite
def broadcast_in_dim_case(draw):
    out_shape = draw(shapes(min_dims=0, max_dims=4))
    dims = sorted(draw(st.sets(st.integers(0, max(len(out_shape) - 1, 0)),
                               max_size=len(out_shape))))
    if draw(st.booleans()):  # JAX allows a transposing broadcast
        dims = draw(st.permutations(dims))
    in_shape = tuple(draw(st.sampled_from([1, out_shape[d]])) for d in dims)
    x = array(draw, draw(st.sampled_from(ALL)), in_shape)

    def ref(v, shape, broadcast_dimensions):
        order = np.argsort(broadcast_dimensions)
        v = np.transpose(v, order) if v.ndim else v
        view = [1] * len(shape)
        for j, i in enumerate(order):
            view[broadcast_dimensions[i]] = v.shape[j]
        return np.broadcast_to(v.reshape(view), shape)
    return Case([x], {"shape": out_shape, "broadcast_dimensions": tuple(dims)}, ref,
                (draw(st.booleans()),))


@st.composite
def reshape_case(draw):
    shape = draw(shapes())
    x = array(draw, draw(st.sampled_from(ALL)), shape)
    new = draw(st.sampled_from([(x.size,), shape[::-1], (1,) + shape, shape + (1,)]))
    dims = draw(st.one_of(st.none(), st.permutations(range(len(shape))).map(tuple)))
    return Case([x], {"new_sizes": new, "dimensions": dims},
                lambda v, new_sizes, dimensions: np.reshape(
                    v if dimensions is None else np.transpose(v, dimensions), new_sizes))


@st.composite
def transpose_case(draw):
    shape = draw(shapes())
    perm = tuple(draw(st.permutations(range(len(shape)))))
    x = array(draw, draw(st.sampled_from(ALL)), shape)
    return Case([x], {"permutation": perm}, lambda v, permutation: np.transpose(v, permutation))


@st.composite
def squeeze_case(draw):
    shape = list(draw(shapes(max_dims=2)))
    for _ in range(draw(st.integers(0, 2))):
        shape.insert(draw(st.integers(0, len(shape))), 1)
    ones = [i for i, d in enumerate(shape) if d == 1]
    dims = tuple(sorted(draw(st.sets(st.sampled_from(ones), max_size=len(ones))))) if ones \
        else ()
    x = array(draw, draw(st.sampled_from(ALL)), tuple(shape))
    return Case([x], {"dimensions": dims},
                lambda v, dimensions: np.squeeze(v, dimensions) if dimensions else v)


@st.composite
def rev_case(draw):
    shape = draw(shapes())
    dims = tuple(sorted(draw(st.sets(st.integers(0, max(len(shape) - 1, 0)),
                                     max_size=len(shape)))))
    x = array(draw, draw(st.sampled_from(ALL)), shape)
    return Case([x], {"dimensions": dims},
                lambda v, dimensions: np.flip(v, dimensions) if dimensions else v)


@st.composite
def slice_case(draw):
    shape = draw(shapes())
    starts, limits, strides = [], [], []
    for d in shape:
        s = draw(st.integers(0, d))
        starts.append(s)
        limits.append(draw(st.integers(s, d)))
        strides.append(draw(st.integers(1, 3)))
    x = array(draw, draw(st.sampled_from(ALL)), shape)
    params = {"start_indices": tuple(starts), "limit_indices": tuple(limits),
              "strides": draw(st.sampled_from([None, tuple(strides)]))}

    def ref(v, start_indices, limit_indices, strides):
        strides = strides or (1,) * v.ndim
        return v[tuple(slice(*t) for t in zip(start_indices, limit_indices, strides))]
    return Case([x], params, ref)


def _pad_ref(x, value, padding_config):
    out = x
    for axis, (lo, hi, interior) in enumerate(padding_config):
        n = out.shape[axis]
        size = n + max(n - 1, 0) * interior
        dilated = np.full(out.shape[:axis] + (size,) + out.shape[axis + 1:], value, x.dtype)
        index = [slice(None)] * out.ndim
        index[axis] = slice(0, size, interior + 1)
        dilated[tuple(index)] = out
        for amount, at_end in ((lo, False), (hi, True)):
            if amount >= 0:
                extra = np.full(dilated.shape[:axis] + (amount,) + dilated.shape[axis + 1:],
                                value, x.dtype)
                dilated = np.concatenate([dilated, extra] if at_end else [extra, dilated], axis)
            else:
                keep = [slice(None)] * dilated.ndim
                keep[axis] = slice(0, dilated.shape[axis] + amount) if at_end else \
                    slice(-amount, None)
                dilated = dilated[tuple(keep)]
        out = dilated
    return out


@st.composite
def pad_case(draw):
    shape = draw(shapes())
    dtype = draw(st.sampled_from(ALL))
    config = []
    for d in shape:
        interior = draw(st.integers(0, 2))
        full = d + max(d - 1, 0) * interior
        lo = draw(st.integers(-full, 2))
        hi = draw(st.integers(-(full + lo) if full + lo > 0 else 0, 2))
        config.append((lo, hi, interior))
    x = array(draw, dtype, shape)
    value = array(draw, dtype, ())
    return Case([x, value], {"padding_config": tuple(config)},
                lambda v, p, padding_config: _pad_ref(v, p, padding_config))


@st.composite
def concatenate_case(draw):
    shape = draw(shapes(min_dims=1))
    dim = draw(st.integers(0, len(shape) - 1))
    dtype = draw(st.sampled_from(ALL))
    xs = []
    for _ in range(draw(st.integers(1, 3))):
        s = list(shape)
        s[dim] = draw(st.integers(0, 3))
        xs.append(array(draw, dtype, tuple(s)))
    weak = tuple(draw(st.booleans()) for _ in xs)
    return Case(xs, {"dimension": dim}, lambda *vs, dimension: np.concatenate(vs, dimension),
                weak)


# ------------------------------------------------------------------------ indexing cases

def _clamp_start(s, size, d):
    return min(max(int(s), 0), d - size)


@st.composite
def dynamic_slice_case(draw):
    shape = draw(shapes())
    sizes = tuple(draw(st.integers(0, d)) for d in shape)
    idx_dtype = draw(st.sampled_from([np.int32, np.int8, np.uint8]))
    lo = 0 if np.dtype(idx_dtype).kind == "u" else -3
    starts = [np.asarray(draw(st.integers(lo, d + 3)), idx_dtype) for d in shape]
    x = array(draw, draw(st.sampled_from(ALL)), shape)

    def ref(v, *ss, slice_sizes):
        st_ = [_clamp_start(s, z, d) for s, z, d in zip(ss, slice_sizes, v.shape)]
        return v[tuple(slice(s, s + z) for s, z in zip(st_, slice_sizes))]
    return Case([x] + starts, {"slice_sizes": sizes}, ref)


@st.composite
def dynamic_update_slice_case(draw):
    shape = draw(shapes())
    dtype = draw(st.sampled_from(ALL))
    upd_shape = tuple(draw(st.integers(0, d)) for d in shape)
    starts = [np.asarray(draw(st.integers(-3, d + 3)), np.int32) for d in shape]
    x, u = array(draw, dtype, shape), array(draw, dtype, upd_shape)

    def ref(v, w, *ss):
        out = v.copy()
        st_ = [_clamp_start(s, z, d) for s, z, d in zip(ss, w.shape, v.shape)]
        out[tuple(slice(s, s + z) for s, z in zip(st_, w.shape))] = w
        return out
    return Case([x, u] + starts, {}, ref)


def _fill_value(dtype):
    if dtype.kind in "fc":
        return np.nan
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max


@st.composite
def gather_case(draw):
    """Row gathers `x[idx]` of a (n, m) operand (n >= 1), in modes clip and fill."""
    n, m = draw(st.integers(1, 4)), draw(st.integers(0, 3))
    dtype = draw(st.sampled_from(ALL))
    x = array(draw, dtype, (n, m))
    batch = draw(shapes(max_dims=2))
    idx = draw(hnp.arrays(np.int32, batch + (1,), elements=st.integers(-2, n + 1)))
    mode = draw(st.sampled_from(["clip", "fill"]))
    dn = GatherDimensionNumbers(offset_dims=(len(batch),), collapsed_slice_dims=(0,),
                                start_index_map=(0,))

    def ref(v, i, **params):
        rows = i[..., 0].astype(np.int64)
        if mode == "clip":
            return v[np.clip(rows, 0, n - 1)]
        ok = (rows >= 0) & (rows < n)
        return np.where(ok[..., None], v[np.clip(rows, 0, n - 1)],
                        np.asarray(_fill_value(v.dtype), v.dtype))
    return Case([x, idx], {"dimension_numbers": dn, "slice_sizes": (1, m), "mode": mode}, ref)


def _scatter_ref(combine):
    def ref(v, i, u, dimension_numbers, mode):
        out = v.copy()
        n = v.shape[0]
        for row, update in zip(i[..., 0].reshape(-1).tolist(), u.reshape(len(i), v.shape[1])):
            if mode == "clip":
                row = min(max(row, 0), n - 1)
            elif not 0 <= row < n:
                continue
            out[row] = combine(out[row], update)
        return out
    return ref


SCATTER_COMBINE = {
    "scatter": lambda old, new: new,
    "scatter_add": lambda old, new: old | new if old.dtype == np.bool_ else old + new,
    "scatter_mul": lambda old, new: old & new if old.dtype == np.bool_ else old * new,
    "scatter_min": np.minimum,
    "scatter_max": np.maximum,
}


def scatter_case(name):
    @st.composite
    def strategy(draw):
        n, m = draw(st.integers(1, 4)), draw(st.integers(0, 3))
        # complex min/max: NumPy's lexicographic order (kiln's complex max/min)
        dtype = draw(st.sampled_from(ORDERED + COMPLEX if name in ("scatter_min", "scatter_max")
                                     else ALL))
        x = array(draw, dtype, (n, m), lo=-3, hi=3)
        k = draw(st.integers(0, 5))
        rows = st.integers(-2, n + 1)
        if name == "scatter":  # unique in-bounds-after-mode rows: the winner is then defined
            mode = "drop"
            idx = np.array(draw(st.lists(rows, min_size=k, max_size=k, unique=True)),
                           np.int32).reshape(k, 1)
        else:
            mode = draw(st.sampled_from(["clip", "drop"]))
            idx = draw(hnp.arrays(np.int32, (k, 1), elements=rows))
        updates = array(draw, dtype, (k, m), lo=-3, hi=3)
        dn = ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
        return Case([x, idx, updates], {"dimension_numbers": dn, "mode": mode},
                    _scatter_ref(SCATTER_COMBINE[name]), rtol=1e-3)
    return strategy()


# ----------------------------------------------------------------------- reduction cases

def _identity(name, dtype):
    if name == "reduce_sum":
        return 0
    if name == "reduce_prod":
        return 1
    if name in ("reduce_max", "reduce_min"):
        big = np.inf if dtype.kind == "f" else (True if dtype.kind == "b" else None)
        if big is None:
            info = np.iinfo(dtype)
            return info.min if name == "reduce_max" else info.max
        return (-big if name == "reduce_max" and dtype.kind == "f" else
                (False if name == "reduce_max" and dtype.kind == "b" else big))
    if name == "reduce_and":
        return True if dtype == np.bool_ else -1
    return 0


REDUCE_UFUNC = {"reduce_sum": np.add, "reduce_prod": np.multiply, "reduce_max": np.maximum,
                "reduce_min": np.minimum, "reduce_and": np.bitwise_and,
                "reduce_or": np.bitwise_or, "reduce_xor": np.bitwise_xor}
REDUCE_DTYPES = {"reduce_sum": NUMBER, "reduce_prod": NUMBER, "reduce_max": ORDERED,
                 "reduce_min": ORDERED, "reduce_and": INT + BOOL, "reduce_or": INT + BOOL,
                 "reduce_xor": INT + BOOL}


def reduction_case(name):
    @st.composite
    def strategy(draw):
        shape = draw(shapes())
        dtype = draw(st.sampled_from(REDUCE_DTYPES[name]))
        axes = tuple(sorted(draw(st.sets(st.integers(0, max(len(shape) - 1, 0)),
                                         max_size=len(shape)))))
        x = array(draw, dtype, shape, lo=-2, hi=2)

        def ref(v, axes):
            if not axes:
                return v
            wide_ = v.astype(np.float64) if v.dtype == np.float16 else v
            init = np.array(_identity(name, v.dtype)).astype(v.dtype)
            return np.asarray(REDUCE_UFUNC[name].reduce(wide_, axis=axes,
                                                        initial=init)).astype(v.dtype)
        return Case([x], {"axes": axes}, ref, (draw(st.booleans()),), rtol=5e-3)
    return strategy()


def arg_case(name):
    @st.composite
    def strategy(draw):
        shape = draw(shapes(min_dims=1))
        axis = draw(st.sampled_from([i for i, d in enumerate(shape) if d] or [None]))
        if axis is None:
            shape, axis = (1,) + shape, 0
        dtype = draw(st.sampled_from(ORDERED))
        x = array(draw, dtype, shape, lo=-2, hi=2, specials=True)
        index_dtype = draw(st.sampled_from([np.dtype(np.int32), np.dtype(np.uint8)]))
        np_arg = np.argmax if name == "argmax" else np.argmin   # NumPy also picks the 1st NaN
        return Case([x], {"axes": (axis,), "index_dtype": index_dtype},
                    lambda v, axes, index_dtype: np_arg(v, axis=axes[0]).astype(index_dtype))
    return strategy()


CUMULATIVE = {
    "cumsum": (NUMBER, np.add), "cumprod": (NUMBER, np.multiply),
    "cummax": (INT + FLOAT, np.maximum), "cummin": (INT + FLOAT, np.minimum),
    "cumlogsumexp": (FLOAT, np.logaddexp),
}


def cumulative_case(name):
    dtypes_, ufunc = CUMULATIVE[name]

    @st.composite
    def strategy(draw):
        shape = draw(shapes(min_dims=1))
        axis = draw(st.integers(0, len(shape) - 1))
        reverse = draw(st.booleans())
        dtype = draw(st.sampled_from(dtypes_))
        x = array(draw, dtype, shape, lo=-2, hi=2)

        def ref(v, axis, reverse):
            w = v.astype(wide(v.dtype)) if v.dtype.kind in "fc" else v
            w = np.flip(w, axis) if reverse else w
            out = ufunc.accumulate(w, axis=axis, dtype=w.dtype).astype(v.dtype)
            return np.flip(out, axis) if reverse else out
        return Case([x], {"axis": axis, "reverse": reverse}, ref, rtol=5e-3)
    return strategy()


# ----------------------------------------------------------------------- dot_general, sort

@st.composite
def dot_general_case(draw):
    b, m, k, n = (draw(st.integers(0, 3)) for _ in range(4))
    dtype = draw(st.sampled_from(ALL))
    batch = draw(st.booleans())
    lhs_axes = (["b"] if batch else []) + ["m", "k"]
    rhs_axes = (["b"] if batch else []) + ["k", "n"]
    lhs_order, rhs_order = draw(st.permutations(lhs_axes)), draw(st.permutations(rhs_axes))
    size = {"b": b, "m": m, "k": k, "n": n}
    lhs = array(draw, dtype, tuple(size[a] for a in lhs_order), lo=-2, hi=2)
    rhs = array(draw, dtype, tuple(size[a] for a in rhs_order), lo=-2, hi=2)
    dn = (((lhs_order.index("k"),), (rhs_order.index("k"),)),
          ((lhs_order.index("b"),), (rhs_order.index("b"),)) if batch else ((), ()))

    def ref(x, y, dimension_numbers, preferred_element_type=None):
        spec = f"{''.join(lhs_order)},{''.join(rhs_order)}->{'b' if batch else ''}mn"
        if x.dtype == np.bool_:
            return np.einsum(spec, x.astype(np.int64), y.astype(np.int64)) > 0
        w = wide(x.dtype) if x.dtype.kind in "fc" else np.int64
        return np.einsum(spec, x.astype(w), y.astype(w)).astype(x.dtype)
    return Case([lhs, rhs], {"dimension_numbers": dn}, ref, (draw(st.booleans()),) * 2,
                rtol=5e-3)


@st.composite
def fft_case(draw):
    fft_type = draw(st.sampled_from(["FFT", "IFFT", "RFFT", "IRFFT"]))
    lengths = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    batch = tuple(draw(st.lists(st.integers(0, 2), max_size=1)))
    shape = batch + lengths
    if fft_type == "IRFFT":
        shape = shape[:-1] + (lengths[-1] // 2 + 1,)
    dtype = np.float32 if fft_type == "RFFT" else np.complex64
    x = array(draw, np.dtype(dtype), shape, lo=-2, hi=2)
    axes = tuple(range(len(batch), len(shape)))

    def ref(x, fft_type, fft_lengths):
        w = x.astype(np.complex128 if fft_type != "RFFT" else np.float64)
        out = {"FFT": lambda: np.fft.fftn(w, axes=axes), "IFFT": lambda: np.fft.ifftn(w, axes=axes),
               "RFFT": lambda: np.fft.rfftn(w, axes=axes),
               "IRFFT": lambda: np.fft.irfftn(w, s=fft_lengths, axes=axes)}[fft_type]()
        return out.astype(np.float32 if fft_type == "IRFFT" else np.complex64)
    return Case([x], {"fft_type": fft_type, "fft_lengths": lengths}, ref, rtol=1e-4)


@st.composite
def decomposition_case(draw, name):
    """A well-conditioned (batch of) square matrices for the decompositions; cholesky and
    triangular_solve against NumPy, the others' conventions (signs, pivots) in
    tests/test_linalg_*.py (ref None)."""
    n = draw(st.integers(1, 4))
    batch = tuple(draw(st.lists(st.integers(0, 2), max_size=1)))
    dtype = np.dtype(np.float32)   # (float64: tests/test_linalg_*.py, which enable x64)
    a = array(draw, dtype, batch + (n, n), lo=-1, hi=1)
    spd = (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=dtype)).astype(dtype)
    if name == "cholesky":
        return Case([spd], {}, lambda x: np.linalg.cholesky(x.astype(np.float64)).astype(dtype),
                    (False,), rtol=1e-3)
    if name == "triangular_solve":
        lower = np.tril(spd) if draw(st.booleans()) else np.triu(spd)
        b = array(draw, dtype, batch + (n, 2), lo=-1, hi=1)
        params = {"left_side": True, "lower": bool(np.allclose(lower, np.tril(lower))),
                  "transpose_a": False, "conjugate_a": False, "unit_diagonal": False}
        return Case([lower, b], params, lambda a, b, **_: np.linalg.solve(
            a.astype(np.float64), b.astype(np.float64)).astype(dtype), (False, False), rtol=1e-3)
    params = {"qr": {"full_matrices": False}, "eigh": {"lower": True},
              "eig": {"compute_left_eigenvectors": False, "compute_right_eigenvectors": True},
              "schur": {"compute_schur_vectors": True},
              "svd": {"full_matrices": False, "compute_uv": True}}.get(name, {})
    return Case([spd], params, None, (False,))   # (results are strongly typed, as JAX's)


def _sort_key(v):
    """The comparator of XLA's sort: NaNs last, -0.0 == 0.0, complex lexicographic."""
    if isinstance(v, complex):
        return (_sort_key(v.real), _sort_key(v.imag))
    if isinstance(v, float):
        return (1, 0.0) if math.isnan(v) else (0, v)
    return (0, v)


@st.composite
def sort_case(draw):
    shape = draw(shapes(min_dims=1))
    dim = draw(st.integers(0, len(shape) - 1))
    n_ops = draw(st.integers(1, 3))
    num_keys = draw(st.integers(1, n_ops))
    ops = [array(draw, draw(st.sampled_from(ALL)), shape, lo=-2, hi=2, specials=True)
           for _ in range(n_ops)]

    def ref(*xs, dimension, is_stable=True, num_keys=1):
        moved = [np.moveaxis(x, dimension, -1) for x in xs]
        outs = [np.empty_like(m) for m in moved]
        for idx in np.ndindex(moved[0].shape[:-1]):
            rows = [m[idx].tolist() for m in moved]
            order = sorted(range(len(rows[0])),
                           key=lambda j: tuple(_sort_key(r[j]) for r in rows[:num_keys]))
            for out, m in zip(outs, moved):
                out[idx] = m[idx][order]
        return tuple(np.moveaxis(o, -1, dimension) for o in outs)
    return Case(ops, {"dimension": dim, "is_stable": True, "num_keys": num_keys}, ref)


# ------------------------------------------------------------- structured control flow

def _region(text):
    """A control-flow region (a closed SSA Function) from its printed form."""
    return from_source(text)


def _t(shape, dtype=np.float32):
    return ShapedArray(shape, dtype).str_short()


def _branches(shape):
    t = _t(shape)
    return (_region(f"def b0(a: '{t}') -> '{t}':\n    b = neg(a)\n    return b\n"),
            _region(f"def b1(a: '{t}') -> '{t}':\n    return a\n"),
            _region(f"def b2(a: '{t}') -> '{t}':\n    b = add(a, a)\n    return b\n"))


_BRANCH_REFS = (np.negative, lambda a: a, lambda a: a + a)


@st.composite
def cond_case(draw):
    shape = draw(shapes())
    x = array(draw, np.float32, shape)
    boolean = draw(st.booleans())
    index = np.asarray(draw(st.booleans()), np.bool_) if boolean else \
        np.asarray(draw(st.integers(-2, 4)), np.int32)
    n = 2 if boolean else 3
    branches = _branches(shape)[:n]

    def ref(i, v, branches):
        return (_BRANCH_REFS[min(max(int(i), 0), n - 1)](v),)
    return Case([index, x], {"branches": branches}, ref, (False, False))


@st.composite
def while_loop_case(draw):
    shape = draw(shapes())
    t = _t(shape)
    cond_fn = _region(f"def c(lim: 'i32[]', i: 'i32[]', acc: '{t}') -> 'bool[]':\n"
                      f"    b = lt(i, lim)\n    return b\n")
    body_fn = _region(f"def body(lim: 'i32[]', i: 'i32[]', acc: '{t}') -> '(i32[], {t})':\n"
                      f"    i_2 = add(i, 1)\n    acc_2 = mul(acc, 2.0)\n"
                      f"    return i_2, acc_2\n")
    lim, start = np.int32(draw(st.integers(-1, 5))), np.int32(draw(st.integers(0, 3)))
    acc = array(draw, np.float32, shape)

    def ref(lim, i, acc, **params):
        while i < lim:
            i, acc = i + 1, acc * np.float32(2)
        return np.int32(i), acc
    return Case([np.asarray(lim), np.asarray(start), acc],
                {"cond_fn": cond_fn, "body_fn": body_fn, "num_consts": 1}, ref,
                (False, False, False))


@st.composite
def scan_case(draw):
    shape = draw(shapes(max_dims=2))
    length = draw(st.integers(0, 4))
    reverse = draw(st.booleans())
    t = _t(shape)
    axes = tuple(range(len(shape)))
    body = _region(f"def step(scale: 'f32[]', carry: '{t}', row: '{t}') -> '({t}, f32[])':\n"
                   f"    carry_1 = add(carry, row)\n    scaled = mul(row, scale)\n"
                   f"    y = reduce_sum(scaled, axes={axes!r})\n    return carry_1, y\n")
    scale = np.asarray(array(draw, np.float32, ()))
    init = array(draw, np.float32, shape)
    xs = array(draw, np.float32, (length,) + shape)

    def ref(scale, carry, xs, **params):
        ys = [None] * length
        for k in (range(length - 1, -1, -1) if reverse else range(length)):
            ys[k] = np.sum(xs[k] * scale, dtype=np.float32)
            carry = carry + xs[k]
        return carry, np.array(ys, np.float32).reshape(length)
    params = {"body": body, "length": length, "reverse": reverse, "num_consts": 1,
              "num_carry": 1}
    return Case([scale, init, xs], params, ref, (False, False, False), rtol=1e-4)


@st.composite
def fusion_case(draw):
    shape = draw(shapes(max_dims=2))
    t = _t(shape)
    axes = tuple(range(len(shape)))
    body = _region(f"def fused(x: '{t}', y: '{t}') -> '({t}, f32[])':\n"
                   f"    a = mul(x, y)\n    b = add(a, x)\n"
                   f"    s = reduce_sum(b, axes={axes!r})\n    return b, s\n")
    x, y = array(draw, np.float32, shape), array(draw, np.float32, shape)

    def ref(x, y, **params):
        b = x * y + x
        return b, np.sum(b, dtype=np.float32)
    return Case([x, y], {"body": body}, ref, (False, False), rtol=1e-4)


def _square_regions(shape):
    """x*x with a hand-written JVP region, VJP regions and a body (the custom-rule cases)."""
    t = _t(shape)
    call = _region(f"def f(x: '{t}') -> '{t}':\n    y = mul(x, x)\n    return y\n")
    jvp = _region(f"def f_jvp(x: '{t}', x_dot: '{t}') -> '({t}, {t})':\n"
                  f"    y = mul(x, x)\n    two_x = add(x, x)\n    y_dot = mul(two_x, x_dot)\n"
                  f"    return y, y_dot\n")
    fwd = _region(f"def f_fwd(x: '{t}') -> '({t}, {t})':\n    y = mul(x, x)\n"
                  f"    return y, x\n")
    bwd = _region(f"def f_bwd(x: '{t}', ct: '{t}') -> '{t}':\n    two_x = add(x, x)\n"
                  f"    x_bar = mul(two_x, ct)\n    return x_bar\n")
    return call, jvp, fwd, bwd


def _square_ref(x, **params):
    return (x * x,)


def _square_vmap_rule(size, batched, consts, inputs):
    """custom_vmap_call's batching rule of x*x: the batched square, batched as its input."""
    from kiln.compiler.primitives import emit
    return [emit.mul(inputs[0], inputs[0])], list(batched)


_SQUARE_VMAP_RULE = custom_vmap_rule(_square_vmap_rule)
# A user-defined primitive, for user_primitive's `rules` token (its rules are tested by
# tests/test_extend.py; here its region runs).
_SQUARE_USER_PRIMITIVE = Primitive("square")
# its batching rule, for the generic vmap checks (tests/test_vmap_completeness.py)
batching.primitive_batchers[_SQUARE_USER_PRIMITIVE] = lambda args, dims: (args[0] * args[0],
                                                                           dims[0])


@st.composite
def custom_rule_case(draw, name):
    shape = draw(shapes())
    call, jvp, fwd, bwd = _square_regions(shape)
    params = {"custom_jvp_call": {"call": call, "jvp": jvp, "num_consts": 0},
              "custom_vjp_call": {"call": call, "fwd": fwd, "bwd": bwd, "num_consts": 0},
              "custom_vmap_call": {"call": call, "rule": _SQUARE_VMAP_RULE, "num_consts": 0},
              "user_primitive": {"call": call, "rules": _SQUARE_USER_PRIMITIVE._rules,
                                 "name": "square", "num_consts": 0, "params": ()},
              "remat": {"body": call, "prevent_cse": True}}[name]
    return Case([array(draw, np.float32, shape)], params, _square_ref, (False,))


@st.composite
def linear_solve_case(draw):
    """A = -I: matvec, its transpose and both solves are one negation region."""
    shape = draw(shapes())
    t = _t(shape)
    neg = _region(f"def neg(x: '{t}') -> '{t}':\n    y = neg(x)\n    return y\n")
    params = {"matvec": neg, "vecmat": neg, "solve": neg, "transpose_solve": neg,
              "num_consts": 0}
    return Case([array(draw, np.float32, shape)], params, lambda x, **p: (-x,), (False,))


@st.composite
def root_case(draw):
    """f(x) = -x from any guess: the root is the solve region's (zero), the tangent solve
    negates."""
    shape = draw(shapes())
    t = _t(shape)
    zero = _region(f"def zero(x: '{t}') -> '{t}':\n    y = sub(x, x)\n    return y\n")
    neg = _region(f"def neg(x: '{t}') -> '{t}':\n    y = neg(x)\n    return y\n")
    tangent = _region(f"def tangent(x: '{t}', r: '{t}') -> '{t}':\n    y = neg(r)\n"
                      f"    return y\n")
    params = {"f": neg, "solve": zero, "tangent_solve": tangent, "num_consts": 0}
    return Case([array(draw, np.float32, shape)], params, lambda x, **p: (x - x,), (False,))


@st.composite
def debug_print_case(draw):
    xs = [array(draw, draw(st.sampled_from(ALL)), draw(shapes())) for _ in
          range(draw(st.integers(0, 2)))]
    template = tuple([("s", "x:")] + [("v", i) for i in range(len(xs))])
    return Case(xs, {"fmt": None, "template": template, "sep": " ", "end": "\n"},
                lambda *vs, **params: (), (False,) * len(xs))


def _negate_all(*xs):
    return tuple(np.negative(x) if x.dtype.kind != "b" else ~x for x in xs)


# pure_callback's host function for the generic checks (registered once per process)
from kiln.compiler.primitives.callbacks import register_host_function  # noqa: E402
NEGATE_TOKEN = register_host_function(("tests", "negate_all"), _negate_all)


@st.composite
def pure_callback_case(draw):
    xs = [array(draw, draw(st.sampled_from(ALL)), draw(shapes())) for _ in
          range(draw(st.integers(1, 2)))]
    results = tuple((x.dtype.name, x.shape) for x in xs)
    # (not "expand_dims": an elementwise callback then returns size-1 batch axes for unbatched
    # operands, which JAX refuses too; tests/test_pure_callback.py covers that method)
    method = draw(st.sampled_from(["sequential", "broadcast_all"]))
    return Case(xs, {"callback": NEGATE_TOKEN, "results": results, "vmap_method": method},
                lambda *vs, **params: _negate_all(*vs), (False,) * len(xs))


@st.composite
def io_callback_case(draw):
    xs = [array(draw, draw(st.sampled_from(ALL)), draw(shapes())) for _ in
          range(draw(st.integers(1, 2)))]
    results = tuple((x.dtype.name, x.shape) for x in xs)
    return Case(xs, {"callback": NEGATE_TOKEN, "results": results, "ordered": False},
                lambda *vs, **params: _negate_all(*vs), (False,) * len(xs))


SEEN = []
SEEN_TOKEN = register_host_function(("tests", "seen"), lambda *xs: SEEN.append(xs) or [])


@st.composite
def debug_callback_case(draw):
    xs = [array(draw, draw(st.sampled_from(ALL)), draw(shapes())) for _ in
          range(draw(st.integers(0, 2)))]
    return Case(xs, {"callback": SEEN_TOKEN}, lambda *vs, **params: (), (False,) * len(xs))


# ffi_call's handler for the generic checks: an XLA FFI handler written with ctypes (it answers
# XLA's metadata query and negates each operand into its result), registered once per process.
from kiln.compiler.primitives import xla_ffi  # noqa: E402


@xla_ffi.HANDLER
def _ffi_negate(frame):
    f = frame.contents
    if f.extension_start:   # the metadata query
        md = xla_ffi.MetadataExtension.from_address(f.extension_start).metadata.contents
        md.api_version.major_version = xla_ffi.API_MAJOR
        md.api_version.minor_version = xla_ffi.API_MINOR
        return None
    dtypes = {code: dtype for dtype, code in xla_ffi.DATA_TYPES.items()}
    for k in range(f.args.size):
        src, dst = (xla_ffi.Buffer.from_address(p) for p in (f.args.args[k], f.rets.rets[k]))
        dtype, shape = dtypes[src.dtype], tuple(src.dims[i] for i in range(src.rank))
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if size:
            x = np.frombuffer((ctypes.c_char * size).from_address(src.data), dtype)
            out = np.frombuffer((ctypes.c_char * size).from_address(dst.data), dtype)
            out[...] = _negate_all(x)[0]
    return None


xla_ffi.register_target("tests_negate_all",
                        {"execute": ctypes.cast(_ffi_negate, ctypes.c_void_p).value})


def ffi_call_case(name):
    @st.composite
    def case(draw):
        xs = [array(draw, draw(st.sampled_from(ALL)), draw(shapes())) for _ in
              range(draw(st.integers(1, 2)))]
        results = tuple((x.dtype.name, x.shape) for x in xs)
        method = draw(st.sampled_from(["sequential", "broadcast_all"]))
        return Case(xs, {"target_name": "tests_negate_all", "results": results,
                         "attributes": (), "vmap_method": method},
                    lambda *vs, **params: _negate_all(*vs), (False,) * len(xs))
    return case()


@st.composite
def run_time_check_case(draw):
    """checkify's `check` with flags that never fail: no results (tests/test_checkify.py
    covers failures)."""
    payload = [array(draw, draw(st.sampled_from(ALL)), draw(shapes())) for _ in
               range(draw(st.integers(0, 2)))]
    xs = [np.asarray(False), np.asarray(draw(st.integers(1, 10)), np.int32)] + payload
    slots = (("FailedCheckError", tuple((x.shape, x.dtype.name) for x in payload)),)
    return Case(xs, {"slots": slots, "debug": draw(st.booleans())}, lambda *vs, **params: (),
                (False,) * len(xs))


def test_debug_print_prints_pieces_like_print(capsys):
    prim = PRIMITIVES["debug_print"]
    x = np.arange(3, dtype=np.int32)
    assert prim.abstract_eval(ShapedArray((3,), np.int32), template=(("v", 0),)) == ()
    assert prim.impl(x, np.float32(1.5), template=(("s", "x ="), ("v", 0), ("v", 1)),
                     sep=" ", end="\n") == ()
    prim.impl(x, fmt="{} and {k}", template=(("v", 0), ("kv", "k", 0)))
    assert capsys.readouterr().out == "x = [0 1 2] 1.5\n[0 1 2] and [0 1 2]\n"
    assert prim.effect


# --------------------------------------------------------------------------- the table

from test_conv import reference as conv_reference  # noqa: E402
from test_reduce_window import reference as window_reference  # noqa: E402


@st.composite
def conv_case(draw):
    """NC.../OI... layouts and explicit params; test_conv.py covers every layout and group."""
    reference = conv_reference
    nd = draw(st.integers(1, 2))
    x = array(draw, np.float32, (draw(st.integers(0, 2)), 2) + (draw(st.integers(1, 4)),) * nd)
    w = array(draw, np.float32, (draw(st.integers(1, 2)), 2) + (draw(st.integers(1, 2)),) * nd)
    params = dict(window_strides=(draw(st.integers(1, 2)),) * nd,
                  padding=((draw(st.integers(-1, 1)), draw(st.integers(0, 1))),) * nd,
                  lhs_dilation=(draw(st.integers(1, 2)),) * nd,
                  rhs_dilation=(draw(st.integers(1, 2)),) * nd,
                  dimension_numbers=(tuple(range(nd + 2)),) * 3, feature_group_count=1,
                  batch_group_count=1)

    def ref(x, w, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
            **_):
        return reference(x, w, window_strides, padding, lhs_dilation, rhs_dilation,
                         dimension_numbers, 1, 1).astype(x.dtype)
    return Case([x, w], params, ref, rtol=1e-4)


@st.composite
def window_case(draw, name):
    """Window params on each axis; test_reduce_window.py covers them with every form."""
    reference = window_reference
    shape = draw(shapes(min_dims=1, max_dims=2))
    x = array(draw, np.float32, shape)
    n = len(shape)
    params = dict(window_dimensions=tuple(draw(st.integers(1, 2)) for _ in range(n)),
                  window_strides=tuple(draw(st.integers(1, 2)) for _ in range(n)),
                  padding=tuple((draw(st.integers(0, 1)), draw(st.integers(0, 1)))
                                for _ in range(n)),
                  window_dilation=(1,) * n)
    if name.startswith("reduce_window"):
        op = {"sum": "add", "max": "max", "min": "min"}[name[len("reduce_window_"):]]
        init = {"add": 0.0, "max": -np.inf, "min": np.inf}[op]
        params["base_dilation"] = tuple(draw(st.integers(1, 2)) for _ in range(n))

        def ref(x, window_dimensions, window_strides, padding, base_dilation,
                window_dilation):
            return reference(x, op, np.float32(init), window_dimensions, window_strides,
                             padding, base_dilation, window_dilation)
        return Case([x], params, ref, rtol=1e-5)
    out = tuple(0 if d + lo + hi < w else (d + lo + hi - w) // s + 1 for d, w, s, (lo, hi) in
                zip(shape, params["window_dimensions"], params["window_strides"],
                    params["padding"]))
    values = array(draw, np.float32, out if name == "select_and_scatter_add" else shape)
    params["select_prim"] = draw(st.sampled_from(["ge", "le"]))
    return Case([values, x], params, None, weak=(False, False))


CASES = {
    "conv_general_dilated": conv_case(),
    "reduce_window_sum": window_case("reduce_window_sum"),
    "reduce_window_max": window_case("reduce_window_max"),
    "reduce_window_min": window_case("reduce_window_min"),
    "select_and_gather_add": window_case("select_and_gather_add"),
    "select_and_scatter_add": window_case("select_and_scatter_add"),
    **{name: unary_case(name) for name in UNARY},
    "no_derivative": identity_case("tridiagonal"),
    "name": identity_case("layer1_output"),
    "sharding_constraint": constraint_case(),
    **{name: binary_case(name) for name in BINARY},
    "round": round_case(),
    "pow": pow_case(),
    "integer_pow": integer_pow_case(),
    "shift_left": shift_case("left"),
    "shift_right_logical": shift_case("logical"),
    "shift_right_arithmetic": shift_case("arithmetic"),
    "select_n": select_n_case(),
    "clamp": clamp_case(),
    "fma": fma_case(),
    "convert_element_type": convert_case(),
    "bitcast_convert_type": bitcast_case(),
    "iota": iota_case(),
    "broadcast_in_dim": broadcast_in_dim_case(),
    "reshape": reshape_case(),
    "transpose": transpose_case(),
    "squeeze": squeeze_case(),
    "rev": rev_case(),
    "slice": slice_case(),
    "pad": pad_case(),
    "concatenate": concatenate_case(),
    "dynamic_slice": dynamic_slice_case(),
    "dynamic_update_slice": dynamic_update_slice_case(),
    "gather": gather_case(),
    **{name: scatter_case(name) for name in SCATTER_COMBINE},
    **{name: reduction_case(name) for name in REDUCE_UFUNC},
    "argmax": arg_case("argmax"),
    "argmin": arg_case("argmin"),
    **{name: cumulative_case(name) for name in CUMULATIVE},
    "dot_general": dot_general_case(),
    "fft": fft_case(),
    **{name: decomposition_case(name)
       for name in ("cholesky", "triangular_solve", "lu", "qr", "eigh", "eig", "schur",
                    "hessenberg", "svd")},
    "sort": sort_case(),
    "cond": cond_case(),
    "while_loop": while_loop_case(),
    "scan": scan_case(),
    "fusion": fusion_case(),
    "debug_print": debug_print_case(),
    "check": run_time_check_case(),
    "pure_callback": pure_callback_case(),
    "debug_callback": debug_callback_case(),
    "io_callback": io_callback_case(),
    "ffi_call": ffi_call_case("ffi_call"),
    "ffi_call_effect": ffi_call_case("ffi_call_effect"),
    **{name: custom_rule_case(name)
       for name in ("custom_jvp_call", "custom_vjp_call", "custom_vmap_call", "user_primitive",
                    "remat")},
    "linear_solve": linear_solve_case(),
    "root": root_case(),
}


# Reverse mode's tape (values of type `tape[]`, not arrays) is checked by its own test below.
TAPE_PRIMITIVES = ("tape_new", "tape_push", "tape_pop", "tape_add")
# Collectives have no value outside the transform binding their axis (their impl raises a
# NameError): tests/test_vmap_collectives.py checks them through vmap.
COLLECTIVES = {name for name, prim in PRIMITIVES.items() if prim.collective}


# Collectives across processes: tests/test_distributed.py runs them under mpirun; here, what
# one process without kiln.distributed gets.
PROCESS_PRIMITIVES = ("process_allreduce", "process_allgather", "process_sendrecv")
# shard_map's region form runs only in a StableHLO module partitioned over PJRT devices
# (tests/test_pjrt_shard_map.py runs it against JAX); anywhere else its impl refuses.
REGION_ONLY = ("shard_map",)


@pytest.mark.parametrize("name, params", [("process_allreduce", {"op": "sum", "processes": 2}),
                                          ("process_allgather", {"process": 0, "processes": 2}),
                                          ("process_sendrecv", {"dest": 1, "source": 1, "tag": 0})])
def test_collectives_across_processes_need_kiln_distributed(name, params):
    prim = PRIMITIVES[name]
    out = prim.abstract_eval(ShapedArray((3,), np.dtype(np.float32)), **params)
    assert out.shape == ((2, 3) if name == "process_allgather" else (3,))
    with pytest.raises(RuntimeError, match="kiln.distributed is not initialized"):
        prim.impl(np.ones(3, np.float32), **params)
    with pytest.raises(TypeError, match="no max of complex values"):
        PRIMITIVES["process_allreduce"].abstract_eval(
            ShapedArray((3,), np.dtype(np.complex64)), op="max", processes=2)


def test_shard_map_region_runs_only_in_a_partitioned_module():
    with pytest.raises(Exception, match="a shard_map region runs only in a StableHLO module"):
        PRIMITIVES["shard_map"].impl(np.ones(2, np.float32), body=None, mesh_axes=(),
                                     device_ids=(), manual=(), in_names=(), out_names=())


def test_every_primitive_has_a_case():
    covered = (set(CASES) | set(TAPE_PRIMITIVES) | COLLECTIVES | set(PROCESS_PRIMITIVES)
               | set(REGION_ONLY))
    assert sorted(covered) == sorted(PRIMITIVES), (
        "primitives without a case: " + ", ".join(sorted(set(PRIMITIVES) - covered))
        + "; cases without a primitive: " + ", ".join(sorted(covered - set(PRIMITIVES))))


def test_tape_is_a_persistent_stack():
    new, push, pop, add = (PRIMITIVES[n] for n in TAPE_PRIMITIVES)
    tape_t = new.abstract_eval()
    assert tape_t.str_short() == "tape[]"
    types = ("f32[2]", "i32[]{weak}")
    assert push.abstract_eval(tape_t, ShapedArray((2,), np.float32),
                              ShapedArray((), np.int32, True)) == tape_t
    assert pop.abstract_eval(tape_t, types=types) == (
        tape_t, ShapedArray((2,), np.float32), ShapedArray((), np.int32, True))
    empty = new.impl()
    one = push.impl(empty, np.ones(2, np.float32), np.int32(3))
    two = push.impl(one, np.zeros(2, np.float32), np.int32(4))
    cell = lambda t: t[()]   # noqa: E731  (a tape value is a rank-0 array of a Tape cell)
    below, x, n = pop.impl(two, types=types)
    assert cell(below) is cell(one) and int(n) == 4 and not x.any()
    again = pop.impl(two, types=types)      # popping does not change the tape
    assert cell(again[0]) is cell(one) and int(again[2]) == 4
    assert cell(pop.impl(one, types=types)[0]) is cell(empty)
    below, x, n = pop.impl(empty, types=types)   # an empty (cotangent) tape: zeros
    assert cell(below) is cell(empty) and not x.any() and int(n) == 0 and x.shape == (2,)
    total = add.impl(two, push.impl(empty, np.ones(2, np.float32), np.int32(1)))
    top = pop.impl(total, types=types)
    assert list(top[1]) == [1, 1] and int(top[2]) == 5 and pop.impl(top[0], types=types)[2] == 3


def test_every_primitive_declares_its_rules():
    for name, prim in PRIMITIVES.items():
        assert prim.name == name and callable(prim.abstract_eval) and callable(prim.impl)


# ------------------------------------------------------------------------- the checks

def _tolerance(dtype, override):
    if override is not None:
        return override
    return {np.dtype(np.float16): 4e-3}.get(np.dtype(dtype), 2e-5)


def assert_close(got, want, rtol, label=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (label, got.shape, want.shape)
    if got.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=label)
        return
    kind = np.complex128 if got.dtype.kind == "c" else np.float64
    g, w = got.astype(kind), want.astype(kind)
    special = ~np.isfinite(w)  # NaN or infinite parts must agree exactly, part by part
    for part in (np.real, np.imag):
        np.testing.assert_array_equal(part(g[special]), part(w[special]), err_msg=label)
    ok = ~special
    assert np.all(np.isfinite(g[ok])), (label, g, w)
    err = np.abs(g[ok] - w[ok])
    assert np.all(err <= rtol * (1 + np.abs(w[ok]))), (label, g, w)


# Operands whose weak types make the result weak (JAX 0.10.2's rules); by default all operands.
_WEAK_FROM = {"dynamic_slice": slice(0, 1), "dynamic_update_slice": slice(0, 2),
              "gather": slice(0, 1), "select_n": slice(1, None),
              **{n: slice(0, 1) for n in SCATTER_COMBINE}}
_NEVER_WEAK = {"iota", "argmax", "argmin", "bitcast_convert_type", "pure_callback",
               "io_callback", "ffi_call", "ffi_call_effect"}


def _expected_weak(name, weak, i, out_aval, params):
    if name == "convert_element_type":
        return params["weak_type"]
    if name == "sort":
        return weak[i]
    if name in _NEVER_WEAK or out_aval.dtype == np.bool_:
        return False
    return all(weak[_WEAK_FROM.get(name, slice(None))])


def check_case(name, case):
    prim = PRIMITIVES[name]
    # Only numbers are weakly typed (a Python bool is a strong bool).
    weak = tuple(bool(w) and a.dtype.kind != "b"
                 for a, w in zip(case.args, case.weak or (False,) * len(case.args)))
    avals = [ShapedArray(a.shape, a.dtype, w) for a, w in zip(case.args, weak)]
    out_avals = prim.abstract_eval(*avals, **case.params)
    outs = prim.impl(*case.args, **case.params)
    eager = apply_eager(prim, [Array(a, w) for a, w in zip(case.args, weak)], case.params)
    if not prim.multiple_results:
        out_avals, outs, eager = (out_avals,), (outs,), (eager,)
    assert len(outs) == len(out_avals) == len(eager)
    for aval, out, arr in zip(out_avals, outs, eager):
        out = np.asarray(out)
        assert (out.shape, out.dtype) == (aval.shape, aval.dtype), (name, aval, out.dtype,
                                                                   out.shape)
        assert (arr.shape, arr.dtype, arr.weak_type) == (aval.shape, aval.dtype,
                                                         aval.weak_type), name
    for i, aval in enumerate(out_avals):
        assert aval.weak_type == _expected_weak(name, weak, i, aval, case.params), name
    if case.ref is not None:
        want = case.ref(*case.args, **case.params)
        want = want if prim.multiple_results else (want,)
        for out, aval, w in zip(outs, out_avals, want):
            assert_close(out, w, _tolerance(aval.dtype, case.rtol), name)


@pytest.mark.parametrize("name", sorted(CASES))
@SETTINGS
@given(data=st.data())
def test_primitive(name, data):
    case = data.draw(CASES[name], label=name)
    if not case.weak:
        case = case._replace(weak=tuple(data.draw(st.booleans()) for _ in case.args))
    with np.errstate(all="ignore"):
        check_case(name, case)


# ----------------------------------------------------------------- accepted dtypes (JAX)

DTYPE_NAMES = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16",
               "float32", "complex64"]

# For each elementwise primitive: the result dtype per operand dtype (DTYPE_NAMES order; `-`:
# rejected) and the first rejected dtype with JAX's message. Recorded from JAX 0.10.2 by
# calling jax.lax.<name> on arrays of each dtype.
ACCEPTS = {
    "neg": ("- i8 i16 i32 u8 u16 u32 f16 f32 c64", ("bool", "neg does not accept dtype bool. Accepted dtypes are subtypes of integer, floating, complexfloating.")),  # noqa: E501
    "sign": ("- i8 i16 i32 u8 u16 u32 f16 f32 c64", ("bool", "sign does not accept dtype bool. Accepted dtypes are subtypes of integer, floating, complexfloating.")),  # noqa: E501
    "floor": ("- - - - - - - f16 f32 -", ("bool", "floor does not accept dtype bool. Accepted dtypes are subtypes of floating.")),  # noqa: E501
    "ceil": ("- - - - - - - f16 f32 -", ("bool", "ceil does not accept dtype bool. Accepted dtypes are subtypes of floating.")),  # noqa: E501
    "round": ("- - - - - - - f16 f32 -", ("bool", "round does not accept dtype bool. Accepted dtypes are subtypes of floating.")),  # noqa: E501
    "is_finite": ("- - - - - - - b1 b1 -", ("bool", "is_finite does not accept dtype bool. Accepted dtypes are subtypes of floating.")),  # noqa: E501
    "exp": ("- - - - - - - f16 f32 c64", ("bool", "exp does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "exp2": ("- - - - - - - f16 f32 c64", ("bool", "exp2 does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "log": ("- - - - - - - f16 f32 c64", ("bool", "log does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "log1p": ("- - - - - - - f16 f32 c64", ("bool", "log1p does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "expm1": ("- - - - - - - f16 f32 c64", ("bool", "expm1 does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "tanh": ("- - - - - - - f16 f32 c64", ("bool", "tanh does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "logistic": ("- - - - - - - f16 f32 c64", ("bool", "logistic does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "sin": ("- - - - - - - f16 f32 c64", ("bool", "sin does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "cos": ("- - - - - - - f16 f32 c64", ("bool", "cos does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "tan": ("- - - - - - - f16 f32 c64", ("bool", "tan does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "asin": ("- - - - - - - f16 f32 c64", ("bool", "asin does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "acos": ("- - - - - - - f16 f32 c64", ("bool", "acos does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "atan": ("- - - - - - - f16 f32 c64", ("bool", "atan does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "sinh": ("- - - - - - - f16 f32 c64", ("bool", "sinh does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "cosh": ("- - - - - - - f16 f32 c64", ("bool", "cosh does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "asinh": ("- - - - - - - f16 f32 c64", ("bool", "asinh does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "acosh": ("- - - - - - - f16 f32 c64", ("bool", "acosh does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "atanh": ("- - - - - - - f16 f32 c64", ("bool", "atanh does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "sqrt": ("- - - - - - - f16 f32 c64", ("bool", "sqrt does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "rsqrt": ("- - - - - - - f16 f32 c64", ("bool", "rsqrt does not accept dtype bool. Accepted dtypes are subtypes of floating, complexfloating.")),  # noqa: E501
    "cbrt": ("- - - - - - - f16 f32 -", ("bool", "cbrt does not accept dtype bool. Accepted dtypes are subtypes of floating.")),  # noqa: E501
    "not": ("b1 i8 i16 i32 u8 u16 u32 - - -", ("float16", "not does not accept dtype float16. Accepted dtypes are subtypes of integer, bool.")),  # noqa: E501
    "population_count": ("- i8 i16 i32 u8 u16 u32 - - -", ("bool", "population_count does not accept dtype bool. Accepted dtypes are subtypes of integer.")),  # noqa: E501
    "clz": ("- i8 i16 i32 u8 u16 u32 - - -", ("bool", "clz does not accept dtype bool. Accepted dtypes are subtypes of integer.")),  # noqa: E501
    "erf": ("- - - - - - - f16 f32 -", ("bool", "erf does not accept dtype bool. Accepted dtypes are subtypes of floating.")),  # noqa: E501
    "erfc": ("- - - - - - - f16 f32 -", ("bool", "erfc does not accept dtype bool. Accepted dtypes are subtypes of floating.")),  # noqa: E501
    "erf_inv": ("- - - - - - - f16 f32 -", ("bool", "erf_inv does not accept dtype bool. Accepted dtypes are subtypes of floating.")),  # noqa: E501
    "lgamma": ("- - - - - - - f16 f32 -", ("bool", "lgamma does not accept dtype bool. Accepted dtypes are subtypes of floating.")),  # noqa: E501
    "digamma": ("- - - - - - - f16 f32 -", ("bool", "digamma does not accept dtype bool. Accepted dtypes are subtypes of floating.")),  # noqa: E501
    "real": ("- - - - - - - - - f32", ("bool", "real does not accept dtype bool. Accepted dtypes are subtypes of complexfloating.")),  # noqa: E501
    "imag": ("- - - - - - - - - f32", ("bool", "imag does not accept dtype bool. Accepted dtypes are subtypes of complexfloating.")),  # noqa: E501
    "conj": ("- - - - - - - - c64 c64", ("bool", "conj does not accept dtype bool. Accepted dtypes are subtypes of float32, complexfloating, float64.")),  # noqa: E501
    "square": ("- i8 i16 i32 u8 u16 u32 f16 f32 c64", ("bool", "square does not accept dtype bool. Accepted dtypes are subtypes of integer, floating, complexfloating.")),  # noqa: E501
    "add": ("- i8 i16 i32 u8 u16 u32 f16 f32 c64", ("bool", "add does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, complexfloating.")),  # noqa: E501
    "sub": ("- i8 i16 i32 u8 u16 u32 f16 f32 c64", ("bool", "sub does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, complexfloating.")),  # noqa: E501
    "mul": ("- i8 i16 i32 u8 u16 u32 f16 f32 c64", ("bool", "mul does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, complexfloating.")),  # noqa: E501
    "div": ("- i8 i16 i32 u8 u16 u32 f16 f32 c64", ("bool", "div does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, complexfloating.")),  # noqa: E501
    "rem": ("- i8 i16 i32 u8 u16 u32 f16 f32 -", ("bool", "rem does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer, floating.")),  # noqa: E501
    "pow": ("- - - - - - - f16 f32 c64", ("bool", "pow does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of floating, complexfloating.")),  # noqa: E501
    "max": ("b1 i8 i16 i32 u8 u16 u32 f16 f32 c64", None),
    "min": ("b1 i8 i16 i32 u8 u16 u32 f16 f32 c64", None),
    "atan2": ("- - - - - - - f16 f32 c64", ("bool", "atan2 does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of floating, complexfloating.")),  # noqa: E501
    "nextafter": ("- - - - - - - f16 f32 -", ("bool", "nextafter does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of floating.")),  # noqa: E501
    "and": ("b1 i8 i16 i32 u8 u16 u32 - - -", ("float16", "and does not accept dtype float16 at position 0. Accepted dtypes at position 0 are subtypes of integer, bool.")),  # noqa: E501
    "or": ("b1 i8 i16 i32 u8 u16 u32 - - -", ("float16", "or does not accept dtype float16 at position 0. Accepted dtypes at position 0 are subtypes of integer, bool.")),  # noqa: E501
    "xor": ("b1 i8 i16 i32 u8 u16 u32 - - -", ("float16", "xor does not accept dtype float16 at position 0. Accepted dtypes at position 0 are subtypes of integer, bool.")),  # noqa: E501
    "complex": ("- - - - - - - - c64 -", ("bool", "complex does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of float32, float64.")),  # noqa: E501
    "shift_left": ("- i8 i16 i32 u8 u16 u32 - - -", ("bool", "shift_left does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer.")),  # noqa: E501
    "shift_right_logical": ("- i8 i16 i32 u8 u16 u32 - - -", ("bool", "shift_right_logical does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer.")),  # noqa: E501
    "shift_right_arithmetic": ("- i8 i16 i32 u8 u16 u32 - - -", ("bool", "shift_right_arithmetic does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer.")),  # noqa: E501
    "eq": ("b1 b1 b1 b1 b1 b1 b1 b1 b1 b1", None),
    "ne": ("b1 b1 b1 b1 b1 b1 b1 b1 b1 b1", None),
    "lt": ("b1 b1 b1 b1 b1 b1 b1 b1 b1 -", ("complex64", "lt does not accept dtype complex64 at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, bool.")),  # noqa: E501
    "le": ("b1 b1 b1 b1 b1 b1 b1 b1 b1 -", ("complex64", "le does not accept dtype complex64 at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, bool.")),  # noqa: E501
    "gt": ("b1 b1 b1 b1 b1 b1 b1 b1 b1 -", ("complex64", "gt does not accept dtype complex64 at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, bool.")),  # noqa: E501
    "ge": ("b1 b1 b1 b1 b1 b1 b1 b1 b1 -", ("complex64", "ge does not accept dtype complex64 at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, bool.")),  # noqa: E501
}
# Deliberate extension: kiln's `abs` also takes unsigned integers (the identity), which
# kiln.numpy relies on; JAX 0.10.2 rejects them ("... subtypes of floating, complexfloating,
# signedinteger").
KILN_ABS = "- i8 i16 i32 u8 u16 u32 f16 f32 f32"


def _short(dtype):
    d = np.dtype(dtype)
    return "b1" if d.kind == "b" else f"{d.kind}{d.itemsize * 8}"


def _accepted(name):
    prim, row = PRIMITIVES[name], []
    for dtype in DTYPE_NAMES:
        aval = ShapedArray((2,), dtype)
        args = (aval,) if name in UNARY or name == "round" else (aval, aval)
        try:
            out = prim.abstract_eval(*args)
        except TypeError:
            row.append("-")
        else:
            row.append(_short(out.dtype))
    return " ".join(row)


@pytest.mark.parametrize("name", sorted(ACCEPTS))
def test_accepted_dtypes_match_jax(name):
    assert _accepted(name) == ACCEPTS[name][0]


def test_abs_accepts_unsigned_as_a_kiln_extension():
    assert _accepted("abs") == KILN_ABS
    with pytest.raises(TypeError, match="^abs does not accept dtype bool. Accepted dtypes are "
                                        "subtypes of integer, floating, complexfloating.$"):
        PRIMITIVES["abs"].abstract_eval(ShapedArray((2,), np.bool_))


@pytest.mark.parametrize("name", sorted(n for n, (_, err) in ACCEPTS.items() if err))
def test_dtype_errors_match_jax(name):
    dtype, message = ACCEPTS[name][1]
    aval = ShapedArray((2,), dtype)
    args = (aval,) if name in UNARY or name == "round" else (aval, aval)
    with pytest.raises(TypeError) as info:
        PRIMITIVES[name].abstract_eval(*args)
    assert str(info.value) == message


# ------------------------------------------------------------------- shape/param errors

def A(shape, dtype=np.float32, weak=False):
    return ShapedArray(shape, dtype, weak)


GDN = GatherDimensionNumbers((1,), (0,), (0,))
SDN = ScatterDimensionNumbers((1,), (0,), (0,))

# (primitive, operand avals, params, exception, message) -- JAX 0.10.2's messages.
ERRORS = [
    ("add", [A((2, 3)), A((2, 3), np.int32)], {}, TypeError,
     "lax.add requires arguments to have the same dtypes, got float32, int32. (Tip: jnp.add is "
     "a similar function that does automatic type promotion on inputs)."),
    ("shift_left", [A((2,), np.int32), A((2,), np.uint8)], {}, TypeError,
     "lax.shift_left requires arguments to have the same dtypes, got int32, uint8. (Tip: "
     "jnp.left_shift is a similar function that does automatic type promotion on inputs)."),
    ("and", [A((2,), np.int32), A((2,), np.uint8)], {}, TypeError,
     "lax.and requires arguments to have the same dtypes, got int32, uint8."),
    ("add", [A((3,)), A((4,))], {}, TypeError,
     "add got incompatible shapes for broadcasting: (3,), (4,)."),
    ("pow", [A((2,)), A((2,), np.float16)], {}, TypeError,
     "the first argument to pow must have an inexact dtype (float or complex), and the second "
     "argument must have an inexact or integer dtype, and two inexact dtypes must match, but "
     "got float32 and float16 respectively."),
    ("integer_pow", [A((3,), np.int32)], {"y": -2}, TypeError,
     "Integers cannot be raised to negative powers, got integer_pow(int32[3], -2)"),
    ("integer_pow", [A((3,), np.bool_)], {"y": 2}, TypeError,
     "integer_pow does not accept dtype bool. Accepted dtypes are subtypes of integer, "
     "floating, complexfloating."),
    ("select_n", [A((3,), np.bool_), A((3,)), A((3,), np.int32)], {}, TypeError,
     "lax.select requires arguments to have the same dtypes, got float32, int32. (Tip: "
     "jnp.where is a similar function that does automatic type promotion on inputs)."),
    ("select_n", [A((2,), np.bool_), A((3,)), A((3,))], {}, TypeError,
     "select `which` must be scalar or have the same shape as cases, got `which` shape (2,) but "
     "case shape (3,)."),
    ("select_n", [A((3,)), A((3,)), A((3,))], {}, TypeError,
     "select `which` must be boolean or integer type, got float32."),
    ("select_n", [A((), np.bool_), A((3,)), A((3,)), A((3,))], {}, TypeError,
     "select with boolean `which` cannot have > 2 cases."),
    ("select_n", [A((), np.bool_), A((2, 3)), A((3,))], {}, TypeError,
     "select cases must have the same shapes, got [(2, 3), (3,)]."),
    ("clamp", [A(()), A((2, 3), np.float16), A(())], {}, TypeError,
     "lax.clamp requires arguments to have the same dtypes, got float32, float16, float32."),
    ("clamp", [A((2,)), A((3,)), A(())], {}, TypeError,
     "clamp requires min.shape == operand.shape or min.shape == (), got min.shape=(2,), "
     "operand.shape=(3,)."),
    ("bitcast_convert_type", [A((3,), np.uint8)], {"new_dtype": np.dtype(np.float32)},
     ValueError, "Attempting to convert array of shape (3,) from uint8 of size 8 bits to float32 "
                 "of size 32, bits but 3 * 8 != 32"),
    ("bitcast_convert_type", [A((1,), np.bool_)], {"new_dtype": np.dtype(np.uint8)}, TypeError,
     "lax.bitcast_convert_type does not support bool or complex values unless the operand and "
     "destination types match. Got operand dtype=bool, new_dtype=dtype('uint8'). Consider "
     "using the arr.view() method instead."),
    ("iota", [], {"dtype": np.dtype(np.int32), "shape": (2, 3), "dimension": 2}, ValueError,
     "iota dimension must be between 0 and len(shape), got dimension=2 for shape=(2, 3)"),
    ("iota", [], {"dtype": np.dtype(np.bool_), "shape": (3,), "dimension": 0}, TypeError,
     "iota does not accept dtype bool. Accepted dtypes are subtypes of integer, floating, "
     "complexfloating."),
    ("iota", [], {"dtype": np.dtype(np.int32), "shape": (-1,), "dimension": 0}, TypeError,
     "iota shape must have every element be nonnegative, got (-1,)."),
    ("broadcast_in_dim", [A((2, 3))], {"shape": (2, 4), "broadcast_dimensions": (0, 1)},
     TypeError, "broadcast_in_dim operand dimension sizes must either be 1, or be equal to "
                "their corresponding dimensions in the target broadcast shape; got operand of "
                "shape (2, 3), target broadcast shape (2, 4), broadcast_dimensions (0, 1)"),
    ("broadcast_in_dim", [A((2, 3))], {"shape": (2, 3), "broadcast_dimensions": (0,)},
     TypeError, "broadcast_in_dim broadcast_dimensions must have length equal to operand ndim; "
                "got broadcast_dimensions (0,) for operand ndim 2."),
    ("broadcast_in_dim", [A((2, 3))], {"shape": (2, 3), "broadcast_dimensions": (0, 5)},
     TypeError, "broadcast_in_dim broadcast_dimensions must be a subset of output dimensions, "
                "got (0, 5) for operand ndim 2 and shape (2, 3)."),
    ("reshape", [A((2, 3))], {"new_sizes": (4, 2), "dimensions": None}, TypeError,
     "reshape total size of new array must be unchanged: cannot reshape array of shape (2, 3) "
     "(size 6) into shape (4, 2) (size 8)"),
    ("reshape", [A((2, 3))], {"new_sizes": (3, 2), "dimensions": (0, 0)}, TypeError,
     "reshape dimensions must be a permutation of operand dimensions, got dimensions (0, 0) for "
     "shape (2, 3)."),
    ("transpose", [A((2, 3))], {"permutation": (0, 0)}, TypeError,
     "transpose permutation isn't a permutation of operand dimensions, got permutation (0, 0) "
     "for operand shape (2, 3)."),
    ("squeeze", [A((1, 3, 1))], {"dimensions": (1,)}, ValueError,
     "cannot select an axis to squeeze out which has size not equal to one, got shape=(1, 3, 1) "
     "and dimensions=(1,)"),
    ("squeeze", [A((1, 3, 1))], {"dimensions": (3,)}, ValueError,
     "dimensions outside range [0, ndim): (3,)"),
    ("rev", [A((2, 3))], {"dimensions": (2,)}, TypeError,
     "rev dimensions must all be less than operand ndim, got dimensions (2,) for operand ndim "
     "2."),
    ("rev", [A((2, 3))], {"dimensions": (0, 0)}, TypeError,
     "rev dimensions must be unique, got (0, 0)."),
    ("slice", [A((2, 3))], {"start_indices": (0, 0), "limit_indices": (2, 4)}, TypeError,
     "slice limit_indices must be less than or equal to operand shape, got limit_indices (2, 4) "
     "for operand shape (2, 3)."),
    ("slice", [A((2, 3))], {"start_indices": (0, 2), "limit_indices": (2, 1)}, TypeError,
     "slice limit_indices must be greater than or equal to start_indices, got start_indices "
     "(0, 2) and limit_indices (2, 1)."),
    ("slice", [A((2, 3))], {"start_indices": (0, 0), "limit_indices": (2, 3),
                            "strides": (0, 1)}, TypeError,
     "slice strides must be positive, got (0, 1)"),
    ("pad", [A((2, 3), np.float16), A(())], {"padding_config": ((1, 1, 0), (0, 0, 0))},
     TypeError, "pad operand and padding_value must be same dtype: got float16 and float32."),
    ("pad", [A((2, 3)), A(())], {"padding_config": ((1, 1, -1), (0, 0, 0))}, ValueError,
     "interior padding in padding_config must be nonnegative, got padding_config ((1, 1, -1), "
     "(0, 0, 0))"),
    ("pad", [A((2, 3)), A(())], {"padding_config": ((-2, -2, 1), (0, 0, 0))}, ValueError,
     "Dimension size after padding is not at least 0, got result shape (-1, 3), for "
     "padding_config ((-2, -2, 1), (0, 0, 0)) and operand shape (2, 3)"),
    ("concatenate", [A((2, 3)), A((2, 4))], {"dimension": 0}, TypeError,
     "Cannot concatenate arrays with shapes that differ in dimensions other than the one being "
     "concatenated: concatenating along dimension 0 for shapes (2, 3), (2, 4)."),
    ("concatenate", [A((2, 3)), A((3,))], {"dimension": 0}, TypeError,
     "Cannot concatenate arrays with different numbers of dimensions: got (2, 3), (3,)."),
    ("concatenate", [A((2, 3)), A((2, 3))], {"dimension": 2}, TypeError,
     "concatenate dimension out of bounds: dimension 2 for shapes (2, 3), (2, 3)."),
    ("dynamic_slice", [A((4, 5)), A((), np.int32), A((), np.uint8)], {"slice_sizes": (2, 2)},
     TypeError, "index arguments to dynamic_slice must be integers of the same type, got: "
                "int32, uint8"),
    ("dynamic_slice", [A((4, 5)), A((), np.int32), A((), np.int32)], {"slice_sizes": (5, 2)},
     TypeError, "slice slice_sizes must be less than or equal to operand shape, got slice_sizes "
                "(5, 2) for operand shape (4, 5)."),
    ("dynamic_update_slice", [A((4, 5)), A((2,)), A((), np.int32), A((), np.int32)], {},
     TypeError, "dynamic_update_slice update must have the same rank as operand, got update "
                "shape (2,) for operand shape (4, 5)."),
    ("dynamic_update_slice", [A((4, 5), np.int32), A((2, 2)), A((), np.int32),
                              A((), np.int32)], {}, TypeError,
     "lax.dynamic_update_slice requires arguments to have the same dtypes, got int32, "
     "float32."),
    ("gather", [A((2, 3)), A((4, 1), np.float32)],
     {"dimension_numbers": GDN, "slice_sizes": (1, 3)}, ValueError,
     "indices must have an integer type"),
    ("gather", [A((2, 3)), A((4, 1), np.int32)],
     {"dimension_numbers": GDN, "slice_sizes": (1, 5)}, TypeError,
     "Slice size at index 1 in gather op is out of range, must be within [0, 3 + 1), got 5."),
    ("gather", [A((2, 3)), A((4, 1), np.int32)],
     {"dimension_numbers": GDN, "slice_sizes": (2, 3)}, TypeError,
     "Gather op can only collapse slice dims with bound 1, but bound is 2 for index 0 at "
     "position 0."),
    ("gather", [A((2, 3)), A((4, 2), np.int32)],
     {"dimension_numbers": GDN, "slice_sizes": (1, 3)}, TypeError,
     "Gather op has 1 elements in start_index_map and the bound of dimension "
     "index_vector_dim=1 of indices is 2. These two numbers must be equal."),
    ("scatter", [A((3, 3)), A((4, 1), np.int32), A((4, 3), np.int32)],
     {"dimension_numbers": SDN}, TypeError,
     "lax.scatter requires arguments to have the same dtypes, got float32, int32."),
    ("scatter_add", [A((3, 3)), A((4, 1), np.int32), A((3, 3))],
     {"dimension_numbers": SDN}, TypeError,
     "Bounds of the scatter dimensions of updates must be the same as the bounds of the "
     "corresponding dimensions of scatter indices. For scatter dimension 0, updates bound is 3, "
     "indices bound is 4."),
    ("scatter_add", [A((3, 3)), A((1, 1), np.int32), A(())],
     {"dimension_numbers": SDN}, TypeError, "Updates tensor must be of rank 2; got 0."),
    ("reduce_sum", [A((2, 3), np.int32)], {"axes": (2,)}, ValueError,
     "reduction axes (2,) contains out-of-bounds indices for int32[2,3]."),
    ("reduce_sum", [A((2, 3), np.int32)], {"axes": (0, 0)}, ValueError,
     "duplicate value in 'axes' of reduction: (0, 0)"),
    ("reduce_sum", [A((2, 3), np.bool_)], {"axes": (0,)}, TypeError,
     "reduce_sum does not accept dtype bool. Accepted dtypes are subtypes of number."),
    ("reduce_and", [A((3,))], {"axes": (0,)}, TypeError,
     "logical reduction requires operand dtype bool or int, got float32."),
    ("argmax", [A((2, 0))], {"axes": (1,), "index_dtype": np.dtype(np.int32)}, ValueError,
     "argmin and argmax require non-empty reduced dimension. operand.shape=(2, 0) axis=1"),
    ("argmax", [A((2, 3), np.int32)], {"axes": (2,), "index_dtype": np.dtype(np.int32)},
     ValueError, "Invalid axis 2 for operand shape (2, 3)"),
    ("argmax", [A((2, 3), np.int32)], {"axes": (0,), "index_dtype": np.dtype(np.float32)},
     TypeError, "index_dtype must be an integer type, but got float32"),
    ("cumsum", [A((2, 3), np.bool_)], {"axis": 0}, TypeError,
     "cumsum does not accept dtype bool. Accepted dtypes are subtypes of number."),
    ("cumsum", [A((2, 3), np.int32)], {"axis": 2}, ValueError,
     "axis 2 is out of bounds for array of shape (2, 3)"),
    ("dot_general", [A((2, 3)), A((3, 2))], {"dimension_numbers": (((1,), (1,)), ((), ()))},
     TypeError, "dot_general requires contracting dimensions to have the same shape, got (3,) "
                "and (2,)."),
    ("dot_general", [A((2, 3)), A((2, 3))], {"dimension_numbers": (((3,), (1,)), ((), ()))},
     TypeError, "dot_general requires lhs dimension numbers to be nonnegative and less than the "
                "number of axes of the lhs value, got lhs_batch of () and lhs_contracting of "
                "(3,) for lhs of rank 2"),
    ("dot_general", [A((2, 3)), A((2, 3))], {"dimension_numbers": (((1,), (1,)), ((0,), ()))},
     TypeError, "dot_general requires equal numbers of lhs_batch and rhs_batch dimensions, got "
                "lhs_batch (0,) and rhs_batch ()."),
    ("dot_general", [A((2, 3)), A((3, 3))], {"dimension_numbers": (((1,), (1,)), ((0,), (0,)))},
     TypeError, "dot_general requires lhs batch dimensions and rhs batch dimensions to have the "
                "same shape, got (2,) and (3,)."),
    ("dot_general", [A((2, 3), np.int32), A((2, 3), np.int32)],
     {"dimension_numbers": (((1,), (1,)), ((), ())), "preferred_element_type": np.int8},
     TypeError, "`preferred_element_type` must not be narrower than the original type, got "
                "preferred_element_type of int8 for result type of int32."),
    ("sort", [A((3,)), A((4,))], {"dimension": 0}, TypeError,
     "Arguments to sort must have equal shapes, got: (3,) (4,)"),
    ("sort", [A((3,))], {"dimension": 0, "num_keys": 2}, ValueError,
     "num_keys=2 must be between 1 and len(operand)=1"),
]


@pytest.mark.parametrize("name,avals,params,exc,message", ERRORS,
                         ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_abstract_eval_errors_match_jax(name, avals, params, exc, message):
    with pytest.raises(exc) as info:
        PRIMITIVES[name].abstract_eval(*avals, **params)
    assert str(info.value) == message


# ----------------------------------------------------------- XLA semantics recorded from JAX

def _impl(name, *args, **params):
    return np.asarray(PRIMITIVES[name].impl(*(np.asarray(a) for a in args), **params))


I8 = dict(a=np.array([7, -7, 7, -7, 0, 5, -128, -128, 127], np.int8),
          b=np.array([2, 2, -2, -2, 3, 0, -1, 0, 0], np.int8))
I32 = dict(a=np.array([7, -7, 7, -7, 0, 5, -2**31, -2**31, 2**31 - 1], np.int32),
           b=np.array([2, 2, -2, -2, 3, 0, -1, 0, 0], np.int32))
U8 = dict(a=np.array([7, 200, 0, 255, 9], np.uint8), b=np.array([2, 3, 0, 0, 255], np.uint8))
F32 = dict(a=np.array([7.5, -7.5, 7.5, -7.5, 1.0, -1.0, 0.0], np.float32),
           b=np.array([2, 2, -2, -2, 0, 0, 0], np.float32))

# name -> (operands, expected) with expected values from JAX 0.10.2.
XLA_DIVISION = {
    "div_i8": ("div", I8, [3, -3, -3, 3, 0, -1, -128, -1, -1]),
    "rem_i8": ("rem", I8, [1, -1, 1, -1, 0, 5, 0, -128, 127]),
    "div_i32": ("div", I32, [3, -3, -3, 3, 0, -1, -2147483648, -1, -1]),
    "rem_i32": ("rem", I32, [1, -1, 1, -1, 0, 5, 0, -2147483648, 2147483647]),
    "div_u8": ("div", U8, [3, 66, 255, 255, 0]),
    "rem_u8": ("rem", U8, [1, 2, 0, 255, 9]),
    "div_f32": ("div", F32, [3.75, -3.75, -3.75, 3.75, np.inf, -np.inf, np.nan]),
    "rem_f32": ("rem", F32, [1.5, -1.5, 1.5, -1.5, np.nan, np.nan, np.nan]),
}


@pytest.mark.parametrize("label", sorted(XLA_DIVISION))
def test_integer_division_matches_jax(label):
    name, ops, want = XLA_DIVISION[label]
    got = _impl(name, ops["a"], ops["b"])
    assert got.dtype == ops["a"].dtype
    np.testing.assert_array_equal(got, np.array(want, got.dtype))


SHIFT_X_I8 = np.array([1, -1, 5, -128, 127, 64], np.int8)
# amount -> (shift_left, shift_right_arithmetic, shift_right_logical) on SHIFT_X_I8 (JAX).
SHIFTS_I8 = {
    0: ([1, -1, 5, -128, 127, 64], [1, -1, 5, -128, 127, 64], [1, -1, 5, -128, 127, 64]),
    1: ([2, -2, 10, 0, -2, -128], [0, -1, 2, -64, 63, 32], [0, 127, 2, 64, 63, 32]),
    7: ([-128, -128, -128, 0, -128, 0], [0, -1, 0, -1, 0, 0], [0, 1, 0, 1, 0, 0]),
    8: ([0] * 6, [0, -1, 0, -1, 0, 0], [0] * 6),
    9: ([0] * 6, [0, -1, 0, -1, 0, 0], [0] * 6),
    100: ([0] * 6, [0, -1, 0, -1, 0, 0], [0] * 6),
    -1: ([0] * 6, [0, -1, 0, -1, 0, 0], [0] * 6),
}
SHIFT_X_U32 = np.array([1, 255, 128, 3], np.uint32)
SHIFTS_U32 = {
    0: ([1, 255, 128, 3],) * 3,
    31: ([2147483648, 2147483648, 0, 2147483648], [0, 0, 0, 0], [0, 0, 0, 0]),
    32: ([0] * 4,) * 3, 33: ([0] * 4,) * 3, 4000000000: ([0] * 4,) * 3,
}
SHIFT_NAMES = ("shift_left", "shift_right_arithmetic", "shift_right_logical")


@pytest.mark.parametrize("x,table", [(SHIFT_X_I8, SHIFTS_I8), (SHIFT_X_U32, SHIFTS_U32)])
def test_shifts_match_jax(x, table):
    for amount, expected in table.items():
        s = np.full(x.shape, amount).astype(x.dtype)
        for name, want in zip(SHIFT_NAMES, expected):
            np.testing.assert_array_equal(_impl(name, x, s), np.array(want).astype(x.dtype),
                                          err_msg=f"{name} by {amount}")


def test_shift_right_arithmetic_of_unsigned_fills_with_the_top_bit():
    x = np.array([128, 255, 129, 128], np.uint8)
    got = _impl("shift_right_arithmetic", x, np.array([1, 3, 8, 100], np.uint8))
    np.testing.assert_array_equal(got, [192, 255, 255, 255])  # JAX 0.10.2
    got = _impl("shift_right_logical", np.array([-128, -1, -1], np.int8),
                np.array([1, 7, 8], np.int8))
    np.testing.assert_array_equal(got, [64, 1, 0])


CONVERT_SRC = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 2.7, -2.7, 127.9, -128.9, 300.0,
                        -0.5, 255.5, 256.0, 2147483520.0, -2147483648.0], np.float32)
CONVERSIONS = {  # float32 -> dtype, recorded from JAX 0.10.2
    "int8": [0, 127, -128, 127, -128, 2, -2, 127, -128, 127, 0, 127, 127, 127, -128],
    "uint8": [0, 255, 0, 255, 0, 2, 0, 127, 0, 255, 0, 255, 255, 255, 0],
    "int16": [0, 32767, -32768, 32767, -32768, 2, -2, 127, -128, 300, 0, 255, 256, 32767,
              -32768],
    "int32": [0, 2147483647, -2147483648, 2147483647, -2147483648, 2, -2, 127, -128, 300, 0,
              255, 256, 2147483520, -2147483648],
    "uint32": [0, 4294967295, 0, 4294967295, 0, 2, 0, 127, 0, 300, 0, 255, 256, 2147483520, 0],
    "bool": [True] * 15,
}


@pytest.mark.parametrize("dtype", sorted(CONVERSIONS))
def test_float_to_int_conversion_saturates_like_jax(dtype):
    got = _impl("convert_element_type", CONVERT_SRC, new_dtype=np.dtype(dtype))
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.array(CONVERSIONS[dtype], dtype))


def test_other_conversions_match_jax():
    conv = lambda x, d: _impl("convert_element_type", x, new_dtype=np.dtype(d))  # noqa: E731
    np.testing.assert_array_equal(
        conv(np.array([np.nan, np.inf, -np.inf, 65504, -3.5], np.float16), "int32"),
        [0, 2147483647, -2147483648, 65504, -3])
    np.testing.assert_array_equal(conv(np.array([1000, -1000, 127.5], np.float16), "int8"),
                                  [127, -128, 127])
    np.testing.assert_array_equal(conv(np.array([1 + 2j, -3 - 4j], np.complex64), "float32"),
                                  [1.0, -3.0])
    np.testing.assert_array_equal(conv(np.array([1.7 + 2j, -3.7 - 4j], np.complex64), "int32"),
                                  [1, -3])
    np.testing.assert_array_equal(conv(np.array([1 + 1j, 1j, 0j], np.complex64), "bool"),
                                  [True, False, False])
    np.testing.assert_array_equal(conv(np.array([300, -129, 255], np.int32), "int8"),
                                  [44, 127, -1])
    np.testing.assert_array_equal(conv(np.array([0, 2, -1], np.int32), "bool"),
                                  [False, True, True])
    np.testing.assert_array_equal(conv(np.array([70000, -70000, 2049], np.int32), "float16"),
                                  [np.inf, -np.inf, 2048.0])
    np.testing.assert_array_equal(conv(np.array([4294967295], np.uint32), "float32"),
                                  [4294967296.0])


def test_bit_counting_matches_jax():
    np.testing.assert_array_equal(
        _impl("population_count", np.array([0, -1, 127, -128, 5], np.int8)), [0, 8, 7, 1, 2])
    np.testing.assert_array_equal(
        _impl("population_count", np.array([0, 2**32 - 1, 7, 2**31], np.uint32)),
        [0, 32, 3, 1])
    np.testing.assert_array_equal(_impl("clz", np.array([0, -1, 1, 64, 127], np.int8)),
                                  [8, 0, 7, 1, 1])
    np.testing.assert_array_equal(_impl("clz", np.array([0, 1, 2**31, 65535], np.uint32)),
                                  [32, 31, 0, 16])


def _same_floats(got, want):
    got, want = np.asarray(got), np.asarray(want, got.dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # -0.0 is not 0.0


def test_rounding_and_signs_match_jax():
    r = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.0], np.float32)
    _same_floats(_impl("round", r, rounding_method=0),
                 [1.0, 2.0, 3.0, -1.0, -2.0, -3.0, 0.0, -0.0])
    _same_floats(_impl("round", r, rounding_method=1),
                 [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 0.0, -0.0])
    _same_floats(_impl("sign", np.array([-0.0, 0.0, np.nan, -3, 2, -np.inf], np.float32)),
                 [-0.0, 0.0, np.nan, -1.0, 1.0, -1.0])
    np.testing.assert_array_equal(_impl("sign", np.array([-128, 0, 5], np.int8)), [-1, 0, 1])
    np.testing.assert_array_equal(_impl("sign", np.array([0, 5, 255], np.uint8)), [0, 1, 1])
    np.testing.assert_allclose(_impl("sign", np.array([0, 3 + 4j, -2j], np.complex64)),
                               [0, 0.6 + 0.8j, -1j], rtol=1e-6)


def test_max_min_nan_and_signed_zero_match_jax():
    a = np.array([np.nan, 1, -0.0, 0.0], np.float32)
    b = np.array([1, np.nan, 0.0, -0.0], np.float32)
    _same_floats(_impl("max", a, b), [np.nan, np.nan, 0.0, 0.0])
    _same_floats(_impl("min", a, b), [np.nan, np.nan, -0.0, -0.0])
    np.testing.assert_array_equal(
        _impl("max", np.array([1 + 5j, 2 + 0j, 1 + 1j], np.complex64),
              np.array([1 + 2j, 1 + 9j, 1 + 3j], np.complex64)), [1 + 5j, 2 + 0j, 1 + 3j])


def test_integer_overflow_wraps_like_jax():
    np.testing.assert_array_equal(_impl("integer_pow", np.array([2, 3, -2, 0], np.int8), y=7),
                                  [-128, -117, -128, 0])
    np.testing.assert_array_equal(_impl("integer_pow", np.array([0, 5], np.int32), y=0), [1, 1])
    np.testing.assert_array_equal(
        _impl("integer_pow", np.array([2.0, 0.0, -1.0], np.float32), y=-3), [0.125, np.inf, -1])
    np.testing.assert_array_equal(_impl("abs", np.array([-128, -1, 5], np.int8)), [-128, 1, 5])
    np.testing.assert_array_equal(_impl("neg", np.array([-128, -1, 5], np.int8)), [-128, 1, -5])
    np.testing.assert_array_equal(_impl("neg", np.array([0, 1, 255], np.uint8)), [0, 255, 1])
    np.testing.assert_array_equal(_impl("square", np.array([16, -12], np.int8)), [0, -112])
    np.testing.assert_array_equal(_impl("add", np.array([127], np.int8),
                                        np.array([1], np.int8)), [-128])
    np.testing.assert_array_equal(_impl("mul", np.array([16], np.uint8),
                                        np.array([17], np.uint8)), [16])


def test_special_values_match_jax():
    np.testing.assert_array_equal(_impl("rsqrt", np.array([4.0, 0.0, -1.0], np.float32)),
                                  [0.5, np.inf, np.nan])
    np.testing.assert_array_equal(_impl("logistic", np.array([-100.0, 0.0, 100.0], np.float32)),
                                  [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(
        _impl("erf_inv", np.array([-1.0, 0.0, 1.0, 2.0], np.float32)), [-np.inf, 0, np.inf,
                                                                         np.nan])
    np.testing.assert_array_equal(_impl("digamma", np.array([-1.0, 0.0], np.float32)),
                                  [np.nan, np.nan])
    np.testing.assert_array_equal(_impl("cbrt", np.array([-8.0, 27.0, 0.0], np.float32)),
                                  [-2.0, 3.0, 0.0])
    np.testing.assert_array_equal(
        _impl("nextafter", np.array([0.0, 1.0, np.nan], np.float32),
              np.array([1.0, 0.0, 1.0], np.float32)),
        np.array([1.401298464324817e-45, 0.9999999403953552, np.nan], np.float32))
    np.testing.assert_array_equal(
        _impl("pow", np.array([0.0, -8.0, 2.0, 0.0, 1.0], np.float32),
              np.array([-1.0, 1 / 3, 0.5, 0.0, np.nan], np.float32)),
        np.array([np.inf, np.nan, 1.4142135381698608, 1.0, 1.0], np.float32))


def test_bitcasts_match_jax():
    np.testing.assert_array_equal(
        _impl("bitcast_convert_type", np.array([1.0, -0.0], np.float32),
              new_dtype=np.dtype(np.int32)), [1065353216, -2147483648])
    np.testing.assert_array_equal(
        _impl("bitcast_convert_type", np.array([1.0], np.float32), new_dtype=np.dtype(np.uint8)),
        [[0, 0, 128, 63]])
    np.testing.assert_array_equal(
        _impl("bitcast_convert_type", np.array([0x3c003c00], np.int32),
              new_dtype=np.dtype(np.float16)), [[1.0, 1.0]])
    np.testing.assert_array_equal(
        _impl("bitcast_convert_type", np.array([[1.0, 2.0]], np.float16),
              new_dtype=np.dtype(np.int32)), [1073757184])
