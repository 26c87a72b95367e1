"""Lowerings of the collectives across the replicas of pmap and shard_map: psum, pmax, pmin,
axis_index, all_gather, psum_scatter, ppermute, all_to_all.

The replicas of a pmapped function run the same compiled code at once, one per thread. Each
thread's *replica record* (replica_context.py) is found with `pthread_getspecific` on the key
`kiln_replica_key` (both load-time externs):

    record = {i64 index, i64 size, ptr slots, ptr barrier, i64 process, i64 status}

`slots` holds one pointer per replica, shared by the group; `barrier` points at the group's
barrier words `{i64 arrived, i64 generation, i64 broken}`, waited on by `kiln.replica_barrier`
(defined once per module): the last replica to arrive resets `arrived` and bumps `generation`;
the others spin on `generation` (`sched_yield` between reads after the first `SPIN`, so 8
replicas on 2 cores give their cores to the replicas still computing) until it moves or
`broken` is set (replica_context: a replica that failed breaks the barrier, so the others
finish instead of waiting for it). A collective is one exchange:

    slots[index] = operand pointer;  barrier
    result = f(every replica's operand, index)  -- read through slots
    barrier                                      -- no operand is overwritten before all read

so every replica computes its own result from its *members'* operands in place, combining them
in member order: a psum's bits are the same on every member and equal the reference backend's
(compiler/primitives/replicas.py), the oracle of the tests. The members of a collective over
pmap's axis are all the replicas; on a shard_map mesh (the collective's `mesh_axes` param) they
are the replicas that differ from this one only along the collective's axes, row-major over
them (`_Replica.member`, index arithmetic with the mesh's strides as constants). Every replica
takes part in every barrier. A literal operand is stored to a stack slot first.

- psum/pmax/pmin: the result starts as replica 0's operand and folds in the others in order
  (loops over contiguous elements, vectorised);
- axis_index: the record's index;
- all_gather: the result viewed as [pre, size, post] (pre: the operand's elements before the
  gather dimension, post: from it on) gets replica q's [pre, post] at [:, q, :];
- psum_scatter: the operand viewed as [pre, size, post], the result [pre, post] the sum over
  replicas of their [:, index, :];
- ppermute: the operand of the source of this replica (a table by index), or zeros;
- all_to_all: block `index` of every replica q's split axis, at place q of the concat axis
  (an element-by-element copy through the row-major flat index of the block).
"""
import math

import numpy as np
import llvmlite.ir as ir

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM
from ...primitives.collectives import sources, axis_names
from ...primitives.replicas import strides
from ...errors import BackendUnsupportedError
from .. import mpi_engine
from . import ltypes as T
from . import externs
from .replica_context import RECORD as _RECORD, STATUS_FIELD
from .buffers import Buffer, load, store, nbytes
from .calls import intrinsic
from .loops import counted_loop
from .lower_elementwise import max_value, min_value
from .lower_reductions import _sum as add_value

_GETSPECIFIC = ir.FunctionType(T.PTR, [T.I32])
_YIELD = ir.FunctionType(T.I32, [])
_BARRIER_WORDS = ir.ArrayType(T.I64, 3)   # arrived, generation, broken
BARRIER_NAME = "kiln.replica_barrier"
SPIN = 100


def _barrier_function(module):
    """`void kiln.replica_barrier(ptr words, i64 parties)`, defined once per module."""
    existing = module.globals.get(BARRIER_NAME)
    if existing is not None:
        return existing
    fn = ir.Function(module, ir.FunctionType(T.VOID, [T.PTR, T.I64]), BARRIER_NAME)
    fn.linkage = "internal"
    words, parties = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def word(k):
        return b.gep(words, [T.i64(0), T.I32(k)], source_etype=_BARRIER_WORDS)
    generation = b.load_atomic(word(1), "acquire", 8, typ=T.I64)
    before = b.atomic_rmw("add", word(0), T.i64(1), "acq_rel")
    last = b.icmp_unsigned("==", before, b.sub(parties, T.i64(1)))
    release, wait, done = (fn.append_basic_block(n) for n in ("release", "wait", "done"))
    b.cbranch(last, release, wait)
    b.position_at_end(release)
    b.atomic_rmw("xchg", word(0), T.i64(0), "monotonic")
    b.atomic_rmw("add", word(1), T.i64(1), "release")
    b.branch(done)
    b.position_at_end(wait)
    spins = b.phi(T.I64)
    spins.add_incoming(T.i64(0), release.function.entry_basic_block)
    moved = b.icmp_unsigned("!=", b.load_atomic(word(1), "acquire", 8, typ=T.I64), generation)
    broken = b.icmp_unsigned("!=", b.load_atomic(word(2), "acquire", 8, typ=T.I64), T.i64(0))
    again = fn.append_basic_block("again")
    b.cbranch(b.or_(moved, broken), done, again)
    b.position_at_end(again)
    tired = b.icmp_unsigned(">=", spins, T.i64(SPIN))
    with b.if_then(tired):
        externs.call(b, "kiln_sched_yield", _YIELD, [])
    spins.add_incoming(b.add(spins, T.i64(1)), b.block)
    b.branch(wait)
    b.position_at_end(done)
    b.ret_void()
    return fn


class _Replica:
    """This thread's replica record, read at the start of a collective, and the members of
    the collective over `names` (replicas.py): with `mesh_axes` (a shard_map mesh) the
    replicas differing from this one only along `names`, row-major over them; without, every
    replica (pmap)."""

    def __init__(self, builder, names=(), mesh_axes=None):
        key = builder.load(externs.declare(builder.module, "kiln_replica_key"), typ=T.I64)
        record = externs.call(builder, "kiln_pthread_getspecific", _GETSPECIFIC,
                              [builder.trunc(key, T.I32)])
        fields = [builder.load(builder.gep(record, [T.i64(0), T.I32(k)], source_etype=_RECORD),
                               typ=t) for k, t in enumerate(_RECORD.elements)]
        self.index, self.size, self.slots, self.barrier, self.process, _ = fields
        self.record = record
        self.mesh = mesh_axes
        self.names = tuple(names)
        if mesh_axes is None:
            self.count, self.position, self._base = self.size, self.index, None
            return
        b, step, sizes = builder, strides(mesh_axes), dict(mesh_axes)
        self.count = T.i64(math.prod(sizes[n] for n in names))
        coords = {n: self.coordinate(b, n) for n in names}
        self._base = b.sub(self.index, _sum(b, [b.mul(coords[n], T.i64(step[n]))
                                                for n in names]))
        position = T.i64(0)
        for n in names:
            position = b.add(b.mul(position, T.i64(sizes[n])), coords[n])
        self.position = position

    def coordinate(self, builder, name):
        """This replica's coordinate along mesh axis `name`."""
        if self.mesh is None:
            return self.index
        step, size = strides(self.mesh)[name], dict(self.mesh)[name]
        return builder.urem(builder.udiv(self.index, T.i64(step)), T.i64(size))

    def member(self, builder, k):
        """The flat index of member `k` (an i64 value, 0 <= k < count)."""
        if self._base is None:
            return k
        b, step, sizes = builder, strides(self.mesh), dict(self.mesh)
        index = self._base
        for n in reversed(self.names):
            index = b.add(index, b.mul(b.urem(k, T.i64(sizes[n])), T.i64(step[n])))
            k = b.udiv(k, T.i64(sizes[n]))
        return index

    def slot(self, builder, replica):
        return builder.gep(self.slots, [replica], source_etype=T.PTR)

    def publish(self, builder, pointer):
        builder.store(pointer, self.slot(builder, self.index))
        self.wait(builder)

    def peer(self, builder, k, aval):
        """Member `k`'s operand."""
        pointer = builder.load(self.slot(builder, self.member(builder, k)), typ=T.PTR)
        return Buffer(pointer, aval)

    def wait(self, builder):
        builder.call(_barrier_function(builder.module), [self.barrier, self.size])


def _field(builder, record, k):
    return builder.gep(record, [T.i64(0), T.I32(k)], source_etype=_RECORD)


def _sum(builder, values):
    total = T.i64(0)
    for v in values:
        total = builder.add(total, v)
    return total


def _operand(builder, buffer):
    """A pointer to the operand's elements (a literal stored to a stack slot)."""
    if buffer.const is None:
        return buffer.ptr
    slot = externs.stack_slot(builder, buffer.const if buffer.aval.dtype.kind != "b"
                              else builder.zext(buffer.const, T.I8))
    return slot


ACROSS = "psum, pmean, pmax, pmin, axis_index and all_gather along axis 0 do"


def _exchange(emit_result, across=None):
    """A rule: publish the operand, `emit_result(builder, replica, out, x)`, wait again; over
    several processes (`processes` > 1), then `across(builder, replica, out, aval, **params)`
    (None: the collective does not cross processes in this backend yet)."""
    def rule(ctx, outs, ins, *, axis_name, mesh_axes=None, processes=1, **params):
        b = ctx.builder
        if processes > 1 and across is None:
            raise BackendUnsupportedError(
                f"the LLVM backend does not run {ctx.eqn.prim.name} across processes yet "
                f"({ACROSS})", ctx.eqn.info)
        replica = _Replica(b, axis_names(axis_name), mesh_axes)
        replica.publish(b, _operand(b, ins[0]))
        emit_result(b, replica, outs[0], ins[0].aval, **params)
        replica.wait(b)
        if processes > 1:
            across(b, replica, outs[0], ins[0].aval)
    return rule


def _allreduce_across(op):
    """After the local reduction (every replica holds it): replica 0 reduces it across the
    processes in place (mpi_engine), storing the engine's status in its record; the others
    copy replica 0's result. Three more barriers: outputs published, reduced, copied."""
    def across(b, replica, out, aval):
        replica.publish(b, out.ptr)
        first = b.icmp_unsigned("==", replica.index, T.i64(0))
        with b.if_then(first):
            status = mpi_engine.emit_allreduce(b, out.ptr, out.ptr, T.i64(aval.size),
                                               aval.dtype, op)
            b.store(b.zext(status, T.I64), _field(b, replica.record, STATUS_FIELD))
        replica.wait(b)
        with b.if_then(b.not_(first)):
            source = replica.peer(b, T.i64(0), aval)
            _copy(b, out.ptr, source.ptr, T.i64(aval.size), aval.dtype.itemsize)
        replica.wait(b)
    return across


def _copy(builder, dst, src, count, itemsize):
    intrinsic(builder, "memcpy", [dst, src, builder.mul(count, T.i64(itemsize)), T.I1(0)],
              ret=T.VOID, overloads=[T.PTR, T.PTR, T.I64])


def _reducing(combine):
    def emit_result(b, replica, out, aval, **params):
        n, dtype = aval.size, aval.dtype
        _copy(b, out.ptr, replica.peer(b, T.i64(0), aval).ptr, T.i64(n), dtype.itemsize)

        def fold(b, q, _):
            peer = replica.peer(b, b.add(q, T.i64(1)), aval)

            def element(b, j, _):
                store(b, out, j, combine(b, load(b, out, j), load(b, peer, j), dtype))
                return []
            counted_loop(b, T.i64(n), element, name="j")
            return []
        counted_loop(b, b.sub(replica.count, T.i64(1)), fold, name="q")
    return emit_result


def _axis_index(ctx, outs, ins, *, axis_name, mesh_axes=None, processes=1):
    b = ctx.builder
    replica = _Replica(b, (axis_name,), mesh_axes)
    position = replica.position
    if processes > 1:   # the global index: process p's replicas follow those of 0 .. p-1
        position = b.add(b.mul(replica.process, replica.size), position)
    store(b, outs[0], T.i64(0), b.trunc(position, T.I32))


def _split(shape, at):
    """(elements before axis `at`, elements from it on) of a row-major shape."""
    return int(np.prod(shape[:at], dtype=np.int64)), int(np.prod(shape[at:], dtype=np.int64))


def _all_gather(b, replica, out, aval, *, all_gather_dimension, tiled, axis_size, first=None,
                **params):
    """Each member's operand into its place along the gathered axis; `first`: the global index
    of this process's first replica (several processes: members are the local replicas)."""
    pre, post = _split(aval.shape, all_gather_dimension)
    size = aval.dtype.itemsize
    element = T.mem_type(aval.dtype)

    def per_replica(b, q, _):
        peer = replica.peer(b, q, aval)
        at = q if first is None else b.add(first, q)

        def block(b, p, _):
            src = b.gep(peer.ptr, [b.mul(p, T.i64(post))], source_etype=element)
            row = b.add(b.mul(p, T.i64(axis_size)), at)
            dst = b.gep(out.ptr, [b.mul(row, T.i64(post))], source_etype=element)
            _copy(b, dst, src, T.i64(post), size)
            return []
        counted_loop(b, T.i64(pre), block, name="p")
        return []
    counted_loop(b, replica.count, per_replica, name="q")


def _all_gather_rule(ctx, outs, ins, *, axis_name, all_gather_dimension, tiled, axis_size,
                     mesh_axes=None, processes=1):
    """all_gather; over several processes (along a leading gathered axis): the local replicas
    fill this process's rows, then replica 0 gathers every process's rows (mpi_engine: its
    send buffer is replica 1's copy of those rows, or with one replica the operand itself)
    and the others copy its result."""
    params = dict(all_gather_dimension=all_gather_dimension, tiled=tiled, axis_size=axis_size)
    if processes == 1:
        return _exchange(_all_gather)(ctx, outs, ins, axis_name=axis_name,
                                      mesh_axes=mesh_axes, **params)
    aval, out = ins[0].aval, outs[0]
    pre, post = _split(aval.shape, all_gather_dimension)
    if pre != 1 or mesh_axes is not None:
        raise BackendUnsupportedError("the LLVM backend gathers across processes only along a "
                                      "leading axis (all_gather(x, axis=0))", ctx.eqn.info)
    b = ctx.builder
    replica = _Replica(b, axis_names(axis_name), mesh_axes)
    local = axis_size // processes
    first = b.mul(replica.process, T.i64(local))
    element = T.mem_type(aval.dtype)
    x = _operand(b, ins[0])
    replica.publish(b, x)
    _all_gather(b, replica, out, aval, first=first, **params)
    replica.wait(b)
    replica.publish(b, out.ptr)
    is_first = b.icmp_unsigned("==", replica.index, T.i64(0))
    with b.if_then(is_first):
        rows = b.mul(first, T.i64(post))
        send = b.gep(replica.peer(b, T.i64(1), aval).ptr, [rows], source_etype=element) \
            if local > 1 else x
        status = mpi_engine.emit_allgather(b, send, out.ptr, T.i64(local * post), aval.dtype)
        b.store(b.zext(status, T.I64), _field(b, replica.record, STATUS_FIELD))
    replica.wait(b)
    with b.if_then(b.not_(is_first)):
        _copy(b, out.ptr, replica.peer(b, T.i64(0), aval).ptr, T.i64(axis_size * post),
              aval.dtype.itemsize)
    replica.wait(b)


def _psum_scatter(b, replica, out, aval, *, scatter_dimension, tiled, axis_size, **params):
    pre, rest = _split(aval.shape, scatter_dimension)
    post = rest // axis_size if axis_size else 0
    dtype = aval.dtype

    def per_replica(b, q, _):
        peer = replica.peer(b, q, aval)

        def element(b, f, _):   # f over [pre, post]: out[f] (+)= peer[p, index, j]
            p, j = b.udiv(f, T.i64(post)), b.urem(f, T.i64(post))
            at = b.add(b.mul(b.add(b.mul(p, T.i64(axis_size)), replica.position), T.i64(post)),
                       j)
            value = load(b, peer, at)
            first = b.icmp_unsigned("==", q, T.i64(0))
            store(b, out, f, b.select(first, value, add_value(b, load(b, out, f), value, dtype)))
            return []
        counted_loop(b, T.i64(pre * post), element, name="f")
        return []
    if pre * post:
        counted_loop(b, T.i64(axis_size), per_replica, name="q")


def _ppermute_rule(ctx, outs, ins, *, axis_name, perm, mesh_axes=None, processes=1):
    b = ctx.builder
    if processes > 1:
        raise BackendUnsupportedError(f"the LLVM backend does not run ppermute across "
                                      f"processes yet ({ACROSS})", ctx.eqn.info)
    replica = _Replica(b, (axis_name,), mesh_axes)
    replica.publish(b, _operand(b, ins[0]))
    out, aval = outs[0], ins[0].aval
    # the source of each replica; the size is the group's, known only at run time, so the
    # table covers every replica a pair names (others receive nothing)
    n = 1 + max([max(s, d) for s, d in perm], default=0)
    src = sources(perm, n)
    table = ir.GlobalVariable(b.module, ir.ArrayType(T.I32, n),
                              b.module.get_unique_name("ppermute.sources"))
    table.initializer = ir.Constant(ir.ArrayType(T.I32, n), [int(s) for s in src])
    table.global_constant = True
    table.linkage = "internal"
    inside = b.icmp_unsigned("<", replica.position, T.i64(n))
    with b.if_else(inside) as (then, otherwise):
        with then:
            entry = b.gep(table, [T.i64(0), replica.position], source_etype=table.value_type)
            from_then = b.load(entry, typ=T.I32)
            then_block = b.block
        with otherwise:
            from_else = T.I32(-1)
            else_block = b.block
    source = b.phi(T.I32)
    source.add_incoming(from_then, then_block)
    source.add_incoming(from_else, else_block)
    nb = nbytes(aval)
    with b.if_else(b.icmp_signed(">=", source, T.I32(0))) as (receive, nothing):
        with receive:
            peer = replica.peer(b, b.sext(source, T.I64), aval)
            _copy(b, out.ptr, peer.ptr, T.i64(aval.size), aval.dtype.itemsize)
        with nothing:
            intrinsic(b, "memset", [out.ptr, T.I8(0), T.i64(nb), T.I1(0)], ret=T.VOID,
                      overloads=[T.PTR, T.I64])
    replica.wait(b)


def _all_to_all(b, replica, out, aval, *, split_axis, concat_axis, tiled, axis_size, **params):
    shape = list(aval.shape)
    k = shape[split_axis] // axis_size if axis_size else 0
    before, after = _split(shape, split_axis)
    a_count = before
    b_count = after // shape[split_axis] * k if shape[split_axis] else 0   # block: [A, k * B]
    block = a_count * b_count
    out_shape = _out_shape(shape, split_axis, concat_axis, tiled, axis_size)
    c2 = _split(out_shape, concat_axis)[1] // axis_size if axis_size else 0
    if not block:
        return

    def per_replica(b, q, _):
        peer = replica.peer(b, q, aval)

        def element(b, f, _):
            a, j = b.udiv(f, T.i64(b_count)), b.urem(f, T.i64(b_count))
            src = b.add(b.mul(b.add(b.mul(a, T.i64(axis_size)), replica.position),
                              T.i64(b_count)), j)
            r, c = b.udiv(f, T.i64(c2)), b.urem(f, T.i64(c2))
            dst = b.add(b.mul(b.add(b.mul(r, T.i64(axis_size)), q), T.i64(c2)), c)
            store(b, out, dst, load(b, peer, src))
            return []
        counted_loop(b, T.i64(block), element, name="f")
        return []
    counted_loop(b, T.i64(axis_size), per_replica, name="q")


def _out_shape(shape, split_axis, concat_axis, tiled, axis_size):
    shape = list(shape)
    if tiled:
        shape[split_axis] = shape[split_axis] // axis_size if axis_size else 0
        shape[concat_axis] *= axis_size
    else:
        del shape[split_axis]
        shape.insert(concat_axis, axis_size)
    return shape


LLVM[PRIMITIVES["psum"]] = _exchange(_reducing(add_value), _allreduce_across("sum"))
LLVM[PRIMITIVES["pmax"]] = _exchange(_reducing(max_value), _allreduce_across("max"))
LLVM[PRIMITIVES["pmin"]] = _exchange(_reducing(min_value), _allreduce_across("min"))
LLVM[PRIMITIVES["axis_index"]] = _axis_index
LLVM[PRIMITIVES["all_gather"]] = _all_gather_rule
LLVM[PRIMITIVES["psum_scatter"]] = _exchange(_psum_scatter)
LLVM[PRIMITIVES["ppermute"]] = _ppermute_rule
LLVM[PRIMITIVES["all_to_all"]] = _exchange(_all_to_all)
