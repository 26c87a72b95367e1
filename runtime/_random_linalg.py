"""The implementation of `kiln.random`'s samplers built from other samplers and from linear
algebra: generalized_normal, ball, wald, multivariate_normal, orthogonal, and `key_dtype`.

Each follows JAX 0.10.2's algorithm with the same key splits: generalized_normal is
`rademacher * gamma(1/p) ** (1/p)`, ball divides a generalized-normal vector by
`(sum |g|**p + exponential) ** (1/p)`, wald is Michael-Schucany-Haas's transformation of a
normal and a uniform draw, multivariate_normal is `mean + factor @ normal` with the factor from
`cholesky`, `eigh` or `svd` of `cov`, and orthogonal is the Q of a QR decomposition of a normal
matrix with the signs of R's diagonal (Mezzadri's method). For the same key, generalized_normal
gives JAX's bits exactly; the others agree with JAX to a few ulp (relative differences below
1e-5), because XLA contracts their multiply-adds and orders the sums of the matrix products
in ways kiln does not reproduce yet."""
import numpy as np

from . import lax
from . import numpy as jnp
from .numpy import linalg as jla
from .numpy._core import broadcast_shapes, promote_dtypes_inexact
from . import _random as R
from .sharding_types import out_sharding_keyword

__all__ = ["key_dtype", "generalized_normal", "ball", "wald", "multivariate_normal",
           "orthogonal"]


def key_dtype(impl_spec=None):
    """The dtype of typed keys of the PRNG implementation `impl_spec` (threefry2x32 only)."""
    R._check_impl(impl_spec)
    return R._KEY_DTYPE


def _keyed(name, key, dtype, what="a float"):
    base, _ = R._check_key(name, key)
    return base, R._float_dtype(name, dtype, what)


@out_sharding_keyword
def generalized_normal(key, p, shape=(), dtype=None):
    """Samples with density proportional to exp(-|x|**p)."""
    base, dtype = _keyed("generalized_normal", key, dtype)
    shape = R._shape(shape)
    R._check_shape("generalized_normal", shape)
    return _generalized_normal(base, p, shape, dtype)


def _generalized_normal(base, p, shape, dtype):
    k_g, k_r = R._split2(base)
    g = R._gamma(k_g, R._bcast_to(lax.convert_element_type(1 / jnp.asarray(p), dtype), shape),
                 shape, dtype, log_space=False)
    r = R.rademacher(k_r, shape, dtype)
    return r * g ** (1 / jnp.asarray(p, dtype))


@out_sharding_keyword
def ball(key, d, p=2, shape=(), dtype=None):
    """Uniform samples from the unit Lp ball in `d` dimensions, of shape `(*shape, d)`."""
    base, dtype = _keyed("ball", key, dtype)
    shape = R._shape(shape)
    R._check_shape("ball", shape)
    d = int(d)
    k_g, k_e = R._split2(base)
    g = _generalized_normal(k_g, p, (*shape, d), dtype)
    e = R.exponential(k_e, shape, dtype)
    p = jnp.asarray(p, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


@out_sharding_keyword
def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian) samples with the given mean and unit shape."""
    base, dtype = _keyed("wald", key, dtype)
    shape = np.shape(mean) if shape is None else R._shape(shape)
    R._check_shape("wald", shape, np.shape(mean))
    k_v, k_z = R._split2(base)
    mean = jnp.broadcast_to(jnp.asarray(mean).astype(dtype), shape)
    v = R.normal(k_v, shape, dtype)
    z = R.uniform(k_z, shape, dtype)
    y = v * v
    mean_sq = mean * mean
    root = lax.sqrt(4 * mean * y + mean_sq * (y * y))
    x = mean + mean_sq * y / 2 - mean / 2 * root
    return lax.select(z <= mean / (mean + x), x, mean_sq / x)


_FACTORS = {
    "cholesky": lambda cov: jla.cholesky(cov),
    "eigh": lambda cov: (lambda w, v: v * jnp.sqrt(w[..., None, :]))(*jla.eigh(cov)),
    "svd": lambda cov: (lambda u, s, _: u * jnp.sqrt(s[..., None, :]))(*jla.svd(cov)),
}


@out_sharding_keyword
def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Normal vectors with the given mean (..., n) and covariance (..., n, n)."""
    base, _ = R._check_key("multivariate_normal", key)
    mean, cov = promote_dtypes_inexact(jnp.asarray(mean), jnp.asarray(cov))
    if method not in _FACTORS:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    dtype = mean.dtype if dtype is None else np.dtype(dtype)
    if dtype.kind != "f":
        raise ValueError(f"dtype argument to `multivariate_normal` must be a float dtype, "
                         f"got {dtype}")
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{mean.ndim}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{cov.ndim}")
    n = mean.shape[-1]
    if cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {cov.shape}.")
    if shape is None:
        shape = broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    else:
        shape = R._shape(shape)
        R._check_shape("normal", shape, mean.shape[:-1], cov.shape[:-2])
    factor = _FACTORS[method](cov)
    samples = R._normal(base, (*shape, n), dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, samples)


@out_sharding_keyword
def orthogonal(key, n, shape=(), dtype=None, m=None):
    """Haar-distributed matrices with orthonormal columns (or rows), of shape
    `(*shape, n, m)` (m defaults to n)."""
    base, dtype = _keyed("orthogonal", key, dtype)
    shape = R._shape(shape)
    R._check_shape("orthogonal", shape)
    n = int(n)
    m = n if m is None else int(m)
    z = R._normal(base, (*shape, max(n, m), min(n, m)), dtype)
    q, r = jla.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(d), -2)
    return jnp.swapaxes(x, -1, -2) if n < m else x
