"""A compiled function: native code for one specialised SSA function, callable on NumPy arrays.

`compile_function(fn)` builds the module (codegen.py), optimises it (target.py, O3 for the host
CPU), loads it into the process's JIT, fills its extern globals (externs.py: BLAS and thread
entry points, bound at load time) and returns an `Executable` with the reference backend's
interface: `__call__(*ndarrays) -> list of ndarrays`, `as_text(level)`. A module is optimised
and loaded once per process: compiling the same SSA function again reuses its native code.

A call makes every input contiguous in its SSA dtype, allocates the outputs and the workspace
(`empty`: the one place that decides where buffers come from, memory.py's pool), and calls
`kiln_main` through ctypes with the array of pointers (ctypes releases the GIL for the call, so
several Python threads run compiled code at once; every call has its own outputs and
workspace).
"""
import ctypes

import numpy as np

from . import codegen, target, memory, externs

LEVELS = ("llvm", "llvm-unoptimized", "asm")
_ENTRY_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)


def empty(shape, dtype):
    """Memory for an output or the workspace: the caching allocator (memory.py) reuses the
    pages of freed large buffers, so repeated calls do not page-fault."""
    return memory.empty(shape, dtype)


class Executable:
    def __init__(self, fn):
        self.function = fn
        module, plan = codegen.build(fn)
        self.name = module.name
        self._unoptimized, self._optimized, self._loaded = _load(module)
        self._asm = None
        self._entry = _ENTRY_TYPE(self._loaded.entry)
        self._in_dtypes = [v.aval.dtype for v in fn.invars]
        self._outs = [(v.aval.shape, v.aval.dtype) for v in fn.outvars]
        self._workspace = plan.workspace
        self._slots = len(fn.invars) + len(fn.outvars) + 1

    def __call__(self, *args):
        if len(args) != len(self._in_dtypes):
            raise TypeError(f"{self.function.name} takes {len(self._in_dtypes)} arrays, "
                            f"got {len(args)}")
        ins = [np.ascontiguousarray(a, dtype=dt) for a, dt in zip(args, self._in_dtypes)]
        outs = [empty(shape, dt) for shape, dt in self._outs]
        workspace = empty(self._workspace, np.uint8) if self._workspace else None
        pointers = (ctypes.c_void_p * self._slots)(
            *[a.ctypes.data for a in ins], *[o.ctypes.data for o in outs],
            workspace.ctypes.data if workspace is not None else None)
        status = self._entry(pointers)
        if status:
            raise RuntimeError(f"kiln: compiled code for {self.function.name} failed "
                               f"(status {status})")
        return outs

    def as_text(self, level="llvm"):
        """The optimised LLVM IR ("llvm"), the IR before optimisation ("llvm-unoptimized"),
        or the host assembly ("asm")."""
        if level == "llvm":
            return self._optimized
        if level == "llvm-unoptimized":
            return self._unoptimized
        if level == "asm":
            if self._asm is None:
                self._asm = target.assembly(target.parse(self._optimized))
            return self._asm
        raise ValueError(f"unknown text level {level!r}; the LLVM backend has "
                         f"{', '.join(map(repr, LEVELS))}")


def compile_function(fn):
    return Executable(fn)


_LOADED = {}   # module name (a hash of the SSA text) -> (IR text, optimised IR text, Loaded)


def _load(module):
    """Optimise and load `module`, once per process for each module name: a function compiled
    again (a new `jit` of the same code) reuses the native code already in the JIT."""
    hit = _LOADED.get(module.name)
    if hit is None:
        text = str(module)
        optimized = target.optimize(text, module.name)
        optimized_text = str(optimized)
        loaded = target.load(optimized)
        externs.bind_externs(loaded.global_address, module.name)
        hit = _LOADED.setdefault(module.name, (text, optimized_text, loaded))
    return hit
