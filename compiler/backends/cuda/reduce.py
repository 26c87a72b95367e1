"""Reduction kernels: functions whose equations reduce one iteration space over one set of
axes (reduce_sum/prod/max/min/and/or/xor, argmax, argmin; several of them at once, e.g. a sum
and a sum of squares), with an elementwise prologue at the operand's shape (inputs read
through views, as in source.py; groups the LLVM pipeline fused are inline) and an elementwise
epilogue at the result's shape, e.g. `jnp.sum(x * x, axis=0) / n`.

**Passes over a row** (`plan`): values at the operand's shape may read reductions' results
(broadcast along the reduced axes), and reductions may reduce them: a softmax's
`exp(x - max)`, its sum, and `e / sum`. Each row is then walked once per level: pass 0
accumulates the reductions of the inputs, the row's values after it (`sections`: `max`, a
mean `sum / n`, `rsqrt(var + eps)`) are computed, pass 1 reads them per element and
accumulates the next reductions, and so on; a last pass with no reduction writes the
elementwise results (the division). A pass recomputes what it reads of earlier passes
(`exp(x - max)` again) instead of storing it. In the block form the combined values are
shared with every thread of the block (`row_<register>` in shared memory, between two
barriers), which computes the row's values; thread 0 writes the row's results.

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

**Few rows, long rows** (`Plan.parts` > 1; one pass only: passes over split rows would need
the whole grid between them, so such a function is a BackendUnsupportedError and stays
several kernels): a block or thread per row would leave most of the
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
    free: tuple         # the top-level views of inputs (indices of loads: no code)
    passes: tuple       # per pass over a row's columns: the top-level equations computed per
    #                     operand element (those of earlier passes it reads again, recomputed)
    sections: tuple     # per pass: the top-level equations computed per row after it (reading
    #                     its reductions' results), the last one's only when it reduces
    reduced_in: tuple   # per reduction: the pass accumulating it
    depth: dict         # value name -> the pass computing it (operand's shape), or the pass
    #                     after which its row's value is computed, plus one (result's shape)
    per_row: frozenset  # the names of values computed per row (reductions' results, sections')
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


def _reads(eqn):
    return [v.name for v in eqn.invars if not isinstance(v, Literal)]


def plan(fn):
    """The Plan of `fn`'s reduction kernel, or None when `fn` reduces nothing. Equations at
    the operand's shape go to the pass after the last reduction they read (a softmax's
    `exp(x - max)` and its sum to the second, its division to a third), equations at the
    result's shape to the row's lines after it. Reductions over different shapes or axes, a
    value of another shape, or several passes over rows that would be split, are a
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
    depth, free, placed = {}, [], []   # placed: (equation, "pass" or "section", index)
    views_of_inputs = {v.name for v in fn.invars}
    for eqn in fn.eqns:
        reads = _reads(eqn)
        if eqn.prim.name in S.VIEWS and all(n in views_of_inputs for n in reads):
            free.append(eqn)
            views_of_inputs |= {v.name for v in eqn.outvars}
            continue
        d = max((depth.get(n, 0) for n in reads), default=0)
        results = _outer_results(eqn, found)
        others = {tuple(v.aval.shape) for v in eqn.outvars if v.name not in results}
        if results or others <= {shape}:   # per operand element, in pass d
            placed.append((eqn, "pass", d))
            depth.update({v.name: d + 1 if v.name in results else d for v in eqn.outvars})
        elif all(S.same_space(o, out_shape) for o in others):   # per row, after pass d - 1
            d = max(d, 1)
            placed.append((eqn, "section", d))
            depth.update({v.name: d for v in eqn.outvars})
        else:
            raise S._unsupported(f"a value of shape {sorted(others)[0]} beside reductions of "
                                 f"{shape} to {out_shape} ({fn.name})", eqn.info)
    count = max(d + (kind == "pass") for _, kind, d in placed)
    producer = {v.name: eqn for eqn, kind, d in placed if kind == "pass"   # (not reductions)
                for v in eqn.outvars if depth[v.name] == d}
    passes = []
    for k in range(count):
        chosen = [eqn for eqn, kind, d in placed if kind == "pass" and d == k]
        stack = list(chosen)
        while stack:   # what the pass reads of earlier passes, computed again
            for n in _reads(stack.pop()):
                again = producer.get(n)
                if again is not None and all(again is not c for c in chosen):
                    chosen.append(again)
                    stack.append(again)
        passes.append(tuple(eqn for eqn, kind, _ in placed
                            if any(eqn is c for c in chosen)))
    sections = tuple(tuple(eqn for eqn, kind, d in placed if kind == "section" and d == k + 1)
                     for k in range(count))
    where = {id(r): d for eqn, kind, d in placed if kind == "pass" for r in _reductions([eqn])}
    p = Plan(tuple(found), shape, axes, tuple(free), tuple(passes), sections,
             tuple(where[id(r)] for r in found), depth,
             frozenset(v.name for eqn, kind, d in placed for v in eqn.outvars
                       if kind == "section" or depth[v.name] > d), len(shape) - 1 in axes)
    piece, tasks = (BLOCK_PIECE, BLOCK_TASKS) if p.by_block else (THREAD_PIECE, THREAD_TASKS)
    parts = min(p.cols // piece, tasks // max(p.rows, 1))
    if parts >= 2 and p.rows and count > 1:
        raise S._unsupported(f"{count} passes over {p.rows} rows of {p.cols} (a block or "
                             f"thread each would leave the device idle: one kernel a pass)",
                             found[-1].info)
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
    S._emit(p.free, env, [], p.shape)
    keeps = _keeps(p)
    writes = {}   # ("pass" or "section", index) -> [(output k, its value's name or Literal)]
    outs = []
    for k, v in enumerate(fn.outvars):
        mem = S._memory_type(v.aval.dtype)
        params.append(f"{mem}* __restrict__ out{k}")
        outs.append(v.aval)
        d = 0 if isinstance(v, Literal) else p.depth.get(v.name, 0)
        if v.aval.shape == p.shape and not isinstance(v, Literal) and v.name not in p.per_row:
            writes.setdefault(("pass", d), []).append((k, v))
        elif S.same_space(v.aval.shape, p.out_shape):
            writes.setdefault(("section", max(d, 1)), []).append((k, v))
        else:
            raise S._unsupported(f"a result of shape {v.aval.shape} beside reductions of "
                                 f"{p.shape} to {p.out_shape} ({fn.name})")
    index_lines, trailing = _coordinates(p.shape, p.axes)
    guard = "if (threadIdx.x == 0) " if p.by_block else ""   # (a block: thread 0 writes rows)
    row_env, passes = env, []
    row_env[S._LOADS] = {}
    for d, eqns in enumerate(p.passes):
        body, env = [], dict(row_env)
        env[S._LOADS] = {}   # (a new scope: the loop's own loads)
        S._emit(eqns, env, body, p.shape, skip=p.reductions, keeps=keeps)
        row_env.update({v.name: env[v.name] for eqn in eqns for v in eqn.outvars
                        if p.depth.get(v.name) == d + 1})   # (its reductions' results)
        mine = [a for a in accs if p.reduced_in[a.k] == d]
        for a in mine:
            x = a.eqn.invars[0]
            operand = S._literal(x) if isinstance(x, Literal) else S._value(env, x.name, body,
                                                                            p.shape)
            body.append(f"const {ctype(a.dtype)} value{a.k}_ = ({ctype(a.dtype)})({operand});")
        steps = [a.combine(f"value{a.k}_", "j") for a in mine]   # (arg*: j, the one axis)
        early = [f"out{k}[i] = ({S._memory_type(v.aval.dtype)})"
                 f"({S._value(env, v.name, body, p.shape)});" for k, v in writes.get(("pass", d), ())]
        inner = index_lines + (S.coordinate_lines(p.shape, body) if trailing else []) + body + \
            steps + early
        last = d == len(p.passes) - 1
        section = []
        S._emit(p.sections[d], row_env, section, p.out_shape, keeps=keeps)
        for k, v in writes.get(("section", d + 1), ()):
            value = S._literal(v) if isinstance(v, Literal) else S._value(row_env, v.name,
                                                                         section, p.out_shape)
            section.append(f"{'' if last else guard}out{k}[row] = "
                           f"({S._memory_type(v.aval.dtype)})({value});")
        init = [f"{t} {n} = {identity};" for a in mine for t, n, identity in a.registers()]
        passes.append(_Pass(mine, init, inner, section))
    final = passes[-1].after
    if final:
        final = ["const long long i = row;"] + S.coordinate_lines(p.out_shape, final) + final
    between = [line for q in passes[:-1] for line in q.after]
    if between:   # the row's index for the lines between passes
        passes[0] = passes[0]._replace(init=["const long long i = row;"] + S.coordinate_lines(
            p.out_shape, between) + passes[0].init)
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
    body = form(passes, final, p.parts)
    lines = [f'extern "C" __global__ void {name}({", ".join(params)})', "{"] + \
        [f"    {line}" for line in body] + ["}", ""]
    launch = ("block" if p.by_block else "thread") + ("_per_part" if p.parts > 1 else "_per_row")
    sizes = ((p.rows * p.parts,) if p.parts > 1 else ()) + (p.rows, p.cols)
    return S.Kernel(name, "\n".join(lines), tuple(v.aval.dtype for v in fn.invars),
                    tuple(a.dtype for a in outs), tuple(scalars), extents=len(sizes),
                    sizes=sizes, out_shapes=tuple(a.shape for a in outs), launch=launch,
                    info=S.origin(fn), scratch=tuple(scratch))


class _Pass(NamedTuple):
    """One pass over a row's columns, as lines: `init` (the row's, before the loop), `inner`
    (per column), `after` (the row's lines after its reductions are combined)."""
    accs: list
    init: list
    inner: list
    after: list


def _keeps(p):
    """Whether a view of a value computed per row (`p`'s result shape, up to axes of size 1)
    is that row's value again: a view between result shapes that keeps their order, or a
    broadcast along the reduced axes to the operand's shape (source._emit's `keeps`)."""
    kept = [k for k in range(len(p.shape)) if k not in p.axes and p.shape[k] != 1]

    def keeps(eqn):
        a, b = eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape
        if not S.same_space(a, p.out_shape):
            return False
        if S.same_space(b, p.out_shape):
            if eqn.prim.name == "transpose":
                order = [q for q in eqn.params["permutation"] if a[q] != 1]
                return order == sorted(order)
            return eqn.prim.name != "rev" or all(a[q] == 1 for q in eqn.params["dimensions"])
        dims = eqn.params.get("broadcast_dimensions", ())
        return eqn.prim.name == "broadcast_in_dim" and tuple(b) == p.shape and \
            [dims[q] for q in range(len(a)) if a[q] != 1] == kept
    return keeps


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


def _block_per_row(passes, final, parts):
    """A block per row: each pass a loop over the row's columns, its reductions combined into
    thread 0's registers and, when another pass follows, shared with every thread (`row_`);
    the rows' values between passes are computed by every thread, written by thread 0."""
    accs = [a for q in passes for a in q.accs]
    lines = _block_prelude(accs) + [f"__shared__ {t} row_{n};" for q in passes[:-1]
                                    for a in q.accs for t, n, _ in a.registers()]
    loop = []
    for k, q in enumerate(passes):
        loop += q.init + ["for (long long j = threadIdx.x; j < cols; j += blockDim.x) {"] + \
            _nested(q.inner) + ["}"] + (_block_combine(q.accs) if q.accs else [])
        if k < len(passes) - 1:
            names = [n for a in q.accs for _, n, _ in a.registers()]
            if names:
                loop += ["if (threadIdx.x == 0) {"] + [f"    row_{n} = {n};" for n in names] + \
                    ["}", "__syncthreads();"] + [f"{n} = row_{n};" for n in names]
            loop += q.after
    if final:
        loop += ["if (threadIdx.x == 0) {"] + _nested(final) + ["}"]
    loop += ["__syncthreads();"]
    lines += ["for (long long row = blockIdx.x; row < rows; row += gridDim.x) {"]
    return lines + _nested(loop) + ["}"]


def _block_per_part(passes, final, parts):
    ((accs, init, inner, _),) = passes
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


def _thread_per_row(passes, final, parts):
    """A thread per row: each pass a loop over the row's columns, then the row's lines."""
    loop = []
    for k, q in enumerate(passes):
        loop += q.init + ["for (long long j = 0; j < cols; ++j) {"] + _nested(q.inner) + ["}"]
        loop += q.after if k < len(passes) - 1 else []
    if final:
        loop += ["{"] + _nested(final) + ["}"]
    return [_THREADS.format("row", "rows")] + _nested(loop) + ["}"]


def _thread_per_part(passes, final, parts):
    ((accs, init, inner, _),) = passes
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
