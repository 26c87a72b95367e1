"""Where the values of a compiled function live, and how generated code reads and writes them.

`Buffer`: a contiguous row-major array the generated code works on: a pointer and the SSA
abstract value (or, for a literal operand, the constant itself). `View`: an affine view of a
buffer (element `index` is `buffer[offset + sum(index_k * strides_k)]`): transposes, slices,
reversals, broadcasts and reshapes of contiguous data are views, so that a fused loop reads
them in place. `load`/`store` move one element between memory and a register (bools are bytes
in memory and `i1` in registers).

`plan_storage(fn, aliasing)` decides, before any code is emitted, where every SSA value of the
top-level function lives:
- inputs in the caller's input buffers;
- a result that a function output is, in that output buffer (computed in place, no copy);
- a value of an `aliasing` equation (reshape, squeeze, bitcast: the same bytes read another
  way) in its operand's storage;
- every other value in the workspace, one buffer given to the entry point per call. Offsets
  come from a linear scan over the equations with a first-fit free list: a value's block is
  freed after the last equation that reads it (or any alias of it), so dead temporaries'
  memory is reused. Blocks are 64-byte aligned.
- scratch: an equation whose primitive has `rules["llvm_scratch"](eqn) -> bytes` (sort's
  merge buffers) gets that many workspace bytes for its own duration (`Plan.scratch[eqn]`, a
  byte offset), placed like a temporary that dies with the equation.
Outputs that could not be computed in place (an input or a literal returned, one value
returned twice, an alias returned) are copied at the end (`Plan.copies`).
"""
from ...ir.ssa import Var
from . import ltypes as T
from .loops import contiguous_strides

ALIGN = 64


class Buffer:
    __slots__ = ("ptr", "aval", "const")

    def __init__(self, ptr, aval, const=None):
        self.ptr = ptr
        self.aval = aval
        self.const = const

    def view(self):
        return View(self, 0, contiguous_strides(self.aval.shape), self.aval.shape)

    def __repr__(self):
        return f"Buffer({self.aval.str_short()})"


class View:
    __slots__ = ("buffer", "offset", "strides", "shape")

    def __init__(self, buffer, offset, strides, shape):
        self.buffer = buffer
        self.offset = offset
        self.strides = tuple(strides)
        self.shape = tuple(shape)


def element_pointer(builder, buffer, offset):
    return builder.gep(buffer.ptr, [offset], inbounds=True,
                       source_etype=T.mem_type(buffer.aval.dtype))


def load(builder, buffer, offset):
    """The element at `offset` (an i64 value) of `buffer`, as a register value."""
    if buffer.const is not None:
        return buffer.const
    dtype = buffer.aval.dtype
    value = builder.load(element_pointer(builder, buffer, offset), typ=T.mem_type(dtype))
    if dtype.kind == "b":
        return builder.icmp_unsigned("!=", value, T.I8(0))
    return value


def store(builder, buffer, offset, value):
    if buffer.aval.dtype.kind == "b":
        value = builder.zext(value, T.I8)
    builder.store(value, element_pointer(builder, buffer, offset))


def nbytes(aval):
    return aval.size * aval.dtype.itemsize


# ------------------------------------------------------------------------- storage plan

class Plan:
    """`where[var]`: ("in", i) | ("out", j) | ("ws", byte offset) | ("alias", var);
    `copies`: (output index, operand) pairs filled at the end; `scratch[eqn]`: the byte
    offset of an equation's scratch space; `workspace`: bytes."""
    __slots__ = ("where", "copies", "scratch", "workspace")


def plan_storage(fn, aliasing, scratch=lambda eqn: 0):
    """Storage of every value of `fn` (see the module docstring). `aliasing(eqn)` says whether
    an equation's single result may share its operand's storage; `scratch(eqn)` how many
    workspace bytes it needs while it runs."""
    plan = Plan()
    where = {v: ("in", i) for i, v in enumerate(fn.invars)}
    producers = {v: e for e in fn.eqns for v in e.outvars}
    copies = []
    for j, v in enumerate(fn.outvars):
        if isinstance(v, Var) and v in producers and v not in where:
            where[v] = ("out", j)
        else:
            copies.append((j, v))
    for eqn in fn.eqns:
        src = eqn.invars[0] if eqn.invars else None
        if aliasing(eqn) and isinstance(src, Var) and eqn.outvars[0] not in where:
            where[eqn.outvars[0]] = ("alias", src)
    plan.where = where
    plan.copies = copies
    plan.scratch = {}
    plan.workspace = _assign_workspace(fn, where, scratch, plan.scratch)
    return plan


def root(where, v):
    """The value whose storage `v` uses (following aliases)."""
    while where.get(v, ("",))[0] == "alias":
        v = where[v][1]
    return v


def _assign_workspace(fn, where, scratch, scratch_at):
    last = {}
    for i, eqn in enumerate(fn.eqns):
        for v in eqn.outvars:
            last.setdefault(root(where, v), i)
        for v in eqn.invars:
            if isinstance(v, Var):
                last[root(where, v)] = i
    for v in fn.outvars:
        if isinstance(v, Var):
            last[root(where, v)] = len(fn.eqns)
    free_after = {}
    for v, i in last.items():
        free_after.setdefault(i, []).append(v)
    heap = _FirstFit()
    for i, eqn in enumerate(fn.eqns):
        for v in eqn.outvars:
            if v not in where:
                where[v] = ("ws", heap.allocate(_round_up(nbytes(v.aval))))
        extra = _round_up(scratch(eqn))
        if extra:
            scratch_at[eqn] = heap.allocate(extra)
            heap.release(scratch_at[eqn], extra)   # free again once the equation is done
        for v in free_after.get(i, ()):
            if where[v][0] == "ws":
                heap.release(where[v][1], _round_up(nbytes(v.aval)))
    return heap.top


def _round_up(n):
    return -(-n // ALIGN) * ALIGN


class _FirstFit:
    """Offsets in a growing arena; released blocks are reused, neighbours coalesce."""

    def __init__(self):
        self.free = []      # sorted (offset, size)
        self.top = 0

    def allocate(self, size):
        if size == 0:
            return 0
        for k, (off, n) in enumerate(self.free):
            if n >= size:
                if n == size:
                    del self.free[k]
                else:
                    self.free[k] = (off + size, n - size)
                return off
        off, self.top = self.top, self.top + size
        return off

    def release(self, off, size):
        if size == 0:
            return
        self.free.append((off, size))
        self.free.sort()
        merged = []
        for o, n in self.free:
            if merged and merged[-1][0] + merged[-1][1] == o:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((o, n))
        self.free = merged
