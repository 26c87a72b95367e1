"""kiln.scipy.special's hyp2f1 and sph_harm_y against JAX (same algorithm: float32 and float64
tolerances over a grid and its special cases) and SciPy (where JAX's values are accurate, and
for x < -1/2, where kiln transforms and JAX's series does not converge); jit, vmap and grad."""
import json
import os

import numpy as np
import pytest
import scipy.special as sps

import kiln
from kiln.scipy import special

# JAX 0.10.2's values and gradients (tests/goldens/make_hyp2f1_goldens.py): JAX needs seconds
# to compile its hyp2f1 and much longer for its gradient.
with open(os.path.join(os.path.dirname(__file__), "goldens", "hyp2f1_jax_0_10_2.json")) as f:
    GOLDENS = json.load(f)
TOL = {np.float32: 5e-6, np.float64: 1e-13}
RNG = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hyp2f1_matches_jax_and_scipy(dtype):
    args = [np.array(a, dtype) for a in GOLDENS["args"]]
    want = np.array([float(v) for v in GOLDENS[np.dtype(dtype).name]])
    with kiln.enable_x64(dtype == np.float64):
        got = np.asarray(special.hyp2f1(*args))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])
    ref = sps.hyp2f1(*[a.astype(np.float64) for a in args])
    finite = np.isfinite(ref) & np.isfinite(want) & (np.abs(ref) < 1e6)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=10 * TOL[dtype],
                               atol=10 * TOL[dtype])
    assert np.isinf(got[np.isinf(want)]).all()


@pytest.mark.parametrize("abc", [(1, 1, 2), (0.5, 1.5, 2.5), (-2, 1.5, 3), (1.5, -3, 2.2),
                                 (2.3, 1.7, 0.9), (3, 1, 2)])
def test_hyp2f1_negative_x_by_pfaff(abc, x64):
    x = np.array([-0.6, -0.9, -1.5, -3, -8])
    np.testing.assert_allclose(np.asarray(special.hyp2f1(*abc, x)), sps.hyp2f1(*abc, x),
                               rtol=1e-13)


def test_hyp2f1_transforms():
    x = np.float32([0.3, -0.7, 0.95, 0.0])
    eager = np.asarray(special.hyp2f1(1.5, 2.0, 3.2, x))
    np.testing.assert_allclose(np.asarray(kiln.jit(special.hyp2f1)(1.5, 2.0, 3.2, x)), eager,
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(kiln.vmap(lambda v: special.hyp2f1(1.5, 2.0, 3.2, v))(
        x)), eager, rtol=1e-6)
    grad = kiln.grad(special.hyp2f1, argnums=(0, 1, 2, 3))
    for point, want in GOLDENS["grad"]:
        got = grad(*map(np.float32, point))
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5)


def test_sph_harm_y_matches_jax_and_scipy():
    jax = pytest.importorskip("jax")
    js = jax.scipy.special
    n = RNG.integers(0, 7, 60)
    m = np.array([RNG.integers(-k, k + 1) for k in n])
    theta = RNG.uniform(0, np.pi, 60).astype(np.float32)
    phi = RNG.uniform(0, 2 * np.pi, 60).astype(np.float32)
    got = np.asarray(special.sph_harm_y(n, m, theta, phi))
    want = np.asarray(js.sph_harm_y(n, m, theta, phi))
    assert got.dtype == want.dtype == np.complex64
    np.testing.assert_allclose(got, want, atol=2e-6)
    np.testing.assert_allclose(got, sps.sph_harm_y(n, m, theta.astype(float), phi.astype(float)),
                               atol=2e-6)
    jitted = kiln.jit(lambda *a: special.sph_harm_y(*a, n_max=6))(n, m, theta, phi)
    np.testing.assert_allclose(np.asarray(jitted), got, atol=1e-6)
    clipped = special.sph_harm_y(np.array([5]), np.array([2]), 0.4, 0.3, n_max=3)
    np.testing.assert_allclose(np.asarray(clipped), np.asarray(
        js.sph_harm_y(np.array([5]), np.array([2]), 0.4, 0.3, n_max=3)), atol=1e-6)
    grad = kiln.grad(lambda t: special.sph_harm_y(np.array([3]), np.array([2]), t,
                                                  np.float32(0.3)).real.sum())(np.float32(0.7))
    want = jax.grad(lambda t: js.sph_harm_y(np.array([3]), np.array([2]), t,
                                            np.float32(0.3)).real.sum())(np.float32(0.7))
    assert float(grad) == pytest.approx(float(want), rel=1e-5)


def test_sph_harm_y_errors():
    with pytest.raises(NotImplementedError, match="diff_n"):
        special.sph_harm_y(np.array([1]), np.array([0]), 0.3, 0.2, diff_n=1)
    with pytest.raises(TypeError, match="n_max"):
        kiln.jit(lambda n: special.sph_harm_y(n, n * 0, np.float32([0.3]), 0.2))(np.array([1]))
