"""`kiln.jit(f, in_shardings=..., out_shardings=...)` with several processes (kiln.distributed):
one program over global arrays, each process computing on its own blocks.

A call places its arguments as `in_shardings` says (`device_put`: a host value, the same in
every process, keeps this process's block; a global array stays as it is), stages `f` for the
global shapes (so Python code in `f` sees the shapes JAX's would), and partitions that SSA over
the processes (compiler/transforms/partition.py): each input is split along the dimension its
sharding splits across the processes, or replicated, and each output comes out as
`out_shardings` says (unspecified: replicated). The partitioned function, this process's
program, is compiled for the jit's backend and cached per argument signature, as `jit`'s own.
For the data-parallel step (batch split across the processes, parameters replicated), the
batch mean's reduction becomes one `process_allreduce` per reduced value, and the updated
parameters are the same in every process. Results are placed on their out_shardings: a
global array (global_arrays.py) when split across the processes, else an ordinary Array.
"""
from .tree_util import tree_flatten, tree_unflatten, tree_map, tree_leaves
from . import staging
from .array import placed_on
from .distributed import process_layout
from .global_arrays import GlobalArray, process_split, from_local_block
from .sharding import Sharding, PartitionSpec
from .staging import leaf_aval, wrap_outputs
from .compiler.transforms.partition import partition


class _Entry(staging.Entry):
    __slots__ = ("executable", "consts", "out_tree", "out_weak", "out_dims", "out_shardings",
                 "out_avals", "writes")


def sharded_call(jitted, args, kwargs):
    """A call of `jitted` in a run of several processes: a jit with shardings, or one given
    a global array (its inputs then keep their own layouts; its outputs are replicated)."""
    from .placement import device_put, _as_sharding
    in_shardings, out_shardings = jitted._shardings or (None, None)
    if in_shardings is not None:
        static = set(jitted._static.nums)
        placed = device_put(tuple(args), in_shardings)
        args = tuple(a if i in static else p for i, (a, p) in enumerate(zip(args, placed)))
    statics, dyn_args, dyn_kwargs = jitted._split(args, kwargs)
    leaves, treedef = tree_flatten((tuple(dyn_args), dyn_kwargs))
    avals, values, dims = [], [], []
    for i, leaf in enumerate(leaves):
        if type(leaf) is GlobalArray:
            avals.append(leaf.aval)
            values.append(leaf.local)
            dims.append(leaf.split)
        else:
            aval, value = leaf_aval(leaf, f"argument {i} of {jitted.__name__}", dense=True)
            avals.append(aval)
            values.append(value)
            dims.append(None)
    process, processes = process_layout()
    key = (treedef, tuple(avals), tuple(dims), statics, processes)
    cache = jitted._spanning

    def make(stale):
        st, _, _ = staging.stage_call(jitted._fun, args, kwargs, jitted._static,
                                      shown=jitted.__name__, avals=avals)
        n = st.out_tree.num_leaves
        per_leaf = _per_leaf(out_shardings, tree_unflatten(st.out_tree, [0] * n))
        targets = [None if s is None else _as_sharding(s) for s in per_leaf]
        targets += [None] * (len(st.out_avals) - n)   # globals the function assigns
        entry = _Entry()
        entry.out_dims = [None if s is None else process_split(s, a.shape)
                          for s, a in zip(targets, st.out_avals)]
        local = partition(st.fn, dims + [None] * len(st.extra), entry.out_dims, process,
                          processes)
        _, entry.executable = staging.compile_ssa(local, jitted._backend,
                                                  fallback=jitted._fallback,
                                                  name=jitted.__name__)
        entry.consts, entry.out_tree, entry.writes = st.extra, st.out_tree, st.writes
        entry.out_shardings, entry.out_avals = targets, st.out_avals
        entry.out_weak = [a.weak_type for a in st.out_avals]
        entry.guards = st.guards
        return entry
    entry = cache.lookup(key, make)
    raw = entry.executable(*values, *entry.consts)
    outs = []
    for value, weak, target, aval, d in zip(raw, entry.out_weak, entry.out_shardings,
                                            entry.out_avals, entry.out_dims):
        if target is None:
            outs.append(wrap_outputs([value], [weak])[0])
        elif d is None:
            outs.append(placed_on(wrap_outputs([value], [weak])[0], target))
        else:
            outs.append(from_local_block(value, target, aval.shape, weak))
    if entry.writes:
        staging.assign_globals(entry.writes, outs)
        outs = outs[:entry.out_tree.num_leaves]
    return tree_unflatten(entry.out_tree, outs)


def _per_leaf(prefix, tree):
    """One sharding (or None) per leaf of `tree`, from the pytree prefix `prefix`."""
    def is_sharding(x):
        return x is None or isinstance(x, (Sharding, PartitionSpec))
    if is_sharding(prefix):
        return [prefix] * len(tree_leaves(tree))
    lists = tree_map(lambda s, sub: [s] * len(tree_leaves(sub)), prefix, tree,
                     is_leaf=is_sharding)
    return [s for chunk in tree_leaves(lists, is_leaf=lambda x: isinstance(x, list))
            for s in chunk]

