"""NumPy arrays a jitted function makes for itself (`np.ones(n)`, `np.arange(k)`) are static
values: item assignment and augmented item assignment change them at specialisation, as
Python would, and they then serve as shapes, indices or constants (JAX's onnx2xla example
builds a reshape target this way). Checked against running the same function in Python."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp


def broadcast_shape_for(a, b, axis):
    shape = np.ones(a.ndim, dtype="int64")
    shape[axis:axis + b.ndim] = b.shape
    return a + jnp.reshape(b, shape)


def counts_and_offsets(x, k):
    counts = np.zeros(k, np.int32)
    for i in range(k):
        counts[i] += i * 2
    counts[-1:] -= 1
    table = np.arange(k, dtype=np.float32)
    table[::2] *= 10.0
    return x * table.sum() + counts[k // 2], jnp.asarray(table)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(0, 3), st.data())
def test_a_reshape_target_built_by_item_assignment(ndim, bdims, data):
    bdims = min(bdims, ndim)
    axis = data.draw(st.integers(0, ndim - bdims))
    shape = tuple(data.draw(st.lists(st.integers(0, 3), min_size=ndim, max_size=ndim)))
    a = np.ones(shape, np.float32)
    b = np.arange(int(np.prod(shape[axis:axis + bdims])), dtype=np.float32).reshape(
        shape[axis:axis + bdims])
    want = np.asarray(broadcast_shape_for(a, b, axis))
    got = kiln.jit(broadcast_shape_for, static_argnums=2)(a, b, axis)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_augmented_assignment_and_slices(k):
    x = np.float32(0.5)
    want = counts_and_offsets(x, k)
    got = kiln.jit(counts_and_offsets, static_argnums=1)(x, k)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
