"""pmap's compute-bound rows with one core per device: `pmap.py` runs this file in a fresh
process whose threads are limited before kiln and JAX are imported (KILN_NUM_THREADS=1;
XLA's --xla_cpu_multi_thread_eigen=false and intra_op_parallelism_threads=1), so that a CPU
device is one core, as a device is one accelerator. It prints JSON: seconds (harness.time_call,
the median of `--repeats` loops) of the matmul chain per replica on 2 devices and of the same
two chains on 1 device, for kiln and for JAX.

Usage: python benchmarks/pmap_cores.py [--repeats 5]  (pmap.py sets the environment)
"""
import argparse
import json
import os
import sys

ENVIRONMENT = {"KILN_NUM_THREADS": "1", "KILN_NUM_CPU_DEVICES": "2",
               "XLA_FLAGS": "--xla_force_host_platform_device_count=2 "
                            "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
               "OPENBLAS_NUM_THREADS": "1"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import numpy as np
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from harness import time_call
    from pmap import chain, chain_inputs
    import kiln
    import kiln.numpy as knp
    a, b = chain_inputs()
    k = kiln.pmap(chain(knp))
    n = args.repeats
    out = {"kiln 2 devices": time_call(lambda: np.asarray(k(a, b)), repeats=n),
           "kiln 1 device": time_call(
               lambda: [np.asarray(k(a[i:i + 1], b[i:i + 1])) for i in range(2)], repeats=n)}
    try:
        import jax
    except ImportError:
        jax = None
    if jax is not None:
        jax.config.update("jax_platforms", "cpu")
        j = jax.pmap(chain(jax.numpy))
        out["jax 2 devices"] = time_call(lambda: j(a, b), repeats=n)
        out["jax 1 device"] = time_call(
            lambda: [j(a[i:i + 1], b[i:i + 1]) for i in range(2)], repeats=n)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
