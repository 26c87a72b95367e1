"""The CUDA backend's device layer: one small interface, two implementations.

A `Layer` holds buffers (its array module's arrays, `xp`) and offers what the backend's
executable and GPU arrays need:

    to_device(ndarray) -> buffer        to_host(buffer) -> ndarray     empty(shape, dtype)
    launch(kernel, grid, block, buffers, extents)   (kernel: source.Kernel, its text and name)
    launch_shape(kernel) -> (grid, block)           synchronize()
    prepare(kernels)                    (compile them ahead of their first launch)
    arch                                (the device's real architecture, "sm_90"; None when
                                         emulated: kernels are compiled for the host)
    load_module(kernel, path)           (the kernel from a cubin or PTX file, `kiln compile`'s;
                                         ModuleLoadError when the driver refuses it)
    gemm(a, b) -> buffer                (a (B, M, K) by b (B, K, N), or 2-D: cuBLAS / BLAS)
    fft(x, fft_type, fft_lengths)       (the `fft` primitive: cuFFT / NumPy's pocketfft)
    primitive(prim, buffers, params)    (a primitive without a kernel: its NumPy definition
                                         over the layer's arrays, see `primitive`)

- `CupyLayer` (a real GPU): buffers are CuPy arrays, each kernel text compiled once by CuPy's
  `RawModule` (NVRTC) and kept in memory, launched on CuPy's current stream; `gemm` is
  `cupy.matmul` (cuBLAS), `fft` `cupy.fft` (cuFFT). CuPy is imported only here, and only when the layer is made.
- `EmulatedLayer` (testing aid, `KILN_CUDA_EMULATE=1`): buffers are NumPy arrays, kernels run
  on the host through emulate.py (the same CUDA C under the host's C++ compiler, each text
  compiled once), `gemm` is `numpy.matmul`, `fft` `numpy.fft`. It is the host pretending to be a GPU, so that
  `jit(f, backend="cuda")` and GPU arrays run end to end without a device; it checks the
  generated kernels and the executable's plan, not the device (docs/cuda.md).

`current()` is the layer backend="cuda" and GPU arrays use: the emulated one when
`KILN_CUDA_EMULATE` is 1/true/yes/on, else CuPy's when CuPy finds a device, else a
`DeviceUnavailableError` saying why (CuPy missing: `pip install '.[cuda]'`; no device).
`DeviceBuffer` is what a kiln Array holds for data on a layer: the layer's array and the
layer, with the array's shape and dtype; it never converts itself to NumPy implicitly.
"""
import functools
import os
from typing import NamedTuple

import numpy as np

from ...errors import KilnError
from ...primitives.fft import transform

EMULATE = "KILN_CUDA_EMULATE"


class DeviceUnavailableError(KilnError, RuntimeError):
    """backend="cuda" or a GPU device was asked for where there is none (no CuPy, no device,
    or the platforms option leaves the GPU out)."""


def emulating():
    """Whether `KILN_CUDA_EMULATE` asks for the emulated device (read on every call)."""
    return os.environ.get(EMULATE, "").strip().lower() in ("1", "true", "yes", "on")


class _Flags(NamedTuple):
    c_contiguous: bool
    aligned: bool
    writeable: bool


class DeviceBuffer:
    """Data on a device layer: `data` (the layer's array, C-contiguous) and `layer`. It has
    an ndarray's metadata (shape, dtype, ndim, size, itemsize, nbytes, flags) but no
    `__array__`: copying to the host is explicit (`Array.__array__`, `device_get`)."""

    __slots__ = ("data", "layer")
    flags = _Flags(True, True, False)

    def __init__(self, data, layer):
        self.data = data
        self.layer = layer

    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    itemsize = property(lambda self: self.data.itemsize)
    nbytes = property(lambda self: self.data.nbytes)

    def to_host(self):
        return self.layer.to_host(self.data)

    def __array__(self, *args, **kwargs):
        raise TypeError(f"a {self.layer.platform} buffer is not converted to a NumPy array "
                        f"implicitly: use np.asarray(array) on the kiln Array or "
                        f"kiln.device_get(array)")

    def __bool__(self):   # not Python's default truth: a value needs a copy to the host
        self.__array__()

    def __repr__(self):
        return f"DeviceBuffer({self.dtype.name}{list(self.shape)} on {self.layer.name})"


class ModuleLoadError(KilnError, RuntimeError):
    """The driver refused a kernel's cubin or PTX file (Layer.load_module)."""


class Layer:
    """What both layers share (see the module docstring)."""
    platform = "gpu"
    xp = np
    name = "?"
    arch = None

    def primitive(self, prim, buffers, params):
        """A primitive the kernel generator cannot emit yet, on this layer: its NumPy
        definition (`prim.impl`, the reference backend's) over the layer's arrays. NumPy
        functions called on CuPy arrays run CuPy's own (NumPy's `__array_function__` and
        `__array_ufunc__` protocols), so on a GPU the data stays on the device; an
        implementation that converts its operands to NumPy is refused by CuPy (a TypeError),
        never copied to the host silently."""
        out = prim.impl(*buffers, **params)
        return out if prim.multiple_results else (out,)

    def run_kernel(self, kernel, buffers, results):
        """Launch `kernel` (source.Kernel) on its input `buffers` and output `results`, with
        fresh zeroed work buffers (`kernel.scratch`); nothing to do for no work."""
        if kernel.sizes[0]:
            work = [self.zeros(count, dtype) for dtype, count in kernel.scratch]
            grid, block = self.launch_shape(kernel)
            self.launch(kernel, grid, block, list(buffers) + list(results) + work, kernel.sizes)

    def eager(self, prim, values, params):
        """`prim` applied outside `jit` to `values` on this layer (eager.py)."""
        from .eager import run
        return run(prim, values, params)

    def fft(self, x, fft_type, fft_lengths):
        """The `fft` primitive over the trailing axes of `x`, with the layer's `xp.fft`."""
        return transform(self.xp, x, fft_type, fft_lengths)


class EmulatedLayer(Layer):
    name = "kiln host emulation of a CUDA device"
    device_kind = "kiln CUDA emulation"

    def to_device(self, host):
        return host if host.flags.c_contiguous else np.ascontiguousarray(host).reshape(host.shape)

    def to_host(self, data):
        return data

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)

    def launch_shape(self, kernel):
        """A grid smaller than the data (the grid-stride loops run more than once) and two
        warps a block (a reduction's combine across warps runs)."""
        return 2, (64 if kernel.launch.startswith("block_") else 32)

    def prepare(self, kernels):
        from . import emulate
        emulate.load_all(kernels)

    def launch(self, kernel, grid, block, buffers, extents):
        from . import emulate
        emulate.load(kernel)(buffers, extents, grid, block)

    def synchronize(self):
        return None

    def gemm(self, a, b):
        return np.matmul(a, b)


class CupyLayer(Layer):
    def __init__(self, cupy):
        self.cupy = self.xp = cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"]
        self.name = self.device_kind = name.decode() if isinstance(name, bytes) else str(name)
        self.multiprocessors = props["multiProcessorCount"]
        self.arch = f"sm_{props['major']}{props['minor']}"
        self._functions = {}   # kernel text -> CuPy RawModule function

    def to_device(self, host):
        return self.cupy.asarray(host)

    def to_host(self, data):
        return self.cupy.asnumpy(data)

    def empty(self, shape, dtype):
        return self.cupy.empty(shape, dtype)

    def zeros(self, shape, dtype):
        return self.cupy.zeros(shape, dtype)

    def launch_shape(self, kernel):
        from .source import grid
        return grid(kernel, self.multiprocessors)

    def prepare(self, kernels):
        for kernel in kernels:
            self._function(kernel)

    def _function(self, kernel):
        function = self._functions.get(kernel.source)
        if function is None:
            module = self.cupy.RawModule(code=kernel.source, options=("--std=c++17",))
            function = self._functions[kernel.source] = module.get_function(kernel.name)
        return function

    def load_module(self, kernel, path):
        """`kernel`'s function from the cubin or PTX file at `path` (the driver compiles PTX
        for the device), used for its text from now on."""
        try:
            function = self.cupy.RawModule(path=str(path)).get_function(kernel.name)
        except self.cupy.cuda.driver.CUDADriverError as e:
            raise ModuleLoadError(f"the CUDA driver could not load {path}: {e}") from None
        self._functions[kernel.source] = function

    def launch(self, kernel, grid, block, buffers, extents):
        self._function(kernel)((grid,), (block,), (*buffers, *map(np.int64, extents)))

    def synchronize(self):
        self.cupy.cuda.get_current_stream().synchronize()

    def gemm(self, a, b):
        return self.cupy.matmul(a, b)


@functools.cache
def _emulated():
    return EmulatedLayer()


@functools.cache
def _cupy_layer():
    from .launch import available
    ok, why = available()
    if not ok:
        return why
    import cupy
    return CupyLayer(cupy)


def current():
    """The device layer backend="cuda" runs on (see the module docstring)."""
    if emulating():
        return _emulated()
    layer = _cupy_layer()
    if isinstance(layer, str):
        raise DeviceUnavailableError(
            f"the CUDA backend needs a GPU: {layer}. On a machine without one, "
            f"{EMULATE}=1 runs it on the host's emulation of a device (a testing aid)")
    return layer


def available():
    """(True, the layer's device name) or (False, why): what `current()` would give."""
    try:
        return True, current().name
    except DeviceUnavailableError as e:
        return False, e.bare_message
