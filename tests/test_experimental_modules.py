"""`kiln.experimental.mesh_utils`, and JAX's deprecated `experimental.shard_map` and
`experimental.pjit` spellings: layouts, errors and warnings as JAX 0.10.2's."""
import warnings

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.experimental import mesh_utils
from kiln.sharding import Mesh, PartitionSpec as P


def ids(mesh):
    return np.vectorize(lambda d: d.id)(mesh)


def test_create_device_mesh_keeps_the_devices_order():
    devices = kiln.devices()
    assert len(devices) == 8
    mesh = mesh_utils.create_device_mesh((2, 4))
    assert mesh.dtype == object and mesh.shape == (2, 4)
    np.testing.assert_array_equal(ids(mesh), np.arange(8).reshape(2, 4))
    np.testing.assert_array_equal(ids(mesh_utils.create_device_mesh((4, 2), devices[::-1])),
                                  np.arange(8)[::-1].reshape(4, 2))
    np.testing.assert_array_equal(ids(mesh_utils.create_device_mesh([2, 2], devices[:4])),
                                  [[0, 1], [2, 3]])
    assert Mesh(mesh, ("a", "b")).shape == {"a": 2, "b": 4}


def test_create_hybrid_device_mesh_places_granule_blocks():
    mesh = mesh_utils.create_hybrid_device_mesh((2, 4), (1, 1), process_is_granule=True)
    np.testing.assert_array_equal(ids(mesh), np.arange(8).reshape(2, 4))
    with pytest.raises(ValueError, match=r"^Number of slices 1 must equal the product of "
                                         r"dcn_mesh_shape \(2, 1\)$"):
        mesh_utils.create_hybrid_device_mesh((2, 2), (2, 1), process_is_granule=True)
    with pytest.raises(ValueError, match=r"does not have attribute slice_index\. See "
                                         r"`process_is_granule` option\.$"):
        mesh_utils.create_hybrid_device_mesh((2, 4), (1, 1))


def test_errors_are_jaxs():
    jax = pytest.importorskip("jax")
    from jax.experimental import mesh_utils as theirs
    one = jax.devices()[:1]
    for shape in [(2,), (3, 3)]:
        with pytest.raises(ValueError) as mine:
            mesh_utils.create_device_mesh(shape, kiln.devices()[:1])
        with pytest.raises(ValueError) as expected:
            theirs.create_device_mesh(shape, one)
        assert str(mine.value) == str(expected.value)


def test_deprecated_shard_map_and_pjit_warn_and_work():
    mesh = Mesh(mesh_utils.create_device_mesh((8,)), ("x",))
    with pytest.warns(DeprecationWarning, match="jax.experimental.shard_map is deprecated"):
        from kiln.experimental.shard_map import shard_map
    with pytest.warns(DeprecationWarning, match=r"pjit has been deprecated\. Please use "
                                                r"`jax\.jit` instead\."):
        from kiln.experimental.pjit import pjit
    x = jnp.arange(16.0)
    summed = shard_map(lambda b: kiln.lax.psum(b.sum(keepdims=True), "x"), mesh, P("x"), P())
    np.testing.assert_allclose(summed(x), [120.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(pjit(lambda a: a * 2, static_argnums=())(x), x * 2)
    with pytest.raises(AttributeError, match="no attribute 'other'"):
        import kiln.experimental.pjit as module
        module.other
