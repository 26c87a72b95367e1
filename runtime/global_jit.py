"""`kiln.jit(f, in_shardings=..., out_shardings=...)` with several processes (kiln.distributed):
one program over global arrays, each process computing on its own blocks.

A call places its arguments as `in_shardings` says (`device_put`: a host value, the same in
every process, keeps this process's block; a global array stays as it is), stages `f` for the
global shapes (so Python code in `f` sees the shapes JAX's would), and partitions that SSA over
the processes (compiler/transforms/partition.py): each input is split along the dimension its
sharding splits across the processes, or replicated, in the blocks its layout gives the
processes (a `Grid`: every split value of one call follows one layout). Values split over
two or more mesh axes of processes (P("x", "y") over a 2 x 2 mesh of processes: rows over
"x", columns over "y") are partitioned one axis at a time (`_partition`): each axis a Grid
whose peers are the processes with this one's blocks on the other axes, so that a reduction
over one split dimension combines the blocks of this process's row or column of the mesh. Each output comes out
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
import math

from .tree_util import tree_flatten, tree_unflatten, tree_map, tree_leaves
from . import staging
from .array import placed_on
from .distributed import process_layout
from .global_arrays import (GlobalArray, process_split, from_local_block, split_pairs,
                            block_count)
from .sharding import Sharding, PartitionSpec, NamedSharding
from .staging import leaf_aval, wrap_outputs
from .compiler.primitives.partitioning import Grid
from .compiler.transforms.partition import partition, INFER
from .compiler.primitives.processes import first_crossing
from .compiler.errors import located


class _Entry(staging.Entry):
    __slots__ = ("executable", "consts", "out_tree", "out_weak", "out_dims", "out_shardings",
                 "out_avals", "writes")


def sharded_call(jitted, args, kwargs):
    """A call of `jitted` in a run of several processes: a jit with shardings, or one given
    a global array (its inputs then keep their own layouts)."""
    from .placement import _as_sharding
    args, statics, leaves, treedef = placed_call(jitted, args, kwargs)
    out_shardings = (jitted._shardings or (None, None))[1]
    avals, values, dims, split, leaves_of = [], [], [], [], []
    for i, leaf in enumerate(leaves):
        if type(leaf) is GlobalArray:
            avals.append(leaf.aval)
            values.append(leaf.local)
            dims.append(leaf.split)
            split.append(leaf)
            leaves_of.append(leaf)
        else:
            aval, value = leaf_aval(leaf, f"argument {i} of {jitted.__name__}", dense=True)
            avals.append(aval)
            values.append(value)
            dims.append(None)
            leaves_of.append(_Whole)
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
        axes = _axes(split, targets, wanted, jitted.__name__)
        crossing = first_crossing(st.fn) if len(axes) > 1 else None
        if crossing is not None:
            raise NotImplementedError(located(
                f"{jitted.__name__}: a pmap whose axis spans the processes (its "
                f"{crossing.prim.name}) inside a jit whose values are split over "
                f"{len(axes)} mesh axes of processes is not supported", crossing.info,
                "Call the pmap outside the jit, or split the jit's values over one mesh axis "
                "of processes."))
        in_dims = [_on_axes(axes, leaf.split, leaf.owners) for leaf in leaves_of] + \
            [[None] * len(axes)] * len(st.extra)
        out_dims = [w if w == INFER else _on_axes(axes, *w) for w in wanted]
        local, got = _partition(st.fn, in_dims, out_dims, axes, process, st.extra)
        shardings = [t if t is not None or all(k is None for k in d)
                     else _inferred(axes, d, a.shape)
                     for t, d, a in zip(targets, got, st.out_avals)]
        if any(s is None and any(k is not None for k in d) for s, d in zip(shardings, got)):
            out_dims = [[None] * len(axes) if s is None else d for s, d in zip(shardings, got)]
            local, got = _partition(st.fn, in_dims, out_dims, axes, process, st.extra)
        entry = _Entry()
        _, entry.executable = staging.compile_ssa(local, jitted._backend,
                                                  fallback=jitted._fallback,
                                                  name=jitted.__name__)
        entry.consts, entry.out_tree, entry.writes = st.extra, st.out_tree, st.writes
        entry.out_shardings, entry.out_avals = shardings, st.out_avals
        entry.out_dims = [None if all(k is None for k in d) else d for d in got]
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


class _Whole:
    """What an argument that is not a global array is laid out as: whole in every process."""
    split = owners = None


def _axes(split, targets, wanted, name):
    """The mesh axes of processes the call's split values lie over, in the order met (the
    split arguments', then the split out_shardings'): one (owners, sharding, dimension) per
    distinct owners tuple, the first value split over it giving the sharding and dimension
    (for the inferred output shardings). Over several axes, the axes' blocks must make a
    grid (each process one combination); other layouts are a NotImplementedError."""
    found = [(a.sharding, a.split, a.owners) for a in split]
    found += [(t, w[0], w[1]) for t, w in zip(targets, wanted)
              if w != INFER and w[0] is not None]
    axes = []
    for sharding, dims, owners in found:
        for d, o in split_pairs(dims, owners):
            if all(o != axis[0] for axis in axes):
                axes.append((o, sharding, d))
    if len(axes) > 1:
        held = {tuple(axis[0][p] for axis in axes) for p in range(len(axes[0][0]))}
        if len(held) != math.prod(block_count(axis[0]) for axis in axes):
            first, other = axes[0], axes[1]
            raise NotImplementedError(
                f"{name}: its arguments and out_shardings lay values over the processes in "
                f"different blocks ({first[1]}: process p holds block {list(first[0])}[p]; "
                f"{other[1]}: {list(other[0])}[p]); kiln partitions a call over one such "
                f"layout, or over mesh axes that make a grid of blocks: use the same mesh "
                f"for every sharding")
    return axes


def _on_axes(axes, dims, owners):
    """The dimension a value laid out as (`dims`, `owners`) (process_split) is split along
    over each of `axes` (None: whole over it)."""
    out = [None] * len(axes)
    for d, o in split_pairs(dims, owners):
        out[[axis[0] for axis in axes].index(o)] = d
    return out


def _partition(fn, in_dims, out_dims, axes, process, consts=()):
    """`fn` partitioned over each of `axes` in turn (partition.py): (this process's function,
    each output's split dimension over each axis). `consts`: the values of `fn`'s last
    inputs (the staged constants)."""
    if not axes:
        return fn, [[] for _ in out_dims]
    got = None
    tags = 0
    for k, (owners, _, _) in enumerate(axes):
        grid = Grid(process, owners, _peers(axes, k, process) if len(axes) > 1 else None)
        grid.tags = tags
        wanted = [w if w == INFER else w[k] for w in out_dims]
        fn, dims = partition(fn, [d[k] for d in in_dims], wanted, grid, after=k > 0,
                             consts=consts)
        tags = grid.tags
        got = [[d] for d in dims] if got is None else [g + [d] for g, d in zip(got, dims)]
    return fn, got


def _peers(axes, k, process):
    """For each block of axis k, the process this one takes it from: among the processes
    with this one's blocks on the other axes, holder j of that block for holder j of this
    one's."""
    count = len(axes[0][0])
    group = [q for q in range(count)
             if all(axis[0][q] == axis[0][process] for j, axis in enumerate(axes) if j != k)]
    owners = axes[k][0]
    holders = [[q for q in group if owners[q] == b] for b in range(block_count(owners))]
    rank = holders[owners[process]].index(process)
    return [h[rank % len(h)] for h in holders]


def _inferred(axes, dims, shape):
    """The sharding of a result split along `dims[k]` over each axis k (the mesh and mesh
    axes of the value that gave the axis, at those dimensions), or None when it does not lay
    a `shape` array out in the same blocks (then the result is gathered whole, replicated)."""
    spec, mesh = [None] * len(shape), None
    for (owners, sharding, split), d in zip(axes, dims):
        if d is None:
            continue
        if not isinstance(sharding, NamedSharding) or len(sharding.spec) <= split:
            return None
        if mesh is not None and sharding.mesh != mesh:
            return None
        mesh = sharding.mesh
        names = sharding.spec[split]
        names = names if isinstance(names, tuple) else (names,)
        spec[d] = names if spec[d] is None else spec[d] + names
    spec = [None if n is None else n[0] if len(n) == 1 else n for n in spec]
    while spec and spec[-1] is None:
        spec.pop()
    out = NamedSharding(mesh, PartitionSpec(*spec))
    try:
        layout = process_split(out, shape)
    except (ValueError, NotImplementedError):
        return None
    return out if _on_axes_or_none(axes, layout) == list(dims) else None


def _on_axes_or_none(axes, layout):
    try:
        return _on_axes(axes, *layout)
    except ValueError:   # a split over blocks that are none of the axes'
        return None


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

