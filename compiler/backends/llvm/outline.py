"""Outlined parallel loops: a kernel's loop split into chunks that run on several threads.

`parallel_range(ctx, pointers, n, grain, emit_chunk)` runs iterations [0, n) of some loop
through `kiln_parallel_for` (parallel.py; the runtime library's, on the thread pool of
pool.py): chunks of whole multiples of `grain` iterations go to whichever thread asks next. It outlines the loop into two internal functions:
- `<kernel>.chunk(ptr env, i64 lo, i64 hi)`, what the threads call: it unpacks the pointers the
  loop uses from `env` (a stack struct the kernel fills) and calls
- `<kernel>.chunk.body(i64 lo, i64 hi, ptr p0, ptr p1, ...)`, whose pointer parameters keep
  the `noalias` attribute the kernel's own parameters had, so the chunk's loops vectorise as
  the kernel's would (LLVM inlines the body into the chunk function, turning the attributes
  into scoped alias metadata). `emit_chunk(ctx, pointer, lo, hi)` emits the loop over
  [lo, hi) into it: `ctx` is the kernel's context positioned in the body, and `pointer(p)` maps
  each pointer value of the kernel to the body's parameter holding it.
Which loops to split, and along which axis, is the caller's decision (lower_fused.py).
"""
import llvmlite.ir as ir

from . import parallel
from . import ltypes as T


class ChunkContext:
    """The kernel's context (`ctx`) with the outlined body's function and builder."""

    def __init__(self, ctx, function, builder):
        self._ctx = ctx
        self.function = function
        self.builder = builder

    def __getattr__(self, name):
        return getattr(self._ctx, name)


def _noalias(value):
    return isinstance(value, ir.Argument) and "noalias" in value.attributes


def parallel_range(ctx, pointers, n, grain, emit_chunk):
    """Emit `emit_chunk` over [0, n) split across threads in chunks of at least `grain`
    iterations (see the module docstring). `pointers`: the distinct pointer values it reads."""
    module = ctx.module
    name = module.get_unique_name(f"{ctx.function.name}.chunk")
    body = ir.Function(module, ir.FunctionType(T.VOID, [T.I64, T.I64] + [T.PTR] * len(pointers)),
                       f"{name}.body")
    body.linkage = "internal"
    body.attributes.add("nounwind")
    lo, hi, *params = body.args
    lo.name, hi.name = "lo", "hi"
    for param, original in zip(params, pointers):
        if _noalias(original):
            param.add_attribute("noalias")
        param.name = original.name
    mapping = {id(p): q for p, q in zip(pointers, params)}
    builder = ir.IRBuilder(body.append_basic_block("entry"))
    emit_chunk(ChunkContext(ctx, body, builder), lambda p: mapping.get(id(p), p), lo, hi)
    builder.ret_void()

    chunk = ir.Function(module, parallel.BODY_TYPE, name)
    chunk.linkage = "internal"
    chunk.attributes.add("nounwind")
    env, c_lo, c_hi = chunk.args
    b = ir.IRBuilder(chunk.append_basic_block("entry"))
    unpacked = parallel.unpack_env(b, env, [T.PTR] * len(pointers)) if pointers else []
    b.call(body, [c_lo, c_hi] + unpacked)
    b.ret_void()

    builder = ctx.builder
    env = parallel.pack_env(builder, list(pointers)) if pointers else ir.Constant(T.PTR, None)
    parallel.emit_parallel_for(builder, chunk, env, n, grain)
