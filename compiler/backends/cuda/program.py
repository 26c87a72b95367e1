"""A whole SSA function as a sequence of CUDA kernel launches: the schedule `kiln compile
--target cuda` writes (aot) and a whole-program CUDA backend runs.

`steps(fn)` takes a function as the LLVM pipeline left it (fused), merges each group with
reductions and the groups that read its results into one (`units`: a softmax's three groups
are one kernel of three passes over each row, reduce.py), and makes one `Step` per
top-level equation that computes: a `fusion` group is one kernel of its region (several
results, reductions with their prologue, views of its inputs: source.kernel_source), or one
kernel per set of reduced axes when its reductions reduce different axes of its iteration
space (each recomputes the prologue it needs; the first also writes the elementwise
results), and an
equation on its own (elementwise, a reduction, or a view that something outside a group
reads) is the kernel of a function of that one equation (a cumulative scan of few very long
lines is three passes or more: scan.passes, with values of their own between them). A Step
names the program values its kernel reads (SSA Vars, or Literals passed as one-element
arrays) and writes. The function's results are program values too, or its inputs or literals
(no kernel). Any other equation (dot_general, control flow, sort, ...) is a
BackendUnsupportedError naming it and its line. `text(fn, level)` prints a whole function's
kernels (`as_text("cuda")`, `kiln show --stage cuda`), with the steps no kernel computes named.
"""
from typing import NamedTuple

from ...errors import BackendUnsupportedError
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


def steps(fn):
    """The Steps running `fn` (see the module docstring), in order."""
    return [step for eqn in units(fn) for step in equation_steps(eqn)]


# what runs a top-level equation that no kernel computes, in the CUDA executable's plan
_HOST_STEPS = {"dot_general": "the device layer's GEMM (cuBLAS)",
               "fft": "the device layer's FFT (cuFFT)",
               "cond": "a host-driven branch over device programs",
               "while_loop": "a host-driven loop over device programs",
               "scan": "a host-driven loop over device programs",
               "debug_print": "a host callback on the printed values",
               "pure_callback": "a host callback on copies of its operands",
               "debug_callback": "a host callback on copies of its operands"}


def text(fn, level):
    """What the CUDA backend makes of SSA Function `fn`: `level` "cuda" (CUDA C) or "ptx"
    (NVRTC's PTX for sm_90). A function that is one kernel is that kernel; otherwise every
    kernel of its steps in order, and a comment line for each equation no kernel computes,
    saying what runs it (executable.py's plan)."""
    if level not in ("cuda", "ptx"):
        raise ValueError(f"unknown CUDA text level {level!r}; the levels are 'cuda' and 'ptx'")
    try:
        kernels = [S.kernel_source(fn)]
    except BackendUnsupportedError:
        kernels = None
    if len(fn.eqns) == 1 and fn.eqns[0].prim.name in scan.KERNELS:
        kernels = [kernel for kernel, _, _ in scan.passes(fn)]
    parts = []
    for eqn in units(fn) if kernels is None else ():
        try:
            parts += [step.kernel for step in equation_steps(eqn)]
        except BackendUnsupportedError:
            how = _HOST_STEPS.get(eqn.prim.name, "its NumPy definition over the device's "
                                                 "arrays (per_primitive)")
            results = ", ".join(v.name for v in eqn.outvars)
            parts.append(f"// {results} = {eqn.prim.name}(...): {how}")
    parts = kernels or parts
    if level == "cuda":
        return "\n\n".join(p if isinstance(p, str) else p.source for p in parts)
    from . import nvrtc
    return "\n\n".join(p if isinstance(p, str) else
                        nvrtc.compile(p.source, f"{p.name}.cu", info=p.info) for p in parts)
