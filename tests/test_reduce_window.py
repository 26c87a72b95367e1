"""lax.reduce_window (sum, max, min and a general computation) and max/min pooling's derivative
primitives against direct loops, eager and under jit (LLVM), with hypothesis over windows,
strides, padding forms and dilations; derivatives to second order; vmap."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import kiln
import kiln.numpy as knp
from kiln import lax
from kiln.test_util import check_grads

IDENTITY = {"add": 0.0, "max": -np.inf, "min": np.inf}


def reference(x, op, init, window, strides, padding, base, wdil):
    """Each output element: init combined with every in-range window element, by loops."""
    combine = {"add": np.add, "max": np.maximum, "min": np.minimum, "mul": np.multiply}[op]
    out_shape = []
    for d, w, s, (lo, hi), bd, wd in zip(x.shape, window, strides, padding, base, wdil):
        span = ((d - 1) * bd + 1 if d else 0) + lo + hi
        eff = (w - 1) * wd + 1
        out_shape.append(0 if span < eff else (span - eff) // s + 1)
    out = np.full(out_shape, init, x.dtype)
    for o in itertools.product(*map(range, out_shape)):
        for k in itertools.product(*map(range, window)):
            src = []
            for oi, ki, s, (lo, _), bd, wd, d in zip(o, k, strides, padding, base, wdil, x.shape):
                q = oi * s + ki * wd - lo
                src.append(q // bd if q >= 0 and q % bd == 0 and q // bd < d else None)
            value = init if None in src else x[tuple(src)]
            out[o] = combine(out[o], value)
    return out


@st.composite
def windows(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0 if nd == 1 else 1, 5)) for _ in range(nd))
    window = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    base = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(nd))
    wdil = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(nd))
    if draw(st.booleans()):
        padding = draw(st.sampled_from(["SAME", "VALID"]))
    else:
        padding = tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(nd))
    op = draw(st.sampled_from(["add", "max", "min", "mul"]))
    x = np.random.default_rng(draw(st.integers(0, 99))).standard_normal(shape).astype(np.float32)
    return x, op, window, strides, padding, base, wdil


def _explicit(x, window, strides, padding, wdil):
    if not isinstance(padding, str):
        return padding
    eff = [(w - 1) * r + 1 for w, r in zip(window, wdil)]
    return lax.padtype_to_pads(x.shape, eff, strides, padding)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(windows())
def test_eager_and_llvm_match_direct_loops(case):
    x, op, window, strides, padding, base, wdil = case
    init = IDENTITY.get(op, 1.0)
    want = reference(x, op, np.float32(init), window, strides,
                     _explicit(x, window, strides, padding, wdil), base, wdil)
    f = lambda v: lax.reduce_window(v, init, getattr(lax, op), window, strides, padding,   # noqa: E731
                                    base, wdil)
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(kiln.jit(f)(x)), want, rtol=1e-5, atol=1e-6)


def test_a_non_identity_init_and_a_user_computation_take_the_general_form():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = lax.reduce_window(x, 1.0, lax.add, (2, 2), (1, 1), "VALID")
    np.testing.assert_allclose(np.asarray(got), reference(x, "add", np.float32(1), (2, 2),
                                                          (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)))
    absmax = lambda a, b: knp.maximum(knp.abs(a), knp.abs(b))   # noqa: E731
    f = kiln.jit(lambda v: lax.reduce_window(v, 0.0, absmax, (1, 3), (1, 2), "SAME"))
    np.testing.assert_allclose(np.asarray(f(-x)), reference(x, "max", np.float32(0), (1, 3),
                                                            (1, 2), ((0, 0), (0, 1)), (1, 1),
                                                            (1, 1)))


def test_integer_and_bool_windows():
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    f = lambda v: lax.reduce_window(v, -2**31, lax.max, (2, 2), (2, 2), "SAME")   # noqa: E731
    want = reference(x, "max", np.int32(-2**31), (2, 2), (2, 2), ((0, 0), (0, 1)), (1, 1), (1, 1))
    np.testing.assert_array_equal(np.asarray(kiln.jit(f)(x)), want)


POOLS = [   # (op, window, strides, padding, window dilation)
    ("max", (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None),
    ("min", (2, 2, 1), (1, 1, 1), ((0, 1), (1, 0), (0, 0)), None),
    ("add", (1, 2, 3, 1), (1, 2, 1, 1), ((0, 0), (1, 1), (2, -1), (0, 0)), (1, 1, 2, 1)),
]


def _input(window):
    x = np.random.default_rng(3).permutation(2 * 5 * 6 * 2).reshape(2, 5, 6, 2) / 7.0
    return x[..., 0] if len(window) == 3 else x     # distinct values: no ties in a window


@pytest.mark.parametrize("op,window,strides,padding,wdil", POOLS)
def test_derivatives_to_second_order(op, window, strides, padding, wdil, x64):
    x = _input(window)
    f = lambda v: lax.reduce_window(v, IDENTITY[op], getattr(lax, op), window, strides,  # noqa: E731
                                    padding, None, wdil)
    check_grads(f, (x,), order=2)
    check_grads(kiln.jit(f), (x,), order=2)


@pytest.mark.parametrize("op,window,strides,padding,wdil", POOLS)
def test_vmap_of_grad_matches_a_loop(op, window, strides, padding, wdil):
    x = _input(window).astype(np.float32)
    xs = np.stack([x, -x, x[::-1]])
    f = lambda v: knp.sum(knp.sin(lax.reduce_window(  # noqa: E731
        v, IDENTITY[op], getattr(lax, op), window, strides, padding, None, wdil)))
    got = kiln.jit(kiln.vmap(kiln.grad(f)))(xs)
    want = np.stack([np.asarray(kiln.grad(f)(v)) for v in xs])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_max_pool_gradient_goes_to_the_first_maximum_of_each_window():
    x = np.array([[1.0, 3.0, 3.0, 0.0]], np.float32)
    g = kiln.jit(kiln.grad(lambda v: knp.sum(lax.reduce_window(v, -np.inf, lax.max, (1, 2),
                                                               (1, 1), "VALID"))))(x)
    np.testing.assert_array_equal(np.asarray(g), [[0.0, 2.0, 1.0, 0.0]])


def test_window_errors_name_the_operation():
    with pytest.raises(TypeError, match="reduce_window_sum window_strides must have one entry"):
        lax.reduce_window(np.zeros((3, 3), np.float32), 0.0, lax.add, (2, 2), (1,), "VALID")
    with pytest.raises(NotImplementedError, match="base_dilation"):
        kiln.grad(lambda v: knp.sum(lax.reduce_window(v, -np.inf, lax.max, (2,), (1,), "VALID",
                                                      (2,))))(np.ones(4, np.float32))


def test_the_cuda_backend_runs_conv_and_pooling_as_kernels(monkeypatch):
    """On the emulated device the convolution, the pooling and their gradients are CUDA
    kernels (cuda/windows.py), not the per-primitive path."""
    from kiln.compiler.backends.cuda import device as D
    monkeypatch.setenv(D.EMULATE, "1")
    x = np.random.default_rng(0).standard_normal((2, 6, 6, 3)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((3, 3, 3, 4)).astype(np.float32)

    def f(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return knp.sum(lax.reduce_window(y, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                         "VALID") ** 2)
    g = kiln.grad(f, argnums=(0, 1))
    got = kiln.jit(g, backend="cuda")(x, w)
    want = kiln.jit(g, backend="reference")(x, w)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    text = kiln.jit(f, backend="cuda").lower(x, w).compile().as_text("cuda")
    assert "its NumPy definition" not in text
    assert "void kiln_conv_general_dilated" in text and "void kiln_reduce_window_max" in text


def _rank0_sum(v):
    return lax.reduce_window(v, 0.0, lax.add, (), (), [])


def _rank0_max(v):
    return lax.reduce_window(v, -np.inf, lax.max, (), (), [])


@pytest.mark.parametrize("f", [_rank0_sum, _rank0_max])
def test_a_rank_0_operand_is_its_own_window(f):
    """JAX's result: the one window holds the value (eager, reference and LLVM alike)."""
    x = np.float32(3.0)
    assert float(f(x)) == 3.0
    assert float(kiln.jit(f)(x)) == 3.0
    assert float(kiln.jit(f, backend="reference")(x)) == 3.0


POOLS = [((1, 2, 2, 1), (1, 2, 2, 1), "VALID"),     # tiles: plain stores, no overlap
         ((1, 3, 3, 1), (1, 2, 2, 1), "SAME"),      # overlapping windows, padding
         ((1, 2, 2, 1), (1, 3, 3, 1), "VALID"),     # gaps between windows
         ((1, 1, 1, 1), (1, 1, 1, 1), "VALID"),
         ((2, 2, 1, 1), (2, 1, 1, 1), "VALID")]     # the outermost axis' windows tile


@pytest.mark.parametrize("window, strides, padding", POOLS)
@pytest.mark.parametrize("shape", [(64, 33, 31, 16), (2, 5, 4, 3)])
def test_large_pooling_and_its_gradient_match_the_reference(window, strides, padding, shape):
    """Windows small enough to unroll, each path of select_and_scatter_add (tiles, overlap,
    gaps), and results large enough that the nests are split across threads, against the
    reference backend; ties included (integers as floats), which decide the selection."""
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(0, 4, shape).astype(np.float32)
    ct = rng.standard_normal(shape).astype(np.float32)

    def pool(v):
        return lax.reduce_window(v, -np.inf, lax.max, window, strides, padding)

    def f(v):
        return knp.sum(pool(v) * pool(ct * v)), lax.reduce_window(v, 0.0, lax.add, window,
                                                                  strides, padding)
    g = kiln.value_and_grad(lambda v: f(v)[0])
    for got, want in zip(kiln.jit(g)(x) + (kiln.jit(f)(x)[1],),
                         kiln.jit(g, backend="reference")(x) + (kiln.jit(f, backend="reference")(x)[1],)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-4)


def test_a_large_window_loops():
    """A window of more than UNROLL elements is a loop, not unrolled code."""
    x = np.random.default_rng(0).standard_normal((3, 40, 9)).astype(np.float32)

    def f(v):
        return lax.reduce_window(v, -np.inf, lax.max, (1, 7, 5), (1, 2, 2), "SAME")
    np.testing.assert_array_equal(np.asarray(kiln.jit(f)(x)),
                                  np.asarray(kiln.jit(f, backend="reference")(x)))
    g = kiln.grad(lambda v: knp.sum(f(v) ** 2))
    np.testing.assert_allclose(np.asarray(kiln.jit(g)(x)),
                               np.asarray(kiln.jit(g, backend="reference")(x)), rtol=1e-6)
