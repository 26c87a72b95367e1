# The README's two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# flax for tests/test_compat_flax.py, without the checkpointing packages it requires (setup.cfg's
# `compat` extra has the ones flax.linen imports)
FLAX := flax==0.12.8

.PHONY: demo test bench venv clean aot-sample gpu-check

$(STAMP): pyproject.toml setup.cfg
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[test,mpi,nvrtc,pjrt,compat]'
	$(PY) -m pip install -q --no-deps $(FLAX)
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) samples/quickstart.py

# The LLVM lowering, complex, fuzzer, packed matrix product, FFT, convolution, small-matrix and thread pool tests run a second
# time for a baseline CPU, an AVX2 machine without AVX-512 (Zen 1-like), so that both kinds of
# x86-64 CI lands on are covered whichever one it is (docs/llvm.md, "Target CPU"). Make stops
# at the first failing run.
BASELINE_CPU := x86-64-v3
BASELINE_TESTS := tests/test_llvm_backend.py tests/test_llvm_complex.py tests/test_llvm_fuzz.py tests/test_pool.py \
	tests/test_pmap.py tests/test_shard_map.py tests/test_gemm_packed.py tests/test_fft.py tests/test_conv.py tests/test_linalg_small.py

test: $(STAMP)
	$(PY) -m pytest -q -n auto -p no:cacheprovider tests
	KILN_CPU=$(BASELINE_CPU) $(PY) -m pytest -q -n auto -p no:cacheprovider $(BASELINE_TESTS)

bench: $(STAMP)
	$(PY) benchmarks/run.py

# On a GPU machine (one H100/H200): one prepared script (benchmarks/gpu_check.sh) installs
# what is missing (CuPy, pytest, hypothesis), runs the GPU tests (-m gpu), tests/test_pjrt_jit.py
# through JAX's CUDA PJRT plug-in when it is installed (KILN_PJRT_PLUGIN), then kiln's
# backend="cuda" beside JAX (benchmarks/gpu_kiln.py) and the baselines (benchmarks/gpu.py),
# with the reports and a log in GPU_OUT (docs/cuda.md, BENCHMARKS.md).
GPU_PYTHON ?= python3
GPU_OUT ?= build/gpu
gpu-check:
	PYTHONUNBUFFERED=1 GPU_PYTHON=$(GPU_PYTHON) GPU_OUT=$(GPU_OUT) benchmarks/gpu_check.sh

# samples/aot_c: compile two functions ahead of time, build a C program against them, run it.
AOT_C := build/aot_c
aot-sample: $(STAMP)
	$(VENV)/bin/kiln compile samples/aot_c/model.py:predict --name mlp -o $(AOT_C)/mlp \
	    --arg 'list[(f32[4,8],f32[8]),(f32[8,3],f32[3])]' --arg 'f32[2,4]'
	$(VENV)/bin/kiln compile samples/aot_c/model.py:collatz_steps --name collatz \
	    -o $(AOT_C)/collatz --arg 'i32[6]'
	$(CC) -O2 -Wall -o $(AOT_C)/main samples/aot_c/main.c -I$(AOT_C)/mlp -I$(AOT_C)/collatz \
	    -L$(AOT_C)/mlp -L$(AOT_C)/collatz -lmlp -lcollatz \
	    -Wl,-rpath,$(abspath $(AOT_C)/mlp) -Wl,-rpath,$(abspath $(AOT_C)/collatz)
	$(AOT_C)/main

clean:
	rm -rf $(VENV) build *.egg-info
