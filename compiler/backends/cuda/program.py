"""A whole SSA function as a plan of device steps: what the CUDA executable runs
(executable.py), the emulation runs on the host (emulate.run_program) and `kiln compile
--target cuda` writes (aot), planned once.

`plan(fn)` takes a function as the LLVM pipeline left it (fused), merges each group with
reductions and the groups that read its results into one (`units`: a softmax's three groups
are one kernel of three passes over each row, reduce.py), and makes a `Plan`: its inputs,
its steps in order and its results (program values, or literals). Each top-level equation
becomes steps of one of these kinds, all plain data (`Step.kind`):

- `kernel` (`Step`): a `fusion` group is one kernel of its region (several results,
  reductions with their prologue, views of its inputs: source.kernel_source), or one kernel
  per set of reduced axes when its reductions reduce different axes of its iteration space
  (each recomputes the prologue it needs; the first also writes the elementwise results); an
  equation on its own (elementwise, a reduction, an iota, a view, indexing.py's, a
  cumulative scan) is the kernel of a function of that one equation (a cumulative scan of
  few very long lines is three passes or more: scan.passes, with values of their own between
  them);
- `gemm` (`Gemm`): dot_general as one matrix product, its dimension numbers as data: the
  operands' permutations to (batch, free, contracted) and (batch, contracted, free), the
  sizes (B, M, K, N), the result's shape and dtype (cuBLAS through CuPy on a GPU, NumPy on
  the host);
- `per_primitive`, `fft`, `host_effect`, `host_call` (`Op`): a primitive by name with its
  parameters and result types; sort and every primitive without a kernel run their NumPy
  definition over the device's arrays, fft the layer's FFT, debug prints and callbacks on
  the host;
- `cond` (`Cond`), `while_loop` (`While`), `scan` (`Scan`): control flow whose regions are
  plans of their own (steps of steps), driven from the host; a `subprogram` (`Region`) runs
  a plan of its own: a fused group no kernel can emit, planned equation by equation, or a
  linear_solve's or root's `solve` region.

A step names the program values it reads (SSA Vars, or Literals) and writes. Collectives and
other regions are a BackendUnsupportedError naming the primitive and its line. `steps(fn)`
is the plan's top-level steps; `equation_steps(eqn)` the kernel Steps of one equation (a
BackendUnsupportedError when no kernel computes it). `text(fn, level)` prints a whole
function's kernels (`as_text("cuda")`, `kiln show --stage cuda`), with the steps no kernel
computes named.
"""
from typing import NamedTuple

import numpy as np

from ...errors import BackendUnsupportedError
from ...ir.abstract import ShapedArray
from ...ir.ssa import Eqn, Function, Literal
from ...primitives import PRIMITIVES
from ...primitives.core import CUDA_SCALAR
from ...transforms.simplify import dce
from . import source as S
from . import scan
from .equation_kernels import KERNELS
from .reduce import REDUCTIONS, _reductions


class Step(NamedTuple):
    kernel: S.Kernel
    inputs: tuple    # per kernel input: the program's Var it reads, or a Literal
    outputs: tuple   # per kernel output: the program's Var it writes (or a value between
    #                  an equation's kernels: a split scan's `<result>#prefix`, scan.py)
    kind = "kernel"


class Plan(NamedTuple):
    inputs: tuple    # Vars
    steps: tuple
    results: tuple   # Vars or Literals


class Gemm(NamedTuple):
    inputs: tuple    # lhs, rhs
    outputs: tuple
    left: tuple      # lhs's axes in (batch, free, contracted) order
    right: tuple     # rhs's axes in (batch, contracted, free) order
    sizes: tuple     # B, M, K, N
    batched: bool    # False: one (M, K) by (K, N) product
    shape: tuple     # the result's
    dtype: str
    kind = "gemm"


class Op(NamedTuple):
    kind: str        # per_primitive | fft | host_effect | host_call
    primitive: str
    params: dict
    inputs: tuple
    outputs: tuple
    types: tuple     # per result: (shape, dtype), or None for a value that is no array
    info: object = None


class Cond(NamedTuple):
    inputs: tuple    # the branch index, then the branches' operands
    outputs: tuple
    branches: tuple  # Plans
    kind = "cond"


class While(NamedTuple):
    inputs: tuple    # consts, then the carry
    outputs: tuple
    num_consts: int
    speculate: bool  # trips in chunks between reads of the predicate (executable._while)
    test: Plan
    body: Plan
    kind = "while_loop"


class Scan(NamedTuple):
    inputs: tuple    # consts, carry, xs
    outputs: tuple   # carry, ys
    num_consts: int
    num_carry: int
    length: int
    reverse: bool
    types: tuple     # the stacked ys' (shape, dtype)
    body: Plan
    kind = "scan"


class Region(NamedTuple):
    inputs: tuple
    outputs: tuple
    body: Plan
    kind = "subprogram"


# every kind of step, by its `kind` (aot's manifest names a step's class by it)
KINDS = {"kernel": Step, "gemm": Gemm, "per_primitive": Op, "fft": Op, "host_effect": Op,
         "host_call": Op, "cond": Cond, "while_loop": While, "scan": Scan,
         "subprogram": Region}


def _single(eqn):
    """The Function of one equation, named after its first result (unique in the program)."""
    invars = []
    for v in eqn.invars:
        if not isinstance(v, Literal) and all(v is not w for w in invars):
            invars.append(v)
    name = f"{eqn.prim.name}_{eqn.outvars[0].name}"
    return Function(name, invars, [eqn], eqn.outvars)


def _split(region):
    """[(Function, indices of the region's results it computes)]: the region's results
    grouped by the axes their reductions reduce (elementwise results with the first)."""
    axes = {r.outvars[0].name: tuple(sorted(r.params["axes"]))
            for r in region.eqns if r.prim.name in REDUCTIONS}
    kinds = sorted(set(axes.values()))
    if len(kinds) < 2:
        return [(region, tuple(range(len(region.outvars))))]
    parts = []
    for k, kind in enumerate(kinds):
        chosen = tuple(j for j, v in enumerate(region.outvars)
                       if axes.get(getattr(v, "name", None), kinds[0]) == kind)
        part = Function(f"{region.name}_{k}", region.invars, region.eqns,
                        [region.outvars[j] for j in chosen])
        parts.append((dce(part), chosen))
    return parts


def equation_steps(eqn):
    """The Steps running one top-level equation (a BackendUnsupportedError when no kernel
    computes it)."""
    if eqn.prim.name == "fusion":
        return [Step(S.kernel_source(part), tuple(eqn.invars),
                     tuple(eqn.outvars[j] for j in chosen))
                for part, chosen in _split(eqn.regions()[0])]
    if eqn.regions():
        raise S._unsupported(f"the primitive {eqn.prim.name!r}", eqn.info)
    single = _single(eqn)
    if eqn.prim.name in scan.KERNELS:   # one kernel, or a long line's passes
        return [Step(*found) for found in scan.passes(single)]
    return [Step(S.kernel_source(single), tuple(single.invars), tuple(eqn.outvars))]


def _reduces(eqn):
    return any(True for _ in _reductions([eqn]))


def _kernel_of(eqns, outvars, name):
    """The `fusion` equation of top-level `eqns` (in order) with results `outvars`, when
    they are one kernel (reduce.py: its passes over rows), else None."""
    defined, invars = set(), []
    for eqn in eqns:
        for x in eqn.invars:
            if not isinstance(x, Literal) and x.name not in defined and \
                    all(x is not w for w in invars):
                invars.append(x)
        defined |= {v.name for v in eqn.outvars}
    region = Function(name, invars, list(eqns), list(outvars))
    try:
        S.kernel_source(region)
    except BackendUnsupportedError:
        return None
    return Eqn(outvars, PRIMITIVES["fusion"], invars, {"body": region}, eqns[0].info)


def _joins(eqn):
    """Whether `eqn` may join a reduction's kernel (fused groups, elementwise, views,
    reductions: what reduce.py emits)."""
    name = eqn.prim.name
    return name not in KERNELS and (name == "fusion" or name in REDUCTIONS or name in S.VIEWS
                                    or name in S.GENERATED or CUDA_SCALAR.get(eqn.prim)
                                    is not None)


def units(fn):
    """`fn`'s top-level equations, with each reduction's readers merged into its kernel: an
    equation that reads a value of an open group of equations with reductions joins it when
    the group stays one kernel (reduce.py: a pass over the rows per reduction that reads
    another's result, the rows' values between passes). A merged group is a `fusion`
    equation whose results are the members' values read after it; it runs where its last
    member was (an equation that does not read the group runs before it). So a row softmax,
    max then exp and sum then divide, is one kernel of three passes instead of three kernels,
    and its exponentials never reach memory."""
    kept = {v.name for v in fn.outvars if not isinstance(v, Literal)}
    readers = {}
    for eqn in fn.eqns:
        for x in eqn.invars:
            if not isinstance(x, Literal):
                readers.setdefault(x.name, []).append(eqn)
    out, group = [], []

    def close():
        members = {id(e) for e in group}
        outvars = [v for e in group for v in e.outvars if v.name in kept or
                   any(id(r) not in members for r in readers.get(v.name, ()))]
        merged = _kernel_of(group, outvars, f"{_single(group[0]).name}_rows") \
            if len(group) > 1 else None
        out.extend(group if merged is None else [merged])
        group.clear()
    for eqn in fn.eqns:
        produced = {v.name for e in group for v in e.outvars}
        reads = any(not isinstance(x, Literal) and x.name in produced for x in eqn.invars)
        if reads and _joins(eqn) and _kernel_of(group + [eqn], [], "trial") is not None:
            group.append(eqn)
            continue
        if group and (reads or (_joins(eqn) and _reduces(eqn))):
            close()
        if _joins(eqn) and _reduces(eqn) and len(_split(_region(eqn))) == 1:
            group.append(eqn)
        else:
            out.append(eqn)
    if group:
        close()
    return out


def _region(eqn):
    return eqn.regions()[0] if eqn.prim.name == "fusion" else _single(eqn)


def plan(fn):
    """The Plan running SSA Function `fn` (see the module docstring)."""
    return Plan(tuple(fn.invars), tuple(s for eqn in units(fn) for s in _plan(eqn)),
                tuple(fn.outvars))


def steps(fn):
    """`fn`'s plan's top-level steps, in order."""
    return list(plan(fn).steps)


def _plan(eqn):
    """The steps running top-level equation `eqn`."""
    name = eqn.prim.name
    if eqn.prim.collective:
        raise BackendUnsupportedError(f"the CUDA backend cannot run the collective {name} "
                                      f"yet (pmap over GPUs: docs/cuda.md)", eqn.info)
    rule = _PLANS.get(name)
    if rule is not None:
        return [rule(eqn)]
    if eqn.regions() and name != "fusion":
        raise BackendUnsupportedError(f"the CUDA backend cannot run {name} yet", eqn.info)
    if name == "fusion" or name in REDUCTIONS or CUDA_SCALAR.get(eqn.prim) is not None \
            or name in S.VIEWS or name in S.GENERATED or name in KERNELS:
        try:
            return equation_steps(eqn)
        except BackendUnsupportedError:
            pass
    if name == "fusion":   # planned equation by equation: its parts still become kernels
        return [Region(tuple(eqn.invars), tuple(eqn.outvars), plan(eqn.regions()[0]))]
    return [_op("per_primitive")(eqn)]


def _type(aval):
    return (tuple(aval.shape), str(aval.dtype)) if isinstance(aval, ShapedArray) else None


def _op(kind):
    def rule(eqn):
        return Op(kind, eqn.prim.name, dict(eqn.params), tuple(eqn.invars),
                  tuple(eqn.outvars), tuple(_type(v.aval) for v in eqn.outvars), eqn.info)
    return rule


def _gemm(eqn):
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = (x.aval for x in eqn.invars)
    lf = [d for d in range(len(lhs.shape)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rhs.shape)) if d not in rc and d not in rb]
    sizes = tuple(int(np.prod([a.shape[d] for d in dims], dtype=np.int64))
                  for a, dims in ((lhs, lb), (lhs, lf), (lhs, lc), (rhs, rf)))
    out = eqn.outvars[0].aval
    return Gemm(tuple(eqn.invars), tuple(eqn.outvars), tuple(lb) + tuple(lf) + tuple(lc),
                tuple(rb) + tuple(rc) + tuple(rf), sizes, bool(lb), tuple(out.shape),
                str(np.dtype(out.dtype)))


def _cond(eqn):
    return Cond(tuple(eqn.invars), tuple(eqn.outvars),
                tuple(plan(b) for b in eqn.params["branches"]))


# A while_loop whose carry is at most SPECULATE_BYTES and whose regions print nothing runs its
# trips in chunks between host synchronisations (executable._while); above it, or with a
# print inside, the host reads the predicate after every trip.
SPECULATE_BYTES = 1 << 20
_HOST_EFFECTS = frozenset({"debug_print", "debug_callback", "io_callback", "ffi_call_effect"})


def _prints(fn):
    """Whether SSA function `fn` (regions included) has a host effect."""
    return any(eqn.prim.name in _HOST_EFFECTS or any(_prints(r) for r in eqn.regions())
               for eqn in fn.eqns)


def _while(eqn):
    p = eqn.params
    carry_bytes = sum(v.aval.size * v.aval.dtype.itemsize for v in eqn.outvars)
    speculate = carry_bytes <= SPECULATE_BYTES and not (_prints(p["cond_fn"]) or
                                                        _prints(p["body_fn"]))
    return While(tuple(eqn.invars), tuple(eqn.outvars), p["num_consts"], speculate,
                 plan(p["cond_fn"]), plan(p["body_fn"]))


def _scan(eqn):
    p = eqn.params
    return Scan(tuple(eqn.invars), tuple(eqn.outvars), p["num_consts"], p["num_carry"],
                p["length"], bool(p.get("reverse")),
                tuple(_type(v.aval) for v in eqn.outvars[p["num_carry"]:]), plan(p["body"]))


def _solve(eqn):
    """linear_solve, root: the `solve` region (the others serve only derivative rules)."""
    return Region(tuple(eqn.invars), tuple(eqn.outvars), plan(eqn.params["solve"]))


_PLANS = {"dot_general": _gemm, "fft": _op("fft"), "cond": _cond, "while_loop": _while,
          "scan": _scan, "linear_solve": _solve, "root": _solve,
          "debug_print": _op("host_effect"), "debug_callback": _op("host_effect"),
          "pure_callback": _op("host_call"), "io_callback": _op("host_call"),
          "ffi_call": _op("host_call"), "ffi_call_effect": _op("host_call")}


def regions(step):
    """The Plans a step holds: a cond's branches, a loop's test and body, a region's body."""
    return step.branches if step.kind == "cond" else \
        tuple(field for field in step if isinstance(field, Plan))


def describe(p, indent=""):
    """Plan `p` as text, a line a step (a kernel's name, a primitive's), its regions' plans
    indented below their step."""
    lines = []
    for step in p.steps:
        what = step.kernel.name if step.kind == "kernel" else getattr(step, "primitive", "")
        results = ", ".join(v.name for v in step.outputs)
        lines.append(f"{indent}{step.kind}{' ' + what if what else ''}: {results}")
        for region in regions(step):
            lines.append(describe(region, indent + "    "))
    return "\n".join(line for line in lines if line)


def kernels(p):
    """Every kernel Plan `p` launches, its regions' included, in order."""
    found = []
    for step in p.steps:
        if step.kind == "kernel":
            found.append(step.kernel)
        for region in regions(step):
            found += kernels(region)
    return found


# what runs a step that is not a kernel (text's comment lines)
_HOW = {"gemm": "the device layer's GEMM (cuBLAS)",
        "fft": "the device layer's FFT (cuFFT)",
        "cond": "a host-driven branch over the plans below",
        "while_loop": "a host-driven loop over the plans below (predicate, body)",
        "scan": "a host-driven loop over the plan below",
        "subprogram": "the plan below",
        "per_primitive": "its NumPy definition over the device's arrays (per_primitive)",
        "host_effect": "a host callback on the printed values",
        "host_call": "a host callback on copies of its operands"}


def _parts(p):
    """Plan `p`'s kernels in order, and a comment line for each other step saying what runs
    it, its regions' parts after it."""
    parts = []
    for step in p.steps:
        if step.kind == "kernel":
            parts.append(step.kernel)
            continue
        name = "dot_general" if step.kind == "gemm" else getattr(step, "primitive", step.kind)
        results = ", ".join(v.name for v in step.outputs)
        parts.append(f"// {results} = {name}(...): {_HOW[step.kind]}")
        for region in regions(step):
            parts += _parts(region)
    return parts


def text(fn, level):
    """What the CUDA backend makes of SSA Function `fn`: `level` "cuda" (CUDA C) or "ptx"
    (NVRTC's PTX for sm_90). A function that is one kernel is that kernel; otherwise its
    plan's kernels in order, and a comment line for each step that is not a kernel, saying
    what runs it, with its regions' kernels after it."""
    if level not in ("cuda", "ptx"):
        raise ValueError(f"unknown CUDA text level {level!r}; the levels are 'cuda' and 'ptx'")
    try:
        kernels = [S.kernel_source(fn)]
    except BackendUnsupportedError:
        kernels = None
    if len(fn.eqns) == 1 and fn.eqns[0].prim.name in scan.KERNELS:
        kernels = [kernel for kernel, _, _ in scan.passes(fn)]
    parts = kernels or _parts(plan(fn))
    if level == "cuda":
        return "\n\n".join(p if isinstance(p, str) else p.source for p in parts)
    from . import nvrtc
    return "\n\n".join(p if isinstance(p, str) else
                        nvrtc.compile(p.source, f"{p.name}.cu", info=p.info) for p in parts)
