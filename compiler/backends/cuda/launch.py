"""Running a generated kernel on a GPU through CuPy (imported only here, only when used).

`run(kernel, inputs, n)` copies the inputs to the current device, launches `kernel`
(source.Kernel) compiled by CuPy's RawModule (NVRTC; cached by CuPy by source text and
architecture) with `source.launch_shape`, and copies the outputs back. `available()` says
whether CuPy and a device are there, with the reason when not. This is the path the GPU tests
(`-m gpu`, tests/test_cuda_gpu.py) check kernels on; jit's `backend="cuda"` will build on it.
"""
import functools

import numpy as np

from .source import grid


@functools.cache
def available():
    """(True, device name) or (False, why)."""
    try:
        import cupy
    except ImportError as e:
        return False, f"CuPy is not installed ({e}; pip install '.[cuda]')"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:   # noqa: BLE001 - CuPy raises its own CUDA errors without a driver
        return False, f"no usable CUDA device ({type(e).__name__}: {e})"
    if count == 0:
        return False, "no CUDA device"
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    return True, name.decode() if isinstance(name, bytes) else str(name)


def run(kernel, inputs, extents=None):
    """The kernel's outputs (NumPy, flat) for NumPy `inputs`, computed on the GPU; `extents`:
    its size arguments (n, or a reduction's (rows, cols); by default `kernel.sizes`)."""
    extents = kernel.sizes if extents is None else \
        (extents,) if isinstance(extents, int) else tuple(extents)
    n = extents[0]
    import cupy
    module = cupy.RawModule(code=kernel.source, options=("--std=c++17",))
    function = module.get_function(kernel.name)
    device = cupy.cuda.Device()
    sms = device.attributes["MultiProcessorCount"]
    arrays = [cupy.asarray(np.asarray(x, d).astype(np.uint8) if np.dtype(d).kind == "b"
                           else np.asarray(x, d)) for x, d in zip(inputs, kernel.inputs)]
    outs = [cupy.empty(int(np.prod(shape, dtype=np.int64)), np.uint8 if np.dtype(d).kind == "b"
                       else d) for d, shape in zip(kernel.outputs, kernel.out_shapes)]
    work = [cupy.zeros(count, dtype) for dtype, count in kernel.scratch]
    blocks, threads = grid(kernel, sms)
    if n:
        function((blocks,), (threads,), (*arrays, *outs, *work, *map(np.int64, extents)))
    return [cupy.asnumpy(o).astype(bool) if np.dtype(d).kind == "b" else cupy.asnumpy(o)
            for o, d in zip(outs, kernel.outputs)]
