"""SSA Function -> LLVM modules with one entry point, `kiln_main`.

    i32 @kiln_main(ptr %args)    ; args: n input pointers, m output pointers, the workspace

(contiguous row-major arrays, bools one byte each; returns 0). A transpose that only a matrix
product reads first joins it (lower_linalg.read_transposes: the product reads the transpose's
operand through its strides). The storage of every value is planned first (buffers.py: outputs computed in place, temporaries in the workspace by liveness,
reshapes as aliases). Then each equation becomes one function, a *kernel*, whose pointer
parameters are `noalias` (the plan never lets a result overlap a live operand, so LLVM may
vectorise without runtime overlap checks), and `kiln_main` calls the kernels in program order.
Outputs the plan could not compute in place are copied at the end.

Most of a compilation's time is LLVM optimising and compiling the kernels' loops, so:
- kernels of `kiln_main` with loops stay separate functions: LLVM optimises a few small
  functions much faster than the one large function inlining would make, and a call per
  kernel costs nothing beside a loop nest; straight-line kernels (a BLAS call, a copy, scalar
  code) are inlined into `kiln_main`, which is not optimised at all (`_Entry.set_inlining`).
  Kernels of regions (loop bodies) are inlined;
- equations that compute alike (equal `ssa_key.structure_text`: the same primitive, params,
  regions, operand types and literals, up to names) share one kernel, so the layers of a
  network are compiled once; flat elementwise equations alike up to their sizes (the updates
  of a network's parameters) share one kernel that takes its size as an argument
  (`_kernel_keys`);
- `build_parts` spreads the kernels over several modules with about equal estimated compile
  times (`_spread`), which LLVM compiles at once on several threads (target.compile_objects):
  the first module holds `kiln_main` and declares the kernels of the others, which are
  external and named after their module.
`build` makes one module, as ahead-of-time compilation needs.

A kernel's body comes from the primitive's lowering rule:
- `LLVM[prim](ctx, outs, ins, **params)`: `ctx` is the `Kernel` (its `builder` is positioned
  in the kernel function), `outs`/`ins` are `Buffer`s (a literal operand is a Buffer holding a
  constant); the rule emits loops and calls. `fusion`, reductions, shape operations,
  cumulative ops and dot_general have such rules.
- otherwise `LLVM_SCALAR[prim]` (elementwise primitives): the equation is lowered as a
  fused group of one (lower_fused.py).
A primitive with neither, or an operand of a dtype the backend cannot handle (complex numbers
where lower_complex.lowers says no), is a CompileError naming the primitive, its dtype and the
user's line.

Regions of structured control flow (lower_control.py) are compiled the same way into internal
functions `void region(ptr in..., ptr out..., ptr workspace [, ptr arena])` (`region_function`,
once per module); a region's workspace is part of its equation's scratch in the parent's plan.
A function that pushes tapes keeps a tape arena on `kiln_main`'s stack (lower_tapes.py), passed
to the kernels and regions that allocate; `kiln_main` frees it and returns
`lower_tapes.OUT_OF_MEMORY` instead of 0 if an allocation failed.
"""
import hashlib
import weakref

import llvmlite.ir as ir

from ...errors import CompileError
from ...ir.ssa import Function, Literal, Var
from ...primitives.core import LLVM, LLVM_SCALAR, LLVM_INPLACE, LLVM_SCRATCH
from . import ltypes as T
from .buffers import Buffer, plan_storage, nbytes
from .calls import intrinsic
from . import target
from .ssa_key import key_text, structure_text

# Importing the lowering modules registers their rules in the LLVM tables (primitives/core.py).
from . import lower_elementwise  # noqa: F401
from . import lower_fused
from . import lower_structural
from . import lower_reductions  # noqa: F401
from . import lower_linalg
from . import lower_decompositions  # noqa: F401
from . import lower_lu  # noqa: F401
from . import lower_qr  # noqa: F401
from . import lower_eigh  # noqa: F401
from . import lower_eig  # noqa: F401
from . import lower_schur  # noqa: F401
from . import lower_svd  # noqa: F401
from . import lower_conv  # noqa: F401
from . import lower_windows  # noqa: F401
from . import lower_indexing  # noqa: F401
from . import lower_control  # noqa: F401
from . import lower_callbacks  # noqa: F401
from . import lower_tapes
from . import lower_sorting  # noqa: F401
from . import lower_fft  # noqa: F401
from . import lower_collectives  # noqa: F401
from . import lower_processes  # noqa: F401
from . import lower_complex


class Kernel:
    """What a lowering rule gets as `ctx`: the module, the kernel function and its builder,
    the equation (for error messages), and `scratch`: a pointer to the workspace bytes the
    primitive's `LLVM_SCRATCH[prim](eqn)` asked for (None when it asks for none), and
    `arena`: the tape arena's header (lower_tapes.py) for equations that push or add tapes."""
    __slots__ = ("module", "function", "builder", "eqn", "scratch", "arena")

    def __init__(self, module, function, builder, eqn, scratch=None, arena=None):
        self.module = module
        self.function = function
        self.builder = builder
        self.eqn = eqn
        self.scratch = scratch
        self.arena = arena

    def error(self, message):
        return CompileError(message, self.eqn.info)


def module_name(fn, text):
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"kiln.{fn.name}.{digest}"


def build(fn):
    """(llvmlite ir.Module, storage Plan) of the SSA function `fn`."""
    modules, plan = build_parts(fn, 1)
    return modules[0], plan


def build_parts(fn, parts, donated=None):
    """([llvmlite ir.Module], storage Plan) of the SSA function `fn`, its kernels spread over
    up to `parts` modules that LLVM can compile at once on several threads: the first holds
    `kiln_main`, which calls the kernels of the others by name (see `_Entry.part`).
    `donated`: {input: outputs whose buffer it may become} (buffers.plan_storage)."""
    for x in fn.invars + fn.outvars:
        if isinstance(x, Var) and x.aval.dtype.kind == "O":
            raise T.unsupported(f"a tape argument or result of {fn.name}", x.aval.dtype)
    for eqn in fn.eqns:
        check_lowerable(eqn)
    fn = lower_linalg.read_transposes(fn)
    plan = plan_function(fn, donated)
    text = key_text(fn) + (f"\ndonated {sorted((i, sorted(js)) for i, js in donated.items())}"
                           if donated else "")
    entry = _Entry(_module(module_name(fn, text)), fn, plan, parts)
    entry.emit()
    return entry.parts, plan


def _module(name):
    module = ir.Module(name=name)
    module.triple = target.triple()
    return module


def plan_function(fn, donated=None):
    """The storage plan of a function or region; `donated`: {input: the outputs whose buffer it
    may become} (buffers.plan_storage)."""
    return plan_storage(fn, lower_structural.aliasing, scratch_bytes, inplace_pairs, donated)


def inplace_pairs(eqn):
    """(result, operand) pairs `eqn` may compute in place: `LLVM_INPLACE[prim](eqn)`."""
    rule = LLVM_INPLACE.get(eqn.prim)
    return () if rule is None else rule(eqn)


def scratch_bytes(eqn):
    rule = LLVM_SCRATCH.get(eqn.prim)
    return 0 if rule is None else rule(eqn)


def check_lowerable(eqn):
    """A CompileError if the backend cannot lower `eqn` (missing rule or unsupported dtype)."""
    for x in list(eqn.invars) + list(eqn.outvars):
        kind = x.aval.dtype.kind
        if kind not in "biuf" and not (kind == "O" and eqn.prim.name in TAPE_FRIENDLY) and \
                not (kind == "c" and lower_complex.lowers(eqn)):
            raise T.unsupported(f"the primitive {eqn.prim.name!r}", x.aval.dtype, eqn.info)
    if eqn.prim not in LLVM and eqn.prim not in LLVM_SCALAR:
        raise CompileError(f"the LLVM backend has no lowering for the primitive "
                           f"{eqn.prim.name!r} yet", eqn.info,
                           "Compile this function with kiln.jit(..., backend='reference') "
                           "until it has one.")
    for region in eqn.regions():
        for inner in region.eqns:
            check_lowerable(inner)


# Primitives that may handle tapes (object dtype: 8-byte pointer slots): the tape operations,
# control flow, and data movement indifferent to what it moves.
TAPE_FRIENDLY = frozenset({
    "tape_new", "tape_push", "tape_pop", "tape_add", "cond", "while_loop", "scan",
    "custom_jvp_call", "custom_vjp_call", "custom_vmap_call", "user_primitive", "remat",
    "linear_solve", "root", "fusion", "select_n",
    "broadcast_in_dim", "transpose", "reshape", "squeeze", "slice", "rev", "concatenate"})


class _Entry:
    """Emits `kiln_main`: argument unpacking, one kernel call per equation, final copies.
    Its kernels run once per call: those with loops stay separate functions, each optimised
    on its own, which costs far less compile time than one large function (`set_inlining`)."""
    INLINE_KERNELS = False

    def __init__(self, module, fn, plan, parts=1):
        self.module = module
        self.fn = fn
        self.plan = plan
        self.parts = [module]
        self.max_parts = parts
        self.kernels = []   # the kernel functions it defined
        self.function = ir.Function(module, ir.FunctionType(T.I32, [T.PTR]), target.ENTRY)
        self.function.attributes.add("nounwind")
        self.builder = ir.IRBuilder(self.function.append_basic_block("entry"))
        n, m = len(fn.invars), len(fn.outvars)
        args = self.function.args[0]
        args.name = "args"
        b = self.builder
        self.pointers = [b.load(b.gep(args, [T.i64(k)], inbounds=True, source_etype=T.PTR),
                                typ=T.PTR, name=_pointer_name(k, n, m)) for k in range(n + m + 1)]
        self.n = n
        self.arena = lower_tapes.open_arena(b) if lower_tapes.uses_arena(fn) else None

    def buffer(self, x):
        if isinstance(x, Literal):
            return Buffer(None, x.aval, T.const(x.aval.dtype, x.value))
        kind, where = self.plan.where[x]
        if kind == "in":
            return Buffer(self.pointers[where], x.aval)
        if kind == "out":
            return Buffer(self.pointers[self.n + where], x.aval)
        if kind in ("alias", "share"):
            return Buffer(self.buffer(where).ptr, x.aval)
        return Buffer(self.workspace(where), x.aval)

    def shared_buffer(self, x, shared):
        """`buffer(x)`, one Buffer per storage and type within an equation: a result computed
        in place (buffers.plan_storage) is its operand's Buffer, and the kernel gets one
        pointer for both."""
        if isinstance(x, Literal):
            return self.buffer(x)
        key = (self.plan.location(x), x.aval.shape, x.aval.dtype)
        if key not in shared:
            shared[key] = self.buffer(x)
        return shared[key]

    def workspace(self, offset):
        ws = self.pointers[-1]
        return self.builder.gep(ws, [T.i64(offset)], inbounds=True, source_etype=T.I8) \
            if offset else ws

    def emit(self):
        self.emit_equations()
        b = self.builder
        b.ret(T.I32(0) if self.arena is None else lower_tapes.close_arena(b, self.arena))
        self.set_inlining()

    def set_inlining(self):
        """Which functions LLVM optimises, and which it inlines. A straight-line `kiln_main`
        (the rule: only a tape arena branches) is not optimised (`optnone`): the O3 inliner
        then leaves the kernels with loops alone, and the straight-line kernels of the entry
        module (BLAS calls, copies, scalar code) are inlined into it (`alwaysinline`): LLVM
        compiles one function much faster than many small ones. Otherwise kernels stay
        separate (`noinline`) and straight-line ones are not optimised. (Quick modules inline
        every kernel: executable.py.)"""
        plain = len(self.function.blocks) == 1
        if plain:
            self.function.attributes.add("noinline")
            self.function.attributes.add("optnone")
        for fn in self.kernels:
            straight = len(fn.blocks) == 1
            if straight and plain and fn.module is self.module:
                fn.attributes.add("alwaysinline")
            elif not plain or straight:
                fn.attributes.add("noinline")
                if straight:
                    fn.attributes.add("optnone")

    def emit_equations(self):
        emitted = [(k, eqn) for k, eqn in enumerate(self.fn.eqns)
                   if not (eqn.outvars and self.plan.where[eqn.outvars[0]][0] == "alias")]
        self.keys = _kernel_keys([eqn for _, eqn in emitted])
        self.homes = _spread(self.keys, self.max_parts)
        for k, eqn in emitted:
            self.kernel(eqn, k)
        for j, x in self.plan.copies:
            self.copy(Buffer(self.pointers[self.n + j], x.aval), self.buffer(x))

    def kernel(self, eqn, k):
        shared = {}
        outs = [self.shared_buffer(v, shared) for v in eqn.outvars]
        ins = [self.shared_buffer(x, shared) for x in eqn.invars]
        pairs = list({id(buf): (buf, x) for buf, x in zip(outs + ins, eqn.outvars + eqn.invars)
                      if buf.const is None}.values())
        extras = {}
        if eqn in self.plan.scratch:
            extras["scratch"] = self.workspace(self.plan.scratch[eqn])
        if self.arena is not None and lower_tapes.needs_arena(eqn):
            extras["arena"] = self.arena
        text, size = self.keys[eqn]
        kernels = _KERNELS.setdefault(self.module, {})
        key = (self.INLINE_KERNELS, text, tuple(extras), _sharing(outs + ins))
        fn = kernels.get(key)
        if fn is None:
            fn = kernels[key] = self.callable(
                self.emit_kernel(self.part(text), eqn, k, outs, ins, pairs, extras, size))
        self.builder.call(fn, [buf.ptr for buf, _ in pairs] + list(extras.values())
                          + ([] if size is None else [T.i64(size)]))

    def part(self, text):
        """The module to emit the kernel of structure `text` into (`_spread`), created on
        first use."""
        k = self.homes.get(text, 0)
        while len(self.parts) <= k:
            self.parts.append(_module(f"{self.module.name}.{len(self.parts)}"))
        return self.parts[k]

    def callable(self, kernel):
        """`kernel` as the entry module calls it: itself, or a declaration of the kernel of
        another part."""
        if kernel.module is self.module:
            return kernel
        return ir.Function(self.module, kernel.function_type, kernel.name)

    def emit_kernel(self, module, eqn, k, outs, ins, pairs, extras, size):
        """The kernel function of `eqn` in `module` (see the module docstring); `size`: its
        element count when it is a flat elementwise loop (lower_fused.flat_size), which the
        kernel then takes as its last argument. Kernels of other parts than the entry's are
        external, named after their module (unique in the JIT)."""
        flat = [] if size is None else [T.I64]
        fnty = ir.FunctionType(T.VOID, [T.PTR] * (len(pairs) + len(extras)) + flat)
        label = eqn.outvars[0].name if eqn.outvars else k
        prefix = "" if module is self.module else f"{module.name}."
        fn = ir.Function(module, fnty,
                         module.get_unique_name(f"{prefix}{eqn.prim.name}.{label}"))
        if module is self.module:
            fn.linkage = "internal"
        fn.attributes.add("nounwind")
        if not self.INLINE_KERNELS:
            self.kernels.append(fn)
        inner = {}
        for arg, (buf, x) in zip(fn.args, pairs):
            arg.add_attribute("noalias")
            arg.name = x.name
            inner[id(buf)] = Buffer(arg, buf.aval)
        named = dict(zip(extras, fn.args[len(pairs):]))
        for name, arg in named.items():
            arg.name = name
        if "scratch" in named:
            named["scratch"].add_attribute("noalias")
        ctx = Kernel(module, fn, ir.IRBuilder(fn.append_basic_block("entry")), eqn,
                     named.get("scratch"), named.get("arena"))
        k_outs = [inner[id(b)] for b in outs]
        k_ins = [inner.get(id(b), b) for b in ins]
        rule = LLVM.get(eqn.prim)
        if size is not None:
            fn.args[-1].name = "size"
            lower_fused.lower_flat(ctx, eqn, k_outs, k_ins, fn.args[-1])
        elif rule is not None:
            rule(ctx, k_outs, k_ins, **eqn.params)
        else:
            lower_fused.lower_eqn(ctx, eqn, k_outs, k_ins)
        ctx.builder.ret_void()
        return fn

    def copy(self, dst, src):
        b = self.builder
        if src.const is not None:
            b.store(src.const if dst.aval.dtype.kind != "b" else b.zext(src.const, T.I8), dst.ptr)
            return
        size = nbytes(dst.aval)
        if size:
            intrinsic(b, "memcpy", [dst.ptr, src.ptr, T.i64(size), T.I1(0)],
                      ret=T.VOID, overloads=[T.PTR, T.PTR, T.I64])


def _sharing(buffers):
    """Which of an equation's buffers are one (computed in place): for each, the position of
    the first with its Buffer. Part of a kernel's key: it decides the kernel's parameters."""
    first = {}
    return tuple(first.setdefault(id(b), n) for n, b in enumerate(buffers))


def _kernel_keys(eqns):
    """{eqn: (structure text, size)} for the kernels of `eqns`. Flat elementwise equations
    (lower_fused.flat_size) alike up to shapes, two of which differ in size, share a kernel
    taking its size as an argument (the text without shapes, the size); every other equation
    gets its text with shapes and None. Only such sharing repays a size argument: LLVM takes
    about twice as long over a loop whose trip count it does not know (remainders)."""
    flat = {}
    for eqn in eqns:
        size = lower_fused.flat_size(eqn)
        if size is not None:
            flat[eqn] = (structure_text(eqn, shapes=False), size)
    sizes = {}
    for text, size in flat.values():
        sizes.setdefault(text, set()).add(size)
    return {eqn: flat[eqn] if eqn in flat and len(sizes[flat[eqn][0]]) > 1
            else (structure_text(eqn), None) for eqn in eqns}


# Rough measures of the time LLVM takes to optimise and compile a module, to balance the parts
# of a function (`_Entry.part`), in units of about a millisecond: the entry module
# (`kiln_main`, straight-line kernels, the module's own overhead, and printing its IR, which
# the calling thread does while the others compile); a loop nest; each equation computed in
# it, a transcendental function (an inlined polynomial) more.
ENTRY_COST, NEST_COST, EQUATION_COST, TRANSCENDENTAL_COST = 10, 6, 1, 3


def _compile_cost(eqn, size):
    """The estimated compile time of the kernel of `eqn`: 0 for a matrix product (a BLAS
    call, straight-line code), else that of a loop nest (half as much again for a trip count
    `size` only known when it runs) and the equations it computes."""
    if eqn.prim.name == "dot_general" and eqn.outvars[0].aval.dtype.kind in "fc":
        return 0
    eqns = eqn.params["body"].eqns if eqn.prim.name == "fusion" else [eqn]
    return NEST_COST + (0 if size is None else NEST_COST // 2) + sum(
        TRANSCENDENTAL_COST if e.prim.name in lower_fused.TRANSCENDENTAL else EQUATION_COST
        for e in eqns if e.prim.name not in lower_fused.VIEWS)


def _spread(keys, parts):
    """{structure text: part} for the kernels of `keys` ({eqn: (text, size)}), spread over up
    to `parts` modules so that their estimated compile times (`_compile_cost`) are about equal:
    the costliest first, each to the least loaded part; part 0, the entry's, starts at
    ENTRY_COST and keeps every kernel this leaves out (straight-line ones, at no cost). No
    more parts than kernels with loops: a part without one would only add its overhead."""
    costs = {}
    for eqn, (text, size) in keys.items():
        if text not in costs:
            costs[text] = _compile_cost(eqn, size)
    costly = sorted((t for t in costs if costs[t]), key=lambda t: -costs[t])
    parts = min(parts, len(costly))
    if parts <= 1:
        return {}
    loads = [ENTRY_COST] + [0] * (parts - 1)
    homes = {}
    for text in costly:
        k = homes[text] = loads.index(min(loads))
        loads[k] += costs[text]
    return homes


def _pointer_name(k, n, m):
    if k < n:
        return f"in{k}"
    if k < n + m:
        return f"out{k - n}"
    return "workspace"


# ---------------------------------------------------------------------------------- regions

class _Region(_Entry):
    """A region of structured control flow as an internal function of the module (see
    lower_control.py): `void region(ptr in..., ptr out..., ptr workspace [, ptr arena])`, its
    equations emitted like the entry point's, except that its kernels, run on every trip of
    a loop, are inlined and optimised with the region. Its pointer parameters are not
    `noalias` (its kernels' are): a loop hands one trip's outputs to the next trip as inputs,
    and with both levels' alias scopes inlined into the loop, LLVM forwarded a value stored
    by one trip past a later store of the same trip into the next trip's load (carries that
    swap places came out one trip stale)."""
    INLINE_KERNELS = True

    def __init__(self, module, fn, plan, name, arena):
        self.module = module
        self.parts = [module]
        self.max_parts = 1
        self.fn = fn
        self.plan = plan
        n, m = len(fn.invars), len(fn.outvars)
        fnty = ir.FunctionType(T.VOID, [T.PTR] * (n + m + 1 + arena))
        self.function = ir.Function(module, fnty, module.get_unique_name(name))
        self.function.linkage = "internal"
        self.function.attributes.add("nounwind")
        names = [v.name for v in fn.invars] + [f"out{j}" for j in range(m)] + ["workspace"]
        for arg, arg_name in zip(self.function.args, names):
            arg.name = arg_name   # not `noalias`: see the class docstring
        self.pointers = list(self.function.args[:n + m + 1])
        self.n = n
        self.arena = self.function.args[-1] if arena else None
        self.builder = ir.IRBuilder(self.function.append_basic_block("entry"))

    def emit(self):
        self.emit_equations()
        self.builder.ret_void()


class RegionFunction:
    """A region compiled into the module: its `function`, whether it takes the arena."""
    __slots__ = ("function", "arena", "region")

    def __init__(self, function, arena, region):
        self.function = function
        self.arena = arena
        self.region = region   # keeps the Function alive while its id keys the cache


_REGIONS = weakref.WeakKeyDictionary()  # ir.Module -> {(id(fn), keep, donated): RegionFunction}
_KERNELS = weakref.WeakKeyDictionary()   # ir.Module -> {(structure text, extras): ir.Function}


def restrict(fn, keep):
    """`fn` computing only its outputs `keep` (indices; None: all of them)."""
    if keep is None or tuple(keep) == tuple(range(len(fn.outvars))):
        return fn
    return Function(fn.name, fn.invars, fn.eqns, [fn.outvars[j] for j in keep])


def region_function(module, fn, keep=None, donated=()):
    """The internal function of region `fn` (its outputs `keep` only; `donated`: (input,
    output) pairs it computes in place, a loop's carries), emitted once per module."""
    if keep is not None and tuple(keep) == tuple(range(len(fn.outvars))):
        keep = None
    cache = _REGIONS.setdefault(module, {})
    hit = cache.get((id(fn), keep, donated))
    if hit is None:
        region = restrict(fn, keep)
        arena = lower_tapes.uses_arena(region)
        plan = plan_function(region, {i: {j} for i, j in donated})
        emitter = _Region(module, region, plan, f"region.{fn.name}", arena)
        emitter.emit()
        hit = cache[(id(fn), keep, donated)] = RegionFunction(emitter.function, arena, fn)
    return hit
