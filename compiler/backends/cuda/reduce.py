"""Reduction kernels: functions whose equations reduce one iteration space over one set of
axes (reduce_sum/prod/max/min/and/or/xor, argmax, argmin; several of them at once, e.g. a sum
and a sum of squares), with an elementwise prologue at the operand's shape (inputs read
through views, as in source.py; groups the LLVM pipeline fused are inline) and an elementwise
epilogue at the result's shape, e.g. `jnp.sum(x * x, axis=0) / n`.

The operand is seen as `rows` (the kept axes, in order) x `cols` (the reduced axes, in order);
element (row, j) has the operand coordinates c0, c1, ... that `row` and `j` decompose into.
Two forms (`plan`):
- **a block per row** when the innermost axis is reduced (rows of contiguous elements): each
  thread accumulates every blockDim-th element of the row in a register, then the block
  combines:

      for (d = 16; d > 0; d /= 2) acc = combine(acc, __shfl_down_sync(FULL, acc, d));  // warp
      lane 0 of each warp -> partial[warp]; __syncthreads();
      acc = lane < warps ? partial[lane] : identity;   // every warp, so all threads shuffle
      for (d = 16; ...) acc = combine(acc, __shfl_down_sync(FULL, acc, d));
      thread 0 runs the epilogue and writes the row's results; __syncthreads() before the next
      row reuses `partial`.

  Blocks have a multiple of 32 threads (`REDUCE_BLOCK`).
- **a thread per row** when the innermost axis is kept (a column reduction, e.g. a sum over
  axis 0): neighbouring threads own neighbouring results, so their loads are coalesced; each
  loops over its row's elements in order. A grid-stride loop over rows, as elementwise kernels.

**Few rows, long rows** (`Plan.parts` > 1): a block or thread per row would leave most of the
device idle (a full sum is one row), so each row is split into `parts` pieces, one block (or
thread) each, grid-stride over the rows x parts tasks. A piece's result goes to a scratch
buffer (`Kernel.scratch`: zero at launch); then `__threadfence()` and an `atomicAdd` on the
row's counter, and the piece that arrives last combines the row's pieces in order (reading
them `volatile`, past the L1 cache), runs the epilogue, writes the row's results and sets the
counter back to zero. One kernel, no second launch:

    block form: piece q of row r is columns q*blockDim + t, stepping parts*blockDim (thread t)
    thread form: task = q*rows + r (neighbouring threads own neighbouring rows: coalesced
                 reads of a column reduction), columns q, q + parts, ...

A row is split when that gives at least two pieces of at least `BLOCK_PIECE` columns (block
form) or `THREAD_PIECE` (thread form), up to `BLOCK_TASKS` blocks' or `THREAD_TASKS`
threads' worth of tasks in all (about 8 blocks of 256 threads on each of an H100's 132
multiprocessors).

The combine is the primitive's CUDA_SCALAR rule (add, mul; max/min with XLA's NaN and
signed-zero order; and/or/xor), the identity the reduction's (0, 1, -inf/+inf or the integer
type's limits). argmax/argmin carry (value, index) pairs: a NaN wins over any number, the first
NaN's index; equal values keep the smaller index (JAX's, NumPy's). Sums accumulate in the
result's type in this order (strided partial sums then a tree, or the row in order), so float
results differ from the reference's pairwise order by rounding, within a few ulps times the
row length's log. Results at the operand's shape (prologue values) are written where they are
computed, every element once.
"""
from typing import NamedTuple

import numpy as np

from ...ir.abstract import contiguous_strides
from ...ir.ssa import Literal
from ...primitives import PRIMITIVES
from ...primitives.core import CUDA_SCALAR
from .scalar import ctype, int_constant
from . import source as S

REDUCE_BLOCK = 256
BLOCK_PIECE, BLOCK_TASKS = 4 * REDUCE_BLOCK, 1024     # splitting rows (module docstring)
THREAD_PIECE, THREAD_TASKS = 64, 1024 * 256
_COMBINE = {"reduce_sum": "add", "reduce_prod": "mul", "reduce_max": "max", "reduce_min": "min",
            "reduce_and": "and", "reduce_or": "or", "reduce_xor": "xor"}
_ARG = {"argmax": ">", "argmin": "<"}
REDUCTIONS = frozenset(_COMBINE) | frozenset(_ARG)
_INDEX = "long long"   # the type of argmax/argmin's running index


class Plan(NamedTuple):
    reductions: tuple   # the reduce equations (maybe inside fusions), in order
    shape: tuple        # their operand's shape: the iteration space
    axes: tuple         # the reduced axes, sorted
    prologue: tuple     # the top-level equations computed per operand element
    epilogue: tuple     # the top-level equations computed per result (reading reductions)
    by_block: bool      # a block per row (innermost axis reduced), else a thread per row
    parts: int = 1      # pieces each row is split into (module docstring), 1: not split

    @property
    def out_shape(self):
        return tuple(d for k, d in enumerate(self.shape) if k not in self.axes)

    @property
    def rows(self):
        return int(np.prod(self.out_shape, dtype=np.int64))

    @property
    def cols(self):
        return int(np.prod([self.shape[a] for a in self.axes], dtype=np.int64))


def _reductions(eqns):
    for eqn in eqns:
        if eqn.prim.name == "fusion":
            yield from _reductions(eqn.regions()[0].eqns)
        elif eqn.prim.name in REDUCTIONS:
            yield eqn


def _outer_results(eqn, found):
    """The names `eqn` (top level) gives the results of reductions in `found`."""
    if eqn.prim.name != "fusion":
        return {v.name for v in eqn.outvars} if eqn in found else set()
    region = eqn.regions()[0]
    inner = set()
    for member in region.eqns:
        inner |= _outer_results(member, found)
    return {outer.name for outer, r in zip(eqn.outvars, region.outvars)
            if not isinstance(r, Literal) and r.name in inner}


def plan(fn):
    """The Plan of `fn`'s reduction kernel, or None when `fn` reduces nothing. A function with
    reductions over different shapes or axes, or a reduction of a reduction's result, is a
    BackendUnsupportedError."""
    found = list(_reductions(fn.eqns))
    if not found:
        return None
    shapes = {(tuple(r.invars[0].aval.shape), tuple(sorted(r.params["axes"]))) for r in found}
    if len(shapes) > 1:
        raise S._unsupported(f"reductions over different shapes or axes {sorted(shapes)} in "
                             f"one kernel ({fn.name})", found[-1].info)
    ((shape, axes),) = shapes
    for r in found:
        if ctype(r.invars[0].aval.dtype) is None:
            raise S._unsupported(f"{r.prim.name} of {r.invars[0].aval.dtype}", r.info)
    out_shape = tuple(d for k, d in enumerate(shape) if k not in axes)
    tainted, prologue, epilogue = set(), [], []
    for eqn in fn.eqns:
        reads = {v.name for v in eqn.invars if not isinstance(v, Literal)}
        results = _outer_results(eqn, found)
        if results and reads & tainted:
            raise S._unsupported(f"a reduction of a reduction's result ({fn.name}: two "
                                 f"kernels)", eqn.info)
        at_result = eqn.prim.name not in S.VIEWS and not results and \
            all(v.aval.shape == out_shape for v in eqn.outvars)
        if reads & tainted or at_result:
            epilogue.append(eqn)
            tainted |= {v.name for v in eqn.outvars}
        else:
            prologue.append(eqn)
            tainted |= results
    p = Plan(tuple(found), shape, axes, tuple(prologue), tuple(epilogue),
             len(shape) - 1 in axes)
    piece, tasks = (BLOCK_PIECE, BLOCK_TASKS) if p.by_block else (THREAD_PIECE, THREAD_TASKS)
    parts = min(p.cols // piece, tasks // max(p.rows, 1))
    return p._replace(parts=parts) if parts >= 2 and p.rows else p


def _identity(name, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "true" if name in ("reduce_and", "reduce_min", "argmin") else "false"
    if name == "reduce_sum" or name in ("reduce_or", "reduce_xor"):
        return int_constant(dtype, 0) if dtype.kind in "iu" else f"(({ctype(dtype)})0)"
    if name == "reduce_prod":
        return int_constant(dtype, 1) if dtype.kind in "iu" else f"(({ctype(dtype)})1)"
    if name == "reduce_and":
        return int_constant(dtype, -1 if dtype.kind == "i" else np.iinfo(dtype).max)
    largest = name in ("reduce_max", "argmax")
    if dtype.kind == "f":
        inf = "(1.0f / 0.0f)" if dtype == np.float32 else "(1.0 / 0.0)"
        return f"(-{inf})" if largest else inf
    info = np.iinfo(dtype)
    return int_constant(dtype, info.min if largest else info.max)


class _Accumulator(NamedTuple):
    """One reduction's registers: `acc{k}` (and `idx{k}` for argmax/argmin)."""
    k: int
    eqn: object

    @property
    def dtype(self):
        return np.dtype(self.eqn.invars[0].aval.dtype)

    @property
    def arg(self):
        return self.eqn.prim.name in _ARG

    def registers(self):
        """[(C type, name, identity)]"""
        regs = [(ctype(self.dtype), f"acc{self.k}", _identity(self.eqn.prim.name, self.dtype))]
        if self.arg:
            regs.append((_INDEX, f"idx{self.k}", "0x7fffffffffffffffLL"))
        return regs

    def result(self):
        """The C expression of the reduction's result, once combined."""
        if self.arg:
            return f"(({ctype(self.eqn.outvars[0].aval.dtype)})idx{self.k})"
        return f"acc{self.k}"

    def combine(self, value, index):
        """A statement combining (value, index) (locals) into the registers."""
        k = self.k
        if not self.arg:
            aval = self.eqn.outvars[0].aval
            rule = CUDA_SCALAR[PRIMITIVES[_COMBINE[self.eqn.prim.name]]]
            return f"acc{k} = {rule([f'acc{k}', value], [aval, aval], aval)};"
        better = f"({value}) {_ARG[self.eqn.prim.name]} acc{k}"
        tie = f"(({value}) == acc{k} && {index} < idx{k})"
        if self.dtype.kind == "f":   # NaN wins, the first NaN's index
            nan, seen = f"({value}) != ({value})", f"acc{k} != acc{k}"
            take = f"({nan} ? (!({seen}) || {index} < idx{k}) : !({seen}) && ({better} || {tie}))"
        else:
            take = f"({better} || {tie})"
        return f"if ({take}) {{ acc{k} = {value}; idx{k} = {index}; }}"

    def store(self, slot):
        """Lines writing the registers to the scratch buffers at `slot` (a split row's piece)."""
        return [f"scratch_{n}[{slot}] = {n};" for _, n, _ in self.registers()]

    def combine_stored(self, slot):
        """Lines combining the piece stored at `slot` into the registers (read volatile: other
        blocks wrote it)."""
        loads = [f"const {t} {n}_piece = ((volatile {t} *)scratch_{n})[{slot}];"
                 for t, n, _ in self.registers()]
        return loads + [self.combine(f"acc{self.k}_piece", f"idx{self.k}_piece")]

    def shuffle(self):
        """Lines combining the warp's registers into lane 0's (every lane shuffles alike)."""
        regs = self.registers()
        got = " ".join(f"const {t} {n}_other = __shfl_down_sync(0xffffffffu, {n}, d);"
                       for t, n, _ in regs)
        step = self.combine(f"acc{self.k}_other", f"idx{self.k}_other")
        return [f"for (int d = 16; d > 0; d /= 2) {{ {got} {step} }}"]


def _coordinates(shape, axes):
    """(lines defining flat operand index `i` of element (row, j), whether the axes are
    trailing): trailing axes give `i` directly (coordinate_lines adds c0, c1, ... when a view
    needs them), others the coordinates c0, c1, ... first."""
    kept = [d for d in range(len(shape)) if d not in axes]
    if list(axes) == list(range(len(shape) - len(axes), len(shape))):
        cols = int(np.prod([shape[a] for a in axes], dtype=np.int64))
        return [f"const long long i = row * {cols}LL + j;"], True
    lines = []
    for index, dims in (("row", kept), ("j", axes)):
        lines.append(f"long long r_{index} = {index};")
        for d in reversed(dims):   # (a 0-sized axis: no element, the loops never run)
            size = max(shape[d], 1)
            lines.append(f"const long long c{d} = r_{index} % {size}; r_{index} /= {size};")
    strides = contiguous_strides(shape)
    terms = [f"c{d} * {strides[d]}LL" for d in range(len(shape))] or ["0"]
    lines.append(f"const long long i = {' + '.join(terms)};")
    return lines, False


def reduction_source(fn, p):
    """The Kernel of `fn`, whose reductions `p` (plan's) describes."""
    params, scalars, env = S.inputs(fn)
    accs = [_Accumulator(k, r) for k, r in enumerate(p.reductions)]
    for a in accs:
        env[a.eqn.outvars[0].name] = a.result()
    body = []
    S._emit(p.prologue, env, body, p.shape, skip=p.reductions)
    values = []
    for a in accs:
        x = a.eqn.invars[0]
        operand = S._literal(x) if isinstance(x, Literal) else S._value(env, x.name, body,
                                                                        p.shape)
        values.append(f"value{a.k}_")
        body.append(f"const {ctype(a.dtype)} value{a.k}_ = ({ctype(a.dtype)})({operand});")
    index = "j"   # argmax/argmin reduce one axis: its coordinate is j
    steps = [a.combine(f"value{a.k}_", index) for a in accs]
    epilogue_body, outs, early, late = [], [], [], []
    epilogue_env = dict(env)
    epilogue_env[S._LOADS] = {}   # (a new scope: the prologue's loads are not visible)
    S._emit(p.epilogue, epilogue_env, epilogue_body, p.out_shape)
    for k, v in enumerate(fn.outvars):
        mem = S._memory_type(v.aval.dtype)
        params.append(f"{mem}* __restrict__ out{k}")
        outs.append(v.aval)
        if v.aval.shape not in (p.shape, p.out_shape):
            raise S._unsupported(f"a result of shape {v.aval.shape} beside reductions of "
                                 f"{p.shape} to {p.out_shape} ({fn.name})")
        if isinstance(v, Literal):
            late.append(f"out{k}[row] = ({mem})({S._literal(v)});")
        elif v.aval.shape == p.shape:
            early.append(f"out{k}[i] = ({mem})({S._value(env, v.name, body, p.shape)});")
        else:
            value = S._value(epilogue_env, v.name, epilogue_body, p.out_shape)
            late.append(f"out{k}[row] = ({mem})({value});")
    index_lines, trailing = _coordinates(p.shape, p.axes)
    inner = index_lines + (S.coordinate_lines(p.shape, body) if trailing else []) + body + \
        steps + early
    final = ["const long long i = row;"] + S.coordinate_lines(p.out_shape, epilogue_body) + \
        epilogue_body + late
    init = [f"{t} {n} = {identity};" for a in accs for t, n, identity in a.registers()]
    name = f"kiln_{S._identifier(fn.name)[2:]}"
    scratch = []
    if p.parts > 1:
        tasks = p.rows * p.parts
        for a in accs:
            for t, n, _ in a.registers():
                params.append(f"{t}* __restrict__ scratch_{n}")
                scratch.append((np.dtype(np.int64) if n.startswith("idx") else a.dtype, tasks))
        params.append("unsigned int* __restrict__ counters")
        scratch.append((np.dtype(np.uint32), p.rows))
        params.append("long long tasks")
    params += ["long long rows", "long long cols"]
    form = _FORMS[(p.by_block, p.parts > 1)]
    body = form(accs, init, inner, final, p.parts)
    lines = [f'extern "C" __global__ void {name}({", ".join(params)})', "{"] + \
        [f"    {line}" for line in body] + ["}", ""]
    launch = ("block" if p.by_block else "thread") + ("_per_part" if p.parts > 1 else "_per_row")
    sizes = ((p.rows * p.parts,) if p.parts > 1 else ()) + (p.rows, p.cols)
    return S.Kernel(name, "\n".join(lines), tuple(v.aval.dtype for v in fn.invars),
                    tuple(a.dtype for a in outs), tuple(scalars), extents=len(sizes),
                    sizes=sizes, out_shapes=tuple(a.shape for a in outs), launch=launch,
                    info=S.origin(fn), scratch=tuple(scratch))


def _nested(lines, depth=1):
    return [f"{'    ' * depth}{line}" for line in lines]


def _block_combine(accs):
    """The block's registers combined into thread 0's: warps, then the warps' partials."""
    combine = [line for a in accs for line in a.shuffle()]
    lines = list(combine) + ["if (lane == 0) {"]
    lines += [f"    partial_{n}[warp] = {n};" for a in accs for _, n, _ in a.registers()]
    lines += ["}", "__syncthreads();"]
    lines += [f"{n} = lane < warps ? partial_{n}[lane] : {identity};"
              for a in accs for _, n, identity in a.registers()]
    return lines + combine


def _block_prelude(accs):
    return [f"__shared__ {t} partial_{n}[32];" for a in accs for t, n, _ in a.registers()] + \
        ["const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;",
         "const unsigned warps = (blockDim.x + 31) / 32;"]


def _block_per_row(accs, init, inner, final, parts):
    lines = _block_prelude(accs)
    lines += ["for (long long row = blockIdx.x; row < rows; row += gridDim.x) {"]
    loop = init + ["for (long long j = threadIdx.x; j < cols; j += blockDim.x) {"] + \
        _nested(inner) + ["}"] + _block_combine(accs)
    loop += ["if (threadIdx.x == 0) {"] + _nested(final) + ["}", "__syncthreads();"]
    return lines + _nested(loop) + ["}"]


def _block_per_part(accs, init, inner, final, parts):
    lines = _block_prelude(accs) + ["__shared__ bool last_piece;"]
    lines += ["for (long long task = blockIdx.x; task < tasks; task += gridDim.x) {"]
    loop = [f"const long long row = task / {parts}, part = task % {parts};"] + init
    loop += [f"for (long long j = part * blockDim.x + threadIdx.x; j < cols; "
             f"j += {parts}LL * blockDim.x) {{"] + _nested(inner) + ["}"] + _block_combine(accs)
    loop += ["if (threadIdx.x == 0) {"]
    loop += _nested([line for a in accs for line in a.store("task")])
    loop += ["    __threadfence();",
             f"    last_piece = atomicAdd(&counters[row], 1u) == {parts}u - 1u;", "}",
             "__syncthreads();", "if (last_piece) {"]
    last = init + [f"for (long long q = threadIdx.x; q < {parts}; q += blockDim.x) {{"]
    last += _nested([line for a in accs for line in a.combine_stored(f"row * {parts} + q")])
    last += ["}"] + _block_combine(accs)
    last += ["if (threadIdx.x == 0) {"] + _nested(final + ["counters[row] = 0u;"]) + ["}"]
    loop += _nested(last) + ["}", "__syncthreads();"]
    return lines + _nested(loop) + ["}"]


_THREADS = "for (long long {0} = blockIdx.x * (long long)blockDim.x + threadIdx.x; {0} < {1}; " \
    "{0} += (long long)blockDim.x * gridDim.x) {{"


def _thread_per_row(accs, init, inner, final, parts):
    loop = init + ["for (long long j = 0; j < cols; ++j) {"] + _nested(inner) + ["}", "{"] + \
        _nested(final) + ["}"]
    return [_THREADS.format("row", "rows")] + _nested(loop) + ["}"]


def _thread_per_part(accs, init, inner, final, parts):
    loop = ["const long long row = task % rows, part = task / rows;"] + init
    loop += [f"for (long long j = part; j < cols; j += {parts}) {{"] + _nested(inner) + ["}"]
    loop += [line for a in accs for line in a.store("task")]
    loop += ["__threadfence();", f"if (atomicAdd(&counters[row], 1u) == {parts}u - 1u) {{"]
    last = init + [f"for (long long q = 0; q < {parts}; ++q) {{"]
    last += _nested([line for a in accs for line in a.combine_stored("q * rows + row")])
    last += ["}"] + final + ["counters[row] = 0u;"]
    loop += _nested(last) + ["}"]
    return [_THREADS.format("task", "tasks")] + _nested(loop) + ["}"]


# (a block per row?, rows split?) -> the kernel body's lines
_FORMS = {(True, False): _block_per_row, (True, True): _block_per_part,
          (False, False): _thread_per_row, (False, True): _thread_per_part}
