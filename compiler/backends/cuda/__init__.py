"""The CUDA backend (issue 18), being built: CUDA C generated from the SSA form.

Today: `source.kernel_source(fn)` makes one grid-stride kernel of a function of elementwise
equations (`scalar.py`: the CUDA_SCALAR rules), `nvrtc.compile` compiles it for a GPU
architecture (no GPU needed), and `emulate.run` runs the same text on the host to check its
results against the reference backend. Running on a GPU (CuPy), the fused groups with
reductions, jit's `backend="cuda"` and `kiln show --stage cuda|ptx` come next (docs/cuda.md).
"""
