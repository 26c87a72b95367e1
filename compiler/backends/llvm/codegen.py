"""SSA Function -> one LLVM module with one entry point, `kiln_main`.

    i32 @kiln_main(ptr %args)    ; args: n input pointers, m output pointers, the workspace

(contiguous row-major arrays, bools one byte each; returns 0). The storage of every value is
planned first (buffers.py: outputs computed in place, temporaries in the workspace by liveness,
reshapes as aliases). Then each equation becomes one internal function, a *kernel*, whose
pointer parameters are `noalias` (the plan never lets a result overlap a live operand, so
LLVM may vectorise without runtime overlap checks), and `kiln_main` calls the kernels in
program order (the optimiser inlines them). Outputs the plan could not compute in place are
copied at the end.

A kernel's body comes from the primitive's lowering rule:
- `rules["llvm"](ctx, outs, ins, **params)`: `ctx` is the `Kernel` (its `builder` is positioned
  in the kernel function), `outs`/`ins` are `Buffer`s (a literal operand is a Buffer holding a
  constant); the rule emits loops and calls. `fusion`, reductions, shape operations,
  cumulative ops and dot_general have such rules.
- otherwise `rules["llvm_scalar"]` (elementwise primitives): the equation is lowered as a
  fused group of one (lower_fused.py).
A primitive with neither, or an operand of a dtype the backend cannot handle (complex), is a
CompileError naming the primitive, its dtype and the user's line.
"""
import hashlib

import llvmlite.ir as ir

from ...errors import CompileError
from ...ir.ssa import Literal
from . import ltypes as T
from .buffers import Buffer, plan_storage, nbytes
from .calls import intrinsic
from . import target

# Importing the lowering modules registers their rules on the primitives.
from . import lower_elementwise  # noqa: F401
from . import lower_fused
from . import lower_structural
from . import lower_reductions  # noqa: F401
from . import lower_linalg  # noqa: F401
from . import lower_indexing  # noqa: F401
from . import lower_sorting  # noqa: F401


class Kernel:
    """What a lowering rule gets as `ctx`: the module, the kernel function and its builder,
    the equation (for error messages), and `scratch`: a pointer to the workspace bytes the
    primitive's `rules["llvm_scratch"](eqn)` asked for (None when it asks for none)."""
    __slots__ = ("module", "function", "builder", "eqn", "scratch")

    def __init__(self, module, function, builder, eqn, scratch=None):
        self.module = module
        self.function = function
        self.builder = builder
        self.eqn = eqn
        self.scratch = scratch

    def error(self, message):
        return CompileError(message, self.eqn.info)


def module_name(fn, text):
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"kiln.{fn.name}.{digest}"


def build(fn):
    """(llvmlite ir.Module, storage Plan) of the SSA function `fn`."""
    for eqn in fn.eqns:
        check_lowerable(eqn)
    module = ir.Module(name=module_name(fn, str(fn)))
    module.triple = target.triple()
    plan = plan_storage(fn, lower_structural.aliasing, scratch_bytes)
    _Entry(module, fn, plan).emit()
    return module, plan


def scratch_bytes(eqn):
    rule = eqn.prim.rules.get("llvm_scratch")
    return 0 if rule is None else rule(eqn)


def check_lowerable(eqn):
    """A CompileError if the backend cannot lower `eqn` (missing rule or unsupported dtype)."""
    for x in list(eqn.invars) + list(eqn.outvars):
        if x.aval.dtype.kind not in "biuf":
            raise T.unsupported(f"the primitive {eqn.prim.name!r}", x.aval.dtype, eqn.info)
    rules = eqn.prim.rules
    if "llvm" not in rules and "llvm_scalar" not in rules:
        raise CompileError(f"the LLVM backend has no lowering for the primitive "
                           f"{eqn.prim.name!r} yet", eqn.info,
                           "Compile this function with kiln.jit(..., backend='reference') "
                           "until it has one.")
    for region in eqn.regions():
        for inner in region.eqns:
            check_lowerable(inner)


class _Entry:
    """Emits `kiln_main`: argument unpacking, one kernel call per equation, final copies."""

    def __init__(self, module, fn, plan):
        self.module = module
        self.fn = fn
        self.plan = plan
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

    def buffer(self, x):
        if isinstance(x, Literal):
            return Buffer(None, x.aval, T.const(x.aval.dtype, x.value))
        kind, where = self.plan.where[x]
        if kind == "in":
            return Buffer(self.pointers[where], x.aval)
        if kind == "out":
            return Buffer(self.pointers[self.n + where], x.aval)
        if kind == "alias":
            return Buffer(self.buffer(where).ptr, x.aval)
        return Buffer(self.workspace(where), x.aval)

    def workspace(self, offset):
        ws = self.pointers[-1]
        return self.builder.gep(ws, [T.i64(offset)], inbounds=True, source_etype=T.I8) \
            if offset else ws

    def emit(self):
        for k, eqn in enumerate(self.fn.eqns):
            if eqn.outvars and self.plan.where[eqn.outvars[0]][0] == "alias":
                continue
            self.kernel(eqn, k)
        for j, x in self.plan.copies:
            self.copy(Buffer(self.pointers[self.n + j], x.aval), self.buffer(x))
        self.builder.ret(T.I32(0))

    def kernel(self, eqn, k):
        outs = [self.buffer(v) for v in eqn.outvars]
        ins = [self.buffer(x) for x in eqn.invars]
        pairs = [(buf, x) for buf, x in zip(outs + ins, eqn.outvars + eqn.invars)
                 if buf.const is None]
        scratch = [self.workspace(self.plan.scratch[eqn])] if eqn in self.plan.scratch else []
        fnty = ir.FunctionType(T.VOID, [T.PTR] * (len(pairs) + len(scratch)))
        label = eqn.outvars[0].name if eqn.outvars else k
        fn = ir.Function(self.module, fnty, f"{eqn.prim.name}.{label}")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        inner = {}
        for arg, (buf, x) in zip(fn.args, pairs):
            arg.add_attribute("noalias")
            arg.name = x.name
            inner[id(buf)] = Buffer(arg, buf.aval)
        if scratch:
            fn.args[-1].add_attribute("noalias")
            fn.args[-1].name = "scratch"
        ctx = Kernel(self.module, fn, ir.IRBuilder(fn.append_basic_block("entry")), eqn,
                     fn.args[-1] if scratch else None)
        k_outs = [inner[id(b)] for b in outs]
        k_ins = [inner.get(id(b), b) for b in ins]
        rule = eqn.prim.rules.get("llvm")
        if rule is not None:
            rule(ctx, k_outs, k_ins, **eqn.params)
        else:
            lower_fused.lower_eqn(ctx, eqn, k_outs, k_ins)
        ctx.builder.ret_void()
        self.builder.call(fn, [buf.ptr for buf, _ in pairs] + scratch)

    def copy(self, dst, src):
        b = self.builder
        if src.const is not None:
            b.store(src.const if dst.aval.dtype.kind != "b" else b.zext(src.const, T.I8), dst.ptr)
            return
        size = nbytes(dst.aval)
        if size:
            intrinsic(b, "memcpy", [dst.ptr, src.ptr, T.i64(size), T.I1(0)],
                      ret=T.VOID, overloads=[T.PTR, T.PTR, T.I64])


def _pointer_name(k, n, m):
    if k < n:
        return f"in{k}"
    if k < n + m:
        return f"out{k - n}"
    return "workspace"
