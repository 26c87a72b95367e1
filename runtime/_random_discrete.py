"""The implementation of `kiln.random`'s counting distributions: poisson, binomial and
multinomial.

Each follows JAX 0.10.2's algorithm step by step, with the same key splits, and computes
`log` and `log1p` with `_random`'s copies of XLA's CPU kernels and multiply-adds as XLA's
contracted ones (`_fma`), so that the same key gives JAX's samples:
- poisson: Knuth's product of uniforms for rates below 10 (and NaN), Hormann's transformed
  rejection otherwise; both run over the whole output shape with one key per round, as
  `lax.while_loop`s that stop when every lane is done. Rates are float32, as in JAX; the
  rejection test's lgamma is a copy of XLA's float32 kernel (`kiln.lax.lgamma` rounds
  differently in the last bit).
- binomial: inversion by sums of geometric draws where n * min(p, 1 - p) <= 10, the BTRS
  transformed rejection otherwise (with its Stirling tail table), in p's inexact dtype;
  NaN or negative n and NaN or negative p give NaN, infinite n gives infinity.
- multinomial: a `lax.scan` over the categories drawing binomial(remaining n, p_i / the
  remaining mass) with one key per category.
JAX bounds its loops by the largest value of the output dtype; no draw comes near that bound,
so the loops here have no trip counter.
"""
import numpy as np

from . import lax
from .array import to_array
from .compiler.ir import dtypes
from .numpy._core import broadcast_shapes, check_arraylike, canonical_dtype, \
    promote_dtypes_inexact
from . import _random as R
from .sharding_types import out_sharding_keyword

__all__ = ["poisson", "binomial", "multinomial"]

_F32 = np.dtype(np.float32)


def _any(mask):
    return lax.reduce_or(mask, tuple(range(mask.ndim)))


def _full(like, value, dtype=None):
    return lax.full(like.shape, value, like.dtype if dtype is None else dtype)


# ---------------------------------------------------------------------------- poisson

# XLA's float32 lgamma: Lanczos' approximation (g = 7, eight terms), log(t) as
# log(7.5) + log1p(z / 7.5) with the division by the constant made a multiplication.
_LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
            771.3234287776530788486528258894, -176.61502916214059906584551354,
            12.507343278686904814458936853, -0.13857109526572011689554707,
            9.984369578019570859563e-6, 1.50563273514931155834e-7)
_LANCZOS_BASE = 0.99999999999980993227684700473478
_LOG_SQRT_2PI = (np.log(2) + np.log(np.pi)) / 2


def _lgamma_f32(x):
    """XLA's lgamma for float32 x >= 1/2, the only arguments the rejection sampler's test
    reads (its Euler reflection below 1/2 is left out)."""
    def f(v):
        return _full(x, v)
    z = lax.sub(x, f(1))
    total = f(_LANCZOS_BASE)
    for i, c in enumerate(_LANCZOS):
        total = lax.add(total, lax.div(f(c), lax.add(lax.add(z, f(i)), f(1))))
    t = lax.add(f(7.5), z)
    log_t = lax.add(f(np.log(7.5)), R._log1p(lax.mul(z, f(np.float32(1) / np.float32(7.5)))))
    log_y = R._fma(lax.sub(lax.add(z, f(0.5)), lax.div(t, log_t)), log_t, f(_LOG_SQRT_2PI))
    return lax.add(log_y, R._log(total))


def _poisson_knuth(key, lam, shape, dtype):
    """Count uniforms until their product drops below exp(-lam)."""
    neg_lam = lax.neg(lam)

    def body(state):
        k, rng, log_prod = state
        rng, sub = R._split2(rng)
        k = lax.select(lax.gt(log_prod, neg_lam), lax.add(k, _full(k, 1)), k)
        u = R._uniform(sub, shape, _F32, 0., 1.)
        return k, rng, lax.add(log_prod, R._log(u))

    state = (lax.full(shape, 0, dtype), key, lax.full(shape, 0, _F32))
    k, _, _ = lax.while_loop(lambda s: _any(lax.gt(s[2], neg_lam)), body, state)
    return lax.sub(k, _full(k, 1))


def _poisson_rejection(key, lam, shape):
    """Hormann's transformed rejection (PTRS)."""
    def f(v):
        return _full(lam, v)
    log_lam = R._log(lam)
    b = R._fma(lax.sqrt(lam), f(2.53), f(0.931))
    a = R._fma(b, f(0.02483), f(-0.059))
    inv_alpha = lax.add(f(1.1239), lax.div(f(1.1328), lax.sub(b, f(3.4))))
    v_r = lax.sub(f(0.9277), lax.div(f(3.6224), lax.sub(b, f(2))))

    def body(state):
        k_out, accepted, rng = state
        rng, k0, k1 = R._split2(rng, 3)
        u = lax.sub(R._uniform(k0, shape, _F32, 0., 1.), f(0.5))
        v = R._uniform(k1, shape, _F32, 0., 1.)
        us = lax.sub(f(0.5), lax.abs(u))
        k = lax.floor(lax.add(R._fma(lax.add(lax.div(lax.mul(f(2), a), us), b), u, lam),
                              f(0.43)))
        s = R._log(lax.div(lax.mul(v, inv_alpha), lax.add(lax.div(a, lax.mul(us, us)), b)))
        t = lax.sub(R._fma(k, log_lam, lax.neg(lam)), _lgamma_f32(lax.add(k, f(1))))
        accept1 = lax.bitwise_and(lax.ge(us, f(0.07)), lax.le(v, v_r))
        reject = lax.bitwise_or(lax.lt(k, f(0)),
                                lax.bitwise_and(lax.lt(us, f(0.013)), lax.gt(v, us)))
        accept = lax.bitwise_or(accept1, lax.bitwise_and(lax.bitwise_not(reject), lax.le(s, t)))
        return lax.select(accept, k, k_out), lax.bitwise_or(accepted, accept), rng

    state = (f(-1), lax.full(shape, False, np.bool_), key)
    k, _, _ = lax.while_loop(lambda s: _any(lax.bitwise_not(s[1])), body, state)
    return k


def _broadcast_param(name, x, shape):
    try:
        return R._bcast_to(x, shape)
    except TypeError:
        raise ValueError(f"{name}: incompatible shapes for broadcasting: parameter shape "
                         f"{tuple(np.shape(x))} and requested shape {tuple(shape)}") from None


@out_sharding_keyword
def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) counts, with the given shape and integer dtype."""
    base, _ = R._check_key("poisson", key)
    dtype = dtypes.default_int() if dtype is None else canonical_dtype(dtype, "poisson")
    if dtype.kind not in "iu":
        raise ValueError(f"Invalid integer data type '{dtype.kind}'.")
    shape = np.shape(lam) if shape is None else R._shape(shape)
    lam = lax.convert_element_type(_broadcast_param("poisson", to_array(lam, "poisson"), shape),
                                   _F32)
    use_knuth = lax.bitwise_or(lax.ne(lam, lam), lax.lt(lam, _full(lam, 10)))
    lam_knuth = lax.select(use_knuth, lam, _full(lam, 0))
    lam_rejection = lax.select(use_knuth, _full(lam, 1e5), lam)
    result = lax.select(use_knuth, _poisson_knuth(base, lam_knuth, shape, dtype),
                        lax.convert_element_type(_poisson_rejection(base, lam_rejection, shape),
                                                 dtype))
    return lax.select(lax.eq(lam, _full(lam, 0)), _full(result, 0), result)


# --------------------------------------------------------------------------- binomial

_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_tail(k):
    """log(k!) minus Stirling's approximation: a table for k <= 9, a series beyond."""
    def f(v):
        return _full(k, v)
    table = to_array(np.array(_STIRLING_TAIL, k.dtype))
    kc = lax.clamp(f(0), k, f(9))
    kp1 = lax.add(kc, f(1))
    kp1sq = lax.mul(kp1, kp1)
    inner = lax.sub(f(1.0 / 360), lax.div(f(1.0 / 1260), kp1sq))
    approx = lax.div(lax.sub(f(1.0 / 12), lax.div(inner, kp1sq)), kp1)
    index = lax.convert_element_type(lax.floor(kc), np.int32)
    looked_up = lax.reshape(table[lax.reshape(index, (index.size,))], k.shape)
    return lax.select(lax.le(k, f(9)), looked_up, approx)


def _binomial_inversion(key, count, prob, shape):
    """Count geometric(prob) waiting times until their sum exceeds count."""
    log1m = R._log1p(lax.neg(prob))

    def body(state):
        num, total, rng = state
        sub, rng = R._split2(rng)
        num = lax.select(lax.le(total, count), lax.add(num, _full(num, 1)), num)
        u = R._uniform(sub, shape, prob.dtype, 0., 1.)
        return num, lax.add(total, lax.ceil(lax.div(R._log(u), log1m))), rng

    state = (_full(prob, 0), _full(prob, 0), key)
    num, _, _ = lax.while_loop(lambda s: _any(lax.le(s[1], count)), body, state)
    return lax.sub(num, _full(num, 1))


def _btrs(key, count, prob, shape):
    """Hormann's BTRS transformed rejection."""
    def f(v):
        return _full(prob, v)
    q = lax.sub(f(1), prob)
    stddev = lax.sqrt(lax.mul(lax.mul(count, prob), q))
    b = R._fma(stddev, f(2.53), f(1.15))
    a = R._fma(prob, f(0.01), R._fma(b, f(0.0248), f(-0.0873)))
    c = R._fma(count, prob, f(0.5))
    v_r = lax.sub(f(0.92), lax.div(f(4.2), b))
    r = lax.div(prob, q)
    alpha = lax.mul(lax.add(f(2.83), lax.div(f(5.1), b)), stddev)
    m = lax.floor(lax.mul(lax.add(count, f(1)), prob))
    n_m1 = lax.add(lax.sub(count, m), f(1))
    head = lax.mul(lax.add(m, f(0.5)), R._log(lax.div(lax.add(m, f(1)), lax.mul(r, n_m1))))

    def body(state):
        k_out, accepted, rng = state
        rng, k0, k1 = R._split2(rng, 3)
        u = lax.sub(R._uniform(k0, shape, prob.dtype, 0., 1.), f(0.5))
        v = R._uniform(k1, shape, prob.dtype, 0., 1.)
        us = lax.sub(f(0.5), lax.abs(u))
        accept1 = lax.bitwise_and(lax.ge(us, f(0.07)), lax.le(v, v_r))
        k = lax.floor(R._fma(lax.add(lax.div(lax.mul(f(2), a), us), b), u, c))
        reject = lax.bitwise_or(lax.lt(k, f(0)), lax.gt(k, count))
        v = R._log(lax.div(lax.mul(v, alpha), lax.add(lax.div(a, lax.mul(us, us)), b)))
        n_k1 = lax.add(lax.sub(count, k), f(1))
        ub = R._fma(lax.add(count, f(1)), R._log(lax.div(n_m1, n_k1)), head)
        ub = R._fma(lax.add(k, f(0.5)), R._log(lax.div(lax.mul(r, n_k1), lax.add(k, f(1)))), ub)
        ub = lax.add(ub, _stirling_tail(m))
        ub = lax.add(ub, _stirling_tail(lax.sub(count, m)))
        ub = lax.sub(ub, _stirling_tail(k))
        ub = lax.sub(ub, _stirling_tail(lax.sub(count, k)))
        accept = lax.bitwise_or(accept1, lax.bitwise_and(lax.bitwise_not(reject), lax.le(v, ub)))
        return lax.select(accept, k, k_out), lax.bitwise_or(accepted, accept), rng

    state = (f(-1), lax.full(shape, False, np.bool_), key)
    k, _, _ = lax.while_loop(lambda s: _any(lax.bitwise_not(s[1])), body, state)
    return k


def _binomial(key, count, prob, shape, dtype):
    if shape is None:
        shape = broadcast_shapes(np.shape(count), np.shape(prob))
    else:
        R._check_shape("binomial", shape, np.shape(count), np.shape(prob))
    prob, = promote_dtypes_inexact(prob)
    count = R._bcast_to(lax.convert_element_type(count, prob.dtype), shape)
    prob = R._bcast_to(prob, shape)

    def f(v):
        return _full(prob, v)
    p_lt_half = lax.lt(prob, f(0.5))
    q = lax.select(p_lt_half, prob, lax.sub(f(1), prob))
    count_bad = lax.bitwise_or(lax.ne(count, count), lax.lt(count, f(0)))
    count_inf = lax.eq(lax.abs(count), f(np.inf))
    q_nan = lax.ne(q, q)
    q_neg = lax.lt(q, f(0))
    q = lax.select(lax.bitwise_or(q_nan, q_neg), f(0.01), q)
    use_inversion = lax.bitwise_or(count_bad, lax.le(lax.mul(count, q), f(10)))
    count = lax.floor(count)
    count_inv = lax.select(use_inversion, count, f(0))
    count_btrs = lax.select(use_inversion, f(1e4), count)
    q_btrs = lax.select(use_inversion, f(0.5), q)
    samples = lax.select(use_inversion,
                         lax.convert_element_type(_binomial_inversion(key, count_inv, q, shape),
                                                  dtype),
                         lax.convert_element_type(_btrs(key, count_btrs, q_btrs, shape), dtype))
    invalid = lax.bitwise_or(lax.bitwise_or(q_neg, q_nan), count_bad)
    samples = lax.select(invalid, _full(samples, np.nan), samples)
    samples = lax.select(lax.bitwise_and(count_inf, lax.bitwise_not(invalid)),
                         _full(samples, np.inf), samples)
    keep = lax.bitwise_or(lax.bitwise_or(p_lt_half, count_bad), lax.bitwise_or(q_nan, count_inf))
    return lax.select(keep, samples,
                      lax.sub(lax.convert_element_type(count, dtype), samples))


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats, with the given shape and float dtype."""
    base, _ = R._check_key("binomial", key)
    check_arraylike("binomial", n, p)
    dtype = dtypes.default_float() if dtype is None else canonical_dtype(dtype, "binomial")
    if dtype.kind != "f":
        raise ValueError(f"dtype argument to `binomial` must be a float dtype, got {dtype}")
    shape = None if shape is None else R._shape(shape)
    return _binomial(base, to_array(n, "binomial"), to_array(p, "binomial"), shape, dtype)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Multinomial(n, p) counts as floats, outcomes along p's last axis."""
    base, raw = R._check_key("multinomial", key)
    check_arraylike("multinomial", n, p)
    n, p = promote_dtypes_inexact(n, p)
    dtype = dtypes.default_float() if dtype is None else canonical_dtype(dtype, "multinomial")
    shape = p.shape if shape is None else R._shape(shape)
    n = R._bcast_to(n, shape[:-1], "broadcast_to")
    p = lax.transpose(R._bcast_to(p, shape, "broadcast_to"),
                      (len(shape) - 1,) + tuple(range(len(shape) - 1)))
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = lax.div(p, lax.select(lax.eq(remaining, _full(remaining, 0)),
                                   _full(remaining, 1), remaining))

    def step(remainder, ratio_key):
        ratio, k = ratio_key
        ratio = lax.clamp(_full(ratio, 0), ratio, _full(ratio, 1))
        count = _binomial(k, remainder, ratio, None, remainder.dtype)
        return lax.sub(remainder, count), count

    keys = R._split(base, (shape[-1],))
    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    counts = lax.transpose(counts, tuple(range(1, len(shape))) + (0,))
    return lax.convert_element_type(counts, dtype)
