"""Replicas: the copies of one function that `pmap` runs at once, one per device, and what their
collectives compute across them.

A `ReplicaGroup` is one call's set of `size` replicas over the axis `axis_name`; replica `i`
runs on its own thread inside `running_as(group, i)`. A collective whose axis is the group's
(psum, all_gather, ppermute, ... over a pmap axis) is then an exchange: every replica hands its
operand to the group (`ReplicaGroup.exchange`), waits for all the others, and computes its own
result from all of them. `COMBINE[name](values, index, **params)` is that result for each
collective, in NumPy: the reference backend's meaning of a collective across replicas, the
oracle the native backends are tested against. Values are combined in replica order (replica 0
first), so every replica of a psum gets the same bits.

Outside any group, or over a name the group does not bind, a collective's `impl` raises the
NameError `lax` gives at the user's call (`unbound`): only a bug gets there.
"""
import contextlib
import threading

import numpy as np

_CURRENT = threading.local()    # .frame: (group, index) of the replica this thread runs


class ReplicaGroup:
    """The replicas of one call: `size` of them over `axis_name`, meeting at a barrier. A
    replica that fails breaks the barrier, so the others stop with BrokenBarrierError instead
    of waiting for it; the caller reports the first failure."""

    def __init__(self, axis_name, size):
        self.axis_name = axis_name
        self.size = size
        self.barrier = threading.Barrier(size)
        self.slots = [None] * size
        self.backend_state = {}   # a native backend's records of the group (with `abort()`)

    def abort(self):
        """A replica failed: release the others from every barrier, Python's and native."""
        self.barrier.abort()
        for state in list(self.backend_state.values()):
            state.abort()

    def exchange(self, index, value):
        """Every replica's `value`, in replica order (all replicas call this together)."""
        self.slots[index] = value
        self.barrier.wait()
        values = list(self.slots)
        self.barrier.wait()   # nobody overwrites a slot before everyone has read them all
        return values


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


def current(axis_name):
    """(group, index) of this thread's replica when its group binds `axis_name`, else None."""
    frame = getattr(_CURRENT, "frame", None)
    if frame is None or frame[0].axis_name != axis_name:
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
    then `combine(values, index, **params)` (axis_index, without operands, has none)."""
    def impl(*args, axis_name, **params):
        names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
        if len(names) != 1 or current(names[0]) is None:
            raise unbound(name, names[0] if names else axis_name)
        group, index = current(names[0])
        if not args:   # axis_index
            return np.int32(index)
        values = group.exchange(index, np.asarray(args[0]))
        return np.asarray(combine(values, index, **params), dtype=np.asarray(args[0]).dtype)
    return impl

