"""One large LAPACK call on OpenBLAS's threads (compiler/backends/llvm/lapack_threads.py):
results against the reference backend, OpenBLAS back on one thread and the claim released
after the call, and the cases that keep one thread (no idle core, the claim held elsewhere,
a batch, KILN_NUM_THREADS=1). The cases run one after another in one fresh process (the
claim words and OpenBLAS's setting are the process's); each compiles its own functions, whose
externs are bound when they are loaded."""
import json
import os
import subprocess
import sys

import pytest

from kiln.compiler.backends.llvm import blas_lookup, lapack_threads

CHILD = r'''
import json
import os
import sys

import numpy as np

import kiln
import kiln.numpy as knp
from kiln.compiler.backends.llvm import blas_lookup, lapack_threads
from kiln.compiler.config import config

n = lapack_threads.MIN_SIZE
words = (lapack_threads.ctypes.c_int64 * 3).from_address(lapack_threads.claim_address())
CASES = [("idle", "float32", "eigh,svd,cholesky,qr"), ("idle", "float64", "eigh,svd"),
         ("busy", "float32", "cholesky"), ("claimed", "float32", "cholesky"),
         ("batch", "float32", "cholesky"), ("one_thread", "float32", "cholesky")]


def functions(k):   # a scale of its own per case: new code, whose externs are bound anew
    scale = 2.0 ** k
    return {"eigh": lambda a: knp.linalg.eigh(a * scale), "svd": lambda a: knp.linalg.svd(a * scale),
            "cholesky": lambda a: knp.linalg.cholesky(a * scale),
            "qr": lambda a: knp.linalg.qr(a * scale)}


report = {}
for k, (case, dtype, names) in enumerate(CASES):
    dtype = np.dtype(dtype)
    config.update("enable_x64", dtype == np.float64)
    lapack_threads.online_cores = (lambda: 1) if case == "busy" else (lambda: 1 << 20)
    os.environ["KILN_NUM_THREADS"] = "1" if case == "one_thread" else "2"
    words[:] = [1 if case == "claimed" else 0, 0, 0]
    rng = np.random.default_rng(0)
    m = rng.standard_normal((n, n)).astype(dtype)
    spd = (m @ m.T / n + np.eye(n)).astype(dtype)
    tol = 1e-3 if dtype == np.float32 else 1e-9
    errors = []
    for name in names.split(","):
        f = functions(k)[name]
        a = spd if name in ("eigh", "cholesky") else m
        a = np.stack([a, a]) if case == "batch" else a
        got, want = kiln.jit(f)(a), kiln.jit(f, backend="reference")(a)
        pairs = zip(got, want) if isinstance(got, tuple) else [(got, want)]
        for g, w in pairs:   # vectors up to sign: compared in magnitude
            if not np.allclose(np.abs(g), np.abs(w), atol=tol * 10, rtol=tol):
                errors.append(name)
    report[f"{case} {dtype} {names}"] = {
        "errors": errors, "openblas_threads": blas_lookup.openblas_threads(),
        "claim": words[0], "threaded": words[1] != 0, "threads": words[2]}
print(json.dumps(report))
'''

needs_openblas = pytest.mark.skipif(
    blas_lookup.openblas_address(blas_lookup.THREAD_SETTER) is None
    or blas_lookup.openblas_threads() is None, reason="needs OpenBLAS's thread setter")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    script = tmp_path_factory.mktemp("threads") / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "KILN_CACHE_DIR": "off"}
    env.pop("OPENBLAS_NUM_THREADS", None)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def _case(report, prefix):
    found = [value for key, value in report.items() if key.startswith(prefix)]
    assert found, (prefix, list(report))
    return found[0]


@needs_openblas
@pytest.mark.parametrize("case", ["idle float32", "idle float64"])
def test_threaded_call_matches_reference_and_restores_one_thread(report, case):
    got = _case(report, case)
    assert got == {"errors": [], "openblas_threads": 1, "claim": 0, "threaded": True,
                   "threads": 2}


@needs_openblas
@pytest.mark.parametrize("case", ["busy", "batch", "one_thread"])
def test_one_thread_when_busy_batched_or_asked(report, case):
    got = _case(report, case)
    assert got == {"errors": [], "openblas_threads": 1, "claim": 0, "threaded": False,
                   "threads": 0}


@needs_openblas
def test_one_thread_while_another_call_holds_the_claim(report):
    got = _case(report, "claimed")
    assert got == {"errors": [], "openblas_threads": 1, "claim": 1, "threaded": False,
                   "threads": 0}


def test_only_single_large_matrices_are_threaded():
    size = lapack_threads.MIN_SIZE
    assert lapack_threads.wanted(1, size, size)
    assert not lapack_threads.wanted(2, size, size)
    assert not lapack_threads.wanted(1, size, size - 1)
