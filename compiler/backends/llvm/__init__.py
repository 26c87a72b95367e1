"""The LLVM CPU backend: one native entry point per specialised function, through llvmlite.

    compile_function(fn, donated=()) -> Executable
        (call it on NumPy arrays; `as_text("llvm" | "llvm-unoptimized" | "asm")`; `donated`:
        indices of inputs it may overwrite and return as outputs, `Executable.held`)

Pipeline: `codegen` plans where every value lives (outputs in place, temporaries in one
workspace reused by liveness, reshapes as aliases) and emits an `llvmlite.ir` module whose entry
`i32 kiln_main(ptr args)` calls one `noalias` kernel per equation; `lower_*` modules hold the
lowering rules (the `LLVM_SCALAR` table for elementwise primitives, `LLVM` for the
rest, registered in those tables when this package is imported); `target` optimises the module
at O3 for the host CPU with the new pass manager and loads it into the process's MCJIT engine;
`executable` calls it through ctypes.

Nothing here is imported by `import kiln`: the runtime imports this package on the first
compilation for the CPU, so llvmlite loads only then.
"""


def compile_function(fn, donated=()):
    from .executable import compile_function as compile_
    return compile_(fn, donated)
