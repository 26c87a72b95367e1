"""The CUDA backend (issue 18), being built: CUDA C generated from the SSA form.

Today: `source.kernel_source(fn)` makes one kernel of a function of elementwise equations
(`scalar.py`: the CUDA_SCALAR rules; inputs read through views), or of one with reductions over
any axes (`reduce.py`: a block per row with warp shuffles, or a thread per row); `nvrtc.compile`
compiles it for a GPU architecture (no GPU needed); `emulate.run` runs the same text on the
host to check its results against the reference backend; `launch.run` runs it on a GPU through
CuPy. jit's `backend="cuda"` and GPU arrays come next (docs/cuda.md).
"""
