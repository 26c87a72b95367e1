"""Tests for `kiln.dlpack` against `jax.dlpack` (JAX 0.10.2): dtypes and shapes (sizes 0 and
1) through `from_dlpack`, zero-copy exchange with NumPy both ways, exchange with JAX's arrays,
`device` and `copy`, `is_supported_dtype`, and JAX's error messages."""
import numpy as np
import pytest

import kiln
import kiln.dlpack as kdlpack
import kiln.numpy as jnp

jax = pytest.importorskip("jax")
import jax.dlpack as jdlpack  # noqa: E402

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.uint8,
          np.uint64, np.complex64, np.bool_]
SHAPES = [(), (0,), (1,), (2, 3), (4, 0, 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_from_dlpack_dtypes_and_shapes_as_jax(dtype):
    for shape in SHAPES:
        host = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
        got, want = kdlpack.from_dlpack(host), jdlpack.from_dlpack(host)
        assert isinstance(got, kiln.Array)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_host_exchange_is_zero_copy():
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    imported = kdlpack.from_dlpack(host)
    assert np.shares_memory(np.asarray(imported), host)
    assert np.shares_memory(np.asarray(jnp.from_dlpack(host)), host)
    assert not np.shares_memory(np.asarray(kdlpack.from_dlpack(host, copy=True)), host)
    exported = jnp.arange(5.0)
    assert exported.__dlpack_device__() == (1, 0)
    assert np.shares_memory(np.from_dlpack(exported), np.asarray(exported))
    # a strided view and a float64 array without x64 are copied, as they must be
    strided = np.arange(6.0, dtype=np.float32).reshape(2, 3)[:, ::2]
    np.testing.assert_array_equal(kdlpack.from_dlpack(strided), [[0, 2], [3, 5]])
    assert kdlpack.from_dlpack(np.arange(3.0)).dtype == np.float32


def test_exchange_with_jax_and_under_jit():
    x = jnp.linspace(0.0, 1.0, 7)
    np.testing.assert_array_equal(np.asarray(jdlpack.from_dlpack(x)), np.asarray(x))
    back = kdlpack.from_dlpack(jax.numpy.arange(4, dtype=np.int32))
    assert back.dtype == np.int32 and back.tolist() == [0, 1, 2, 3]
    doubled = kiln.jit(lambda a: a * 2)(kdlpack.from_dlpack(np.ones((2, 2), np.float32)))
    np.testing.assert_array_equal(doubled, np.full((2, 2), 2.0))


def test_device_and_copy():
    host = np.arange(4, dtype=np.int32)
    device = kiln.devices()[0]
    placed = kdlpack.from_dlpack(host, device=device)
    assert placed.device == device
    sharded = kdlpack.from_dlpack(host, device=kiln.sharding.SingleDeviceSharding(device))
    assert sharded.device == device


def test_is_supported_dtype_as_jax():
    for dtype in DTYPES + ["float32", np.str_, np.object_, np.dtype("V4")]:
        assert kdlpack.is_supported_dtype(dtype) == jdlpack.is_supported_dtype(dtype)
    with pytest.raises(TypeError) as want:
        jdlpack.is_supported_dtype(None)
    with pytest.raises(TypeError, match="Expected a string or dtype-like object") as got:
        kdlpack.is_supported_dtype(None)
    assert str(got.value) == str(want.value)


def test_errors_as_jax():
    for module in (jdlpack, kdlpack):
        with pytest.raises(TypeError, match="must have __dlpack__ and __dlpack_device__"):
            module.from_dlpack([1, 2])

    class OnAnUnknownDevice:
        def __dlpack__(self, stream=None):
            raise AssertionError("not reached")

        def __dlpack_device__(self):
            return (12, 0)

        def __repr__(self):
            return "OnAnUnknownDevice()"

    with pytest.raises(TypeError) as got:
        kdlpack.from_dlpack(OnAnUnknownDevice())
    assert str(got.value) == ("Array passed to from_dlpack is on unsupported device type "
                              "(DLDeviceType: 12, array: OnAnUnknownDevice()")
