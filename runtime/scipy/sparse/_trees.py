"""Vector arithmetic over pytrees of arrays, for the Krylov solvers: inner products, norms,
`x + a y`, and a pytree raveled into one vector (and back) for GMRES's basis."""
import numpy as np

from ... import numpy as jnp
from ...tree_util import tree_leaves, tree_map, tree_structure, tree_unflatten


def vdot(x, y):
    """sum over leaves of conj(x) . y."""
    return sum(jnp.vdot(a, b) for a, b in zip(tree_leaves(x), tree_leaves(y)))


def vdot_real(x, y):
    """The real part of `vdot(x, y)` (|x|^2 for x = y)."""
    return sum(jnp.vdot(a.real, b.real) + jnp.vdot(a.imag, b.imag)
               if jnp.iscomplexobj(a) else jnp.vdot(a, b)
               for a, b in zip(tree_leaves(x), tree_leaves(y)))


def norm(x):
    return jnp.sqrt(vdot_real(x, x))


def axpy(a, x, y):
    """y + a x, leaf by leaf."""
    return tree_map(lambda u, v: v + a * u, x, y)


def sub(x, y):
    return tree_map(lambda u, v: u - v, x, y)


def size(tree):
    return sum(np.size(leaf) for leaf in tree_leaves(tree))


def raveler(tree):
    """(ravel, unravel) between pytrees shaped like `tree` and one 1-D vector of the leaves'
    common dtype."""
    leaves = tree_leaves(tree)
    treedef = tree_structure(tree)
    shapes = [np.shape(leaf) for leaf in leaves]
    dtypes = [jnp.result_type(leaf) for leaf in leaves]
    cuts = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    dtype = jnp.result_type(*leaves)

    def ravel(t):
        return jnp.concatenate([jnp.ravel(leaf).astype(dtype) for leaf in tree_leaves(t)])

    def unravel(v):
        parts = jnp.split(v, cuts) if len(leaves) > 1 else [v]
        return tree_unflatten(treedef, [p.reshape(s).astype(d)
                                        for p, s, d in zip(parts, shapes, dtypes)])
    return ravel, unravel
