"""Tests for `kiln.nn` (activations, softmax family, one_hot, standardize) and
`kiln.nn.initializers`.

Values are compared with NumPy/SciPy references computed in float64 from the same inputs;
tolerances: float32 rtol 2e-6..1e-5 (stated per function), float16 rtol 4e-3 / atol 2e-3.
Dtypes and weak types are JAX 0.10.2's, recorded from `jax.nn` (see EXPECTED_DTYPES).
"""
import warnings

import numpy as np
import pytest
import scipy.special as sps
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kiln
import kiln.numpy as jnp
from kiln import nn

SETTINGS = settings(max_examples=25, deadline=None)
SPECIALS = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e4, -1e4, 30.0, -30.0, 1e-30]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float16: dict(rtol=4e-3, atol=2e-3)}


def _elements(dtype):
    width = 16 if dtype == np.float16 else 32
    return st.one_of(st.floats(-60, 60, width=width),
                     st.sampled_from([np.dtype(dtype).type(v) for v in SPECIALS]))


def arrays(dtypes=(np.float32, np.float16), min_dims=0, max_dims=3, min_side=0):
    return st.sampled_from(dtypes).flatmap(
        lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=min_dims, max_dims=max_dims,
                                                   min_side=min_side, max_side=4),
                              elements=_elements(dt)))


def check(actual, expected, dtype, **tol):
    actual = np.asarray(actual)
    assert actual.dtype == np.dtype(dtype), (actual.dtype, dtype)
    with np.errstate(all="ignore"):
        expected = np.asarray(expected, np.float64).astype(dtype)
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                               equal_nan=True, **{**TOL[np.dtype(dtype).type], **tol})


def _f64(x):
    return np.asarray(x, np.float64)


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _relu6(x):
    return np.minimum(np.maximum(x, 0), 6)


_SELU = (1.6732632423543772848170429916717, 1.0507009873554804934193349852946)

# name -> (kiln function, float64 reference)
REFERENCES = {
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "relu6": (nn.relu6, _relu6),
    "sigmoid": (nn.sigmoid, sps.expit),
    "softplus": (nn.softplus, lambda x: np.logaddexp(x, 0)),
    "soft_sign": (nn.soft_sign, lambda x: x / (np.abs(x) + 1)),
    "silu": (nn.silu, lambda x: x * sps.expit(x)),
    "swish": (nn.swish, lambda x: x * sps.expit(x)),
    "gelu": (nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi)
                                                           * (x + 0.044715 * x ** 3)))),
    "gelu_exact": (lambda x: nn.gelu(x, approximate=False), lambda x: x * sps.ndtr(x)),
    "elu": (nn.elu, _elu),
    "selu": (nn.selu, lambda x: _SELU[1] * _elu(x, _SELU[0])),
    "celu": (lambda x: nn.celu(x, 0.5),
             lambda x: np.maximum(x, 0) + 0.5 * np.expm1(np.minimum(x, 0) / 0.5)),
    "leaky_relu": (nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    "hard_tanh": (nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    "hard_sigmoid": (nn.hard_sigmoid, lambda x: _relu6(x + 3) / 6),
    "hard_silu": (nn.hard_silu, lambda x: x * _relu6(x + 3) / 6),
    "log_sigmoid": (nn.log_sigmoid, lambda x: -np.logaddexp(0, -x)),
    "sparse_plus": (nn.sparse_plus,
                    lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4))),
    "squareplus": (nn.squareplus, lambda x: (x + np.sqrt(x * x + 4)) / 2),
    "mish": (nn.mish, lambda x: x * np.tanh(np.logaddexp(x, 0))),
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
@SETTINGS
@given(x=arrays())
def test_activation_values(name, x):
    fn, ref = REFERENCES[name]
    with np.errstate(all="ignore"):
        # squareplus cancels catastrophically for x << 0 (in JAX too): reference in x's dtype.
        expected = ref(x if name == "squareplus" else _f64(x))
    if name in ("gelu", "squareplus", "mish") and x.dtype == np.float16:
        # float16 intermediates (x**3, x*x) overflow near |x| ~ 40..250: compare where finite.
        finite = np.abs(_f64(x)) < 30
        x, expected = x[finite], expected[finite]
    check(fn(x), expected, x.dtype)


@pytest.mark.parametrize("name", ["relu", "softplus", "sigmoid", "elu", "log_sigmoid", "gelu"])
def test_special_values(name):
    fn, ref = REFERENCES[name]
    x = np.array(SPECIALS + [88.0, -88.0, 1e38, -1e38], np.float32)
    with np.errstate(all="ignore"):
        check(fn(x), ref(_f64(x)), np.float32)


# Recorded from jax.nn (JAX 0.10.2): result dtype ("w" = weak) for the inputs
#   Python int 2, Python float 2.0, int32[4], float16[4], bool[2], weak float32 scalar;
# "TypeError" where JAX raises.
INPUTS = (2, 2.0, np.arange(4, dtype=np.int32), np.ones(4, np.float16),
          np.array([True, False]), None)
EXPECTED_DTYPES = {
    "relu": "int32w float32w int32 float16 int32w float32w",
    "relu6": "float32w float32w float32w float16 float32w float32w",
    "sigmoid": "TypeError float32w TypeError float16 TypeError float32w",
    "softplus": "float32w float32w float32 float16 float32w float32w",
    "soft_sign": "float32w float32w float32 float16 float32w float32w",
    "silu": "TypeError float32w TypeError float16 TypeError float32w",
    "gelu": "float32 float32 float32 float16 float32 float32",
    "elu": "float32w float32w float32w float16 float32w float32w",
    "selu": "float32w float32w float32w float16 float32w float32w",
    "celu": "float32w float32w float32w float16 float32w float32w",
    "leaky_relu": "float32w float32w float32w float16 float32w float32w",
    "hard_tanh": "int32w float32w int32 float16 int32w float32w",
    "hard_sigmoid": "float32w float32w float32w float16 float32w float32w",
    "hard_silu": "float32w float32w float32w float16 float32w float32w",
    "log_sigmoid": "float32w float32w float32 float16 TypeError float32w",
    "sparse_plus": "float32w float32w float32w float16 float32w float32w",
    "squareplus": "float32w float32w float32 float16 float32 float32w",
    "mish": "float32w float32w float32 float16 float32w float32w",
    "identity": "int32w float32w int32 float16 bool float32w",
    "logsumexp": "float32 float32 float32 float16 float32 float32",
}


def _describe(fn, x):
    try:
        out = fn(x)
    except TypeError:
        return "TypeError"
    return str(out.dtype) + ("w" if out.weak_type else "")


@pytest.mark.parametrize("name", sorted(EXPECTED_DTYPES))
def test_dtypes_match_jax(name):
    fn = getattr(nn, name)
    inputs = INPUTS[:-1] + (jnp.asarray(2.0),)
    assert " ".join(_describe(fn, x) for x in inputs) == EXPECTED_DTYPES[name]


def test_activation_errors():
    with pytest.raises(TypeError, match="logistic does not accept dtype int32"):
        nn.sigmoid(np.arange(3, dtype=np.int32))
    with pytest.raises(TypeError, match="gelu requires ndarray or scalar arguments"):
        nn.gelu([1.0, 2.0])
    with pytest.raises(TypeError, match="elu requires ndarray or scalar arguments"):
        nn.elu([1.0, 2.0])
    with pytest.raises(ValueError, match="glu: the size of axis -1 must be divisible by 2"):
        nn.glu(jnp.ones(3))


def test_celu_alpha_zero_and_elu_alpha_array():
    # JAX: celu(x, alpha=0) is 0 for x >= 0 (well, 0 + 0 * expm1(0/0) = nan for x > 0)
    np.testing.assert_array_equal(np.asarray(nn.celu(jnp.array([-1., 1.]), alpha=0.)),
                                  np.array([0., np.nan], np.float32))
    out = nn.elu(np.array([-1., 1.], np.float16), alpha=np.float32(2.))
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), [2 * np.expm1(-1), 1], rtol=1e-3)


def test_hard_tanh_integers():
    out = nn.hard_tanh(np.array([-3, 1, 5], np.int32))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), [-1, 1, 1])


@SETTINGS
@given(x=arrays(min_dims=1, max_dims=3, min_side=1), data=st.data())
def test_glu(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    x = np.concatenate([x, x[::-1]], axis=axis) if x.shape[axis] % 2 else x
    a, b = np.split(_f64(x), 2, axis)
    # the sigmoid is rounded to x's dtype before the product (inf * underflowed 0 is nan).
    check(nn.glu(x, axis=axis), a * sps.expit(b).astype(x.dtype), x.dtype)


# ----------------------------------------------------------------------- softmax family

def _axis_for(data, ndim):
    if ndim == 0:
        return None
    return data.draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1),
                               st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim,
                                        unique=True).map(tuple)))


def _finite_arrays(**kw):
    return st.sampled_from((np.float32, np.float16)).flatmap(
        lambda dt: hnp.arrays(dt, hnp.array_shapes(max_side=4, **kw),
                              elements=st.floats(-20, 20, width=16 if dt == np.float16 else 32)))


@SETTINGS
@given(x=_finite_arrays(min_dims=0, max_dims=3), data=st.data())
def test_softmax_log_softmax(x, data):
    axis = _axis_for(data, x.ndim)
    if x.ndim == 0:
        axis = None
    check(nn.softmax(x, axis=axis), sps.softmax(_f64(x), axis=axis), x.dtype)
    check(nn.log_softmax(x, axis=axis), sps.log_softmax(_f64(x), axis=axis), x.dtype)
    check(kiln.scipy.special.softmax(x, axis=axis), sps.softmax(_f64(x), axis=axis), x.dtype)
    check(kiln.scipy.special.log_softmax(x, axis=axis), sps.log_softmax(_f64(x), axis=axis),
          x.dtype)


def test_softmax_is_shift_stable():
    x = np.array([1000., 1001., 1002.], np.float32)
    check(nn.softmax(x), sps.softmax(_f64(x)), np.float32)
    check(nn.log_softmax(x), sps.log_softmax(_f64(x)), np.float32)


@SETTINGS
@given(x=_finite_arrays(min_dims=1, max_dims=3, min_side=1), data=st.data())
def test_softmax_where(x, data):
    where = data.draw(hnp.arrays(np.bool_, x.shape))
    xm = np.where(where, _f64(x), -np.inf)
    with np.errstate(all="ignore"):
        e = np.exp(xm - np.max(xm, axis=-1, keepdims=True, initial=-np.inf))
        sm = np.where(where, e / e.sum(-1, keepdims=True), 0)
        lsm = np.where(where, xm - sps.logsumexp(xm, axis=-1, keepdims=True), -np.inf)
    rows_with_any = where.any(-1, keepdims=True)
    check(nn.softmax(x, where=where), np.where(rows_with_any, sm, 0), x.dtype)
    check(nn.log_softmax(x, where=where), np.where(rows_with_any, lsm, -np.inf), x.dtype)


def test_softmax_recorded_jax_edge_cases():
    # Values recorded from jax.nn 0.10.2.
    np.testing.assert_allclose(
        np.asarray(nn.softmax(jnp.array([1., 2., 3.]), where=jnp.array([True, False, True]))),
        [0.11920291, 0., 0.880797], rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(nn.log_softmax(jnp.array([1., 2., 3.]),
                                  where=jnp.array([True, False, True]))),
        [-2.126928, -np.inf, -0.12692805], rtol=1e-6)
    assert np.asarray(nn.softmax(jnp.array([1., 2., 3.]),
                                 where=jnp.array([False] * 3))).tolist() == [0., 0., 0.]
    assert np.isnan(np.asarray(nn.softmax(jnp.array([np.inf, 2., 3.])))).all()
    assert np.isnan(np.asarray(nn.softmax(jnp.array([-np.inf, -np.inf])))).all()
    assert nn.softmax(jnp.ones((2, 0))).shape == (2, 0)
    assert nn.softmax(np.arange(4, dtype=np.int32)).dtype == np.float32
    with pytest.raises(ValueError, match="out of bounds"):
        nn.softmax(2.0)
    with pytest.raises(TypeError):
        nn.softmax(np.array([True, False]))
    with pytest.raises(TypeError, match="positional"):
        kiln.scipy.special.softmax(jnp.ones(2), 0)


# ---------------------------------------------------------------------------- logsumexp

@SETTINGS
@given(x=_finite_arrays(min_dims=0, max_dims=3), data=st.data(),
       keepdims=st.booleans())
def test_logsumexp(x, data, keepdims):
    axis = _axis_for(data, x.ndim)
    want = sps.logsumexp(_f64(x), axis=axis, keepdims=keepdims)
    got = nn.logsumexp(x, axis=axis, keepdims=keepdims)
    assert got.shape == np.sum(x, axis=axis, keepdims=keepdims).shape
    want = np.reshape(want, got.shape)
    check(got, want, x.dtype)
    assert nn.logsumexp is kiln.scipy.special.logsumexp


@SETTINGS
@given(x=_finite_arrays(min_dims=1, max_dims=2, min_side=1), data=st.data())
def test_logsumexp_b_and_sign(x, data):
    b = data.draw(hnp.arrays(x.dtype, x.shape[-1:], elements=st.sampled_from([-2., 0., 0.5, 3.])))
    with np.errstate(all="ignore"):
        want, want_sign = sps.logsumexp(_f64(x), axis=-1, b=_f64(b), return_sign=True)
    got, sign = nn.logsumexp(x, axis=-1, b=b, return_sign=True)
    check(sign, want_sign, x.dtype)
    # where the sum cancels to ~0 the log is ill-conditioned: compare where it is not.
    ok = np.abs(want) < 50
    np.testing.assert_allclose(np.asarray(got, np.float64)[ok], want[ok],
                               rtol=1e-2 if x.dtype == np.float16 else 1e-4, atol=1e-2)
    plain = np.asarray(nn.logsumexp(x, axis=-1, b=b))
    assert np.isnan(plain[np.asarray(sign) < 0]).all()


def test_logsumexp_special_values():
    # Values recorded from jax.scipy.special.logsumexp 0.10.2.
    lse = nn.logsumexp
    assert float(lse(jnp.array([-np.inf, -np.inf]))) == -np.inf
    assert float(lse(jnp.array([np.inf, 1.]))) == np.inf
    assert float(lse(jnp.array([np.inf, -np.inf]))) == np.inf
    assert np.isnan(float(lse(jnp.array([np.nan, 1.]))))
    assert float(lse(jnp.zeros((0,)))) == -np.inf
    out, sign = lse(jnp.zeros((0,)), return_sign=True)
    assert (float(out), float(sign)) == (-np.inf, 0.0)
    assert np.isnan(float(lse(jnp.array([1., 2.]), b=jnp.array([1., -2.]))))
    out, sign = lse(jnp.array([1., 2.]), b=jnp.array([1., -2.]), return_sign=True)
    np.testing.assert_allclose([float(out), float(sign)], [2.48988, -1.], rtol=1e-5)
    np.testing.assert_allclose(
        float(lse(jnp.array([1., 2., 3.]), where=jnp.array([True, False, True]))), 3.126928,
        rtol=1e-6)
    assert float(lse(jnp.array([1., 2., 3.]), where=jnp.array([False] * 3))) == -np.inf
    assert float(lse(jnp.array([1., 2., 3.]), b=jnp.zeros(3))) == -np.inf
    np.testing.assert_allclose(float(lse(jnp.array([1, 2]), b=2)), 3.0064087, rtol=1e-6)
    assert lse(jnp.ones((2, 3)), axis=1, keepdims=True).shape == (2, 1)
    with pytest.raises(TypeError, match="logsumexp requires ndarray or scalar arguments"):
        lse([1., 2.])


def test_logmeanexp():
    x = jnp.arange(6.).reshape(2, 3)
    np.testing.assert_allclose(np.asarray(nn.logmeanexp(x, axis=1)), [1.3089936, 4.308994],
                               rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(nn.logmeanexp(x, axis=1, where=jnp.array([True, False, True]))),
        [1.4337809, 4.4337807], rtol=1e-6)
    out = nn.logmeanexp(2.0)
    assert float(out) == 2.0 and out.dtype == np.float32 and not out.weak_type


# ---------------------------------------------------------------------------- standardize

@SETTINGS
@given(x=_finite_arrays(min_dims=1, max_dims=3, min_side=1), data=st.data())
def test_standardize(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    xf = _f64(x)
    mean = xf.mean(axis, keepdims=True)
    msq = (xf * xf).mean(axis, keepdims=True)
    var = np.maximum(msq - mean * mean, 0)
    # "fast" computes E[x^2] - E[x]^2 in x's dtype (so does JAX): compare only where that
    # cancellation (a few eps * E[x^2]) costs var + epsilon under twice the tolerance, which
    # the square root halves.
    tol = dict(rtol=2e-2, atol=2e-2) if x.dtype == np.float16 else dict(rtol=1e-3, atol=1e-3)
    bound = 4 * np.finfo(x.dtype).eps * msq / (2 * tol["rtol"])
    ok = np.broadcast_to(var + 1e-5 >= bound, x.shape)
    want = (xf - mean) / np.sqrt(var + 1e-5)
    check(np.asarray(nn.standardize(x, axis=axis))[ok], want[ok], x.dtype, **tol)
    check(np.asarray(nn.standardize(x, axis=axis, algorithm="stable"))[ok], want[ok],
          x.dtype, **tol)


def test_standardize_fast_cancels_like_jax():
    x = np.array([-4.125, -4.], np.float16)  # recorded from jax.nn.standardize
    np.testing.assert_array_equal(np.asarray(nn.standardize(x)), [-19.75, 19.75])
    np.testing.assert_allclose(np.asarray(nn.standardize(x, algorithm="stable"), np.float64),
                               [-0.9985, 0.9985], rtol=1e-3)


def test_standardize_options_and_errors():
    x = jnp.array([1., 2., 3., 4.])
    np.testing.assert_allclose(np.asarray(nn.standardize(x, mean=1., variance=4.)),
                               [0., 0.49999937, 0.99999875, 1.4999981], rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(nn.standardize(x, where=jnp.array([True, True, False, True]))),
        [-1.0690414, -0.26726028, 0.53452075, 1.3363018], rtol=1e-5)
    assert nn.standardize(np.arange(4, dtype=np.int32)).dtype == np.float32
    assert nn.standardize(jnp.ones(3, jnp.float16)).dtype == np.float16
    with pytest.raises(ValueError, match="Unknown algorithm 'x'. Expected 'fast' or 'stable'."):
        nn.standardize(x, algorithm="x")
    with pytest.raises(TypeError, match="standardize requires ndarray or scalar arguments"):
        nn.standardize([1., 2.])
    with pytest.raises(TypeError, match="standardize requires ndarray, scalar, or None"):
        nn.standardize(x, mean=[1., 2.])


# -------------------------------------------------------------------------------- one_hot

@SETTINGS
@given(x=st.sampled_from([np.int32, np.int8, np.uint8]).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                          elements=st.integers(0 if dt == np.uint8 else -2, 6))),
       num_classes=st.integers(0, 5), data=st.data(),
       dtype=st.sampled_from([None, np.float32, np.int8, np.bool_, np.float16]))
def test_one_hot(x, num_classes, data, dtype):
    axis = data.draw(st.integers(-x.ndim - 1, x.ndim))
    want = np.moveaxis(x[..., None] == np.arange(num_classes, dtype=x.dtype), -1, axis)
    out = nn.one_hot(x, num_classes, dtype=dtype, axis=axis)
    assert out.dtype == np.dtype(np.float32 if dtype is None else dtype)
    assert not out.weak_type
    np.testing.assert_array_equal(np.asarray(out), want.astype(out.dtype))


def test_one_hot_cases_and_errors():
    np.testing.assert_array_equal(np.asarray(nn.one_hot(1, 3)), [0., 1., 0.])
    np.testing.assert_array_equal(np.asarray(nn.one_hot([0, 1, 5, -1], 3)),
                                  [[1, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 0]])
    assert nn.one_hot(jnp.array([0, 1]), np.int64(3)).shape == (2, 3)
    assert nn.one_hot(jnp.array([0, 1]), jnp.array(3)).shape == (2, 3)
    assert nn.one_hot(jnp.array([0, 1]), 0).shape == (2, 0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = nn.one_hot(jnp.array([0., 1.7]), 3)
    assert [str(m.message) for m in w] == [
        "jax.nn.one_hot input should be integer-typed; got dtype=float32"]
    np.testing.assert_array_equal(np.asarray(out), [[1, 0, 0], [0, 0, 0]])
    for bad in (2.5, "3", None):
        with pytest.raises(TypeError, match="one_hot: num_classes must be a concrete"):
            nn.one_hot(jnp.array([0, 1]), bad)
    with pytest.raises(TypeError, match="non-negative"):
        nn.one_hot(jnp.array([0, 1]), -1)
    with pytest.raises(TypeError, match="iota does not accept dtype bool"):
        nn.one_hot(jnp.array([True, False]), 3)
    with pytest.raises(ValueError, match="axis 3 is out of bounds for array of dimension 3"):
        nn.one_hot(jnp.zeros((2, 2), jnp.int32), 3, axis=3)
    with pytest.raises(TypeError, match="positional"):
        nn.one_hot(jnp.array([0, 1]), 3, jnp.int8)
    with pytest.raises(TypeError, match="named mapped axes"):
        nn.one_hot(jnp.array([0, 1]), 3, axis="batch")


# ---------------------------------------------------------------------------- initializers

def _random():
    return pytest.importorskip("kiln.random")


INIT_STATS = {  # constructor -> (expected variance for shape (64, 128) [fan_in 64, fan_out 128])
    "glorot_uniform": 2 / (64 + 128), "glorot_normal": 2 / (64 + 128),
    "lecun_uniform": 1 / 64, "lecun_normal": 1 / 64,
    "he_uniform": 2 / 64, "he_normal": 2 / 64,
}


@pytest.mark.parametrize("name", sorted(INIT_STATS))
def test_variance_scaling_statistics(name):
    random = _random()
    init = getattr(nn.initializers, name)()
    w = np.asarray(init(random.key(0), (64, 128)))
    assert w.shape == (64, 128) and w.dtype == np.float32
    assert abs(w.mean()) < 0.01
    np.testing.assert_allclose(w.var(), INIT_STATS[name], rtol=0.1)
    bound = np.sqrt(3 * INIT_STATS[name]) if "uniform" in name else \
        2 * np.sqrt(INIT_STATS[name]) / .87962566103423978
    assert np.abs(w).max() <= bound * (1 + 1e-6)


def test_initializer_aliases_and_simple_initializers():
    ini = nn.initializers
    assert ini.xavier_uniform is ini.glorot_uniform and ini.kaiming_normal is ini.he_normal
    z = ini.zeros(None, (2, 3))
    assert z.dtype == np.float32 and np.asarray(z).tolist() == [[0.] * 3] * 2
    assert ini.ones(None, (2,), jnp.float16).dtype == np.float16
    c = ini.constant(-0.5, jnp.int32)(None, (3,))
    assert c.dtype == np.int32 and np.asarray(c).tolist() == [0, 0, 0]
    c = ini.constant(2.5)(None, (2, 1))
    assert np.asarray(c).tolist() == [[2.5], [2.5]]
    with pytest.raises(ValueError, match="Can't compute input and output sizes"):
        ini.glorot_uniform()(None, (5,))
    with pytest.raises(ValueError, match="invalid mode for variance scaling initializer: x"):
        ini.variance_scaling(1.0, "x", "normal")(None, (2, 2))
    with pytest.raises(ValueError, match="at least a 2D shape"):
        ini.orthogonal()(None, (3,))
    assert ini.orthogonal()(None, (0, 3)).shape == (0, 3)


@pytest.mark.parametrize("shape,column_axis,scale", [((3, 3), -1, 1.0), ((2, 5), -1, 2.0),
                                                     ((6, 2), 0, 1.0), ((2, 3, 4), 1, 0.5)])
def test_orthogonal_initializer_matches_jax(shape, column_axis, scale):
    import jax
    got = nn.initializers.orthogonal(scale, column_axis)(kiln.random.PRNGKey(3), shape)
    want = jax.nn.initializers.orthogonal(scale, column_axis)(jax.random.PRNGKey(3), shape)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    m = np.moveaxis(np.asarray(got), column_axis, -1).reshape(-1, shape[column_axis]) / scale
    small = min(m.shape)
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-5)


def test_compute_fans():
    from kiln.nn._initializers import _compute_fans
    assert _compute_fans((3, 4)) == (3, 4)
    assert _compute_fans((5, 5, 3, 8)) == (75, 200)
    assert _compute_fans((2, 3, 4), in_axis=(0, 1), out_axis=2) == (6, 4)
    assert _compute_fans((7, 3, 4), batch_axis=0) == (3, 4)


@pytest.mark.parametrize("name,args", [("uniform", (0.5,)), ("normal", (2.0,)),
                                       ("truncated_normal", (1.0,))])
def test_simple_random_initializers(name, args):
    random = _random()
    w = np.asarray(getattr(nn.initializers, name)(*args)(random.key(1), (4000,)))
    assert w.dtype == np.float32
    if name == "uniform":
        assert 0 <= w.min() and w.max() < 0.5
    elif name == "normal":
        np.testing.assert_allclose(w.std(), 2.0, rtol=0.1)
    else:
        assert np.abs(w).max() <= 2.0 and abs(w.std() - .8796) < 0.05


# Recorded from jax.nn.initializers 0.10.2 (same threefry bits, so the same values).
JAX_INIT_VALUES = {
    ("glorot_uniform", 0, (2, 3)): [[0.980789303779602, 1.048516035079956, -0.3674309551715851],
                                    [-0.0686439648270607, 0.15311850607395172,
                                     -0.732846200466156]],
    ("glorot_normal", 0, (2, 3)): [[1.046842336654663, 1.2329133749008179, -0.29671576619148254],
                                   [-0.05394943431019783, 0.12079361826181412,
                                    -0.65617436170578]],
    ("lecun_normal", 0, (2, 3)): [[1.170405387878418, 1.3784390687942505, -0.33173829317092896],
                                  [-0.060317303985357285, 0.13505136966705322,
                                   -0.7336252331733704]],
    ("he_uniform", 0, (2, 3)): [[1.5507639646530151, 1.6578493118286133, -0.5809593200683594],
                                [-0.10853563249111176, 0.24210159480571747,
                                 -1.158731460571289]],
}
JAX_SIMPLE_VALUES = {
    "uniform": (0.5, [0.2193162441253662, 0.2668764591217041, 0.22295916080474854,
                      0.21919816732406616]),
    "normal": (2.0, [-0.30887436866760254, 0.16941455006599426, -0.271960973739624,
                     -0.31007251143455505]),
    "truncated_normal": (1.0, [-0.1473579853773117, 0.08084439486265182,
                               -0.12975773215293884, -0.14792919158935547]),
}


@pytest.mark.parametrize("key", sorted(JAX_INIT_VALUES))
def test_initializer_values_match_jax(key):
    random = _random()
    name, seed, shape = key
    out = getattr(nn.initializers, name)()(random.key(seed), shape)
    np.testing.assert_allclose(np.asarray(out), JAX_INIT_VALUES[key], rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(JAX_SIMPLE_VALUES))
def test_simple_initializer_values_match_jax(name):
    random = _random()
    arg, want = JAX_SIMPLE_VALUES[name]
    out = getattr(nn.initializers, name)(arg)(random.key(1), (4,))
    np.testing.assert_allclose(np.asarray(out), want, rtol=2e-6, atol=1e-7)


def test_he_normal_float16_matches_jax():
    random = _random()
    out = nn.initializers.he_normal(dtype=jnp.float16)(random.key(0), (2, 3))
    assert out.dtype == np.float16
    np.testing.assert_allclose(np.asarray(out, np.float64),
                               [[-0.53466796875, -0.85546875, -1.6376953125],
                                [0.435791015625, -0.7861328125, -0.2435302734375]], rtol=2e-3)


def test_complex_variance_scaling_matches_jax():
    random = _random()
    out = nn.initializers.glorot_uniform(dtype=np.complex64)(random.key(0), (2, 2))
    assert out.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(out), [  # recorded from jax.nn.initializers
        [0.91681307554245 + 0.04204554110765457j, 0.42338424921035767 + 0.05589618906378746j],
        [-0.4156009554862976 - 0.23335367441177368j, -0.2245536893606186 + 0.26514387130737305j]],
        rtol=2e-6)
    out = nn.initializers.glorot_normal(dtype=np.complex64)(random.key(0), (2, 2))
    np.testing.assert_allclose(np.asarray(out), [
        [0.9814679622650146 + 0.04501064866781235j, 0.32668498158454895 + 0.04312971979379654j],
        [-0.32495641708374023 - 0.18245811760425568j,
         -0.17029410600662231 + 0.20107640326023102j]], rtol=2e-6)
