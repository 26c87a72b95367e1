"""Arrays spread over several PJRT devices (runtime/pjrt_spread.py), sharded jit partitioned
by XLA's SPMD partitioner (runtime/pjrt_partitioned.py) and copies between PJRT devices, on 1,
2 and 4 devices of XLA's CPU plug-in. Values are compared with NumPy and with the same calls
on kiln's CPU backend; "stays on the device" is checked by counting the host transfers a call
makes (client.Buffer.from_host and to_host) and by the buffers' identity.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax, P
from kiln.compiler.backends.pjrt import client as pjrt, plugins
from kiln.pjrt_spread import Spread, spread_of
from kiln.sharding import AxisType, Mesh, NamedSharding

pytestmark = pytest.mark.skipif(not any(f.name == "xla-cpu-pjrt" for f in plugins.discover()),
                                reason="no xla-cpu-pjrt plug-in (pip install -e '.[pjrt]')")
SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
COUNTS = st.sampled_from([1, 2, 4])
DTYPES = st.sampled_from([np.float32, np.int32])


@pytest.fixture
def transfers(monkeypatch):
    """The number of host <-> device copies made since the fixture began: [to, from]."""
    count = [0, 0]
    put, get = pjrt.Buffer.from_host.__func__, pjrt.Buffer.to_host

    def counted_put(cls, *args, **kwargs):
        count[0] += 1
        return put(cls, *args, **kwargs)

    def counted_get(self):
        count[1] += 1
        return get(self)
    monkeypatch.setattr(pjrt.Buffer, "from_host", classmethod(counted_put))
    monkeypatch.setattr(pjrt.Buffer, "to_host", counted_get)
    return count


def pjrt_devices(n):
    return kiln.devices("pjrt")[:n]


def line(n, name="b"):
    return Mesh(np.array(pjrt_devices(n), dtype=object), (name,))


def values(shape, dtype, seed=0):
    data = np.random.default_rng(seed).standard_normal(shape) * 4
    return data.astype(dtype)


# ------------------------------------------------------------------------------- pmap

@SETTINGS
@given(n=COUNTS, rest=st.lists(st.integers(0, 3), max_size=2), dtype=DTYPES)
def test_pmap_results_stay_spread_over_the_devices(n, rest, dtype, transfers):
    x = values((n, *rest), dtype)
    f = kiln.pmap(lambda v: v * 2 + 1, backend="pjrt", devices=pjrt_devices(n))
    before = transfers[1]
    y = f(x)
    assert isinstance(y._value.data, Spread) and y.shape == x.shape and y.dtype == x.dtype
    assert transfers[1] == before   # the results did not come to the host
    assert y.devices() == set(pjrt_devices(n))
    assert y.sharding == NamedSharding(y.sharding.mesh, P(y.sharding.mesh.axis_names[0]))
    assert y.block_until_ready() is y
    want = x * 2 + 1
    np.testing.assert_array_equal(np.asarray(y), want)
    for i in range(n):
        assert y[i].device == pjrt_devices(n)[i]
        np.testing.assert_array_equal(np.asarray(y[i]), want[i])
    np.testing.assert_array_equal(np.asarray(y[-1]), want[-1])
    for shard, device in zip(y.addressable_shards, pjrt_devices(n)):
        assert shard.device == device and shard.data.device == device
        np.testing.assert_array_equal(np.asarray(shard.data), want[shard.index])


@SETTINGS
@given(n=COUNTS, rest=st.lists(st.integers(0, 3), max_size=2))
def test_a_pmap_result_goes_back_in_as_its_buffers(n, rest, transfers):
    f = kiln.pmap(lambda v: v / lax.psum(jnp.ones_like(v), "i") + lax.axis_index("i"),
                  axis_name="i", backend="pjrt", devices=pjrt_devices(n))
    x = values((n, *rest), np.float32)
    y = f(x)
    held = [b.handle for b in spread_of(y).buffers]
    before = list(transfers)
    z = f(y)
    assert transfers == before   # no copy to or from the host
    assert [b.handle for b in spread_of(y).buffers] == held
    want = kiln.pmap(lambda v: v / lax.psum(jnp.ones_like(v), "i") + lax.axis_index("i"),
                     axis_name="i", backend="reference")
    np.testing.assert_allclose(np.asarray(z), np.asarray(want(want(x))), rtol=1e-6)


def test_pmap_out_axes_and_unmapped_results():
    x = values((2, 3), np.float32)
    f = kiln.pmap(lambda v: (v * 2, lax.psum(v, "i")), axis_name="i", backend="pjrt",
                  devices=pjrt_devices(2), out_axes=(1, None))
    y, total = f(x)
    np.testing.assert_array_equal(np.asarray(y), (x * 2).T)
    assert y.sharding.spec == P(None, "i")
    np.testing.assert_allclose(np.asarray(total), x.sum(0), rtol=1e-6)
    assert total.device == pjrt_devices(2)[0]


# One family of eager operations each: (what kiln runs, the NumPy it must match, the least
# number of rows it needs).
EAGER = {
    "elementwise": (lambda x, y, h: x * 2 + 1, lambda x, y, h: x * 2 + 1, 0),
    "two spread": (lambda x, y, h: x * y - y, lambda x, y, h: x * y - y, 0),
    "spread and host": (lambda x, y, h: x + h, lambda x, y, h: x + h, 0),
    "host and spread": (lambda x, y, h: h - x, lambda x, y, h: h - x, 0),
    "sum": (lambda x, y, h: jnp.sum(x, axis=0), lambda x, y, h: x.sum(0), 0),
    "total": (lambda x, y, h: jnp.sum(x), lambda x, y, h: x.sum(), 0),
    "max": (lambda x, y, h: jnp.max(x, axis=1), lambda x, y, h: x.max(1), 0),
    "transpose": (lambda x, y, h: x.T, lambda x, y, h: x.T, 0),
    "row": (lambda x, y, h: x[1], lambda x, y, h: x[1], 2),
    "slice": (lambda x, y, h: x[1:, 0], lambda x, y, h: x[1:, 0], 0),
    "compare": (lambda x, y, h: jnp.where(x > y, x, 0), lambda x, y, h: np.where(x > y, x, 0),
                0),
}


@pytest.mark.parametrize("family", sorted(EAGER))
@settings(SETTINGS, max_examples=4)
@given(n=COUNTS, per=st.integers(0, 2), cols=st.integers(1, 3), dtype=DTYPES)
def test_eager_operations_on_spread_arrays(family, n, per, cols, dtype, transfers):
    op, want, rows = EAGER[family]
    shape = (max(n * per, rows // n * n + (rows % n and n)), cols)
    sharding = NamedSharding(line(n), P("b"))
    hx, hy, hh = values(shape, dtype), values(shape, dtype, 1), values((cols,), dtype, 2)
    x, y = kiln.device_put(hx, sharding), kiln.device_put(hy, sharding)
    before = transfers[1]
    got = op(x, y, hh)
    assert transfers[1] == before   # ran on the devices, nothing came to the host
    # spread over the mesh, but x[1] of one row per device is device 1's buffer (no copy)
    assert got.devices() <= set(sharding.mesh.devices.flat)
    assert isinstance(got._value.data, Spread) or family == "row"
    expected = want(hx, hy, hh)
    on_host = op(jnp.asarray(hx), jnp.asarray(hy), hh)   # kiln's dtypes (NumPy's sum widens)
    assert got.shape == expected.shape and got.dtype == on_host.dtype
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5)


def test_a_repeated_eager_operation_compiles_once(monkeypatch):
    from kiln import pjrt_partitioned
    compiled = []
    compile_ = pjrt_partitioned._compile
    monkeypatch.setattr(pjrt_partitioned, "_compile",
                        lambda *a: compiled.append(a[-1]) or compile_(*a))
    sharding = NamedSharding(line(2), P("b"))
    x = kiln.device_put(values((4, 3), np.float32), sharding)
    for _ in range(3):
        y = x * 3 - x
    assert len(compiled) == 2   # one multiply, one subtract
    np.testing.assert_allclose(np.asarray(y), np.asarray(x) * 2, rtol=1e-6)
    x * 3.0 + jnp.ones((4, 1), np.float32)   # other shapes: compiled anew
    assert len(compiled) > 2


def test_eager_operations_with_a_pmap_result_and_one_device(transfers):
    y = kiln.pmap(lambda v: v + 1, backend="pjrt", devices=pjrt_devices(2))(np.ones((2, 3)))
    np.testing.assert_array_equal(np.asarray(y * 2), np.full((2, 3), 4.0))
    np.testing.assert_array_equal(np.asarray(y[0, 1]), 2.0)
    row = kiln.device_put(np.arange(3, dtype=np.float32), pjrt_devices(4)[0])
    before = transfers[1]
    z = y - row   # the array on one device copied to both, device to device
    assert transfers[1] == before and isinstance(z._value.data, Spread)
    np.testing.assert_array_equal(np.asarray(z), 2.0 - np.arange(3, dtype=np.float32)[None]
                                  .repeat(2, 0))


@pytest.mark.parametrize("to", [P(None, "b"), P(), P(("a", "b")), P("b", "a")])
def test_device_put_reshards_on_the_same_mesh_without_the_host(to, transfers):
    mesh = Mesh(np.array(pjrt_devices(4), dtype=object).reshape(2, 2), ("a", "b"))
    h = values((4, 4), np.float32)
    x = kiln.device_put(h, NamedSharding(mesh, P("a")))
    before = list(transfers)
    y = kiln.device_put(x, NamedSharding(mesh, to))
    assert transfers == before and y.sharding == NamedSharding(mesh, to)
    np.testing.assert_array_equal(np.asarray(y), h)
    for shard in y.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), h[shard.index])


@pytest.mark.parametrize("spec", [("a",), (None, "a"), ()])
def test_device_put_onto_other_devices_copies_the_blocks_device_to_device(spec, transfers):
    h = values((4, 2), np.float32)
    devices = pjrt_devices(4)
    source = P(*[None if n is None else "b" for n in spec])
    x = kiln.device_put(h, NamedSharding(line(2), source))
    other = NamedSharding(Mesh(np.array(devices[2:][::-1], dtype=object), ("a",)), P(*spec))
    before = list(transfers)
    y = kiln.device_put(x, other)
    assert transfers == before and y.sharding == other
    np.testing.assert_array_equal(np.asarray(y), h)
    for shard in y.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), h[shard.index])


def test_a_pmap_result_put_on_other_devices(transfers):
    y = kiln.pmap(lambda v: v * 2, backend="pjrt", devices=pjrt_devices(2))(np.ones((2, 3)))
    others = Mesh(np.array(pjrt_devices(4)[2:], dtype=object), ("a",))
    before = transfers[1]
    z = kiln.device_put(y, NamedSharding(others, P("a")))
    assert transfers[1] == before and z.devices() == set(pjrt_devices(4)[2:])
    np.testing.assert_array_equal(np.asarray(z), np.full((2, 3), 2.0))
    whole = kiln.device_put(y, NamedSharding(others, P()))   # blocks y holds in no one place:
    assert transfers[1] > before                              # through the host
    np.testing.assert_array_equal(np.asarray(whole), np.full((2, 3), 2.0))


def test_more_replicas_than_the_mapped_devices():
    y = kiln.pmap(lambda v: v + 1, backend="pjrt", devices=pjrt_devices(4))(np.ones((4, 2)))
    g = kiln.pmap(lambda v: v + 1, backend="pjrt", devices=pjrt_devices(2))
    with pytest.raises(ValueError, match="requires 4 logical devices, but only 2"):
        g(y)


def test_a_result_on_other_devices_goes_in_through_the_host():
    y = kiln.pmap(lambda v: v + 1, backend="pjrt", devices=pjrt_devices(4)[2:])(
        np.ones((2, 2), np.float32))
    z = kiln.pmap(lambda v: v * 3, backend="pjrt", devices=pjrt_devices(2))(y)
    assert z.devices() == set(pjrt_devices(2))
    np.testing.assert_array_equal(np.asarray(z), np.full((2, 2), 6, np.float32))


# --------------------------------------------------------------- device_put, shard_map

@SETTINGS
@given(n=COUNTS, per=st.integers(0, 3), cols=st.integers(1, 3), dtype=DTYPES)
def test_device_put_onto_a_sharding_of_pjrt_devices(n, per, cols, dtype, transfers):
    mesh = line(n)
    x = values((n * per, cols), dtype)
    before = transfers[0]
    a = kiln.device_put(x, NamedSharding(mesh, P("b")))
    assert transfers[0] == before + n   # one block per device
    assert a.sharding == NamedSharding(mesh, P("b"))
    for shard, device in zip(a.addressable_shards, pjrt_devices(n)):
        assert shard.data.device == device
        assert type(shard.data._value.data) is pjrt.Buffer
        np.testing.assert_array_equal(np.asarray(shard.data), x[shard.index])
    np.testing.assert_array_equal(np.asarray(a), x)
    r = kiln.device_put(x, NamedSharding(mesh, P()))
    assert all(np.array_equal(np.asarray(s.data), x) for s in r.addressable_shards)
    assert kiln.device_put(a, NamedSharding(mesh, P("b"))) is a


def test_device_put_onto_a_sharding_that_does_not_divide():
    with pytest.raises(ValueError, match="does not evenly divide the dimension size 3"):
        kiln.device_put(np.ones((3, 2)), NamedSharding(line(2), P("b")))


def test_shard_map_results_stay_on_the_mesh_and_go_back_in(transfers):
    mesh = Mesh(np.array(pjrt_devices(4), dtype=object).reshape(2, 2), ("x", "y"))
    x = values((4, 6), np.float32)
    rows = kiln.shard_map(lambda b: lax.psum(b, "y") * 2, mesh=mesh, in_specs=P("x", "y"),
                          out_specs=P("x", "y"))
    a = kiln.device_put(x, NamedSharding(mesh, P("x", "y")))
    before = list(transfers)
    r = rows(a)
    assert transfers == before
    assert r.sharding == NamedSharding(mesh, P("x", "y"))
    cpu = kiln.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    want = kiln.shard_map(lambda b: lax.psum(b, "y") * 2, mesh=cpu, in_specs=P("x", "y"),
                          out_specs=P("x", "y"))
    np.testing.assert_allclose(np.asarray(r), np.asarray(want(x)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(rows(r)), np.asarray(want(want(x))), rtol=1e-6)
    summed = kiln.shard_map(lambda b: lax.psum(b, "y"), mesh=mesh, in_specs=P("x", "y"),
                            out_specs=P("x"))(x)
    assert summed.sharding == NamedSharding(mesh, P("x")) and summed.shape == (4, 3)


# ------------------------------------------------------------------------- sharded jit

def _loss(w, b, x, y):
    return jnp.mean((jnp.tanh(x @ w + b) - y) ** 2)


def _step(w, b, x, y):
    gw, gb = kiln.grad(_loss, argnums=(0, 1))(w, b, x, y)
    return w - 0.1 * gw, b - 0.1 * gb, _loss(w, b, x, y)


@SETTINGS
@given(n=COUNTS, per=st.integers(1, 3), width=st.integers(1, 4))
def test_data_parallel_jit_on_pjrt_devices(n, per, width, transfers):
    mesh = line(n)
    batch, replicated = NamedSharding(mesh, P("b")), NamedSharding(mesh, P())
    step = kiln.jit(_step, in_shardings=(replicated, replicated, batch, batch),
                    out_shardings=replicated, backend="pjrt")
    w, b = values((3, width), np.float32, 1) / 4, values((width,), np.float32, 2) / 4
    x, y = values((n * per, 3), np.float32, 3) / 4, values((n * per, width), np.float32, 4) / 4
    got = step(w, b, x, y)
    want = kiln.jit(_step)(w, b, x, y)
    for g, v in zip(got, want):
        assert g.sharding == replicated and isinstance(g._value.data, Spread)
        np.testing.assert_allclose(np.asarray(g), np.asarray(v), rtol=2e-5, atol=1e-6)
    xs, ys = kiln.device_put(x, batch), kiln.device_put(y, batch)
    before = list(transfers)
    again = step(got[0], got[1], xs, ys)   # every argument already where it goes
    assert transfers == before
    want = kiln.jit(_step)(np.asarray(got[0]), np.asarray(got[1]), x, y)
    for g, v in zip(again, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(v), rtol=2e-5, atol=1e-6)


@SETTINGS
@given(n=COUNTS, per=st.integers(0, 2), cols=st.integers(1, 3))
def test_jit_of_spread_arguments_keeps_the_batch_split(n, per, cols):
    mesh = line(n)
    x = values((n * per, cols), np.float32)
    xs = kiln.device_put(x, NamedSharding(mesh, P("b")))
    f = kiln.jit(lambda a, c: (jnp.sin(a) * c, a.sum(0)))
    out, total = f(xs, np.float32(2))
    # as in JAX: XLA leaves an empty result replicated; one device keeps the argument's
    assert out.sharding == NamedSharding(mesh, P("b") if per or n == 1 else P())
    assert total.sharding == NamedSharding(mesh, P())
    np.testing.assert_allclose(np.asarray(out), np.sin(x) * 2, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(total), x.sum(0), rtol=1e-5, atol=1e-5)


def test_jit_module_is_partitioned():
    mesh = line(2)
    f = kiln.jit(lambda a: a * 2, in_shardings=NamedSharding(mesh, P("b")), backend="pjrt")
    out = f(np.arange(4.0, dtype=np.float32))
    assert [b.shape for b in spread_of(out).buffers] == [(2,), (2,)]
    entry = f._partitioned.values()[0]
    assert len(entry.executable.devices) == 2


def test_jit_out_sharding_over_another_mesh():
    f = kiln.jit(lambda a: a * 2, in_shardings=NamedSharding(line(2), P("b")),
                 out_shardings=NamedSharding(line(4), P("b")), backend="pjrt")
    with pytest.raises(NotImplementedError, match="not a NamedSharding over the mesh"):
        f(np.arange(4.0, dtype=np.float32))


# --------------------------------------------------------------- between PJRT devices

def test_device_put_between_pjrt_devices_without_the_host(transfers):
    d = kiln.devices("pjrt")
    a = kiln.device_put(np.arange(6.0, dtype=np.float32).reshape(2, 3), d[0])
    before = list(transfers)
    b = kiln.device_put(a, d[1])
    assert transfers == before
    assert b.device == d[1] and a.device == d[0]
    np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
    c = kiln.jit(lambda v: v + 1)(b)
    assert c.device == d[1]


def test_hlo_sharding_texts():
    from kiln.compiler.backends.stablehlo.module import hlo_sharding
    assert hlo_sharding((2,), [(0,), ()]) == "{devices=[2,1]0,1}"
    assert hlo_sharding((4,), [(), ()]) == "{replicated}"
    assert hlo_sharding((1,), [(0,)]) == "{replicated}"
    # dimension 0 over mesh axis 0, mesh axis 1 replicated
    assert hlo_sharding((2, 2), [(0,), ()]) == "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"
    # dimension 0 over mesh axis 1 and dimension 1 over mesh axis 0: tile (i, j) on (j, i)
    assert hlo_sharding((2, 2), [(1,), (0,)]) == "{devices=[2,2]0,2,1,3}"
    assert hlo_sharding((2, 2), [(0, 1)]) == "{devices=[4]0,1,2,3}"


@pytest.mark.parametrize("spec", [P("x"), P("y"), P(None, ("x", "y")), P("y", "x")])
def test_jit_on_a_two_axis_mesh(spec):
    mesh = Mesh(np.array(pjrt_devices(4), dtype=object).reshape(2, 2), ("x", "y"))
    x = values((4, 8), np.float32)
    sharding = NamedSharding(mesh, spec)
    f = kiln.jit(lambda v: (jnp.tanh(v) * 2, v.sum(0), v.T), in_shardings=sharding,
                 out_shardings=(sharding, NamedSharding(mesh, P()),
                                NamedSharding(mesh, P(*reversed(spec.padded(2))))))
    got = f(x)
    want = (np.tanh(x) * 2, x.sum(0), x.T)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)
    for shard in got[0].addressable_shards:
        np.testing.assert_allclose(np.asarray(shard.data), want[0][shard.index], rtol=1e-5)


def test_jit_of_a_pmap_result_stays_on_its_devices(transfers):
    x = values((2, 3), np.float32)
    y = kiln.pmap(lambda v: v + 1, backend="pjrt", devices=pjrt_devices(2))(x)
    before = list(transfers)
    z = kiln.jit(lambda a: jnp.cos(a) * 2)(y)
    assert transfers == before
    assert z.sharding == y.sharding
    np.testing.assert_allclose(np.asarray(z), np.cos(x + 1) * 2, rtol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_pmap_of_rows_put_on_the_devices(n, transfers):
    mesh = line(n, "i")
    x = values((n, 3), np.float32)
    a = kiln.device_put(x, NamedSharding(mesh, P("i")))
    f = kiln.pmap(lambda v: v * 2, backend="pjrt", devices=pjrt_devices(n))
    before = list(transfers)
    y = f(a)
    assert transfers == before
    np.testing.assert_array_equal(np.asarray(y), x * 2)
    b = kiln.device_put(x.T.copy(), NamedSharding(mesh, P(None, "i")))
    z = kiln.pmap(lambda v: v + 1, backend="pjrt", devices=pjrt_devices(n), in_axes=1)(b)
    np.testing.assert_array_equal(np.asarray(z), x + 1)
