"""Tests for `kiln.scipy.special` and `kiln.scipy.stats.norm`.

References: `scipy.special` / `scipy.stats.norm` in float64 on the same inputs, cast to the
result dtype. Tolerances: float32 rtol 1e-5 (2e-5 for kiln's own rational/series
approximations: ndtri, log_ndtr), float16 rtol 4e-3 / atol 2e-3. Special values and dtypes /
weak types were recorded from JAX 0.10.2's `jax.scipy`.
"""
import numpy as np
import pytest
import scipy.special as sps
import scipy.stats as sst
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kiln
import kiln.numpy as jnp
from kiln.scipy import special
from kiln.scipy.stats import norm

SETTINGS = settings(max_examples=25, deadline=None)
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float16: dict(rtol=4e-3, atol=2e-3)}
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan]


def check(actual, expected, dtype, **tol):
    actual = np.asarray(actual)
    assert actual.dtype == np.dtype(dtype), (actual.dtype, dtype)
    with np.errstate(all="ignore"):
        expected = np.asarray(expected, np.float64).astype(dtype).astype(np.float64)
    np.testing.assert_allclose(actual.astype(np.float64), expected, equal_nan=True,
                               **{**TOL[np.dtype(dtype).type], **tol})


def arrays(lo, hi, dtypes=(np.float32, np.float16), specials=SPECIALS, min_dims=0):
    def for_dtype(dt):
        width = 16 if dt == np.float16 else 32
        elements = st.one_of(st.floats(lo, hi, width=width),
                             st.sampled_from([dt(v) for v in specials]))
        return hnp.arrays(dt, hnp.array_shapes(min_dims=min_dims, max_dims=3, min_side=0,
                                               max_side=4), elements=elements)
    return st.sampled_from(dtypes).flatmap(for_dtype)


def _f64(x):
    return np.asarray(x, np.float64)


# name -> (kiln function, scipy reference, strategy for the argument, extra tolerance)
UNARY = {
    "erf": (special.erf, sps.erf, arrays(-6, 6), {}),
    "erfc": (special.erfc, sps.erfc, arrays(-6, 10), {}),
    "erfinv": (special.erfinv, sps.erfinv, arrays(-1, 1, specials=SPECIALS + [1.0, -1.0]), {}),
    "expit": (special.expit, sps.expit, arrays(-100, 100), {}),
    "logit": (special.logit, sps.logit, arrays(0, 1, specials=SPECIALS + [1.0, 0.5]), {}),
    "gammaln": (special.gammaln, sps.gammaln, arrays(0.0625, 30, specials=SPECIALS + [1.0]), {}),
    "digamma": (special.digamma, sps.psi, arrays(0.0625, 30, specials=[np.inf, np.nan]), {}),
    "gamma": (special.gamma, sps.gamma,
              arrays(-5.5, 5.5, specials=[-2.0, -0.0, 0.0, np.inf, -np.inf, np.nan]),
              {"rtol": 2e-5}),
    "entr": (special.entr, sps.entr, arrays(-3, 100), {}),
    "ndtr": (special.ndtr, sps.ndtr, arrays(-12, 12, dtypes=(np.float32,)), {"atol": 1e-7}),
    "ndtri": (special.ndtri, sps.ndtri,
              arrays(0, 1, dtypes=(np.float32,), specials=SPECIALS + [1.0, 1e-30, -0.5, 2.0]),
              {"rtol": 2e-5}),
    "log_ndtr": (special.log_ndtr, sps.log_ndtr, arrays(-60, 40, dtypes=(np.float32,)),
                 {"rtol": 2e-5}),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(data=st.data())
def test_unary_against_scipy(name, data):
    fn, ref, strategy, tol = UNARY[name]
    x = data.draw(strategy)
    with np.errstate(all="ignore"):
        want = ref(_f64(x))
    check(fn(x), want, x.dtype, **(tol if x.dtype == np.float32 else {}))


def test_recorded_jax_values():
    # Recorded from jax.scipy.special 0.10.2 (float32).
    x = np.array([-40., -20., -10.5, -10., -5., -1., 0., 1., 4.9, 5.1, 8., 10., 40., np.inf,
                  -np.inf, np.nan], np.float32)
    np.testing.assert_allclose(np.asarray(special.log_ndtr(x)), [
        -804.6084594726562, -203.9171600341797, -58.4041862487793, -53.231285095214844,
        -15.064998626708984, -1.8410215377807617, -0.6931471824645996, -0.17275381088256836,
        -4.768372718899627e-07, -1.6982673400889325e-07, -6.220971541824941e-16,
        -7.619852819271277e-24, -0.0, -0.0, -np.inf, np.nan], rtol=2e-6)
    np.testing.assert_allclose(np.asarray(special.ndtr(x)), [
        0.0, 0.0, 4.3190063686628443e-26, 7.619852819271277e-24, 2.8665158424701076e-07,
        0.15865527093410492, 0.5, 0.8413447141647339, 0.9999995231628418, 0.9999998211860657,
        1.0, 1.0, 1.0, 1.0, 0.0, np.nan], rtol=2e-6)
    p = np.array([0., 1e-30, 1e-10, 0.01, 0.1353, 0.2, 0.5, 0.8647, 0.9, 0.999999, 1.],
                 np.float32)
    np.testing.assert_allclose(np.asarray(special.ndtri(p)), [
        -np.inf, -11.46402359008789, -6.3613409996032715, -2.326347827911377,
        -1.1016818284988403, -0.8416212201118469, 0.0, 1.1016818284988403, 1.2815512418746948,
        4.750757694244385, np.inf], rtol=2e-6)
    np.testing.assert_allclose(
        np.asarray(special.gamma(np.array([-2., -1.5, -0.0, 0., 0.5, 3., 40., np.inf, -np.inf,
                                           np.nan], np.float32))),
        [np.nan, 2.363271474838257, -np.inf, np.inf, 1.7724535465240479, 2.0, np.inf, np.inf,
         np.nan, np.nan], rtol=1e-6)
    np.testing.assert_array_equal(
        np.asarray(special.logit(np.array([0., 0.5, 1., -1., 2.], np.float32))),
        [-np.inf, 0.0, np.inf, np.nan, np.nan])
    np.testing.assert_array_equal(
        np.asarray(special.ndtri(np.array([0., 1., 0.5, -0.1, 1.1, np.nan], np.float32))),
        [-np.inf, np.inf, 0., np.nan, np.nan, np.nan])
    entr = np.asarray(special.entr(np.array([0., -1., 1., np.inf, np.nan], np.float32)))
    np.testing.assert_array_equal(entr, [-0., -np.inf, -0., -np.inf, np.nan])
    np.testing.assert_array_equal(
        np.asarray(special.rel_entr(jnp.array([0., 1., 1., -1., 0.]),
                                    jnp.array([0., 2., 0., 1., -1.]))),
        np.array([0., -0.6931472, np.inf, np.inf, np.inf], np.float32))
    np.testing.assert_allclose(
        np.asarray(special.kl_div(jnp.array([0., 1., 1.]), jnp.array([0., 2., 0.]))),
        [0., 0.30685282, np.inf], rtol=1e-6)
    np.testing.assert_array_equal(
        np.asarray(special.gammasgn(jnp.array([-1.5, -2.5, -0.0, 0., -1., np.nan]))),
        [1., -1., -1., 1., np.nan, np.nan])
    np.testing.assert_allclose(np.asarray(special.loggamma(jnp.array([-1.5, 0., 2.5]))),
                               [np.nan, np.nan, 0.284683], rtol=1e-6)


def test_log_ndtr_series_order():
    x = np.array([-30., -12., 0., 7.], np.float32)
    np.testing.assert_allclose(np.asarray(special.log_ndtr(x, series_order=0)),
                               [-454.32013, -75.403847, -0.69314718, -1.2798126e-12], rtol=1e-6)
    for order in (1, 2, 5, 30):  # more terms keep the asymptotic series accurate here
        np.testing.assert_allclose(np.asarray(special.log_ndtr(x, series_order=order)),
                                   sps.log_ndtr(_f64(x)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(special.log_ndtr(x, series_order=30)),  # from JAX
                               [-4.5432123e+02, -7.5410675e+01, -6.9314718e-01, -1.2798126e-12],
                               rtol=1e-6)
    with pytest.raises(TypeError, match="series_order must be a Python integer."):
        special.log_ndtr(1.0, series_order=2.0)
    with pytest.raises(ValueError, match="series_order must be non-negative."):
        special.log_ndtr(1.0, series_order=-1)
    with pytest.raises(ValueError, match="series_order must be <= 30."):
        special.log_ndtr(1.0, series_order=31)


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
       dtype=st.sampled_from([np.float32, np.float16]), data=st.data())
def test_xlogy_xlog1py(shapes, dtype, data):
    elems = st.one_of(st.floats(-2, 50, width=16 if dtype == np.float16 else 32),
                      st.sampled_from([dtype(v) for v in SPECIALS + [-1.0]]))
    x = data.draw(hnp.arrays(dtype, shapes.input_shapes[0], elements=elems))
    y = data.draw(hnp.arrays(dtype, shapes.input_shapes[1], elements=elems))
    with np.errstate(all="ignore"):
        check(special.xlogy(x, y), sps.xlogy(_f64(x), _f64(y)), dtype)
        check(special.xlog1py(x, y), sps.xlog1py(_f64(x), _f64(y)), dtype)


def test_xlogy_special_values():
    x = jnp.array([0., 0., 1., 0.])
    np.testing.assert_array_equal(np.asarray(special.xlogy(x, jnp.array([0., np.nan, 0., -1.]))),
                                  [0., np.nan, -np.inf, 0.])
    np.testing.assert_array_equal(
        np.asarray(special.xlog1py(x, jnp.array([-1., np.nan, -1., -2.]))),
        [0., np.nan, -np.inf, 0.])


# Recorded from jax.scipy.special 0.10.2: result dtype ("w" = weak) for Python int 2,
# Python float 2.0, int32[4], float16[4], bool[2], weak float32 scalar.
_INPUTS = (2, 2.0, np.arange(4, dtype=np.int32), np.ones(4, np.float16),
           np.array([True, False]))
_SAME = "float32w float32w float32 float16 float32 float32w"
_NDTR = "TypeError float32 TypeError TypeError TypeError float32"
EXPECTED_DTYPES = {
    "erf": _SAME, "erfc": _SAME, "erfinv": _SAME, "expit": _SAME, "logit": _SAME,
    "gammaln": _SAME, "digamma": _SAME, "entr": _SAME,
    "log_ndtr": _NDTR, "ndtr": _NDTR, "ndtri": _NDTR,
    "gamma": "float32 float32 float32 float16 float32 float32",
    "logsumexp": "float32 float32 float32 float16 float32 float32",
}
NORM_DTYPES = {  # inputs as above without bool
    "pdf": "float32w float32w float32 float16 float32w",
    "logpdf": "float32w float32w float32 float16 float32w",
    **{name: "float32 float32 float32 TypeError float32"
       for name in ("cdf", "logcdf", "sf", "logsf")},
    "ppf": "TypeError float32 TypeError TypeError float32",
    "isf": "TypeError float32 TypeError TypeError float32",
}


def _describe(fn, x):
    try:
        out = fn(x)
    except TypeError:
        return "TypeError"
    return str(out.dtype) + ("w" if out.weak_type else "")


@pytest.mark.parametrize("name", sorted(EXPECTED_DTYPES))
def test_special_dtypes_match_jax(name):
    fn = getattr(special, name)
    got = " ".join(_describe(fn, x) for x in _INPUTS + (jnp.asarray(2.0),))
    assert got == EXPECTED_DTYPES[name]


@pytest.mark.parametrize("name", sorted(NORM_DTYPES))
def test_norm_dtypes_match_jax(name):
    fn = getattr(norm, name)
    inputs = (2, 0.2, np.arange(4, dtype=np.int32), np.full(4, 0.2, np.float16),
              jnp.asarray(0.2))
    got = " ".join(_describe(fn, x) for x in inputs)
    assert got == NORM_DTYPES[name]


def test_xlogy_dtypes_match_jax():
    assert _describe(lambda a: special.xlogy(a, 3), 2) == "float32w"
    assert _describe(lambda a: special.xlogy(a, np.float32(3)), 2.0) == "float32"
    assert _describe(lambda a: special.xlog1py(a, np.float16(1)), np.int32(1)) == "float16"


def test_special_errors():
    with pytest.raises(TypeError, match=r"x.dtype=float16 is not supported, see docstring"):
        special.ndtr(np.ones(2, np.float16))
    with pytest.raises(TypeError, match=r"x.dtype=int32 is not supported"):
        special.ndtri(np.arange(2, dtype=np.int32))
    with pytest.raises(TypeError, match=r"x.dtype=float16 is not supported\.$"):
        special.log_ndtr(np.ones(2, np.float16))
    with pytest.raises(TypeError, match="ndtri requires ndarray or scalar arguments"):
        special.ndtri([0.3])
    with pytest.raises(TypeError, match="logit requires ndarray or scalar arguments"):
        special.logit([0.5])
    with pytest.raises(ValueError, match="entr does not support complex-valued inputs."):
        special.entr(jnp.array([1j]))
    with pytest.raises(TypeError, match="erf does not accept dtype complex64"):
        special.erf(jnp.array([1j]))
    with pytest.raises(TypeError, match="lgamma does not accept dtype complex64"):
        special.gammaln(jnp.array([1j]))


def test_ndtr_accepts_lists_like_jax():
    np.testing.assert_allclose(np.asarray(special.ndtr([0.3])), [0.6179114], rtol=1e-6)


# ------------------------------------------------------------------------------- stats.norm

def test_norm_is_module_and_attribute():
    import kiln.scipy.stats.norm as norm_module
    assert kiln.scipy.stats.norm is norm_module is norm


NORM_REFS = {
    "pdf": sst.norm.pdf, "logpdf": sst.norm.logpdf, "cdf": sst.norm.cdf,
    "logcdf": sst.norm.logcdf, "sf": sst.norm.sf, "logsf": sst.norm.logsf,
}


@pytest.mark.parametrize("name", sorted(NORM_REFS))
@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3),
       data=st.data())
def test_norm_against_scipy(name, shapes, data):
    x_shape, loc_shape, scale_shape = shapes.input_shapes
    x = data.draw(hnp.arrays(np.float32, x_shape, elements=st.floats(-30, 30, width=32)))
    loc = data.draw(hnp.arrays(np.float32, loc_shape, elements=st.floats(-3, 3, width=32)))
    scale = data.draw(hnp.arrays(np.float32, scale_shape,
                                 elements=st.floats(0.125, 5, width=32)))
    want = NORM_REFS[name](_f64(x), _f64(loc), _f64(scale))
    got = getattr(norm, name)(x, loc, scale)
    assert got.shape == shapes.result_shape
    # log(ndtr(z)) loses absolute accuracy ~1e-7 where ndtr(z) ~ 1 (as JAX's does).
    check(got, want, np.float32, rtol=5e-5, atol=2e-7 if "log" in name else 1e-30)


@pytest.mark.parametrize("name", ["ppf", "isf"])
@SETTINGS
@given(q=hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4),
                    elements=st.one_of(st.floats(0, 1, width=32),
                                       st.sampled_from([0.0, 1.0, 1e-20]))),
       loc=st.floats(-3, 3), scale=st.floats(0.1, 5))
def test_norm_quantiles_against_scipy(name, q, loc, scale):
    want = getattr(sst.norm, name)(_f64(q), loc, scale)
    got = getattr(norm, name)(q, loc, scale)
    # ppf/isf are ill-conditioned near 0 and 1, and isf rounds 1 - q in float32 first.
    cond = np.abs(_f64(q) - 0.5) < 0.49 if name == "isf" else np.ones(q.shape, bool)
    np.testing.assert_allclose(np.asarray(got, np.float64)[cond], want[cond],
                               rtol=5e-5, atol=5e-6 * max(1.0, scale))


def test_norm_recorded_jax_values():
    np.testing.assert_allclose(np.asarray(norm.logpdf(jnp.array([0., 1.]), 1., 2.)),
                               [-1.7370857000350952, -1.6120857000350952], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(norm.isf(jnp.array([0.1, 0.9]), 1., 2.)),
                               [3.5631024837493896, -1.5631024837493896], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(norm.logsf(jnp.array([-10., 10.]), 1., 2.)),
                               [-1.8989581462847127e-08, -12.592418670654297], rtol=1e-5)
    with pytest.raises(TypeError):
        norm.isf([0.3])


def test_float64_under_x64_matches_jax(x64):
    x = np.array([-30., -12., -5, 0., 7., 9.])
    out = special.log_ndtr(x)
    assert out.dtype == np.float64
    np.testing.assert_allclose(np.asarray(out), [  # recorded from JAX 0.10.2 with x64
        -4.54321244e+02, -7.54106730e+01, -1.50649984e+01, -6.93147181e-01,
        -1.27986510e-12, -1.12858841e-19], rtol=1e-8)
    np.testing.assert_allclose(np.asarray(special.ndtri(np.array([1e-300, 0.3]))),
                               [-37.0470963, -0.52440051], rtol=1e-8)
    np.testing.assert_allclose(np.asarray(norm.cdf(x)), sst.norm.cdf(x), rtol=1e-13)
