"""A whole SSA function as a sequence of CUDA kernel launches: the schedule `kiln compile
--target cuda` writes (aot) and a whole-program CUDA backend runs.

`steps(fn)` takes a function as the LLVM pipeline left it (fused) and makes one `Step` per
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
from ...ir.ssa import Function, Literal
from ...transforms.simplify import dce
from . import source as S
from . import scan
from .reduce import REDUCTIONS


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


def steps(fn):
    """The Steps running `fn` (see the module docstring), in order."""
    return [step for eqn in fn.eqns for step in equation_steps(eqn)]


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
    for eqn in fn.eqns if kernels is None else ():
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
