"""Winograd F(4x4, 3x3) convolutions in the LLVM backend (winograd.py): the forward form and
the kernel-gradient form against float64 NumPy convolutions (the reference backend), with
hypothesis over batch, sizes (1 and sizes not divisible by the tile), features, padding,
layouts and dtypes; which convolutions take it; gradients through it."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import kiln
from kiln import lax
from kiln.compiler.backends.llvm import winograd
from kiln.test_util import check_grads

# F(4x4, 3x3) in float32 errs by about 1e-5 of the largest result (docs/conv.md)
TOL = {np.float32: 6e-5, np.float64: 1e-12}
LAYOUTS = {"NHWC": ("NHWC", "HWIO", "NHWC"), "NCHW": ("NCHW", "OIHW", "NCHW")}
FEATURES = st.sampled_from([winograd.MIN_FEATURES, winograd.MIN_FEATURES + 1, 20])
PADDING = st.one_of(st.sampled_from(["SAME", "VALID"]),
                    st.tuples(*[st.tuples(st.integers(-1, 2), st.integers(-1, 2))] * 2))


def conv(padding, dn):
    return lambda x, w: lax.conv_general_dilated(x, w, (1, 1), padding, dimension_numbers=dn)


def _case(draw):
    n, h, w = draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    cin, cout = draw(FEATURES), draw(FEATURES)
    layout = draw(st.sampled_from(sorted(LAYOUTS)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    padding = draw(PADDING)
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    x = rng.standard_normal((n, h, w, cin)).astype(dtype)
    k = rng.standard_normal((3, 3, cin, cout)).astype(dtype)
    if layout == "NCHW":
        x, k = x.transpose(0, 3, 1, 2).copy(), k.transpose(3, 2, 0, 1).copy()
    return x, k, padding, LAYOUTS[layout], dtype


def _close(got, want, dtype):
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=TOL[dtype] * scale)


def _plan(fn, *args):
    """The Winograd plan of the only convolution `fn` runs (None: the patch tiles)."""
    eqn = next(e for e in kiln.jit(fn).lower(*args)._entry.ssa.eqns
               if e.prim.name == "conv_general_dilated")
    return winograd.plan(*[v.aval for v in eqn.invars], eqn.outvars[0].aval, **eqn.params)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_forward_matches_float64_numpy(x64, data):
    x, k, padding, dn, dtype = _case(data.draw)
    f = conv(padding, dn)
    want = np.asarray(kiln.jit(f, backend="reference")(x.astype(np.float64),
                                                       k.astype(np.float64)))
    if want.size:
        assert _plan(f, x, k) is not None
    _close(kiln.jit(f)(x, k), want, dtype)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_kernel_gradient_matches_float64_numpy(x64, data):
    x, k, padding, dn, dtype = _case(data.draw)
    f = conv(padding, dn)
    out = kiln.jit(f, backend="reference")(x, k)
    ct = np.random.default_rng(5).standard_normal(out.shape).astype(dtype)

    def grad(x, k, ct):
        return kiln.vjp(lambda k: f(x, k), k)[1](ct)[0]
    want = np.asarray(kiln.jit(grad, backend="reference")(
        x.astype(np.float64), k.astype(np.float64), ct.astype(np.float64)))
    _close(kiln.jit(grad)(x, k, ct), want, dtype)


def test_kernel_gradient_of_nhwc_takes_the_gradient_form(x64):
    x = np.ones((2, 6, 7, 16))
    ct = np.ones((2, 6, 7, 17))
    dn = lax.ConvDimensionNumbers((3, 0, 1, 2), (3, 0, 1, 2), (2, 3, 0, 1))
    wp = _plan(lambda x, c: lax.conv_general_dilated(x, c, (1, 1), ((1, 1), (1, 1)),
                                                     dimension_numbers=dn), x, ct)
    assert wp is not None and wp.gradient and wp.out_sp == (6, 7)


@pytest.mark.parametrize("change", [
    dict(window_strides=(2, 1)), dict(rhs_dilation=(1, 2)),
    dict(lhs_dilation=(2, 1), padding=((1, 1), (1, 1))),
    dict(feature_group_count=2), dict(kernel=(5, 3, 16, 16)), dict(kernel=(3, 3, 16, 8)),
    dict(x=(2, 8, 8, 8), kernel=(3, 3, 8, 16)), dict(x=(2, 8, 8, 8, 16), kernel=(3, 3, 3, 16, 16)),
])
def test_other_convolutions_keep_the_patch_tiles(change):
    change = dict(change)
    xs, ks = change.pop("x", (2, 8, 8, 16)), change.pop("kernel", (3, 3, 16, 16))
    letters = "HWD"[:len(xs) - 2]
    params = dict(window_strides=(1,) * len(letters), padding="SAME",
                  dimension_numbers=("N" + letters + "C", letters + "IO", "N" + letters + "C"))
    params.update(change)
    if change.get("feature_group_count"):
        ks = ks[:2] + (8, ks[3])
    x, k = np.ones(xs, np.float32), np.ones(ks, np.float32)
    assert _plan(lambda x, k: lax.conv_general_dilated(x, k, **params), x, k) is None


def test_gradients_through_winograd(x64):
    rng = np.random.default_rng(3)
    x, k = rng.standard_normal((1, 5, 6, 16)), rng.standard_normal((3, 3, 16, 16)) * 0.2
    f = conv("SAME", LAYOUTS["NHWC"])
    assert _plan(f, x, k) is not None
    check_grads(kiln.jit(f), (x, k), order=1, modes=("rev",))


@pytest.mark.parametrize("precision", [lax.Precision.HIGHEST, "highest", "float32",
                                       (lax.Precision.DEFAULT, lax.Precision.HIGHEST),
                                       "F32_F32_F32"])
def test_full_precision_keeps_the_direct_sum(precision):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 12, 12, 32)).astype(np.float32)
    k = rng.standard_normal((3, 3, 32, 32)).astype(np.float32)

    def f(x, k, precision=None):
        return lax.conv_general_dilated(x, k, (1, 1), "SAME", precision=precision,
                                        dimension_numbers=LAYOUTS["NHWC"])
    exact = lambda x, k: f(x, k, precision)   # noqa: E731
    assert _plan(f, x, k) is not None and _plan(exact, x, k) is None
    want = np.asarray(kiln.jit(f, backend="reference")(x.astype(np.float64),
                                                       k.astype(np.float64)))
    scale = np.abs(want).max()
    err = np.abs(np.asarray(kiln.jit(exact)(x, k)) - want).max() / scale
    assert err < 2e-6     # the direct sum's rounding (Winograd's is about 1e-5)
    # the precision reaches the gradients' convolutions too
    grad = kiln.jit(kiln.grad(lambda x, k: exact(x, k).sum(), argnums=(0, 1)))
    eqns = grad.lower(x, k)._entry.ssa.eqns
    convs = [e for e in eqns if e.prim.name == "conv_general_dilated"]
    assert convs and all(e.params["precision"] == "highest" for e in convs)


@pytest.mark.parametrize("precision", [None, lax.Precision.DEFAULT, "high", "bfloat16"])
def test_default_precision_takes_winograd(precision):
    x, k = np.ones((1, 8, 8, 16), np.float32), np.ones((3, 3, 16, 16), np.float32)
    f = lambda x, k: lax.conv_general_dilated(x, k, (1, 1), "SAME", precision=precision,  # noqa: E731
                                              dimension_numbers=LAYOUTS["NHWC"])
    assert _plan(f, x, k) is not None


def test_an_unknown_precision_is_jaxs_error():
    x, k = np.ones((1, 4, 4, 1), np.float32), np.ones((3, 3, 1, 1), np.float32)
    with pytest.raises(ValueError, match="Precision argument must be one of"):
        lax.conv_general_dilated(x, k, (1, 1), "SAME", precision="exact",
                                 dimension_numbers=LAYOUTS["NHWC"])
