"""The dispatch fast path of `kiln.pmap`: calls with positional arrays only, on the CPU.

`pmap` keeps, per mapped function, a `FastPmap` for the specialisation of its latest call when
that call passed only positional arrays (kiln Arrays, NumPy arrays; no keyword, static or
pytree arguments), each mapped along axis 0 or not at all, in one process, compiled by the
LLVM backend, with every output mapped along axis 0 (`out_axes=0`). The next call tries it
first: it checks in Python what the ordinary path's cache key covers (the argument count,
the kind and weak type of each argument, the globals the specialisation read) and hands the
arrays to the executable's `Stacked` (compiler/backends/llvm/stacked.py), which checks dtype,
shape and layout, runs every replica from one native call into stacked outputs, and returns
them; the results become Arrays carrying the sharding the ordinary path gives them, made once.
Anything else returns `MISS` before anything ran, and pmap takes its ordinary path (flatten,
split, signature key, cache lookup), which re-specialises where needed. The replicas run as
the ordinary path runs them (`entry.parallel`: at once when they meet in collectives or take
long, else in turn on the calling thread), so only the Python around them is skipped.
"""
import numpy as np

from .array import Array, placed_on
from .distributed import process_layout
from .execution_guards import STATE as _GUARDS
from .fastcall import MISS, exact_values
from .sharding import NamedSharding, PartitionSpec

_KINDS = (Array, np.ndarray)


def install(entry, args, kwargs, static, axes, size, mapped_out, mesh, name):
    """A FastPmap for calls like this one, or None where the fast path does not apply (see
    the module docstring). `axes`: each argument's mapped axis (0 or None), `static`: the
    function's staging.StaticArgs, `mesh`: the replicas' one-axis mesh named `name`."""
    if kwargs or static or not args or not all(type(a) in _KINDS for a in args):
        return None
    if len(axes) != len(args) or any(d not in (0, None) for d in axes):
        return None
    if any(spec != 0 for spec in mapped_out) or size < 1 or entry.parallel is None:
        return None
    executable = entry.executable
    if getattr(executable, "native", None) is None or executable.held or executable._across:
        return None
    if entry.parallel and size < 2:   # one replica with collectives: on the calling thread
        return None
    from .compiler.backends.llvm.stacked import Stacked   # (the LLVM backend ran already)
    mapped = [d == 0 for d in axes] + [False] * len(entry.consts)
    stacked = Stacked(executable, size, mapped, bool(entry.parallel))
    weak = tuple(type(a) is Array and a.weak_type for a in args)
    shardings = [NamedSharding(mesh, PartitionSpec(name, *[None] * len(v.aval.shape)))
                 for v in executable.function.outvars]
    return FastPmap(entry, weak, stacked, shardings)


class FastPmap:
    __slots__ = ("entry", "weak", "stacked", "consts", "out", "single")

    def __init__(self, entry, weak, stacked, shardings):
        self.entry = entry
        self.weak = weak
        self.stacked = stacked
        self.consts = tuple(entry.consts)
        self.out = list(zip(entry.out_weak, shardings))
        self.single = entry.out_tree.node_data() is None

    def __call__(self, args):
        if _GUARDS.no_execution or process_layout()[1] != 1:
            return MISS
        entry = self.entry
        values = exact_values(entry, args, self.weak)
        if values is None:
            return MISS
        outs = self.stacked((*values, *self.consts))
        if outs is None:
            return MISS
        arrays = []
        for o, (w, sharding) in zip(outs, self.out):
            a = object.__new__(Array)
            a._value = o
            a.weak_type = w
            arrays.append(placed_on(a, sharding))
        return arrays[0] if self.single else entry.out_tree.unflatten(arrays)
