"""Tests for `kiln.random`'s generalized_normal, ball, wald, multivariate_normal, orthogonal
and key_dtype against JAX 0.10.2 for the same keys (generalized_normal bit-exact, the others
within a few ulp: XLA contracts their multiply-adds and sums matrix products in its own order),
eagerly and under `jit`."""
import jax
import jax.random as jr
import numpy as np
import pytest

import kiln
import kiln.random as kr

COV = np.array([[2., 0.5, 0.1], [0.5, 1., 0.2], [0.1, 0.2, 0.7]], np.float32)
MEAN = np.float32([1, 2, 3])
MEANS = np.float32([0.5, 1, 2, 3])

# name -> (call taking (random module, key), exact?)
CASES = {
    "generalized_normal": (lambda r, k: r.generalized_normal(k, 1.5, (7,)), True),
    "generalized_normal_p3": (lambda r, k: r.generalized_normal(k, 3.0, (2, 3)), True),
    "wald": (lambda r, k: r.wald(k, MEANS), False),
    "wald_shape": (lambda r, k: r.wald(k, MEANS, (2, 4)), False),
    "mvn_cholesky": (lambda r, k: r.multivariate_normal(k, MEAN, COV, (5,)), False),
    "mvn_eigh": (lambda r, k: r.multivariate_normal(k, MEAN, COV, method="eigh"), False),
    "mvn_svd": (lambda r, k: r.multivariate_normal(k, MEAN, COV, (2,), method="svd"), False),
    "ball": (lambda r, k: r.ball(k, 3, 2, (4,)), False),
    "ball_p1": (lambda r, k: r.ball(k, 2, 1.0), False),
    "orthogonal": (lambda r, k: r.orthogonal(k, 4, (2,)), False),
    "orthogonal_wide": (lambda r, k: r.orthogonal(k, 2, m=5), False),
}


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name, seed):
    call, exact = CASES[name]
    expected = np.asarray(call(jr, jr.key(seed)))
    got = np.asarray(call(kr, kr.key(seed)))
    assert got.shape == expected.shape and got.dtype == expected.dtype
    if exact:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(np.asarray(call(kr, kr.PRNGKey(seed))), got)


def test_jit_matches_eager():
    for name in ("wald", "mvn_cholesky", "generalized_normal", "orthogonal"):
        call, _ = CASES[name]
        np.testing.assert_allclose(kiln.jit(lambda k: call(kr, k))(kr.key(1)),
                                   call(kr, kr.key(1)), rtol=1e-6, atol=1e-6)


def test_properties():
    q = np.asarray(kr.orthogonal(kr.key(2), 5, (3,)))
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(5), q.shape),
                               atol=1e-5)
    b = np.asarray(kr.ball(kr.key(2), 4, 1.5, (200,)))
    assert np.all((np.abs(b) ** 1.5).sum(-1) <= 1)


def test_key_dtype_and_errors():
    assert kr.key_dtype() == kr.key(0).dtype
    assert str(kr.key_dtype("threefry2x32")) == str(jr.key_dtype())
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        kr.key_dtype("rbg")
    with pytest.raises(ValueError, match="cov.shape =="):
        kr.multivariate_normal(kr.key(0), MEAN, np.eye(2, dtype=np.float32))
    with pytest.raises(ValueError, match="method must be one of"):
        kr.multivariate_normal(kr.key(0), MEAN, COV, method="lu")
