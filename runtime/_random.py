"""The implementation of `kiln.random`: its public names (`__all__`, re-exported there)
and the helpers they use. `kiln.random`'s docstring describes them."""
import math
import operator
import warnings
from collections.abc import Sequence

import numpy as np

from . import lax
from .array import to_array
from .compiler.config import config
from .compiler.ir import dtypes
from .compiler.primitives import PRIMITIVES
from .custom_derivatives import custom_jvp
from .dispatch import bind
from ._key_reuse import consume
from .numpy._dtypes import prng_key, ExtendedDType
from .numpy._core import check_arraylike, broadcast_shapes, canonicalize_axis, canonical_dtype
from .tree_util import register_pytree_node
from .sharding_types import out_sharding_keyword

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "clone", "split", "fold_in",
           "bits", "uniform", "randint", "bernoulli", "permutation", "choice", "categorical",
           "normal", "truncated_normal", "gamma", "loggamma", "beta", "dirichlet", "exponential",
           "gumbel", "laplace", "logistic", "rademacher", "PRNGKeyArray"]

_U32 = np.dtype(np.uint32)
_F32 = np.dtype(np.float32)
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32, 64: np.dtype(np.uint64)}


def _c(value, dtype):
    """A NumPy constant of `dtype` (static data, not a computation)."""
    return np.asarray(value, dtype)


def _f32(bits):
    """float32 constants from their IEEE bit patterns."""
    return np.asarray(bits, _U32).view(_F32)


def _fc(value):
    return _c(value, _F32)


def _u32(value):
    return _c(value, _U32)


# ------------------------------------------------------------------------------ typed keys

class _KeyDtype(ExtendedDType):
    """The dtype of typed threefry2x32 keys, printed as JAX prints it."""
    name = "key<fry>"
    type = prng_key  # jnp.issubdtype(k.dtype, kiln.dtypes.prng_key) is True

    def __repr__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, _KeyDtype) or other == self.name

    def __hash__(self):
        return hash(self.name)


_KEY_DTYPE = _KeyDtype()


class KeyAval:
    """The abstract value of typed keys (what `typeof` gives for a PRNGKeyArray): a shape and
    the key dtype, printed as JAX prints it (`key<fry>[2]`)."""
    __slots__ = ("shape",)
    dtype = _KEY_DTYPE
    weak_type = False

    def __init__(self, shape):
        self.shape = tuple(shape)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    def str_short(self):
        return f"{_KEY_DTYPE}[{','.join(map(str, self.shape))}]"

    __str__ = str_short

    def __repr__(self):
        return f"ShapedArray({self})"

    def __eq__(self, other):
        return isinstance(other, KeyAval) and other.shape == self.shape

    def __hash__(self):
        return hash(("key", self.shape))


class PRNGKeyArray:
    """An array of typed threefry2x32 keys (what `kiln.random.key` returns).

    It wraps `uint32[..., 2]` key data; its own shape leaves out the trailing 2. Indexing and
    reshaping act on the key axes. It is a pytree node whose one child is the key data, so keys
    travel through `jit`, `vmap`, `scan` and `while_loop` carries.
    """
    __slots__ = ("_base",)
    __hash__ = None

    def __init__(self, base):
        self._base = base

    shape = property(lambda self: tuple(self._base.shape[:-1]))
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    dtype = property(lambda self: _KEY_DTYPE)
    aval = property(lambda self: KeyAval(self.shape))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if Ellipsis not in idx:
            idx = idx + (Ellipsis,)
        return PRNGKeyArray(self._base[idx + (slice(None),)])

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return PRNGKeyArray(lax.reshape(self._base, tuple(shape) + (2,)))

    def __eq__(self, other):
        other = other._base if isinstance(other, PRNGKeyArray) else other
        return lax.reduce_and(lax.eq(self._base, other), (self._base.ndim - 1,))

    def __ne__(self, other):
        return lax.bitwise_not(self == other)

    def __repr__(self):
        return f"Array({self.shape}, dtype={_KEY_DTYPE}) overlaying:\n{np.asarray(self._base)}"


register_pytree_node(PRNGKeyArray, lambda k: ((k._base,), None),
                     lambda _, children: PRNGKeyArray(children[0]))


def _check_key_data(data):
    if not all(hasattr(data, a) for a in ("ndim", "shape", "dtype")):
        raise TypeError("kiln encountered invalid PRNG key data: expected key_data to have ndim, "
                        f"shape, and dtype attributes. Got {data}")
    if data.ndim < 1:
        raise TypeError("kiln encountered invalid PRNG key data: expected key_data.ndim >= 1; "
                        f"got ndim={data.ndim}")
    if tuple(data.shape[-1:]) != (2,):
        raise TypeError("kiln encountered invalid PRNG key data: expected key_data.shape to end "
                        f"with (2,); got shape={tuple(data.shape)} for impl=threefry2x32")
    if data.dtype != _U32:
        raise TypeError("kiln encountered invalid PRNG key data: expected key_data.dtype = "
                        f"uint32; got dtype={data.dtype}")
    return to_array(data, "PRNG key")


def _legacy_key_used():
    """JAX's `legacy_prng_key` option: a raw uint32 key warns or raises when it says so."""
    mode = config.read("legacy_prng_key")
    if mode == "allow":
        return
    msg = ("Legacy uint32 key array passed as key to jax.random function. Please create keys "
           "using jax.random.key(). If use of a raw key array was intended, set "
           "jax_legacy_prng_key=\"allow\".")
    if mode == "error":
        raise ValueError(msg)
    warnings.warn(msg, stacklevel=4)


_NOT_CONSUMING = ("fold_in", "key_data", "key_impl", "clone")


def _check_key(name, key, allow_batched=False):
    """(key data uint32[..., 2], whether the caller passed raw data)."""
    if isinstance(key, PRNGKeyArray):
        base, raw = key._base, False
        if name not in _NOT_CONSUMING and config.read("debug_key_reuse"):
            consume(base, name)
    elif isinstance(key, (list, tuple, dict, set, str)) or key is None:
        raise TypeError(f"unexpected PRNG key type {type(key)}")
    else:
        base, raw = _check_key_data(key), True
        _legacy_key_used()
    if not allow_batched and base.ndim > 1:
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{tuple(np.shape(key))} != (). Use kiln.vmap for batching.")
    return base, raw


def _keys_out(raw, base):
    return base if raw else PRNGKeyArray(base)


def _seed_data(ctor, seed):
    """Key data for an integer seed: high and low 32-bit words, as JAX's threefry_seed."""
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{ctor} accepts a scalar seed, but was given a PRNG key.")
    if np.ndim(seed):
        raise TypeError(f"{ctor} accepts a scalar seed, but was given an array of shape "
                        f"{np.shape(seed)} != (). Use kiln.vmap for batching")
    if isinstance(seed, int):  # JAX reads Python ints as int64, narrowed when x64 is off
        if not -2**63 <= seed < 2**63:
            raise OverflowError("Python int too large to convert to C long")
        seed = np.int64(seed)
    s = to_array(seed, ctor)
    if s.dtype.kind not in "iu":
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    hi = (lax.convert_element_type(lax.shift_right_logical(s, _c(32, s.dtype)), _U32)
          if s.dtype.itemsize == 8 else lax.full((), 0, _U32))
    lo = lax.convert_element_type(s, _U32)
    return lax.concatenate([lax.reshape(hi, (1,)), lax.reshape(lo, (1,))], 0)


# ------------------------------------------------------------------------ threefry2x32 hash

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotl(x, r):
    return lax.bitwise_or(lax.shift_left(x, _c(r, _U32)),
                          lax.shift_right_logical(x, _c(32 - r, _U32)))


def threefry2x32(k1, k2, x1, x2):
    """Threefry-2x32 with 20 rounds; all four operands are uint32 arrays of one shape."""
    ks = (k1, k2, lax.bitwise_xor(lax.bitwise_xor(k1, k2), _c(0x1BD11BDA, _U32)))
    x1, x2 = lax.add(x1, ks[0]), lax.add(x2, ks[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x1 = lax.add(x1, x2)
            x2 = lax.bitwise_xor(x1, _rotl(x2, r))
        x1 = lax.add(x1, ks[(i + 1) % 3])
        x2 = lax.add(x2, lax.add(ks[(i + 2) % 3], _c(i + 1, _U32)))
    return x1, x2


def _hash(keys, shape):
    """Hash the counters 0..prod(shape)-1 with each key: two uint32 arrays keys.batch + shape."""
    size = math.prod(shape)
    if size >= 2**32:
        raise ValueError(f"kiln.random: cannot draw {size} values in one call; split the key "
                         "and draw fewer than 2**32 values per call")
    batch = tuple(keys.shape[:-1])
    full = batch + tuple(shape)
    kdims, cdims = tuple(range(len(batch))), tuple(range(len(batch), len(full)))
    k1, k2 = (lax.broadcast_in_dim(lax.index_in_dim(keys, i, -1, keepdims=False), full, kdims)
              for i in (0, 1))
    hi = lax.full(full, 0, _U32)
    lo = lax.broadcast_in_dim(lax.reshape(lax.iota(_U32, size), shape), full, cdims)
    return threefry2x32(k1, k2, hi, lo)


def _random_bits(keys, bit_width, shape):
    b1, b2 = _hash(keys, shape)
    if bit_width == 64:
        hi, lo = (lax.convert_element_type(b, _UINT[64]) for b in (b1, b2))
        return lax.bitwise_or(lax.shift_left(hi, _c(32, _UINT[64])), lo)
    out = lax.bitwise_xor(b1, b2)
    return out if bit_width == 32 else lax.convert_element_type(out, _UINT[bit_width])


def _split(keys, shape):
    b1, b2 = _hash(keys, shape)
    n = b1.ndim
    return lax.concatenate([lax.expand_dims(b1, (n,)), lax.expand_dims(b2, (n,))], n)


def _split2(keys, num=2):
    parts = _split(keys, (num,))
    return [lax.index_in_dim(parts, i, parts.ndim - 2, keepdims=False) for i in range(num)]


# --------------------------------------------------------------------------------- key API

def PRNGKey(seed, *, impl=None):
    """A raw threefry2x32 key, `uint32[2]`, from an integer seed."""
    _check_impl(impl)
    return _seed_data("PRNGKey", seed)


def key(seed, *, impl=None, dtype=None):
    """A typed key (`key<fry>`, shape `()`) from an integer seed."""
    if impl is not None and dtype is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to jax.random.key")
    _check_impl(impl if dtype is None else dtype)
    return PRNGKeyArray(_seed_data("key", seed))


def _check_impl(impl):
    if impl is None or impl in ("threefry2x32", _KEY_DTYPE):
        return
    if isinstance(impl, str):
        raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: '
                         '"threefry2x32"? (kiln implements threefry2x32 only)')
    raise TypeError(f"unrecognized type {type(impl)} for specifying PRNG implementation.")


def key_data(keys):
    """The `uint32[..., 2]` data under typed or raw keys."""
    base, _ = _check_key("key_data", keys, allow_batched=True)
    return base


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Typed keys over `uint32[..., 2]` key data."""
    if impl is not None and dtype is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to "
                         "jax.random.wrap_key_data")
    _check_impl(impl if dtype is None else dtype)
    return PRNGKeyArray(_check_key_data(key_bits_array))


def key_impl(keys):
    _check_key("key_impl", keys, allow_batched=True)
    return "threefry2x32"


def clone(key):
    """The same key, as a new value that the key-reuse checker (debug_key_reuse) counts
    apart from `key`."""
    base, raw = _check_key("clone", key, allow_batched=True)
    return _keys_out(raw, lax.bitwise_or(base, base))


def split(key, num=2):
    """`num` new keys (an int or a shape) from one key."""
    base, raw = _check_key("split", key)
    shape = tuple(num) if isinstance(num, Sequence) else (num,)
    shape = tuple(operator.index(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"split: the number of keys must be non-negative, got {num}")
    return _keys_out(raw, _split(base, shape))


def fold_in(key, data):
    """A new key that deterministically mixes the 32-bit integer `data` into `key`."""
    base, raw = _check_key("fold_in", key)
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of"
                        f"shape {np.shape(data)} != (). Use kiln.vmap for batching.")
    if isinstance(data, int) and not isinstance(data, bool):
        if not 0 <= data < 2**32:
            raise OverflowError(f"Python integer {data} out of bounds for uint32")
        data = np.uint32(data)
    d = lax.convert_element_type(to_array(data, "fold_in"), _U32)
    k1, k2 = (lax.index_in_dim(base, i, 0, keepdims=False) for i in (0, 1))
    b1, b2 = threefry2x32(k1, k2, lax.full((), 0, _U32), d)
    return _keys_out(raw, lax.concatenate([lax.reshape(b1, (1,)), lax.reshape(b2, (1,))], 0))


# ------------------------------------------------------- XLA CPU floating-point kernels

def _via_f32(fn, fallback):
    """A float32 kernel that serves float16 through float32, as XLA does; other dtypes (float64
    with x64 on) use the `kiln.lax` primitive `fallback`."""
    def wrapped(x):
        if x.dtype == _F32:
            return fn(x)
        if x.dtype == np.float16:
            return lax.convert_element_type(fn(lax.convert_element_type(x, _F32)), x.dtype)
        return fallback(x)
    wrapped.__name__ = fn.__name__.replace("_f32", "")
    return wrapped


def _fma(a, b, c):
    """a * b + c with a single rounding, as XLA's contracted multiply-add computes it: the
    private `fma` primitive (a native fused multiply-add under `jit`). `b` and `c` have `a`'s
    dtype or are NumPy constants (cast to it); rank-0 operands broadcast."""
    a = to_array(a)
    b, c = (to_array(v.astype(a.dtype) if isinstance(v, (np.ndarray, np.generic)) else v)
            for v in (b, c))
    return bind(PRIMITIVES["fma"], a, b, c)


def _horner(x, coeffs):
    """The polynomial with float32 `coeffs` (highest degree first) at x, one FMA per step."""
    p = lax.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        p = _fma(p, x, c)
    return p


def _where(pred, a, b):
    """lax.select with rank-0 operands broadcast to the predicate's shape."""
    return lax.select(pred, _bcast_to(a, pred.shape), _bcast_to(b, pred.shape))


# XLA's float32 log: Cephes' polynomial on the mantissa in [sqrt(1/2), sqrt(2)).
_LOG_P = _f32((0x3D9021BB, 0xBDEBD1B8, 0x3DEF251A, 0xBDFE5D4F, 0x3E11E9BF, 0xBE2AAE50,
               0x3E4CCEAC, 0xBE7FFFFC, 0x3EAAAAAA))
_LOG_Q1, _LOG_Q2 = _f32(0xB95E8083), _f32(0x3F318000)


def _log_f32(x):
    bits = lax.bitcast_convert_type(lax.max(x, _f32(0x00800000)), np.int32)
    e = lax.add(lax.convert_element_type(
        lax.sub(lax.shift_right_logical(bits, _c(23, np.int32)), _c(127, np.int32)), _F32), _fc(1))
    m = lax.bitcast_convert_type(lax.bitwise_or(lax.bitwise_and(bits, _c(-2139095041, np.int32)),
                                                _c(0x3F000000, np.int32)), _F32)
    small = lax.lt(m, _f32(0x3F3504F3))
    e = lax.sub(e, lax.convert_element_type(small, _F32))
    m = lax.add(lax.sub(m, _fc(1)), _where(small, m, _fc(0)))
    m2 = lax.mul(m, m)
    m3 = lax.mul(m2, m)
    p = [_fma(m, _LOG_P[i], _LOG_P[i + 1]) for i in (0, 3, 6)]
    p = [_fma(p[j], m, _LOG_P[3 * j + 2]) for j in range(3)]
    y = _fma(_fma(p[0], m3, p[1]), m3, p[2])
    y = _fma(y, m3, lax.mul(e, _LOG_Q1))
    r = lax.add(lax.add(lax.sub(m, lax.mul(m2, _fc(0.5))), y), lax.mul(e, _LOG_Q2))
    r = _where(lax.bitwise_not(lax.gt(x, _fc(0))), _fc(np.nan), r)
    r = _where(lax.eq(x, _fc(0)), _fc(-np.inf), r)
    return _where(lax.eq(x, _fc(np.inf)), _fc(np.inf), r)


# XLA's float32 log1p: Cephes' rational approximation near 0, log(1 + x) elsewhere.
_LOG1P_NUM = _fc((4.5270000862445199635215E-5, 4.9854102823193375972212E-1,
                  6.5787325942061044846969E0, 2.9911919328553073277375E1,
                  6.0949667980987787057556E1, 5.7112963590585538103336E1,
                  2.0039553499201281259648E1))
_LOG1P_DEN = _fc((1., 1.5062909083469192043167E1, 8.3047565967967209469434E1,
                  2.2176239823732856465394E2, 3.0909872225312059774938E2,
                  2.1642788614495947685003E2, 6.0118660497603843919306E1))


def _log1p_f32(x):
    large = _log_f32(lax.add(x, _fc(1)))
    x2 = lax.mul(x, x)
    ratio = lax.div(_horner(x, _LOG1P_NUM), _horner(x, _LOG1P_DEN))
    small = lax.add(x, lax.add(lax.mul(x2, _fc(-0.5)), lax.mul(lax.mul(x, x2), ratio)))
    return lax.select(lax.lt(lax.abs(x), _fc(0.41421356237309504880)), small, large)


# XLA's float32 exp: Cephes' range reduction by ln 2 and a degree-5 polynomial.
_EXP_P = np.append(_f32((0x39506967, 0x3AB743CE, 0x3C088908, 0x3D2AA9C1, 0x3E2AAAAA)), _fc(0.5))


def _exp_f32(x):
    x = lax.min(lax.max(x, _fc(-87.8)), _fc(88.8))
    n = lax.clamp(_fc(-127), lax.floor(_fma(x, _f32(0x3FB8AA3B), _fc(0.5))), _fc(127))
    r = lax.sub(x, lax.mul(n, _f32(0x3F318000)))
    r = _fma(lax.neg(n), _f32(0xB95E8083), r)
    y = _horner(r, _EXP_P)
    y = lax.add(_fc(1), _fma(y, lax.mul(r, r), r))
    scale = lax.shift_left(lax.add(lax.convert_element_type(n, np.int32), _c(127, np.int32)),
                           _c(23, np.int32))
    return _ftz(lax.mul(y, lax.bitcast_convert_type(scale, _F32)))


# XLA's float32 erf: a rational function of x*x, saturating at |x| >= 3.832.
_ERF_NUM = _f32((0x39702D51, 0x3B5F5DA2, 0x3D50B6EB, 0x3E3DA740, 0x3F906EBA))
_ERF_DEN = _f32((0xB3FD3906, 0x37C588DF, 0x3A856D28, 0x3C6687D4, 0x3DE34C21, 0x3EFEB44A,
                 0x3F800000))


def _erf_f32(x):
    x2 = lax.mul(x, x)
    ratio = lax.div(lax.mul(x, _horner(x2, _ERF_NUM)), _horner(x2, _ERF_DEN))
    return lax.select(lax.ge(lax.abs(x), _f32(0x407547CB)), lax.sign(x), ratio)


# XLA's float32 erf_inv: Giles' single-precision approximation.
_ERF_INV_SMALL = _fc((2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                      0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941))
_ERF_INV_LARGE = _fc((-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                      0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682))


def _erf_inv_f32(x):
    w = lax.neg(_log1p_f32(lax.mul(x, lax.neg(x))))
    small = lax.lt(w, _fc(5))
    w = lax.select(small, lax.sub(w, _fc(2.5)), lax.sub(lax.sqrt(w), _fc(3)))
    p = _where(small, _ERF_INV_SMALL[0], _ERF_INV_LARGE[0])
    for a, b in zip(_ERF_INV_SMALL[1:], _ERF_INV_LARGE[1:]):
        p = _fma(p, w, _where(small, a, b))
    return lax.select(lax.eq(lax.abs(x), _fc(1)), lax.mul(x, _fc(np.inf)), lax.mul(p, x))


# The 12-bit estimate of `vrsqrtps` on an Intel CPU, for x in [1, 4): the first estimate's
# mantissa (in units of 2**-12, the estimates lie in [0.5, 1)) for each exponent parity, then
# the drop at each step of x's top 10 mantissa bits. Measured by
# tests/goldens/measure_rsqrt_estimate.py.
_RSQRT_ESTIMATE = (
    '4094:44444444444434444444443444444344443444434443444344434434434434434434434344343443434'
    '3443434343434343434343343434334343343433433434334334333433433433343334333433334333343333'
    '3433333433333334333333333343333333333333333333333333333333333332333333333332333333323333'
    '3323333323333233332333323332333233323332332333233233233233233233233233232332332323323232'
    '3323232332323232323323232323232323232323223232323232232323223232232322323223232232232232'
    '3223223223223223222322322322232223223222322232223222232223222232222322223222232222232222'
    '2232222223222222232222222232222222222322222222222222223222222222222222222222222222222222'
    '2222222222222122222222222222221222222222221222222222122222222122222212222221222222122222'
    '1222221222212222122221222212222122212222122212221222122212221222122212212221221222122122'
    '2122122122122212212212212212212212212122122122121221221221212212122122121221212212121221'
    '2122121212212121221212121221212121212122121212121212121212212121212121212121212112121212'
    '121212121212112121212121211212121211212121121212112121211212',
    '1695:32333323333233323333233233323323332332332332332332323323233232332323233232323232332'
    '3232323232232323232323223232322323223232232232322322322322322322322322232232223222322232'
    '2232223222232222322223222223222223222222322222223222222222322222222222222322222222222222'
    '2222222222222222222222222222122222222222222122222222221222222212222222122222212222212222'
    '2122221222212222122221222212221222122212221222122212212221221222122122122212212212212212'
    '2122122122121221221221212212122122121221212212121221212122121212212121212122121212121212'
    '1221212121212121212121212121121212121212121211212121212112121211212121121212112121121211'
    '2121121211212112112121121121211211211212112112112112112112112112112112111211211211211121'
    '1211121121112112111211211121112111211121112111211121112111211112111211112111211112111121'
    '1112111121111211111211112111112111112111112111112111111211111121111112111111211111112111'
    '1111121111111121111111121111111111211111111111211111111111121111111111111112111111111111'
    '111111112111111111111111111111111111111111111111111111111111')


def _estimate_table(parts):
    """int32 bit patterns of the estimates, indexed by parity * 1024 + top mantissa bits."""
    out = []
    for part in parts:
        first, drops = part.split(":")
        out.append(int(first) - np.cumsum([0] + [int(d) for d in drops]))
    return (0x3F000000 | (np.concatenate(out) << 11)).astype(np.int32)


_RSQRT_Y0 = _estimate_table(_RSQRT_ESTIMATE)


def _rsqrt_f32(x):
    """XLA's reciprocal square root: two Newton steps from the CPU's 12-bit estimate, which
    depends only on the exponent's parity and the top 10 mantissa bits (and scales by 2**-k
    when x scales by 4**k); off the positive normal floats, the estimate itself (with
    denormals read as zero). Bit-exact where JAX runs on an Intel CPU."""
    i32 = np.int32
    bits = lax.bitcast_convert_type(x, i32)
    e = lax.bitwise_and(lax.shift_right_logical(bits, _c(23, i32)), _c(0xFF, i32))
    odd = lax.bitwise_xor(lax.bitwise_and(e, _c(1, i32)), _c(1, i32))  # (e - 127) % 2
    top = lax.bitwise_and(lax.shift_right_logical(bits, _c(13, i32)), _c(0x3FF, i32))
    y0 = to_array(_RSQRT_Y0)[lax.bitwise_or(lax.shift_left(odd, _c(10, i32)), top)]
    halves = lax.shift_right_arithmetic(lax.sub(lax.sub(e, _c(127, i32)), odd), _c(1, i32))
    y = lax.bitcast_convert_type(lax.sub(y0, lax.shift_left(halves, _c(23, i32))), _F32)
    for _ in range(2):
        y = _fma(lax.mul(y, _fc(-0.5)), _fma(lax.mul(x, y), y, _fc(-1)), y)
    normal = lax.bitwise_and(lax.ge(x, _f32(0x00800000)), lax.lt(x, _fc(np.inf)))
    return lax.select(normal, y, lax.rsqrt(_ftz(x)))


def _ftz(x):
    """XLA's CPU code runs with denormals flushed to zero."""
    if x.dtype != _F32:
        return x
    return lax.select(lax.lt(lax.abs(x), lax.full_like(x, np.finfo(np.float32).tiny)),
                      lax.mul(x, lax.full_like(x, 0)), x)


_log = _via_f32(_log_f32, lax.log)
_log1p = _via_f32(_log1p_f32, lax.log1p)
_exp = _via_f32(_exp_f32, lax.exp)
_erf = _via_f32(_erf_f32, lax.erf)
_erf_inv = _via_f32(_erf_inv_f32, lax.erf_inv)
_rsqrt = _via_f32(_rsqrt_f32, lax.rsqrt)


def _smooth(kernel, derivative):
    """`kernel` with the derivative of the function it stands for, `derivative(x, y)` at
    y = kernel(x), as JAX's rule gives it: the kernels' bit manipulation has none (and their
    polynomials only approximate it). For values that may be differentiated; the plain
    kernels elsewhere keep compiled samplers fused (a custom derivative is a region)."""
    def smooth(x):
        return kernel(x)
    smooth = custom_jvp(smooth)

    def smooth_jvp(primals, tangents):
        y = kernel(primals[0])
        return y, lax.mul(tangents[0], derivative(primals[0], y))
    smooth.defjvp(smooth_jvp)
    return smooth


_log_smooth = _smooth(_log, lambda x, y: lax.div(lax.full_like(x, 1), x))
_exp_smooth = _smooth(_exp, lambda x, y: y)
_erf_smooth = _smooth(_erf, lambda x, y: lax.mul(
    lax.full_like(x, 2 / np.sqrt(np.pi)), _exp(lax.neg(lax.mul(x, x)))))
_erf_inv_smooth = _smooth(_erf_inv, lambda x, y: lax.mul(
    lax.full_like(x, np.sqrt(np.pi) / 2), _exp(lax.mul(y, y))))


# ---------------------------------------------------------------------- argument checks

def _shape(shape):
    """JAX's canonicalize_shape: an int or a sequence of ints."""
    try:
        shape = (operator.index(shape),) if not isinstance(shape, Sequence) else \
            tuple(operator.index(d) for d in shape)
    except TypeError:
        shown = tuple(shape) if isinstance(shape, Sequence) else shape
        raise TypeError("Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{shown}.") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"kiln.random: shape {shape} has a negative dimension")
    return shape


def _float_dtype(name, dtype, what="a float"):
    dtype = dtypes.default_float() if dtype is None else canonical_dtype(dtype, name)
    kinds = "fc" if what == "a float or complex" else "f"
    if dtype.kind not in kinds:
        raise ValueError(f"dtype argument to `{name}` must be {what} dtype, got {dtype}")
    return dtype


def _check_shape(name, shape, *param_shapes):
    if param_shapes:
        out = broadcast_shapes(shape, *param_shapes)
        if tuple(out) != tuple(shape):
            raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                             "argument, and the result of broadcasting the shapes must equal the "
                             f"shape argument, but got result {tuple(out)} for shape argument "
                             f"{tuple(shape)}.")


def _bcast_to(x, shape, op=None):
    """Broadcast `x` to `shape` (NumPy's rule); TypeError naming `op` as lax would."""
    x = to_array(x)
    shape = tuple(shape)
    if x.shape == shape:
        return x
    lead = len(shape) - x.ndim
    if lead < 0 or any(d not in (1, shape[lead + i]) for i, d in enumerate(x.shape)):
        raise TypeError(f"{op or 'broadcast'} got incompatible shapes for broadcasting: "
                        f"{shape}, {x.shape}.")
    keep = tuple(i for i, d in enumerate(x.shape) if d == shape[lead + i])
    if len(keep) != x.ndim:
        x = lax.reshape(x, tuple(x.shape[i] for i in keep))
    return lax.broadcast_in_dim(x, shape, tuple(lead + i for i in keep))


def _to_rank(x, rank):
    return lax.reshape(x, (1,) * (rank - x.ndim) + x.shape) if x.ndim < rank else x


# ------------------------------------------------------------------------------ samplers

@out_sharding_keyword
def bits(key, shape=(), dtype=None):
    """Uniform random bits as unsigned integers."""
    base, _ = _check_key("bits", key)
    dtype = dtypes.default_uint() if dtype is None else canonical_dtype(dtype, "bits")
    if dtype.kind != "u":
        raise ValueError("dtype argument to `bits` must be an unsigned int dtype, got "
                         f"{dtype}")
    return _random_bits(base, dtype.itemsize * 8, _shape(shape))


@out_sharding_keyword
def uniform(key, shape=(), dtype=None, minval=0., maxval=1.):
    """Uniform floats in [minval, maxval)."""
    base, _ = _check_key("uniform", key)
    dtype = _float_dtype("uniform", dtype)
    return _uniform(base, _shape(shape), dtype, minval, maxval)


def _uniform(keys, shape, dtype, minval, maxval):
    """Mantissa bits under the exponent of 1.0 give [1, 2); minus 1, then scaled and shifted."""
    batch = tuple(keys.shape[:-1])
    full = batch + shape
    minval, maxval = (_to_rank(lax.convert_element_type(to_array(v), dtype), len(full))
                      for v in (minval, maxval))
    info = np.finfo(dtype)
    nbits, nmant = info.bits, info.nmant
    uint = _UINT[nbits]
    raw = _random_bits(keys, nbits, shape)
    one = _c(np.array(1.0, dtype).view(uint), uint)
    fbits = lax.bitwise_or(lax.shift_right_logical(raw, _c(nbits - nmant, uint)), one)
    floats = lax.sub(lax.bitcast_convert_type(fbits, dtype), _c(1, dtype))
    span = lax.sub(maxval, minval)
    out = _fma(floats, _bcast_to(span, full, "mul"), _bcast_to(minval, full, "add"))
    return lax.max(_bcast_to(minval, full, "max"), out)


@out_sharding_keyword
def normal(key, shape=(), dtype=None):
    """Standard normal samples: sqrt(2) * erf_inv(u) for u uniform in (-1, 1)."""
    base, _ = _check_key("normal", key)
    dtype = _float_dtype("normal", dtype, "a float or complex")
    shape = _shape(shape)
    if dtype.kind == "c":
        real = np.dtype(np.float32) if dtype == np.complex64 else np.dtype(np.float64)
        k_re, k_im = _split2(base)
        inv_sqrt2 = _c(1, real) / _c(np.sqrt(2), real)  # XLA: x / c becomes x * (1 / c)
        re, im = (lax.mul(_normal(k, shape, real), inv_sqrt2) for k in (k_re, k_im))
        return lax.complex(re, im)
    return _normal(base, shape, dtype)


def _normal(keys, shape, dtype):
    lo = np.nextafter(np.array(-1., dtype), np.array(0., dtype))
    u = _uniform(keys, shape, dtype, lo, _c(1., dtype))
    return lax.mul(_c(np.sqrt(2), dtype), _erf_inv(u))


@out_sharding_keyword
def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal samples conditioned on lower < x < upper."""
    shape = None if shape is None else _shape(shape)
    base, _ = _check_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = broadcast_shapes(np.shape(lower), np.shape(upper))
    else:
        _check_shape("truncated_normal", shape, np.shape(lower), np.shape(upper))
    sqrt2 = _c(np.sqrt(2), dtype)
    lower, upper = (lax.convert_element_type(to_array(v), dtype) for v in (lower, upper))
    # XLA rewrites x / constant as x * (1 / constant), the reciprocal rounded to dtype.
    inv_sqrt2 = _c(1, dtype) / sqrt2
    a, b = (_erf_smooth(lax.mul(v, inv_sqrt2)) for v in (lower, upper))
    out = lax.mul(sqrt2, _erf_inv_smooth(_uniform(base, shape, dtype, a, b)))
    lo = lax.nextafter(lower, lax.full_like(lower, np.inf))
    hi = lax.nextafter(upper, lax.full_like(upper, -np.inf))
    out = lax.max(_bcast_to(lo, shape, "max"), out)
    return lax.min(_bcast_to(hi, shape, "min"), out)


@out_sharding_keyword
def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans that are True with probability p."""
    shape = None if shape is None else _shape(shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    base, _ = _check_key("bernoulli", key)
    p = to_array(p, "bernoulli")
    if p.dtype.kind != "f":
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {p.dtype}.")
    if shape is None:
        shape = p.shape
    else:
        _check_shape("bernoulli", shape, p.shape)
    p = _bcast_to(p, shape)
    if mode == "high":
        u = _uniform(base, (2,) + shape, p.dtype, 0., 1.)
        u1, u2 = (lax.index_in_dim(u, i, 0, keepdims=False) for i in (0, 1))
        u2 = lax.mul(u2, _c(2.0 ** -np.finfo(p.dtype).nmant, p.dtype))
        return lax.lt(u2, lax.sub(p, u1))
    return lax.lt(_uniform(base, shape, p.dtype, 0., 1.), p)


@out_sharding_keyword
def rademacher(key, shape=(), dtype=None):
    """-1 or 1 with equal probability."""
    base, _ = _check_key("rademacher", key)
    dtype = dtypes.default_int() if dtype is None else canonical_dtype(dtype, "rademacher")
    b = lax.convert_element_type(bernoulli(base, 0.5, _shape(shape)), dtype)
    return lax.sub(lax.mul(_c(2, dtype), b), _c(1, dtype))


def _clip_convert_int(val, dtype):
    """Convert integer `val` to `dtype`, saturating instead of wrapping."""
    lo = max(np.iinfo(dtype).min, np.iinfo(val.dtype).min)
    hi = min(np.iinfo(dtype).max, np.iinfo(val.dtype).max)
    return lax.convert_element_type(lax.clamp(_c(lo, val.dtype), val, _c(hi, val.dtype)), dtype)


@out_sharding_keyword
def randint(key, shape, minval, maxval, dtype=None):
    """Integers in [minval, maxval), from two draws combined through a span multiplier."""
    base, _ = _check_key("randint", key)
    dtype = dtypes.default_int() if dtype is None else canonical_dtype(dtype, "randint")
    shape = _shape(shape)
    if dtype.kind not in "iu":
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    check_arraylike("randint", minval, maxval)
    info = np.iinfo(dtype)
    sampling = dtype
    if info.bits < 32:  # small types sample at 32 bits, then convert
        sampling = np.dtype(np.int32)
        minval, maxval = (lax.clamp(_c(info.min, np.int32),
                                    lax.convert_element_type(to_array(v), np.int32),
                                    _c(hi, np.int32))
                          for v, hi in ((minval, info.max), (maxval, info.max + 1)))
    return lax.convert_element_type(_randint(base, minval, maxval, shape, sampling), dtype)


def _randint(keys, minval, maxval, shape, dtype):
    _check_shape("randint", shape, np.shape(minval), np.shape(maxval))
    minval, maxval = (to_array(v, "randint") for v in (minval, maxval))
    minval, maxval = (v if v.dtype.kind in "iu" else
                      lax.convert_element_type(v, dtypes.default_int()) for v in (minval, maxval))
    top = _clip_convert_int(to_array(_c(np.iinfo(dtype).max, dtype)), maxval.dtype)
    maxval_out_of_range = lax.gt(maxval, top)
    minval, maxval = (_to_rank(_clip_convert_int(v, dtype), len(shape)) for v in (minval, maxval))
    out_of_range = _to_rank(maxval_out_of_range, len(shape))
    nbits = np.iinfo(dtype).bits
    uint = _UINT[nbits]
    k1, k2 = _split2(keys)
    higher, lower = _random_bits(k1, nbits, shape), _random_bits(k2, nbits, shape)
    span = lax.convert_element_type(lax.sub(maxval, minval), uint)
    span = lax.select(lax.le(maxval, minval), lax.full_like(span, 1), span)
    span = lax.select(lax.bitwise_and(out_of_range, lax.gt(maxval, minval)),
                      lax.add(span, _c(1, uint)), span)
    span = _bcast_to(span, shape)
    multiplier = lax.rem(_bcast_to(_c(2 ** (nbits // 2), uint), shape), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), multiplier), lax.rem(lower, span))
    offset = lax.rem(offset, span)
    return lax.add(_bcast_to(minval, shape), lax.convert_element_type(offset, dtype))


def _shuffle(keys, x, axis, key_shape):
    """Sort along `axis` by fresh random keys, ceil(3 log(n) / log(2**32 - 1)) times.

    The sort keys have `key_shape`: x's shape (independent shuffles), or just the shuffled axis,
    broadcast over the others so that every slice moves the same way (JAX's `take` of a
    shuffled `arange`)."""
    size = math.prod(key_shape)
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys, subkey = _split2(keys)
        sort_keys = _random_bits(subkey, 32, key_shape)
        if key_shape != x.shape:
            sort_keys = lax.broadcast_in_dim(sort_keys, x.shape, (axis,))
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


@out_sharding_keyword
def permutation(key, x, axis=0, independent=False):
    """A shuffled `arange(x)` (int x) or `x` shuffled along `axis`."""
    base, _ = _check_key("permutation", key)
    check_arraylike("permutation", x)
    axis = canonicalize_axis(axis, np.ndim(x) or 1)
    if not np.ndim(x):
        if to_array(x).dtype.kind not in "iu":
            raise TypeError("x must be an integer or at least 1-dimensional")
        n = operator.index(int(x))
        return _shuffle(base, lax.iota(dtypes.default_int(), n), 0, (n,))
    x = to_array(x)
    if independent or x.ndim == 1:
        return _shuffle(base, x, axis, x.shape)
    return _shuffle(base, x, axis, (x.shape[axis],))


def _take(arr, ind, axis):
    return arr[(slice(None),) * axis + (ind,)]


def _searchsorted_left(sorted_1d, values):
    """Index of the first element >= each value (JAX's default side='left')."""
    n = sorted_1d.shape[0]
    a = lax.broadcast_in_dim(sorted_1d, values.shape + (n,), (values.ndim,))
    v = lax.broadcast_in_dim(values, values.shape + (n,), tuple(range(values.ndim)))
    return lax.reduce_sum(lax.convert_element_type(lax.lt(a, v), dtypes.default_int()),
                          (values.ndim,))


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """Samples from `a` (an int n means arange(n)), with or without replacement."""
    base, _ = _check_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError(f"shape argument of jax.random.choice must be a sequence, got {shape}")
    shape = _shape(shape)
    check_arraylike("choice", a)
    arr = to_array(a, "choice")
    if arr.ndim == 0:
        n_inputs = operator.index(int(a))
    else:
        axis = canonicalize_axis(axis, arr.ndim)
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return lax.full(shape, 0, arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population "
                         f"(size {n_inputs}) when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(base, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else _take(arr, ind, axis)
        else:
            perm = permutation(base, n_inputs if arr.ndim == 0 else arr, axis)
            result = lax.slice_in_dim(perm, 0, n_draws, axis=axis)
    else:
        check_arraylike("choice", p)
        p_arr = to_array(p, "choice")
        if p_arr.dtype.kind not in "fc":
            p_arr = lax.convert_element_type(p_arr, dtypes.default_float())
        if p_arr.shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. "
                             f"p has shape {p_arr.shape} and a.shape[axis] is {n_inputs}.")
        if replace:
            p_cuml = lax.cumsum(p_arr, 0)
            u = _uniform(base, shape, p_cuml.dtype, 0., 1.)
            total = lax.index_in_dim(p_cuml, n_inputs - 1, 0, keepdims=False)
            r = lax.mul(total, lax.sub(_c(1, p_cuml.dtype), u))
            ind = _searchsorted_left(p_cuml, r)
        else:
            g = lax.add(_gumbel(base, (n_inputs,), p_arr.dtype, _gumbel_mode(mode)),
                        _log(p_arr))
            ind = lax.top_k(g, n_draws)[1]
        result = ind if arr.ndim == 0 else _take(arr, ind, axis)
    out_shape = shape if arr.ndim == 0 else arr.shape[:axis] + shape + arr.shape[axis + 1:]
    return lax.reshape(result, out_shape)


@out_sharding_keyword
def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Category indices drawn with probabilities softmax(logits) along `axis` (Gumbel-max)."""
    base, _ = _check_key("categorical", key)
    check_arraylike("categorical", logits)
    logits = to_array(logits, "categorical")
    nd = logits.ndim
    ax = canonicalize_axis(axis, nd)
    batch_shape = logits.shape[:ax] + logits.shape[ax + 1:]
    if shape is None:
        shape = batch_shape
    else:
        shape = _shape(shape)
        _check_shape("categorical", shape, batch_shape)
    prefix = shape[:len(shape) - len(batch_shape)]
    mode = _gumbel_mode(mode)
    if replace:
        tail = shape[len(prefix):]
        g_shape = prefix + tail[:ax] + (logits.shape[ax],) + tail[ax:]
        g = _gumbel(base, g_shape, logits.dtype, mode)
        shifted = lax.add(g, _bcast_to(logits, g_shape))
        return lax.argmax(shifted, len(prefix) + ax, dtypes.default_int())
    noisy = lax.add(logits, _gumbel(base, logits.shape, logits.dtype, mode))
    k = math.prod(prefix)
    if k > logits.shape[ax]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number of "
                         f"categories ({logits.shape[ax]}).")
    perm = tuple(i for i in range(nd) if i != ax) + (ax,)
    _, indices = lax.top_k(lax.transpose(noisy, perm), k)
    return lax.reshape(indices, shape, (indices.ndim - 1,) + tuple(range(indices.ndim - 1)))


@out_sharding_keyword
def exponential(key, shape=(), dtype=None):
    """Exponential(1) samples: -log1p(-u)."""
    base, _ = _check_key("exponential", key)
    dtype = _float_dtype("exponential", dtype)
    return _exponential(base, _shape(shape), dtype)


def _exponential(keys, shape, dtype):
    return lax.neg(_log1p(lax.neg(_uniform(keys, shape, dtype, 0., 1.))))


def _gumbel_mode(mode):
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return mode


@out_sharding_keyword
def gumbel(key, shape=(), dtype=None, mode=None):
    """Standard Gumbel samples, -log(-log(u)); `mode` 'high'/'highest' spend more bits."""
    base, _ = _check_key("gumbel", key)
    dtype = _float_dtype("gumbel", dtype)
    return _gumbel(base, _shape(shape), dtype, _gumbel_mode(mode))


def _gumbel(keys, shape, dtype, mode):
    info = np.finfo(dtype)
    tiny = _c(info.tiny, dtype)
    if mode == "highest" and dtype == _F32:
        return _gumbel_highest(keys, shape)
    if mode in ("high", "highest"):
        u = _uniform(keys, (2,) + shape, dtype, 0., 1.)
        high, low = (lax.index_in_dim(u, i, 0, keepdims=False) for i in (0, 1))
        fine = lax.add(lax.add(high, lax.mul(_c(2.0 ** -info.nmant, dtype), low)), tiny)
        x = lax.select(lax.ge(high, _c(0.5, dtype)), high, fine)
        return lax.neg(_log(lax.neg(_log1p(lax.neg(x)))))
    return lax.neg(_log(lax.neg(_log(_uniform_above_tiny(keys, shape, dtype)))))


def _uniform_above_tiny(keys, shape, dtype):
    """JAX's `uniform(minval=tiny, maxval=1)` as XLA compiles it: the bounds are constants, the
    span 1 - tiny rounds to 1 and XLA folds the shift (u - 1) + tiny into u + (-1 + tiny), which
    rounds to u - 1; only the clamp to tiny is left."""
    tiny = _c(np.finfo(dtype).tiny, dtype)
    return lax.max(tiny, _uniform(keys, shape, dtype, 0., 1.))


def _safe_uint_to_float(hi, lo):
    """A float32 in (0, 1) from 64 random bits, keeping precision near 0 (JAX's 'highest')."""
    hiclz, loclz = lax.clz(hi), lax.clz(lo)
    hi_is_zero = lax.eq(hiclz, _u32(32))
    low_part = lax.select(hi_is_zero, lax.shift_left(lo, loclz),
                          lax.shift_right_logical(lo, lax.sub(_u32(32), hiclz)))
    mantissa = lax.bitwise_or(lax.shift_left(hi, hiclz), low_part)
    mantissa = lax.bitwise_and(lax.shift_right_logical(mantissa, _u32(8)), _u32((1 << 23) - 1))
    lead = lax.select(hi_is_zero, lax.add(_u32(32), loclz), hiclz)
    exponent = lax.shift_left(lax.sub(_u32(126), lead), _u32(23))
    exponent = lax.bitwise_and(exponent, _u32((1 << 30) - (1 << 22)))
    return lax.bitcast_convert_type(lax.bitwise_or(exponent, mantissa), _F32)


def _gumbel_highest(keys, shape):
    raw = _random_bits(keys, 32, (2,) + shape)
    neg = lax.bitwise_not(raw)
    lo_bits = lax.index_in_dim(neg, 1, 0, keepdims=False)
    carry = lax.convert_element_type(lax.eq(lo_bits, _c(0xFFFFFFFF, _U32)), _U32)
    neg = lax.add(neg, lax.concatenate([lax.expand_dims(carry, (0,)),
                                        lax.full((1,) + shape, 1, _U32)], 0))
    flip = lax.lt(lax.index_in_dim(raw, 0, 0, keepdims=False), _c(1 << 31, _U32))
    chosen = lax.select(_bcast_to(lax.expand_dims(flip, (0,)), raw.shape), raw, neg)
    x = _safe_uint_to_float(*(lax.index_in_dim(chosen, i, 0, keepdims=False) for i in (0, 1)))
    return lax.select(flip, lax.neg(_log(lax.neg(_log1p(lax.neg(x))))),
                      lax.neg(_log(lax.neg(_log(x)))))


@out_sharding_keyword
def laplace(key, shape=(), dtype=None):
    """Laplace(0, 1) samples: sign(u) * log1p(-|u|) for u uniform in (-1, 1)."""
    base, _ = _check_key("laplace", key)
    dtype = _float_dtype("laplace", dtype)
    u = _uniform(base, _shape(shape), dtype, -1. + np.finfo(dtype).epsneg, 1.)
    return lax.mul(lax.sign(u), _log1p(lax.neg(lax.abs(u))))


@out_sharding_keyword
def logistic(key, shape=(), dtype=None):
    """Standard logistic samples: log(u) - log1p(-u)."""
    base, _ = _check_key("logistic", key)
    dtype = _float_dtype("logistic", dtype)
    x = _uniform_above_tiny(base, _shape(shape), dtype)
    return lax.sub(_log(x), _log1p(lax.neg(x)))


# ----------------------------------------------------------------------- gamma family

def _gamma_lanes(keys, alpha, log_space):
    """Marsaglia-Tsang, one lane per (key, alpha): JAX's `_gamma_one` under vmap.

    Every lane runs the rejection loops (`lax.while_loop`s, so that they compile under `jit`)
    in lockstep; a lane's state stops changing once it is accepted, exactly as a batched while
    loop does, so each lane equals the sequential draw.
    """
    dtype = alpha.dtype

    def f(v):
        return lax.full_like(alpha, v)

    boost_mask = lax.ge(alpha, f(1))
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, f(1)))
    d = lax.sub(alpha, f(1. / 3.))
    c = lax.mul(f(1. / 3.), _rsqrt(d))  # XLA rewrites a / sqrt(b) as a * rsqrt(b)
    keys, subkeys = _split2(keys)

    def rejected(X, V, U):
        squeeze = _fma(lax.mul(X, X), f(-0.0331), f(1))
        bound = lax.add(lax.mul(X, f(0.5)),
                        lax.mul(d, lax.add(lax.sub(f(1), V), _log(V))))
        return lax.bitwise_and(lax.ge(U, squeeze), lax.ge(_log(U), bound))

    def any_lane(state):
        return lax.reduce_or(state[-1], (0,))

    def normal_draw(state):  # redraw x ~ N(0, 1) in the lanes where v = 1 + c x <= 0
        x_keys, x, v, pending = state
        x_keys_n, sub = _split2(x_keys)
        x_n = _normal(sub, (), dtype)
        v_n = _fma(x_n, c, f(1))
        x_keys, x, v = (_select_lanes(pending, new, old) for new, old in
                        ((x_keys_n, x_keys), (x_n, x), (v_n, v)))
        return x_keys, x, v, lax.le(v, f(0))

    def proposal(state):  # a new (X, V, U) in the lanes not accepted yet
        keys, X, V, U, active = state
        keys_n, x_keys, u_keys = _split2(keys, 3)
        _, x, v, _ = lax.while_loop(any_lane, normal_draw,
                                    (x_keys, f(0), f(-1), lax.full_like(active, True)))
        X_n, V_n = lax.mul(x, x), lax.mul(lax.mul(v, v), v)
        U_n = _uniform(u_keys, (), dtype, 0., 1.)
        keys, X, V, U = (_select_lanes(active, new, old) for new, old in
                         ((keys_n, keys), (X_n, X), (V_n, V), (U_n, U)))
        return keys, X, V, U, rejected(X, V, U)

    X, V, U = f(0), f(1), f(2)
    _, X, V, _, _ = lax.while_loop(any_lane, proposal, (keys, X, V, U, rejected(X, V, U)))
    if log_space:
        log_samples = lax.neg(_exponential(subkeys, (), dtype))
        log_boost = lax.select(lax.bitwise_or(boost_mask, lax.eq(log_samples, f(0))), f(0),
                               lax.mul(log_samples, lax.div(f(1), alpha_orig)))
        return lax.add(lax.add(_log(d), _log(V)), log_boost)
    samples = lax.sub(f(1), _uniform(subkeys, (), dtype, 0., 1.))
    boost = lax.select(boost_mask, f(1), _ftz(lax.pow(samples, lax.div(f(1), alpha_orig))))
    return _ftz(lax.mul(lax.mul(d, V), boost))


def _select_lanes(mask, new, old):
    if new.ndim > mask.ndim:  # key data: one mask entry per key
        mask = lax.broadcast_in_dim(mask, new.shape, tuple(range(mask.ndim)))
    return lax.select(mask, new, old)


def _with_gamma_grad(x, alpha, log_space):
    """The draws `x` (computed from `stop_gradient(alpha)`), differentiable in `alpha` as JAX
    differentiates its `random_gamma` primitive."""
    return x


_with_gamma_grad = custom_jvp(_with_gamma_grad, nondiff_argnums=(2,))


@_with_gamma_grad.defjvp
def _with_gamma_grad_jvp(log_space, primals, tangents):
    """Implicit reparameterisation: a draw x moves with alpha at the rate dx/dalpha that keeps
    its CDF value P(alpha, x) fixed. The draws reach this rule as constants (computed from
    stop_gradient(alpha)); the rate is taken at `moving`, which equals x but moves with alpha
    at that rate, so that a second derivative sees the rate change with x too, as JAX's
    forward mode does."""
    x, alpha = primals
    rate = lax.stop_gradient(_draw_grad(alpha, x, log_space))
    rate = lax.select(lax.is_finite(rate), rate, lax.full_like(rate, 0))  # keeps moving == x
    moving = lax.add(x, lax.mul(lax.sub(alpha, lax.stop_gradient(alpha)), rate))
    return x, lax.add(tangents[0], lax.mul(tangents[1], _draw_grad(alpha, moving, log_space)))


def _draw_grad(alpha, x, log_space):
    if not log_space:
        return _upcast(gamma_sample_grad, alpha, x)
    x = _exp_smooth(x)  # d log(x) = dx / x, with exp(log x) = 0 read as the smallest normal
    x = lax.select(lax.eq(x, lax.full_like(x, 0)), lax.full_like(x, np.finfo(x.dtype).tiny), x)
    return lax.div(_upcast(gamma_sample_grad, alpha, x), x)


def _upcast(fn, *args):
    """fn over float16 arguments runs in float32, as JAX's special functions do."""
    if args[0].dtype != np.float16:
        return fn(*args)
    return lax.convert_element_type(
        fn(*(lax.convert_element_type(v, _F32) for v in args)), np.float16)


def gamma_sample_grad(a, x):
    """dx/da = -(dP(a, x)/da) / (dP(a, x)/dx) for the regularised lower incomplete gamma P:
    P's power series for x <= max(1, a), the continued fraction of Q = 1 - P beyond, each
    carrying its derivative in a; 0 at x = 0, NaN for x < 0, a <= 0 or NaN inputs. Where
    x^a e^-x / Gamma(a) underflows the loops do not run (their first terms stand), as in
    JAX's `random_gamma_grad`."""
    shape = lax.broadcast_shapes(np.shape(a), np.shape(x))   # a rank-0 operand stretches
    a, x = lax.broadcast(a, shape[np.ndim(a):]), lax.broadcast(x, shape[np.ndim(x):])

    def f(v):
        return lax.full_like(a, v)

    is_nan = lax.bitwise_or(lax.ne(a, a), lax.ne(x, x))
    x_is_zero = lax.eq(x, f(0))
    domain_error = lax.bitwise_or(lax.lt(x, f(0)), lax.le(a, f(0)))
    use_fraction = lax.bitwise_and(lax.gt(x, f(1)), lax.gt(x, a))
    log_ax = lax.sub(lax.sub(lax.mul(a, _log_smooth(x)), x), lax.lgamma(a))
    underflow = lax.lt(log_ax, f(-np.log(np.finfo(a.dtype).max)))
    enabled = lax.bitwise_not(lax.bitwise_or(lax.bitwise_or(x_is_zero, domain_error),
                                             lax.bitwise_or(underflow, is_nan)))
    out = lax.select(use_fraction,
                     _fraction_grad(a, x, lax.bitwise_and(enabled, use_fraction)),
                     _series_grad(a, x, lax.bitwise_and(enabled, lax.bitwise_not(use_fraction))))
    out = lax.select(x_is_zero, f(0), out)
    return lax.select(lax.bitwise_or(domain_error, is_nan), f(np.nan), out)


def _any_enabled(state):
    return lax.reduce_or(state[0], tuple(range(state[0].ndim)))


def _series_grad(a, x, enabled):
    """P(a, x) = x^a e^-x / Gamma(a + 1) * sum_n c_n with c_0 = 1, c_n = c_(n-1) x / (a + n);
    the sum and its a-derivative run until the derivative's terms fall below float epsilon."""
    eps = lax.full_like(a, np.finfo(a.dtype).eps)

    def term(state):
        on, r, c, total, dc, dtotal = state
        r_n = lax.add(r, lax.full_like(r, 1))
        x_r = lax.div(x, r_n)
        dc_n = lax.sub(lax.mul(dc, x_r), lax.div(lax.mul(c, x), lax.mul(r_n, r_n)))
        c_n = lax.mul(c, x_r)
        new = (r_n, c_n, lax.add(total, c_n), dc_n, lax.add(dtotal, dc_n))
        going = lax.bitwise_and(on, lax.gt(lax.abs(lax.div(dc_n, new[4])), eps))
        return (going,) + tuple(lax.select(on, n, o) for n, o in zip(new, state[1:]))

    one, zero = lax.full_like(a, 1), lax.full_like(a, 0)
    _, _, _, total, _, dtotal = lax.while_loop(_any_enabled, term,
                                               (enabled, a, one, one, zero, zero))
    dlog_ax = lax.sub(_log_smooth(x), lax.digamma(lax.add(a, one)))
    return lax.div(lax.mul(lax.neg(lax.add(dtotal, lax.mul(total, dlog_ax))), x), a)


_FRACTION_STEPS = 2000


def _fraction_grad(a, x, enabled):
    """Q(a, x) = x^a e^-x / Gamma(a) * p_k / q_k, the convergents of Q's continued fraction
    (three-term recurrences in k, rescaled by epsilon when they grow past 1 / epsilon), and
    their a-derivatives; at most 2000 steps, until the derivative changes by epsilon or less."""
    dtype = a.dtype
    eps = np.finfo(dtype).eps

    def f(v):
        return lax.full_like(a, v)

    def step(state):
        on, k, ans, dans, y, z, p1, q1, p2, q2, dp2, dq2, dp1, dq1 = state
        k = lax.add(k, _c(1, dtype))
        y, z = lax.add(y, f(1)), lax.add(z, f(2))
        kb = lax.broadcast_in_dim(k, a.shape, ())
        yk = lax.mul(y, kb)
        pk = lax.sub(lax.mul(p1, z), lax.mul(p2, yk))
        qk = lax.sub(lax.mul(q1, z), lax.mul(q2, yk))
        nonzero = lax.ne(qk, f(0))
        ans_n = lax.select(nonzero, lax.div(pk, qk), ans)
        dpk = lax.add(lax.sub(lax.sub(lax.mul(dp1, z), p1), lax.mul(dp2, yk)), lax.mul(p2, kb))
        dqk = lax.add(lax.sub(lax.sub(lax.mul(dq1, z), q1), lax.mul(dq2, yk)), lax.mul(q2, kb))
        dans_n = lax.select(nonzero, lax.div(lax.sub(dpk, lax.mul(ans_n, dqk)), qk), dans)
        change = lax.select(nonzero, lax.abs(lax.sub(dans_n, dans)), f(1))
        big = lax.gt(lax.abs(pk), f(1 / eps))
        shifted = [lax.select(big, lax.mul(v, f(eps)), v)
                   for v in (p1, q1, pk, qk, dp1, dq1, dpk, dqk)]
        p2, q2, p1, q1, dp2, dq2, dp1, dq1 = shifted
        going = lax.bitwise_and(on, lax.gt(change, f(eps)))
        new = (ans_n, dans_n, y, z, p1, q1, p2, q2, dp2, dq2, dp1, dq1)
        return (going, k) + tuple(lax.select(on, n, o) for n, o in zip(new, state[2:]))

    def more(state):
        return lax.bitwise_and(lax.lt(state[1], _c(_FRACTION_STEPS, dtype)), _any_enabled(state))

    y = lax.sub(f(1), a)
    z = lax.add(lax.add(x, y), f(1))
    p1, q1 = lax.add(x, f(1)), lax.mul(z, x)
    ans = lax.div(p1, q1)
    dq1 = lax.neg(x)
    dans = lax.div(lax.neg(lax.mul(ans, dq1)), q1)
    state = (enabled, lax.full((), 0, dtype), ans, dans, y, z, p1, q1, f(1), x, f(0), f(0),
             f(0), dq1)
    _, _, ans, dans, *_ = lax.while_loop(more, step, state)
    dlog_ax = lax.sub(_log_smooth(x), lax.digamma(a))
    return lax.mul(lax.add(dans, lax.mul(ans, dlog_ax)), x)


def _gamma(keys, a, shape, dtype, log_space):
    if shape is None:
        shape = np.shape(a)
    else:
        _check_shape("gamma", shape, np.shape(a))
    a = _bcast_to(lax.convert_element_type(to_array(a), dtype), shape)
    n = math.prod(shape)
    if n == 0:
        return lax.full(shape, 0, dtype)
    lanes, a = _split(keys, (n,)), lax.reshape(a, (n,))
    x = _gamma_lanes(lanes, lax.stop_gradient(a), log_space)
    return lax.reshape(_with_gamma_grad(x, a, log_space), shape)


@out_sharding_keyword
def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) samples (Marsaglia-Tsang with rejection)."""
    base, _ = _check_key("gamma", key)
    dtype = _float_dtype("gamma", dtype)
    shape = None if shape is None else _shape(shape)
    return _gamma(base, a, shape, dtype, log_space=False)


@out_sharding_keyword
def loggamma(key, a, shape=None, dtype=None):
    """log of Gamma(a, 1) samples, accurate for small a."""
    base, _ = _check_key("loggamma", key)
    dtype = _float_dtype("gamma", dtype)
    shape = None if shape is None else _shape(shape)
    return _gamma(base, a, shape, dtype, log_space=True)


def _check_safe_cast(name, dtype, *args):
    for arg in args:
        a = to_array(arg, name)
        if a.dtype != dtype and dtypes.result_type((a.dtype, a.weak_type), (dtype, False))[0] \
                != dtype:
            raise ValueError(f"In arguments to {name}, cannot safely cast argument of type "
                             f"{a.dtype} to {dtype}")


@out_sharding_keyword
def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) samples from two log-gamma draws."""
    base, _ = _check_key("beta", key)
    dtype = _float_dtype("beta", dtype)
    _check_safe_cast("beta", dtype, a, b)
    if shape is None:
        shape = broadcast_shapes(np.shape(a), np.shape(b))
    else:
        shape = _shape(shape)
        _check_shape("beta", shape, np.shape(a), np.shape(b))
    key_a, key_b = _split2(base)
    log_a = _gamma(key_a, a, shape, dtype, log_space=True)
    log_b = _gamma(key_b, b, shape, dtype, log_space=True)
    log_max = lax.max(log_a, log_b)
    ga, gb = _exp_smooth(lax.sub(log_a, log_max)), _exp_smooth(lax.sub(log_b, log_max))
    return _ftz(lax.div(ga, lax.add(ga, gb)))


_SEQUENTIAL_SUM_MAX = 16


def _row_sum(x):
    """The sum over the last axis in order, as XLA's CPU code adds rows of up to 16 values
    (kiln's compiled reductions may reassociate, NumPy adds in blocks); longer rows by
    `lax.reduce_sum`."""
    k = x.shape[-1]
    if k > _SEQUENTIAL_SUM_MAX:
        return lax.reduce_sum(x, (x.ndim - 1,))
    total = lax.full(x.shape[:-1], 0, x.dtype)
    for i in range(k):
        total = lax.add(total, lax.index_in_dim(x, i, x.ndim - 1, keepdims=False))
    return total


@out_sharding_keyword
def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) samples: a softmax of log-gamma draws along the last axis."""
    base, _ = _check_key("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    alpha_shape = np.shape(alpha)
    if len(alpha_shape) < 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                         f"{len(alpha_shape)}")
    if shape is None:
        shape = alpha_shape[:-1]
    else:
        shape = _shape(shape)
        _check_shape("dirichlet", shape, alpha_shape[:-1])
    full = tuple(shape) + alpha_shape[-1:]
    return _softmax(_gamma(base, alpha, full, dtype, log_space=True))


def _softmax(logs):
    """JAX's `nn.softmax` over the last axis, as XLA computes it."""
    last = logs.ndim - 1
    keep = tuple(range(last))
    top = lax.max(lax.reduce_max(logs, (last,)), lax.full(logs.shape[:-1], -np.inf, logs.dtype))
    unnormalized = _exp(lax.sub(logs, lax.broadcast_in_dim(top, logs.shape, keep)))
    # XLA rewrites a division by a broadcast value into a product with its reciprocal.
    inv_total = lax.div(lax.full(logs.shape[:-1], 1, logs.dtype), _row_sum(unnormalized))
    return _ftz(lax.mul(unnormalized, lax.broadcast_in_dim(inv_total, logs.shape, keep)))


_softmax = custom_jvp(_softmax)


@_softmax.defjvp
def _softmax_jvp(primals, tangents):
    """JAX's rule: y * (t - sum(y * t)) over the last axis."""
    y, t = _softmax(primals[0]), tangents[0]
    dot = lax.broadcast_in_dim(_row_sum(lax.mul(y, t)), y.shape, tuple(range(y.ndim - 1)))
    return y, lax.mul(y, lax.sub(t, dot))
