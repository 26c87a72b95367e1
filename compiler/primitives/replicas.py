"""Replicas: the copies of one function that `pmap` and `shard_map` run at once, one per
device, and what their collectives compute across them.

A `ReplicaGroup` is one call's replicas laid out over named mesh axes (`axes`: (name, size)
pairs, row-major: pmap's group has one axis, shard_map's one per mesh axis); replica `i` (its
flat index) runs on its own thread inside `running_as(group, i)`. A collective over some of
the group's axes (psum, all_gather, ppermute, ... ) is an exchange: every replica hands its
operand to the group (`ReplicaGroup.exchange`), waits for all the others, and computes its own
result from the operands of its *members* (`members`): the replicas that differ from it only
along the collective's axes, ordered row-major over those axes in the order the collective
names them. Each collective's combine rule (`reducer`, `all_gather`, ...) is that result in
NumPy: the reference backend's meaning of a collective across replicas, the oracle the native
backends are tested against. Values are combined in member order, so every member of a psum
gets the same bits.

Several processes (kiln.distributed over MPI): a pmap group is this process's replicas, one of
`processes` groups; the axis spans all of them, process p's replicas holding global indices
p*n .. p*n + n - 1. The group's `cross` object (the MPI engine's Python face: `allgather`,
`allreduce`) carries what crosses processes: the reference combine gathers every process's
operands through replica 0 and combines them as one group of n * processes.

Two SSA params tell a native backend the layout, so that the compiled code (and its cache key)
knows which replicas each collective joins: `mesh_axes` (a transform running a function over a
mesh of several axes adds it to every collective; without it a collective spans every replica,
as in pmap) and `processes` (the number of processes a pmap axis spans, when above 1). Both are
added by `with_collective_params`.

Outside any group, or over a name the group does not bind, a collective's `impl` raises the
NameError `lax` gives at the user's call (`unbound`): only a bug gets there.
"""
import contextlib
import math
import threading

import numpy as np

_CURRENT = threading.local()    # .frame: (group, index) of the replica this thread runs


class ReplicaGroup:
    """The replicas of one call over the mesh axes `axes` ((name, size) pairs), meeting at a
    barrier. A replica that fails breaks the barrier (`abort`), so the others stop instead of
    waiting for it; the caller reports the first failure."""

    def __init__(self, axes, process=0, processes=1, cross=None):
        self.axes = tuple((name, int(size)) for name, size in axes)
        self.size = math.prod(size for _, size in self.axes)
        self.process, self.processes, self.cross = process, processes, cross
        self.barrier = threading.Barrier(self.size)
        self.slots = [None] * self.size
        self.backend_state = {}   # a native backend's records of the group (with `abort()`)

    def binds(self, names):
        bound = {name for name, _ in self.axes}
        return all(n in bound for n in names)

    def abort(self):
        """A replica failed: release the others from every barrier, Python's and native."""
        self.barrier.abort()
        for state in list(self.backend_state.values()):
            state.abort()

    def exchange(self, index, value):
        """Every replica's `value`, by flat index (all replicas call this together)."""
        self.slots[index] = value
        self.barrier.wait()
        values = list(self.slots)
        self.barrier.wait()   # nobody overwrites a slot before everyone has read them all
        return values


def strides(axes):
    """The row-major stride of each mesh axis, by name."""
    out, stride = {}, 1
    for name, size in reversed(axes):
        out[name] = stride
        stride *= size
    return out


def coordinate(axes, index, name):
    """Replica `index`'s coordinate along mesh axis `name`."""
    size = dict(axes)[name]
    return index // strides(axes)[name] % size


def members(axes, index, names):
    """(the flat indices of replica `index`'s members for a collective over `names`, its own
    position among them): see the module docstring."""
    step, sizes = strides(axes), dict(axes)
    base = index - sum(coordinate(axes, index, n) * step[n] for n in names)
    out = [base]
    for name in names:   # row-major over names in their order: the last varies fastest
        out = [m + k * step[name] for m in out for k in range(sizes[name])]
    position = 0
    for name in names:
        position = position * sizes[name] + coordinate(axes, index, name)
    return out, position


def with_collective_params(fn, **extra):
    """`fn` (an SSA Function, regions included) with `extra` params (`mesh_axes`,
    `processes`: see the module docstring) on every collective. Returns a new Function."""
    from ..ir.ssa import Eqn, Function
    eqns = []
    for eqn in fn.eqns:
        params = dict(eqn.params)
        for key, value in params.items():
            if isinstance(value, Function):
                params[key] = with_collective_params(value, **extra)
            elif isinstance(value, tuple) and any(isinstance(v, Function) for v in value):
                params[key] = tuple(with_collective_params(v, **extra)
                                    if isinstance(v, Function) else v for v in value)
        if eqn.prim.collective:
            params.update(extra)
        eqns.append(Eqn(eqn.outvars, eqn.prim, eqn.invars, params, eqn.info))
    return Function(fn.name, fn.invars, eqns, fn.outvars)


@contextlib.contextmanager
def running_as(group, index):
    """Run the block as replica `index` of `group` on this thread."""
    previous = getattr(_CURRENT, "frame", None)
    _CURRENT.frame = (group, index)
    try:
        yield
    finally:
        _CURRENT.frame = previous


def current_frame():
    """(group, index) of this thread's replica, or None."""
    return getattr(_CURRENT, "frame", None)


def current(names):
    """(group, index) of this thread's replica when its group binds every name of `names`,
    else None."""
    frame = getattr(_CURRENT, "frame", None)
    if frame is None or not frame[0].binds(names):
        return None
    return frame


def unbound(name, axis_name):
    return NameError(f"unbound axis name: {axis_name} (the {name} collective ran outside any "
                     f"transform binding its axis; collectives belong inside "
                     f"kiln.vmap(..., axis_name=...) or kiln.pmap(..., axis_name=...))")


# ------------------------------------------------------ what each collective computes

def _fold(op, values):
    out = values[0]
    for v in values[1:]:
        out = op(out, v)
    return out


def reducer(op):
    def combine(values, index, **params):
        return _fold(op, values)
    return combine


def all_gather(values, index, *, all_gather_dimension, tiled, axis_size, **params):
    join = np.concatenate if tiled else np.stack
    return join(values, axis=all_gather_dimension)


def psum_scatter(values, index, *, scatter_dimension, tiled, axis_size, **params):
    total = _fold(np.add, values)
    if not tiled:
        return np.take(total, index, axis=scatter_dimension)
    block = total.shape[scatter_dimension] // axis_size
    return np.take(total, range(index * block, (index + 1) * block), axis=scatter_dimension)


def ppermute(values, index, *, perm, **params):
    for source, dest in perm:
        if dest == index:
            return values[source]
    return np.zeros_like(values[index])


def all_to_all(values, index, *, split_axis, concat_axis, tiled, axis_size, **params):
    """Replica q's block `index` of its `split_axis`, for every q, joined along `concat_axis`
    in replica order (stacked along a new axis there when not tiled)."""
    if tiled:
        n = values[0].shape[split_axis] // axis_size
        blocks = [np.take(v, range(index * n, (index + 1) * n), axis=split_axis) for v in values]
        return np.concatenate(blocks, axis=concat_axis)
    return np.stack([np.take(v, index, axis=split_axis) for v in values], axis=concat_axis)


def replica_impl(name, combine):
    """The reference `impl` of collective `name`: the exchange among this thread's replicas,
    then `combine(member values, position, **params)` (axis_index, without operands, has
    none)."""
    def impl(*args, axis_name, mesh_axes=None, processes=1, **params):
        names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
        frame = current(names)
        if frame is None:
            raise unbound(name, next((n for n in names if current((n,)) is None), names[0]))
        group, index = frame
        if group.processes > 1:
            return _across_processes(group, index, args, combine, params)
        if not args:   # axis_index
            return np.int32(coordinate(group.axes, index, names[0]))
        values = group.exchange(index, np.asarray(args[0]))
        chosen, position = members(group.axes, index, names)
        result = combine([values[m] for m in chosen], position, **params)
        return np.asarray(result, dtype=np.asarray(args[0]).dtype)
    return impl


def _across_processes(group, index, args, combine, params):
    """A pmap collective over an axis spanning `group.processes` processes: every process's
    operands gathered (replica 0 of each process calls the engine's allgather), then combined
    as one group in global order."""
    position = group.process * group.size + index
    if not args:   # axis_index
        return np.int32(position)
    x = np.asarray(args[0])
    local = group.exchange(index, x)
    shared = group.exchange(index, group.cross.allgather(np.stack(local)) if index == 0
                            else None)[0]
    everyone = list(shared.reshape((group.processes * group.size,) + x.shape))
    return np.asarray(combine(everyone, position, **params), dtype=x.dtype)
