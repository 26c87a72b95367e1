"""`make bench`: run every benchmark suite, kiln beside NumPy and JAX (when importable).

Usage: python benchmarks/run.py [--suite eager] [--markdown FILE]
JAX is optional: install it in the same environment (`pip install jax`) to get the JAX column.
JAX runs on the CPU here; its eager numbers include its per-op dispatch.
The `mpi` suite (benchmarks/mpi.py: an allreduce across 2 processes, which starts mpirun itself)
runs last, when mpi4py is installed (`pip install 'kiln[mpi]'`).
"""
import argparse
import importlib.util
import os
import subprocess
import sys

# Eight CPU devices for the pmap rows, for kiln and JAX alike (read when each is imported).
os.environ.setdefault("KILN_NUM_CPU_DEVICES", "8")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import run_cases, markdown, machine_description  # noqa: E402
import autodiff  # noqa: E402
import conv  # noqa: E402
import cpu  # noqa: E402
import eager  # noqa: E402
import fft  # noqa: E402
import frontend  # noqa: E402
import layouts  # noqa: E402
import linalg  # noqa: E402
import pjrt  # noqa: E402
import pmap  # noqa: E402
import reductions  # noqa: E402
import small  # noqa: E402
import vmap  # noqa: E402

SUITES = {"eager": eager.cases, "frontend": frontend.cases, "autodiff": autodiff.cases, "fft": fft.cases,
          "conv": conv.cases, "linalg": linalg.cases, "layouts": layouts.cases,
          "cpu": cpu.cases, "pjrt": pjrt.cases, "pmap": pmap.cases, "reductions": reductions.cases, "small": small.cases,
          "vmap": vmap.cases}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", action="append", choices=sorted(SUITES) + ["mpi"])
    ap.add_argument("--markdown", help="also write the table to this file")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    try:
        import jax
        jax.config.update("jax_platforms", "cpu")
    except ImportError:
        jax = None
    print(f"machine: {machine_description()}")
    print(f"jax: {jax.__version__ if jax else 'not installed'}")
    rows = []
    suites = args.suite or sorted(SUITES) + ["mpi"]
    for name in suites:
        if name != "mpi":
            rows += run_cases(SUITES[name](jax), args.repeats)
    if rows:
        table = markdown(rows)
        print()
        print(table)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(f"machine: {machine_description()}\n\n{table}\n")
    if "mpi" in suites:
        print()
        if importlib.util.find_spec("mpi4py") is None:
            print("mpi: skipped (mpi4py is not installed: pip install 'kiln[mpi]')")
        else:
            here = os.path.dirname(os.path.abspath(__file__))
            subprocess.run([sys.executable, os.path.join(here, "mpi.py")], check=True)


if __name__ == "__main__":
    main()
