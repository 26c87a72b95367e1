"""`kiln compile --target cuda`: each function's CUDA kernels as files, and a manifest of the
step sequence a loader runs (`kiln.aot.load`: CuPy on a GPU, or the emulated device).

`compile_cuda_library(targets, out_dir, name=None, archs=("sm_90",), progress=None, *,
specialise, version)` stages each target (`specialise`, as for the CPU library), runs the
LLVM pipeline (simplify, fuse: the groups `backend="cuda"` gets) and plans the fused function
once (backends/cuda/program.py), as backend="cuda" does. It writes into `out_dir`:

    <fn>.ssa.py  <fn>.simplified.ssa.py  <fn>.fused.ssa.py   the SSA stages
    <fn>.constants.npz                 the arrays the function closed over (its last inputs)
    <fn>.<kernel>.cu                   each kernel the function launches (regions' too)
    <fn>.<kernel>.<arch>.ptx           NVRTC's PTX for each arch
    <fn>.<kernel>.<arch>.cubin         NVRTC's cubin (an ELF image) for each arch
    manifest.json                      written last, with the sha256 of every other file

The manifest has the CPU library's fields that describe functions (name, source, inputs,
outputs, trees, static arguments, constants) and, per function, its whole plan
(backends/cuda/program.py, as cuda_plan.py writes it): `program_inputs` (the fused SSA's
input names: the input leaves, then the constants), `steps` in order and `results`, and
`kernels`, each kernel's files by name. A value is a program value's name (the fused SSA's,
or with a `#` a value between the kernels of one equation: a split scan's
`<result>#prefix`), or {"literal", "dtype"}:

    {"kind": "kernel", "kernel": NAME, "files": {"cu": F, "sm_90": {"ptx": F, "cubin": F}},
     "inputs": [values], "outputs": [names], "input_dtypes", "output_dtypes",
     "output_shapes", "scalars": [rank-0 input positions], "sizes": [the trailing long long
     arguments], "launch": "grid" | "thread_per_row" | "block_per_row" | "thread_per_part" |
     "block_per_part", "launch_rule": how it is sized (source.LAUNCH_RULES),
     "starts_from": [[output, input]], "scratch": [[dtype, elements]]}
    {"kind": "gemm", "inputs", "outputs", "left", "right": the operands' axes in (batch,
     free, contracted) and (batch, contracted, free) order, "sizes": [B, M, K, N],
     "batched", "shape", "dtype"}
    {"kind": "per_primitive" | "fft" | "host_effect" | "host_call", "primitive": NAME,
     "params", "inputs", "outputs", "types": [[shape, dtype]]}
    {"kind": "cond", "inputs", "outputs", "branches": [plans]}
    {"kind": "while_loop", "inputs", "outputs", "num_consts", "speculate", "test": plan,
     "body": plan}
    {"kind": "scan", "inputs", "outputs", "num_consts", "num_carry", "length", "reverse",
     "types", "body": plan}
    {"kind": "subprogram", "inputs", "outputs", "body": plan}

where a plan is {"inputs": [names], "steps": [steps], "results": [values]}. A kernel's
parameters are its inputs' pointers, its outputs' pointers, its scratch buffers' pointers
(zero-filled before each launch; the kernel leaves them zero), then one `long long` per
size; an output in `starts_from` starts as a copy of that input. The loader runs the plan
as it is (the CUDA executable's Program), planning nothing from the fused SSA. Which of a
kernel's files a device runs: cuda_files.py.
"""
import re

from ..backends.cuda import nvrtc, program
from . import cuda_plan
from .library import (check_options, finish_manifest, function_description, staged_targets,
                      start_output)
from .manifest import FORMAT, MANIFEST_VERSION
from .targets import AOTError, AOTUsageError, Target

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
    plan = program.plan(fused)
    kernel_files, sources = {}, {}
    for kernel in program.kernels(plan):
        if sources.setdefault(kernel.name, kernel.source) != kernel.source:
            raise AOTError(f"{spec.name} has two different CUDA kernels named {kernel.name} "
                           f"(a kiln bug: kernels are named after unique SSA values)")
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
    encoded = cuda_plan.encode(plan, kernel_files)
    return {**function_description(lib, target, spec), "files": files,
            "program_inputs": encoded["inputs"], "steps": encoded["steps"],
            "results": encoded["results"], "kernels": kernel_files}
