"""kiln.numpy's editing functions (append, insert, delete, fill_diagonal, put,
put_along_axis, place, trim_zeros, diagflat, vander, mask_indices, block, fromfunction)
against NumPy; jit and grad where the positions are static."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp


def eq(x, y, msg=""):
    assert np.array_equal(np.asarray(x), np.asarray(y)), (msg, x, y)


def test_editing_functions_match_numpy():
    a = np.arange(12).reshape(3, 4).astype(np.float32)
    eq(jnp.append(a, np.array([[1, 2, 3, 4]]), axis=0), np.append(a, [[1, 2, 3, 4]], axis=0))
    eq(jnp.append(a, np.array([1., 2.])), np.append(a, [1., 2.]))
    for obj in (1, -1, np.array([0, 2]), slice(0, 3, 2), np.array([3, 0, 0])):
        for ax in (None, 1):
            eq(jnp.delete(a, obj, axis=ax), np.delete(a, obj, axis=ax), ("del", obj, ax))
    f = kiln.jit(lambda a: jnp.delete(a, np.array([0, 2]), axis=1, assume_unique_indices=True))
    eq(f(a), np.delete(a, [0, 2], axis=1))
    for obj, vals in ((1, 9.), (4, [7., 8., 9.]), (np.array([1, 1]), [5., 6.]),
                      (np.array([3, 0]), 5.), (slice(0, 2), 7.), (0, [[1, 2, 3]])):
        for ax in (None, 1):
            try:
                want = np.insert(a, obj, vals, axis=ax)
            except ValueError:
                continue
            eq(jnp.insert(a, obj, np.asarray(vals, np.float32), axis=ax), want, (obj, vals, ax))

    def numpy_inplace(fn, arr, *args, **kw):
        arr = arr.copy()
        fn(arr, *args, **kw)
        return arr
    sq, tall = np.zeros((4, 4)), np.zeros((7, 3))
    eq(jnp.fill_diagonal(sq, np.array([1., 2.]), inplace=False),
       numpy_inplace(np.fill_diagonal, sq, [1., 2.]))
    eq(jnp.fill_diagonal(tall, 5., wrap=True, inplace=False),
       numpy_inplace(np.fill_diagonal, tall, 5., wrap=True))
    eq(jnp.put(a, np.array([0, 5, 14]), np.array([-1., -2.]), mode="wrap", inplace=False),
       numpy_inplace(np.put, a, [0, 5, 14], [-1., -2.], mode="wrap"))
    idx = np.array([[0], [2], [1]])
    eq(jnp.put_along_axis(a, idx, 99., axis=1, inplace=False),
       numpy_inplace(np.put_along_axis, a, idx, 99., axis=1))
    m = a % 3 == 0
    eq(jnp.place(a, m, np.array([10., 20.]), inplace=False),
       numpy_inplace(np.place, a, m, [10., 20.]))
    z = np.array([0, 0, 1, 2, 0, 3, 0, 0])
    eq(jnp.trim_zeros(z), np.trim_zeros(z))
    eq(jnp.trim_zeros(z, "b"), np.trim_zeros(z, "b"))
    eq(jnp.diagflat(np.array([[1, 2], [3, 4]]), 1), np.diagflat([[1, 2], [3, 4]], 1))
    eq(jnp.vander(np.array([1, 2, 3])), np.vander([1, 2, 3]))
    np.testing.assert_allclose(jnp.vander(np.array([1., 2., 3.]), 4, increasing=True),
                               np.vander([1., 2., 3.], 4, increasing=True))
    for g, w in zip(jnp.mask_indices(3, jnp.triu, 1), np.mask_indices(3, np.triu, 1)):
        eq(g, w)
    A, B, C = np.ones((2, 2)), np.zeros((2, 3)), np.full((1, 5), 2.)
    eq(jnp.block([[A, B], [C]]), np.block([[A, B], [C]]))
    eq(jnp.block([np.array([1, 2]), 3]), np.block([np.array([1, 2]), 3]))
    np.testing.assert_allclose(jnp.fromfunction(lambda i, j: i * 10 + j, (3, 4)),
                               np.fromfunction(lambda i, j: i * 10 + j, (3, 4)))


def test_editing_under_jit_and_grad_and_errors():
    a = np.arange(6.0, dtype=np.float32)
    f = kiln.jit(lambda a: jnp.insert(jnp.delete(a, 2), np.array([0, 3]), -1.0))
    eq(f(a), np.insert(np.delete(a, 2), [0, 3], -1.0))
    g = kiln.grad(lambda a: (jnp.append(a, a[:2]) ** 2).sum())(a)
    np.testing.assert_allclose(g, 2 * a * np.array([2, 2, 1, 1, 1, 1]))
    with pytest.raises(ValueError, match="inplace=False"):
        jnp.fill_diagonal(np.zeros((2, 2)), 1.0)
    with pytest.raises(IndexError, match="out of bounds"):
        jnp.delete(a, 9)
    with pytest.raises(TypeError, match="concrete"):
        kiln.jit(lambda a, i: jnp.delete(a, i))(a, 1)
