"""`Lowered.cost_analysis()`, `Compiled.cost_analysis()` and `Compiled.memory_analysis()`.

- cost: XLA's cost properties (a dict of floats: "flops", "transcendentals",
  "bytes accessed", ...; compiler/primitives/cost.py counts them over kiln's SSA as XLA's
  HloCostAnalysis does). For the pjrt backend `Compiled.cost_analysis()` gives XLA's own
  figures for the module the plug-in compiled (PJRT_Executable_GetCostAnalysis), unless XLA
  reports one as unknown (-1: it cannot count kiln's FFI calls, such as its matrix
  products), where kiln's count of the same SSA replaces them all.
- memory: a `CompiledMemoryStats` with JAX's fields. For the pjrt backend, XLA's
  (PJRT_Executable_GetCompiledMemoryStats); else kiln's: arguments and outputs are the
  executable's inputs (its closed-over constants included) and results, the alias bytes
  those of the results computed in donated buffers, temporaries the LLVM backend's
  workspace (its buffer plan: every intermediate value, reused by liveness) or, for the
  reference backend, every intermediate value of the function (it keeps them all until it
  returns), generated code the size of the LLVM backend's object code (0 for the reference
  backend, which runs Python). kiln has no host memory space: the host_ fields are 0.
"""
import math

import numpy as np

from .compiler.primitives.cost import cost_analysis as ssa_cost

_FIELDS = ("generated_code_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes",
           "alias_size_in_bytes", "temp_size_in_bytes", "host_generated_code_size_in_bytes",
           "host_argument_size_in_bytes", "host_output_size_in_bytes",
           "host_alias_size_in_bytes", "host_temp_size_in_bytes")


class CompiledMemoryStats:
    """JAX's `CompiledMemoryStats`: the memory a compiled function needs, in bytes."""
    __slots__ = _FIELDS + ("peak_memory_in_bytes",)

    def __init__(self, **figures):
        for name in self.__slots__:
            setattr(self, name, int(figures.get(name, 0)))

    def __repr__(self):
        shown = ", ".join(f"{name}={getattr(self, name)}" for name in _FIELDS)
        return f"CompiledMemoryStats({shown})"


def lowered_cost(entry):
    """`Lowered.cost_analysis()`: kiln's count over the SSA after the passes."""
    return ssa_cost(entry.ssa)


def compiled_cost(entry):
    """`Compiled.cost_analysis()`: XLA's figures for a pjrt executable when complete, else
    kiln's count over the SSA the backend runs."""
    table, handle = _pjrt_handle(entry)
    if handle is not None:
        from .compiler.backends.pjrt.client import cost_analysis
        figures = cost_analysis(table, handle)
        if figures and min(figures.values()) >= 0:
            return figures
    return ssa_cost(_function(entry))


def memory_analysis(entry):
    """`Compiled.memory_analysis()` (see the module docstring)."""
    table, handle = _pjrt_handle(entry)
    if handle is not None:
        from .compiler.backends.pjrt.client import memory_stats
        stats = memory_stats(table, handle)
        if stats is not None:
            return CompiledMemoryStats(**stats)
    fn, ex = _function(entry), entry.executable
    native = getattr(ex, "native", None)
    outputs = [_bytes(v.aval) for v in fn.outvars]
    results = {id(v) for v in fn.outvars}
    temp = native.workspace if native is not None else \
        sum(_bytes(v.aval) for e in fn.eqns for v in e.outvars if id(v) not in results)
    arguments = sum(_bytes(v.aval) for v in fn.invars)
    aliased = sum(outputs[j] for j in getattr(ex, "held", {}))
    return CompiledMemoryStats(
        generated_code_size_in_bytes=native.code_bytes if native is not None else 0,
        argument_size_in_bytes=arguments, output_size_in_bytes=sum(outputs),
        alias_size_in_bytes=aliased, temp_size_in_bytes=temp,
        peak_memory_in_bytes=arguments + sum(outputs) - aliased + temp)


def _bytes(aval):
    return math.prod(aval.shape) * np.dtype(aval.dtype).itemsize


def _function(entry):
    """The SSA the backend runs (the LLVM backend's own, else the entry's)."""
    return getattr(entry.executable, "function", None) or entry.ssa


def _pjrt_handle(entry):
    """(the PJRT api table, the loaded executable) of a pjrt-backend entry on its default
    device, else (None, None)."""
    from .pjrt import Program
    program = entry.executable
    if type(program) is not Program:
        return None, None
    compiled = program._on(program.default).compiled
    return compiled.client.api, compiled.handle


class XlaFigures:
    """`cost_analysis()` and `memory_analysis()` as XLA gives them for a compiled executable
    whose `_loaded()` is (the PJRT api table, its PJRT_LoadedExecutable*); a ValueError, with
    `_why_none`, where the plug-in gives none (a mixin of `Compiled` classes)."""
    _why_none = ""

    def cost_analysis(self):
        """XLA's cost properties of the executable (a dict of floats)."""
        return self._figures("cost_analysis", "cost properties")

    def memory_analysis(self):
        """XLA's CompiledMemoryStats of the executable."""
        return CompiledMemoryStats(**self._figures("memory_stats", "memory statistics"))

    def _figures(self, name, what):
        from .compiler.backends.pjrt import client
        table, handle = self._loaded()
        found = getattr(client, name)(table, handle)
        if found is None:
            raise ValueError(f"the plug-in gives no {what} of executables{self._why_none}")
        return found
