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

Every other step is its equation in the function's fused SSA file, planned as the CUDA
executable plans it (gemm, control flow, per-primitive). The closed-over
constants come from `<fn>.constants.npz`. Arguments are checked and flattened, and results
unflattened, as for CPU libraries (`kiln.aot.Function`); results are arrays on the GPU.
"""
import numpy as np

from .compiler.aot import cuda_files
from .compiler.backends.cuda import device as D
from .compiler.backends.cuda.executable import Program, to_layer
from .compiler.backends.cuda.source import Kernel
from .compiler.ir import parser
from .compiler.ir.ssa import Function as SSAFunction


class Steps:
    """One function's steps, ready to run on `layer`: `__call__(*input arrays)` returns the
    results as the layer's arrays."""

    def __init__(self, directory, spec, layer):
        self.layer = layer
        fused = parser.from_source((directory / spec["files"]["fused"]).read_text())
        with np.load(directory / spec["files"]["constants"]) as saved:
            constants = [saved[f"arr_{k}"] for k in range(len(saved.files))]
        self.constants = [to_layer(layer, c) for c in constants]
        self.inputs = spec["program_inputs"]
        self.results = spec["results"]
        planner = Program(SSAFunction(fused.name, [], [], []), layer, [0])
        self.steps = [self._kernel(directory, s) if s["kind"] == "kernel" else
                      self._equation(planner, fused.eqns[s["equation"]], s)
                      for s in spec["steps"]]
        self.sources, texts = {}, []   # kernel name -> (its file, [why others were not])
        for kind, kernel, s in self.steps:
            if kind == "kernel" and kernel.name not in self.sources:
                found = self.sources[kernel.name] = load_kernel(layer, kernel, directory,
                                                                s["files"])
                if found[0] == s["files"]["cu"]:
                    texts.append(kernel)
        layer.prepare(texts)   # (all at once: one host library when emulated)

    def _kernel(self, directory, s):
        kernel = Kernel(s["kernel"], (directory / s["files"]["cu"]).read_text(),
                        tuple(np.dtype(d) for d in s["input_dtypes"]),
                        tuple(np.dtype(d) for d in s["output_dtypes"]), tuple(s["scalars"]),
                        extents=len(s["sizes"]), sizes=tuple(s["sizes"]),
                        out_shapes=tuple(tuple(x) for x in s["output_shapes"]),
                        launch=s["launch"], starts_from=tuple(map(tuple, s["starts_from"])),
                        scratch=tuple((np.dtype(d), n) for d, n in s["scratch"]))
        return "kernel", kernel, s

    @staticmethod
    def _equation(planner, eqn, s):
        return "equation", planner.plan(eqn), s

    def _value(self, env, value):
        if isinstance(value, dict):
            return self.layer.to_device(np.asarray(value["literal"], value["dtype"]))
        return env[value]

    def __call__(self, *arrays):
        layer = self.layer
        env = dict(zip(self.inputs, [*arrays, *self.constants]))
        for kind, run, s in self.steps:
            values = [self._value(env, v) for v in s["inputs"]]
            if kind == "kernel":
                outs = [layer.empty(shape, dtype)
                        for shape, dtype in zip(run.out_shapes, run.outputs)]
                for k, j in run.starts_from:
                    outs[k] = values[j].copy()
                layer.run_kernel(run, values, outs)
            else:
                outs = run.run(layer, values)
            env.update(zip(s["outputs"], outs))
        return [self._value(env, v) for v in self.results]


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
