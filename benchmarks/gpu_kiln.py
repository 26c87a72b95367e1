"""kiln's CUDA backend beside JAX on one GPU: a small benchmark `make gpu-check` runs after the
GPU tests. Each workload is jit-compiled by kiln (backend="cuda", on GPU arrays) and, when
JAX's CUDA plug-in is importable, by JAX on the same data; the time per call is the median
of pipelines of calls synchronised once. Prints a table and writes `kiln_vs_jax.json` into
`--out`. `--dry-run` uses small sizes and works on the emulated device (KILN_CUDA_EMULATE=1)
without JAX's GPU, to check the script on a CPU machine."""
import argparse
import json
import os
import sys
import time

import numpy as np

from gpu import pipelined
from vmap import make_loss


def workloads(jnp, grad, sizes):
    mlp_loss = make_loss(jnp)

    def mlp_step(params, x, y):
        g = grad(mlp_loss)(params, x, y)
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, g)]

    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    n, m, widths = sizes["square"], sizes["matmul"], sizes["mlp"]
    params = [(f32(i, o) * np.float32(i ** -0.5), np.zeros(o, np.float32))
              for i, o in zip(widths[:-1], widths[1:])]
    return [
        ("x*x + x*2.0", lambda x: x * x + x * 2.0, (f32(n, n),)),
        ("row sum", lambda x: jnp.sum(x, axis=-1), (f32(n, n),)),
        ("row softmax", lambda x: (lambda e: e / jnp.sum(e, axis=-1, keepdims=True))(
            jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))), (f32(n, n),)),
        (f"matmul {m}^3", lambda a, b: a @ b, (f32(m, m), f32(m, m))),
        ("MLP SGD step", mlp_step, (params, f32(128, widths[0]), f32(128, widths[-1]))),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    sizes = dict(square=64, matmul=64, mlp=(16, 32, 8)) if args.dry_run else \
        dict(square=4096, matmul=4096, mlp=(784, 512, 512, 10))
    import kiln
    import kiln.numpy as kjnp
    gpu = kiln.devices("gpu")[0]
    try:
        import jax
        jax_gpu = [d for d in jax.devices() if d.platform == "gpu"]
    except Exception as e:   # noqa: BLE001 - no JAX or no CUDA plug-in: kiln's rows only
        jax, jax_gpu = None, []
        print(f"JAX's CUDA plug-in is not importable ({type(e).__name__}: {e})")
    rows = []
    for name, fn, data in workloads(kjnp, kiln.grad, sizes):
        on_gpu = kiln.device_put(data, gpu)
        f = kiln.jit(fn, backend="cuda")
        t0 = time.perf_counter()
        kiln.block_until_ready(f(*on_gpu))
        first = time.perf_counter() - t0
        row = dict(name=name, kiln_first_call=first,
                   kiln=pipelined(lambda: f(*on_gpu), kiln.block_until_ready, 10))
        if jax_gpu:
            jdata = jax.device_put(data, jax_gpu[0])
            jf = jax.jit(workloads(jax.numpy, jax.grad, sizes)[len(rows)][1])
            t0 = time.perf_counter()
            jax.block_until_ready(jf(*jdata))
            row["jax_first_call"] = time.perf_counter() - t0
            row["jax"] = pipelined(lambda: jf(*jdata), jax.block_until_ready, 10)
        rows.append(row)
        ratio = f"  kiln/JAX {row['kiln'] / row['jax']:.2f}x" if "jax" in row else ""
        print(f"{name:<24} kiln {row['kiln'] * 1e3:9.3f} ms (first call "
              f"{first:.2f} s){ratio}", flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "kiln_vs_jax.json"), "w") as f:
            json.dump(dict(device=gpu.device_kind, sizes=sizes, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
