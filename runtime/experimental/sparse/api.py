"""Constructors and conversions over the sparse formats: `eye`, `empty`, `random_bcoo` and
`todense` (JAX's `jax.experimental.sparse` functions of those names)."""
import math
import operator

import numpy as np

from ... import numpy as jnp
from ... import random
from ._base import JAXSparse
from .bcoo import BCOO

__all__ = ["empty", "eye", "random_bcoo", "todense"]


def _formats():
    from .bcsr import BCSR
    return {"bcoo": BCOO, "bcsr": BCSR}


def empty(shape, dtype=None, index_dtype="int32", sparse_format="bcoo", **kwds):
    """A sparse array of `shape` with no stored elements (`nse=0` unless given), in
    `sparse_format` ('bcoo' or 'bcsr')."""
    formats = _formats()
    if sparse_format not in formats:
        raise ValueError(f"sparse_format={sparse_format!r} not recognized; must be one of "
                         f"{list(formats)}")
    return formats[sparse_format]._empty(tuple(shape), dtype=dtype, index_dtype=index_dtype,
                                         **kwds)


def eye(N, M=None, k=0, dtype=None, index_dtype="int32", sparse_format="bcoo", **kwds):
    """The N x M sparse matrix with ones on diagonal `k`, in `sparse_format` ('bcoo' or
    'bcsr'; n_batch/n_dense through `kwds`)."""
    formats = _formats()
    if sparse_format not in formats:
        raise ValueError(f"sparse_format={sparse_format!r} not recognized; must be one of "
                         f"{list(formats)}")
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    return formats[sparse_format]._eye(N, M, operator.index(k), dtype=dtype,
                                       index_dtype=index_dtype, **kwds)


def todense(arr):
    """A sparse array's dense value; a dense array is returned unchanged."""
    return arr.todense() if isinstance(arr, JAXSparse) else jnp.asarray(arr)


def random_bcoo(key, shape, *, dtype=np.float32, indices_dtype=None, nse=0.2, n_batch=0,
                n_dense=0, unique_indices=True, sorted_indices=False,
                generator=random.uniform, **kwds):
    """A random BCOO array, drawn as JAX draws it (the same values for the same key): `nse`
    stored elements per batch (a fraction of the sparse size if below 1), indices from
    `random.choice` (without replacement if `unique_indices`), data from `generator`."""
    shape = tuple(operator.index(s) for s in shape)
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > len(shape):
        raise ValueError(f"Invalid n_batch={n_batch}, n_dense={n_dense} for shape={shape}")
    n_sparse = len(shape) - n_batch - n_dense
    batch, sparse, dense = (shape[:n_batch], shape[n_batch:n_batch + n_sparse],
                            shape[n_batch + n_sparse:])
    sparse_size = math.prod(sparse)
    if not 0 <= nse < sparse_size:
        raise ValueError(f"got nse={nse}, expected to be between 0 and {sparse_size}")
    if 0 < nse < 1:
        nse = int(math.ceil(nse * sparse_size))
    nse = operator.index(nse)
    indices_dtype = np.dtype(indices_dtype or np.int32)
    if sparse_size > np.iinfo(indices_dtype).max:
        raise ValueError(f"indices_dtype={indices_dtype} does not have enough range to "
                         f"generate sparse indices of size {sparse_size}.")
    keys = random.split(key, math.prod(batch) + 1)
    data = generator(keys[0], shape=batch + (nse,) + dense, dtype=dtype, **kwds)
    rows = []
    for i in range(math.prod(batch)):
        if sparse:
            flat = random.choice(keys[1 + i], sparse_size, shape=(nse,),
                                 replace=not unique_indices).astype(indices_dtype)
            rows.append(jnp.stack(jnp.unravel_index(flat, sparse), axis=-1)
                        .astype(indices_dtype))
        else:
            rows.append(jnp.zeros((nse, 0), indices_dtype))
    indices = jnp.stack(rows).reshape(batch + (nse, n_sparse))
    mat = BCOO((data, indices), shape=shape)
    return mat.sort_indices() if sorted_indices else mat
