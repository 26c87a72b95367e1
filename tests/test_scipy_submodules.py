"""kiln.scipy.fft (dct/idct/dctn/idctn), ndimage.map_coordinates, interpolate.
RegularGridInterpolator, cluster.vq.vq and integrate.trapezoid against SciPy and JAX 0.10.2,
eagerly and under jit, with their errors."""
import numpy as np
import pytest
import scipy.fft
import scipy.ndimage
from hypothesis import HealthCheck, given, settings, strategies as st

import kiln
import kiln.numpy as knp
import kiln.scipy.fft as kfft
from kiln.scipy import cluster, integrate, interpolate, ndimage

jax = pytest.importorskip("jax")
import jax.scipy.cluster.vq  # noqa: E402
import jax.scipy.fft  # noqa: E402
import jax.scipy.interpolate  # noqa: E402
import jax.scipy.ndimage  # noqa: E402


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=3), data=st.data(),
       norm=st.sampled_from([None, "backward", "ortho"]))
def test_dct_and_idct_match_scipy(x64, shape, data, norm):
    x = np.random.default_rng(len(shape) * 10 + shape[0]).normal(size=shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.one_of(st.none(), st.integers(1, 10)))
    for ours, theirs in ((kfft.dct, scipy.fft.dct), (kfft.idct, scipy.fft.idct)):
        np.testing.assert_allclose(np.asarray(ours(x, n=n, axis=axis, norm=norm)),
                                   theirs(x, n=n, axis=axis, norm=norm), atol=1e-10)
    np.testing.assert_allclose(np.asarray(kfft.idct(kfft.dct(x, axis=axis, norm=norm),
                                                    axis=axis, norm=norm)), x, atol=1e-10)


@pytest.mark.parametrize("axes, s", [(None, None), ((0, 2), None), ((1, 2), (3, 8)), (-1, 4)])
@pytest.mark.parametrize("norm", [None, "ortho"])
def test_dctn_and_idctn_match_scipy_and_jax(axes, s, norm):
    x = np.random.default_rng(1).normal(size=(4, 5, 6)).astype(np.float32)
    for ours, theirs, jaxs in ((kfft.dctn, scipy.fft.dctn, jax.scipy.fft.dctn),
                               (kfft.idctn, scipy.fft.idctn, jax.scipy.fft.idctn)):
        got = np.asarray(ours(x, s=s, axes=axes, norm=norm))
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, theirs(x, s=s, axes=axes, norm=norm), rtol=2e-4,
                                   atol=2e-4)
        np.testing.assert_allclose(got, np.asarray(jaxs(x, s=s, axes=axes, norm=norm)),
                                   rtol=2e-4, atol=2e-4)


def test_dct_of_complex_input_and_under_jit():
    z = np.random.default_rng(2).normal(size=(3, 6)) + 1j
    np.testing.assert_allclose(np.asarray(kfft.dct(z)), scipy.fft.dct(z), rtol=1e-5, atol=1e-5)
    x = np.arange(10, dtype=np.float32)
    f = kiln.jit(lambda x: kfft.idct(kfft.dct(x, norm="ortho"), norm="ortho"))
    np.testing.assert_allclose(np.asarray(f(x)), x, atol=1e-4)
    g = kiln.grad(lambda x: knp.sum(kfft.dct(x) ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(
        lambda x: jax.numpy.sum(jax.scipy.fft.dct(x) ** 2))(x)), rtol=1e-4)


def test_dct_errors():
    with pytest.raises(NotImplementedError, match="only DCT type 2"):
        kfft.dct(np.ones(3), type=3)
    with pytest.raises(ValueError, match="norm='forward' is not implemented"):
        kfft.idct(np.ones(3), norm="forward")


MODES = ["constant", "nearest", "wrap", "mirror", "reflect"]


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", MODES)
def test_map_coordinates_matches_jax(order, mode):
    rng = np.random.default_rng(3)
    image = rng.normal(size=(5, 6)).astype(np.float32)
    coords = [rng.uniform(-3, 8, (4, 7)).astype(np.float32),
              rng.uniform(-3, 9, (4, 7)).astype(np.float32)]
    coords[0][0, :3] = [1.5, 2.5, -0.5]     # halves: rounded away from zero
    for img in (image, (image * 10).astype(np.int32)):
        got = ndimage.map_coordinates(img, coords, order, mode=mode, cval=1.5)
        want = jax.scipy.ndimage.map_coordinates(img, coords, order, mode=mode, cval=1.5)
        assert np.asarray(got).dtype == img.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)
    if mode in ("nearest", "mirror", "reflect"):
        # SciPy's "constant" and "wrap" treat points near the edges differently from JAX's,
        # which kiln follows
        np.testing.assert_allclose(
            np.asarray(ndimage.map_coordinates(image, coords, order, mode=mode)),
            scipy.ndimage.map_coordinates(image, np.stack(coords), order=order, mode=mode,
                                          prefilter=False), atol=1e-5)


def test_map_coordinates_under_jit_and_errors():
    image = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    f = kiln.jit(lambda c: ndimage.map_coordinates(image, c, 1, mode="nearest"))
    np.testing.assert_allclose(np.asarray(f([np.array([0.5, 2.0]), np.array([1.0, 9.0])])),
                               [3.0, 11.0])
    with pytest.raises(NotImplementedError, match="order 0 .* and 1"):
        ndimage.map_coordinates(image, [np.zeros(1)] * 2, 3)
    with pytest.raises(NotImplementedError, match="does not support mode 'grid-wrap'"):
        ndimage.map_coordinates(image, [np.zeros(1)] * 2, 1, mode="grid-wrap")
    with pytest.raises(ValueError, match="length input.ndim"):
        ndimage.map_coordinates(image, [np.zeros(1)], 1)


@pytest.mark.parametrize("method", ["linear", "nearest"])
@pytest.mark.parametrize("fill_value", [np.nan, None, 0.0])
def test_regular_grid_interpolator_matches_jax(method, fill_value):
    rng = np.random.default_rng(4)
    grid = (np.linspace(0, 1, 5), np.array([0.0, 0.5, 2.0, 3.0]))
    values = rng.normal(size=(5, 4, 2))
    points = rng.uniform(-0.2, 3.2, (6, 2))
    got = interpolate.RegularGridInterpolator(grid, values, method, fill_value=fill_value)(points)
    want = jax.scipy.interpolate.RegularGridInterpolator(grid, values, method,
                                                         fill_value=fill_value)(points)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), equal_nan=True, rtol=1e-6)


def test_regular_grid_interpolator_is_a_pytree_and_takes_tuples():
    grid = (np.linspace(0, 1, 5), np.linspace(0, 2, 3))
    values = np.add.outer(np.arange(5.0), np.arange(3.0))    # linear: interpolation is exact
    f = interpolate.RegularGridInterpolator(grid, values)
    x, y = np.array([0.1, 0.5, 0.9]), np.array([0.3, 1.0, 1.7])
    want = x * 4 + y
    np.testing.assert_allclose(np.asarray(kiln.jit(lambda f, p: f(p))(f, np.stack([x, y], -1))),
                               want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(f((x, y))), want, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="bounds_error"):
        interpolate.RegularGridInterpolator(grid, values, bounds_error=True)
    with pytest.raises(ValueError, match="method 'cubic' is not defined"):
        f(np.zeros((1, 2)), method="cubic")
    with pytest.raises(ValueError, match="have dimension 3"):
        f(np.zeros((1, 3)))


def test_vq_matches_jax_and_trapezoid():
    rng = np.random.default_rng(5)
    obs, book = rng.normal(size=(8, 3)), rng.normal(size=(4, 3))
    for args in ((obs, book), (obs[:, 0], book[:, 0])):
        for got, want in zip(cluster.vq.vq(*args), jax.scipy.cluster.vq.vq(*args)):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    with pytest.raises(ValueError, match="same rank"):
        cluster.vq.vq(obs, book[:, 0])
    assert float(integrate.trapezoid(knp.arange(4.0))) == 4.5
    assert float(integrate.trapezoid(knp.ones(3), x=knp.array([0.0, 1.0, 3.0]))) == 3.0
