"""kiln.random's poisson, binomial and multinomial against JAX's samples for the same key.

JAX's algorithms are deterministic functions of the key (rejection loops included), and
kiln reproduces XLA's CPU kernels for the floating-point steps they use, so every comparison
here is bit for bit: eagerly, under jit and under vmap, for typed and raw keys."""
import jax
import jax.numpy as jnp
import jax.random as JR
import numpy as np
import pytest

import kiln
import kiln.random as KR

LAMS = [0., 0.5, 3., 9.99, 10., 37., 1000., np.nan, np.array([0.1, 2., 12., 50., 3000.],
                                                            np.float32)]


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed,lam", list(enumerate(LAMS)), ids=lambda v: str(np.ravel(v)[:2]))
def test_poisson_matches_jax(seed, lam):
    shape = (40, 5) if np.ndim(lam) else (100,)
    _same(KR.poisson(KR.key(seed), lam, shape), JR.poisson(JR.key(seed), lam, shape))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32])
def test_poisson_dtypes_and_default_shape(dtype):
    lam = np.array([[1., 20.], [4., 400.]], np.float32)
    _same(KR.poisson(KR.PRNGKey(4), lam, dtype=dtype), JR.poisson(JR.PRNGKey(4), lam,
                                                                 dtype=dtype))
    assert KR.poisson(KR.key(0), 3.).shape == ()


BINOMIAL = [(5., .3), (20., .2), (100., .3), (100., .8), (1000., .5), (7., .9), (3.7, .5),
            (np.inf, .3), (-1., .3), (10., np.nan), (10., 0.), (10., 1.), (0., .5), (10., -.2)]


@pytest.mark.parametrize("seed,n,p", [(i, n, p) for i, (n, p) in enumerate(BINOMIAL)],
                         ids=[f"{n}-{p}" for n, p in BINOMIAL])
def test_binomial_matches_jax(seed, n, p):
    _same(KR.binomial(KR.key(seed), n, p, (100,)), JR.binomial(JR.key(seed), n, p, (100,)))


def test_binomial_broadcast_parameters_and_float16():
    n = np.array([[3.], [30.], [300.]], np.float32)
    p = np.array([0.1, 0.5, 0.95], np.float32)
    _same(KR.binomial(KR.key(1), n, p), JR.binomial(JR.key(1), n, p))
    p16 = p.astype(np.float16)
    _same(KR.binomial(KR.key(2), n, p16, (4, 3, 3), np.float16),
          JR.binomial(JR.key(2), n, p16, (4, 3, 3), np.float16))


def test_float64_under_x64(x64):
    with jax.enable_x64(True):
        want = JR.binomial(JR.key(3), 40., np.float64(.4), (50,), np.float64)
        _same(KR.binomial(KR.key(3), 40., np.float64(.4), (50,), np.float64), want)
        _same(KR.poisson(KR.key(3), 30., (50,)), JR.poisson(JR.key(3), 30., (50,)))


@pytest.mark.parametrize("n,p,shape", [
    (10., np.array([.2, .3, .5], np.float32), None),
    (np.array([5., 500.], np.float32), np.array([[.1, 0., .9], [.25, .25, .5]], np.float32),
     None),
    (500., np.array([.6, .3, .1], np.float32), (4, 3)),
    (30., np.array([1., 1., 2.], np.float32) / 4, (2, 2, 3)),
])
def test_multinomial_matches_jax(n, p, shape):
    _same(KR.multinomial(KR.key(2), n, p, shape=shape),
          JR.multinomial(JR.key(2), n, p, shape=shape))


def test_jit_and_vmap():
    keys = KR.split(KR.key(9), 3)
    jkeys = JR.split(JR.key(9), 3)
    f = kiln.jit(lambda k, lam: KR.poisson(k, lam, (20,)))
    _same(f(KR.key(1), 25.), JR.poisson(JR.key(1), 25., (20,)))
    _same(f(KR.key(1), 2.5), JR.poisson(JR.key(1), 2.5, (20,)))
    lams = np.array([0.5, 15., 150.], np.float32)
    _same(kiln.vmap(lambda k, lam: KR.poisson(k, lam, (8,)))(keys, lams),
          jax.vmap(lambda k, lam: JR.poisson(k, lam, (8,)))(jkeys, lams))
    g = kiln.jit(kiln.vmap(lambda k: KR.binomial(k, 60., 0.3, (10,))))
    _same(g(keys), jax.vmap(lambda k: JR.binomial(k, 60., 0.3, (10,)))(jkeys))
    p = np.array([.2, .3, .5], np.float32)
    h = kiln.jit(lambda k: KR.multinomial(k, 50., p))
    _same(h(KR.key(4)), JR.multinomial(JR.key(4), 50., p))


def test_errors():
    with pytest.raises(ValueError, match="Invalid integer data type 'f'"):
        KR.poisson(KR.key(0), 3., (3,), dtype=np.float32)
    with pytest.raises(ValueError, match="must be a float dtype, got int32"):
        KR.binomial(KR.key(0), 3., .2, (3,), dtype=np.int32)
    with pytest.raises(ValueError, match="incompatible shapes"):
        KR.poisson(KR.key(0), np.ones(2), (3,))
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        KR.binomial(KR.key(0), 3., np.ones(2) * .3, (3,))
    with pytest.raises(ValueError, match="accepts a single key"):
        KR.poisson(KR.split(KR.key(0), 2), 3.)
    with pytest.raises(TypeError):
        KR.multinomial(KR.key(0), [10.], [.5, .5])
