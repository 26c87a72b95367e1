"""Benchmark harness: kiln beside NumPy and (where installed) JAX, in one process run.

A `Case` holds one workload written three ways. Each callable is timed with the median of
several repeats of an auto-ranged inner loop (so microsecond operations and millisecond ones
are both measured sensibly). Results print as a Markdown table with the kiln/NumPy and
kiln/JAX ratios; `BENCHMARKS.md` records them with the machine they ran on.

XLA's CPU worker threads keep spinning for a while after a JAX call and take cores from
whatever runs next (measured: random.normal under kiln.jit takes 17 ms alone, 30-60 ms right
after a JAX call). `run_cases` therefore lets the machine settle (`SETTLE_SECONDS`) after each
JAX measurement, before the next row's kiln one.
"""
import contextlib
import os
import platform
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Optional

SETTLE_SECONDS = 0.5


@dataclass
class Case:
    suite: str
    name: str
    kiln: Callable[[], object]
    numpy: Optional[Callable[[], object]] = None
    jax: Optional[Callable[[], object]] = None
    note: str = ""
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext  # around the row


def _block(out):
    if hasattr(out, "block_until_ready"):
        out.block_until_ready()
    elif isinstance(out, (tuple, list)):
        for o in out:
            _block(o)


class Measured:
    """A time measured elsewhere (in fresh processes: import, a disk-cache hit), reported as
    it is in place of a callable."""

    def __init__(self, seconds):
        self.seconds = seconds


def time_call(fn, repeats=7, target=0.05):
    """Median seconds per call over `repeats` loops of about `target` seconds each."""
    if isinstance(fn, Measured):
        return fn.seconds
    _block(fn())  # warm up (compiles, caches)
    n, elapsed = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            _block(fn())
        elapsed = time.perf_counter() - t0
        if elapsed >= target / 5 or n >= 1 << 20:
            break
        n *= 4
    n = max(1, int(n * target / max(elapsed, 1e-9) / 5))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            _block(fn())
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def fmt_time(t):
    if t is None:
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.2f} us"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


def fmt_ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}x"


def machine_description():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def run_cases(cases, repeats=7):
    rows = []
    for c in cases:
        with c.context():
            tk = time_call(c.kiln, repeats)
            tn = time_call(c.numpy, repeats) if c.numpy else None
            tj = time_call(c.jax, repeats) if c.jax else None
        if c.jax:
            time.sleep(SETTLE_SECONDS)
        rows.append((c, tk, tn, tj))
        print(f"  {c.suite:8s} {c.name:40s} kiln {fmt_time(tk):>10s}  numpy {fmt_time(tn):>10s}"
              f"  jax {fmt_time(tj):>10s}", flush=True)
    return rows


def markdown(rows):
    out = ["| suite | workload | kiln | NumPy | JAX | kiln/NumPy | kiln/JAX | note |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
    for c, tk, tn, tj in rows:
        out.append(f"| {c.suite} | {c.name} | {fmt_time(tk)} | {fmt_time(tn)} | {fmt_time(tj)} "
                   f"| {fmt_ratio(tk, tn)} | {fmt_ratio(tk, tj)} | {c.note} |")
    return "\n".join(out)
