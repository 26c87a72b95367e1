"""`kiln.jit(f, in_shardings=..., out_shardings=...)` with several processes (kiln.distributed):
one program over global arrays, each process computing on its own blocks.

A call places its arguments as `in_shardings` says (`device_put`: a host value, the same in
every process, keeps this process's block; a global array stays as it is), stages `f` for the
global shapes (so Python code in `f` sees the shapes JAX's would), and partitions that SSA over
the processes (compiler/transforms/partition.py): each input is split along the dimension its
sharding splits across the processes, or replicated, in the blocks its layout gives the
processes (a `Grid`: every split value of one call follows one layout). Each output comes out
as `out_shardings` says; an unspecified one keeps the layout the partitioned computation
leaves it in, as JAX keeps the sharding it infers: a result still split is a global array
whose sharding is the split argument's mesh axes at the result's split dimension (gathered
whole instead when those axes do not divide it evenly), and a replicated one an ordinary
Array. So a step whose output feeds the next step keeps the data where it is. The partitioned
function, this process's program, is compiled for the jit's backend and cached per argument
signature and layout, as `jit`'s own. For the data-parallel step (batch split across the
processes, parameters replicated), the batch mean's reduction becomes one `process_allreduce`
per reduced value, and the updated parameters are the same in every process.
"""
from .tree_util import tree_flatten, tree_unflatten, tree_map, tree_leaves
from . import staging
from .array import placed_on
from .distributed import process_layout
from .global_arrays import GlobalArray, process_split, from_local_block
from .sharding import Sharding, PartitionSpec, NamedSharding
from .staging import leaf_aval, wrap_outputs
from .compiler.primitives.partitioning import Grid
from .compiler.transforms.partition import partition, INFER


class _Entry(staging.Entry):
    __slots__ = ("executable", "consts", "out_tree", "out_weak", "out_dims", "out_shardings",
                 "out_avals", "writes")


def sharded_call(jitted, args, kwargs):
    """A call of `jitted` in a run of several processes: a jit with shardings, or one given
    a global array (its inputs then keep their own layouts)."""
    from .placement import _as_sharding
    args, statics, leaves, treedef = placed_call(jitted, args, kwargs)
    out_shardings = (jitted._shardings or (None, None))[1]
    avals, values, dims, split = [], [], [], []
    for i, leaf in enumerate(leaves):
        if type(leaf) is GlobalArray:
            avals.append(leaf.aval)
            values.append(leaf.local)
            dims.append(leaf.split)
            split.append(leaf)
        else:
            aval, value = leaf_aval(leaf, f"argument {i} of {jitted.__name__}", dense=True)
            avals.append(aval)
            values.append(value)
            dims.append(None)
    process, processes = process_layout()
    layouts = tuple((a.owners, a.sharding) for a in split)
    key = (treedef, tuple(avals), tuple(dims), layouts, statics, processes)

    def make(stale):
        st, _, _ = staging.stage_call(jitted._fun, args, kwargs, jitted._static,
                                      shown=jitted.__name__, avals=avals)
        n = st.out_tree.num_leaves
        per_leaf = _per_leaf(out_shardings, tree_unflatten(st.out_tree, [0] * n))
        targets = [None if s is None else _as_sharding(s) for s in per_leaf]
        targets += [None] * (len(st.out_avals) - n)   # globals the function assigns
        wanted = [INFER if t is None else process_split(t, a.shape)
                  for t, a in zip(targets, st.out_avals)]
        source = _layout_source(split, targets, wanted, jitted.__name__)
        grid = Grid(process, source[2] if source else tuple(range(processes)))
        in_dims = dims + [None] * len(st.extra)
        out_dims = [w if w == INFER else w[0] for w in wanted]
        local, got = partition(st.fn, in_dims, out_dims, grid)
        shardings = [t if t is not None or d is None else _inferred(source, d, a.shape)
                     for t, d, a in zip(targets, got, st.out_avals)]
        if any(s is None and d is not None for s, d in zip(shardings, got)):
            out_dims = [None if s is None else d for s, d in zip(shardings, got)]
            local, got = partition(st.fn, in_dims, out_dims, grid)
        entry = _Entry()
        _, entry.executable = staging.compile_ssa(local, jitted._backend,
                                                  fallback=jitted._fallback,
                                                  name=jitted.__name__)
        entry.consts, entry.out_tree, entry.writes = st.extra, st.out_tree, st.writes
        entry.out_shardings, entry.out_avals, entry.out_dims = shardings, st.out_avals, got
        entry.out_weak = [a.weak_type for a in st.out_avals]
        entry.guards = st.guards
        return entry
    entry = jitted._spanning.lookup(key, make)
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


def placed_call(jitted, args, kwargs):
    """(the positional arguments placed by `jitted`'s in_shardings (`device_put`; static ones
    as they are), the static values, the dynamic leaves, their pytree definition)."""
    from .placement import device_put
    in_shardings = (jitted._shardings or (None, None))[0]
    if in_shardings is not None:
        static = set(jitted._static.nums)
        placed = device_put(tuple(args), in_shardings)
        args = tuple(a if i in static else p for i, (a, p) in enumerate(zip(args, placed)))
    statics, dyn_args, dyn_kwargs = jitted._split(args, kwargs)
    leaves, treedef = tree_flatten((tuple(dyn_args), dyn_kwargs))
    return args, statics, leaves, treedef


def _layout_source(split, targets, wanted, name):
    """(sharding, split dimension, owners) of the first split argument (else the first split
    output sharding), whose blocks every split value of the call follows; None if nothing is
    split. Arguments or outputs laid out over the processes in another order or block count
    are a NotImplementedError."""
    found = [(a.sharding, a.split, a.owners) for a in split]
    found += [(t, w[0], w[1]) for t, w in zip(targets, wanted)
              if w != INFER and w[0] is not None]
    if not found:
        return None
    for sharding, _, owners in found[1:]:
        if owners != found[0][2]:
            raise NotImplementedError(
                f"{name}: its arguments and out_shardings lay values over the processes in "
                f"different blocks ({found[0][0]}: process p holds block "
                f"{list(found[0][2])}[p]; {sharding}: {list(owners)}[p]); kiln partitions a "
                f"call over one such layout: use the same mesh for every sharding")
    return found[0]


def _inferred(source, d, shape):
    """The sharding a result split along `d` keeps (the split argument's mesh and mesh axes,
    at dimension `d`), or None when it does not lay a `shape` array out in the same blocks
    (then the result is gathered whole, replicated)."""
    sharding, split, owners = source
    if not isinstance(sharding, NamedSharding) or len(sharding.spec) <= split:
        return None
    out = NamedSharding(sharding.mesh, PartitionSpec(*[None] * d, sharding.spec[split]))
    try:
        layout = process_split(out, shape)
    except (ValueError, NotImplementedError):
        return None
    return out if layout == (d, owners) else None


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

