"""`kiln.flatten_util.ravel_pytree`: a pytree of arrays as one flat array, and the function
that rebuilds the tree from such an array, as JAX's.

`flat, unravel = ravel_pytree(tree)`: `flat` is the leaves raveled and concatenated in
`tree_flatten` order (a float32 array of length 0 for a tree without leaves). When the leaves
have different dtypes they are promoted to their common dtype (`result_type` of the dtypes), and
`unravel` casts each piece back to its leaf's dtype (the real part for a complex piece of a
real leaf); then `unravel` takes only arrays of `flat`'s dtype (a TypeError, as JAX's).
`unravel` works on traced values (under `jit`, `grad`, `vmap`), and unravel functions of equal
trees compare equal and hash alike, so they can be static arguments.
"""
import numpy as np

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree):
    """`(flat, unravel)` for `pytree` (module docstring)."""
    from .tree_util import tree_flatten
    leaves, treedef = tree_flatten(pytree)
    flat, pieces = _ravel_leaves(leaves)
    return flat, _Unravel(treedef, pieces)


def _ravel_leaves(leaves):
    from . import numpy as jnp
    if not leaves:
        return jnp.zeros(0, np.float32), ((), (), None)
    from_dtypes = tuple(jnp.result_type(leaf) for leaf in leaves)
    to_dtype = jnp.result_type(*from_dtypes)
    shapes = tuple(tuple(np.shape(leaf)) for leaf in leaves)
    if all(d == to_dtype for d in from_dtypes):
        flat = jnp.concatenate([jnp.ravel(leaf) for leaf in leaves])
        return flat, (shapes, from_dtypes, None)
    flat = jnp.concatenate([jnp.ravel(jnp.asarray(leaf).astype(to_dtype)) for leaf in leaves])
    return flat, (shapes, from_dtypes, to_dtype)


class _Unravel:
    """The tree `ravel_pytree` flattened, rebuilt from a flat array of its length."""

    def __init__(self, treedef, pieces):
        self.treedef = treedef
        self.shapes, self.dtypes, self.promoted = pieces

    def _key(self):
        return self.treedef, self.shapes, self.dtypes, self.promoted

    def __eq__(self, other):
        return type(other) is _Unravel and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __call__(self, flat):
        from . import numpy as jnp
        from .tree_util import tree_unflatten
        if self.promoted is not None and jnp.result_type(flat) != self.promoted:
            raise TypeError(f"unravel function given array of dtype {jnp.result_type(flat)}, "
                            f"but expected dtype {self.promoted}")
        sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        if np.shape(flat) != (sum(sizes),):
            raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension 0 of the "
                             f"operand shape {list(np.shape(flat))}")
        ends = np.cumsum(sizes)
        leaves = []
        for shape, dtype, end, size in zip(self.shapes, self.dtypes, ends, sizes):
            piece = flat[end - size:end].reshape(shape)
            if self.promoted is not None and dtype != self.promoted:
                if jnp.iscomplexobj(piece) and not np.issubdtype(dtype, np.complexfloating):
                    piece = jnp.real(piece)
                piece = piece.astype(dtype)
            leaves.append(piece)
        return tree_unflatten(self.treedef, leaves)

    def __repr__(self):
        return f"unravel({self.treedef})"
