"""An allreduce (sum) of 64 MB of float32 across MPI processes on this machine (2, or --np 3 or 4:
more processes than cores are oversubscribed): kiln's engine
(compiler/backends/mpi_engine.py, the native code compiled code calls), a `psum` through
`kiln.pmap` (one device per process) and through `kiln.jit` of that pmap, beside mpi4py's own
`Allreduce` on the same buffers, and the machine's memory bandwidth for scale.

Usage: python benchmarks/mpi.py [--mb 64] [--np 2] [--repeats 15]
It starts `mpirun` itself (the one beside this Python, from `pip install 'kiln[mpi]'`) on this
file with --worker; without mpi4py it says so and exits 0 (`make bench` runs it when mpi4py is
installed).

Figures: GB/s = buffer bytes / time of one allreduce (min over repeats; both processes start
together after a barrier). Memory bandwidth: a NumPy copy of the same 64 MB buffer, in one
process while the other waits (bytes copied / time; a copy reads and writes those bytes, so the
memory traffic is twice that), and in both processes at once (each its own buffer).
"""
import argparse
import os
import shutil
import subprocess
import sys
import time


def worker(args):
    import numpy as np
    import kiln
    from kiln.compiler.backends import mpi_engine
    kiln.distributed.initialize()
    comm = kiln.distributed._WORLD.comm
    rank, size = kiln.distributed.process_layout()
    n = args.mb * (1 << 20) // 4
    x = np.full(n, rank + 1, np.float32)
    y = np.zeros(n, np.float32)
    from mpi4py import MPI

    def best(f, together=True):
        f()
        times = []
        for _ in range(args.repeats):
            comm.Barrier()
            start = time.perf_counter()
            if together or rank == 0:
                f()
            times.append(time.perf_counter() - start)
        return min(times)

    rows = [("kiln engine allreduce (mpi_engine.allreduce)", best(lambda: mpi_engine.allreduce(x, "sum", out=y)))]
    assert np.all(y == size * (size + 1) / 2)
    from kiln import lax
    psum = kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i")
    traced = kiln.jit(psum)
    batch = x.reshape(1, n)
    assert np.all(np.asarray(psum(batch)) == size * (size + 1) / 2)
    rows.append(("kiln.pmap psum (1 device per process)", best(lambda: psum(batch))))
    rows.append(("kiln.jit(kiln.pmap psum) (process_allreduce)",
                 best(lambda: traced(batch).block_until_ready())))
    rows.append(("mpi4py Comm.Allreduce", best(lambda: comm.Allreduce(x, y, MPI.SUM))))
    rows.append(("mpi4py Comm.Iallreduce + Wait", best(lambda: comm.Iallreduce(x, y, MPI.SUM).Wait())))
    copy1 = best(lambda: np.copyto(y, x), together=False)
    copy2 = best(lambda: np.copyto(y, x))
    kiln.distributed.shutdown()
    if rank:
        return
    nbytes = x.nbytes
    print(f"allreduce (sum) of {args.mb} MB float32 across {size} processes, min of {args.repeats}:")
    print(f"  memory bandwidth, NumPy copy of {args.mb} MB: one process {nbytes / copy1 / 1e9:.1f} GB/s"
          f" ({2 * nbytes / copy1 / 1e9:.1f} GB/s read+write); both at once "
          f"{nbytes / copy2 / 1e9:.1f} GB/s each")
    print("| what | ms | GB/s | % of one-process copy bandwidth |")
    print("|---|---:|---:|---:|")
    for name, seconds in rows:
        rate = nbytes / seconds
        print(f"| {name} | {seconds * 1e3:.2f} | {rate / 1e9:.2f} | {100 * rate * copy1 / nbytes:.0f} % |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--worker", action="store_true")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        print("benchmarks/mpi.py: mpi4py is not installed (pip install 'kiln[mpi]'); skipped")
        return
    mpirun = shutil.which("mpirun", path=os.path.dirname(sys.executable)) or shutil.which("mpirun")
    if mpirun is None:
        print("benchmarks/mpi.py: no mpirun found; skipped")
        return
    command = [mpirun, "-np", str(args.np), "--oversubscribe"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    command += [sys.executable, os.path.abspath(__file__), "--worker", "--mb", str(args.mb),
                "--repeats", str(args.repeats)]
    sys.exit(subprocess.run(command, timeout=600).returncode)


if __name__ == "__main__":
    main()
