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

Several processes (the `processes` param, from pmap under kiln.distributed: one axis, no
mesh): the axis has `processes` times the local replicas, process p's replica i holding the
global index p * size + i. Each collective exchanges what it can among the local replicas,
then replica 0 makes ONE call of the MPI engine (mpi_engine.py) for the process, storing its
status in its record's status field (raised after the call, as the engine's error: a process
that died makes the others fail at the engine's deadline instead of hanging); barriers order
the steps:

- psum/pmax/pmin: the local reduction, then replica 0's in-place allreduce, copied by the
  others; a process running one replica skips all that: the engine reduces its operand
  straight into its result (a branch on the record's size); axis_index: the global index,
  no exchange;
- all_gather, psum_scatter, all_to_all (`_Staged`): every replica publishes its operand and
  its scratch (the equation's `LLVM_SCRATCH`); each writes its share of the process's send
  buffer in replica 0's scratch (all_gather: its operand; psum_scatter: the sum of the local
  operands' blocks it keeps, for every process; all_to_all: its blocks, by destination),
  replica 0 calls allgather, reduce_scatter or alltoall into the receive buffer after it, and
  each replica takes its result from there;
- ppermute: every replica publishes an exchange record (its operand to its destination's
  process, its result from its source's process: mpi_engine's kiln_mpi_exchange), copies a
  source of its own process itself, and replica 0 exchanges every record at once (sources
  and destinations by global index, from tables of `perm`).
"""
import math

import numpy as np
import llvmlite.ir as ir

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from ...primitives.collectives import sources, axis_names
from ...primitives.replicas import strides
from ...ir.abstract import ShapedArray
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


def operand_pointer(builder, buffer):
    """A pointer to the operand's elements (a literal stored to a stack slot)."""
    if buffer.const is None:
        return buffer.ptr
    slot = externs.stack_slot(builder, buffer.const if buffer.aval.dtype.kind != "b"
                              else builder.zext(buffer.const, T.I8))
    return slot



def _exchange(emit_result, across=None, alone=None):
    """A rule: publish the operand, `emit_result(builder, replica, out, x)`, wait again; over
    several processes (`processes` > 1), then `across(builder, replica, out, aval)`, or, when
    this process runs one replica, `alone(builder, replica, out, x)` instead of all of it."""
    def rule(ctx, outs, ins, *, axis_name, mesh_axes=None, processes=1, **params):
        b = ctx.builder
        replica = _Replica(b, axis_names(axis_name), mesh_axes)
        x = operand_pointer(b, ins[0])

        def local_then_across():
            replica.publish(b, x)
            emit_result(b, replica, outs[0], ins[0].aval, **params)
            replica.wait(b)
            if processes > 1:
                across(b, replica, outs[0], ins[0].aval)
        if processes == 1 or alone is None:
            return local_then_across()
        with b.if_else(b.icmp_unsigned("==", replica.size, T.i64(1))) as (single, several):
            with single:
                alone(b, replica, outs[0], Buffer(x, ins[0].aval))
            with several:
                local_then_across()
    return rule


def _on_first(b, replica, emit_call):
    """Replica 0 makes the process's one engine call (`emit_call()` -> its i32 status), stored
    in its record's status field (raised after the call, replica_context.py); then a barrier."""
    with b.if_then(b.icmp_unsigned("==", replica.index, T.i64(0))):
        status = emit_call()
        b.store(b.zext(status, T.I64), _field(b, replica.record, STATUS_FIELD))
    replica.wait(b)


def _allreduce_across(op):
    """After the local reduction (every replica holds it): replica 0 reduces it across the
    processes in place (mpi_engine); the others copy replica 0's result. Three more barriers:
    outputs published, reduced, copied."""
    def across(b, replica, out, aval):
        replica.publish(b, out.ptr)
        _on_first(b, replica, lambda: mpi_engine.emit_allreduce(
            b, out.ptr, out.ptr, T.i64(aval.size), aval.dtype, op))
        with b.if_then(b.icmp_unsigned("!=", replica.index, T.i64(0))):
            source = replica.peer(b, T.i64(0), aval)
            copy_elements(b, out.ptr, source.ptr, T.i64(aval.size), aval.dtype.itemsize)
        replica.wait(b)
    return across


def _allreduce_alone(op):
    """One replica in this process: the engine reduces its operand across the processes
    straight into its result (no local step, no copy)."""
    def alone(b, replica, out, x):
        _on_first(b, replica, lambda: mpi_engine.emit_allreduce(
            b, x.ptr, out.ptr, T.i64(x.aval.size), x.aval.dtype, op))
    return alone


def copy_elements(builder, dst, src, count, itemsize):
    intrinsic(builder, "memcpy", [dst, src, builder.mul(count, T.i64(itemsize)), T.I1(0)],
              ret=T.VOID, overloads=[T.PTR, T.PTR, T.I64])


def _reducing(combine):
    def emit_result(b, replica, out, aval, **params):
        n, dtype = aval.size, aval.dtype
        copy_elements(b, out.ptr, replica.peer(b, T.i64(0), aval).ptr, T.i64(n), dtype.itemsize)

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


def _copy_rows(b, dst, dst_row, src, src_row, rows, post, dtype):
    """for a in range(rows): dst[dst_row(a)] = src[src_row(a)], each row `post` elements;
    rows are numbered in units of `post` (i64 values)."""
    element = T.mem_type(dtype)

    def row(b, a, _):
        copy_elements(b, b.gep(dst, [b.mul(dst_row(b, a), T.i64(post))], source_etype=element),
              b.gep(src, [b.mul(src_row(b, a), T.i64(post))], source_etype=element),
              T.i64(post), dtype.itemsize)
        return []
    counted_loop(b, T.i64(rows), row, name="a")


def _all_gather(b, replica, out, aval, *, all_gather_dimension, tiled, axis_size, **params):
    """Each member q's operand, viewed as [pre, post], into [:, q, :] of the result viewed as
    [pre, size, post]."""
    pre, post = _split(aval.shape, all_gather_dimension)

    def per_replica(b, q, _):
        _copy_rows(b, out.ptr, lambda b, a: b.add(b.mul(a, T.i64(axis_size)), q),
                   replica.peer(b, q, aval).ptr, lambda b, a: a, pre, post, aval.dtype)
        return []
    counted_loop(b, replica.count, per_replica, name="q")


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
            _accumulate(b, out, f, load(b, peer, at), q, dtype)
            return []
        counted_loop(b, T.i64(pre * post), element, name="f")
        return []
    if pre * post:
        counted_loop(b, T.i64(axis_size), per_replica, name="q")


def _accumulate(b, total, at, value, k, dtype):
    """total[at] = value for the first term (k == 0), else total[at] + value."""
    first = b.icmp_unsigned("==", k, T.i64(0))
    store(b, total, at, b.select(first, value, add_value(b, load(b, total, at), value, dtype)))


def _table(b, name, values, index):
    """values[index] (a constant i32 table) as an i64 value, or -1 past its end."""
    n = len(values)
    table = ir.GlobalVariable(b.module, ir.ArrayType(T.I32, n), b.module.get_unique_name(name))
    table.initializer = ir.Constant(ir.ArrayType(T.I32, n), [int(v) for v in values])
    table.global_constant = True
    table.linkage = "internal"
    inside = b.icmp_unsigned("<", index, T.i64(n))
    at = b.select(inside, index, T.i64(0))
    value = b.load(b.gep(table, [T.i64(0), at], source_etype=table.value_type), typ=T.I32)
    return b.select(inside, b.sext(value, T.I64), T.i64(-1))


def _perm_tables(b, perm, index):
    """(the replica `index` receives from, the one it sends to), -1 for none, under `perm`.
    The tables cover every replica a pair names; the others take no part."""
    n = 1 + max([max(s, d) for s, d in perm], default=0)
    return (_table(b, "ppermute.sources", sources(perm, n), index),
            _table(b, "ppermute.dests", sources(tuple((d, s) for s, d in perm), n), index))


def _receive(b, out, source, aval, peer_operand):
    """out = the operand of local replica `source` (an i64 value), or zeros when it is < 0."""
    with b.if_else(b.icmp_signed(">=", source, T.i64(0))) as (receive, nothing):
        with receive:
            copy_elements(b, out.ptr, peer_operand(source), T.i64(aval.size), aval.dtype.itemsize)
        with nothing:
            intrinsic(b, "memset", [out.ptr, T.I8(0), T.i64(nbytes(aval)), T.I1(0)],
                      ret=T.VOID, overloads=[T.PTR, T.I64])


def _ppermute_rule(ctx, outs, ins, *, axis_name, perm, mesh_axes=None, processes=1):
    if processes > 1:
        return _ppermute_across(ctx, outs, ins, axis_name, perm)
    b = ctx.builder
    replica = _Replica(b, (axis_name,), mesh_axes)
    replica.publish(b, operand_pointer(b, ins[0]))
    out, aval = outs[0], ins[0].aval
    source, _ = _perm_tables(b, perm, replica.position)
    _receive(b, out, source, aval, lambda k: replica.peer(b, k, aval).ptr)
    replica.wait(b)


_EXCHANGE = ir.LiteralStructType([T.PTR, T.I64, T.I64, T.PTR, T.I64, T.I64])
assert len(_EXCHANGE.elements) == len(mpi_engine.EXCHANGE_RECORD)


def _ppermute_across(ctx, outs, ins, axis_name, perm):
    """ppermute over pmap's axis across processes: each replica publishes its engine record
    (mpi_engine's kiln_mpi_exchange: its operand to the destination's process, tagged with the
    destination's global index; its result from the source's process, tagged with its own),
    with the process of a pair inside this one as -1; a source inside this process is copied
    from its operand; replica 0 calls the engine once on every record."""
    out, aval = outs[0], ins[0].aval
    if max([max(pair) for pair in perm], default=0) > mpi_engine.TAG_LIMIT:
        raise BackendUnsupportedError(
            f"the LLVM backend runs ppermute across processes over at most "
            f"{mpi_engine.TAG_LIMIT + 1} replicas (its MPI messages are tagged with the "
            f"receiver's index); run it with backend='reference'", ctx.eqn.info)
    b = ctx.builder
    replica = _Replica(b, (axis_name,))
    first = b.mul(replica.process, replica.size)
    source, dest = _perm_tables(b, perm, b.add(first, replica.index))

    def remote(g):   # g's process when that is another one, else -1
        process = b.sdiv(g, replica.size)
        elsewhere = b.and_(b.icmp_signed(">=", g, T.i64(0)),
                           b.icmp_signed("!=", process, replica.process))
        return b.select(elsewhere, process, T.i64(-1))
    x = operand_pointer(b, ins[0])
    record = ir.Constant(_EXCHANGE, ir.Undefined)
    for k, value in enumerate((x, remote(dest), dest, out.ptr, remote(source),
                               b.add(first, replica.index))):
        record = b.insert_value(record, value, k)
    replica.publish(b, externs.stack_slot(b, record))
    here = b.icmp_signed("<", remote(source), T.i64(0))
    with b.if_then(here):
        _receive(b, out, b.select(b.icmp_signed(">=", source, T.i64(0)), b.sub(source, first),
                                  T.i64(-1)), aval,
                 lambda k: _published(b, replica, k, _EXCHANGE, 0))
    _on_first(b, replica, lambda: mpi_engine.emit_exchange(
        b, replica.slots, replica.size, T.i64(aval.size), aval.dtype))


def _published(b, replica, k, struct, field):
    """Field `field` of the `struct` replica k published."""
    record = b.load(replica.slot(b, k), typ=T.PTR)
    return b.load(b.gep(record, [T.i64(0), T.I32(field)], source_etype=struct),
                  typ=struct.elements[field])


class _Blocks:
    """all_to_all's blocks: the operand viewed as [A, size, rows] (block d is [:, d, :]: its
    part d of the split axis) and the result as [R, size, cols] (block q: [:, q, :]), each
    `count` elements in row-major order."""

    def __init__(self, shape, split_axis, concat_axis, tiled, axis_size):
        n = shape[split_axis]
        before, after = _split(shape, split_axis)
        self.rows = after // n * (n // axis_size) if n and axis_size else 0
        self.count = before * self.rows
        out_shape = _out_shape(shape, split_axis, concat_axis, tiled, axis_size)
        self.cols = _split(out_shape, concat_axis)[1] // axis_size if axis_size else 0
        self.size = axis_size

    def source(self, b, f, d):
        """The operand's flat index of element f of its block d."""
        return self._at(b, f, d, self.rows)

    def dest(self, b, f, q):
        """The result's flat index of element f of its block q."""
        return self._at(b, f, q, self.cols)

    def _at(self, b, f, block, inner):
        a, j = b.udiv(f, T.i64(inner)), b.urem(f, T.i64(inner))
        return b.add(b.mul(b.add(b.mul(a, T.i64(self.size)), block), T.i64(inner)), j)

    def move(self, b, dst, dst_at, src, src_at):
        """dst[dst_at(f)] = src[src_at(f)] for every element f of a block."""
        def element(b, f, _):
            store(b, dst, dst_at(b, f), load(b, src, src_at(b, f)))
            return []
        counted_loop(b, T.i64(self.count), element, name="f")


def _all_to_all(b, replica, out, aval, *, split_axis, concat_axis, tiled, axis_size, **params):
    blocks = _Blocks(aval.shape, split_axis, concat_axis, tiled, axis_size)
    if not blocks.count:
        return

    def per_replica(b, q, _):
        peer = replica.peer(b, q, aval)
        blocks.move(b, out, lambda b, f: blocks.dest(b, f, q),
                    peer, lambda b, f: blocks.source(b, f, replica.position))
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


# ------------------------------------------------------- staged collectives across processes

_SHARED = ir.LiteralStructType([T.PTR, T.PTR])   # what a replica publishes: operand, scratch


class _Staged:
    """all_gather, psum_scatter or all_to_all over pmap's axis of `axis_size` replicas spread
    over `processes` processes (`local` replicas each; process p's replica i has the global
    index p * local + i): every replica publishes its operand and scratch; each stages its
    share of the process's send buffer (`sent` elements at the start of replica 0's scratch);
    replica 0 makes the engine call (`call`) into the receive buffer (`received` elements
    after it); each replica takes its result out of that (`unstage`). Four barriers."""

    def __init__(self, aval, processes, axis_size):
        self.aval, self.dtype = aval, aval.dtype
        self.processes, self.size = processes, axis_size
        self.local = axis_size // processes

    def scratch_bytes(self):
        return (self.sent + self.received) * self.dtype.itemsize

    def emit(self, b, replica, x, scratch, out):
        shared = b.insert_value(b.insert_value(ir.Constant(_SHARED, ir.Undefined), x, 0),
                                scratch, 1)
        replica.publish(b, externs.stack_slot(b, shared))
        area = _published(b, replica, T.i64(0), _SHARED, 1)
        send = _flat(area, self.dtype, self.sent)
        recv = _flat(b.gep(area, [T.i64(self.sent)], source_etype=T.mem_type(self.dtype)),
                     self.dtype, self.received)
        self.stage(b, replica.index, lambda k: Buffer(_published(b, replica, k, _SHARED, 0),
                                                     self.aval), send)
        replica.wait(b)
        _on_first(b, replica, lambda: self.call(b, send.ptr, recv.ptr))
        self.unstage(b, replica.index, recv, out)
        replica.wait(b)


def _flat(pointer, dtype, count):
    return Buffer(pointer, ShapedArray((count,), dtype))


class _GatherAcross(_Staged):
    """Stage: replica i's operand is block i of the send buffer; the engine's allgather;
    unstage: block g of the receive buffer, viewed as [pre, post], is [:, g, :] of the
    result viewed as [pre, size, post]."""

    def __init__(self, aval, processes, *, all_gather_dimension, tiled, axis_size,
                 to="varying"):   # (`to`: the type only)
        super().__init__(aval, processes, axis_size)
        self.pre, self.post = _split(aval.shape, all_gather_dimension)
        self.sent, self.received = self.local * aval.size, axis_size * aval.size

    def stage(self, b, i, operand, send):
        n = self.aval.size
        copy_elements(b, b.gep(send.ptr, [b.mul(i, T.i64(n))], source_etype=T.mem_type(self.dtype)),
              operand(i).ptr, T.i64(n), self.dtype.itemsize)

    def call(self, b, send, recv):
        return mpi_engine.emit_allgather(b, send, recv, T.i64(self.sent), self.dtype)

    def unstage(self, b, j, recv, out):
        pre, size = self.pre, self.size

        def per_replica(b, g, _):
            _copy_rows(b, out.ptr, lambda b, a: b.add(b.mul(a, T.i64(size)), g), recv.ptr,
                       lambda b, a: b.add(b.mul(g, T.i64(pre)), a), pre, self.post, self.dtype)
            return []
        counted_loop(b, T.i64(size), per_replica, name="g")


class _ScatterAcross(_Staged):
    """The operand viewed as [pre, size, post]. Stage: the send buffer as [processes, pre,
    local, post], replica j summing every local operand's [:, r * local + j, :] into
    [r, :, j, :]; the engine's reduce_scatter leaves this process's [pre, local, post];
    unstage: replica j's result is its [:, j, :]."""

    def __init__(self, aval, processes, *, scatter_dimension, tiled, axis_size):
        super().__init__(aval, processes, axis_size)
        self.pre, rest = _split(aval.shape, scatter_dimension)
        self.post = rest // axis_size
        self.received = self.pre * self.local * self.post
        self.sent = processes * self.received

    def stage(self, b, j, operand, send):
        pre, post, local = self.pre, self.post, self.local
        if not self.received:
            return

        def per_replica(b, i, _):
            x = operand(i)

            def element(b, f, _):   # f over [processes, pre, post]
                t = b.urem(f, T.i64(post))
                ra = b.udiv(f, T.i64(post))
                r, a = b.udiv(ra, T.i64(pre)), b.urem(ra, T.i64(pre))
                row = b.add(b.mul(r, T.i64(local)), j)
                at = b.add(b.mul(b.add(b.mul(a, T.i64(self.size)), row), T.i64(post)), t)
                to = b.add(b.mul(b.add(b.mul(ra, T.i64(local)), j), T.i64(post)), t)
                _accumulate(b, send, to, load(b, x, at), i, self.dtype)
                return []
            counted_loop(b, T.i64(self.processes * pre * post), element, name="f")
            return []
        counted_loop(b, T.i64(local), per_replica, name="i")

    def call(self, b, send, recv):
        return mpi_engine.emit_reduce_scatter(b, send, recv, T.i64(self.received), self.dtype,
                                              "sum")

    def unstage(self, b, j, recv, out):
        _copy_rows(b, out.ptr, lambda b, a: a, recv.ptr,
                   lambda b, a: b.add(b.mul(a, T.i64(self.local)), j), self.pre, self.post,
                   self.dtype)


class _AllToAllAcross(_Staged):
    """Blocks as `_Blocks`. Stage: the send buffer as [processes, local, local, count],
    replica i putting its block r * local + j at [r, i, j]; the engine's alltoall (process r
    receives every process's [r]); unstage: replica j's result block q = r * local + i is
    [r, i, j] of the receive buffer (the same layout)."""

    def __init__(self, aval, processes, *, split_axis, concat_axis, tiled, axis_size):
        super().__init__(aval, processes, axis_size)
        self.blocks = _Blocks(aval.shape, split_axis, concat_axis, tiled, axis_size)
        self.sent = self.received = self.local * aval.size

    def _at(self, b, r, i, j):
        """The first element of [r, i, j] in either buffer."""
        local = T.i64(self.local)
        return b.mul(b.add(b.mul(b.add(b.mul(r, local), i), local), j), T.i64(self.blocks.count))

    def stage(self, b, i, operand, send):
        x, blocks, local = operand(i), self.blocks, T.i64(self.local)
        if not blocks.count:
            return

        def per_block(b, d, _):
            at = self._at(b, b.udiv(d, local), i, b.urem(d, local))
            blocks.move(b, send, lambda b, f: b.add(at, f), x,
                        lambda b, f: blocks.source(b, f, d))
            return []
        counted_loop(b, T.i64(self.size), per_block, name="d")

    def call(self, b, send, recv):
        return mpi_engine.emit_alltoall(b, send, recv, T.i64(self.sent // self.processes),
                                        self.dtype)

    def unstage(self, b, j, recv, out):
        blocks, local = self.blocks, T.i64(self.local)
        if not blocks.count:
            return

        def per_block(b, q, _):
            at = self._at(b, b.udiv(q, local), b.urem(q, local), j)
            blocks.move(b, out, lambda b, f: blocks.dest(b, f, q), recv,
                        lambda b, f: b.add(at, f))
            return []
        counted_loop(b, T.i64(self.size), per_block, name="q")


def _staged(in_process, across):
    """The rule of a staged collective: `_exchange(in_process)` in one process, else the
    `_Staged` kind `across` in the equation's scratch."""
    def rule(ctx, outs, ins, *, axis_name, mesh_axes=None, processes=1, **params):
        if processes == 1:
            return _exchange(in_process)(ctx, outs, ins, axis_name=axis_name,
                                         mesh_axes=mesh_axes, **params)
        b = ctx.builder
        plan = across(ins[0].aval, processes, **params)
        scratch = ir.Constant(T.PTR, None) if ctx.scratch is None else ctx.scratch   # (empty)
        plan.emit(b, _Replica(b, axis_names(axis_name)), operand_pointer(b, ins[0]), scratch, outs[0])

    def scratch(eqn):
        params = dict(eqn.params)
        processes = params.pop("processes", 1)
        for name in ("axis_name", "mesh_axes"):
            params.pop(name, None)
        return 0 if processes == 1 else \
            across(eqn.invars[0].aval, processes, **params).scratch_bytes()
    return rule, scratch


LLVM[PRIMITIVES["psum"]] = _exchange(_reducing(add_value), _allreduce_across("sum"),
                                     _allreduce_alone("sum"))
LLVM[PRIMITIVES["pmax"]] = _exchange(_reducing(max_value), _allreduce_across("max"),
                                     _allreduce_alone("max"))
LLVM[PRIMITIVES["pmin"]] = _exchange(_reducing(min_value), _allreduce_across("min"),
                                     _allreduce_alone("min"))
LLVM[PRIMITIVES["axis_index"]] = _axis_index
LLVM[PRIMITIVES["ppermute"]] = _ppermute_rule
for _name, _in_process, _across in (("all_gather", _all_gather, _GatherAcross),
                                    ("psum_scatter", _psum_scatter, _ScatterAcross),
                                    ("all_to_all", _all_to_all, _AllToAllAcross)):
    LLVM[PRIMITIVES[_name]], LLVM_SCRATCH[PRIMITIVES[_name]] = _staged(_in_process, _across)
