"""kiln.scipy.special.bessel_jn against JAX (same backward recurrence: equal NaN pattern, values
to a few ulp) and SciPy's jv under x64; under jit, vmap and grad (finite differences)."""
import jax
import jax.scipy.special as JS
import numpy as np
import pytest
import scipy.special as SS

import kiln
import kiln.scipy.special as KS

Z = np.array([0.1, 1., 2.5, 5., 10., -3., 20., 35.])


def test_matches_jax_float32():
    z = Z.astype(np.float32)
    got, want = KS.bessel_jn(z, v=4), JS.bessel_jn(z, v=4)
    assert got.shape == want.shape == (5, 8) and got.dtype == want.dtype
    # float32's recurrence overflows for small |z| in JAX too: the same NaNs
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-7)


def test_matches_scipy_under_x64(x64):
    with jax.enable_x64(True):
        got = np.asarray(KS.bessel_jn(Z, v=5, n_iter=80))
        want = SS.jv(np.arange(6)[:, None], Z)
        np.testing.assert_allclose(got, want, atol=1e-12)
        np.testing.assert_allclose(got, JS.bessel_jn(Z, v=5, n_iter=80), atol=1e-14)
        d = kiln.grad(lambda x: KS.bessel_jn(x, v=2)[1])(2.5)
        h = 1e-6
        fd = (SS.jv(1, 2.5 + h) - SS.jv(1, 2.5 - h)) / (2 * h)
        np.testing.assert_allclose(d, fd, rtol=1e-7)


def test_jit_vmap_and_errors():
    z = np.array([5., 12.5], np.float32)
    f = kiln.jit(lambda x: KS.bessel_jn(x, v=3))
    np.testing.assert_allclose(f(z), JS.bessel_jn(z, v=3), rtol=2e-6, atol=2e-7)
    assert kiln.vmap(lambda x: KS.bessel_jn(x, v=1))(z).shape == (2, 2)
    with pytest.raises(ValueError, match="complex input not supported"):
        KS.bessel_jn(np.ones(2, np.complex64), v=1)
    with pytest.raises(TypeError):
        KS.bessel_jn(z, v=1.5)
