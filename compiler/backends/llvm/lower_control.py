"""Structured control flow as native branches and loops: cond, while_loop, scan, and the calls
of custom_jvp_call / custom_vjp_call / custom_vmap_call / user_primitive / remat / linear_solve
/ root that reach a backend (their `call`/`body`/`solve` region, run once).

Every region (a closed SSA Function in the equation's params, compiler/primitives/control.py)
becomes one internal function of the module (codegen.region_function), compiled like the
top-level function: storage planned by plan_storage, one kernel per equation, and the signature

    void region(ptr in..., ptr out..., ptr workspace [, ptr arena])

(`noalias` pointers: a caller never passes an output that overlaps an input). The region's
workspace is part of the equation's *scratch* (its `LLVM_SCRATCH` rule), which the parent's plan
reserves for the equation's duration, so nested control flow needs no allocation at run time.

cond      the clamped index selects one call (a `switch`; a bool picks branch 0 for False).
while_loop / scan   a loop around calls of the regions. A carry lives in two buffers, the
          equation's output and a scratch buffer, used in turn (ping-pong): each trip reads the
          carry where the last one wrote it and writes the other buffer, so trips copy nothing.
          The first trip reads the initial value where it is (a literal is stored into the
          output first); after the loop the carry is copied into the output only when the last
          trip wrote the scratch buffer (or no trip ran). A carry the body returns unchanged is
          a loop constant: the region is compiled without that output and the carry is copied
          once at the end. A carry the body can update in place (its storage plan, with the
          carry's input donated for its output, computes the new value over the old one: a
          row set with `x.at[i].set(...)` in a fori_loop) lives in the equation's output for
          the whole loop: its initial value is copied there once (or is there already when the
          parent's plan computes the loop in place on it: its `LLVM_INPLACE` rule) and every
          trip updates it in place, copying nothing. scan hands the body pointers into its
          operands (slice i of each scanned operand, which is contiguous) and into its stacked
          outputs (slice i of each y), so slices are never copied; `reverse` walks i downwards.
"""
import functools

import llvmlite.ir as ir

from ...ir.ssa import Var
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_INPLACE, LLVM_SCRATCH
from . import ltypes as T
from .buffers import nbytes
from .calls import intrinsic
from .externs import stack_slot
from .loops import counted_loop

ALIGN = 64


def _codegen():
    from . import codegen   # codegen imports this module to register its rules
    return codegen


def _round(n):
    return -(-n // ALIGN) * ALIGN


@functools.lru_cache(maxsize=256)
def _plan(fn, keep=None, donated=()):
    """The storage plan of region `fn` restricted to its outputs `keep`, with its inputs
    `donated` ((input, output) pairs; cached: loops plan their bodies several times)."""
    codegen = _codegen()
    return codegen.plan_function(codegen.restrict(fn, keep),
                                 {i: {j} for i, j in donated})


def _workspace(fn, keep=None, donated=()):
    return _plan(fn, keep, donated).workspace


def _pointer(builder, buf):
    """A pointer to a buffer's data (a literal is stored into a stack slot first)."""
    if buf.const is None:
        return buf.ptr
    value = buf.const
    if buf.aval.dtype.kind == "b":
        value = builder.zext(value, T.I8)
    return stack_slot(builder, value)


def _call(ctx, fn, ins, outs, workspace, keep=None, donated=()):
    """Call region `fn` (only its outputs `keep`, all when None; its inputs `donated` updated
    in place) on pointers."""
    region = _codegen().region_function(ctx.module, fn, keep, donated)
    args = list(ins) + list(outs) + [workspace]
    if region.arena:
        args.append(ctx.arena)
    ctx.builder.call(region.function, args)


def _scratch(ctx, offset=0):
    """A pointer `offset` bytes into the equation's scratch (null when it has none)."""
    if ctx.scratch is None:
        return ir.Constant(T.PTR, None)
    return at_byte(ctx.builder, ctx.scratch, offset)


def at_byte(builder, pointer, offset):
    """`pointer` + `offset` bytes (an int or an i64 value)."""
    if isinstance(offset, int) and offset == 0:
        return pointer
    offset = T.i64(offset) if isinstance(offset, int) else offset
    return builder.gep(pointer, [offset], inbounds=True, source_etype=T.I8)


def copy_bytes(builder, dst, src, size):
    """memcpy of `size` (a Python int) bytes."""
    if size:
        intrinsic(builder, "memcpy", [dst, src, T.i64(size), T.I1(0)], ret=T.VOID,
                  overloads=[T.PTR, T.PTR, T.I64])


# --------------------------------------------------------------------------------- cond

def _cond_scratch(eqn):
    return max(_workspace(br) for br in eqn.params["branches"])


def _cond(ctx, outs, ins, *, branches):
    b = ctx.builder
    ops = [_pointer(b, x) for x in ins[1:]]
    results = [o.ptr for o in outs]
    if len(branches) == 1:
        _call(ctx, branches[0], ops, results, _scratch(ctx))
        return
    which = _clamped_index(b, ins[0], len(branches))
    done = b.append_basic_block("cond.done")
    blocks = [b.append_basic_block(f"cond.branch{k}") for k in range(len(branches))]
    switch = b.switch(which, blocks[-1])
    for k, (block, br) in enumerate(zip(blocks, branches)):
        if k < len(branches) - 1:
            switch.add_case(T.i64(k), block)
        b.position_at_end(block)
        _call(ctx, br, ops, results, _scratch(ctx))
        b.branch(done)
    b.position_at_end(done)


def _clamped_index(builder, index, n):
    """The branch number (i64) that `cond` takes: the index clamped to [0, n - 1]."""
    from .buffers import load
    dtype = index.aval.dtype
    value = load(builder, index, T.i64(0))
    if dtype.kind == "b":
        return builder.zext(value, T.I64)
    cmp = builder.icmp_signed if dtype.kind == "i" else builder.icmp_unsigned
    top = ir.Constant(value.type, n - 1)
    if dtype.kind == "i":
        zero = ir.Constant(value.type, 0)
        value = builder.select(cmp("<", value, zero), zero, value)
    value = builder.select(cmp(">", value, top), top, value)
    return builder.zext(value, T.I64) if value.type.width < 64 else value


# ------------------------------------------------------------------------------ carries

class _Carries:
    """The buffers of a loop's carries (see the module docstring).

    `live[j]`: carry j changes in the body; the others are loop constants. `keep`: the body's
    outputs compiled (live carries, then any other outputs). `inplace`: the live carries the
    body computes in place (buffers.plan_storage with the carry's input donated for its
    output): such a carry lives in the equation's output for the whole loop (its initial
    value copied there first, unless the parent's plan put it there already) and the body
    gets that one buffer as its input and its output; `donated`: those (input, output) pairs
    in the numbering of the restricted body. The other live carries ping-pong (a scratch
    buffer and phis: `pingpong[j]`).
    """

    def __init__(self, body, first, count, n_other=0):
        ins, outs = body.invars[first:first + count], body.outvars[:count]
        self.live = [not (isinstance(o, Var) and o is i) for o, i in zip(outs, ins)]
        self.keep = tuple([j for j, z in enumerate(self.live) if z] +
                          list(range(count, count + n_other)))
        candidates = tuple((first + j, pos) for pos, j in enumerate(self.keep) if j < count)
        held = _plan(body, self.keep, candidates).held
        self.donated = tuple((i, pos) for i, pos in candidates if pos in held)
        self.inplace = {self.keep[pos] for _, pos in self.donated}
        self.pingpong = [z and j not in self.inplace for j, z in enumerate(self.live)]
        self.sizes = [nbytes(v.aval) for v in ins]
        self.offsets, at = [], 0
        for size, z in zip(self.sizes, self.pingpong):
            self.offsets.append(at if z else None)
            at += _round(size) if z else 0
        self.bytes = at

    def start(self, builder, inits, outs):
        """The carries' first read pointers (literals stored into the outputs, carries
        computed in place copied there)."""
        firsts = []
        for j, (init, out) in enumerate(zip(inits, outs)):
            if init.const is not None:
                value = init.const
                if init.aval.dtype.kind == "b":
                    value = builder.zext(value, T.I8)
                builder.store(value, out.ptr)
                firsts.append(out.ptr)
            elif j in self.inplace:
                if init is not out:   # not already there (codegen shares the Buffer)
                    copy_bytes(builder, out.ptr, init.ptr, self.sizes[j])
                firsts.append(out.ptr)
            else:
                firsts.append(init.ptr)
        return firsts

    def reads(self, firsts, current):
        """Every carry's read pointer, given the ping-pong ones' current pointers."""
        it = iter(current)
        return [next(it) if z else p for p, z in zip(firsts, self.pingpong)]

    def writes(self, ctx, current, outs):
        """Where this trip writes each live carry: its output for one computed in place, else
        the buffer it does not read."""
        b = ctx.builder
        it = iter(current)
        out = []
        for j, (o, off, z) in enumerate(zip(outs, self.offsets, self.live)):
            if j in self.inplace:
                out.append(o.ptr)
            elif z:
                r = next(it)
                out.append(b.select(b.icmp_unsigned("==", r, o.ptr), _scratch(ctx, off), o.ptr))
        return out

    def moved(self, writes):
        """The ping-pong carries' pointers among `writes` (the next trip's `current`)."""
        live = [j for j, z in enumerate(self.live) if z]
        return [w for j, w in zip(live, writes) if self.pingpong[j]]

    def pairs(self, num_consts):
        """(result, operand) pairs of the loop equation computed in place
        (its `LLVM_INPLACE` rule): a carry the body updates in place may also take the
        storage of its initial value."""
        return [(j, num_consts + j) for j in sorted(self.inplace)]

    def finish(self, builder, reads, outs):
        """Copy each carry into its output unless it is already there."""
        for r, o, size in zip(reads, outs, self.sizes):
            if not size:
                continue
            with builder.if_then(builder.icmp_unsigned("!=", r, o.ptr)):
                copy_bytes(builder, o.ptr, r, size)


# --------------------------------------------------------------------------- while_loop

def _while_layout(eqn):
    """(carries, flag offset, region workspace offset, scratch bytes) of a while_loop."""
    p = eqn.params
    k = p["num_consts"]
    carries = _Carries(p["body_fn"], k, len(eqn.outvars))
    flag = carries.bytes
    ws = flag + ALIGN
    need = max(_workspace(p["cond_fn"]),
               _workspace(p["body_fn"], carries.keep, carries.donated))
    return carries, flag, ws, ws + need


def _while_scratch(eqn):
    return _while_layout(eqn)[3]


def _while(ctx, outs, ins, *, cond_fn, body_fn, num_consts):
    b = ctx.builder
    carries, flag_at, ws_at, _ = _while_layout(ctx.eqn)
    consts = [_pointer(b, x) for x in ins[:num_consts]]
    firsts = carries.start(b, ins[num_consts:], outs)
    flag, ws = _scratch(ctx, flag_at), _scratch(ctx, ws_at)
    fn = b.function
    pre = b.block
    head, body, done = (fn.append_basic_block(f"while.{n}") for n in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    phis = []
    for p, z in zip(firsts, carries.pingpong):
        if z:
            phi = b.phi(T.PTR)
            phi.add_incoming(p, pre)
            phis.append(phi)
    reads = carries.reads(firsts, phis)
    _call(ctx, cond_fn, consts + reads, [flag], ws)
    going = b.icmp_unsigned("!=", b.load(flag, typ=T.I8), T.I8(0))
    b.cbranch(going, body, done)
    b.position_at_end(body)
    writes = carries.writes(ctx, phis, outs)
    _call(ctx, body_fn, consts + reads, writes, ws, carries.keep, carries.donated)
    for phi, w in zip(phis, carries.moved(writes)):
        phi.add_incoming(w, b.block)
    b.branch(head)
    b.position_at_end(done)
    carries.finish(b, reads, outs)


# --------------------------------------------------------------------------------- scan

def _scan_layout(eqn):
    p = eqn.params
    nk = p["num_carry"]
    body = p["body"]
    carries = _Carries(body, p["num_consts"], nk, len(body.outvars) - nk)
    return carries, carries.bytes, carries.bytes + _workspace(body, carries.keep,
                                                              carries.donated)


def _scan_scratch(eqn):
    return _scan_layout(eqn)[2]


def _scan(ctx, outs, ins, *, body, length, reverse=False, num_consts=0, num_carry=0):
    b = ctx.builder
    nc, nk = num_consts, num_carry
    carries, ws_at, _ = _scan_layout(ctx.eqn)
    consts = [_pointer(b, x) for x in ins[:nc]]
    firsts = carries.start(b, ins[nc:nc + nk], outs[:nk])
    xs, ys = ins[nc + nk:], outs[nk:]
    ws = _scratch(ctx, ws_at)

    def trip(b, i, current):
        at = b.sub(T.i64(length - 1), i) if reverse else i
        x_slices = [at_byte(b, x.ptr, b.mul(at, T.i64(nbytes(x.aval) // length))) for x in xs]
        y_slices = [at_byte(b, y.ptr, b.mul(at, T.i64(nbytes(y.aval) // length))) for y in ys]
        writes = carries.writes(ctx, current, outs[:nk])
        _call(ctx, body, consts + carries.reads(firsts, current) + x_slices,
              writes + y_slices, ws, carries.keep, carries.donated)
        return carries.moved(writes)
    live_firsts = [p for p, z in zip(firsts, carries.pingpong) if z]
    final = counted_loop(b, length, trip, live_firsts, "scan") if length else live_firsts
    carries.finish(b, carries.reads(firsts, final), outs[:nk])


# ------------------------------------------------------------------ calls run as they are

def _inline_call(region_param):
    def scratch(eqn):
        return _workspace(eqn.params[region_param])

    def lower(ctx, outs, ins, **params):
        b = ctx.builder
        _call(ctx, params[region_param], [_pointer(b, x) for x in ins], [o.ptr for o in outs],
              _scratch(ctx))
    return scratch, lower


def _register():
    table = {"cond": (_cond_scratch, _cond), "while_loop": (_while_scratch, _while),
             "scan": (_scan_scratch, _scan), "custom_jvp_call": _inline_call("call"),
             "custom_vjp_call": _inline_call("call"),
             "custom_vmap_call": _inline_call("call"),
             "user_primitive": _inline_call("call"), "remat": _inline_call("body"),
             "linear_solve": _inline_call("solve"), "root": _inline_call("solve")}
    for name, (scratch, lower) in table.items():
        LLVM[PRIMITIVES[name]] = lower
        LLVM_SCRATCH[PRIMITIVES[name]] = scratch
    LLVM_INPLACE[PRIMITIVES["while_loop"]] = \
        lambda eqn: _while_layout(eqn)[0].pairs(eqn.params["num_consts"])
    LLVM_INPLACE[PRIMITIVES["scan"]] = \
        lambda eqn: _scan_layout(eqn)[0].pairs(eqn.params["num_consts"])


_register()
