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
  way) in its operand's storage; an output that such an equation makes of a temporary is
  that temporary computed in the output buffer (no copy at the end);
- in place: a result that an equation may compute in the storage of one of its operands
  (`inplace(eqn)`: dynamic_update_slice and scatter update their operand, an elementwise
  fusion writes over an input it reads element by element) takes that storage when nothing
  reads the operand (or anything sharing its storage) afterwards: a temporary updated in a
  loop is never copied. A temporary whose in-place result is an output is computed in the
  output buffer from the start;
- donated inputs (`donated`: {input: outputs it may become}; jit's `donate_argnums`, a loop's
  carries) may be written in place the same way when the result ends up as an output the
  input may hold (tried before an equation's other operands), and an output computed after the last read of such an input is computed in
  its buffer; `Plan.held` {output: input} tells the caller which input buffers are returned
  as outputs;
- every other value in the workspace, one buffer given to the entry point per call. Offsets
  come from a linear scan over the equations with a first-fit free list: a value's block is
  freed after the last equation that reads it (or any alias of it), so dead temporaries'
  memory is reused. Blocks are 64-byte aligned.
- scratch: an equation whose primitive has an `LLVM_SCRATCH` rule, `(eqn) -> bytes` (sort's
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
    """`where[var]`: ("in", i) | ("out", j) | ("ws", byte offset) | ("alias", var) |
    ("share", var) (computed in place: the storage of `var`, see `plan_storage`); `copies`:
    (output index, operand) pairs filled at the end; `scratch[eqn]`: the byte offset of an
    equation's scratch space; `workspace`: bytes; `held`: {output j: input i} for outputs that
    live in a donated input's buffer (the code overwrites input i, and the caller returns
    that buffer as output j)."""
    __slots__ = ("where", "copies", "scratch", "workspace", "held", "written")

    def location(self, v):
        """Where the storage of `v` is: ("in", i), ("out", j) or ("ws", offset)."""
        return self.where[root(self.where, v)]


def no_inplace(eqn):
    return ()


def plan_storage(fn, aliasing, scratch=lambda eqn: 0, inplace=no_inplace, donated=None):
    """Storage of every value of `fn` (see the module docstring). `aliasing(eqn)` says whether
    an equation's single result may share its operand's storage; `scratch(eqn)` how many
    workspace bytes it needs while it runs; `inplace(eqn)`: (result j, operand i) pairs it may
    compute in place; `donated`: {input i: the output indices whose buffer input i may
    become}. A donated input the code would overwrite without holding an output in the end is
    planned again as not donated."""
    donated = dict(donated or {})
    while True:
        plan = _plan(fn, aliasing, scratch, inplace, donated)
        unused = plan.written - set(plan.held.values())
        if not unused:
            return plan
        for i in unused:
            del donated[i]


def _plan(fn, aliasing, scratch, inplace, donated):
    where = {v: ("in", i) for i, v in enumerate(fn.invars)}
    producers = {v: e for e in fn.eqns for v in e.outvars}
    places = _Places(fn, where, donated)
    for j, v in enumerate(fn.outvars):
        if isinstance(v, Var) and v in producers and v not in where:
            where[v] = ("out", j)
        elif not places.return_input(j, v):
            places.copies.append((j, v))
    for j, v in enumerate(fn.outvars):
        if where.get(v) == ("out", j):
            _output_through_aliases(v, j, producers, aliasing, where)
    for eqn in fn.eqns:
        src = eqn.invars[0] if eqn.invars else None
        if aliasing(eqn) and isinstance(src, Var) and eqn.outvars[0] not in where:
            where[eqn.outvars[0]] = ("alias", src)
    places.group()
    for k, eqn in enumerate(fn.eqns):
        for j, i in places.donated_first(eqn, inplace(eqn)):
            places.update_in_place(k, eqn, j, i)
    places.outputs_into_dead_inputs(producers)
    plan = Plan()
    plan.where = where
    plan.copies = places.copies
    plan.held = places.held
    plan.written = places.written
    plan.scratch = {}
    plan.workspace = _assign_workspace(fn, where, scratch, plan.scratch)
    return plan


def _output_through_aliases(v, j, producers, aliasing, where):
    """Output j, `v`, made by `aliasing` equations of a temporary placed nowhere yet: the
    temporary takes output j's buffer and `v` aliases it."""
    eqn = producers[v]
    while aliasing(eqn) and isinstance(eqn.invars[0], Var) and eqn.invars[0] in producers \
            and eqn.invars[0] not in where:
        src = eqn.invars[0]
        where[src], where[v] = ("out", j), ("alias", src)
        v, eqn = src, producers[src]


class _Places:
    """The in-place part of planning (`_plan`): values computed in the storage of an operand
    that dies at their equation, and outputs computed in donated inputs.

    A *class* is the values sharing one storage (a root, its aliases and in-place results):
    `members[root]`. An equation's result j may take operand i's storage when no member of the
    operand's class is read after the equation, no other operand of it is in that class, and
    the storage may be written: a temporary (the result then lives there: ("share", operand)),
    or, when the result is output j', a temporary placed in output j' from its start, or a
    donated input allowed to hold output j' (then `held[j'] = i`)."""

    def __init__(self, fn, where, donated):
        self.fn = fn
        self.where = where
        self.donated = donated
        self.copies = []
        self.held = {}
        self.written = set()
        self.started = set()   # outputs a temporary was placed in
        self.last = {}
        for k, eqn in enumerate(fn.eqns):
            for x in eqn.invars:
                if isinstance(x, Var):
                    self.last[x] = k
        for v in fn.outvars:
            if isinstance(v, Var):
                self.last[v] = len(fn.eqns)

    def may_hold(self, i, j):
        return j in self.donated.get(i, ()) and i not in self.held.values()

    def return_input(self, j, v):
        """Output j is input v itself: held in place when v is donated for it."""
        spot = self.where.get(v) if isinstance(v, Var) else None
        if spot is None or spot[0] != "in" or not self.may_hold(spot[1], j):
            return False
        self.held[j] = spot[1]
        return True

    def group(self):
        self.members = {}
        for v in list(self.fn.invars) + [v for e in self.fn.eqns for v in e.outvars]:
            self.members.setdefault(root(self.where, v), []).append(v)

    def dies_at(self, r, k):
        return max((self.last.get(m, -1) for m in self.members[r]), default=-1) <= k

    def donated_first(self, eqn, pairs):
        """`pairs` (result j, operand i) with donated inputs' operands first: an output that
        may be computed over a donated input or a dying temporary takes the input (`w - lr *
        dw` in the buffer of `w`, as XLA does), so the donation is used and the temporary
        stays in the workspace."""
        def donated(pair):
            x = eqn.invars[pair[1]]
            spot = self.where.get(root(self.where, x)) if isinstance(x, Var) else None
            return spot is not None and spot[0] == "in" and spot[1] in self.donated
        return sorted(pairs, key=lambda pair: not donated(pair))

    def update_in_place(self, k, eqn, j, i):
        """Result j of equation k in the storage of its operand i, where allowed."""
        x, y = eqn.invars[i], eqn.outvars[j]
        spot_y = self.where.get(y)
        if not isinstance(x, Var) or (spot_y is not None and spot_y[0] != "out"):
            return
        r = root(self.where, x)
        others = [o for n, o in enumerate(eqn.invars) if n != i and isinstance(o, Var)] + \
            [o for o in eqn.outvars if o is not y]    # one result per operand
        if not self.dies_at(r, k) or any(root(self.where, o) is r for o in others):
            return
        output = None if spot_y is None else spot_y[1]
        if output in self.started:   # another temporary lives in that output already
            return
        spot = self.where.get(r)
        if spot is None and output is not None:    # the temporary starts in output j'
            self.where[r] = ("out", output)
            self.started.add(output)
        elif spot is None:
            self.link(y, x)
        elif spot[0] == "in" and spot[1] in self.donated and (
                output is None or self.may_hold(spot[1], output)):
            self.link(y, x)
            self.written.add(spot[1])
            if output is not None:
                self.held[output] = spot[1]

    def link(self, y, x):
        self.where[y] = ("share", x)
        self.members[root(self.where, x)] += self.members.pop(y, [y])

    def outputs_into_dead_inputs(self, producers):
        """An output whose computation starts after every read of a donated input allowed to
        hold it is computed in that input's buffer."""
        eqn_index = {e: k for k, e in enumerate(self.fn.eqns)}
        for j, v in enumerate(self.fn.outvars):
            if self.where.get(root(self.where, v)) != ("out", j):
                continue
            placed = [u for u, spot in self.where.items() if spot == ("out", j)]
            start = min(eqn_index[producers[u]] for u in placed)
            for i, x in enumerate(self.fn.invars):
                if self.may_hold(i, j) and i not in self.written and \
                        self.dies_at(root(self.where, x), start - 1):
                    for u in placed:
                        self.where[u] = ("share", x)
                    self.written.add(i)
                    self.held[j] = i
                    break


def root(where, v):
    """The value whose storage `v` uses (following aliases and in-place results)."""
    while where.get(v, ("",))[0] in ("alias", "share"):
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
