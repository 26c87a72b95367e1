"""GPU baselines for the CUDA backend: JAX and hand-written CUDA C side by side on one GPU.

`make gpu-check` runs this on a GPU machine (one H100 or H200 with CuPy, NVRTC and JAX's CUDA
plug-in installed) and writes `gpu_report.md` and `gpu_report.json` into the folder given with
`--out`. It measures, on the same card and in the same process:

- the physical limit: a device-to-device copy (bytes read + written per second);
- the CUDA C kernels the backend's code generator is meant to emit, written by hand and
  compiled with NVRTC through CuPy's `RawModule` (see `KERNELS`): a grid-stride elementwise
  loop with float4 loads, a two-pass sum with warp shuffles, a row softmax held in registers.
  They are the ceiling that generated kernels have to reach, measured as a share of the copy;
- JAX on every workload named by the CUDA backend's targets: fused `x*x + x*2.0` on 5000x5000
  and 2^28 elements, row softmax, sum, float32 matmul 8192^3 (default and highest precision,
  beside CuPy's cuBLAS call), the MLP 784-512-512-10 batch-128 SGD step, its first-call
  compile, jit dispatch of a small function, and `random.normal` of 10^8 (its bits are saved
  as `normal_head.npy` and hashed, for the bit-identity check against kiln's CPU backend).

Throughput rows time a pipeline of calls and synchronise once (the GPU's own time per call);
latency rows synchronise after each call. `--dry-run` runs everything JAX can on whatever
platform it has, at small sizes, and skips the CuPy rows when CuPy or a GPU is missing: it
is how the script is checked on a CPU machine before GPU time is spent on it.
"""
import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import fmt_time  # noqa: E402  (the benchmarks' own helpers; no kiln import)
from vmap import make_loss  # noqa: E402

KERNELS = r"""
#define KILN_NEG_INF __int_as_float(0xff800000)

extern "C" {

// y = x*x + x*2: grid-stride loop, float4 loads and stores on the aligned body, scalar tail.
__global__ void fused_square_double(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (long long j = i; j < n4; j += stride) {
        float4 v = x4[j];
        float4 r;
        r.x = v.x * v.x + v.x * 2.0f;
        r.y = v.y * v.y + v.y * 2.0f;
        r.z = v.z * v.z + v.z * 2.0f;
        r.w = v.w * v.w + v.w * 2.0f;
        y4[j] = r;
    }
    for (long long j = n4 * 4 + i; j < n; j += stride) {
        float v = x[j];
        y[j] = v * v + v * 2.0f;
    }
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// Block-level sum: warp shuffles, then the warps' partial sums through shared memory.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x >> 5)) ? partial[lane] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    __syncthreads();
    return v;  // valid in thread 0
}

// Pass 1 of a deterministic sum: each block reduces a grid-stride share into out[blockIdx.x].
__global__ void sum_partials(const float* __restrict__ x, float* __restrict__ out, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float acc = 0.0f;
    for (long long j = i; j < n4; j += stride) {
        float4 v = x4[j];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    for (long long j = n4 * 4 + i; j < n; j += stride) acc += x[j];
    acc = block_sum(acc);
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

// Pass 2: one block sums the partials.
__global__ void sum_final(const float* __restrict__ partials, float* __restrict__ out, int n) {
    float acc = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) acc += partials[j];
    acc = block_sum(acc);
    if (threadIdx.x == 0) out[0] = acc;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float block_max(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x >> 5)) ? partial[lane] : KILN_NEG_INF;
    if (warp == 0) v = warp_max(v);
    __syncthreads();
    return v;
}

}  // extern "C"

// Row softmax, one block per row of `cols` (<= PER * blockDim.x) values held in registers:
// one read and one write of each element. Instantiated for 4, 8, 16 and 32 values a thread
// (1024, 512, 256 and 128 threads for rows of 4096).
template <int PER>
__device__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float shared_value;
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;
    float v[PER];
    float m = KILN_NEG_INF;
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        int c = threadIdx.x + k * blockDim.x;
        v[k] = c < cols ? row[c] : KILN_NEG_INF;
        m = fmaxf(m, v[k]);
    }
    m = block_max(m);
    if (threadIdx.x == 0) shared_value = m;
    __syncthreads();
    m = shared_value;
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        v[k] = __expf(v[k] - m);
        s += v[k];
    }
    s = block_sum(s);
    if (threadIdx.x == 0) shared_value = s;
    __syncthreads();
    float inv = 1.0f / shared_value;
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        int c = threadIdx.x + k * blockDim.x;
        if (c < cols) out[c] = v[k] * inv;
    }
}

#define KILN_SOFTMAX(PER) \
    extern "C" __global__ void softmax_rows_##PER(const float* __restrict__ x, \
                                                  float* __restrict__ y, int cols) { \
        softmax_rows<PER>(x, y, cols); \
    }
KILN_SOFTMAX(4)
KILN_SOFTMAX(8)
KILN_SOFTMAX(16)
KILN_SOFTMAX(32)
"""

MLP = (784, 512, 512, 10)


class Report:
    def __init__(self):
        self.info = {}
        self.rows = []

    def add(self, name, seconds, note="", bytes_moved=None, flops=None, **extra):
        row = dict(name=name, seconds=seconds, note=note, **extra)
        if bytes_moved is not None and seconds:
            row["gb_per_s"] = bytes_moved / seconds / 1e9
        if flops is not None and seconds:
            row["tflop_per_s"] = flops / seconds / 1e12
        self.rows.append(row)
        print(_row_text(row, self.info.get("copy_gb_per_s")), flush=True)

    def markdown(self):
        copy = self.info.get("copy_gb_per_s")
        lines = ["# GPU baselines", ""]
        for k, v in self.info.items():
            lines.append(f"- {k}: {v}")
        lines += ["", "| workload | time | rate | share of copy | note |",
                  "|---|---|---|---|---|"]
        for row in self.rows:
            rate = ""
            if "gb_per_s" in row:
                rate = f"{row['gb_per_s']:.0f} GB/s"
            elif "tflop_per_s" in row:
                rate = f"{row['tflop_per_s']:.1f} TFLOP/s"
            share = (f"{row['gb_per_s'] / copy:.0%}" if copy and "gb_per_s" in row else "")
            lines.append(f"| {row['name']} | {fmt_time(row['seconds'])} | {rate} | {share} | "
                         f"{row['note']} |")
        return "\n".join(lines) + "\n"


def _row_text(row, copy):
    text = f"{row['name']:<52} {fmt_time(row['seconds']):>12}"
    if "gb_per_s" in row:
        text += f"  {row['gb_per_s']:8.0f} GB/s"
        if copy:
            text += f" ({row['gb_per_s'] / copy:.0%} of copy)"
    if "tflop_per_s" in row:
        text += f"  {row['tflop_per_s']:8.1f} TFLOP/s"
    if row["note"]:
        text += f"  [{row['note']}]"
    return text


def pipelined(fn, block, calls, repeats=5):
    """Median seconds per call over `repeats` pipelines of `calls` calls, one sync each."""
    block(fn())
    block(fn())
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = None
        for _ in range(calls):
            out = fn()
        block(out)
        samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples)


def latency(fn, block, calls=200, repeats=5):
    """Median seconds per call when every call is waited for."""
    block(fn())
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            block(fn())
        samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples)


def environment(report, jax):
    info = report.info
    info["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    info["host"] = f"{platform.node()} ({os.cpu_count()} cores), Python {platform.python_version()}"
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,"
                              "clocks.max.sm,clocks.max.mem", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        info["nvidia-smi"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.SubprocessError) as e:
        info["nvidia-smi"] = f"unavailable ({e})"
    info["jax"] = f"{jax.__version__}, devices {jax.devices()}"
    try:
        import cupy
        from cupy.cuda import nvrtc, runtime
        props = runtime.getDeviceProperties(0)
        info["cupy"] = cupy.__version__
        info["cuda runtime"] = runtime.runtimeGetVersion()
        info["cuda driver"] = runtime.driverGetVersion()
        info["nvrtc"] = ".".join(map(str, nvrtc.getVersion()))
        info["device"] = (f"{props['name'].decode()}: {props['multiProcessorCount']} SMs, "
                          f"{props['totalGlobalMem'] / 2**30:.0f} GiB, "
                          f"L2 {props['l2CacheSize'] / 2**20:.0f} MiB, "
                          f"cc {props['major']}.{props['minor']}")
    except Exception as e:  # no CuPy or no device: the dry run
        info["cupy"] = f"unavailable ({type(e).__name__}: {e})"
    for module in ("gast", "astor", "llvmlite", "mpi4py"):
        try:
            info[module] = __import__(module).__version__
        except Exception as e:
            info[module] = f"unavailable ({type(e).__name__})"
    for tool in ("g++", "nvcc"):
        try:
            out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=20)
            info[tool] = (out.stdout.strip().splitlines() or ["?"])[0]
        except OSError:
            info[tool] = "not found"


def cupy_rows(report, sizes):
    import cupy as cp
    t0 = time.perf_counter()
    # A comment unique to this run keeps CuPy's disk cache from serving the compile.
    module = cp.RawModule(code=f"// {time.time_ns()}\n" + KERNELS, options=("-std=c++17",))
    fused = module.get_function("fused_square_double")
    report.add("NVRTC compile of the 8 kernels (CuPy RawModule, cold)",
               time.perf_counter() - t0, "NVRTC + module load")
    partials = module.get_function("sum_partials")
    final = module.get_function("sum_final")
    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]

    def events(fn, calls=20, repeats=5):
        fn()
        cp.cuda.runtime.deviceSynchronize()
        samples = []
        for _ in range(repeats):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            for _ in range(calls):
                fn()
            stop.record()
            stop.synchronize()
            samples.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / calls)
        return statistics.median(samples)

    tiny = cp.ones(4, cp.float32)
    tiny_out = cp.empty_like(tiny)

    def launch():
        fused((1,), (32,), (tiny, tiny_out, np.int64(4)))
        return tiny_out
    sync = cp.cuda.runtime.deviceSynchronize
    report.add("kernel launch on f32[4] (CuPy RawKernel, waited each)",
               latency(launch, lambda _: sync()))
    report.add("kernel launch on f32[4] (CuPy RawKernel, pipelined)",
               pipelined(launch, lambda _: sync(), calls=1000))

    n = sizes["big"]
    x = cp.random.standard_normal(n, dtype=cp.float32)
    y = cp.empty_like(x)
    t = events(lambda: cp.copyto(y, x))
    report.info["copy_gb_per_s"] = round(2 * n * 4 / t / 1e9, 1)
    report.add(f"device-to-device copy f32[{n}] (CuPy)", t, "the physical limit",
               bytes_moved=2 * n * 4)

    sq = sizes["square"]
    for label, count in ((f"{sq}x{sq}", sq * sq), (str(n), n)):
        xs = x[:count]
        ys = y[:count]
        grid = (min(sms * 8, (count // 4 + 255) // 256 + 1),)
        t = events(lambda: fused(grid, (256,), (xs, ys, np.int64(count))))
        ref = xs[:1000].get()
        np.testing.assert_allclose(ys[:1000].get(), ref * ref + ref * 2, rtol=1e-6, atol=1e-6)  # NVRTC contracts to an FMA
        report.add(f"x*x + x*2.0 f32[{label}] (CUDA C, NVRTC)", t, "grid-stride, float4",
                   bytes_moved=2 * count * 4)

    blocks = sms * 8
    part = cp.empty(blocks, cp.float32)
    total = cp.empty(1, cp.float32)

    def run_sum():
        partials((blocks,), (512,), (x, part, np.int64(n)))
        final((1,), (1024,), (part, total, np.int32(blocks)))
    t = events(run_sum)
    expect = float(cp.sum(x.astype(cp.float64)))
    got = float(total.get()[0])
    report.add(f"sum f32[{n}] (CUDA C, two passes)", t,
               f"rel. error {abs(got - expect) / max(abs(expect), 1e-30):.1e}",
               bytes_moved=n * 4)

    rows, cols = sizes["softmax"]
    a = cp.random.standard_normal((rows, cols), dtype=cp.float32)
    ah = a[:4].get()
    e = np.exp(ah - ah.max(1, keepdims=True))
    for per in (4, 8, 16, 32):
        softmax = module.get_function(f"softmax_rows_{per}")
        b = cp.zeros_like(a)
        threads = -(-cols // per)
        t = events(lambda: softmax((rows,), (threads,), (a, b, np.int32(cols))))
        np.testing.assert_allclose(b[:4].get(), e / e.sum(1, keepdims=True), rtol=1e-5,
                                   atol=1e-7)
        report.add(f"row softmax f32[{rows},{cols}] (CUDA C, {threads} threads x {per})", t,
                   "one block a row, registers", bytes_moved=2 * rows * cols * 4)

    m = sizes["matmul"]
    p = cp.random.standard_normal((m, m), dtype=cp.float32)
    q = cp.random.standard_normal((m, m), dtype=cp.float32)
    t = events(lambda: p @ q, calls=3, repeats=3)
    report.add(f"matmul f32 {m}^3 (CuPy cuBLAS, no TF32)", t, "cuBLAS SGEMM",
               flops=2 * m ** 3)
    del x, y, a, b, p, q
    cp.get_default_memory_pool().free_all_blocks()


def sgd_step(jax, jnp, lr):
    loss = make_loss(jnp)

    def step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return value, [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, grads)]
    return step


def jax_rows(report, jax, sizes, out_dir):
    jnp = jax.numpy

    def block(out):
        jax.block_until_ready(out)

    dev = jax.devices()[0]
    n = sizes["big"]
    key = jax.random.PRNGKey(0)
    x = jax.device_put(jax.random.normal(key, (n,), jnp.float32), dev)
    fused = jax.jit(lambda x: x * x + x * 2.0)
    sq = sizes["square"]
    for label, arr in ((f"{sq}x{sq}", x[:sq * sq].reshape(sq, sq)), (str(n), x)):
        arr = jax.block_until_ready(arr + 0)
        t = pipelined(lambda: fused(arr), block, calls=20)
        report.add(f"x*x + x*2.0 f32[{label}] (JAX)", t, bytes_moved=2 * arr.size * 4)

    total = jax.jit(jnp.sum)
    t = pipelined(lambda: total(x), block, calls=20)
    report.add(f"sum f32[{n}] (JAX)", t, bytes_moved=n * 4)

    rows, cols = sizes["softmax"]
    a = jax.random.normal(key, (rows, cols), jnp.float32)
    softmax = jax.jit(lambda x: jax.nn.softmax(x, axis=1))
    by_hand = jax.jit(lambda x: (lambda e: e / e.sum(1, keepdims=True))(
        jnp.exp(x - x.max(1, keepdims=True))))
    report.add(f"row softmax f32[{rows},{cols}] (JAX nn.softmax)",
               pipelined(lambda: softmax(a), block, calls=20), bytes_moved=2 * a.size * 4)
    report.add(f"row softmax f32[{rows},{cols}] (JAX, exp/max/sum as written)",
               pipelined(lambda: by_hand(a), block, calls=20), bytes_moved=2 * a.size * 4)
    del a

    m = sizes["matmul"]
    p = jax.random.normal(key, (m, m), jnp.float32)
    q = jax.random.normal(jax.random.PRNGKey(1), (m, m), jnp.float32)
    for precision in ("default", "highest"):
        mm = jax.jit(lambda a, b, pr=precision: jnp.matmul(a, b, precision=pr))
        report.add(f"matmul f32 {m}^3 (JAX, precision={precision})",
                   pipelined(lambda: mm(p, q), block, calls=3, repeats=3), flops=2 * m ** 3)
    del p, q, x

    rng = np.random.default_rng(0)
    params = [(jnp.asarray(rng.standard_normal((i, o), np.float32) * np.float32(i ** -0.5)),
               jnp.zeros(o, jnp.float32)) for i, o in zip(MLP[:-1], MLP[1:])]
    mx = jnp.asarray(rng.standard_normal((128, MLP[0]), np.float32))
    my = jnp.asarray(rng.standard_normal((128, MLP[-1]), np.float32))
    step = jax.jit(sgd_step(jax, jnp, 0.01))
    report.add("MLP 784-512-512-10 b128 SGD step (JAX, pipelined)",
               pipelined(lambda: step(params, mx, my), block, calls=50))
    report.add("MLP 784-512-512-10 b128 SGD step (JAX, waited each)",
               latency(lambda: step(params, mx, my), block, calls=50))
    compiles = []
    for i in range(3):
        fresh = jax.jit(sgd_step(jax, jnp, 0.01 + 1e-6 * (i + 1)))
        t0 = time.perf_counter()
        block(fresh(params, mx, my))
        compiles.append(time.perf_counter() - t0)
    report.add("MLP SGD step: first call (JAX compile + run)", statistics.median(compiles),
               "a fresh jit, median of 3")

    small = jax.jit(lambda x: x * 2.0 + 1.0)
    s = jnp.ones(4, jnp.float32)
    report.add("jit dispatch x*2+1 on f32[4] (JAX, waited each)", latency(lambda: small(s), block))
    report.add("jit dispatch x*2+1 on f32[4] (JAX, pipelined)",
               pipelined(lambda: small(s), block, calls=1000))

    count = sizes["normal"]
    normal = jax.jit(lambda k: jax.random.normal(k, (count,), jnp.float32))
    report.add(f"random.normal(key, ({count},)) (JAX)",
               pipelined(lambda: normal(key), block, calls=10), bytes_moved=count * 4)
    values = np.asarray(normal(key))
    digest = hashlib.sha256(values.tobytes()).hexdigest()
    report.info[f"random.normal(PRNGKey(0), ({count},)) sha256"] = digest
    if out_dir:
        np.save(os.path.join(out_dir, "normal_head.npy"), values[:1 << 20])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder for gpu_report.md/.json")
    parser.add_argument("--dry-run", action="store_true",
                        help="small sizes; CuPy rows skipped without a GPU")
    args = parser.parse_args(argv)
    if args.dry_run:
        sizes = dict(big=1 << 20, square=512, softmax=(256, 4096), matmul=256, normal=1 << 20)
    else:
        sizes = dict(big=1 << 28, square=5000, softmax=(16384, 4096), matmul=8192, normal=10 ** 8)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    import jax
    report = Report()
    environment(report, jax)
    for k, v in report.info.items():
        print(f"{k}: {v}", flush=True)
    try:
        cupy_rows(report, sizes)
    except Exception as e:
        if not args.dry_run:
            raise
        print(f"CuPy rows skipped in the dry run: {type(e).__name__}: {e}")
    jax_rows(report, jax, sizes, args.out)
    if args.out:
        with open(os.path.join(args.out, "gpu_report.md"), "w") as f:
            f.write(report.markdown())
        with open(os.path.join(args.out, "gpu_report.json"), "w") as f:
            json.dump(dict(info=report.info, rows=report.rows), f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
