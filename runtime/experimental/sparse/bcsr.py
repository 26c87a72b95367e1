"""`BCSR`, JAX's batched compressed-sparse-row format: `data` of shape `batch + (nse,) +
dense`, column `indices` of shape `batch + (nse,)` and row pointers `indptr` of shape
`batch + (rows + 1,)` (the elements of row r are `indptr[r]:indptr[r+1]`). The two sparse
dimensions are the rows and columns after the batch dimensions.

Conversions go through `BCOO` (`to_bcoo`, `from_bcoo`), and so do `todense` and products;
like `BCOO` everything is written over `kiln.numpy`, so it runs eagerly and under the
transformations.
"""
import operator

import numpy as np

from ... import numpy as jnp
from ... import lax
from ...tree_util import register_pytree_node_class
from ._base import JAXSparse
from .bcoo import BCOO, bcoo_dot_general, bcoo_fromdense

__all__ = ["BCSR", "bcsr_fromdense", "bcsr_todense", "bcsr_dot_general"]


def _rows_of(indices, indptr):
    """The row of each stored element (rows for padding past indptr[-1])."""
    pos = lax.broadcasted_iota(indptr.dtype, indices.shape, indices.ndim - 1)
    return jnp.sum(indptr[..., None, 1:] <= pos[..., :, None], axis=-1).astype(indices.dtype)


@register_pytree_node_class
class BCSR(JAXSparse):
    """A sparse array in batched CSR format: `BCSR((data, indices, indptr), shape=...)`."""

    def __init__(self, args, *, shape, indices_sorted=False, unique_indices=False):
        data, indices, indptr = args
        self.data, self.indices, self.indptr = map(jnp.asarray, (data, indices, indptr))
        self.shape = tuple(operator.index(s) for s in shape)
        self.indices_sorted = bool(indices_sorted)
        self.unique_indices = bool(unique_indices)
        nb = self.indices.ndim - 1
        if nb < 0 or len(self.shape) < nb + 2:
            raise ValueError(f"BCSR: indices of shape {tuple(self.indices.shape)} do not fit "
                             f"shape {self.shape}: BCSR needs 2 sparse dimensions")
        if tuple(self.indptr.shape[nb:]) != (self.shape[nb] + 1,):
            raise ValueError(f"BCSR: indptr must have shape batch + ({self.shape[nb] + 1},) "
                             f"for shape {self.shape}, got {tuple(self.indptr.shape)}")

    def tree_flatten(self):
        return ((self.data, self.indices, self.indptr),
                (self.shape, self.indices_sorted, self.unique_indices))

    @classmethod
    def tree_unflatten(cls, aux, children):
        shape, indices_sorted, unique_indices = aux
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        obj.shape, obj.indices_sorted, obj.unique_indices = shape, indices_sorted, unique_indices
        indptr = obj.indptr
        if hasattr(indptr, "ndim") and indptr.ndim != len(shape) - 1 - obj.n_dense:
            raise ValueError(
                f"BCSR: kiln.vmap cannot map a BCSR array (shape {tuple(shape)}): its leaves "
                f"came back with shapes {tuple(obj.data.shape)}, {tuple(obj.indices.shape)}, "
                f"{tuple(indptr.shape)}. Map its BCOO form (to_bcoo()) instead.")
        return obj

    @property
    def nse(self):
        return self.indices.shape[-1]

    @property
    def n_batch(self):
        return self.indices.ndim - 1

    @property
    def n_sparse(self):
        return 2

    @property
    def n_dense(self):
        return self.data.ndim - 1 - self.n_batch

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32, n_dense=0, n_batch=0):
        """A BCSR array holding the nonzero elements of the dense `mat`."""
        return bcsr_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    @classmethod
    def from_bcoo(cls, arr):
        """The BCSR form of a BCOO array with 2 sparse dimensions (its indices are sorted
        first unless they are known to be). As in JAX, the result claims neither sorted nor
        unique indices."""
        if arr.n_sparse != 2:
            raise NotImplementedError(f"BSCR.from_bcoo requires n_sparse=2; got "
                                      f"arr.n_sparse={arr.n_sparse}")
        if not arr.indices_sorted:
            arr = arr.sort_indices()
        nb = arr.n_batch
        batch = tuple(max(a, b) for a, b in zip(arr.data.shape[:nb], arr.indices.shape[:nb]))
        ind = jnp.broadcast_to(arr.indices, batch + arr.indices.shape[nb:])
        data = jnp.broadcast_to(arr.data, batch + arr.data.shape[nb:])
        rows = ind[..., 0]
        n_rows = arr.shape[nb]
        ok = (rows >= 0) & (rows < n_rows)
        bidx = tuple(lax.broadcasted_iota(np.int32, rows.shape, d) for d in range(nb))
        counts = jnp.zeros(batch + (n_rows,), ind.dtype).at[bidx + (jnp.where(ok, rows, 0),)] \
            .add(ok.astype(ind.dtype))
        indptr = jnp.concatenate([jnp.zeros(batch + (1,), ind.dtype),
                                  jnp.cumsum(counts, axis=-1).astype(ind.dtype)], axis=-1)
        return cls((data, ind[..., 1], indptr), shape=arr.shape)

    def to_bcoo(self):
        """The same array as BCOO (row indices from `indptr`)."""
        rows = _rows_of(self.indices, self.indptr)
        return BCOO((self.data, jnp.stack([rows, self.indices], axis=-1)), shape=self.shape)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32", n_dense=0, n_batch=0, nse=0):
        if len(shape) - n_batch - n_dense != 2:
            raise ValueError("BCSR arrays must have 2 sparse dimensions, got shape "
                             f"{tuple(shape)} with n_batch={n_batch}, n_dense={n_dense}")
        return cls.from_bcoo(BCOO._empty(shape, dtype=dtype, index_dtype=index_dtype,
                                         n_dense=n_dense, n_batch=n_batch, nse=nse))

    @classmethod
    def _eye(cls, N, M, k, *, dtype=None, index_dtype="int32", n_batch=0, n_dense=0):
        if n_batch or n_dense:
            raise ValueError("BCSR eye has 2 sparse dimensions: n_batch = n_dense = 0")
        return cls.from_bcoo(BCOO._eye(N, M, k, dtype=dtype, index_dtype=index_dtype))

    def todense(self):
        """The dense array this BCSR represents."""
        return bcsr_todense(self)

    def transpose(self, *args, **kwargs):
        raise NotImplementedError("Tranpose is not implemented.")

    def sum_duplicates(self, nse=None, remove_zeros=True):
        """Duplicates summed (and, with `remove_zeros`, explicit zeros dropped), as BCSR."""
        return BCSR.from_bcoo(self.to_bcoo().sum_duplicates(nse=nse, remove_zeros=remove_zeros))

    def __matmul__(self, other):
        return self.to_bcoo() @ other

    def __rmatmul__(self, other):
        return other @ self.to_bcoo()

    def __mul__(self, other):
        return BCSR.from_bcoo(self.to_bcoo() * other)

    __rmul__ = __mul__

    def __neg__(self):
        return BCSR((-self.data, self.indices, self.indptr), shape=self.shape,
                    indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)


def bcsr_fromdense(mat, *, nse=None, n_batch=0, n_dense=0, index_dtype=np.int32):
    """The BCSR array of the nonzero elements of `mat` (2 sparse dimensions after `n_batch`
    batch dimensions; `nse` as for `bcoo_fromdense`)."""
    mat = jnp.asarray(mat)
    if mat.ndim - n_batch - n_dense != 2:
        raise ValueError("bcsr_fromdense: must have 2 sparse dimensions.")
    return BCSR.from_bcoo(bcoo_fromdense(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                         index_dtype=index_dtype))


def bcsr_todense(mat):
    """The dense array of a BCSR array."""
    return mat.to_bcoo().todense()


def bcsr_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """`lax.dot_general` with a BCSR operand and a dense one (through BCOO)."""
    lhs = lhs.to_bcoo() if isinstance(lhs, BCSR) else lhs
    rhs = rhs.to_bcoo() if isinstance(rhs, BCSR) else rhs
    return bcoo_dot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                            preferred_element_type=preferred_element_type)
