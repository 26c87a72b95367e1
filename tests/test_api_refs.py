"""kiln.new_ref / Ref / empty_ref / freeze / free_ref and kiln.ds (runtime/refs.py), eagerly
against JAX; inside compiled or transformed functions a Ref is a located TypeError."""
import jax
import jax.numpy as J
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp


def test_ref_reads_and_writes_as_jax():
    refs = [kiln.new_ref(jnp.arange(4.0)), jax.new_ref(J.arange(4.0))]
    for r, ds in zip(refs, (kiln.ds, jax.ds)):
        r[...] = r[...] + 1
        r[1] = 10.0
        r[ds(2, 2)] = np.zeros(2, np.float32)
        with pytest.raises(ValueError, match="Invalid dtype"):
            r[0] = np.int32(7)
    k, j = refs
    np.testing.assert_array_equal(k[...], j[...])
    np.testing.assert_array_equal(k[1:3], j[1:3])
    assert (k.shape, k.dtype, k.ndim, k.size) == (j.shape, j.dtype, j.ndim, j.size)
    assert isinstance(k, kiln.Ref) and repr(k) == repr(j)
    k[...] = 3.0   # broadcast
    np.testing.assert_array_equal(k[...], [3, 3, 3, 3])
    k.addupdate(1.0)
    k.addupdate(2.0, 0)
    np.testing.assert_array_equal(k[...], [6, 4, 4, 4])


def test_new_ref_copies_and_freeze_invalidates():
    x = jnp.ones(3)
    r = kiln.new_ref(x)
    r[0] = 5.0
    np.testing.assert_array_equal(x, [1, 1, 1])
    np.testing.assert_array_equal(kiln.freeze(r), [5, 1, 1])
    with pytest.raises(ValueError, match="invalidated by kiln.freeze"):
        r[...]
    e = kiln.empty_ref(kiln.ShapeDtypeStruct((2,), jnp.int32))
    assert e.dtype == np.int32 and e.shape == (2,)
    kiln.free_ref(e)
    with pytest.raises(ValueError, match="invalidated"):
        e[0] = 1
    assert kiln.new_ref(1.0, memory_space=kiln.memory.Space.Device).memory_space is \
        kiln.memory.Space.Device


def test_refs_in_compiled_functions_are_located_errors():
    r = kiln.new_ref(jnp.zeros(()))

    def closes_over(x):
        return r[...] + x
    with pytest.raises(TypeError, match="Ref inside a compiled .*ref\\[...\\] = new") as e:
        kiln.jit(closes_over)(1.0)
    assert "r[...] + x" in str(e.value)
    with pytest.raises(TypeError, match="Ref inside"):
        kiln.grad(closes_over)(1.0)
    with pytest.raises(TypeError, match="argument 0 .*Ref inside"):
        kiln.jit(lambda ref: ref[...])(r)


@pytest.mark.parametrize("start,size,stride", [(1, 3, 1), (8, 4, 1), (1, 3, 2), (6, 3, 2),
                                               (0, 0, 1), (3, None, None)])
def test_ds_indexes_as_jax(start, size, stride):
    x = np.arange(10, dtype=np.int32)
    want = J.asarray(x)[jax.ds(start, size, stride)]
    np.testing.assert_array_equal(jnp.asarray(x)[kiln.ds(start, size, stride)], want)
    if size:   # a traced start (JAX's dynamic_slice / gather clamping)
        f = kiln.jit(lambda x, i: x[kiln.ds(i, size, stride)])
        g = jax.jit(lambda x, i: x[jax.ds(i, size, stride)])
        np.testing.assert_array_equal(f(x, start), g(x, start))
    assert kiln.ds(None) == slice(None)
    y = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(jnp.asarray(y)[kiln.ds(1, 2), 1:3],
                                  J.asarray(y)[jax.ds(1, 2), 1:3])
