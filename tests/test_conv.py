"""conv_general_dilated: the primitive's NumPy definition (eager) and the LLVM lowering (jit)
against a direct-loop reference, with hypothesis over strides, dilations, padding forms,
feature and batch groups, layouts and 1-D/2-D/3-D, and long sums (the transposed plan, the
split sums); derivatives to second order; vmap."""
import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st, HealthCheck

import kiln
import kiln.numpy as knp
from kiln import lax
from kiln.compiler.backends.llvm import lower_conv
from kiln.compiler.errors import BackendUnsupportedError
from kiln.test_util import check_grads

SPATIAL = "HWD"


def reference(x, w, strides, padding, lhs_dil, rhs_dil, dn, groups, batch_groups):
    """Direct loops over output and window positions, canonical layouts (NC..., OI...)."""
    lhs_spec, rhs_spec, out_spec = dn
    x, w = np.transpose(x, lhs_spec).astype(np.float64), np.transpose(w, rhs_spec).astype(np.float64)
    n, c, *ins = x.shape
    o, i, *win = w.shape
    outs = []
    for size, k, s, (lo, hi), ld, rd in zip(ins, win, strides, padding, lhs_dil, rhs_dil):
        span = (size - 1) * ld + 1 if size else 0
        wk = (k - 1) * rd + 1 if k else 0
        outs.append(max(0, (span + lo + hi - wk) // s + 1) if span + lo + hi >= wk and k else 0)
    nb, og = n // batch_groups, o // (groups * batch_groups)
    out = np.zeros([nb, o] + outs)
    for pos in itertools.product(*map(range, outs)):
        for kpos in itertools.product(*map(range, win)):
            src = []
            for p, k, s, (lo, _), ld, rd, size in zip(pos, kpos, strides, padding, lhs_dil,
                                                       rhs_dil, ins):
                q = p * s + k * rd - lo
                src.append(q // ld if q >= 0 and q % ld == 0 and q // ld < size else None)
            if None in src:
                continue
            patch = x[(slice(None), slice(None)) + tuple(src)]     # n, c
            wk = w[(slice(None), slice(None)) + kpos]              # o, i
            for g in range(groups * batch_groups):
                feats = slice(g * og, (g + 1) * og)
                if batch_groups > 1:
                    lhs = patch[g * nb:(g + 1) * nb]
                else:
                    lhs = patch[:, g * i:(g + 1) * i]
                out[(slice(None), feats) + pos] += lhs @ wk[feats].T
    return np.transpose(out, np.argsort(out_spec))


@st.composite
def convs(draw, dtypes=(np.float32, np.float64)):
    nd = draw(st.integers(1, 3))
    sp = SPATIAL[:nd]
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    batch_groups = 1 if groups > 1 else draw(st.sampled_from([1, 1, 2]))
    n = batch_groups * draw(st.integers(0 if batch_groups == 1 else 1, 2))
    i = draw(st.integers(1, 3))
    og = draw(st.integers(1, 3))
    o = og * groups * batch_groups
    ins = [draw(st.integers(1, 6 if nd < 3 else 4)) for _ in range(nd)]
    win = [draw(st.integers(1, 3)) for _ in range(nd)]
    strides = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    lhs_dil = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(nd))
    rhs_dil = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(nd))
    lhs_letters = draw(st.permutations("NC" + sp))
    rhs_letters = draw(st.permutations("OI" + sp))
    out_letters = draw(st.permutations("NC" + sp))
    spec = ("".join(lhs_letters), "".join(rhs_letters), "".join(out_letters))
    if all(d == 1 for d in lhs_dil) and draw(st.booleans()):
        padding = draw(st.sampled_from(["SAME", "VALID", "SAME_LOWER"]))
    else:
        padding = tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(nd))
    dtype = draw(st.sampled_from(dtypes))
    sizes = dict(zip(sp, ins), N=n, C=i * groups)
    x = np.random.default_rng(draw(st.integers(0, 99))).standard_normal(
        [sizes[ch] for ch in spec[0]]).astype(dtype)
    ksizes = dict(zip(sp, win), O=o, I=i)
    w = np.random.default_rng(7).standard_normal([ksizes[ch] for ch in spec[1]]).astype(dtype)
    return x, w, dict(window_strides=strides, padding=padding, lhs_dilation=lhs_dil,
                      rhs_dilation=rhs_dil, dimension_numbers=spec, feature_group_count=groups,
                      batch_group_count=batch_groups)


def _expected(x, w, kw):
    p = _resolved(x, w, kw)
    return reference(x, w, p["window_strides"], p["padding"], p["lhs_dilation"],
                     p["rhs_dilation"], p["dimension_numbers"], p["feature_group_count"],
                     p["batch_group_count"])


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(convs())
def test_eager_matches_direct_loops(x64_module, case):
    x, w, kw = case
    got = lax.conv_general_dilated(x, w, **kw)
    want = _expected(x, w, kw)
    assert got.shape == want.shape and got.dtype == x.dtype
    np.testing.assert_allclose(np.asarray(got), want, **_tol(x.dtype))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(convs())
def test_llvm_matches_direct_loops(x64_module, case):
    x, w, kw = case
    got = kiln.jit(lambda a, b: lax.conv_general_dilated(a, b, **kw))(x, w)
    np.testing.assert_allclose(np.asarray(got), _expected(x, w, kw), **_tol(x.dtype))


def _resolved(x, w, kw):
    """The primitive's parameters for a case: explicit padding, axis numbers."""
    dn = lax.conv_dimension_numbers(x.shape, w.shape, kw["dimension_numbers"])
    padding = kw["padding"]
    if isinstance(padding, str):
        ins = [x.shape[a] for a in dn.lhs_spec[2:]]
        win = [(w.shape[a] - 1) * r + 1 for a, r in zip(dn.rhs_spec[2:], kw["rhs_dilation"])]
        padding = lax.padtype_to_pads(ins, win, kw["window_strides"], padding)
    return dict(kw, padding=padding, dimension_numbers=tuple(dn))


def _plan(x, w, kw):
    """lower_conv's plan for the case (the result's shape from the eager definition)."""
    out = np.asarray(lax.conv_general_dilated(x, w, **kw))
    return lower_conv.plan(x, w, out, **_resolved(x, w, kw))


@st.composite
def long_convs(draw):
    """Convolutions with a long sum (window x input features) and few rows (batch x output
    positions): lower_conv's transposed plan. Any layout, groups, strides, both dilations,
    padding, float32 and float64; 1-D and 2-D (3-D ones have too many rows for it)."""
    x, w, kw = draw(convs())
    assume(x.ndim <= 4)
    if isinstance(kw["padding"], str):   # "SAME": as many output positions as inputs
        kw = dict(kw, padding="VALID")
    dn = lax.conv_dimension_numbers(x.shape, w.shape, kw["dimension_numbers"])
    nd = x.ndim - 2
    groups, batch_groups = kw["feature_group_count"], kw["batch_group_count"]
    i, o = w.shape[dn.rhs_spec[1]], w.shape[dn.rhs_spec[0]]
    terms = lower_conv.TILE_BYTES // 8 // x.dtype.itemsize   # a tile of 8 rows: 9 are long
    win = [draw(st.integers(6, 12)) for _ in range(nd - 1)]
    win.append(-(-terms // (i * int(np.prod(win)))) + draw(st.integers(0, 5)))
    rd, ld = kw["rhs_dilation"], kw["lhs_dilation"]
    ins = [(k - 1) * r // d + 1 + draw(st.integers(2, 5)) for k, r, d in zip(win, rd, ld)]
    n = batch_groups * draw(st.integers(9, 12))
    lhs_shape, rhs_shape = [0] * x.ndim, [0] * x.ndim
    for a, size in zip(dn.lhs_spec, [n, i * groups] + ins):
        lhs_shape[a] = size
    for a, size in zip(dn.rhs_spec, [o, i] + win):
        rhs_shape[a] = size
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    return (rng.standard_normal(lhs_shape).astype(x.dtype),
            rng.standard_normal(rhs_shape).astype(x.dtype), kw)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(long_convs())
def test_llvm_transposed_plan_matches_the_numpy_definition(x64_module, case):
    x, w, kw = case
    want = np.asarray(lax.conv_general_dilated(x, w, **kw))   # eager: the NumPy definition
    assert _plan(x, w, kw).transposed, (x.shape, w.shape, want.shape, kw, _plan(x, w, kw))
    got = kiln.jit(lambda a, b: lax.conv_general_dilated(a, b, **kw))(x, w)
    scale = np.abs(want).max(initial=1.0)   # sums of thousands of terms: cancellation
    np.testing.assert_allclose(np.asarray(got), want, rtol=_tol(x.dtype)["rtol"],
                               atol=_tol(x.dtype)["atol"] * scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout,groups", [(("NHWC", "HWIO", "NHWC"), 1),
                                           (("NHWC", "HWIO", "NHWC"), 2),
                                           (("NCHW", "OIHW", "NCHW"), 1)])
def test_kernel_gradient_takes_the_transposed_plan(x64, dtype, layout, groups):
    """The ResNet block's kernel gradient, smaller: 288 output rows per group, a sum over 4096
    batch positions, on the thread pool, several tiles per chunk."""
    rng = np.random.default_rng(3)
    sizes = dict(N=16, C=32 * groups, H=16, W=16, O=8 * groups, I=32)
    x = rng.standard_normal([sizes[c] for c in layout[0]]).astype(dtype)
    w = rng.standard_normal([dict(sizes, H=3, W=3)[c] for c in layout[1]]).astype(dtype)
    ct = rng.standard_normal([dict(sizes, C=sizes["O"])[c] for c in layout[2]]).astype(dtype)
    kw = dict(window_strides=(1, 1), padding="SAME", dimension_numbers=layout,
              feature_group_count=groups)
    g = lambda a, b, c: kiln.vjp(lambda b: lax.conv_general_dilated(a, b, **kw), b)[1](c)[0]  # noqa: E731
    got = kiln.jit(g)(x, w, ct)
    np.testing.assert_allclose(np.asarray(got), np.asarray(kiln.jit(g, backend="reference")(
        x, w, ct)), **_tol(dtype))
    text = kiln.jit(g).lower(x, w, ct).compile().as_text()
    assert "kiln_run_tasks" in text and "term" in text


def test_many_long_rows_split_the_sum_into_chunks():
    """Rows too many for the transposed plan's tile and too long for a tile of SPLIT_ROWS:
    the sum split into chunks of window positions."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 8, 8, 128)).astype(np.float32)
    w = rng.standard_normal((3, 3, 128, 5)).astype(np.float32)
    kw = dict(window_strides=(1, 1), padding="VALID", lhs_dilation=(1, 1), rhs_dilation=(1, 1),
              dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=1,
              batch_group_count=1)
    pl = _plan(x, w, kw)
    assert not pl.transposed and pl.chunks > 1
    got = kiln.jit(lambda a, b: lax.conv_general_dilated(a, b, **kw))(x, w)
    np.testing.assert_allclose(np.asarray(got), np.asarray(lax.conv_general_dilated(x, w, **kw)),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"),
                                    ("NHWC", "OIHW", "CNHW")])
def test_llvm_large_enough_for_threads_and_split_sums(layout):
    """Big enough for the thread pool; the kernel gradient's long rows split into chunks."""
    rng = np.random.default_rng(0)
    sizes = dict(N=4, C=16, H=18, W=17, O=24, I=16)
    x = rng.standard_normal([sizes[c] for c in layout[0]]).astype(np.float32)
    w = rng.standard_normal([dict(sizes, H=3, W=3)[c] for c in layout[1]]).astype(np.float32)
    kw = dict(window_strides=(1, 2), padding="SAME", dimension_numbers=layout)
    f = lambda a, b: knp.sum(knp.sin(lax.conv_general_dilated(a, b, **kw)))   # noqa: E731
    got = kiln.jit(kiln.grad(f, argnums=(0, 1)))(x, w)
    want = kiln.jit(kiln.grad(f, argnums=(0, 1)), backend="reference")(x, w)
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=2e-3, atol=2e-3)


GRAD_CASES = [   # (lhs shape, rhs shape, params)
    ((2, 4, 5, 4), (3, 4, 2, 2), dict(window_strides=(2, 1), padding=((1, 0), (0, -1)),
                                      lhs_dilation=(1, 2), rhs_dilation=(2, 1))),
    ((2, 5, 4, 4), (2, 2, 2, 4), dict(window_strides=(1, 2), padding="SAME",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                      feature_group_count=2)),
    ((2, 5, 4, 4), (2, 2, 4, 4), dict(window_strides=(1, 1), padding="VALID",
                                      dimension_numbers=("NHWC", "HWIO", "NCHW"),
                                      batch_group_count=2)),
]


@pytest.mark.parametrize("xs,ws,kw", GRAD_CASES)
def test_derivatives_to_second_order(xs, ws, kw, x64):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, **kw), (x, w), order=2)
    check_grads(kiln.jit(lambda a, b: lax.conv_general_dilated(a, b, **kw)), (x, w), order=1)


@pytest.mark.parametrize("xs,ws,kw", GRAD_CASES)
@pytest.mark.parametrize("in_axes", [(0, None), (None, 1), (0, 0)])
def test_vmap_matches_a_loop(xs, ws, kw, in_axes):
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    wa = 0 if in_axes[1] is None else in_axes[1]
    xs, ws = np.stack([x, -x, 2 * x]), np.stack([w, w * 3, -w], axis=wa)
    args = (xs if in_axes[0] is not None else x, ws if in_axes[1] is not None else w)
    f = lambda a, b: lax.conv_general_dilated(a, b, **kw)   # noqa: E731
    got = kiln.jit(kiln.vmap(f, in_axes=in_axes))(*args)
    want = [f(xs[k] if in_axes[0] is not None else x, np.take(ws, k, wa) if in_axes[1] is not None else w)
            for k in range(3)]
    np.testing.assert_allclose(np.asarray(got), np.stack([np.asarray(v) for v in want]),
                               rtol=1e-4, atol=1e-4)


def test_integer_operands_run_on_the_reference_and_name_the_dtype_under_llvm():
    x, w = np.arange(12, dtype=np.int32).reshape(1, 1, 12), np.ones((1, 1, 3), np.int32)
    want = np.convolve(x[0, 0], w[0, 0], "valid")[None, None]
    f = lambda a, b: lax.conv(a, b, (1,), "VALID")   # noqa: E731
    np.testing.assert_array_equal(np.asarray(f(x, w)), want)
    np.testing.assert_array_equal(np.asarray(kiln.jit(f)(x, w)), want)   # reference fallback
    with pytest.raises(BackendUnsupportedError, match="float32 or float64.*int32"):
        kiln.jit(f, backend="llvm")(x, w)


def test_shape_errors_name_the_operation():
    x, w = np.zeros((1, 4, 5, 5), np.float32), np.zeros((2, 3, 3, 3), np.float32)
    with pytest.raises(TypeError, match="conv_general_dilated lhs feature dimension \\(4\\)"):
        lax.conv(x, w, (1, 1), "SAME")
    with pytest.raises(TypeError, match="window_strides must have 2 entries"):  # explicit padding
        lax.conv(x, np.zeros((2, 4, 3, 3), np.float32), (1,), [(0, 0), (0, 0)])
    with pytest.raises(TypeError, match="same dtypes"):
        lax.conv(x, np.zeros((2, 4, 3, 3), np.float16), (1, 1), "SAME")
