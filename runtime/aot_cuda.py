"""`kiln.aot.load` of a `kiln compile --target cuda` directory: its functions run their step
sequence (kiln.compiler.aot.cuda documents the manifest) on the CUDA device layer (CuPy on a
GPU; the host emulation under KILN_CUDA_EMULATE=1).

A kernel step launches its kernel with the manifest's buffers, sizes and launch rule; an
output in `starts_from` starts as a copy of its input. The kernel comes from the first of its
files the device runs (`load_kernel`, compiler/aot/cuda_files.py's order): a cubin for the
device's architecture (one of an earlier minor version of its major), else the PTX, which the
driver compiles for the device, else the `.cu` text, which CuPy compiles with NVRTC as
backend="cuda" does. A cubin whose ELF header names another architecture, or a file the
driver refuses (a cubin or PTX newer than the driver, say), is passed over for the next;
`Steps.sources` says which file each kernel came from and why earlier ones were passed over.
The emulated layer has no architecture: it compiles the `.cu` text for the host.

The manifest holds the whole plan (compiler/aot/cuda_plan.py reads it back): kernels,
gemm, per-primitive steps and control flow with its regions' plans, run by the CUDA
executable's Program as `backend="cuda"` runs it; nothing is planned again from the fused
SSA. The closed-over constants come from `<fn>.constants.npz` and are copied to the device
once, when the library is loaded, then passed after the arguments at every call.
Arguments are checked and flattened, and results unflattened, as for CPU libraries
(`kiln.aot.Function`); results are arrays on the GPU.
"""
import numpy as np

from .compiler.aot import cuda_files, cuda_plan
from .compiler.backends.cuda import device as D
from .compiler.backends.cuda.executable import Program, to_layer


class Steps:
    """One function's plan, ready to run on `layer`: `__call__(*input arrays)` returns the
    results as the layer's arrays; `program` the CUDA executable's Program of the plan."""

    def __init__(self, directory, spec, layer):
        self.layer = layer
        with np.load(directory / spec["files"]["constants"]) as saved:
            constants = [saved[f"arr_{k}"] for k in range(len(saved.files))]
        self.constants = [to_layer(layer, c) for c in constants]
        plan = cuda_plan.decode({"inputs": spec["program_inputs"], "steps": spec["steps"],
                                 "results": spec["results"]}, directory)
        self.program = Program(plan, layer, [0])
        self.sources, texts = {}, []   # kernel name -> (its file, [why others were not])
        for kernel in self.program.kernels():
            if kernel.name not in self.sources:
                files = spec["kernels"][kernel.name]
                found = self.sources[kernel.name] = load_kernel(layer, kernel, directory, files)
                if found[0] == files["cu"]:
                    texts.append(kernel)
        layer.prepare(texts)   # (all at once: one host library when emulated)

    def __call__(self, *arrays):
        return self.program(*arrays, *self.constants)


def load_kernel(layer, kernel, directory, files):
    """Make `kernel` (its text `files["cu"]`'s) launchable on `layer` from the first of its
    `files` (a manifest entry) the device runs (module docstring); returns (that file's name,
    [why each file before it was passed over]). When that is the `.cu` text, the caller
    compiles it (Layer.prepare, every such kernel at once)."""
    passed = []
    for kind, arch, name in cuda_files.candidates(files, layer.arch) if layer.arch else ():
        if kind == "cu":
            break
        path = directory / name
        try:
            if kind == "cubin":
                cuda_files.check_cubin(path.read_bytes(), arch)
            layer.load_module(kernel, path)
            return name, passed
        except (ValueError, OSError, D.ModuleLoadError) as e:
            passed.append(f"{name}: {e}")
    return files["cu"], passed


def run_function(steps, inputs):
    """The results of `steps` (Steps) on the host arrays `inputs`, as DeviceBuffers."""
    values = [to_layer(steps.layer, a) for a in inputs]
    return [D.DeviceBuffer(o, steps.layer) for o in steps(*values)]
