"""Running generated CUDA C on the host, to check its results without a GPU.

The kernel's text is compiled unchanged by the host's C++ compiler (`c++`, or `KILN_CXX`) after a
small prelude that gives it CUDA's names: `__global__`/`__device__` vanish, `threadIdx`,
`blockIdx`, `blockDim` and `gridDim` are thread-local variables, and CUDA's math functions
(`expf`, `rsqrtf`, `signbit`, ...) are the C library's. A C wrapper per kernel, `launch`, runs
every (block, thread) of a grid one after the other, setting those variables, so a grid-stride
loop covers its elements exactly as on the device with that grid; tests use grids smaller than
the element count, so the stride is exercised.

What this cannot catch (docs/cuda.md): races and synchronisation (threads run one at a time),
the device's math library (the host's libm rounds differently: results are compared within the
documented ulps, not bit for bit), the device's memory model, occupancy and speed. NVRTC
compiles the same text for the device in the same tests.
"""
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

PRELUDE = r"""
#include <cmath>
#include <cstdint>
#define __global__
#define __device__
#define __restrict__ __restrict
struct kiln_dim3 { unsigned int x, y, z; };
static thread_local kiln_dim3 threadIdx, blockIdx, blockDim, gridDim;
using std::signbit;
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
"""

_LAUNCH = r"""
extern "C" void launch_{name}(void **args, unsigned int blocks, unsigned int threads)
{{
    gridDim = {{blocks, 1, 1}};
    blockDim = {{threads, 1, 1}};
    for (unsigned int b = 0; b < blocks; ++b)
        for (unsigned int t = 0; t < threads; ++t) {{
            blockIdx = {{b, 0, 0}};
            threadIdx = {{t, 0, 0}};
            {name}({args});
        }}
}}
"""


def compiler():
    """The host C++ compiler (KILN_CXX, else c++/g++/clang++), or None."""
    explicit = os.environ.get("KILN_CXX", "").strip()
    return explicit or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


_LOADED = {}


def load(kernel):
    """A callable `launch(arrays, n, blocks, threads)` running `kernel` (source.Kernel) on the
    host; arrays are the inputs then the outputs (NumPy, C-contiguous)."""
    key = hashlib.sha256(kernel.source.encode()).hexdigest()[:20]
    if key in _LOADED:
        return _LOADED[key]
    cxx = compiler()
    if cxx is None:
        raise OSError("no C++ compiler to emulate CUDA kernels on the host (set KILN_CXX)")
    count = len(kernel.inputs) + len(kernel.outputs)
    casts = [f"({_pointer(d, True)})args[{k}]" for k, d in enumerate(kernel.inputs)]
    casts += [f"({_pointer(d, False)})args[{len(kernel.inputs) + k}]"
              for k, d in enumerate(kernel.outputs)]
    casts.append(f"*(long long *)args[{count}]")
    text = PRELUDE + kernel.source + _LAUNCH.format(name=kernel.name, args=", ".join(casts))
    directory = tempfile.mkdtemp(prefix="kiln-cuda-emulation-")
    source, library = os.path.join(directory, "k.cpp"), os.path.join(directory, "k.so")
    with open(source, "w") as f:
        f.write(text)
    done = subprocess.run([cxx, "-x", "c++", "-std=c++17", "-O1", "-fPIC", "-shared",
                           "-fno-fast-math", source, "-o", library], capture_output=True,
                          text=True)
    if done.returncode:
        raise RuntimeError(f"the host compiler rejected the emulated kernel:\n{done.stderr}")
    entry = getattr(ctypes.CDLL(library), f"launch_{kernel.name}")
    entry.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_uint]

    def launch(arrays, n, blocks, threads):
        count64 = np.array([n], np.int64)
        pointers = (ctypes.c_void_p * (count + 1))(
            *[a.ctypes.data for a in arrays], count64.ctypes.data)
        entry(pointers, blocks, threads)
    _LOADED[key] = launch
    return launch


def _pointer(dtype, const):
    from .source import _memory_type
    return f"{'const ' if const else ''}{_memory_type(dtype)} *"


def run(kernel, inputs, n, blocks=3, threads=32):
    """The kernel's outputs for NumPy `inputs` (n elements each, or rank 0), computed on the host
    with a grid of `blocks` x `threads`."""
    arrays = [np.ascontiguousarray(np.asarray(x, dtype=d).astype(np.uint8)
                                   if np.dtype(d).kind == "b" else np.asarray(x, dtype=d))
              for x, d in zip(inputs, kernel.inputs)]
    outs = [np.empty(n, np.uint8 if np.dtype(d).kind == "b" else d) for d in kernel.outputs]
    load(kernel)(arrays + outs, n, blocks, threads)
    return [o.astype(bool) if np.dtype(d).kind == "b" else o
            for o, d in zip(outs, kernel.outputs)]
