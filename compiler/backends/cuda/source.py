"""SSA Function -> CUDA C: one kernel per elementwise function (the backend's first form).

`kernel_source(fn)` turns a function all of whose equations are elementwise (every primitive
with a `CUDA_SCALAR` rule), over operands of the result's shape or rank 0 (literals and scalar
inputs, broadcast), into one kernel:

    extern "C" __global__ void kiln_<name>(const float* __restrict__ x, ...,
                                           float* __restrict__ out0, ..., long long n)
    {
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
             i += (long long)blockDim.x * gridDim.x) {
            const float x_ = x[i];          // each input read once
            const float t = (x_ * x_);      // each equation one local
            ...
            out0[i] = t;                    // each result written once
        }
    }

a grid-stride loop: any grid covers all `n` elements, so the launch may size the grid to the
device (`launch_shape`). Booleans are one byte in memory (`unsigned char`) and `bool` in
registers. A function with another primitive, a dtype without a C type here (float16,
complex), or operands of other shapes (broadcasts, reductions: the fused groups the LLVM
backend gets come next) is a BackendUnsupportedError naming what it met and its line.
`Kernel` records the kernel's name, text, and its parameters' dtypes and roles.
"""
from typing import NamedTuple

import numpy as np

from ...errors import BackendUnsupportedError
from ...ir.ssa import Literal
from ...primitives.core import CUDA_SCALAR
from . import scalar  # noqa: F401  (registers the CUDA_SCALAR rules)
from .scalar import ctype, int_constant

BLOCK = 256   # threads per block of an elementwise kernel


class Kernel(NamedTuple):
    name: str
    source: str
    inputs: tuple     # dtypes of the input pointers, in the function's input order
    outputs: tuple    # dtypes of the output pointers
    scalars: tuple    # indices of inputs of rank 0 passed by value-pointer (read once)


def _memory_type(dtype):
    return "unsigned char" if np.dtype(dtype).kind == "b" else ctype(dtype)


def _unsupported(what, info=None):
    return BackendUnsupportedError(f"the CUDA backend cannot compile {what} yet (elementwise "
                                   f"functions only so far: docs/cuda.md)", info)


def _literal(lit):
    value, dtype = lit.value, np.dtype(lit.aval.dtype)
    if dtype.kind == "b":
        return "true" if value else "false"
    if dtype.kind == "f":
        v = float(value)
        if v != v:
            return "(0.0 / 0.0)" if dtype == np.float64 else "(0.0f / 0.0f)"
        if v in (float("inf"), float("-inf")):
            text = "(1.0 / 0.0)" if dtype == np.float64 else "(1.0f / 0.0f)"
            return text if v > 0 else f"(-{text})"
        return f"(({ctype(dtype)}){float(value)!r})"
    return int_constant(dtype, value)


def _identifier(name):
    return "v_" + "".join(c if c.isalnum() else "_" for c in name)


def kernel_source(fn):
    """The Kernel computing SSA Function `fn` elementwise (see the module docstring)."""
    shape = None
    for v in fn.outvars:
        if not isinstance(v, Literal) and v.aval.shape:
            shape = v.aval.shape if shape is None else shape
    for v in list(fn.invars) + list(fn.outvars):
        if ctype(v.aval.dtype) is None:
            raise _unsupported(f"values of dtype {v.aval.dtype} ({fn.name})")
        if v.aval.shape and shape is not None and v.aval.shape != shape:
            raise _unsupported(f"operands of shapes {v.aval.shape} and {shape} in one "
                               f"function ({fn.name})")
    name = f"kiln_{_identifier(fn.name)[2:]}"
    params, body, env = [], [], {}
    scalars = []
    for k, v in enumerate(fn.invars):
        mem = _memory_type(v.aval.dtype)
        params.append(f"const {mem}* __restrict__ in{k}")
        local = _identifier(v.name)
        index = "i" if v.aval.shape else "0"
        if not v.aval.shape:
            scalars.append(k)
        load = f"in{k}[{index}]" if v.aval.dtype.kind != "b" else f"(in{k}[{index}] != 0)"
        body.append(f"const {ctype(v.aval.dtype)} {local} = {load};")
        env[v.name] = local
    _emit(fn.eqns, env, body, shape)
    for k, v in enumerate(fn.outvars):
        mem = _memory_type(v.aval.dtype)
        params.append(f"{mem}* __restrict__ out{k}")
        value = _literal(v) if isinstance(v, Literal) else env[v.name]
        body.append(f"out{k}[i] = ({mem})({value});")
    params.append("long long n")
    lines = [f'extern "C" __global__ void {name}({", ".join(params)})', "{",
             "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;",
             "         i += (long long)blockDim.x * gridDim.x) {"]
    lines += [f"        {line}" for line in body]
    lines += ["    }", "}", ""]
    return Kernel(name, "\n".join(lines), tuple(v.aval.dtype for v in fn.invars),
                  tuple(v.aval.dtype for v in fn.outvars), tuple(scalars))


def _emit(eqns, env, body, shape):
    """Append a local per equation to `body` (`env`: SSA name -> C expression). A `fusion`
    (the LLVM pipeline's group) is its region inline: its operands bound to its inputs' names,
    its results to the region's."""
    for eqn in eqns:
        if eqn.prim.name == "fusion":
            (region,) = eqn.regions()
            for inner, x in zip(region.invars, eqn.invars):
                env[inner.name] = _literal(x) if isinstance(x, Literal) else env[x.name]
            _emit(region.eqns, env, body, shape)
            for outer, result in zip(eqn.outvars, region.outvars):
                env[outer.name] = _literal(result) if isinstance(result, Literal) \
                    else env[result.name]
            continue
        rule = CUDA_SCALAR.get(eqn.prim)
        if rule is None or eqn.regions():
            raise _unsupported(f"the primitive {eqn.prim.name!r}", eqn.info)
        for v in eqn.outvars + [x for x in eqn.invars if not isinstance(x, Literal)]:
            if ctype(v.aval.dtype) is None:
                raise _unsupported(f"{eqn.prim.name} on {v.aval.dtype}", eqn.info)
            if v.aval.shape and shape is not None and v.aval.shape != shape:
                raise _unsupported(f"{eqn.prim.name} on operands of shape {v.aval.shape} "
                                   f"beside {shape}", eqn.info)
        args = [_literal(x) if isinstance(x, Literal) else env[x.name] for x in eqn.invars]
        expression = rule(args, [x.aval for x in eqn.invars], eqn.outvars[0].aval,
                          **eqn.params)
        out = eqn.outvars[0]
        env[out.name] = local = _identifier(out.name)
        body.append(f"const {ctype(out.aval.dtype)} {local} = {expression};")


def text(fn, level):
    """What the CUDA backend makes of SSA Function `fn` (simplified, or fused by the LLVM
    pipeline): `level` "cuda" (the kernel's CUDA C) or "ptx" (NVRTC's PTX for sm_90)."""
    kernel = kernel_source(fn)
    if level == "cuda":
        return kernel.source
    if level == "ptx":
        from . import nvrtc
        return nvrtc.compile(kernel.source, f"{kernel.name}.cu")
    raise ValueError(f"unknown CUDA text level {level!r}; the levels are 'cuda' and 'ptx'")


def launch_shape(n, multiprocessors=132, block=BLOCK):
    """(blocks, threads per block) for `n` elements: enough blocks to fill the device's
    multiprocessors several times over, no more than the elements need."""
    blocks = max(1, min(-(-n // block), multiprocessors * 8))
    return blocks, block
