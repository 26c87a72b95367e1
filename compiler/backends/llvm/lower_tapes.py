"""Reverse mode's tapes (compiler/primitives/autodiff.py) in native code.

A tape value is a pointer (object dtype: 8-byte slots; an array of tapes, as vmap makes, is an
array of pointers), the empty tape the null pointer. A non-empty tape points to an immutable
*cell*:

    cell:  [0] the tape below (ptr)  [8] the record's descriptor (ptr)  [16...] the record

The record holds the pushed values one after the other, each at an 8-byte aligned offset (for an
array of tapes, cell i holds slice i of every value). The descriptor is a constant of the module,
an i64 array `[n, record bytes, (code, count, offset) * n]` (`code` names the element type, see
`_CODES`), which is what `tape_add` needs to add two records without knowing their types.

Cells come from a per-call *arena*: `kiln_main` keeps its header on its stack (chunk list,
bump pointer, chunk end, bytes so far, failed flag), cells are bump-allocated from malloc'd
chunks (64 KiB first, each new chunk as large as all earlier ones together), and every chunk is
freed when `kiln_main` returns, so tapes never outlive the call (they never leave it: no
function argument or result is a tape). A failed malloc sets the flag, the push leaves an empty
tape, and `kiln_main` returns `OUT_OF_MEMORY` instead of 0.

  tape_new   null in every slot
  tape_push  a new cell per tape: below = the tape, record = the values (copied)
  tape_pop   per tape: empty -> (empty, zeros); else (below, the record copied out)
  tape_add   per tape pair, the reference's sum "record by record from the top": the first
             min(len a, len b) records are added element by element (tapes inside records
             recursively), the rest is the longer tape's remainder, shared, not copied
             (`kiln.tape_add`, one internal function per module)

Functions and kernels that push or add (`needs_arena`, `uses_arena`) get the arena header
pointer as an extra argument.
"""
import llvmlite.ir as ir

from ...ir.printer import parse_type
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM
from . import ltypes as T
from .buffers import Buffer, store, nbytes
from .calls import c_function, intrinsic
from .externs import opaque
from .loops import counted_loop
from .lower_control import at_byte, copy_bytes

ALLOCATING = frozenset({"tape_push", "tape_add"})
CELL_HEADER = 16
FIRST_CHUNK = 1 << 16
OUT_OF_MEMORY = 2
_CHUNKS, _CUR, _END, _TOTAL, _FAILED = range(5)   # arena header slots (8 bytes each)

# element type codes of record descriptors: (kind, itemsize) -> code
_CODES = {("f", 2): 1, ("f", 4): 2, ("f", 8): 3, ("i", 1): 4, ("i", 2): 5, ("i", 4): 6,
          ("i", 8): 7, ("b", 1): 8, ("O", 8): 9}
_OBJECT = _CODES[("O", 8)]


def uses_arena(fn):
    """Whether `fn` (or a region inside it) pushes or adds tapes."""
    return any(needs_arena(eqn) for eqn in fn.eqns)


def needs_arena(eqn):
    return eqn.prim.name in ALLOCATING or any(uses_arena(r) for r in eqn.regions())


# --------------------------------------------------------------------------- the arena

def _slot(builder, arena, k):
    return builder.gep(arena, [T.i64(k)], inbounds=True, source_etype=T.I64)


def open_arena(builder):
    """An empty arena header on the stack of the function being built (call this in its entry
    block); the header's pointer."""
    arena = opaque(builder.alloca(ir.ArrayType(T.I64, 5), name="arena"))
    for k in range(5):
        builder.store(T.i64(0), _slot(builder, arena, k))
    return arena


def close_arena(builder, arena):
    """Free the arena's chunks; the i32 status: 0, or OUT_OF_MEMORY after a failed malloc."""
    return builder.call(_free_function(builder.module), [arena])


def _internal(module, name, ret, args):
    fn = ir.Function(module, ir.FunctionType(ret, args), name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    return fn


def _free_function(module):
    name = "kiln.arena_free"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = _internal(module, name, T.I32, [T.PTR])
    arena = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    head, body, done = (fn.append_basic_block(n) for n in ("head", "body", "done"))
    first = b.load(_slot(b, arena, _CHUNKS), typ=T.PTR)
    entry = b.block
    b.branch(head)
    b.position_at_end(head)
    chunk = b.phi(T.PTR)
    chunk.add_incoming(first, entry)
    b.cbranch(_is_null(b, chunk), done, body)
    b.position_at_end(body)
    below = b.load(chunk, typ=T.PTR)
    c_function(b, "free", [chunk], T.VOID)
    chunk.add_incoming(below, body)
    b.branch(head)
    b.position_at_end(done)
    failed = b.icmp_unsigned("!=", b.load(_slot(b, arena, _FAILED), typ=T.I64), T.i64(0))
    b.ret(b.select(failed, T.I32(OUT_OF_MEMORY), T.I32(0)))
    return fn


def _is_null(builder, pointer):
    return builder.icmp_unsigned("==", pointer, ir.Constant(T.PTR, None))


def _alloc_function(module):
    """`ptr kiln.arena_alloc(ptr arena, i64 size)`: 16-byte aligned bytes, or null (and the
    failed flag set) when malloc fails."""
    name = "kiln.arena_alloc"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = _internal(module, name, T.PTR, [T.PTR, T.I64])
    arena, size = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fast, slow, fail, grow = (fn.append_basic_block(n) for n in ("fast", "slow", "fail", "grow"))
    size = b.and_(b.add(size, T.i64(15)), T.i64(-16))
    cur = b.load(_slot(b, arena, _CUR), typ=T.PTR)
    new = b.gep(cur, [size], source_etype=T.I8)
    fits = b.icmp_unsigned("<=", b.ptrtoint(new, T.I64),
                           b.ptrtoint(b.load(_slot(b, arena, _END), typ=T.PTR), T.I64))
    b.cbranch(b.and_(fits, b.not_(_is_null(b, cur))), fast, slow)
    b.position_at_end(fast)
    b.store(new, _slot(b, arena, _CUR))
    b.ret(cur)
    b.position_at_end(slow)
    total = b.load(_slot(b, arena, _TOTAL), typ=T.I64)
    need = b.add(size, T.i64(CELL_HEADER))
    chunk = _umax(b, _umax(b, total, T.i64(FIRST_CHUNK)), need)
    memory = c_function(b, "malloc", [chunk], T.PTR)
    b.cbranch(_is_null(b, memory), fail, grow)
    b.position_at_end(fail)
    b.store(T.i64(1), _slot(b, arena, _FAILED))
    b.ret(ir.Constant(T.PTR, None))
    b.position_at_end(grow)
    b.store(b.load(_slot(b, arena, _CHUNKS), typ=T.PTR), memory)
    b.store(memory, _slot(b, arena, _CHUNKS))
    cell = b.gep(memory, [T.i64(CELL_HEADER)], inbounds=True, source_etype=T.I8)
    b.store(b.gep(cell, [size], inbounds=True, source_etype=T.I8), _slot(b, arena, _CUR))
    b.store(b.gep(memory, [chunk], inbounds=True, source_etype=T.I8), _slot(b, arena, _END))
    b.store(b.add(total, chunk), _slot(b, arena, _TOTAL))
    b.ret(cell)
    return fn


def _umax(builder, a, b):
    return builder.select(builder.icmp_unsigned(">", a, b), a, b)


# -------------------------------------------------------------------------- records

def _record(avals):
    """([(code, count, byte offset)] of one cell's record, its size in bytes). A complex value
    is recorded as its parts, floats (records add element by element)."""
    layout, offset = [], 0
    for a in avals:
        kind = "i" if a.dtype.kind == "u" else a.dtype.kind
        parts = 2 if kind == "c" else 1
        code = _CODES[("f" if kind == "c" else kind, a.dtype.itemsize // parts)]
        layout.append((code, a.size * parts, offset))
        offset += -(-nbytes(a) // 8) * 8
    return layout, offset


def _descriptor(module, layout, size):
    words = [len(layout), size] + [w for entry in layout for w in entry]
    name = "kiln.tape.record." + "_".join(map(str, words))
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    ty = ir.ArrayType(T.I64, len(words))
    g = ir.GlobalVariable(module, ty, name)
    g.initializer = ir.Constant(ty, words)
    g.global_constant = True
    g.linkage = "internal"
    g.align = 8
    return g


def _memset0(builder, dst, size):
    if size:
        intrinsic(builder, "memset", [dst, T.I8(0), T.i64(size), T.I1(0)], ret=T.VOID,
                  overloads=[T.PTR, T.I64])


def _slot_pointer(builder, buffer, i):
    return builder.gep(buffer.ptr, [i], inbounds=True, source_etype=T.PTR)


def _for_each_tape(builder, count, body):
    """body(builder, i) for every tape of an array of `count` tapes."""
    if count == 1:
        body(builder, T.i64(0))
    elif count:
        counted_loop(builder, count, lambda b, i, acc: body(b, i) or [], (), "tape")


def _cell_avals(values, tape_rank):
    return [v.aval.update(shape=v.aval.shape[tape_rank:]) for v in values]


# ------------------------------------------------------------------------------ rules

def _tape_new(ctx, outs, ins):
    _memset0(ctx.builder, outs[0].ptr, nbytes(outs[0].aval))


def _tape_push(ctx, outs, ins):
    tape, values = ins[0], ins[1:]
    avals = _cell_avals(values, len(tape.aval.shape))
    layout, size = _record(avals)
    desc = _descriptor(ctx.module, layout, size)
    alloc = _alloc_function(ctx.module)

    def push(b, i):
        cell = b.call(alloc, [ctx.arena, T.i64(CELL_HEADER + size)])
        with b.if_then(b.not_(_is_null(b, cell))):
            b.store(b.load(_slot_pointer(b, tape, i), typ=T.PTR), cell)
            b.store(desc, at_byte(b, cell, 8))
            for v, a, (_, _, off) in zip(values, avals, layout):
                dst = at_byte(b, cell, CELL_HEADER + off)
                if v.const is not None:
                    store(b, Buffer(dst, a), T.i64(0), v.const)
                else:
                    n = nbytes(a)
                    copy_bytes(b, dst, at_byte(b, v.ptr, b.mul(i, T.i64(n))), n)
        b.store(cell, _slot_pointer(b, outs[0], i))
    _for_each_tape(ctx.builder, tape.aval.size, push)


def _tape_pop(ctx, outs, ins, *, types):
    tape, below, values = ins[0], outs[0], outs[1:]
    avals = [parse_type(t) for t in types]
    layout, _ = _record(avals)

    def pop(b, i):
        cell = b.load(_slot_pointer(b, tape, i), typ=T.PTR)
        slices = [(at_byte(b, v.ptr, b.mul(i, T.i64(nbytes(a)))), nbytes(a), off)
                  for v, a, (_, _, off) in zip(values, avals, layout)]
        with b.if_else(_is_null(b, cell)) as (empty, full):
            with empty:   # an empty cotangent tape stands for zeros
                b.store(ir.Constant(T.PTR, None), _slot_pointer(b, below, i))
                for dst, n, _ in slices:
                    _memset0(b, dst, n)
            with full:
                b.store(b.load(cell, typ=T.PTR), _slot_pointer(b, below, i))
                for dst, n, off in slices:
                    copy_bytes(b, dst, at_byte(b, cell, CELL_HEADER + off), n)
    _for_each_tape(ctx.builder, tape.aval.size, pop)


def _tape_add(ctx, outs, ins):
    add = _add_function(ctx.module)

    def cell(b, i):
        a, c = (b.load(_slot_pointer(b, x, i), typ=T.PTR) for x in ins)
        b.store(b.call(add, [ctx.arena, a, c]), _slot_pointer(b, outs[0], i))
    _for_each_tape(ctx.builder, outs[0].aval.size, cell)


# ----------------------------------------------------------- kiln.tape_add (one per module)

def _add_function(module):
    """`ptr kiln.tape_add(ptr arena, ptr a, ptr b)`: see the module docstring. New cells are
    linked top-down as they are made (`link`: where the next cell's address goes)."""
    name = "kiln.tape_add"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = _internal(module, name, T.PTR, [T.PTR, T.PTR, T.PTR])
    arena, a0, b0 = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    head, body, fill, done = (fn.append_basic_block(n) for n in ("head", "body", "fill", "done"))
    fail = fn.append_basic_block("fail")
    result = opaque(b.alloca(T.PTR, name="result"))
    entry = b.block
    b.branch(head)
    b.position_at_end(head)
    pa, pb, link = b.phi(T.PTR, "a"), b.phi(T.PTR, "b"), b.phi(T.PTR, "link")
    for phi, v in ((pa, a0), (pb, b0), (link, result)):
        phi.add_incoming(v, entry)
    both = b.and_(b.not_(_is_null(b, pa)), b.not_(_is_null(b, pb)))
    b.cbranch(both, body, done)
    b.position_at_end(body)
    desc = b.load(at_byte(b, pa, 8), typ=T.PTR)
    size = b.load(b.gep(desc, [T.i64(1)], inbounds=True, source_etype=T.I64), typ=T.I64)
    cell = b.call(_alloc_function(module), [arena, b.add(size, T.i64(CELL_HEADER))])
    b.cbranch(_is_null(b, cell), fail, fill)
    b.position_at_end(fail)
    b.ret(ir.Constant(T.PTR, None))
    b.position_at_end(fill)
    b.store(cell, link)
    b.store(desc, at_byte(b, cell, 8))
    _add_records(b, fn, arena, desc, *(at_byte(b, p, CELL_HEADER) for p in (cell, pa, pb)))
    latch = b.block
    pa.add_incoming(b.load(pa, typ=T.PTR), latch)
    pb.add_incoming(b.load(pb, typ=T.PTR), latch)
    link.add_incoming(cell, latch)
    b.branch(head)
    b.position_at_end(done)
    b.store(b.select(_is_null(b, pa), pb, pa), link)
    b.ret(b.load(result, typ=T.PTR))
    return fn


_ELEMENT = {1: ir.HalfType(), 2: ir.FloatType(), 3: ir.DoubleType(), 4: T.I8, 5: ir.IntType(16),
            6: T.I32, 7: T.I64, 8: T.I8, 9: T.PTR}


def _add_elements(b, self_fn, arena, code, x, y):
    if code <= 3:
        return b.fadd(x, y)
    if code == 8:
        return b.or_(x, y)
    if code == _OBJECT:
        return b.call(self_fn, [arena, x, y])
    return b.add(x, y)


def _add_records(b, self_fn, arena, desc, out, x, y):
    """out = x + y, value by value, dispatching on each value's element code."""
    def word(k):
        return b.load(b.gep(desc, [k], inbounds=True, source_etype=T.I64), typ=T.I64)

    def value(b_, v, acc):
        base = b.add(b.mul(v, T.i64(3)), T.i64(2))
        code, count = word(base), word(b.add(base, T.i64(1)))
        off = word(b.add(base, T.i64(2)))
        merge = b.append_basic_block("value.done")
        switch = b.switch(code, merge)
        for c, ty in _ELEMENT.items():
            block = b.append_basic_block(f"code{c}")
            switch.add_case(T.i64(c), block)
            b.position_at_end(block)
            ptrs = [at_byte(b, p, off) for p in (out, x, y)]

            def element(b2, k, acc2, ty=ty, c=c, ptrs=ptrs):
                o, xp, yp = (b2.gep(p, [k], inbounds=True, source_etype=ty) for p in ptrs)
                b2.store(_add_elements(b2, self_fn, arena, c, b2.load(xp, typ=ty),
                                       b2.load(yp, typ=ty)), o)
                return acc2
            counted_loop(b, count, element, (), f"add{c}")
            b.branch(merge)
        b.position_at_end(merge)
        return acc
    counted_loop(b, word(T.i64(0)), value, (), "value")


LLVM[PRIMITIVES["tape_new"]] = _tape_new
LLVM[PRIMITIVES["tape_push"]] = _tape_push
LLVM[PRIMITIVES["tape_pop"]] = _tape_pop
LLVM[PRIMITIVES["tape_add"]] = _tape_add
