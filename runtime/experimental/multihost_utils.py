"""`kiln.experimental.multihost_utils`: JAX's helpers for programs run as several processes.

Under `mpirun` after `kiln.distributed.initialize()`, each function is one or two of the MPI
engine's collectives (compiler/backends/mpi_engine.py) on this process's NumPy buffers, in
the calling thread; in one process they do what JAX's do in one process, without MPI.

- `process_allgather(in_tree, tiled=False)`: NumPy arrays; each leaf stacked over the
  processes on a new leading axis (`tiled=False`, and for a scalar when there are several
  processes) or concatenated along its first axis (`tiled=True`). A global array (one that spans processes) gives its
  whole value, and needs `tiled=True`, as in JAX.
- `broadcast_one_to_all(in_tree, is_source=None)`: NumPy arrays holding the source's leaves
  (process 0 unless `is_source` says otherwise; with several sources, their sum, as JAX's).
- `assert_equal(in_tree, fail_message="")`: an AssertionError unless every process holds the
  same leaves.
- `sync_global_devices(name)`: a barrier that also checks every process passed the same name.
- `host_local_array_to_global_array(local_inputs, global_mesh, pspecs)`: this process's
  data as its block of a global array over the mesh (make_array_from_process_local_data);
  `global_array_to_host_local_array(global_inputs, global_mesh, pspecs)` the reverse: this
  process's block as an Array over the mesh's local devices (`Mesh.local_mesh`).
- `reached_preemption_sync_point(step_id)`: False in a program that is not distributed, as
  in JAX. Under MPI its first call installs a SIGTERM handler that records the notice (so a
  SIGTERM no longer ends the process: the program is expected to save a checkpoint and
  exit); every call then makes one small allreduce of the notice and the step, and returns
  True at the step after the first one at which any process had a notice, on every process
  at once. JAX's service runs the protocol in the background instead; both need every
  process to call it at every step with the same step ids.

Every leaf must have the same shape and dtype in every process: the functions that exchange
leaves check that first (one small allgather of a checksum of the shapes and dtypes) and
raise a ValueError naming the processes that differ, where MPI would fail or truncate.
JAX's `live_devices` and `ProcessFailureError` are not here: they need a runtime that lives
on after one of its processes dies, and an MPI job ends with the first process that fails
(kiln's collectives then raise DistributedTimeoutError; docs/distributed.md).
"""
import signal
import zlib

import numpy as np

from ..compiler.backends import mpi_engine
from ..devices import process_count, process_index
from ..distributed import is_initialized
from ..global_arrays import GlobalArray, local_data, process_split, block_start
from ..placement import make_array_from_process_local_data
from ..array import Array, placed_on
from ..sharding import NamedSharding, PartitionSpec
from ..tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = ["assert_equal", "broadcast_one_to_all", "global_array_to_host_local_array",
           "host_local_array_to_global_array", "process_allgather",
           "reached_preemption_sync_point", "sync_global_devices"]

_NONE_SPEC = ("`None` is not a valid input to the pspecs argument. Please use "
              "jax.sharding.PartitionSpec() if you wanted to replicate your input.")


def _check_same_leaves(leaves, what):
    """A ValueError unless every process passed leaves of the same shapes and dtypes."""
    signature = repr([(np.shape(x), np.result_type(x).str) for x in leaves])
    sums = mpi_engine.allgather(np.array([zlib.crc32(signature.encode())], np.uint32))
    differ = [p for p, s in enumerate(sums[:, 0]) if s != sums[process_index(), 0]]
    if differ:
        raise ValueError(f"{what}: every process must pass leaves of the same shapes and "
                         f"dtypes, but processes {differ} passed others than process "
                         f"{process_index()} ({signature}); pass arrays of one shape everywhere")


def _global_value(array):
    """The whole value of a global array: every process's block, gathered and put in place."""
    split, owners = process_split(array.sharding, array.shape)
    blocks = mpi_engine.allgather(np.ascontiguousarray(array.local))
    out = np.empty(array.shape, array.dtype)
    for process, block in enumerate(blocks):
        start = block_start(array.shape, split, owners, process)
        out[tuple(slice(s, s + n) for s, n in zip(start, block.shape))] = block
    return out


def process_allgather(in_tree, tiled=False):
    """Every process's leaves, as NumPy arrays: stacked on a new leading axis, or with
    `tiled=True` concatenated along the first axis; a global array's whole value."""
    leaves, tree = tree_flatten(in_tree)
    for x in leaves:
        if type(x) is GlobalArray and not tiled:
            raise ValueError("Gathering global non-fully-addressable arrays only supports "
                             "tiled=True")
    if process_count() > 1:
        _check_same_leaves([x for x in leaves if type(x) is not GlobalArray],
                           "process_allgather")
    return tree_unflatten(tree, [_gather_leaf(x, tiled) for x in leaves])


def _gather_leaf(x, tiled):
    if type(x) is GlobalArray:
        return _global_value(x)
    value = np.asarray(x)
    if process_count() == 1:
        return value if tiled else value[None]
    if value.ndim == 0 or not tiled:
        value = value[None]
    gathered = mpi_engine.allgather(np.ascontiguousarray(value))
    return gathered.reshape((-1,) + value.shape[1:])


def broadcast_one_to_all(in_tree, is_source=None):
    """The source process's leaves (process 0's unless `is_source`), in every process."""
    if process_count() == 1:
        return tree_map(np.asarray, in_tree)
    if is_source is None:
        is_source = process_index() == 0
    leaves, tree = tree_flatten(in_tree)
    _check_same_leaves(leaves, "broadcast_one_to_all")
    out = []
    for x in leaves:
        value = np.asarray(x)
        sent = np.ascontiguousarray(value) if is_source else np.zeros_like(value)
        out.append(mpi_engine.allreduce(sent.reshape(-1), "sum").reshape(value.shape))
    return tree_unflatten(tree, out)


def assert_equal(in_tree, fail_message=""):
    """An AssertionError unless every process holds the same leaves (a global array is one
    value by construction: it is gathered, and passes)."""
    gathered = process_allgather(in_tree, tiled=True)
    leaves, _ = tree_flatten(in_tree)
    for x, g in zip(leaves, tree_flatten(gathered)[0]):
        if type(x) is GlobalArray:
            continue
        value = np.asarray(x)
        if not np.all(np.equal(np.concatenate([value.reshape(value.shape or (1,))] *
                                              process_count()), g)):
            raise AssertionError(f"{fail_message}. Expected: {gathered}; got: {in_tree}.")


def sync_global_devices(name):
    """A barrier over every process, which also checks that all of them passed `name`."""
    assert_equal(np.uint32(zlib.crc32(name.encode())),
                 f"sync_global_devices name mismatch ('{name}')")


def _specs(pspecs, leaves, tree, what):
    if pspecs is None or isinstance(pspecs, PartitionSpec):
        specs = [pspecs] * len(leaves)
    else:
        spec_leaves, spec_tree = tree_flatten(pspecs, is_leaf=lambda s: s is None or
                                              isinstance(s, PartitionSpec))
        if spec_tree != tree:
            raise ValueError(f"{what}: pspecs must be one PartitionSpec or a tree of them with "
                             f"the structure of the inputs ({tree}); got {spec_tree}")
        specs = spec_leaves
    if any(s is None for s in specs):
        raise ValueError(_NONE_SPEC)
    return specs


def host_local_array_to_global_array(local_inputs, global_mesh, pspecs):
    """This process's data (each leaf) as its block of a global array laid out over
    `global_mesh` as `pspecs` says (one PartitionSpec, or a tree of them)."""
    leaves, tree = tree_flatten(local_inputs)
    specs = _specs(pspecs, leaves, tree, "host_local_array_to_global_array")
    return tree_unflatten(tree, [
        x if type(x) is GlobalArray else
        make_array_from_process_local_data(NamedSharding(global_mesh, spec), np.asarray(x))
        for x, spec in zip(leaves, specs)])


def global_array_to_host_local_array(global_inputs, global_mesh, pspecs):
    """This process's block of each global array, as an Array laid out over the mesh's local
    devices (`global_mesh.local_mesh`); an array this process holds whole comes back as it
    is."""
    leaves, tree = tree_flatten(global_inputs)
    specs = _specs(pspecs, leaves, tree, "global_array_to_host_local_array")
    out = []
    for x, spec in zip(leaves, specs):
        if type(x) is not GlobalArray:
            out.append(x if isinstance(x, Array) else
                       placed_on(Array(np.asarray(x)),
                                 NamedSharding(global_mesh.local_mesh, spec)))
            continue
        wanted = NamedSharding(global_mesh, spec)
        if process_split(wanted, x.shape) != (x.split, x.owners):
            raise ValueError(f"global_array_to_host_local_array: the array is laid out as "
                             f"{x.sharding}, not as {wanted}; pass the pspec it has")
        out.append(placed_on(Array(local_data(x), x.weak_type),
                             NamedSharding(global_mesh.local_mesh, spec)))
    return tree_unflatten(tree, out)


class _Preemption:
    noticed = False      # this process got SIGTERM
    installed = False
    safe_step = None     # the step every process stops at, once one had a notice


def _notice(signum, frame):
    _Preemption.noticed = True


def reached_preemption_sync_point(step_id):
    """Whether `step_id` is the step at which every process should save a checkpoint after
    a preemption notice (SIGTERM) reached any of them; False when not distributed."""
    if not is_initialized() or process_count() == 1:
        return False
    if not _Preemption.installed:
        signal.signal(signal.SIGTERM, _notice)
        _Preemption.installed = True
    if _Preemption.safe_step is None:
        seen = mpi_engine.allreduce(np.array([int(_Preemption.noticed), int(step_id)],
                                             np.int64), "max")
        if seen[0]:
            _Preemption.safe_step = int(seen[1]) + 1
    return _Preemption.safe_step == int(step_id)
