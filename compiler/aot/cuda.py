"""`kiln compile --target cuda`: each function's CUDA kernels as files, and a manifest of the
step sequence a loader runs (`kiln.aot.load`: CuPy on a GPU, or the emulated device).

`compile_cuda_library(targets, out_dir, name=None, archs=("sm_90",), progress=None, *,
specialise, version)` stages each target (`specialise`, as for the CPU library), runs the
LLVM pipeline (simplify, fuse: the groups `backend="cuda"` gets) and plans the fused function
as the CUDA executable does (backends/cuda/executable.py). It writes into `out_dir`:

    <fn>.ssa.py  <fn>.simplified.ssa.py  <fn>.fused.ssa.py   the SSA stages
    <fn>.constants.npz                 the arrays the function closed over (its last inputs)
    <fn>.<kernel>.cu                   each kernel the function launches (regions' too)
    <fn>.<kernel>.<arch>.ptx           NVRTC's PTX for each arch
    <fn>.<kernel>.<arch>.cubin         NVRTC's cubin (an ELF image) for each arch
    manifest.json                      written last, with the sha256 of every other file

The manifest has the CPU library's fields that describe functions (name, source, inputs,
outputs, trees, static arguments, constants) and, per function, its top-level `steps` in
order. A value is a program value's name (the fused SSA's, or with a `#` a value between
the kernels of one equation: a split scan's `<result>#prefix`), or {"literal", "dtype"}:

    {"kind": "kernel", "kernel": NAME, "files": {"cu": F, "sm_90": {"ptx": F, "cubin": F}},
     "inputs": [values], "outputs": [names], "input_dtypes", "output_dtypes",
     "output_shapes", "scalars": [rank-0 input positions], "sizes": [the trailing long long
     arguments], "launch": "grid" | "thread_per_row" | "block_per_row" | "thread_per_part" |
     "block_per_part", "launch_rule": how it is sized (source.LAUNCH_RULES),
     "starts_from": [[output, input]], "scratch": [[dtype, elements]]}
    {"kind": "gemm" | "fft" | "cond" | "while_loop" | "scan" | "per_primitive" |
     "host_effect" | "subprogram", "equation": its index among the fused SSA's top-level
     equations, "primitive": NAME, "inputs": [values], "outputs": [names]}

A kernel's parameters are its inputs' pointers, its outputs' pointers, its scratch buffers'
pointers (zero-filled before each launch; the kernel leaves them zero), then one `long long`
per size; an output in `starts_from` starts as a copy of that input. A step of another kind
is the fused SSA's equation: a loader plans it as the CUDA executable does (cuBLAS for gemm,
cuFFT for fft, host-driven control flow over its regions' kernels, the primitive's NumPy
definition over the device's arrays). The function's `results` are values too. Which of a
kernel's files a device runs: cuda_files.py.
"""
import re

import numpy as np

from ..backends.cuda import device as D, executable, nvrtc, program
from ..backends.cuda.source import LAUNCH_RULES
from ..ir.ssa import Literal
from .library import (check_options, finish_manifest, function_description, staged_targets,
                      start_output)
from .manifest import FORMAT, MANIFEST_VERSION
from .targets import AOTUsageError, Target

ARCHS = ("sm_90",)


def check_archs(archs):
    """The archs as a tuple; AOTUsageError for a name NVRTC's --gpu-architecture cannot take
    as a real architecture (sm_XY)."""
    archs = tuple(archs)
    for arch in archs:
        if not re.fullmatch(r"sm_\d+[a-z]?", arch):
            raise AOTUsageError(f"bad CUDA architecture {arch!r}: expected real architectures "
                                f"such as sm_80,sm_90 (a cubin is compiled for each)")
    if not archs:
        raise AOTUsageError("no CUDA architecture: give --arch, e.g. --arch sm_80,sm_90")
    return archs


def compile_cuda_library(targets, out_dir, name=None, archs=ARCHS, progress=None, *,
                         specialise, version):
    """Compile `targets` for CUDA into `out_dir`; returns the manifest (module docstring)."""
    targets = [t if isinstance(t, Target) else Target(*t) for t in targets]
    lib = check_options(targets, name, "native")
    archs = check_archs(archs)
    manifest_path, written, write = start_output(out_dir)
    functions = []
    for target, spec, fn, files, report in staged_targets(targets, specialise, "llvm", out_dir,
                                                          write, written, progress):
        report("cuda")
        functions.append(_function(lib, target, spec, fn, files, archs, write))
    manifest = {"format": FORMAT, "manifest_version": MANIFEST_VERSION, "kiln_version": version,
                "name": lib, "target": {"kind": "cuda", "archs": list(archs),
                                        "nvrtc": nvrtc.available()[1]},
                "functions": functions}
    return finish_manifest(manifest, manifest_path, out_dir, written)


def _function(lib, target, spec, fused, files, archs, write):
    planned = executable.Program(fused, D.EmulatedLayer(), [0])   # planning only: no launch
    kernel_files = {}
    for kernel in planned.kernels():
        if kernel.name in kernel_files:
            continue
        stem = f"{spec.name}.{kernel.name}"
        entry = kernel_files[kernel.name] = {"cu": f"{stem}.cu"}
        write(entry["cu"], kernel.source)
        for arch in archs:
            ptx, cubin = nvrtc.compile_both(kernel.source, entry["cu"], arch, info=kernel.info)
            entry[arch] = {"ptx": f"{stem}.{arch}.ptx", "cubin": f"{stem}.{arch}.cubin"}
            write(entry[arch]["ptx"], ptx)
            write(entry[arch]["cubin"], cubin)
    steps = []
    index = {id(eqn): k for k, eqn in enumerate(fused.eqns)}
    for eqn, step in zip(planned.units, planned.steps):
        if step.kind == "kernel":
            steps += [_kernel_step(s, kernel_files) for s in program.equation_steps(eqn)]
        else:   # (an equation of the fused SSA: merged groups are kernels)
            steps.append({"kind": step.kind, "equation": index[id(eqn)],
                          "primitive": eqn.prim.name,
                          "inputs": [_value(x) for x in eqn.invars],
                          "outputs": [v.name for v in eqn.outvars]})
    return {**function_description(lib, target, spec), "files": files,
            "program_inputs": [v.name for v in fused.invars], "steps": steps,
            "results": [_value(v) for v in fused.outvars], "kernels": kernel_files}


def _kernel_step(step, kernel_files):
    k = step.kernel
    return {"kind": "kernel", "kernel": k.name, "files": kernel_files[k.name],
            "inputs": [_value(x) for x in step.inputs],
            "outputs": [v.name for v in step.outputs],
            "input_dtypes": [str(np.dtype(d)) for d in k.inputs],
            "output_dtypes": [str(np.dtype(d)) for d in k.outputs],
            "output_shapes": [list(s) for s in k.out_shapes], "scalars": list(k.scalars),
            "sizes": [int(s) for s in k.sizes], "launch": k.launch,
            "launch_rule": LAUNCH_RULES[k.launch][0],
            "starts_from": [list(p) for p in k.starts_from],
            "scratch": [[str(np.dtype(d)), int(n)] for d, n in k.scratch]}


def _value(x):
    if isinstance(x, Literal):
        return {"literal": np.asarray(x.value).item(), "dtype": str(np.dtype(x.aval.dtype))}
    return x.name
