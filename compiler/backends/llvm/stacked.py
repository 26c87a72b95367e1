"""pmap's fast call: every replica of an Executable run from one native call, reading its slice
of stacked arguments and writing its slice of stacked outputs.

`Stacked(executable, n, mapped, parallel)` is made once per pmapped function and argument
signature (runtime/pmap_fast.py). A call hands it the arguments as NumPy arrays: a mapped one
stacked along a leading axis of size `n` (replica i reads row i), an unmapped one (and the
function's constants) read whole by every replica. It checks them in Python (exact ndarray,
dtype, shape, C-contiguous and aligned; else None: nothing ran), allocates each output once as
an `(n, *shape)` array, and builds the table of argument pointers of every replica at once: the
base addresses of the arrays plus a precomputed table of byte offsets (row i of a mapped
array, of an output, of the workspace). Then one native call runs the replicas:

- `parallel` False (no collectives, small replicas): `kiln_run_in_turn` (replica_runner.py)
  runs them one after the other on the calling thread, sharing one workspace;
- `parallel` True: `kiln_run_replicas` runs them all at once on the runtime library's
  threads, each with its own workspace and its replica record, from a block made per call
  (records, the slot table and the barrier words of replica_context.NativeGroup, laid out in
  one array: the generated collectives read the same fields).

The outputs need no stacking afterwards, and every replica's code is the same compiled code
the ordinary path runs (executable.Executable.run_replicas and __call__), so the results are
the same bits. A failing replica raises the error the ordinary path raises.
"""
import ctypes
import math

import numpy as np

from . import rtlib, replica_context, host_callbacks
from .executable import _RUN_REPLICAS, _allocator

_IN_TURN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                            ctypes.c_int64)
_ALIGN = 64   # bytes between the replicas' workspaces are a multiple of this
_FIELDS = len(replica_context.RECORD.elements)
_SLOTS_FIELD, _PROCESS_FIELD = 2, 4
_ndarray = np.ndarray


class Stacked:
    """`n` replicas of `executable` over stacked arguments (see the module docstring);
    `mapped`: for each input of the executable, whether it is stacked (True) or shared."""

    def __init__(self, executable, n, mapped, parallel):
        fn = executable.function
        self.executable = executable
        self.n, self.parallel = n, parallel
        self.expected = [(dtype, (n, *shape) if m else shape)
                         for (dtype, shape), m in zip(executable._inputs, mapped)]
        outs = [(np.dtype(v.aval.dtype), tuple(v.aval.shape)) for v in fn.outvars]
        self.outputs = [_allocator((n, *shape), dtype) for dtype, shape in outs]
        steps = [dtype.itemsize * math.prod(shape) if m else 0
                 for (dtype, shape), m in zip(executable._inputs, mapped)]
        steps += [dtype.itemsize * math.prod(shape) for dtype, shape in outs]
        workspace = executable.native.workspace
        self.workspace = None
        if workspace:
            step = -(-workspace // _ALIGN) * _ALIGN if parallel else 0
            self.workspace = _allocator((step * (n - 1) + workspace,), np.dtype(np.uint8))
            steps.append(step)
        self.k = len(steps)
        self.offsets = np.arange(n, dtype=np.uint64)[:, None] * np.array(steps, np.uint64)
        self.entry = executable.native.loaded.entry
        if parallel:
            self.main = executable._entry
            self.rows = np.arange(n, dtype=np.uint64) * np.uint64(8 * self.k)
            self.group, self.relocate = _group_template(n)
            self.run_replicas = _RUN_REPLICAS(rtlib.address("run_replicas"))
        else:
            self.in_turn = _IN_TURN(rtlib.address("run_in_turn"))

    def __call__(self, values):
        """The stacked outputs for `values` (the executable's inputs, stacked where mapped),
        or None when one is not exactly the expected array (nothing ran)."""
        if len(values) != len(self.expected):
            return None
        for v, (dtype, shape) in zip(values, self.expected):
            if type(v) is not _ndarray or v.shape != shape or v.dtype != dtype:
                return None
            flags = v.flags
            if not (flags.c_contiguous and flags.aligned):
                return None
        outs = [make() for make in self.outputs]
        arrays = [*values, *outs]
        if self.workspace is not None:
            arrays.append(self.workspace())
        table = self.offsets + np.array([a.ctypes.data for a in arrays], np.uint64)
        if self.parallel:
            status = self._at_once(table)
        else:
            status = self.in_turn(self.entry, table.ctypes.data, self.n, self.k)
        if status:
            raise self.executable._failure(status)
        if host_callbacks.PENDING:
            host_callbacks.raise_pending()
        del arrays
        return outs

    def _at_once(self, table):
        """Run the replicas at once (kiln_run_replicas) with a fresh group block; the first
        replica's non-zero status, else 0."""
        block = np.empty_like(self.group)
        np.multiply(self.relocate, np.uint64(block.ctypes.data), out=block)
        block += self.group
        statuses = np.zeros(self.n, np.int32)
        argsets = self.rows + np.uint64(table.ctypes.data)
        self.run_replicas(self.main, argsets.ctypes.data, block.ctypes.data,
                          statuses.ctypes.data, self.n, replica_context.replica_key())
        failed = statuses[statuses != 0]
        return int(failed[0]) if failed.size else 0


def _group_template(n):
    """(template, relocate) of a group block: n replica records, then the n slot pointers,
    then the three barrier words; the record fields that point into the block hold offsets
    from its start, to which `relocate` (1 there, else 0) times the block's address is added."""
    size = n * _FIELDS + n + 3
    template = np.zeros(size, np.uint64)
    relocate = np.zeros(size, np.uint64)
    records = template[:n * _FIELDS].reshape(n, _FIELDS)
    records[:, 0] = np.arange(n)
    records[:, 1] = n
    records[:, _SLOTS_FIELD] = n * _FIELDS * 8
    records[:, replica_context.BARRIER_FIELD] = (n * _FIELDS + n) * 8
    records[:, _PROCESS_FIELD] = 0
    marks = relocate[:n * _FIELDS].reshape(n, _FIELDS)
    marks[:, _SLOTS_FIELD] = marks[:, replica_context.BARRIER_FIELD] = 1
    return template, relocate

