"""The implementation of `kiln.scipy.cluster.vq` (`__all__`, re-exported there)."""
from ... import numpy as jnp
from ...numpy._core import check_arraylike, promote_dtypes_inexact

__all__ = ["vq"]


def vq(obs, code_book, check_finite=True):
    """(code, dist): for each row of `obs` (N, D) (or each element of a 1-D `obs`), the index
    of the nearest row of `code_book` (K, D) and its distance. `check_finite` has no effect
    (values are not checked, as in JAX)."""
    check_arraylike("scipy.cluster.vq.vq", obs, code_book)
    obs, code_book = promote_dtypes_inexact(jnp.asarray(obs), jnp.asarray(code_book))
    if obs.ndim != code_book.ndim:
        raise ValueError("Observation and code_book should have the same rank")
    if obs.ndim == 1:
        obs, code_book = obs[:, None], code_book[:, None]
    if obs.ndim != 2:
        raise ValueError("ndim different than 1 or 2 are not supported")
    distances = jnp.sqrt(jnp.sum(jnp.abs(obs[:, None, :] - code_book[None, :, :]) ** 2,
                                 axis=-1))
    code = jnp.argmin(distances, axis=-1)
    return code, jnp.take_along_axis(distances, code[:, None], axis=1)[:, 0]

