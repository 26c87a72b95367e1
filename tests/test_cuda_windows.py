"""The CUDA kernels of the window primitives (cuda/windows.py) without a GPU: reduce_window_*,
select_and_gather_add, select_and_scatter_add and conv_general_dilated, drawn by hypothesis over
ranks, shapes with 0 and 1, windows, strides, paddings (negative ones crop), dilations,
layouts and groups, run on the host (emulate.py) against the reference backend and compiled by
NVRTC for sm_90; then max pooling's and a convolution's gradients through
`jit(backend="cuda")` on the emulated device, with no per-primitive step."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.backends import reference
from kiln.compiler.backends.cuda import device as D, emulate, nvrtc, source
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.builder import Builder
from kiln.compiler.primitives import emit as E
from kiln.compiler.primitives.windows import window_out_shape

HAVE_NVRTC, WHY = nvrtc.available()
needs_cxx = pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")


def _data(rng, shape, dtype, special=False):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        if special:
            pool = np.array([-1.5, -0.0, 0.0, 0.5, 2.0, np.inf, -np.inf, np.nan], dtype)
            return rng.choice(pool, shape)
        return rng.uniform(-2, 2, shape).astype(dtype)
    return rng.integers(-4 if dtype.kind == "i" else 0, 5, shape).astype(dtype)


def _check(fn, inputs, exact):
    kernel = source.kernel_source(fn)
    got = emulate.run(kernel, inputs, blocks=2, threads=32)[0]
    with np.errstate(all="ignore"):
        want = np.asarray(reference.compile_function(fn)(*inputs)[0]).ravel()
    assert got.shape == want.shape
    if exact or want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    if HAVE_NVRTC:
        assert ".target sm_90" in nvrtc.compile(kernel.source, "window.cu")


@st.composite
def window_params(draw, rank, base_dilation=True):
    return dict(
        window_dimensions=tuple(draw(st.integers(1, 3)) for _ in range(rank)),
        window_strides=tuple(draw(st.integers(1, 2)) for _ in range(rank)),
        padding=tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(rank)),
        base_dilation=tuple(draw(st.integers(1, 2)) if base_dilation else 1
                            for _ in range(rank)),
        window_dilation=tuple(draw(st.integers(1, 2)) for _ in range(rank)))


@st.composite
def reduce_window_cases(draw):
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32, np.uint8])))
    kind = draw(st.sampled_from(["sum", "max", "min"]))
    rank = draw(st.integers(0, 3))
    shape = tuple(draw(st.sampled_from([5, 3, 2, 1, 0])) for _ in range(rank))
    params = draw(window_params(rank))
    b = Builder("pool")
    with b:
        x = b.new_input(ShapedArray(shape, dtype), "x")
        fn = b.build([E.bind(f"reduce_window_{kind}", x, **params)])
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return fn, [_data(rng, shape, dtype, draw(st.booleans()) and kind != "sum")], kind != "sum"


@needs_cxx
@settings(max_examples=25, deadline=None)
@given(reduce_window_cases())
def test_reduce_window_kernels_match_the_reference(case):
    _check(*case)


@st.composite
def select_cases(draw):
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32])))
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.sampled_from([5, 7, 3, 6, 1, 0])) for _ in range(rank))
    params = draw(window_params(rank, base_dilation=False))
    params.pop("base_dilation")
    select = draw(st.sampled_from(["ge", "le"]))
    out = window_out_shape(shape, params["window_dimensions"], params["window_strides"],
                           params["padding"], (1,) * rank, params["window_dilation"])
    scatter = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    # ties, repeated maxima and NaN decide which element a window selects
    operand = _data(rng, shape, dtype, special=True) if draw(st.integers(0, 3)) == 0 else \
        rng.integers(0, 3, shape).astype(dtype)
    values_shape = out if scatter else shape
    values = _data(rng, values_shape, np.float32 if dtype.kind != "f" else dtype)
    b = Builder("select")
    with b:
        v = b.new_input(ShapedArray(values_shape, values.dtype), "v")
        x = b.new_input(ShapedArray(shape, dtype), "x")
        name = "select_and_scatter_add" if scatter else "select_and_gather_add"
        fn = b.build([E.bind(name, v, x, select_prim=select, **params)])
    return fn, [values, operand], True


@needs_cxx
@settings(max_examples=40, deadline=None)
@given(select_cases())
def test_select_kernels_match_the_reference(case):
    _check(*case)


@st.composite
def conv_cases(draw):
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32])))
    nd = draw(st.integers(1, 2))
    groups = draw(st.sampled_from([(1, 1), (2, 1), (1, 2)]))
    G, BG = groups
    i_per, o_per = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    n = BG * draw(st.integers(1, 2))
    lhs_canon = [n, G * i_per] + [draw(st.sampled_from([5, 3, 1, 0])) for _ in range(nd)]
    rhs_canon = [G * BG * o_per, i_per] + [draw(st.integers(1, 3)) for _ in range(nd)]
    specs = [tuple(draw(st.permutations(range(nd + 2)))) for _ in range(3)]

    def layout(canon, spec):
        shape = [0] * len(canon)
        for axis, size in zip(spec, canon):
            shape[axis] = size
        return tuple(shape)
    params = dict(window_strides=tuple(draw(st.integers(1, 2)) for _ in range(nd)),
                  padding=tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2)))
                                for _ in range(nd)),
                  lhs_dilation=tuple(draw(st.integers(1, 2)) for _ in range(nd)),
                  rhs_dilation=tuple(draw(st.integers(1, 2)) for _ in range(nd)),
                  dimension_numbers=tuple(specs), feature_group_count=G,
                  batch_group_count=BG, precision=None, preferred_element_type=None)
    lhs_shape, rhs_shape = layout(lhs_canon, specs[0]), layout(rhs_canon, specs[1])
    b = Builder("conv")
    with b:
        x = b.new_input(ShapedArray(lhs_shape, dtype), "x")
        w = b.new_input(ShapedArray(rhs_shape, dtype), "w")
        fn = b.build([E.bind("conv_general_dilated", x, w, **params)])
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return fn, [_data(rng, lhs_shape, dtype), _data(rng, rhs_shape, dtype)], False


@needs_cxx
@settings(max_examples=25, deadline=None)
@given(conv_cases())
def test_convolution_kernels_match_the_reference(case):
    _check(*case)


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv(D.EMULATE, "1")
    return kiln.devices("gpu")[0]


def cnn_loss(w, x):
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return jnp.sum(jnp.tanh(y) ** 2)


@needs_cxx
def test_a_cnn_gradient_runs_as_kernels(emulated):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6, 6, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.3
    f = kiln.jit(kiln.value_and_grad(cnn_loss), backend="cuda")
    (value, grad), (want_value, want_grad) = f(w, x), kiln.value_and_grad(cnn_loss)(w, x)
    np.testing.assert_allclose(float(value), float(want_value), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(want_grad), rtol=1e-4, atol=1e-5)
    steps = f._cache.values()[0].executable.steps()
    assert "per_primitive" not in steps, steps
