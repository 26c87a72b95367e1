"""donate_argnums / donate_argnames of jit on PJRT devices (runtime/pjrt.py's compile_function,
runtime/pjrt_partitioned.py): a donated argument's buffer is aliased to a result of its shape
and dtype (`tf.aliasing_output`, XLA's input-output aliasing), PJRT takes it over (the old
device buffer is gone), the kiln Array is deleted with JAX's error, and the other arguments
are untouched. On one device and on a mesh of 2 and 4 devices of XLA's CPU plug-in."""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kiln
from kiln import P
from kiln.compiler.backends.pjrt import api, plugins
from kiln.pjrt_spread import spread_of
from kiln.sharding import Mesh, NamedSharding

pytestmark = pytest.mark.skipif(not any(f.name == "xla-cpu-pjrt" for f in plugins.discover()),
                                reason="no xla-cpu-pjrt plug-in (pip install -e '.[pjrt]')")
SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
SHAPES = st.lists(st.integers(0, 3), max_size=2).map(tuple)
DTYPES = st.sampled_from([np.float32, np.int32])


def values(shape, dtype, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 4).astype(dtype)


def gone(buffer):
    """Whether PJRT took the device buffer over (a donated buffer cannot be read)."""
    with pytest.raises(api.PjrtError, match="deleted or donated"):
        buffer.to_host()
    return True


def assert_deleted(x):
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match="Array has been deleted with shape=.*donated"):
        x + 1
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        np.asarray(x)


@SETTINGS
@given(shape=SHAPES, dtype=DTYPES)
def test_donation_on_one_device(shape, dtype):
    device = kiln.devices("pjrt")[1]
    f = kiln.jit(lambda a, b: (a * 2 + b, b - 1), backend="pjrt", donate_argnums=0)
    ha, hb = values(shape, dtype), values(shape, dtype, 1)
    a, b = kiln.device_put(ha, device), kiln.device_put(hb, device)
    held = a._value.data
    y, z = f(a, b)
    assert y.device == device and gone(held)
    np.testing.assert_array_equal(np.asarray(y), ha * 2 + hb)
    np.testing.assert_array_equal(np.asarray(z), hb - 1)
    assert_deleted(a)
    assert not b.is_deleted()
    np.testing.assert_array_equal(np.asarray(b), hb)   # the argument not donated: untouched


def test_donation_by_name_and_of_a_host_value():
    f = kiln.jit(lambda a, b: a + b, backend="pjrt", donate_argnames="b")
    host = np.arange(4, dtype=np.float32)
    a = kiln.device_put(host, kiln.devices("pjrt")[0])
    b = kiln.device_put(host + 1, kiln.devices("pjrt")[0])
    np.testing.assert_array_equal(np.asarray(f(a, b=b)), 2 * host + 1)
    assert_deleted(b)
    assert not a.is_deleted()
    np.testing.assert_array_equal(np.asarray(f(a, b=host)), 2 * host)
    np.testing.assert_array_equal(host, np.arange(4, dtype=np.float32))   # NumPy's stays


def test_donation_through_a_jit_without_backend():
    f = kiln.jit(lambda a: a * 2, donate_argnums=0)   # runs on the device its argument is on
    a = kiln.device_put(np.ones(3, np.float32), kiln.devices("pjrt")[0])
    held = a._value.data
    np.testing.assert_array_equal(np.asarray(f(a)), np.full(3, 2.0))
    assert gone(held)
    assert_deleted(a)


def test_a_donation_no_result_can_take_warns_and_keeps_the_argument():
    f = kiln.jit(lambda a: a.sum(), backend="pjrt", donate_argnums=0)
    a = kiln.device_put(np.ones((2, 3), np.float32), kiln.devices("pjrt")[0])
    with pytest.warns(UserWarning, match="Some donated buffers were not usable"):
        assert float(f(a)) == 6.0
    assert not a.is_deleted() and float(np.asarray(a).sum()) == 6.0


@SETTINGS
@given(n=st.sampled_from([2, 4]), per=st.integers(0, 2), cols=st.integers(1, 3),
       dtype=DTYPES)
def test_donation_on_a_mesh(n, per, cols, dtype):
    mesh = Mesh(np.array(kiln.devices("pjrt")[:n], dtype=object), ("b",))
    sharding = NamedSharding(mesh, P("b"))
    ha, hb = values((n * per, cols), dtype), values((n * per, cols), dtype, 1)
    a, b = kiln.device_put(ha, sharding), kiln.device_put(hb, sharding)
    held = list(spread_of(a).buffers)
    f = kiln.jit(lambda a, b: (a - b, b.sum(0)), donate_argnums=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, total = f(a, b)
    # XLA's choice of y's sharding, as in JAX: an empty result is replicated
    assert y.sharding == (sharding if per else NamedSharding(mesh, P()))
    assert all(gone(h) for h in held)
    np.testing.assert_array_equal(np.asarray(y), ha - hb)
    # partial sums per device, then their sum: float32 rounding may differ from NumPy's
    np.testing.assert_allclose(np.asarray(total), hb.sum(0, dtype=dtype), rtol=1e-6)
    assert_deleted(a)
    np.testing.assert_array_equal(np.asarray(b), hb)


def test_no_alias_across_shardings_on_a_mesh():
    mesh = Mesh(np.array(kiln.devices("pjrt")[:2], dtype=object), ("b",))
    a = kiln.device_put(np.ones((4, 4), np.float32), NamedSharding(mesh, P("b")))
    f = kiln.jit(lambda a: a * 3, out_shardings=NamedSharding(mesh, P(None, "b")),
                 donate_argnums=0)
    g = kiln.jit(lambda a: a.sum(0), donate_argnums=0)   # a plain jit of a spread array
    with pytest.warns(UserWarning, match="not usable") as caught:
        g(a)
    assert caught[0].filename == __file__
    with pytest.warns(UserWarning, match=r"Some donated buffers were not usable: f32\[4,4\]") \
            as caught:
        np.testing.assert_array_equal(np.asarray(f(a)), np.full((4, 4), 3.0))
    assert caught[0].filename == __file__   # pointing at the call
    assert not a.is_deleted()   # its blocks are not the result's: nothing was taken


def test_donation_when_xla_chooses_the_results_shardings():
    # No out_shardings: the donated argument is a buffer donor (jax.buffer_donor, as in
    # JAX) and XLA, having placed the results, gives its buffer to one; kiln's own rules
    # would have replicated them (two mesh axes).
    mesh = Mesh(np.array(kiln.devices("pjrt")[:4], dtype=object).reshape(2, 2), ("x", "y"))
    sharding = NamedSharding(mesh, P("x", "y"))
    ha, hb = values((4, 6), np.float32), values((4, 6), np.float32, 1)
    a, b = kiln.device_put(ha, sharding), kiln.device_put(hb, sharding)
    held = list(spread_of(a).buffers)
    f = kiln.jit(lambda a, b: (a * 2 + b, b.sum(1)), donate_argnums=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, total = f(a, b)
    (entry,) = f._partitioned.values()
    assert "jax.buffer_donor = true" in entry.text and "tf.aliasing_output" not in entry.text
    assert y.sharding == sharding and total.sharding == NamedSharding(mesh, P("x"))
    assert all(gone(h) for h in held)
    np.testing.assert_allclose(np.asarray(y), ha * 2 + hb, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(total), hb.sum(1), rtol=1e-5)
    assert_deleted(a)
    np.testing.assert_array_equal(np.asarray(b), hb)
