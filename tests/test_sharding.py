"""kiln.sharding (Mesh, PartitionSpec, NamedSharding, SingleDeviceSharding), arrays placed on
devices and shardings, and the SPMD array constructors, against JAX 0.10.2's behaviour
(reprs, indices, errors)."""
import numpy as np
import pytest

import kiln
from kiln import P
from kiln.sharding import Mesh, NamedSharding, SingleDeviceSharding, AxisType

MESH = kiln.make_mesh((2, 4), ("x", "y"))
X = np.arange(32, dtype=np.float32).reshape(8, 4)


def test_mesh():
    assert repr(MESH) == ("Mesh(axis_sizes=(2, 4), axis_names=('x', 'y'), "
                          "axis_types=(Explicit, Explicit))")
    assert str(MESH) == "Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit))"
    assert MESH.shape == {"x": 2, "y": 4} and MESH.size == 8 and MESH.axis_sizes == (2, 4)
    np.testing.assert_array_equal(MESH.device_ids, np.arange(8).reshape(2, 4))
    assert MESH == Mesh(np.array(kiln.devices()).reshape(2, 4), ("x", "y"))
    with pytest.raises(ValueError, match="unique"):
        Mesh(np.array(kiln.devices()[:4]).reshape(2, 2), ("x", "x"))
    with pytest.raises(ValueError, match="needs 9 devices, but only 8"):
        kiln.make_mesh((3, 3), ("a", "b"))
    assert repr(AxisType.Auto) == "Auto"


def test_partition_spec():
    assert repr(P("x", None)) == "P('x', None)" and repr(P()) == "P()"
    assert repr(P("x")) == "P('x',)"
    assert P("x") != P("x", None) and P("x").padded(2) == P("x", None)
    assert P(("x", "y"), None).names(0) == ("x", "y") and P("x").names(3) == ()
    with pytest.raises(TypeError, match="entries are None"):
        P(3)


def test_named_sharding_maps_devices_to_blocks():
    ns = NamedSharding(MESH, P("x"))
    assert repr(ns) == ("NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, "
                        "Explicit)), spec=P('x',), memory_kind=device)")
    assert ns.shard_shape((8, 4)) == (4, 4) and not ns.is_fully_replicated
    assert ns.num_devices == 8 and ns.device_set == set(kiln.devices())
    index = ns.devices_indices_map((8, 4))
    assert index[kiln.devices()[5]] == (slice(4, 8), slice(None))
    both = NamedSharding(MESH, P(("y", "x")))
    assert both.devices_indices_map((8, 4))[kiln.devices()[1]] == (slice(2, 3), slice(None))
    assert NamedSharding(MESH, P()).is_fully_replicated
    with pytest.raises(ValueError, match="does not have"):
        NamedSharding(MESH, P("z"))


def test_device_put_and_shards():
    x = kiln.device_put(X, NamedSharding(MESH, P("x", "y")))
    assert x.sharding == NamedSharding(MESH, P("x", "y"))
    shards = x.addressable_shards
    assert [s.device.id for s in shards] == list(range(8))
    np.testing.assert_array_equal(np.asarray(shards[6].data), X[4:8, 2:3])
    assert shards[6].index == (slice(4, 8), slice(2, 3)) and shards[6].replica_id == 0
    rep = kiln.device_put(X, NamedSharding(MESH, P("x")))
    assert [s.replica_id for s in rep.addressable_shards] == [0, 1, 2, 3, 0, 1, 2, 3]
    with pytest.raises(ValueError, match="partitioned 2 times, but does not evenly divide "
                                         "the dimension size 3"):
        kiln.device_put(np.ones((3, 4)), NamedSharding(MESH, P("x")))
    one = kiln.device_put(X, kiln.devices()[3])
    assert one.sharding == SingleDeviceSharding(kiln.devices()[3])
    assert one.device == kiln.devices()[3]
    plain = kiln.numpy.ones(3)
    assert repr(plain.sharding) == ("SingleDeviceSharding(device=CpuDevice(id=0), "
                                    "memory_kind=device)")
    assert plain.devices() == {kiln.devices()[0]} and plain.is_fully_replicated
    with pytest.raises(ValueError, match="needs a mesh"):
        kiln.device_put(X, P("x"))
    with kiln.set_mesh(MESH):
        assert kiln.device_put(X, P("x")).sharding == NamedSharding(MESH, P("x"))
    np.testing.assert_array_equal(kiln.device_get({"a": x})["a"], X)
    np.testing.assert_array_equal(np.asarray(x + 1), X + 1)   # ordinary arrays underneath


def test_array_constructors():
    ns = NamedSharding(MESH, P("x", "y"))
    a = kiln.make_array_from_callback((8, 4), ns, lambda index: X[index])
    np.testing.assert_array_equal(np.asarray(a), X) and None
    assert a.sharding == ns
    blocks = [X[i] for i in ns.devices_indices_map((8, 4)).values()]
    b = kiln.make_array_from_single_device_arrays((8, 4), ns, blocks)
    np.testing.assert_array_equal(np.asarray(b), X)
    c = kiln.make_array_from_process_local_data(ns, X)
    np.testing.assert_array_equal(np.asarray(c), X)
    with pytest.raises(ValueError, match="global_shape"):
        kiln.make_array_from_process_local_data(ns, X, (16, 4))
    d = kiln.reshard(c, NamedSharding(MESH, P()))
    assert d.sharding.is_fully_replicated


def test_reshard_is_also_in_kiln_sharding():
    # JAX's `from jax.sharding import reshard` (its SPMD MNIST example)
    from kiln.sharding import reshard
    assert reshard is kiln.reshard
    out = reshard(X, NamedSharding(MESH, P("x")))
    assert out.sharding.spec == P("x") and out.addressable_shards[0].data.shape == (4, 4)
    np.testing.assert_array_equal(np.asarray(out), X)
    with pytest.raises(AttributeError, match="kiln.sharding' has no attribute 'nothing'"):
        kiln.sharding.nothing


def test_pmap_results_are_sharded_over_the_replicas():
    out = kiln.pmap(lambda v: v * 2)(X[:4])
    assert str(out.sharding) == ("NamedSharding(mesh=Mesh('_internal_pmap_axis_name': 4, "
                                 "axis_types=(Auto,)), spec=P('_internal_pmap_axis_name', "
                                 "None), memory_kind=device)")
    np.testing.assert_array_equal(np.asarray(out.addressable_shards[1].data), 2 * X[1:2])
    named = kiln.pmap(lambda v: v, axis_name="i", out_axes=1)(X[:4])
    assert named.sharding.spec == P(None, "i")


def test_process_names():
    assert kiln.process_indices() == [0]
    with pytest.warns(UserWarning, match="kiln.host_count has been renamed to kiln.process_count"):
        assert kiln.host_count() == 1
    with pytest.warns(UserWarning, match="renamed"):
        assert kiln.host_id() == 0 and kiln.host_ids() == [0]
    assert str(kiln.devices()[1]) == "cpu:1" and repr(kiln.devices()[1]) == "CpuDevice(id=1)"


def test_sharded_jit_data_parallel_step():
    batch = NamedSharding(MESH, P(("x", "y")))
    replicated = NamedSharding(MESH, P())
    w = np.linspace(-1, 1, 4).astype(np.float32)

    def grad_step(w, x):
        return w - 0.1 * kiln.grad(lambda w: kiln.numpy.sum(kiln.numpy.tanh(x @ w) ** 2))(w)
    step = kiln.jit(grad_step, in_shardings=(replicated, batch), out_shardings=replicated)
    out = step(w, X)
    assert out.sharding == replicated
    np.testing.assert_allclose(np.asarray(out), np.asarray(kiln.jit(grad_step)(w, X)))
    with pytest.raises(ValueError, match="partitioned 8 times"):
        step(w, X[:4])
    with kiln.set_mesh(MESH):
        by_spec = kiln.jit(grad_step, in_shardings=(P(), P("x")), out_shardings=P())
        assert by_spec(w, X).sharding == replicated
    on_three = kiln.jit(lambda v: v + 1, device=kiln.devices()[3])(X)
    assert on_three.sharding == SingleDeviceSharding(kiln.devices()[3])


def test_sharding_in_types_flags_are_recorded():
    assert kiln.auto_pcast.value is False
    with kiln.auto_pcast(True):
        assert kiln.auto_pcast.value is True
    assert kiln.auto_pcast.value is False
    with kiln.remove_size_one_mesh_axis_from_type(True):
        assert kiln.remove_size_one_mesh_axis_from_type.value


def test_older_placement_api():
    devs = kiln.devices()[:4]
    rows = [np.full(3, k, np.float32) for k in range(4)]
    stacked = kiln.device_put_sharded(rows, devs)
    np.testing.assert_array_equal(np.asarray(stacked), np.stack(rows))
    assert [s.device for s in stacked.addressable_shards] == devs
    twice = kiln.device_put_replicated({"w": np.arange(2.0)}, devs[:2])
    np.testing.assert_array_equal(np.asarray(twice["w"]), [[0.0, 1.0], [0.0, 1.0]])
    out = kiln.pmap(lambda a: a * 2)(stacked)   # feeds a pmap as JAX's did
    np.testing.assert_array_equal(np.asarray(out), 2 * np.stack(rows))
    with pytest.raises(ValueError, match="4 shards for 2 devices"):
        kiln.device_put_sharded(rows, devs[:2])
