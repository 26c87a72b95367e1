"""Running generated CUDA C on the host, to check its results without a GPU.

The kernel's text is compiled unchanged by the host's C++ compiler (`c++`, or `KILN_CXX`) after a
small prelude that gives it CUDA's names: `__global__`/`__device__` vanish, `threadIdx`,
`blockIdx`, `blockDim` and `gridDim` are thread-local variables, `__shared__` memory is static
(one block runs at a time), and CUDA's math functions (`expf`, `rsqrtf`, `signbit`, ...) are
the C library's. A C wrapper per kernel, `launch`, runs the blocks of a grid one after the other,
each as `blockDim` host threads at once: `__syncthreads()` is a barrier of the block's threads,
and `__shfl_down_sync` (the warp shuffle kiln's reductions use) exchanges values between the
lanes of a warp through the block's slots between two barriers, so it needs every thread of the
block to call it, as kiln's kernels do. Tests use grids smaller than the data, so the grid-stride
loops are exercised.

What this cannot catch (docs/cuda.md): races the barriers hide (the host threads synchronise at
every shuffle), a shuffle only some threads reach (the emulation hangs where the device would be
undefined), the device's math library (the host's libm rounds differently: results are compared
within the documented ulps, not bit for bit), the device's memory model, occupancy and speed.
NVRTC compiles the same text for the device in the same tests. `load_all` compiles several
kernels (a whole program's) in one host library: one compiler run instead of one a kernel; the
prelude, with the launcher every kernel's `launch` calls, is a header precompiled once per
process (most of a compile was parsing its C++ headers).
"""
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np


PRELUDE = r"""
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __shared__ static
#define __restrict__ __restrict
struct kiln_dim3 { unsigned int x, y, z; };
static thread_local kiln_dim3 threadIdx, blockIdx, blockDim, gridDim;
using std::signbit;
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
using std::isfinite;
using std::isinf;
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
template <class To, class From> static inline To kiln_bits(From x) {
    To out; std::memcpy(&out, &x, sizeof out); return out; }
static inline int __float_as_int(float x) { return kiln_bits<int>(x); }
static inline float __int_as_float(int x) { return kiln_bits<float>(x); }
static inline long long __double_as_longlong(double x) { return kiln_bits<long long>(x); }
static inline double __longlong_as_double(long long x) { return kiln_bits<double>(x); }
// CUDA's erfinv (the host's libm has none): Winitzki's approximation, then Halley steps on
// erf (erfc near +-1, where 1 - |y| is exact)
static inline double erfinv(double y) {
    double a = std::fabs(y);
    if (!(a < 1)) return a == 1 ? std::copysign(INFINITY, y) : NAN;
    double l = std::log((1 - a) * (1 + a)), t = 2 / (M_PI * 0.147) + l / 2;
    double x = std::sqrt(std::sqrt(t * t - l / 0.147) - t);
    for (int k = 0; k < 4; ++k) {
        double f = a < 0.5 ? std::erf(x) - a : (1 - a) - std::erfc(x);
        x -= f / (1.1283791670955126 * std::exp(-x * x) + x * f);
    }
    return std::copysign(x, y);
}
static inline float erfinvf(float y) { return (float)erfinv((double)y); }
// CUDA's atomics the indexing kernels use, as the host's
static inline unsigned int atomicCAS(unsigned int *p, unsigned int seen, unsigned int next) {
    __atomic_compare_exchange_n(p, &seen, next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return seen; }
static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long seen,
                                           unsigned long long next) {
    __atomic_compare_exchange_n(p, &seen, next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return seen; }
template <class T> static inline T atomicAdd(T *p, T v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
template <class T, class W> static inline T kiln_atomic_add_float(T *p, T v) {
    W *w = (W *)p, seen = *w;
    while (!__atomic_compare_exchange_n(w, &seen, kiln_bits<W>(kiln_bits<T>(seen) + v), false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return kiln_bits<T>(seen); }
static inline float atomicAdd(float *p, float v) {
    return kiln_atomic_add_float<float, unsigned int>(p, v); }
static inline double atomicAdd(double *p, double v) {
    return kiln_atomic_add_float<double, unsigned long long>(p, v); }
static std::barrier<> *kiln_block_barrier;
static unsigned char (*kiln_lane_slots)[16];
static inline void __syncthreads() { kiln_block_barrier->arrive_and_wait(); }
template <class T> static T __shfl_down_sync(unsigned, T value, unsigned delta) {
    unsigned t = threadIdx.x;
    std::memcpy(kiln_lane_slots[t], &value, sizeof value);
    kiln_block_barrier->arrive_and_wait();
    T out = value;
    if (t % 32 + delta < 32 && t + delta < blockDim.x)
        std::memcpy(&out, kiln_lane_slots[t + delta], sizeof out);
    kiln_block_barrier->arrive_and_wait();
    return out;
}
// A grid run block after block, each block's threads as host threads
static void kiln_launch(void (*body)(void **), void **args, unsigned int blocks,
                        unsigned int threads)
{
    std::vector<unsigned char[16]> slots(threads);
    kiln_lane_slots = slots.data();
    for (unsigned int b = 0; b < blocks; ++b) {
        std::barrier<> barrier(threads);
        kiln_block_barrier = &barrier;
        std::vector<std::thread> team;
        for (unsigned int t = 0; t < threads; ++t)
            team.emplace_back([=] {
                gridDim = {blocks, 1, 1};
                blockDim = {threads, 1, 1};
                blockIdx = {b, 0, 0};
                threadIdx = {t, 0, 0};
                body(args);
            });
        for (auto &member : team)
            member.join();
    }
}
"""

_LAUNCH = r"""
static void body_{name}(void **args) {{ {name}({args}); }}
extern "C" void launch_{name}(void **args, unsigned int blocks, unsigned int threads)
{{
    kiln_launch(body_{name}, args, blocks, threads);
}}
"""
_FLAGS = ["-std=c++20", "-O1", "-fPIC", "-pthread", "-fno-fast-math"]


def compiler():
    """The host C++ compiler (KILN_CXX, else c++/g++/clang++), or None."""
    explicit = os.environ.get("KILN_CXX", "").strip()
    return explicit or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


_LOADED = {}


def load(kernel):
    """A callable `launch(arrays, n, blocks, threads)` running `kernel` (source.Kernel) on the
    host; arrays are the inputs then the outputs (NumPy, C-contiguous)."""
    return load_all([kernel])[0]


def _key(kernel):
    return hashlib.sha256(kernel.source.encode()).hexdigest()[:20]


def load_all(kernels):
    """`load` of each of `kernels`, those not loaded yet compiled together in one host
    library (one compiler run: the prelude's headers are parsed once)."""
    missing = {}
    for kernel in kernels:
        if _key(kernel) not in _LOADED:
            missing.setdefault(_key(kernel), kernel)
    names = [k.name for k in missing.values()]
    if len(set(names)) < len(names):   # two texts of one name: one library each
        for kernel in missing.values():
            _compile([kernel])
    elif missing:
        _compile(list(missing.values()))
    return [_LOADED[_key(k)] for k in kernels]


def _compile(kernels):
    cxx = compiler()
    if cxx is None:
        raise OSError("no C++ compiler to emulate CUDA kernels on the host (set KILN_CXX)")
    text = ""
    for kernel in kernels:
        writes = list(kernel.outputs) + [d for d, _ in kernel.scratch]
        count = len(kernel.inputs) + len(writes)
        casts = [f"({_pointer(d, True)})args[{k}]" for k, d in enumerate(kernel.inputs)]
        casts += [f"({_pointer(d, False)})args[{len(kernel.inputs) + k}]"
                  for k, d in enumerate(writes)]
        casts += [f"((long long *)args[{count}])[{k}]" for k in range(kernel.extents)]
        text += kernel.source + _LAUNCH.format(name=kernel.name, args=", ".join(casts))
    directory = tempfile.mkdtemp(prefix="kiln-cuda-emulation-")
    source, library = os.path.join(directory, "k.cpp"), os.path.join(directory, "k.so")
    with open(source, "w") as f:
        f.write(text)
    done = subprocess.run([cxx, "-x", "c++", *_FLAGS, "-shared", "-include", _prelude(cxx),
                           source, "-o", library], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the host compiler rejected the emulated kernel:\n{done.stderr}")
    loaded = ctypes.CDLL(library)
    for kernel in kernels:
        _LOADED[_key(kernel)] = _launcher(getattr(loaded, f"launch_{kernel.name}"),
                                          len(kernel.inputs) + len(kernel.outputs)
                                          + len(kernel.scratch))


def _prelude(cxx):
    """The prelude as a header, precompiled once per process and compiler where the compiler
    can (GCC and Clang find `<header>.gch` / `.pch` beside a header given to `-include`, and
    parse the header itself otherwise): the C++ headers it includes are most of a small
    library's compile time."""
    if cxx not in _PRELUDES:
        directory = tempfile.mkdtemp(prefix="kiln-cuda-emulation-")
        header = os.path.join(directory, "kiln_prelude.hpp")
        with open(header, "w") as f:
            f.write(PRELUDE)
        suffix = ".pch" if "clang" in os.path.basename(cxx) else ".gch"
        subprocess.run([cxx, "-x", "c++-header", *_FLAGS, header, "-o", header + suffix],
                       capture_output=True)
        _PRELUDES[cxx] = header
    return _PRELUDES[cxx]


_PRELUDES = {}


def _launcher(entry, count):
    entry.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_uint]

    def launch(arrays, extents, blocks, threads):
        sizes = np.array(extents, np.int64)
        pointers = (ctypes.c_void_p * (count + 1))(
            *[a.ctypes.data for a in arrays], sizes.ctypes.data)
        entry(pointers, blocks, threads)
    return launch


def _pointer(dtype, const):
    from .source import _memory_type
    return f"{'const ' if const else ''}{_memory_type(dtype)} *"


def run(kernel, inputs, extents=None, blocks=3, threads=32):
    """The kernel's outputs (flat NumPy arrays) for NumPy `inputs`, computed on the host with
    a grid of `blocks` x `threads`; `extents`: the kernel's trailing size arguments (an
    elementwise kernel's element count n, or a reduction's (rows, columns); by default
    `kernel.sizes`)."""
    extents = kernel.sizes if extents is None else \
        (extents,) if isinstance(extents, int) else tuple(extents)
    arrays = [np.ascontiguousarray(np.asarray(x, dtype=d).astype(np.uint8)
                                   if np.dtype(d).kind == "b" else np.asarray(x, dtype=d))
              for x, d in zip(inputs, kernel.inputs)]
    outs = [np.empty(int(np.prod(shape, dtype=np.int64)),
                     np.uint8 if np.dtype(d).kind == "b" else d)
            for d, shape in zip(kernel.outputs, kernel.out_shapes)]
    for k, j in kernel.starts_from:
        outs[k][...] = arrays[j].ravel()
    work = [np.zeros(count, dtype) for dtype, count in kernel.scratch]
    load(kernel)(arrays + outs + work, extents, blocks, threads)
    return [o.astype(bool) if np.dtype(d).kind == "b" else o
            for o, d in zip(outs, kernel.outputs)]


def run_program(fn, inputs, blocks=3, threads=32):
    """`fn`'s results (NumPy) for NumPy `inputs`: its whole plan (program.plan: kernels,
    gemm, per-primitive steps, control flow over its regions' plans) run by the CUDA
    executable's Program on the emulated layer, every kernel with a grid of `blocks` x
    `threads`, GEMM by NumPy."""
    from .device import EmulatedLayer
    from .executable import Program, to_layer
    from .program import plan

    class Sized(EmulatedLayer):
        def launch_shape(self, kernel):
            return blocks, threads
    layer = Sized()
    planned = Program(plan(fn), layer, [0])
    load_all(planned.kernels())
    return [np.asarray(x) for x in planned(*[to_layer(layer, x) for x in inputs])]
