"""kiln.compiler.aot: ahead-of-time compilation into a shared library with a C ABI
(`kiln compile`; `kiln.aot.load` is the loader).

This package builds libraries from SSA; staging the user's Python functions into that SSA is
the runtime's part, so the entry point lives there:

API
    kiln.cli.aot.compile_library(targets, out_dir, name=None, cpu="native", progress=None,
                                 cc=None)
        -> manifest (dict, also written as out_dir/manifest.json)
    (it calls `library.compile_library(..., specialise=kiln.cli.aot.specialise,
    version=kiln.__version__)`)

- `targets`: `Target`s (or tuples of Target's fields):
      Target(fn, args=(), kwargs=None, static_argnums=(), transforms=(), source=None, name=None)
  `fn` a Python function (or a kiln.jit one); `args` example arguments: arrays (NumPy or kiln;
  only shapes and dtypes matter) and pytrees of them; `static_argnums` the positions in `args`
  of static values; `kwargs` static keyword arguments; `transforms` `(kind, option)` pairs
  applied in order: `("grad", argnums)`, `("value_and_grad", argnums)` (argnums an int or a
  tuple, counted among the dynamic arguments), `("vmap", in_axes)` or
  `("vmap", in_axes, axis_name)` (collectives in the function name the axis); `source` names it in the
  manifest ("file.py:f"); `name` overrides the exported name (default: the function's name
  with one prefix per transform, last first: `grad_f`, `value_and_grad_f`, `vmap_f`,
  `vmap_grad_f`). A transformed target's static arguments must come after its dynamic ones.
- `name`: the library's name, a C identifier (default: the first target's module, `model`
  for "path/model.py:f" or "pkg.model:f", made a C identifier; see targets.library_name);
  `cpu`: "native" (this CPU, every feature it has) or "generic" (x86-64-v2, runs on other
  machines); `progress(index, total, function, stage)` is called before each stage
  ("specialise", "simplify", "fuse", "llvm"; then "link" with the library's file name);
  `cc` the C compiler command (default $CC, else `cc`).
- Errors: `AOTUsageError` (a ValueError: bad options, two functions with one exported name),
  `AOTError` (no C compiler, a failed link, an argument or result the manifest cannot
  describe), and the errors kiln.jit raises for the function itself (CompileError with the
  user's file, line and caret, TypeError, ...).

Files written into `out_dir` (created if missing), `<fn>` being each exported name:
  <fn>.ssa.py  <fn>.simplified.ssa.py  <fn>.fused.ssa.py   the SSA stages (after transforms)
  <fn>.ll  <fn>.s  <fn>.o        optimised LLVM IR, assembly, object code
  kiln_runtime.o                 the runtime library (kiln_parallel_for)
  kiln_mpi.o                     the MPI engine (mpi_engine.py), when a function calls
                                 collectives across processes (staged with processes > 1)
  <NAME>_glue.c                  the generated C glue (the exported functions)
  lib<NAME>.so                   the library; <NAME>.h its header
  manifest.json                  written last

C ABI (see glue.py and <NAME>.h): `int <NAME>_<fn>(const T *inputs..., T *outputs...)`: the
flattened leaves of the dynamic arguments, then of the result, contiguous C order, exact dtype;
returns 0 or an error code (manifest.ERROR_CODES); `int <NAME>_init(void)`,
`void <NAME>_bind_extern(const char *name, void *value)`, `const char *<NAME>_strerror(int)`;
with kiln_mpi.o, `int <NAME>_mpi_setup(MPI_Comm, double timeout)` and
`int <NAME>_mpi_teardown(void)` (the header includes mpi.h; mpicc links the library).

manifest.json (MANIFEST_VERSION 2):
  {"format": "kiln-aot", "manifest_version": 2, "kiln_version", "llvm_version",
   "llvmlite_version", "python": "3.11", "numpy", "x64": bool (jax_enable_x64 at compile time),
   "name": NAME, "library": "libNAME.so", "header": "NAME.h", "glue": "NAME_glue.c",
   "runtime_object": "kiln_runtime.o",
   "target": {"triple", "machine": "x86_64", "cpu": "rocketlake" | "x86-64-v2",
              "mode": "native" | "generic",
              "features": [/proc/cpuinfo flags the code requires, e.g. "avx2", "sse4_2"],
              "llvm_features": "+avx,+avx2,..." (native; "" for generic)},
   "blas": {"name", "path": "/abs/libscipy_openblas64_...so" | null, "int_bits": 64 | 32,
            "symbols": {"sgemm": "scipy_sgemm_64_", ...,
                        "openblas_set_num_threads": "scipy_openblas_set_num_threads_64_"}},
   "error_codes": {"1": "...", "2": "...", "3": "..."},
   "link": [the C compiler's command line],
   "files": {file name: sha256 hex, for every file above but manifest.json},
   "functions": [
     {"name": fn, "symbol": "NAME_fn", "source": "file.py:f",
      "transform": null | "grad" | "value_and_grad" | "vmap" | "vmap_grad" | ...,
      "transforms": [{"kind": "grad", "argnums": 0},
                     {"kind": "vmap", "in_axes": [0, null], "axis_name": "i" (if named)}],
      "inputs": [{"path": "x" | "params[0]['W']", "dtype": "float32", "shape": [3, 4],
                  "weak_type": false}, ...],
      "outputs": [{"path": "out" | "out[0]" | "out['loss']", ...same keys}, ...],
      "in_tree": treedef JSON of the tuple of dynamic positional arguments,
      "out_tree": treedef JSON of the result (manifest.py documents the encoding),
      "static": {parameter name: value (repr when JSON cannot hold it)},
      "constants": [{"dtype", "shape"}]  (arrays it closed over, baked into the library),
      "workspace_bytes": int, "uses": ["blas", "debug_print", "threads"],
      "externs": ["kiln_sgemm", ...], "module": LLVM module name, "entry": its entry symbol,
      "files": {"ssa", "simplified", "fused", "llvm", "asm", "object": file names}}]}

`kiln compile --target cuda` writes CUDA kernels and a manifest of steps instead of a library
(`cuda.py`, `kiln.cli.aot.compile_cuda_library`; docs/aot.md).

Importing this package is light (no llvmlite): `library` imports the backend.
"""
from .manifest import ERROR_CODES, FORMAT, MANIFEST_VERSION, tree_to_json  # noqa: F401
from .targets import AOTError, AOTUsageError, Target, exported_name  # noqa: F401
