"""CUDA kernels of the cumulative primitives: cumsum, cumprod, cummax, cummin and
cumlogsumexp (an inclusive scan along one axis, maybe from the end).

`KERNELS[name](fn)` is the Kernel of `fn`, a function of one such equation (program.py's
`_single`), and `passes(fn)` the kernels that scan it: that one, or the split form below for
few very long lines. The operand is seen as lines along the scanned axis: line t (outer o,
inner k: t = o * inner + k) holds the elements o * n * inner + j * inner + k for
j = 0 .. n - 1, and a thread per line walks it in order (from the end when `reverse`),
writing each running value:

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

**Lines over several blocks** (`passes`): a line of at least `SPLIT_LENGTH` elements, when
the lines are too few to fill the device, is cut into `chunks` contiguous pieces of scan
order (at least `SPLIT_CHUNK` elements each, up to `SPLIT_TASKS` pieces in all), and scanned
in three passes, each a kernel with a thread per piece (task = chunk * lines + line, so
neighbouring threads own neighbouring lines, as in the thread form):

    totals:  T[task] = the combine of the piece's elements, in order (the carry's type)
    prefix:  P = the inclusive scan of T along the chunks: the same primitive on a
             (chunks, lines) array of the carry's type, forward; `passes` again, so a long
             scan of totals is itself split
    carry:   each piece walks its elements from P[task - lines] (nothing for chunk 0),
             writing the running values

The pieces' totals and prefixes keep the carry's type (double for a float32 cumsum), so only
the outputs are rounded. Nothing is shared between threads: each pass's results depend on
the grid neither in value nor in order (deterministic, and the host emulation checks them
exactly as the device runs them), and the prefixes pass between kernels through program
values of their own (named `<result>#totals`, `<result>#prefix`). Float sums are grouped by
piece, so they may differ from the reference's by rounding. The price of three passes is
reading the operand twice; a single pass (decoupled look-back) would read it once.
"""
from typing import NamedTuple

import numpy as np

from ...ir.abstract import ShapedArray
from ...ir.ssa import Var
from ...primitives import PRIMITIVES
from ...primitives.core import CUDA_SCALAR
from .scalar import ctype
from . import source as S

# the carry of a float16/float32 sum (a cumsum here, a window sum in windows.py)
WIDE_SUM = {np.dtype(np.float16): "double", np.dtype(np.float32): "double"}
BLOCK_LINES, BLOCK_LENGTH = 2048, 1024   # a block per line below / above these (docstring)
SPLIT_LENGTH, SPLIT_CHUNK, SPLIT_TASKS = 1 << 15, 64, 1024 * 256   # split lines (docstring)
_MAX_BLOCK = 1024                        # CUDA's threads per block: the shared arrays' size
_RULE = {"cumsum": "add", "cumprod": "mul", "cummax": "max", "cummin": "min"}
_CARRY_DTYPE = {"double": np.dtype(np.float64)}


class _Lines(NamedTuple):
    """A cumulative scan: `op` over `lines` lines of `n` elements `inner` apart, from the end
    when `reverse`, reading `dtype` and writing `out_dtype`; `name`: its kernels' stem."""
    op: str
    dtype: np.dtype
    out_dtype: np.dtype
    n: int
    inner: int
    lines: int
    reverse: bool
    name: str
    info: object

    @property
    def element(self):
        return ctype(self.dtype)

    @property
    def carry(self):
        return WIDE_SUM.get(self.dtype, self.element) if self.op == "cumsum" else self.element

    @property
    def carry_dtype(self):
        return _CARRY_DTYPE.get(self.carry, self.dtype)

    def combine(self):
        """A function (acc, value) -> the C expression combining them (the carry's type)."""
        if self.op == "cumlogsumexp":
            f = "f" if self.dtype == np.float32 else ""
            return lambda acc, v: (
                f"(({acc}) != ({acc}) || ({v}) != ({v}) ? ({acc}) + ({v}) : "
                f"fmax{f}({acc}, {v}) == fmin{f}({acc}, {v}) && isinf({acc}) ? ({acc}) : "
                f"fmax{f}({acc}, {v}) + log1p{f}(exp{f}(fmin{f}({acc}, {v}) - "
                f"fmax{f}({acc}, {v}))))")
        if self.carry != self.element:   # the wide running sum
            return lambda acc, v: f"({acc} + {v})"
        aval = ShapedArray((), self.dtype)
        rule = CUDA_SCALAR[PRIMITIVES[_RULE[self.op]]]
        return lambda acc, v: rule([acc, v], [aval, aval], aval)

    def load(self, pointer="in0"):
        """Lines loading element j of line `base` into `v` (the carry's type), at `at`."""
        step = f"({self.n - 1}LL - j)" if self.reverse else "j"
        return [f"const long long at = base + {step} * {self.inner}LL;",
                f"const {self.carry} v = ({self.carry}){pointer}[at];"]

    def head(self):
        return f"const long long base = (t / {self.inner}LL) * {self.n * self.inner}LL + " \
               f"t % {self.inner}LL;"

    def walk(self, first, write):
        """Lines combining elements lo .. hi - 1 into `acc` (`first`: a bool local, true
        while nothing is combined), writing each running value when `write`."""
        mem = S._memory_type(self.out_dtype)
        return ["for (long long j = lo; j < hi; ++j) {"] + [f"    {x}" for x in self.load()] + [
            f"    acc = {first} ? v : {self.combine()('acc', 'v')};", f"    {first} = false;"] + \
            ([f"    out0[at] = ({mem})(({ctype(self.out_dtype)})acc);"] if write else []) + ["}"]

    def kernel(self, text, launch, inputs, out_dtype, sizes, out_shape):
        return S.Kernel(self.name, "\n".join(text), inputs, (out_dtype,), (), sizes=sizes,
                        out_shapes=(out_shape,), launch=launch, info=self.info)


def _lines_of(fn):
    eqn = fn.eqns[0]
    (x,), out = eqn.invars, eqn.outvars[0]
    axis, shape = eqn.params["axis"], x.aval.shape
    if ctype(x.aval.dtype) is None:
        raise S._unsupported(f"{eqn.prim.name} of {x.aval.dtype}", eqn.info)
    n = shape[axis]
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    lines = int(np.prod(shape, dtype=np.int64)) // n if n else 0
    return _Lines(eqn.prim.name, x.aval.dtype, out.aval.dtype, n, inner, lines,
                  eqn.params.get("reverse", False), f"kiln_{S._identifier(fn.name)[2:]}",
                  S.origin(fn))


def _cumulative(fn):
    eqn = fn.eqns[0]
    return _whole(_lines_of(fn), eqn.outvars[0].aval.shape)


def _signature(s, *pointers):
    ins = [f"const {S._memory_type(d)}* __restrict__ in{k}" for k, d in enumerate(pointers)]
    return (f'extern "C" __global__ void {s.name}({", ".join(ins)}, '
            f'{S._memory_type(s.out_dtype)}* __restrict__ out0, long long tasks)')


_TASKS = ["    for (long long task = blockIdx.x * (long long)blockDim.x + threadIdx.x; "
          "task < tasks;", "         task += (long long)blockDim.x * gridDim.x) {"]


def _whole(s, out_shape):
    """The Kernel scanning each line with one thread, or one block (module docstring)."""
    if s.lines < BLOCK_LINES and s.n >= BLOCK_LENGTH:
        text, launch = _block_per_line(s)
    else:
        body = [s.head(), f"{s.carry} acc = 0;", "bool first = true;",
                "const long long lo = 0, hi = " f"{s.n}LL;"] + s.walk("first", True)
        text, launch = _tasks_text(s, ["const long long t = task;"] + body, s.dtype), "grid"
    return s.kernel(text, launch, (s.dtype,), s.out_dtype, (s.lines,), out_shape)


def _block_per_line(s):
    """The text of the block-per-line form (module docstring) and its launch rule."""
    n, carry, combine = s.n, s.carry, s.combine()
    body = [s.head(),
            f"const long long chunk = ({n}LL + blockDim.x - 1) / blockDim.x;",
            "const long long lo = threadIdx.x * chunk;",
            f"const long long hi = lo + chunk < {n}LL ? lo + chunk : {n}LL;",
            f"{carry} acc = 0;", "bool empty = true;"]
    body += s.walk("empty", False)
    body += ["total[threadIdx.x] = acc;", "some[threadIdx.x] = !empty;", "__syncthreads();",
             "if (threadIdx.x == 0) {",
             f"    {carry} run = 0;", "    bool none = true;",
             "    for (unsigned k = 0; k < blockDim.x; ++k) {",
             f"        const {carry} mine = total[k];", "        const bool has = some[k];",
             "        total[k] = run;", "        some[k] = !none;",
             f"        if (has) {{ run = none ? mine : {combine('run', 'mine')}; none = false; }}",
             "    }", "}", "__syncthreads();",
             "acc = total[threadIdx.x];", "bool start = !some[threadIdx.x];"]
    body += s.walk("start", True) + ["__syncthreads();"]
    text = [_signature(s, s.dtype), "{",
            f"    __shared__ {carry} total[{_MAX_BLOCK}];",
            f"    __shared__ bool some[{_MAX_BLOCK}];",
            "    for (long long t = blockIdx.x; t < tasks; t += gridDim.x) {"]
    text += [f"        {line}" for line in body] + ["    }", "}", ""]
    return text, "block_per_row"


def passes(fn):
    """[(Kernel, its input Vars, its output Vars)] scanning `fn` (one cumulative equation),
    in order: its one kernel, or the split form's passes (module docstring)."""
    eqn = fn.eqns[0]
    return _passes(_lines_of(fn), eqn.invars[0], eqn.outvars[0])


def _chunks(s):
    """How many pieces each line is cut into (module docstring); below 2: not split."""
    if s.n < SPLIT_LENGTH or not s.lines:
        return 1
    chunks = min(s.n // SPLIT_CHUNK, SPLIT_TASKS // s.lines)
    return -(-s.n // -(-s.n // chunks)) if chunks >= 2 else 1   # (no empty piece)


def _passes(s, x, out):
    chunks = _chunks(s)
    if chunks < 2:
        return [(_whole(s, out.aval.shape), (x,), (out,))]
    piece = -(-s.n // chunks)
    between = ShapedArray((chunks, s.lines), s.carry_dtype)
    totals, prefix = Var(f"{out.name}#totals", between), Var(f"{out.name}#prefix", between)
    of_totals = s._replace(dtype=s.carry_dtype, out_dtype=s.carry_dtype, n=chunks,
                           inner=s.lines, reverse=False, name=f"{s.name}_prefix")
    first = [f"const long long t = task % {s.lines}LL, c = task / {s.lines}LL;", s.head(),
             f"const long long lo = c * {piece}LL;",
             f"const long long hi = lo + {piece}LL < {s.n}LL ? lo + {piece}LL : {s.n}LL;"]
    mem = S._memory_type(s.carry_dtype)
    reduce = first + [f"{s.carry} acc = 0;", "bool first = true;"] + \
        s.walk("first", False) + [f"out0[task] = ({mem})acc;"]
    scan = first + [f"{s.carry} acc = c ? ({s.carry})in1[task - {s.lines}LL] : 0;",
                    "bool first = c == 0;"] + s.walk("first", True)
    sizes = (chunks * s.lines,)
    summed = s._replace(name=f"{s.name}_totals", out_dtype=s.carry_dtype)
    carried = s._replace(name=f"{s.name}_carry")
    return [(summed.kernel(_tasks_text(summed, reduce, s.dtype), "thread_per_part",
                           (s.dtype,), s.carry_dtype, sizes, between.shape), (x,), (totals,))] \
        + _passes(of_totals, totals, prefix) + \
        [(carried.kernel(_tasks_text(carried, scan, s.dtype, s.carry_dtype), "thread_per_part",
                         (s.dtype, s.carry_dtype), s.out_dtype, sizes, out.aval.shape),
          (x, prefix), (out,))]


def _tasks_text(s, body, *pointers):
    return [_signature(s, *pointers), "{"] + _TASKS + [f"        {line}" for line in body] + \
        ["    }", "}", ""]


KERNELS = {name: _cumulative for name in ("cumsum", "cumprod", "cummax", "cummin",
                                          "cumlogsumexp")}
