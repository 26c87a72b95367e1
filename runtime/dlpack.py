"""`kiln.dlpack`: arrays exchanged with other libraries through DLPack, as `jax.dlpack` has it:
`from_dlpack` and `is_supported_dtype`.

`from_dlpack` takes any object with `__dlpack__` and `__dlpack_device__` (a NumPy array, a CuPy
or PyTorch tensor, another kiln Array). Host memory becomes a host Array over the same buffer
when its dtype is kept (no copy); CUDA memory becomes an Array on the GPU. The other way, kiln
Arrays have `__dlpack__` and `__dlpack_device__` themselves, so `np.from_dlpack(array)` is a
view of a host Array's buffer.
"""
import numpy as np

from .array import Array
from .dtypes import canonicalize_dtype
from .placement import device_put
from .sharding import Sharding

__all__ = ["from_dlpack", "is_supported_dtype"]

# DLPack device types kiln can read: kDLCPU, kDLCUDA, kDLCUDAHost (pinned host memory).
_CPU, _CUDA, _CUDA_HOST = 1, 2, 3

_SUPPORTED = frozenset(np.dtype(t) for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128, np.bool_))


def is_supported_dtype(dtype) -> bool:
    """Whether DLPack exchange supports `dtype`: the signed and unsigned integers, float16,
    float32, float64, complex64, complex128 and bool (JAX's bfloat16 too, which NumPy and so
    kiln lack)."""
    if dtype is None:
        raise TypeError(f"Expected a string or dtype-like object; got {dtype=}")
    return np.dtype(dtype) in _SUPPORTED


def from_dlpack(external_array, device=None, copy=None):
    """A kiln Array holding `external_array`'s data (any object with `__dlpack__` and
    `__dlpack_device__`). `device` (a Device or a one-device Sharding) places it there, a copy
    when the data is elsewhere; `copy=True` always copies, `copy=False` refuses a copy the
    placement needs, and `copy=None` copies only where needed. The dtype is canonicalised as
    `jnp.asarray` does (float64 becomes float32 unless x64 is enabled)."""
    if isinstance(device, Sharding):
        devices = device.device_set
        if len(devices) > 1:
            raise ValueError("from_dlpack can only unpack a dlpack tensor onto a singular "
                             f"device, but a Sharding with {len(devices)} devices was provided.")
        device, = devices
    if not hasattr(external_array, "__dlpack__") or not hasattr(external_array,
                                                                 "__dlpack_device__"):
        raise TypeError("The array passed to from_dlpack must have __dlpack__ and "
                        "__dlpack_device__ methods.")
    device_type, _ = external_array.__dlpack_device__()
    if device_type not in (_CPU, _CUDA, _CUDA_HOST):
        raise TypeError("Array passed to from_dlpack is on unsupported device type "
                        f"(DLDeviceType: {device_type}, array: {external_array}")
    array = _import(external_array, device_type, copy)
    if device is not None and array.device != device:
        if copy is False:
            raise ValueError(f"Specified {device=} which requires a copy since the source "
                             f"device is {array.device!r}, however copy=False. Set copy=True "
                             "or copy=None to perform the requested operation.")
        array = device_put(array, device)
    return array


def _import(external_array, device_type, copy):
    if device_type == _CUDA:
        # The CUDA backend's layer reads CUDA memory through CuPy, without a copy.
        from .compiler.backends.cuda import device as cuda
        layer = cuda.current()
        data = layer.xp.from_dlpack(external_array)
        return Array(cuda.DeviceBuffer(data, layer), False)
    host = np.from_dlpack(external_array)
    if copy or canonicalize_dtype(host.dtype) != host.dtype or not host.flags.c_contiguous:
        from .numpy import array
        return array(host, copy=True)
    return Array(host, False)


def __dir__():
    """The public names only (the modules and helpers this one imports are not its API)."""
    return sorted(__all__)
