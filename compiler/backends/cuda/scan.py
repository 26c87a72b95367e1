"""CUDA kernels of the cumulative primitives: cumsum, cumprod, cummax, cummin and
cumlogsumexp (an inclusive scan along one axis, maybe from the end).

`KERNELS[name](fn)` is the Kernel of `fn`, a function of one such equation (program.py's
`_single`). The operand is seen as lines along the scanned axis: line t (outer o, inner k:
t = o * inner + k) holds the elements o * n * inner + j * inner + k for j = 0 .. n - 1, and a
thread per line walks it in order (from the end when `reverse`), writing each running value:

    acc = x[first]; out[first] = acc; for the next j: acc = combine(acc, x[at]); out[at] = acc

Neighbouring threads own neighbouring lines, so a scan along any axis but the last reads
coalesced. The combines are the reference's (compiler/primitives/reductions.py): a float16 or
float32 cumsum carries its running sum in double and rounds each output once (the reference's
wide carry), so the two agree to the last bit but for summation order; max/min are the
`CUDA_SCALAR` rules (XLA's NaN and signed-zero order); cumlogsumexp is log(exp(a) + exp(b)) as NumPy's logaddexp computes it (NaN in,
NaN out; -inf and +inf kept).

One line per thread suits many lines. Few long lines (fewer than `BLOCK_LINES`, each at least
`BLOCK_LENGTH` long) take a block per line instead (launch rule block_per_row), a prefix scan
in three phases: each thread combines its own contiguous chunk of the line, thread 0 scans
the chunks' totals in shared memory (exclusive: the total of the chunks before each one),
and each thread walks its chunk again from that prefix, writing the running values. Values
are combined in line order, but float sums are grouped by chunk, so they may differ from the
reference's by rounding.
"""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import CUDA_SCALAR
from .scalar import ctype
from . import source as S

# the carry of a float16/float32 sum (a cumsum here, a window sum in windows.py)
WIDE_SUM = {np.dtype(np.float16): "double", np.dtype(np.float32): "double"}
BLOCK_LINES, BLOCK_LENGTH = 2048, 1024   # a block per line below / above these (docstring)
_MAX_BLOCK = 1024                        # CUDA's threads per block: the shared arrays' size
_RULE = {"cumsum": "add", "cumprod": "mul", "cummax": "max", "cummin": "min"}


def _combine(name, aval, carry_type):
    """A function (acc, value) -> the C expression combining them, both of `carry_type`."""
    if name == "cumlogsumexp":
        f = "f" if aval.dtype == np.float32 else ""
        return lambda acc, v: (
            f"(({acc}) != ({acc}) || ({v}) != ({v}) ? ({acc}) + ({v}) : "
            f"fmax{f}({acc}, {v}) == fmin{f}({acc}, {v}) && isinf({acc}) ? ({acc}) : "
            f"fmax{f}({acc}, {v}) + log1p{f}(exp{f}(fmin{f}({acc}, {v}) - fmax{f}({acc}, {v}))))")
    if carry_type != ctype(aval.dtype):   # the wide running sum
        return lambda acc, v: f"({acc} + {v})"
    rule = CUDA_SCALAR[PRIMITIVES[_RULE[name]]]
    return lambda acc, v: rule([acc, v], [aval, aval], aval)


def _cumulative(fn):
    eqn = fn.eqns[0]
    name, (x,), out = eqn.prim.name, eqn.invars, eqn.outvars[0]
    axis, reverse = eqn.params["axis"], eqn.params.get("reverse", False)
    aval, shape = x.aval, x.aval.shape
    element = ctype(aval.dtype)
    if element is None:
        raise S._unsupported(f"{name} of {aval.dtype}", eqn.info)
    n = shape[axis]
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    lines = int(np.prod(shape, dtype=np.int64)) // n if n else 0
    carry = WIDE_SUM.get(aval.dtype, element) if name == "cumsum" else element
    combine = _combine(name, aval, carry)
    mem = S._memory_type(out.aval.dtype)
    kernel = f"kiln_{S._identifier(fn.name)[2:]}"
    step = f"({n - 1}LL - j)" if reverse else "j"
    head = f"const long long base = (t / {inner}LL) * {n * inner}LL + t % {inner}LL;"
    load = [f"const long long at = base + {step} * {inner}LL;",
            f"const {carry} v = ({carry})in0[at];"]
    signature = (f'extern "C" __global__ void {kernel}(const {S._memory_type(aval.dtype)}* '
                 f'__restrict__ in0, {mem}* __restrict__ out0, long long lines)')
    if lines < BLOCK_LINES and n >= BLOCK_LENGTH:
        text, launch = _block_per_line(signature, n, carry, combine, head, load, element, mem)
    else:
        body = [head, f"{carry} acc = 0;", f"for (long long j = 0; j < {n}LL; ++j) {{"]
        body += [f"    {line}" for line in load] + [
            f"    acc = j == 0 ? v : {combine('acc', 'v')};",
            f"    out0[at] = ({mem})(({element})acc);", "}"]
        text = [signature, "{",
                "    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; "
                "t < lines;", "         t += (long long)blockDim.x * gridDim.x) {"]
        text += [f"        {line}" for line in body] + ["    }", "}", ""]
        launch = "grid"
    return S.Kernel(kernel, "\n".join(text), (aval.dtype,), (out.aval.dtype,),
                    () if shape else (0,), sizes=(lines,), out_shapes=(out.aval.shape,),
                    launch=launch, info=S.origin(fn))


def _block_per_line(signature, n, carry, combine, head, load, element, mem):
    """The text of the block-per-line form (module docstring) and its launch rule."""
    def walk(first, write):
        return ["for (long long j = lo; j < hi; ++j) {"] + [f"    {x}" for x in load] + [
            f"    acc = {first} ? v : {combine('acc', 'v')};", f"    {first} = false;"] + \
            ([f"    out0[at] = ({mem})(({element})acc);"] if write else []) + ["}"]
    body = [head,
            f"const long long chunk = ({n}LL + blockDim.x - 1) / blockDim.x;",
            "const long long lo = threadIdx.x * chunk;",
            f"const long long hi = lo + chunk < {n}LL ? lo + chunk : {n}LL;",
            f"{carry} acc = 0;", "bool empty = true;"]
    body += walk("empty", False)
    body += ["total[threadIdx.x] = acc;", "some[threadIdx.x] = !empty;", "__syncthreads();",
             "if (threadIdx.x == 0) {",
             f"    {carry} run = 0;", "    bool none = true;",
             "    for (unsigned k = 0; k < blockDim.x; ++k) {",
             f"        const {carry} mine = total[k];", "        const bool has = some[k];",
             "        total[k] = run;", "        some[k] = !none;",
             f"        if (has) {{ run = none ? mine : {combine('run', 'mine')}; none = false; }}",
             "    }", "}", "__syncthreads();",
             "acc = total[threadIdx.x];", "bool start = !some[threadIdx.x];"]
    body += walk("start", True) + ["__syncthreads();"]
    text = [signature, "{",
            f"    __shared__ {carry} total[{_MAX_BLOCK}];",
            f"    __shared__ bool some[{_MAX_BLOCK}];",
            "    for (long long t = blockIdx.x; t < lines; t += gridDim.x) {"]
    text += [f"        {line}" for line in body] + ["    }", "}", ""]
    return text, "block_per_row"


KERNELS = {name: _cumulative for name in ("cumsum", "cumprod", "cummax", "cummin",
                                          "cumlogsumexp")}
