"""SSA Function -> CUDA C: one kernel per elementwise function (the backend's first form).

`kernel_source(fn)` turns a function all of whose equations are elementwise (every primitive
with a `CUDA_SCALAR` rule) over the results' shape, into one kernel. Inputs may be read through
views (broadcast_in_dim, transpose, squeeze, rev, slice, and reshape of a contiguous input): a view
computes nothing, it becomes the affine index of the input's load (`_View`: an offset and a
stride per coordinate, 0 along broadcast axes), with the kernel's coordinates c0, c1, ...
computed from the flat index when a load needs them; each input element a kernel reads is
loaded once per view. An iota computes its elements from those coordinates (`GENERATED`). Groups the LLVM pipeline fused are emitted inline. The kernel:

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
registers. A function with another primitive (reductions, gathers, control flow), a dtype
without a C type here (float16, complex), or arithmetic at another shape than the results'
is a BackendUnsupportedError naming what it met and its line.
`Kernel` records the kernel's name, text, and its parameters' dtypes and roles.
"""
import re
from typing import NamedTuple

import numpy as np

from ...errors import BackendUnsupportedError
from ...ir.abstract import contiguous_strides
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
    scalars: tuple    # indices of inputs of rank 0 (read at index 0)
    extents: int = 1  # trailing `long long` size arguments: n, or a reduction's rows, columns
    sizes: tuple = ()       # their values
    out_shapes: tuple = ()  # the shape of each output
    launch: str = "grid"    # its launch rule: LAUNCH_RULES' key
    info: object = None     # the source line of the SSA it came from (its first equation's)
    starts_from: tuple = ()  # (output k, input j): output k starts as a copy of input j (a
    #                          scatter updates its operand's copy), the others start undefined
    scratch: tuple = ()      # (dtype, elements) of each work buffer passed after the outputs:
    #                          zero at launch, and the kernel leaves them zero (reduce.py)


def _memory_type(dtype):
    return "unsigned char" if np.dtype(dtype).kind == "b" else ctype(dtype)


def _unsupported(what, info=None):
    return BackendUnsupportedError(f"the CUDA backend cannot compile {what} yet (elementwise "
                                   f"functions and reductions so far: docs/cuda.md)", info)


def _literal(lit):
    return constant(lit.value, lit.aval.dtype)


def constant(value, dtype):
    """The C constant of `value` as a `dtype` element (NaN and infinities as expressions)."""
    dtype = np.dtype(dtype)
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


class _View(NamedTuple):
    """An input read through views: element (c0, c1, ...) of the view is element
    `offset + sum(c_d * strides[d])` of input `k` (strides in elements, 0 along broadcast
    axes). Views of inputs compute nothing: they become the index a load uses."""
    k: int
    dtype: object
    shape: tuple
    offset: int
    strides: tuple


def _broadcast_in_dim(v, *, shape, broadcast_dimensions, **params):
    strides = [0] * len(shape)
    for p, j in enumerate(broadcast_dimensions):
        strides[j] = v.strides[p] if v.shape[p] == shape[j] else 0
    return v._replace(shape=tuple(shape), strides=tuple(strides))


def _transpose(v, *, permutation):
    return v._replace(shape=tuple(v.shape[p] for p in permutation),
                      strides=tuple(v.strides[p] for p in permutation))


def _squeeze(v, *, dimensions):
    keep = [d for d in range(len(v.shape)) if d not in dimensions]
    return v._replace(shape=tuple(v.shape[d] for d in keep),
                      strides=tuple(v.strides[d] for d in keep))


def _rev(v, *, dimensions):
    offset = v.offset + sum((v.shape[d] - 1) * v.strides[d] for d in dimensions)
    strides = tuple(-s if d in dimensions else s for d, s in enumerate(v.strides))
    return v._replace(offset=offset, strides=strides)


def _reshape(v, *, new_sizes, dimensions=None):
    if dimensions is not None or v.offset or v.strides != contiguous_strides(v.shape):
        return None   # a reshape of a strided view is not affine
    return v._replace(shape=tuple(new_sizes), strides=contiguous_strides(new_sizes))


def _slice(v, *, start_indices, limit_indices, strides=None):
    steps = strides or (1,) * len(v.shape)
    offset = v.offset + sum(s * stride for s, stride in zip(start_indices, v.strides))
    shape = tuple(-(-(limit - s) // step) for s, limit, step in
                  zip(start_indices, limit_indices, steps))
    return v._replace(offset=offset, shape=shape,
                      strides=tuple(stride * step for stride, step in zip(v.strides, steps)))


VIEWS = {"broadcast_in_dim": _broadcast_in_dim, "transpose": _transpose,
         "squeeze": _squeeze, "rev": _rev, "reshape": _reshape, "slice": _slice}


def _iota(*, dtype, shape, dimension, **params):
    """iota's element at the kernel's coordinates (its shape's): its coordinate along
    `dimension`."""
    return f"({ctype(dtype)})({'i' if len(shape) == 1 else f'c{dimension}'})"


# primitives without operands computed from the kernel's coordinates: (**params) -> C
GENERATED = {"iota": _iota}


def kernel_source(fn):
    """The Kernel computing SSA Function `fn` (see the module docstring): the kernel of its
    one equation when that has a generator of its own (equation_kernels.py: gathers, scatters,
    dynamic slices, concatenate, cumulative scans), a reduction kernel (reduce.py) for a
    function with reductions, else elementwise."""
    from . import equation_kernels, reduce
    if len(fn.eqns) == 1 and fn.eqns[0].prim.name in equation_kernels.KERNELS:
        return equation_kernels.KERNELS[fn.eqns[0].prim.name](fn)
    found = reduce.plan(fn)
    if found is not None:
        return reduce.reduction_source(fn, found)
    shapes = {v.aval.shape for v in fn.outvars if not isinstance(v, Literal) and v.aval.shape}
    if len(shapes) > 1:
        raise _unsupported(f"results of several shapes {sorted(shapes)} ({fn.name})")
    shape = shapes.pop() if shapes else ()
    for v in fn.outvars:   # (inputs: checked by `inputs`)
        if ctype(v.aval.dtype) is None:
            raise _unsupported(f"values of dtype {v.aval.dtype} ({fn.name})")
    name = f"kiln_{_identifier(fn.name)[2:]}"
    params, scalars, env = inputs(fn)
    body = []
    _emit(fn.eqns, env, body, shape)
    for k, v in enumerate(fn.outvars):
        mem = _memory_type(v.aval.dtype)
        params.append(f"{mem}* __restrict__ out{k}")
        value = _literal(v) if isinstance(v, Literal) else _value(env, v.name, body, shape)
        body.append(f"out{k}[i] = ({mem})({value});")
    params.append("long long n")
    coordinates = coordinate_lines(shape, body)
    lines = [f'extern "C" __global__ void {name}({", ".join(params)})', "{",
             "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;",
             "         i += (long long)blockDim.x * gridDim.x) {"]
    lines += [f"        {line}" for line in coordinates + body]
    lines += ["    }", "}", ""]
    return Kernel(name, "\n".join(lines), tuple(v.aval.dtype for v in fn.invars),
                  tuple(v.aval.dtype for v in fn.outvars), tuple(scalars),
                  sizes=(int(np.prod(shape, dtype=np.int64)),),
                  out_shapes=tuple(v.aval.shape for v in fn.outvars), info=origin(fn))


def origin(fn):
    """The source line of the first equation of `fn` (or of a fused group in it) that has
    one: where a kernel of `fn` came from, for NVRTC's errors."""
    for eqn in fn.eqns:
        if getattr(eqn, "info", None) is not None:
            return eqn.info
        for region in eqn.regions():
            found = origin(region)
            if found is not None:
                return found
    return None


def inputs(fn):
    """(the kernel's input parameters, the indices of rank-0 inputs, env: each input's name
    bound to its identity view)."""
    params, scalars, env = [], [], {}
    for k, v in enumerate(fn.invars):
        if ctype(v.aval.dtype) is None:
            raise _unsupported(f"values of dtype {v.aval.dtype} ({fn.name})")
        params.append(f"const {_memory_type(v.aval.dtype)}* __restrict__ in{k}")
        if not v.aval.shape:
            scalars.append(k)
        env[v.name] = _View(k, v.aval.dtype, v.aval.shape, 0, contiguous_strides(v.aval.shape))
    return params, scalars, env


def coordinate_lines(shape, body):
    """The lines computing the coordinates c0, c1, ... of flat index `i` in `shape`, when a
    line of `body` reads one (a view's load), else none."""
    if len(shape) < 2 or not any(re.search(r"\bc\d+\b", line) for line in body):
        return []
    lines = ["long long r = i;"]
    for d in reversed(range(len(shape))):
        lines.append(f"const long long c{d} = r % {shape[d]}; r /= {shape[d]};")
    return lines


_LOADS = object()   # env's key of the locals already loaded, by view


def _value(env, name, body, shape):
    """The C expression of SSA value `name`: an input read through its view is loaded into a
    local here, once (the kernel's coordinates c0, c1, ... index it)."""
    value = env[name]
    if not isinstance(value, _View):
        return value
    if value.shape and value.shape != shape:
        if not same_space(value.shape, shape):
            raise _unsupported(f"an operand of shape {value.shape} in a kernel over {shape}")
        sizes = [(d, s) for d, s in zip(value.shape, value.strides) if d != 1]
        strides = [sizes.pop(0)[1] if d != 1 else 0 for d in shape]
        value = value._replace(shape=tuple(shape), strides=tuple(strides))
    if not value.shape:   # (an element of a view: a rank-0 input, or a slice's squeeze)
        index = str(value.offset)
    elif value.strides == contiguous_strides(shape) and not value.offset:
        index = "i"
    elif len(shape) == 1:
        index = f"{value.offset} + i * {value.strides[0]}"
    else:
        index = " + ".join([str(value.offset)] + [f"c{d} * {s}" for d, s in
                                                  enumerate(value.strides) if s])
    loads = env.setdefault(_LOADS, {})   # each element read once per view
    if value in loads:
        return loads[value]
    load = f"in{value.k}[{index}]"
    if np.dtype(value.dtype).kind == "b":
        load = f"({load} != 0)"
    loads[value] = local = _identifier(name)
    body.append(f"const {ctype(value.dtype)} {local} = {load};")
    return local


def same_space(a, b):
    """Whether shapes `a` and `b` differ only in axes of size 1: their elements are in the same
    order, so a kernel's flat index `i` addresses both."""
    return [d for d in a if d != 1] == [d for d in b if d != 1]


def _emit(eqns, env, body, shape, skip=(), keeps=None):
    """Append a local per equation to `body` (`env`: SSA name -> C expression). A `fusion`
    (the LLVM pipeline's group) is its region inline: its operands bound to its inputs' names,
    its results to the region's. `skip`: equations left out (a reduction kernel's own).
    `keeps(eqn)`: whether a view of a computed value is that value again at the kernel's index
    (reduce.py: a row's value broadcast along its columns); other such views are refused."""
    for eqn in eqns:
        if any(eqn is s for s in skip):
            continue
        if eqn.prim.name == "fusion":
            (region,) = eqn.regions()
            for inner, x in zip(region.invars, eqn.invars):
                env[inner.name] = _literal(x) if isinstance(x, Literal) else env[x.name]
            _emit(region.eqns, env, body, shape, skip, keeps)
            for outer, result in zip(eqn.outvars, region.outvars):
                if isinstance(result, Literal):
                    env[outer.name] = _literal(result)
                elif result.name in env:   # (not the skipped reduction's result)
                    env[outer.name] = env[result.name]
            continue
        view = VIEWS.get(eqn.prim.name)
        operand = env.get(eqn.invars[0].name) if eqn.invars and \
            not isinstance(eqn.invars[0], Literal) else None
        if view is not None and isinstance(operand, _View):
            moved = view(operand, **eqn.params)
            if moved is not None:
                env[eqn.outvars[0].name] = moved
                continue
        if view is not None and isinstance(operand, str) and keeps is not None and keeps(eqn):
            env[eqn.outvars[0].name] = operand
            continue
        out = eqn.outvars[0]
        generate = GENERATED.get(eqn.prim.name)
        if generate is not None and out.aval.shape == shape and ctype(out.aval.dtype):
            env[out.name] = local = _identifier(out.name)
            body.append(f"const {ctype(out.aval.dtype)} {local} = "
                        f"{generate(**eqn.params)};")
            continue
        rule = CUDA_SCALAR.get(eqn.prim)
        if rule is None or eqn.regions():
            raise _unsupported(f"the primitive {eqn.prim.name!r}", eqn.info)
        for v in eqn.outvars + [x for x in eqn.invars if not isinstance(x, Literal)]:
            if ctype(v.aval.dtype) is None:
                raise _unsupported(f"{eqn.prim.name} on {v.aval.dtype}", eqn.info)
            if v.aval.shape and not same_space(v.aval.shape, shape):
                raise _unsupported(f"{eqn.prim.name} on operands of shape {v.aval.shape} "
                                   f"in a kernel over {shape}", eqn.info)
        args = [_literal(x) if isinstance(x, Literal) else _value(env, x.name, body, shape)
                for x in eqn.invars]
        expression = rule(args, [x.aval for x in eqn.invars], out.aval, **eqn.params)
        env[out.name] = local = _identifier(out.name)
        body.append(f"const {ctype(out.aval.dtype)} {local} = {expression};")


def launch_shape(n, multiprocessors=132, block=BLOCK):
    """(blocks, threads per block) for `n` elements: enough blocks to fill the device's
    multiprocessors several times over, no more than the elements need."""
    blocks = max(1, min(-(-n // block), multiprocessors * 8))
    return blocks, block


def _block_per_row(rows, multiprocessors):
    from .reduce import REDUCE_BLOCK
    return max(1, min(rows, multiprocessors * 8)), REDUCE_BLOCK


# Kernel.launch -> (how its grid is sized, grid(sizes[0], multiprocessors) -> (blocks,
# threads)); every kernel loops over its work, so any grid is correct, these are the fast ones
LAUNCH_RULES = {
    "grid": ("grid-stride loop over sizes[0] elements: 256 threads a block, "
             "min(ceil(n / 256), 8 x multiprocessors) blocks, at least 1", launch_shape),
    "thread_per_row": ("a thread per result, grid-stride over sizes[0] rows: 256 threads a "
                       "block, min(ceil(rows / 256), 8 x multiprocessors) blocks, at least 1",
                       launch_shape),
    "block_per_row": ("a block per result, grid-stride over sizes[0] rows: 256 threads a block "
                      "(a multiple of 32: warp shuffles), min(rows, 8 x multiprocessors) "
                      "blocks, at least 1", _block_per_row),
    "thread_per_part": ("a thread per piece of a split row, grid-stride over sizes[0] pieces, "
                        "as thread_per_row", launch_shape),
    "block_per_part": ("a block per piece of a split row, grid-stride over sizes[0] pieces, "
                       "as block_per_row", _block_per_row),
}


def grid(kernel, multiprocessors=132):
    """(blocks, threads per block) to launch `kernel` with (LAUNCH_RULES)."""
    return LAUNCH_RULES[kernel.launch][1](kernel.sizes[0], multiprocessors)
