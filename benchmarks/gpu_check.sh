#!/usr/bin/env bash
# `make gpu-check`: everything kiln checks on a GPU machine, in one call (under 8 minutes on an
# H100/H200). Run from the repository root; GPU_PYTHON (default python3) is the interpreter,
# GPU_OUT (default build/gpu) the folder of the reports.
#   1. installs what is missing, only if missing, from the package registries: kiln itself
#      (editable, no dependencies beyond its own), CuPy (cupy-cuda13x, or cupy-cuda12x when
#      nvidia-smi reports a CUDA 12 driver), pytest and hypothesis;
#   2. runs the GPU tests: tests/test_cuda_gpu.py and every test marked `gpu`;
#   3. runs tests/test_pjrt_jit.py (kiln.jit(backend="pjrt")) through JAX's CUDA PJRT plug-in
#      (the jax-cuda13-pjrt or jax-cuda12-pjrt wheel, named by KILN_PJRT_PLUGIN) when it is
#      installed; skipped with the reason otherwise;
#   4. runs benchmarks/gpu_kiln.py (kiln's backend="cuda" beside JAX when JAX's CUDA plug-in
#      is importable) and benchmarks/gpu.py (the hand-written CUDA C and JAX baselines).
# Each step's output goes to the terminal and to $GPU_OUT/gpu_check.log; the exit status is
# the tests'.
set -u
PY=${GPU_PYTHON:-python3}
OUT=${GPU_OUT:-build/gpu}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1

has() { "$PY" -c "import $1" >/dev/null 2>&1; }
install() { echo "== installing $*"; "$PY" -m pip install -q "$@"; }

echo "== $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
has kiln || install -e .
if ! has cupy; then
    if nvidia-smi 2>/dev/null | grep -q "CUDA Version: 12"; then install cupy-cuda12x
    else install cupy-cuda13x; fi
fi
has pytest || install pytest
has hypothesis || install hypothesis
"$PY" -c "from kiln.compiler.backends.cuda import device; print('device layer:', device.available())"

echo "== GPU tests"
"$PY" -m pytest -q -rs -p no:cacheprovider -m gpu tests   # tests/test_cuda_gpu.py and every other gpu test
status=$?

echo "== PJRT tests through JAX's CUDA plug-in"
CUDA_PJRT=$("$PY" -c "from kiln.compiler.backends.pjrt import plugins
print(next((f.path for f in plugins.discover() if f.name.startswith('jax-cuda')), ''))" 2>/dev/null)
if [ -n "$CUDA_PJRT" ]; then
    KILN_PJRT_PLUGIN=$CUDA_PJRT "$PY" -m pytest -q -rs -p no:cacheprovider tests/test_pjrt_jit.py
    pjrt_status=$?
    [ $status -ne 0 ] || status=$pjrt_status
else
    echo "skipped: JAX's CUDA PJRT plug-in is not installed (pip install jax-cuda13-pjrt, or"
    echo "jax-cuda12-pjrt for a CUDA 12 driver; it is JAX's jax[cuda13] extra)"
fi

echo "== kiln beside JAX"
timeout 240 "$PY" benchmarks/gpu_kiln.py --out "$OUT" || echo "gpu_kiln.py failed ($?)"
echo "== baselines (benchmarks/gpu.py)"
timeout 240 "$PY" benchmarks/gpu.py --out "$OUT" || echo "gpu.py failed ($?)"
echo "== reports in $OUT; tests exit status $status"
exit $status
