"""Eager operations on GPU arrays: each primitive applied outside `jit` to a device buffer runs
as a one-equation program of the CUDA backend's executable (executable.py) on the current
device layer, compiled once per (layer, primitive, params, operand types) and cached.

So an elementwise primitive or a reduce_sum/max/min is one generated kernel, dot_general the
layer's GEMM, fft the layer's FFT, cond/while_loop/scan host-driven loops over device programs, and any other
primitive its NumPy definition over the layer's arrays (CuPy's functions on a GPU); nothing
is copied to the host except a control-flow decision. Host operands (a Python scalar beside a
GPU array, say) are copied to the device first.
"""
import numpy as np

from ...ir.abstract import ShapedArray
from ...ir.ssa import Eqn, Function, Var
from . import device as D
from .executable import Executable

_EXECUTABLES = {}


def run(prim, values, params):
    """The results (DeviceBuffers) of `prim` on `values` (DeviceBuffers and ndarrays)."""
    layer = D.current()
    types = tuple((tuple(v.shape), np.dtype(v.dtype)) for v in values)
    key = (id(layer), prim, tuple(params.items()), types)
    executable = _EXECUTABLES.get(key)
    if executable is None:
        executable = _EXECUTABLES[key] = Executable(_one_equation(prim, types, params))
    return executable(*values)


def _one_equation(prim, types, params):
    invars = [Var(f"x{k}", ShapedArray(shape, dtype)) for k, (shape, dtype) in enumerate(types)]
    outs = prim.abstract_eval(*[v.aval for v in invars], **params)
    outs = outs if prim.multiple_results else (outs,)
    outvars = [Var(f"y{k}", ShapedArray(a.shape, a.dtype)) for k, a in enumerate(outs)]
    return Function(f"eager_{prim.name}", invars, [Eqn(outvars, prim, invars, params)], outvars)
