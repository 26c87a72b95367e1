"""The implementation of `kiln.scipy.stats.gaussian_kde`, kernel density estimation with
Gaussian kernels as JAX 0.10.2 has it (re-exported by `kiln.scipy.stats`).

A `gaussian_kde` holds `dataset` (d, n), normalised `weights` (n,), the effective sample size
`neff = 1 / sum(weights**2)`, and the kernel's `covariance` (the weighted data covariance
times the bandwidth factor squared: Scott's `neff**(-1 / (d + 4))` by default, Silverman's,
a scalar, or a callable given the estimator) with its inverse `inv_cov`. It is a pytree, so it
passes into and out of `jit`. `evaluate` (also `pdf` and calling the estimator) whitens the
points and the data with the Cholesky factor of `inv_cov` and sums the weighted kernels;
`logpdf` takes their log-sum-exp. `integrate_gaussian`, `integrate_kde` and
`integrate_box_1d` are the closed forms of the integrals; `resample` draws data points by
weight and adds kernel noise. `integrate_box` and `set_bandwidth` raise
`NotImplementedError`, as in JAX.
"""
import numpy as np

from ... import numpy as jnp
from ... import random
from ...numpy._core import check_arraylike, promote_dtypes_inexact
from ...tree_util import register_pytree_node_class
from .. import linalg, special

_FIELDS = ("neff", "dataset", "weights", "covariance", "inv_cov")


def _is_complex(x):
    return jnp.issubdtype(jnp.result_type(x), np.complexfloating)


def _cho_norm(covariance):
    """The Cholesky factor of `covariance` and the Gaussian's normalising constant."""
    chol = linalg.cho_factor(covariance)
    d = covariance.shape[0]
    return chol, 1.0 / (jnp.sqrt(2 * np.pi) ** d * jnp.prod(jnp.diag(chol[0])))


def _convolved(chol, norm, data, weights, means):
    """For each column of `means`, sum over the columns x of `data` of weight times the
    Gaussian density (covariance `chol`'s) of x - mean."""
    d = data.shape[0]
    diff = data[:, :, None] - means[:, None, :]
    alpha = linalg.cho_solve(chol, diff.reshape(d, -1)).reshape(diff.shape)
    exponent = 0.5 * jnp.sum(diff * alpha, axis=0)
    return norm * jnp.sum(jnp.exp(-exponent) * weights[:, None], axis=0)


@register_pytree_node_class
class gaussian_kde:
    """A Gaussian kernel density estimate of `dataset` (d, n), optionally weighted:
    `scipy.stats.gaussian_kde` as JAX has it."""
    __slots__ = _FIELDS

    def __init__(self, dataset, bw_method=None, weights=None):
        check_arraylike("gaussian_kde", dataset)
        dataset = jnp.atleast_2d(dataset)
        if _is_complex(dataset):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is None:
            (dataset,) = promote_dtypes_inexact(dataset)
            weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
        else:
            check_arraylike("gaussian_kde", weights)
            dataset, weights = promote_dtypes_inexact(dataset, weights)
            weights = jnp.atleast_1d(weights)
            weights = weights / jnp.sum(weights)
            if weights.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if len(weights) != n:
                raise ValueError("`weights` input should be of length n")
        object.__setattr__(self, "dataset", dataset)
        object.__setattr__(self, "weights", weights)
        neff = 1 / jnp.sum(weights ** 2)
        object.__setattr__(self, "neff", neff)
        if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
            factor = jnp.power(neff, -1.0 / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = jnp.power(neff * (d + 2) / 4.0, -1.0 / (d + 4))
        elif jnp.isscalar(bw_method) and not isinstance(bw_method, str):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ValueError(
                "`bw_method` should be 'scott', 'silverman', a scalar, or a callable.")
        data_covariance = jnp.atleast_2d(jnp.cov(dataset, rowvar=1, bias=False,
                                                 aweights=weights))
        object.__setattr__(self, "covariance", data_covariance * factor ** 2)
        object.__setattr__(self, "inv_cov", jnp.linalg.inv(data_covariance) / factor ** 2)

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r}: a gaussian_kde is frozen, as "
                             "JAX's is; build a new one instead")

    def tree_flatten(self):
        return tuple(getattr(self, name) for name in _FIELDS), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        kde = cls.__new__(cls)
        for name, value in zip(_FIELDS, children):
            object.__setattr__(kde, name, value)
        return kde

    @property
    def d(self):
        """The number of dimensions."""
        return self.dataset.shape[0]

    @property
    def n(self):
        """The number of data points."""
        return self.dataset.shape[1]

    def _kernel_exponents(self, name, points):
        """The log weights and log kernel values, (points, data), at `points`."""
        check_arraylike(name, points)
        points = self._reshape_points(points)
        data, log_weights, xi, precision = promote_dtypes_inexact(
            self.dataset, jnp.log(self.weights), points, self.inv_cov)
        whitening = jnp.linalg.cholesky(precision)
        data, xi = data.T @ whitening, xi.T @ whitening
        log_norm = jnp.sum(jnp.log(jnp.diag(whitening))) - 0.5 * self.d * np.log(2 * np.pi)
        squared = jnp.sum(jnp.square(xi[:, None, :] - data[None, :, :]), axis=-1)
        return log_weights, log_norm - 0.5 * squared

    def evaluate(self, points):
        """The estimated density at `points` (d, m), or at one point (d,)."""
        log_weights, exponents = self._kernel_exponents("evaluate", points)
        return jnp.sum(jnp.exp(log_weights) * jnp.exp(exponents), axis=1)

    def __call__(self, points):
        return self.evaluate(points)

    def pdf(self, x):
        """The estimated density at `x`: `evaluate`."""
        return self.evaluate(x)

    def logpdf(self, x):
        """The log of the estimated density at `x`, by log-sum-exp."""
        log_weights, exponents = self._kernel_exponents("logpdf", x)
        return special.logsumexp(log_weights + exponents, axis=1)

    def integrate_gaussian(self, mean, cov):
        """The integral of the density times a Gaussian of `mean` and `cov`."""
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        chol, norm = _cho_norm(self.covariance + cov)
        return _convolved(chol, norm, self.dataset, self.weights, mean[:, None])[0]

    def integrate_box_1d(self, low, high):
        """The probability mass between the scalars `low` and `high` (one dimension only)."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.squeeze(jnp.sqrt(self.covariance))
        low = jnp.squeeze((low - self.dataset) / sigma)
        high = jnp.squeeze((high - self.dataset) / sigma)
        return jnp.sum(self.weights * (special.ndtr(high) - special.ndtr(low)))

    def integrate_kde(self, other):
        """The integral of the product of this density and `other`'s."""
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        chol, norm = _cho_norm(self.covariance + other.covariance)
        small, large = (self, other) if self.n < other.n else (other, self)
        per_point = _convolved(chol, norm, large.dataset, large.weights, small.dataset)
        return jnp.sum(per_point * small.weights)

    def resample(self, key, shape=()):
        """`shape` draws from the estimate, as a (d,) + shape array: data points picked by
        weight plus Gaussian noise of the kernel's covariance."""
        index_key, noise_key = random.split(key)
        index = random.choice(index_key, self.n, shape=shape, p=self.weights)
        noise = random.multivariate_normal(noise_key, jnp.zeros(self.d, self.covariance.dtype),
                                           self.covariance, shape=shape,
                                           dtype=self.dataset.dtype).T
        return self.dataset[:, index] + noise

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        """Not implemented, as in JAX: use `integrate_box_1d`."""
        raise NotImplementedError(
            "only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method=None):
        """Not implemented, as in JAX: build a new `gaussian_kde` with `bw_method`."""
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")

    def _reshape_points(self, points):
        if _is_complex(points):
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        points = jnp.atleast_2d(points)
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return jnp.reshape(points, (self.d, 1))
            raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return points
