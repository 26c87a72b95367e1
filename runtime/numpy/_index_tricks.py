"""`kiln.numpy` index tricks: `r_`, `c_`, `mgrid`, `ogrid` (objects indexed with slices that
build arrays, as NumPy's), and NumPy's own `s_` and `index_exp` (they build index tuples,
no arrays). A slice `a:b:s` is `arange(a, b, s)`, or with an imaginary step `a:b:nj` the `n`
points of `linspace(a, b, n)`; all bounds must be static."""
import numpy as np

from .. import numpy as jnp

__all__ = ["r_", "c_", "mgrid", "ogrid", "s_", "index_exp"]

s_ = np.s_
index_exp = np.index_exp


def _range(s):
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if isinstance(step, complex):
        return jnp.linspace(start, s.stop, int(abs(step)))
    return jnp.arange(start, s.stop, step)


class _Concatenator:
    """`r_[...]` (axis 0) and `c_[...]` (the last axis, items made at least 2-D)."""

    def __init__(self, axis, ndmin, trans1d):
        self.defaults = (axis, ndmin, trans1d)

    def __getitem__(self, key):
        items = list(key) if isinstance(key, tuple) else [key]
        axis, ndmin, trans1d = self.defaults
        if items and isinstance(items[0], str):
            directive = items.pop(0)
            if directive in ("r", "c"):
                raise ValueError("kiln.numpy has no matrix class: the 'r' and 'c' directives "
                                 "of r_/c_ are not supported")
            parts = [int(p) for p in directive.split(",")]
            axis, ndmin, trans1d = (parts + [ndmin, trans1d][len(parts) - 1:])[:3] \
                if len(parts) < 3 else parts
        arrays = []
        for item in items:
            if isinstance(item, slice):
                a = _range(item)
                if ndmin > 1:
                    a = jnp.reshape(a, (1,) * (ndmin - 1) + a.shape)
                    if trans1d != -1:
                        a = jnp.swapaxes(a, -1, trans1d)
            else:
                a = jnp.asarray(item)
                k = a.ndim
                if k < ndmin:
                    a = jnp.reshape(a, (1,) * (ndmin - k) + a.shape)
                    if trans1d != -1:
                        k1 = trans1d + (ndmin - k) + 1 if trans1d < 0 else trans1d
                        axes = list(range(ndmin))
                        a = jnp.transpose(a, axes[:k1] + axes[ndmin - k:] + axes[k1:ndmin - k])
            arrays.append(a)
        if not arrays:
            return jnp.zeros(0)
        return jnp.concatenate(arrays, axis=axis)

    def __len__(self):
        return 0


class _Grid:
    """`mgrid[...]` (dense, stacked) and `ogrid[...]` (open: broadcastable arrays)."""

    def __init__(self, sparse):
        self.sparse = sparse

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _range(key)
        axes = [_range(k) for k in key]
        dtype = jnp.result_type(*axes)
        grids = jnp.meshgrid(*[a.astype(dtype) for a in axes], indexing="ij",
                             sparse=self.sparse)
        return list(grids) if self.sparse else jnp.stack(grids, 0)


r_ = _Concatenator(0, 1, -1)
c_ = _Concatenator(-1, 2, 0)
mgrid = _Grid(sparse=False)
ogrid = _Grid(sparse=True)
