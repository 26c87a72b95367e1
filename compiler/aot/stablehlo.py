"""`kiln compile --target stablehlo`: each function as a StableHLO module (MLIR text) for a
PJRT plug-in, with a manifest.

`compile_stablehlo_library(targets, out_dir, name=None, progress=None, *, specialise,
version)` stages each target (`specialise`, as for the CPU library), runs the reference
pipeline (simplify) and lowers the result (backends/stablehlo). It writes into `out_dir`:

    <fn>.ssa.py  <fn>.simplified.ssa.py   the SSA stages
    <fn>.constants.npz                    the arrays the function closed over
    <fn>.mlir                             the StableHLO module: `func.func public @main`
    manifest.json                         written last, with the sha256 of every other file

The manifest has the CPU library's fields that describe functions (name, source, inputs,
outputs, trees, static arguments, constants), and per function `files` (with "mlir") and
`main_inputs`/`main_outputs` ({"dtype", "shape"} each): @main's arguments are the function's
inputs, then its constants in the order of the .npz file; its results are the outputs.
"""
from ..backends.stablehlo import lower_module
from .library import (check_options, finish_manifest, function_description, staged_targets,
                      start_output)
from .manifest import FORMAT, MANIFEST_VERSION
from .targets import Target


def compile_stablehlo_library(targets, out_dir, name=None, progress=None, *, specialise,
                              version):
    """Compile `targets` to StableHLO into `out_dir`; returns the manifest (module docstring)."""
    targets = [t if isinstance(t, Target) else Target(*t) for t in targets]
    lib = check_options(targets, name, "native")
    manifest_path, written, write = start_output(out_dir)
    functions = []
    for target, spec, fn, files, report in staged_targets(targets, specialise, "reference",
                                                          out_dir, write, written, progress):
        report("stablehlo")
        module = lower_module(fn, name=spec.name)
        files["mlir"] = f"{spec.name}.mlir"
        write(files["mlir"], module.text)
        types = lambda avals: [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in avals]
        functions.append({**function_description(lib, target, spec), "files": files,
                          "main_inputs": types(module.in_avals),
                          "main_outputs": types(module.out_avals)})
    manifest = {"format": FORMAT, "manifest_version": MANIFEST_VERSION, "kiln_version": version,
                "name": lib, "target": {"kind": "stablehlo", "dialects": ["stablehlo", "chlo"]},
                "functions": functions}
    return finish_manifest(manifest, manifest_path, out_dir, written)
