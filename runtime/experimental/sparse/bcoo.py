"""`BCOO`, JAX's batched coordinate format, and the operations on it, written over `kiln.numpy`
and `kiln.lax` (gathers, scatter-adds, sorts and `dot_general`), so they run eagerly, under
`kiln.jit`, `kiln.grad` and `kiln.vmap`, and on every backend.

A BCOO array of shape `batch + sparse + dense` stores `data` of shape `batch + (nse,) + dense`
and `indices` of shape `batch + (nse, n_sparse)`: each of the `nse` stored elements of each
batch has its sparse coordinates in `indices` and its value (a block over the dense dimensions)
in `data`. A batch dimension of `data` or `indices` may be 1 where the other's is not
(broadcast). Duplicate indices are summed; indices out of bounds (padding: `fromdense` and
`sum_duplicates` pad with the sparse shape itself) are ignored.

Every operation here masks out-of-bounds elements before it scatters or gathers, so padding
contributes nothing to values and gets a zero derivative, whatever a backend does with
out-of-bounds indices.
"""
import math
import operator

import numpy as np

from ... import numpy as jnp
from ... import lax
from ...tree_util import register_pytree_node_class
from ._base import JAXSparse, concrete_nse

__all__ = ["BCOO", "bcoo_fromdense", "bcoo_todense", "bcoo_extract", "bcoo_transpose",
           "bcoo_sort_indices", "bcoo_sum_duplicates", "bcoo_dot_general",
           "bcoo_dot_general_sampled", "bcoo_reduce_sum", "bcoo_broadcast_in_dim",
           "bcoo_reshape", "bcoo_multiply_dense", "bcoo_multiply_sparse", "bcoo_concatenate"]


def _layout(data, indices, shape):
    """(n_batch, n_sparse, n_dense, nse) of a BCOO's buffers, with JAX's checks."""
    if indices.ndim < 2:
        raise ValueError(f"BCOO: indices must have at least 2 dimensions (..., nse, n_sparse), "
                         f"got shape {tuple(indices.shape)}")
    n_batch, n_sparse, nse = indices.ndim - 2, indices.shape[-1], indices.shape[-2]
    n_dense = len(shape) - n_batch - n_sparse
    if n_dense < 0:
        raise ValueError(f"BCOO: indices of shape {tuple(indices.shape)} (n_batch={n_batch}, "
                         f"n_sparse={n_sparse}) do not fit shape {tuple(shape)}")
    for what, buf in (("data", data), ("indices", indices)):
        for i in range(n_batch):
            if buf.shape[i] not in (1, shape[i]):
                raise ValueError(f"BCOO: {what} batch dimension {i} has size {buf.shape[i]}, "
                                 f"incompatible with shape {tuple(shape)}")
    expected = tuple(data.shape[:n_batch]) + (nse,) + tuple(shape[n_batch + n_sparse:])
    if tuple(data.shape) != expected:
        raise ValueError(f"BCOO: data of shape {tuple(data.shape)} does not match indices of "
                         f"shape {tuple(indices.shape)} and shape {tuple(shape)}: expected "
                         f"data shape {expected}")
    return n_batch, n_sparse, n_dense, nse


def _sparse_bound(indices, sparse_shape):
    return jnp.array(sparse_shape, dtype=indices.dtype) if sparse_shape else \
        jnp.zeros((0,), indices.dtype)


def _valid(indices, sparse_shape):
    """Which stored elements are in bounds: batch + (nse,) booleans."""
    if not sparse_shape:
        return jnp.ones(indices.shape[:-1], bool)
    bound = _sparse_bound(indices, sparse_shape)
    return jnp.all((indices >= 0) & (indices < bound), axis=-1)


def _expand_to(mask, ndim):
    return lax.expand_dims(mask, tuple(range(mask.ndim, ndim))) if ndim > mask.ndim else mask


def _flat(mat):
    """The stored elements of `mat` as a flat list: (values (N,)+dense, coordinates (N, n_batch +
    n_sparse) with out-of-bounds ones moved to 0, validity (N,)), N = prod(batch) * nse."""
    nb, ns, nse = mat.n_batch, mat.n_sparse, mat.nse
    batch = tuple(mat.shape[:nb])
    data = jnp.broadcast_to(mat.data, batch + tuple(mat.data.shape[nb:]))
    indices = jnp.broadcast_to(mat.indices, batch + (nse, ns))
    valid = _valid(indices, mat.shape[nb:nb + ns])
    cols = [lax.broadcasted_iota(indices.dtype, batch + (nse,), d) for d in range(nb)]
    cols += [jnp.where(valid, indices[..., k], 0) for k in range(ns)]
    n = math.prod(batch) * nse
    coords = (jnp.stack([c.reshape(n) for c in cols], axis=-1) if cols
              else jnp.zeros((n, 0), indices.dtype))
    valid = valid.reshape(n)
    values = data.reshape((n,) + tuple(data.shape[nb + 1:]))
    values = jnp.where(_expand_to(valid, values.ndim), values, jnp.zeros((), values.dtype))
    return values, coords, valid


@register_pytree_node_class
class BCOO(JAXSparse):
    """A sparse array in batched COO format: `BCOO((data, indices), shape=...)`.

    `data` has shape `batch + (nse,) + dense`, `indices` shape `batch + (nse, n_sparse)`;
    duplicates are summed and out-of-bounds indices ignored. A pytree whose leaves are `data`
    and `indices`; `shape`, `indices_sorted` and `unique_indices` are static."""

    def __init__(self, args, *, shape, indices_sorted=False, unique_indices=False):
        data, indices = args
        self.data, self.indices = jnp.asarray(data), jnp.asarray(indices)
        self.shape = tuple(operator.index(s) for s in shape)
        self.indices_sorted = bool(indices_sorted)
        self.unique_indices = bool(unique_indices)
        _layout(self.data, self.indices, self.shape)

    # -- pytree: under kiln.vmap a mapped batch axis is removed from (or added to) the leaves,
    # and the static shape follows them; the layout in the treedef tells a batch axis from
    # another.
    def tree_flatten(self):
        layout = (self.n_batch, self.n_sparse, self.nse)
        return (self.data, self.indices), (self.shape, self.indices_sorted,
                                           self.unique_indices, layout)

    @classmethod
    def tree_unflatten(cls, aux, children):
        shape, indices_sorted, unique_indices, (n_batch, n_sparse, nse) = aux
        obj = object.__new__(cls)
        obj.data, obj.indices = children
        obj.indices_sorted, obj.unique_indices = indices_sorted, unique_indices
        data, indices = obj.data, obj.indices
        if hasattr(indices, "ndim") and hasattr(data, "ndim") and indices.ndim != n_batch + 2:
            # kiln.vmap removed (or added) an axis of the leaves: it must be a batch axis.
            nb = indices.ndim - 2
            n_dense = len(shape) - n_batch - n_sparse
            if (nb < 0 or tuple(indices.shape[-2:]) != (nse, n_sparse)
                    or data.ndim - 1 - nb != n_dense or data.ndim - 1 - nb < 0
                    or data.shape[nb] != nse):
                raise ValueError(
                    f"BCOO: a mapped axis (vmap's in_axes / out_axes) must be a batch "
                    f"dimension of the BCOO array, and this array has n_batch={n_batch} "
                    f"(shape {tuple(shape)}, nse={nse}): its leaves came back with shapes "
                    f"{tuple(data.shape)} and {tuple(indices.shape)}. Map a batch dimension, or "
                    f"convert with BCOO.fromdense(..., n_batch=...) first.")
            batch = tuple(max(d, i) for d, i in zip(data.shape[:nb], indices.shape[:nb]))
            shape = batch + tuple(shape[n_batch:])
        obj.shape = tuple(shape)
        return obj

    # -- layout
    @property
    def nse(self):
        return self.indices.shape[-2]

    @property
    def n_batch(self):
        return self.indices.ndim - 2

    @property
    def n_sparse(self):
        return self.indices.shape[-1]

    @property
    def n_dense(self):
        return self.data.ndim - 1 - self.n_batch

    # -- constructors
    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32, n_dense=0, n_batch=0):
        """A BCOO array holding the nonzero elements of the dense `mat`."""
        return bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    @classmethod
    def from_scipy_sparse(cls, mat, *, index_dtype=None, n_dense=0, n_batch=0):
        """A BCOO array from a `scipy.sparse` matrix (n_batch = n_dense = 0, as in JAX)."""
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCOO.fromscipy with nonzero n_dense/n_batch")
        mat = mat.tocoo()
        indices = np.column_stack((mat.row, mat.col)).astype(index_dtype or np.int32)
        return cls((jnp.asarray(mat.data), jnp.asarray(indices)), shape=mat.shape)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32", n_dense=0, n_batch=0, nse=0):
        shape = tuple(shape)
        n_sparse = len(shape) - n_dense - n_batch
        if n_sparse < 0 or n_dense < 0 or n_batch < 0 or nse < 0:
            raise ValueError(f"Invalid inputs: shape={shape}, n_dense={n_dense}, "
                             f"n_batch={n_batch}, nse={nse}")
        batch, sparse, dense = (shape[:n_batch], shape[n_batch:n_batch + n_sparse],
                                shape[n_batch + n_sparse:])
        data = jnp.zeros(batch + (nse,) + dense, dtype)
        indices = jnp.broadcast_to(jnp.array(sparse, index_dtype).reshape(n_sparse),
                                   batch + (nse, n_sparse))
        return cls((data, indices), shape=shape, indices_sorted=True, unique_indices=True)

    @classmethod
    def _eye(cls, N, M, k, *, dtype=None, index_dtype="int32", n_batch=0, n_dense=0):
        if 2 - n_batch - n_dense < 0 or n_dense < 0 or n_batch < 0:
            raise ValueError(f"Invalid inputs: shape={(N, M)}, n_dense={n_dense}, "
                             f"n_batch={n_batch}")
        diag = min(N, M - k) if k > 0 else min(N + k, M)
        if diag <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype, n_batch=n_batch,
                              n_dense=n_dense)
        if n_dense > 0 or n_batch > 1:
            return cls.fromdense(jnp.eye(N, M, k, dtype=dtype), n_batch=n_batch,
                                 n_dense=n_dense, index_dtype=index_dtype)
        if n_batch == 0:
            i = np.arange(diag)
            indices = np.stack([i - min(k, 0), i + max(k, 0)], axis=-1).astype(index_dtype)
            data = jnp.ones(diag, dtype)
        else:
            rows = np.arange(N)
            cols = rows + k
            keep = (cols >= 0) & (cols < M)
            data = jnp.asarray(np.where(keep, 1, 0)[:, None], dtype=dtype or jnp.float32)
            indices = np.where(keep, cols, M).astype(index_dtype)[:, None, None]
        return cls((data, jnp.asarray(indices)), shape=(N, M), indices_sorted=True,
                   unique_indices=True)

    # -- conversions and layout changes
    def todense(self):
        """The dense array this BCOO represents."""
        return bcoo_todense(self)

    def sort_indices(self):
        """A copy with each batch's indices in lexicographic order (duplicates kept)."""
        return bcoo_sort_indices(self)

    def sum_duplicates(self, nse=None, remove_zeros=True):
        """A copy with duplicate indices summed, indices sorted, and (with `remove_zeros`)
        explicitly stored zeros dropped. `nse` fixes the output's size (needed under `jit`):
        extra room is padded, too little drops elements."""
        if not remove_zeros:
            return bcoo_sum_duplicates(self, nse=nse)
        zero = jnp.all(self.data == 0, axis=tuple(range(self.n_batch + 1, self.data.ndim)))
        nb = self.n_batch
        batch = tuple(max(a, b) for a, b in zip(zero.shape[:nb], self.indices.shape[:nb]))
        zero = jnp.broadcast_to(zero, batch + (self.nse,))
        fill = _sparse_bound(self.indices, self.shape[nb:nb + self.n_sparse])
        indices = jnp.where(zero[..., None], fill,
                            jnp.broadcast_to(self.indices, batch + self.indices.shape[nb:]))
        return bcoo_sum_duplicates(BCOO((self.data, indices), shape=self.shape), nse=nse)

    def transpose(self, axes=None):
        """The transpose; `axes` must permute batch, sparse and dense dimensions among
        themselves."""
        perm = list(range(self.ndim))[::-1] if axes is None else list(axes)
        out = bcoo_transpose(self, permutation=perm)
        sparse_perm = [p - self.n_batch for p in perm[self.n_batch:self.n_batch + self.n_sparse]]
        sorted_ = self.indices_sorted and sparse_perm == list(range(self.n_sparse))
        return BCOO((out.data, out.indices), shape=out.shape, indices_sorted=sorted_,
                    unique_indices=self.unique_indices)

    def reshape(self, *new_sizes, dimensions=None):
        if len(new_sizes) == 1 and isinstance(new_sizes[0], (tuple, list)):
            new_sizes = tuple(new_sizes[0])
        new_sizes = _resolve_minus_one(new_sizes, self.size)
        return bcoo_reshape(self, new_sizes=new_sizes, dimensions=dimensions)

    def astype(self, dtype):
        return BCOO((self.data.astype(dtype), self.indices), shape=self.shape,
                    indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)

    def update_layout(self, *, n_batch=None, n_dense=None, on_inefficient="error"):
        """The same array with another n_batch / n_dense (only lowering n_batch, and only to
        0, is supported: each element's index gets its batch coordinates in front)."""
        if n_dense not in (None, self.n_dense) or n_batch not in (None, self.n_batch, 0):
            raise NotImplementedError(
                f"BCOO.update_layout: kiln converts only to n_batch=0 with the same n_dense; "
                f"got n_batch={n_batch}, n_dense={n_dense} for {self!r}")
        if n_batch in (None, self.n_batch):
            return self
        nb = self.n_batch
        batch, rest = tuple(self.shape[:nb]), (self.nse, self.n_sparse)
        n = math.prod(batch) * self.nse
        indices = jnp.broadcast_to(self.indices, batch + rest).reshape(n, self.n_sparse)
        cols = [lax.broadcasted_iota(self.indices.dtype, batch + (self.nse,), d).reshape(n, 1)
                for d in range(nb)]
        data = jnp.broadcast_to(self.data, batch + tuple(self.data.shape[nb:]))
        return BCOO((data.reshape((n,) + tuple(self.data.shape[nb + 1:])),
                     jnp.concatenate(cols + [indices], axis=1)), shape=self.shape)

    def sum(self, axis=None):
        axes = tuple(range(self.ndim)) if axis is None else \
            tuple(a % self.ndim for a in ((axis,) if isinstance(axis, int) else axis))
        out = bcoo_reduce_sum(self, axes=axes)
        return out.todense() if out.ndim == 0 else out

    def __getitem__(self, index):
        raise NotImplementedError(
            f"indexing a BCOO array ({self!r}[{index!r}]) is not implemented in kiln (JAX's "
            f"bcoo_slice / bcoo_gather): index its dense form, mat.todense()[...], or select "
            f"with a product by a dense mask")

    # -- arithmetic
    def __neg__(self):
        return BCOO((-self.data, self.indices), shape=self.shape,
                    indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)

    def __pos__(self):
        return self

    def __abs__(self):
        if not self.unique_indices:
            raise NotImplementedError(
                "abs of a BCOO array with possibly duplicate indices: call sum_duplicates() "
                "first (|a| + |b| is not |a + b|)")
        return _with_data(self, jnp.abs(self.data))

    def __mul__(self, other):
        if isinstance(other, BCOO):
            return bcoo_multiply_sparse(self, other)
        other = jnp.asarray(other)
        return _with_data(self, bcoo_multiply_dense(self, other))

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, BCOO):
            raise NotImplementedError("division by a sparse array would divide by its "
                                      "implicit zeros; divide by a dense array or a scalar")
        return self * (1 / jnp.asarray(other))

    def __pow__(self, exponent):
        if not isinstance(exponent, int) or exponent <= 0:
            raise NotImplementedError(
                f"sparse rule for integer_pow with non-positive exponent {exponent} is not "
                f"implemented because it would result in dense output. If this is your "
                f"intent, use sparse.todense() to convert your argument to a dense array.")
        if not self.unique_indices:
            raise NotImplementedError("power of a BCOO array with possibly duplicate indices: "
                                      "call sum_duplicates() first")
        return _with_data(self, self.data ** exponent)

    def __add__(self, other):
        return _add(self, other, 1)

    __radd__ = __add__

    def __sub__(self, other):
        return _add(self, other, -1)

    def __rsub__(self, other):
        return _add(-self, other, 1)

    def __matmul__(self, other):
        return _matmul(self, other)

    def __rmatmul__(self, other):
        return _matmul(other, self)


def _with_data(mat, data):
    return BCOO((data, mat.indices), shape=mat.shape, indices_sorted=mat.indices_sorted,
                unique_indices=mat.unique_indices)


def _resolve_minus_one(sizes, total):
    sizes = [operator.index(s) for s in sizes]
    if sizes.count(-1) == 1:
        rest = math.prod(s for s in sizes if s != -1)
        sizes[sizes.index(-1)] = total // rest if rest else 0
    return tuple(sizes)


def _add(mat, other, sign, same_indices=False):
    """mat + sign * other: sparse + sparse of one layout concatenates the stored elements
    (adds the values when `same_indices`: both derive from one array's indices, as sparsify
    tracks), as JAX does; sparse + dense is dense."""
    if isinstance(other, BCOO):
        if other.shape != mat.shape:
            raise NotImplementedError("Addition between sparse matrices of different shapes.")
        if (other.n_batch, other.n_dense) != (mat.n_batch, mat.n_dense):
            raise NotImplementedError(
                "Addition between sparse matrices with different batch/dense dimensions.")
        other = -other if sign < 0 else other
        if same_indices:
            return _with_data(mat, mat.data + other.data.astype(mat.dtype))
        return _concatenate_elements(mat, other)
    if sign < 0:
        raise NotImplementedError("Subtraction between sparse and dense array.")
    other = jnp.asarray(other)
    if tuple(other.shape) != mat.shape:
        raise NotImplementedError(
            "Addition between a sparse array X and a dense array Y is not implemented when "
            f"the output shape is larger than Y.shape: got X.shape={mat.shape}, "
            f"Y.shape={tuple(other.shape)}")
    return mat.todense() + other


def _concatenate_elements(a, b):
    """The stored elements of `a` then `b` (same shape and layout) as one BCOO: their sum."""
    nb = a.n_batch
    batch = tuple(a.shape[:nb])
    da = jnp.broadcast_to(a.data, batch + a.data.shape[nb:])
    db = jnp.broadcast_to(b.data, batch + b.data.shape[nb:])
    ia = jnp.broadcast_to(a.indices, batch + a.indices.shape[nb:])
    ib = jnp.broadcast_to(b.indices, batch + b.indices.shape[nb:])
    dtype = jnp.result_type(a.dtype, b.dtype)
    return BCOO((jnp.concatenate([da.astype(dtype), db.astype(dtype)], axis=nb),
                 jnp.concatenate([ia, ib.astype(ia.dtype)], axis=nb)), shape=a.shape)


def _matmul(lhs, rhs):
    """`lhs @ rhs` with one BCOO operand, with matmul's rules for vectors and for leading batch
    dimensions (which must be equal: they are not broadcast)."""
    if not isinstance(lhs, BCOO):
        lhs = jnp.asarray(lhs)
    if not isinstance(rhs, BCOO):
        rhs = jnp.asarray(rhs)
    ls, rs = tuple(lhs.shape), tuple(rhs.shape)
    if not ls or not rs:
        raise ValueError(f"matmul: operands must have at least one dimension, got shapes {ls} "
                         f"and {rs}")
    if len(ls) > 2 and len(rs) > 2 and ls[:-2] != rs[:-2] or \
            len(ls) > 2 and len(rs) == 2 or len(ls) == 2 and len(rs) > 2:
        raise NotImplementedError(
            f"matmul of shapes {ls} and {rs} with a sparse operand: leading batch dimensions "
            f"must be equal on both sides (kiln does not broadcast them here); use "
            f"bcoo_dot_general with explicit dimension_numbers")
    n_batch = max(len(ls), len(rs)) - 2 if len(ls) > 1 and len(rs) > 1 else 0
    batch = tuple(range(n_batch))
    dn = (((len(ls) - 1,), (max(len(rs) - 2, 0),)), (batch, batch))
    return bcoo_dot_general(lhs, rhs, dimension_numbers=dn)


# --------------------------------------------------------------------- conversions

def bcoo_todense(mat):
    """The dense array of a BCOO array (duplicates summed, out-of-bounds elements dropped)."""
    values, coords, _ = _flat(mat)
    if coords.shape[-1] == 0:
        out = jnp.sum(values, axis=0).astype(mat.dtype) if values.shape[0] else \
            jnp.zeros(mat.shape, mat.dtype)
        return jnp.broadcast_to(out, mat.shape)
    idx = tuple(coords[:, k] for k in range(coords.shape[-1]))
    return jnp.zeros(mat.shape, mat.dtype).at[idx].add(values)


def bcoo_extract(sparr, arr, *, assume_unique=None):
    """A BCOO with `sparr`'s indices and the values of dense `arr` there (0 out of bounds;
    when indices repeat and not `assume_unique`, the value goes to the first of them and the
    others get 0)."""
    arr = jnp.asarray(arr)
    if tuple(arr.shape) != sparr.shape:
        raise ValueError(f"bcoo_extract: array shape {tuple(arr.shape)} must match sparse "
                         f"shape {sparr.shape}")
    if assume_unique is None:
        assume_unique = sparr.unique_indices
    data = _gather_at(sparr, arr)
    if not assume_unique:
        data = jnp.where(_expand_to(_first_occurrence(sparr), data.ndim), data,
                         jnp.zeros((), data.dtype))
    return BCOO((data, sparr.indices), shape=sparr.shape, indices_sorted=sparr.indices_sorted,
                unique_indices=sparr.unique_indices)


def _first_occurrence(mat):
    """batch + (nse,) booleans: whether each stored element is the first with its index (a
    stable sort groups equal indices in their original order)."""
    nb, ns, nse = mat.n_batch, mat.n_sparse, mat.nse
    batch = tuple(mat.shape[:nb])
    position = lax.broadcasted_iota(np.int32, batch + (nse,), nb)
    if ns == 0:
        return position == 0
    ind = jnp.broadcast_to(mat.indices, batch + (nse, ns))
    *cols, perm = lax.sort(tuple(ind[..., k] for k in range(ns)) + (position,),
                           dimension=nb, num_keys=ns, is_stable=True)
    srt = jnp.stack(cols, axis=-1)
    head = jnp.ones(batch + (min(1, nse),), bool)
    starts = jnp.concatenate([head, jnp.any(srt[..., 1:, :] != srt[..., :-1, :], axis=-1)],
                             axis=nb)
    batch_idx = tuple(lax.broadcasted_iota(np.int32, batch + (nse,), d) for d in range(nb))
    return jnp.zeros(batch + (nse,), bool).at[batch_idx + (perm,)].set(starts)


def _gather_at(mat, arr):
    """arr's values at mat's stored elements, shaped like mat.data (batch dims full)."""
    values, coords, valid = _flat(mat)
    nb = mat.n_batch
    batch = tuple(mat.shape[:nb])
    if coords.shape[-1]:
        got = arr[tuple(coords[:, k] for k in range(coords.shape[-1]))]
    else:
        got = jnp.broadcast_to(arr[None], (coords.shape[0],) + tuple(arr.shape))
    got = jnp.where(_expand_to(valid, got.ndim), got, jnp.zeros((), got.dtype))
    return got.reshape(batch + (mat.nse,) + tuple(got.shape[1:]))


def bcoo_fromdense(mat, *, nse=None, n_batch=0, n_dense=0, index_dtype=np.int32):
    """The BCOO array of the nonzero elements of `mat` (whose last `n_dense` dimensions are
    stored densely, first `n_batch` as batch dimensions). `nse` (the number of stored elements
    per batch) defaults to the largest count of nonzeros, which needs concrete values: pass it
    under `jit`. Padding has out-of-bounds indices (the sparse shape) and zero data."""
    mat = jnp.asarray(mat)
    n_sparse = mat.ndim - n_batch - n_dense
    if n_sparse < 0 or n_batch < 0 or n_dense < 0:
        raise ValueError(f"bcoo_fromdense: invalid n_batch={n_batch}, n_dense={n_dense} for "
                         f"an array of shape {tuple(mat.shape)}")
    mask = mat != 0
    if n_dense:
        mask = jnp.any(mask, axis=tuple(range(mat.ndim - n_dense, mat.ndim)))
    batch = tuple(mat.shape[:n_batch])
    sparse = tuple(mat.shape[n_batch:n_batch + n_sparse])
    flat_mask = mask.reshape(batch + (math.prod(sparse),))
    counts = jnp.sum(flat_mask, axis=-1)
    if nse is None:
        nse = concrete_nse(counts, "nonzeros", "bcoo_fromdense")
    nse = operator.index(nse)
    size = math.prod(sparse)
    # Position of each stored element: the k-th nonzero of each batch, in row-major order.
    # A stable sort of "is zero" puts the nonzeros first in their order.
    keys = (~flat_mask).astype(np.int32)
    pos = lax.broadcasted_iota(np.int32, flat_mask.shape, n_batch)
    _, order = lax.sort((keys, pos), dimension=n_batch, num_keys=1, is_stable=True)
    if nse > size:
        pad = jnp.full(batch + (nse - size,), size, np.int32)
        order = jnp.concatenate([order, pad], axis=n_batch)
    order = order[..., :nse]
    live = lax.broadcasted_iota(np.int32, batch + (nse,), n_batch) < counts[..., None]
    flat_index = jnp.where(live, order, size)
    if n_sparse:
        cols = jnp.unravel_index(jnp.minimum(flat_index, max(size - 1, 0)), sparse)
        cols = [jnp.where(live, c, s) for c, s in zip(cols, sparse)]
        indices = jnp.stack(cols, axis=-1).astype(index_dtype)
    else:
        indices = jnp.zeros(batch + (nse, 0), index_dtype)
    # Values: gather the dense blocks at the flat positions.
    dense = tuple(mat.shape[n_batch + n_sparse:])
    flat = mat.reshape(batch + (size,) + dense)
    take = jnp.minimum(flat_index, max(size - 1, 0))
    take = take.reshape(take.shape + (1,) * n_dense)
    if size:
        data = jnp.take_along_axis(flat, jnp.broadcast_to(take, batch + (nse,) + dense),
                                   axis=n_batch)
    else:
        data = jnp.zeros(batch + (nse,) + dense, mat.dtype)
    data = jnp.where(_expand_to(live, data.ndim), data, jnp.zeros((), mat.dtype))
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


# --------------------------------------------------------------------- layout operations

def _check_permutation(mat, permutation):
    permutation = tuple(operator.index(p) for p in permutation)
    if sorted(permutation) != list(range(mat.ndim)):
        raise TypeError(f"bcoo_transpose: permutation {permutation} is not a permutation of "
                        f"{tuple(range(mat.ndim))} (shape {mat.shape})")
    nb, ns = mat.n_batch, mat.n_sparse
    bp, sp, dp = permutation[:nb], permutation[nb:nb + ns], permutation[nb + ns:]
    if (tuple(sorted(bp)) != tuple(range(nb)) or tuple(sorted(sp)) != tuple(range(nb, nb + ns))
            or tuple(sorted(dp)) != tuple(range(nb + ns, mat.ndim))):
        raise NotImplementedError(
            f"bcoo_transpose: permutation {permutation} mixes batch, sparse and dense "
            f"dimensions (n_batch={nb}, n_sparse={ns}, n_dense={mat.n_dense}); each kind must "
            f"be permuted among itself. Convert the layout with update_layout first.")
    return bp, tuple(p - nb for p in sp), tuple(p - nb - ns for p in dp)


def bcoo_transpose(mat, *, permutation):
    """The BCOO transpose (batch, sparse and dense dimensions each permuted among
    themselves)."""
    bp, sp, dp = _check_permutation(mat, permutation)
    nb = mat.n_batch
    data = jnp.transpose(mat.data, bp + (nb,) + tuple(nb + 1 + d for d in dp))
    indices = jnp.transpose(mat.indices, bp + (nb, nb + 1))
    if sp:
        indices = indices[..., np.array(sp, dtype=np.int32)]
    shape = tuple(mat.shape[p] for p in permutation)
    return BCOO((data, indices), shape=shape)


def bcoo_sort_indices(mat):
    """Each batch's stored elements sorted lexicographically by index (duplicates kept)."""
    if mat.n_sparse == 0:
        return mat
    nb = mat.n_batch
    batch = tuple(max(a, b) for a, b in zip(mat.data.shape[:nb], mat.indices.shape[:nb]))
    indices = jnp.broadcast_to(mat.indices, batch + mat.indices.shape[nb:])
    data = jnp.broadcast_to(mat.data, batch + mat.data.shape[nb:])
    cols = tuple(indices[..., k] for k in range(mat.n_sparse))
    perm = lax.broadcasted_iota(np.int32, batch + (mat.nse,), nb)
    *cols, perm = lax.sort(cols + (perm,), dimension=nb, num_keys=mat.n_sparse)
    take = perm.reshape(perm.shape + (1,) * mat.n_dense)
    data = jnp.take_along_axis(data, jnp.broadcast_to(take, data.shape), axis=nb)
    return BCOO((data, jnp.stack(cols, axis=-1)), shape=mat.shape, indices_sorted=True,
                unique_indices=mat.unique_indices)


def bcoo_sum_duplicates(mat, nse=None):
    """Duplicates summed and indices sorted per batch (explicit zeros kept). The output has
    `nse` stored elements (default: the largest count of distinct in-bounds indices, which
    needs concrete values); padding has out-of-bounds indices."""
    nb, ns = mat.n_batch, mat.n_sparse
    batch = tuple(max(a, b) for a, b in zip(mat.data.shape[:nb], mat.indices.shape[:nb]))
    if ns == 0:
        data = jnp.sum(jnp.broadcast_to(mat.data, batch + mat.data.shape[nb:]), axis=nb,
                       keepdims=True)
        out = BCOO((data, jnp.zeros(batch + (1, 0), mat.indices.dtype)), shape=mat.shape,
                   indices_sorted=True, unique_indices=True)
        return out if nse is None else _set_nse(out, nse)
    indices = jnp.broadcast_to(mat.indices, batch + mat.indices.shape[nb:])
    data = jnp.broadcast_to(mat.data, batch + mat.data.shape[nb:])
    fill = _sparse_bound(indices, mat.shape[nb:nb + ns])
    valid = _valid(indices, mat.shape[nb:nb + ns])
    indices = jnp.where(valid[..., None], indices, fill)
    n_in = mat.nse
    cols = tuple(indices[..., k] for k in range(ns))
    perm = lax.broadcasted_iota(np.int32, batch + (n_in,), nb)
    *cols, perm = lax.sort(cols + (perm,), dimension=nb, num_keys=ns)
    srt = jnp.stack(cols, axis=-1)
    if n_in:
        changed = jnp.any(srt[..., 1:, :] != srt[..., :-1, :], axis=-1)
        starts = jnp.concatenate([jnp.ones(batch + (1,), bool), changed], axis=nb)
    else:
        starts = jnp.zeros(batch + (0,), bool)
    group = jnp.cumsum(starts.astype(np.int32), axis=nb) - 1      # sorted element -> group
    is_fill = jnp.all(srt == fill, axis=-1)
    true_nse = jnp.sum(starts & ~is_fill, axis=nb)
    if nse is None:
        nse = concrete_nse(true_nse, "distinct indices", "bcoo_sum_duplicates")
    nse = operator.index(nse)
    # Group of each original element (inverse of the sort), and the group's index.
    inverse = jnp.zeros(batch + (n_in,), np.int32)
    batch_idx = tuple(lax.broadcasted_iota(np.int32, batch + (n_in,), d) for d in range(nb))
    inverse = inverse.at[batch_idx + (perm,)].set(group)
    keep = group < nse
    out_idx = jnp.broadcast_to(fill, batch + (nse, ns))
    # Every element of a group has the group's index, and the fill is no smaller in any
    # coordinate, so a scatter-min writes each group's index once and leaves the rest padded.
    slot = jnp.where(keep, group, 0)
    out_idx = out_idx.at[batch_idx + (slot,)].min(jnp.where(keep[..., None], srt, fill))
    keep_in = inverse < nse
    out_data = jnp.zeros(batch + (nse,) + mat.data.shape[nb + 1:], mat.dtype)
    contrib = jnp.where(_expand_to(keep_in, data.ndim), data, jnp.zeros((), data.dtype))
    out_data = out_data.at[batch_idx + (jnp.where(keep_in, inverse, 0),)].add(contrib)
    return BCOO((out_data, out_idx.astype(mat.indices.dtype)), shape=mat.shape,
                indices_sorted=True, unique_indices=True)


def _set_nse(mat, nse):
    nb = mat.n_batch
    if nse <= mat.nse:
        return BCOO((mat.data[(slice(None),) * nb + (slice(0, nse),)],
                     mat.indices[..., :nse, :]), shape=mat.shape,
                    indices_sorted=mat.indices_sorted, unique_indices=mat.unique_indices)
    extra = nse - mat.nse
    pad_d = jnp.zeros(mat.data.shape[:nb] + (extra,) + mat.data.shape[nb + 1:], mat.dtype)
    fill = _sparse_bound(mat.indices, mat.shape[nb:nb + mat.n_sparse])
    pad_i = jnp.broadcast_to(fill, mat.indices.shape[:nb] + (extra, mat.n_sparse))
    return BCOO((jnp.concatenate([mat.data, pad_d], axis=nb),
                 jnp.concatenate([mat.indices, pad_i], axis=nb)), shape=mat.shape,
                indices_sorted=mat.indices_sorted, unique_indices=mat.unique_indices)


def bcoo_reduce_sum(mat, *, axes):
    """Sum over `axes`, as a BCOO array: dense axes sum the data, sparse axes drop their index
    column, batch axes fold into the stored elements."""
    nb, ns = mat.n_batch, mat.n_sparse
    axes = sorted(set(operator.index(a) % max(mat.ndim, 1) for a in axes))
    data = mat.data
    dense_axes = tuple(a - ns + 1 for a in axes if a >= nb + ns)
    if dense_axes:
        data = jnp.sum(data, axis=dense_axes)
    indices = mat.indices
    if ns:
        data = jnp.where(_expand_to(_valid(indices, mat.shape[nb:nb + ns]), data.ndim), data,
                         jnp.zeros((), data.dtype))
    kept = [i for i in range(ns) if i + nb not in axes]
    indices = indices[..., np.array(kept, dtype=np.int32)] if kept else \
        jnp.zeros(indices.shape[:-1] + (0,), indices.dtype)
    batch_axes = [a for a in axes if a < nb]
    for a in batch_axes:
        size = mat.shape[a]
        if data.shape[a] == 1 and indices.shape[a] == 1:
            data = data * size
        elif data.shape[a] == 1:
            data = jnp.broadcast_to(data, data.shape[:a] + (size,) + data.shape[a + 1:])
        elif indices.shape[a] == 1:
            data = jnp.sum(data, axis=a, keepdims=True)
    # Move the summed batch axes next to nse and merge them into it.
    rest = [i for i in range(nb) if i not in batch_axes]
    order_d = rest + batch_axes + list(range(nb, data.ndim))
    order_i = rest + batch_axes + list(range(nb, indices.ndim))
    data = jnp.transpose(data, order_d)
    indices = jnp.transpose(indices, order_i)
    fold = math.prod(data.shape[len(rest):len(rest) + len(batch_axes)])
    data = data.reshape(data.shape[:len(rest)] + (fold * mat.nse,) +
                        data.shape[len(rest) + len(batch_axes) + 1:])
    indices = indices.reshape(indices.shape[:len(rest)] + (fold * mat.nse,) +
                              indices.shape[-1:])
    shape = tuple(s for i, s in enumerate(mat.shape) if i not in axes)
    return BCOO((data, indices), shape=shape)


def bcoo_broadcast_in_dim(mat, *, shape, broadcast_dimensions, sharding=None):
    """`lax.broadcast_in_dim` for BCOO: new leading dimensions become batch dimensions, new
    trailing ones dense; sparse dimensions cannot grow."""
    shape = tuple(shape)
    bd = tuple(broadcast_dimensions)
    if len(mat.shape) != len(bd):
        raise ValueError(f"mat.shape={mat.shape} and broadcast_dimensions={bd} must have the "
                         f"same length")
    nb, ns, nd = mat.n_batch, mat.n_sparse, mat.n_dense
    bdims, sdims, ddims = bd[:nb], bd[nb:nb + ns], bd[nb + ns:]
    if max(bdims, default=0) > min(sdims, default=len(shape)):
        raise ValueError("Cannot mix batch and sparse dimensions during broadcast_in_dim")
    if max(sdims, default=0) > min(ddims, default=len(shape)):
        raise ValueError("Cannot mix sparse and dense dimensions during broadcast_in_dim")
    new_nb = min(bd[nb:], default=len(shape))
    new_nd = nd and len(shape) - min(bd[-nd:])
    new_ns = len(shape) - new_nb - new_nd
    if (math.prod(mat.shape[nb:nb + ns]) !=
            math.prod(shape[new_nb:new_nb + new_ns])):
        raise NotImplementedError("Adding sparse dimensions with lengths != 1")
    data, indices = mat.data, mat.indices
    if (new_nb, new_nd) != (nb, nd):
        data = lax.broadcast_in_dim(
            data, shape[:new_nb] + (mat.nse,) + shape[new_nb + new_ns:],
            bdims + (new_nb,) + tuple(b + 1 - new_ns for b in ddims))
        indices = lax.broadcast_in_dim(indices, shape[:new_nb] + (mat.nse, ns),
                                       bdims + (new_nb, new_nb + 1))
    if new_ns != ns:
        cols = [jnp.zeros(indices.shape[:-1], indices.dtype)] * new_ns
        for k, d in enumerate(sdims):
            cols[d - new_nb] = indices[..., k]
        indices = jnp.stack(cols, axis=-1) if cols else \
            jnp.zeros(indices.shape[:-1] + (0,), indices.dtype)
    return BCOO((data, indices), shape=shape)


def bcoo_reshape(mat, *, new_sizes, dimensions=None, sharding=None):
    """`lax.reshape` for BCOO: batch, sparse and dense dimensions reshape separately (the new
    shape must not mix them); sparse indices are re-derived through their flat position."""
    new_sizes = tuple(operator.index(s) for s in new_sizes)
    nb, ns = mat.n_batch, mat.n_sparse
    if (tuple(mat.indices.shape[:nb]) != tuple(mat.shape[:nb]) or
            tuple(mat.data.shape[:nb]) != tuple(mat.shape[:nb])):
        raise NotImplementedError("reshape of arrays with broadcasted batch dimensions.")
    if math.prod(new_sizes) != mat.size:
        raise TypeError(f"bcoo_reshape: cannot reshape shape {mat.shape} (size {mat.size}) "
                        f"to {new_sizes}")
    if dimensions is not None and tuple(dimensions) != tuple(range(mat.ndim)):
        mat = bcoo_transpose(mat, permutation=dimensions)
    batch_size = math.prod(mat.shape[:nb])
    sparse_shape = tuple(mat.shape[nb:nb + ns])
    sparse_size = math.prod(sparse_shape)
    cum = np.cumprod((1,) + new_sizes)[1:]
    if batch_size != 1 and batch_size not in cum:
        raise ValueError(f"bcoo_reshape: new shape cannot mix batch and sparse dimensions; got "
                         f"shape={mat.shape} new_shape={new_sizes} with n_batch={nb}")
    if sparse_size != 1 and batch_size * sparse_size not in cum:
        raise ValueError(f"bcoo_reshape: new shape cannot mix sparse and dense dimensions; got "
                         f"shape={mat.shape} new_shape={new_sizes} with n_dense={mat.n_dense}")
    i1 = int(np.searchsorted(cum, batch_size, side="right"))
    i2 = int(np.searchsorted(cum, batch_size * sparse_size, side="right"))
    new_batch, new_sparse, new_dense = new_sizes[:i1], new_sizes[i1:i2], new_sizes[i2:]
    data = mat.data.reshape(new_batch + (mat.nse,) + new_dense)
    indices = mat.indices.reshape(new_batch + (mat.nse, ns))
    if not new_sparse:
        indices = jnp.zeros(new_batch + (mat.nse, 0), indices.dtype)
    elif sparse_shape:
        valid = _valid(indices, sparse_shape)
        cols = tuple(jnp.where(valid, indices[..., k], 0) for k in range(ns))
        flat = jnp.ravel_multi_index(cols, sparse_shape, mode="clip")
        new_cols = jnp.unravel_index(flat, new_sparse)
        indices = jnp.stack([jnp.where(valid, c, s).astype(indices.dtype)
                             for c, s in zip(new_cols, new_sparse)], axis=-1)
    else:
        indices = jnp.zeros(new_batch + (mat.nse, len(new_sparse)), indices.dtype)
    return BCOO((data, indices), shape=new_sizes)


def bcoo_concatenate(operands, *, dimension):
    """Concatenation along a sparse `dimension` of BCOO arrays of one layout (n_batch = 0):
    indices along it are offset by the sizes before."""
    operands = list(operands)
    first = operands[0]
    if any(op.n_batch or op.n_dense != first.n_dense or op.ndim != first.ndim
           for op in operands) or not first.n_batch <= dimension < first.n_sparse:
        raise NotImplementedError("bcoo_concatenate: kiln concatenates BCOO arrays with "
                                  "n_batch=0, one n_dense, along a sparse dimension")
    offset, datas, inds = 0, [], []
    for op in operands:
        ind = op.indices
        valid = _valid(ind, op.shape[:op.n_sparse])
        shift = jnp.zeros((op.n_sparse,), ind.dtype).at[dimension].set(offset)
        datas.append(op.data)
        inds.append(jnp.where(valid[:, None], ind + shift, -1))
        offset += op.shape[dimension]
    shape = first.shape[:dimension] + (offset,) + first.shape[dimension + 1:]
    fill = jnp.array(shape[:first.n_sparse], first.indices.dtype)
    ind = jnp.concatenate(inds, axis=0)
    ind = jnp.where(jnp.any(ind < 0, axis=-1, keepdims=True), fill, ind)
    return BCOO((jnp.concatenate(datas, axis=0), ind), shape=shape)


# --------------------------------------------------------------------- products

def bcoo_multiply_dense(sp_mat, v):
    """Elementwise sparse * dense, as the new data of `sp_mat` (a scalar, an array of
    `sp_mat`'s shape, or one broadcasting to it)."""
    v = jnp.asarray(v)
    if v.ndim == 0:
        return sp_mat.data * v
    if jnp.broadcast_shapes(tuple(v.shape), sp_mat.shape) != sp_mat.shape:
        raise NotImplementedError(
            "multiplication between sparse and dense is only implemented for cases where the "
            f"output shape matches the sparse matrix shape. Got shape={sp_mat.shape}, "
            f"v.shape={tuple(v.shape)}")
    v = jnp.broadcast_to(v, sp_mat.shape)
    return sp_mat.data * _gather_at(sp_mat, v)


def bcoo_multiply_sparse(lhs, rhs):
    """Elementwise product of two BCOO arrays of one shape (batch dimensions are first folded
    into the indices): every pair of stored elements with the same index multiplies (nse =
    lhs.nse * rhs.nse, padded with index max(shape), as in JAX)."""
    if lhs.shape != rhs.shape:
        raise TypeError(f"bcoo_multiply_sparse: arrays must have the same shape, got "
                        f"{lhs.shape}, {rhs.shape}")
    if lhs.n_dense != rhs.n_dense:
        raise NotImplementedError("bcoo_multiply_sparse: arrays with differing numbers of "
                                  f"dense dimensions: {lhs!r}, {rhs!r}")
    lhs = lhs.update_layout(n_batch=0)
    rhs = rhs.update_layout(n_batch=0)
    nse = lhs.nse * rhs.nse
    same = jnp.all(lhs.indices[:, None, :] == rhs.indices[None, :, :], axis=-1)
    pair = jnp.nonzero(same.reshape(nse), size=nse, fill_value=nse)[0]
    live = pair < nse
    i_l = jnp.where(live, pair // max(rhs.nse, 1), 0)
    i_r = jnp.where(live, pair % max(rhs.nse, 1), 0)
    data = lhs.data[i_l] * rhs.data[i_r]
    data = jnp.where(_expand_to(live, data.ndim), data, jnp.zeros((), data.dtype))
    fill = max(lhs.shape, default=0)      # JAX's padding index here
    indices = jnp.where(live[:, None], lhs.indices[i_l], jnp.asarray(fill, lhs.indices.dtype))
    return BCOO((data, indices), shape=lhs.shape)


def _dot_sparse_dense(mat, rhs, dimension_numbers, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = map(tuple, (lc, rc, lb, rb))
    nsp = mat.n_batch + mat.n_sparse            # dims of mat held as coordinates
    dtype = preferred_element_type or jnp.result_type(mat.dtype, rhs.dtype)
    values, coords, _ = _flat(mat)
    values = values.astype(dtype)
    rhs = rhs.astype(dtype)
    # rhs dims paired with coordinate dims of mat are gathered per stored element.
    pairs = [(l, r) for l, r in zip(lb + lc, rb + rc) if l < nsp]
    gathered = [r for _, r in pairs]
    rest = [r for r in range(rhs.ndim) if r not in gathered]
    rhs_t = jnp.transpose(rhs, tuple(gathered) + tuple(rest))
    if pairs:
        bounds = [rhs.shape[r] for r in gathered]
        cols = [coords[:, l] for l, _ in pairs]
        ok = jnp.ones(coords.shape[:1], bool)
        for c, b in zip(cols, bounds):
            ok = ok & (c < b)
        per = rhs_t[tuple(jnp.where(ok, c, 0) for c in cols)]
        per = jnp.where(_expand_to(ok, per.ndim), per, jnp.zeros((), dtype))
    else:
        per = jnp.broadcast_to(rhs_t[None], (coords.shape[0],) + tuple(rhs_t.shape))
    # The remaining pairs are between mat's dense dims and rhs's remaining dims.
    dl = lambda l: 1 + l - nsp                  # noqa: E731  (mat dense dim -> values axis)
    dr = lambda r: 1 + rest.index(r)            # noqa: E731  (rhs dim -> per axis)
    c_pairs = [(dl(l), dr(r)) for l, r in zip(lc, rc) if l >= nsp]
    b_pairs = [(dl(l), dr(r)) for l, r in zip(lb, rb) if l >= nsp]
    prod = lax.dot_general(values, per,
                           ((tuple(p[0] for p in c_pairs), tuple(p[1] for p in c_pairs)),
                            ((0,) + tuple(p[0] for p in b_pairs),
                             (0,) + tuple(p[1] for p in b_pairs))),
                           preferred_element_type=dtype)
    # Output dims: batch (lb order), mat free, rhs free. Coordinate dims are scattered.
    free_l = [d for d in range(mat.ndim) if d not in lc and d not in lb]
    free_r = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    out_dims = ([("l", l) for l in lb] + [("l", l) for l in free_l] +
                [("r", r) for r in free_r])
    out_shape = [mat.shape[d] if k == "l" else rhs.shape[d] for k, d in out_dims]
    scattered = [i for i, (k, d) in enumerate(out_dims) if k == "l" and d < nsp]
    kept = [i for i in range(len(out_dims)) if i not in scattered]
    if scattered:
        idx = tuple(coords[:, out_dims[i][1]] for i in scattered)
        out_t = jnp.zeros(tuple(out_shape[i] for i in scattered + kept), dtype)
        out_t = out_t.at[idx].add(prod)
        inverse = np.argsort(scattered + kept)
        return jnp.transpose(out_t, tuple(int(i) for i in inverse))
    return jnp.sum(prod, axis=0).astype(dtype)


def bcoo_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """`lax.dot_general` with a BCOO operand and a dense one: each stored element multiplies
    the slice of the dense operand at its coordinates and is scattered into the (dense)
    result."""
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        raise NotImplementedError(
            "bcoo_dot_general of two sparse operands (sparse-sparse products) is not "
            "implemented in kiln: convert one to dense with .todense()")
    (lc, rc), (lb, rb) = dimension_numbers
    if isinstance(lhs, BCOO):
        rhs = jnp.asarray(rhs)
        _check_dot(lhs.shape, tuple(rhs.shape), lc, rc, lb, rb)
        return _dot_sparse_dense(lhs, rhs, dimension_numbers, preferred_element_type)
    if not isinstance(rhs, BCOO):
        raise TypeError("bcoo_dot_general: one operand must be a BCOO array")
    lhs = jnp.asarray(lhs)
    _check_dot(tuple(lhs.shape), rhs.shape, lc, rc, lb, rb)
    out = _dot_sparse_dense(rhs, lhs, ((rc, lc), (rb, lb)), preferred_element_type)
    # out is (batch, rhs free, lhs free); want (batch, lhs free, rhs free).
    n_b = len(lb)
    n_rf = rhs.ndim - len(rc) - len(rb)
    n_lf = lhs.ndim - len(lc) - len(lb)
    perm = (tuple(range(n_b)) + tuple(range(n_b + n_rf, n_b + n_rf + n_lf)) +
            tuple(range(n_b, n_b + n_rf)))
    return jnp.transpose(out, perm)


def _check_dot(ls, rs, lc, rc, lb, rb):
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError(f"dot_general requires equal numbers of lhs and rhs contracting and "
                        f"batch dimensions, got {tuple(lc)}, {tuple(rc)}, {tuple(lb)}, "
                        f"{tuple(rb)}")
    for kind, la, ra in (("contracting", lc, rc), ("batch", lb, rb)):
        for l, r in zip(la, ra):
            if ls[l] != rs[r]:
                raise TypeError(f"dot_general requires {kind} dimensions to have the same "
                                f"shape, got {ls[l]} (lhs dim {l} of {ls}) and {rs[r]} "
                                f"(rhs dim {r} of {rs})")


def bcoo_dot_general_sampled(A, B, indices, *, dimension_numbers):
    """The data of `dot_general(A, B)` read at `indices` (a BCOO's indices for the output's
    shape): the dense product, gathered where it is sampled (zero at out-of-bounds
    indices)."""
    A, B, indices = jnp.asarray(A), jnp.asarray(B), jnp.asarray(indices)
    out = lax.dot_general(A, B, dimension_numbers)
    pattern = BCOO((jnp.zeros(indices.shape[:-1] + out.shape[indices.ndim - 2 +
                                                          indices.shape[-1]:], out.dtype),
                    indices), shape=tuple(out.shape))
    return _gather_at(pattern, out)
