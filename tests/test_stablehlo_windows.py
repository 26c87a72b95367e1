"""The StableHLO rules of fft, conv_general_dilated, the window reductions and the select
primitives (compiler/backends/stablehlo/lower_fft.py, lower_convolution.py, lower_windows.py)
run by jaxlib's XLA against the reference backend: hypothesis over shapes (empty and batch
axes included), dtypes and window parameters, with grad and vmap of programs using them."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.primitives.windows import identity

pytest.importorskip("jax", reason="the second consumer of the StableHLO text is jaxlib")
from test_stablehlo import SETTINGS, check, values  # noqa: E402

pytestmark = pytest.mark.usefixtures("x64_module")


# ------------------------------------------------------------------------------- fft

@SETTINGS
@given(st.sampled_from([(4,), (2, 5), (0, 3), (3, 1), (2, 3, 4), (1, 2, 2, 3)]),
       st.sampled_from(["FFT", "IFFT", "RFFT", "IRFFT"]), st.integers(1, 3),
       st.sampled_from([np.float32, np.float64]))
def test_fft(shape, kind, axes, real):
    axes = min(axes, len(shape))
    lengths = shape[-axes:]
    if kind == "RFFT":
        x = values(shape, real)
    else:
        cshape = shape[:-1] + (shape[-1] // 2 + 1,) if kind == "IRFFT" else shape
        x = values(cshape, np.complex64 if real == np.float32 else np.complex128)
    f = lambda x: lax.fft(x, kind, lengths)
    check(f, x, rtol=1e-4)


def test_fft_grad_and_vmap():
    x = values((3, 8), np.float32)
    check(kiln.grad(lambda x: jnp.abs(jnp.fft.rfft(x)).sum()), x, rtol=1e-4)
    check(kiln.vmap(lambda x: jnp.fft.irfft(jnp.fft.fft(x.astype(jnp.complex64)))), x, rtol=1e-4)


# ----------------------------------------------------------------------- convolution

@SETTINGS
@given(st.integers(0, 2), st.integers(1, 2), st.sampled_from([(1, 1), (2, 1)]),
       st.sampled_from([((0, 0), (0, 0)), ((1, 0), (2, 1)), ((-1, 1), (0, -1))]),
       st.sampled_from([(1, 1), (2, 1)]), st.sampled_from([(1, 1), (1, 2)]),
       st.sampled_from([("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC")]),
       st.sampled_from([np.float32, np.float64, np.int32]))
def test_conv(batch, groups, strides, padding, lhs_dil, rhs_dil, dn, dtype):
    cin, cout = 2 * groups, 2 * groups
    lhs = values((batch, cin, 5, 4), dtype, 1)
    rhs = values((cout, cin // groups, 2, 3), dtype, 2)
    if dn[0] == "NHWC":
        lhs, rhs = lhs.transpose(0, 2, 3, 1), rhs.transpose(2, 3, 1, 0)
    f = lambda l, r: lax.conv_general_dilated(l, r, strides, padding, lhs_dil, rhs_dil, dn,
                                              feature_group_count=groups)
    check(f, lhs, rhs, rtol=1e-4)


def test_conv_batch_groups_and_preferred_type():
    lhs, rhs = values((4, 3, 6), np.float32), values((2, 3, 2), np.float32)
    check(lambda l, r: lax.conv_general_dilated(l, r, (1,), "SAME", batch_group_count=2),
          lhs, rhs, rtol=1e-4)
    check(lambda l, r: lax.conv_general_dilated(l, r, (2,), "VALID",
                                                preferred_element_type=np.float64),
          lhs, rhs, rtol=1e-6)
    li, ri = values((1, 3, 6), np.int8), values((2, 3, 2), np.int8)
    check(lambda l, r: lax.conv_general_dilated(l, r, (1,), "VALID",
                                                preferred_element_type=np.int32), li, ri)


def test_conv_grad_and_vmap():
    x, w = values((2, 3, 6, 6), np.float32), values((4, 3, 3, 3), np.float32)
    loss = lambda w, x: jnp.tanh(lax.conv(x, w, (1, 1), "SAME")).sum()
    check(kiln.grad(loss, argnums=(0, 1)), w, x, rtol=1e-3)
    check(kiln.vmap(lambda x: lax.conv(x[None], w, (2, 2), "VALID")), x, rtol=1e-4)


# ------------------------------------------------------------------- window reductions

WINDOWS = st.sampled_from([
    ((2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),
    ((2, 3), (2, 1), ((1, 0), (0, 2)), (1, 1), (1, 1)),
    ((3, 1), (1, 2), ((1, 1), (-1, 1)), (2, 1), (1, 1)),
    ((2, 2), (1, 1), ((0, 1), (1, 0)), (1, 1), (2, 1)),
    ((1, 2), (3, 1), ((2, 2), (0, 0)), (1, 1), (1, 2)),
])


@SETTINGS
@given(st.sampled_from([(4, 5), (1, 3), (0, 4), (3, 6)]), WINDOWS,
       st.sampled_from(["sum", "max", "min"]),
       st.sampled_from([np.float32, np.float64, np.int32, np.uint8]))
def test_reduce_window(shape, window, kind, dtype):
    dims, strides, padding, base, wdil = window
    x = values(shape, dtype)
    op = {"sum": lax.add, "max": lax.max, "min": lax.min}[kind]
    check(lambda x: lax.reduce_window(x, identity(kind, dtype), op, dims, strides, padding,
                                      base, wdil), x, rtol=1e-5)


SELECT_WINDOWS = st.sampled_from([w for w in WINDOWS.elements if w[3] == (1, 1)])


def _pool(kind, dims, strides, padding, wdil):
    op = {"max": lax.max, "min": lax.min}[kind]
    return lambda x: lax.reduce_window(x, identity(kind, x.dtype), op, dims, strides, padding,
                                       None, wdil)


@SETTINGS
@given(st.sampled_from([(4, 5), (1, 3), (0, 4), (3, 6)]), SELECT_WINDOWS,
       st.sampled_from(["max", "min"]), st.sampled_from([np.float32, np.float64]),
       st.booleans())
def test_select_and_scatter_add_and_gather_add(shape, window, kind, dtype, special):
    """grad of max/min pooling scatters (select_and_scatter_add); its JVP gathers
    (select_and_gather_add). Ties, NaNs and infinities choose as the reference does."""
    dims, strides, padding, _, wdil = window
    x = values(shape, dtype)
    if special and x.size:
        x = np.round(x).astype(dtype)          # ties
        x.flat[::3] = -np.inf if kind == "max" else np.inf
        x.flat[1::5] = np.nan
    pool = _pool(kind, dims, strides, padding, wdil)
    check(kiln.grad(lambda x: (pool(x) * 1.5).sum()), x, exact=True)
    t = values(shape, dtype, 3)
    check(lambda x, t: kiln.jvp(pool, (x,), (t,))[1], x, t, exact=True)


def test_pooling_vmap_and_second_order():
    x = values((2, 4, 6), np.float32)
    pool = _pool("max", (2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1))
    check(kiln.vmap(kiln.grad(lambda x: jnp.sin(pool(x)).sum())), x, rtol=1e-5)
    avg = lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "SAME")
    check(kiln.grad(lambda x: (avg(x) ** 2).sum()), x[0], rtol=1e-5)


def test_window_edges():
    """Booleans, an empty axis padded out to windows, negative padding past the operand."""
    b = np.array([[True, False, True], [False, False, True]])
    for kind, op in (("max", lax.max), ("min", lax.min)):
        check(lambda x: lax.reduce_window(x, identity(kind, np.bool_), op, (2, 2), (1, 1),
                                          ((0, 1), (1, 0))), b)
    empty = np.ones((0, 3), np.float32)
    for padding in (((2, -3), (0, 0)), ((1, 1), (0, 0))):
        check(lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2), (1, 1), padding), empty)
    y = np.arange(12, dtype=np.float32).reshape(3, 4)
    check(lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 2), (1, 1), ((-1, 0), (-2, 3))),
          y, exact=True)
