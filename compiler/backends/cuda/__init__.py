"""The CUDA backend (issue 18), being built: CUDA C generated from the SSA form.

Today: `source.kernel_source(fn)` makes one kernel of a function of elementwise equations
(`scalar.py`: the CUDA_SCALAR rules; inputs read through views), or of one with reductions over
any axes (`reduce.py`: a block per row with warp shuffles, or a thread per row); `nvrtc.compile`
compiles it for a GPU architecture (no GPU needed); `emulate.run` runs the same text on the
host to check its results against the reference backend; `launch.run` runs it on a GPU through
CuPy. `compile_function` is jit's backend="cuda" (executable.py: a program of kernels, GEMMs
and host-driven control flow on a device layer, device.py: CuPy on a GPU or the host emulation
under KILN_CUDA_EMULATE=1); eager.py runs eager operations on GPU arrays (docs/cuda.md).
"""


def compile_function(fn):
    """jit's backend="cuda": executable.Executable (imported on first use)."""
    from .executable import compile_function as compile_
    return compile_(fn)
