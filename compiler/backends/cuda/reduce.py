"""Reduction kernels: a function whose one result is a reduce_sum/max/min over the trailing
axes of a value computed elementwise (inputs read through views, as in source.py; groups the
LLVM pipeline fused are inline), e.g. `jnp.sum(x * x, axis=-1)`.

The operand is seen as `rows` x `cols` (cols: the reduced trailing axes). One block per row
(a grid-stride loop over rows), each thread accumulating every blockDim-th element of the row in
a register, the elementwise prologue computed per element; then the block combines:

    for (d = 16; d > 0; d /= 2) acc = combine(acc, __shfl_down_sync(FULL, acc, d));  // warp
    lane 0 of each warp -> partial[warp]; __syncthreads();
    acc = lane < warps ? partial[lane] : identity;   // every warp, so all threads shuffle
    for (d = 16; ...) acc = combine(acc, __shfl_down_sync(FULL, acc, d));
    thread 0 writes the row's result; __syncthreads() before the next row reuses `partial`.

Blocks have a multiple of 32 threads (`REDUCE_BLOCK`). The combine is the primitive's
CUDA_SCALAR rule (add; max/min with XLA's NaN and signed-zero order), the identity the
reduction's (0, -inf/+inf or the integer type's limits). Sums accumulate in the result's type
in this order (threads' strided partial sums, then a tree), so float results differ from the
reference's (pairwise) order by rounding, within a few ulps times the row length's log.
"""
import numpy as np

from ...ir.ssa import Literal
from ...primitives import PRIMITIVES
from ...primitives.core import CUDA_SCALAR
from .scalar import ctype, int_constant
from . import source as S

REDUCE_BLOCK = 256
_COMBINE = {"reduce_sum": "add", "reduce_max": "max", "reduce_min": "min"}


def final_reduction(fn):
    """The reduce equation producing `fn`'s one result (maybe inside a final fusion), when
    it reduces trailing axes of an operand of a dtype kiln's reductions here handle; else
    None."""
    if len(fn.outvars) != 1 or isinstance(fn.outvars[0], Literal) or not fn.eqns:
        return None
    eqn, result = fn.eqns[-1], fn.outvars[0]
    while eqn.prim.name == "fusion":
        region = eqn.regions()[0]
        if not region.eqns or result not in eqn.outvars:
            return None
        result = region.outvars[eqn.outvars.index(result)]
        eqn = region.eqns[-1]
    if eqn.prim.name not in _COMBINE or eqn.outvars[0] is not result:
        return None
    operand = eqn.invars[0]
    axes, rank = tuple(sorted(eqn.params["axes"])), len(operand.aval.shape)
    if not axes or axes != tuple(range(rank - len(axes), rank)):
        return None
    if np.dtype(operand.aval.dtype).kind not in "iuf":
        return None
    return eqn


def _identity(name, dtype):
    dtype = np.dtype(dtype)
    if name == "reduce_sum":
        return int_constant(dtype, 0) if dtype.kind in "iu" else f"(({ctype(dtype)})0)"
    if dtype.kind == "f":
        inf = "(1.0f / 0.0f)" if dtype == np.float32 else "(1.0 / 0.0)"
        return f"(-{inf})" if name == "reduce_max" else inf
    info = np.iinfo(dtype)
    return int_constant(dtype, info.min if name == "reduce_max" else info.max)


def reduction_source(fn, reduce):
    """The Kernel of `fn`, whose result is `reduce` (final_reduction's) of its operand."""
    operand, out = reduce.invars[0], fn.outvars[0]
    shape, dtype = tuple(operand.aval.shape), np.dtype(out.aval.dtype)
    params, scalars, env = S.inputs(fn)
    body = []
    S._emit(fn.eqns, env, body, shape, skip=reduce)
    value = S._value(env, operand.name, body, shape)
    acc_type = ctype(dtype)
    combine = CUDA_SCALAR[PRIMITIVES[_COMBINE[reduce.prim.name]]]
    avals = [out.aval, out.aval]
    step = combine(["acc", "value_"], avals, out.aval)
    # the shuffle once per step, into a local: every lane calls it the same number of times
    # (the combine may read its operand several times, behind conditions)
    merged = combine(["acc", "other_"], avals, out.aval)
    shuffled = (f"{{ const {ctype(dtype)} other_ = __shfl_down_sync(0xffffffffu, acc, d); "
                f"acc = {merged}; }}")
    identity = _identity(reduce.prim.name, dtype)
    coordinates = S.coordinate_lines(shape, body)
    name = f"kiln_{S._identifier(fn.name)[2:]}"
    params += [f"{S._memory_type(dtype)}* __restrict__ out0", "long long rows", "long long cols"]
    inner = [f"            {line}" for line in coordinates + body]
    lines = [
        f'extern "C" __global__ void {name}({", ".join(params)})', "{",
        f"    __shared__ {acc_type} partial[32];",
        "    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;",
        "    const unsigned warps = (blockDim.x + 31) / 32;",
        "    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {",
        f"        {acc_type} acc = {identity};",
        "        for (long long j = threadIdx.x; j < cols; j += blockDim.x) {",
        "            const long long i = row * cols + j;",
        *inner,
        f"            const {acc_type} value_ = ({acc_type})({value});",
        f"            acc = {step};",
        "        }",
        f"        for (int d = 16; d > 0; d /= 2) {shuffled}",
        "        if (lane == 0) partial[warp] = acc;",
        "        __syncthreads();",
        f"        acc = lane < warps ? partial[lane] : {identity};",
        f"        for (int d = 16; d > 0; d /= 2) {shuffled}",
        "        if (threadIdx.x == 0) out0[row] = acc;",
        "        __syncthreads();",
        "    }", "}", ""]
    return S.Kernel(name, "\n".join(lines), tuple(v.aval.dtype for v in fn.invars),
                    (out.aval.dtype,), tuple(scalars), extents=2)


def extents(reduce):
    """(rows, cols) of a reduction kernel's launch."""
    shape, k = reduce.invars[0].aval.shape, len(reduce.params["axes"])
    return int(np.prod(shape[:len(shape) - k], dtype=np.int64)), \
        int(np.prod(shape[len(shape) - k:], dtype=np.int64))
