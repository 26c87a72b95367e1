"""The `kiln.lax` decompositions of `runtime/lax/_shaping.py` against `jax.lax` directly:
eagerly, under `kiln.jit`, and their gradients, over shapes with 0- and 1-sized axes."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import kiln
from kiln import lax as kl

jax = pytest.importorskip("jax")
jl = jax.lax

shapes = st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple)
DTYPES = (np.float32, np.int32)


def _same(a, b):
    a, b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(a) == len(b)
    for u, v in zip(a, b):
        u, v = np.asarray(u), np.asarray(v)
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_allclose(v, u, rtol=1e-6)


def _check(fn, *args):
    """fn(lax_module, *args) agrees with JAX eagerly and under kiln.jit."""
    want = fn(jl, *args)
    _same(want, fn(kl, *args))
    _same(want, kiln.jit(lambda *a: fn(kl, *a))(*args))


def _arange(shape, dtype):
    return (np.arange(int(np.prod(shape)), dtype=dtype) + 1).reshape(shape)


@given(shapes, st.sampled_from(DTYPES), st.data())
def test_shape_operations_match_jax(shape, dtype, data):
    x = _arange(shape, dtype)
    nd = len(shape)
    axis = data.draw(st.integers(-nd, nd - 1))
    lo = data.draw(st.integers(0, nd))
    hi = data.draw(st.integers(lo, nd))
    _check(lambda l, x: l.collapse(x, lo, hi), x)
    _check(lambda l, x: l.collapse(x, lo), x)
    _check(lambda l, x: l.stack([x, x + 1], axis=axis), x)
    _check(lambda l, x: l.unstack(x, axis), x)
    cut = data.draw(st.integers(0, shape[axis]))
    _check(lambda l, x: l.split(x, [cut, 0, shape[axis] - cut], axis), x)
    reps = tuple(data.draw(st.lists(st.integers(0, 2), min_size=nd, max_size=nd)))
    _check(lambda l, x: l.tile(x, reps), x)
    _check(lambda l, x: l.broadcast_like(x, np.zeros((2,) + shape)), x)
    _check(lambda l, x: l.reciprocal(x.astype(np.float32)), x)
    _check(lambda l, x: l.optimization_barrier((x, [x])), x)
    assert kl.empty(shape, dtype).shape == shape and kl.empty(shape, dtype).dtype == dtype
    assert kl.dtype(x) == jl.dtype(x)


@given(shapes, st.integers(0, 3), st.data())
def test_index_take_and_scatter_sub_match_jax(shape, n, data):
    x = _arange(shape, np.float32)
    dn = jl.ScatterDimensionNumbers(update_window_dims=tuple(range(1, len(shape))),
                                    inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    rows = np.zeros((int(shape[0] > 0), 1), np.int32)
    upd = np.ones((len(rows),) + shape[1:], np.float32)
    _check(lambda l, x: l.scatter_sub(x, rows, upd, dn), x)

    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    if any(shape[a] == 0 for a in axes):  # JAX refuses a gather from an empty axis
        axes = tuple(a for a in range(len(shape)) if shape[a]) or None
    if axes is None:
        return
    idxs = tuple(np.array(data.draw(st.lists(st.integers(-shape[a], shape[a] - 1),
                                             min_size=n, max_size=n)), np.int32) for a in axes)
    _check(lambda l, x: l.index_take(x, idxs, axes), x)


def test_gradients_match_jax():
    x = _arange((2, 3, 4), np.float32)
    dn = jl.ScatterDimensionNumbers((1, 2), (0,), (0,))

    def f(l):
        def loss(x):
            piece = l.split(x, [1, 1], 0)[1]
            return (l.reciprocal(l.tile(piece, (1, 2, 1))).sum()
                    + (l.index_take(x, (np.array([0, 1, 1]),), (0,)) ** 2).sum()
                    + (l.scatter_sub(x, np.array([[1], [0]]), x * 2, dn) ** 2).sum()
                    + (l.stack(l.unstack(x, 2), 0) ** 3).sum()
                    + (l.collapse(l.broadcast_like(x[0], x), 1) ** 2).sum())
        return loss
    np.testing.assert_allclose(kiln.grad(f(kl))(x), jax.grad(f(jl))(x), rtol=1e-5)


def test_errors_say_what_is_wrong():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="must be non-negative and sum to 3"):
        kl.split(x, [1, 1], 1)
    with pytest.raises(ValueError, match="must equal the rank 2"):
        kl.tile(x, (2,))
    with pytest.raises(ValueError, match="incompatible shapes"):
        kl.broadcast_shapes((2,), (3,))
    assert kl.broadcast_shapes((2, 1), (3,), ()) == jl.broadcast_shapes((2, 1), (3,), ())


def test_vmap_matches_jax():
    x = _arange((2, 3, 4), np.float32)
    dn = jl.ScatterDimensionNumbers((1,), (0,), (0,))

    def f(l):
        def per_example(x):
            return (l.tile(l.split(x, [1, 2], 0)[1], (1, 2)), l.stack(l.unstack(x, 1), 0),
                    l.collapse(x, 0), l.reciprocal(x), l.index_take(x, (np.array([0, -1]),), (1,)),
                    l.scatter_sub(x, np.array([[1]]), x[:1], dn), l.broadcast_like(x[0], x))
        return per_example
    _same(jax.vmap(f(jl))(x), kiln.vmap(f(kl))(x))
