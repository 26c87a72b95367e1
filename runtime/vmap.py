"""`kiln.vmap`: JAX's batching API on the batching transform of the SSA form
(`kiln.compiler.transforms.vmap`).

The function is staged (`kiln.staging.stage`) for one example (the argument types with the
mapped axes removed), so its Python control flow on values compiles as usual; the batching
transform then turns that SSA into SSA over the whole batch. Outside `jit` the batched function
is compiled once per argument signature (`staging.compile_ssa`, cached in a
`staging.GuardedCache`) and run on the reference backend; inside a
specialisation (`jit(vmap(f))`, `vmap(grad(f))`, `grad(vmap(f))`, nested `vmap`) it is
emitted inline.

Unmapped leaves (`in_axes` None) that are neither arrays nor floats (bools, ints, strings, other
objects) are staged by value, as JAX keeps them concrete (`staging.static_mask`), and are part
of the cache key.

`axis_name` is bound (with the batch size, in `kiln.lax`'s axis environment) while the
function is specialised, so collectives over it (`lax.psum(x, 'i')`, `axis_index`,
`all_gather`, ...) check their names at the user's call, and the batching transform turns them
into computations across the batch axis (`psum` a `reduce_sum`); a collective over an outer
vmap's name is batched like any operation and left for that vmap.

Every primitive batches by its own rule (docs/vmap.md); nothing falls back to a loop over
examples except host callbacks, which run once per example in order as in JAX.

Refs made outside among the arguments of an eager call are mapped as JAX maps them: their
values go in along their axes, the function gets Refs made inside of them, and their final
values come out beside its result and are written back (`_through_refs`).
"""
from .tree_util import tree_flatten, tree_unflatten, tree_structure, tree_leaves
from .refs import Ref, new_ref
from . import staging
from .staging import leaf_value, wrap_outputs
from .dispatch import is_traced
from .array import TYPED
from .sharding_propagation import placed_by_walk
from .sharding_types import placements, placed_as_typed
from .execution_guards import check_execution
from .wrappers import user_facing, name_like, describe
from .compiler.ir.builder import Builder, current
from .compiler.primitives import emit
from .compiler.primitives.batching import moveaxis, to_front
from .compiler.transforms.vmap import batch_emit
from .lax._parallel import axis_frame


class _Entry(staging.Entry):
    __slots__ = ("executable", "consts", "out_tree", "out_weak",
                 "function",   # the batched SSA Function (sharding_propagation.placed_by_walk)
                 "placements")   # how its typed results are placed (sharding_types.placements)


def _check_axis_spec(what, spec):
    ok = spec is None or (isinstance(spec, int) and not isinstance(spec, bool))
    if not ok and not isinstance(spec, (tuple, list, dict)):
        raise TypeError(f"vmap {what} must be an int, None, or a (nested) tuple/list/dict of "
                        f"them matching the arguments; got {spec!r}")


def _broadcast_prefix(spec, tree_value, what):
    """One axis per leaf of `tree_value`, from the pytree prefix `spec`."""
    if spec is None or isinstance(spec, int):
        return [spec] * len(tree_flatten(tree_value)[0])
    if isinstance(spec, (tuple, list)) and isinstance(tree_value, (tuple, list)):
        if len(spec) != len(tree_value):
            raise ValueError(f"vmap {what} specification must be a tree prefix of the "
                             f"corresponding value: {type(spec).__name__} of length "
                             f"{len(spec)} for a value with {len(tree_value)} entries")
        return [a for s, v in zip(spec, tree_value) for a in _broadcast_prefix(s, v, what)]
    if isinstance(spec, dict) and isinstance(tree_value, dict):
        if set(spec) != set(tree_value):
            raise ValueError(f"vmap {what} specification must be a tree prefix of the "
                             f"corresponding value: keys {sorted(spec)} for keys "
                             f"{sorted(tree_value)}")
        return [a for k in sorted(tree_value)
                for a in _broadcast_prefix(spec[k], tree_value[k], what)]
    spec_leaves, spec_tree = tree_flatten(spec, is_leaf=lambda x: x is None)
    if spec_tree.num_nodes > 1:   # another pytree node (a registered class, a namedtuple)
        try:
            subtrees = spec_tree.flatten_up_to(tree_value)
        except ValueError:
            subtrees = None
        if subtrees is not None:
            return [a for s, v in zip(spec_leaves, subtrees)
                    for a in _broadcast_prefix(s, v, what)]
    raise ValueError(f"vmap {what} specification must be a tree prefix of the corresponding "
                     f"value, got specification {spec!r} for value of structure "
                     f"{tree_structure(tree_value)}")


def _values_through_refs(fun, treedef, positions):
    """`fun` over the flat argument leaves whose Refs (at `positions`) are given as values:
    each becomes a Ref made inside, and their values after `fun` are returned beside its
    result (vmap's `_through_refs`)."""
    def through_refs(leaves):
        leaves = list(leaves)
        made = [new_ref(leaves[i]) for i in positions]
        for i, r in zip(positions, made):
            leaves[i] = r
        args, kwargs = tree_unflatten(treedef, leaves)
        return fun(*args, **kwargs), [r[...] for r in made]
    through_refs.__name__ = getattr(fun, "__name__", "function")
    return through_refs


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None):
    """`kiln.vmap` (JAX's signature): map `fun` over an axis of its arguments."""
    if not callable(fun):
        raise TypeError(f"vmap requires a callable, got {fun!r}")
    _check_axis_spec("in_axes", in_axes)
    _check_axis_spec("out_axes", out_axes)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    cache = staging.GuardedCache()
    with_refs = {}   # (tree, Ref positions, their axes) -> the vmap of fun through the Refs

    @user_facing
    def batched(*args, **kwargs):
        if current() is None and any(type(x) is Ref for x in tree_leaves((args, kwargs))):
            return _through_refs(args, kwargs)
        leaves, treedef, statics, avals, axes, size, examples = _prepare(args, kwargs)
        if current() is not None or any(is_traced(x) for x in leaves):
            st = _stage_example(examples, treedef, statics, size)
            outs, odims = batch_emit(st.fn, list(leaves) + list(st.extra),
                                     axes + [None] * len(st.extra), size, axis_name=axis_name)
            placed = place_outputs(outs, odims, st.out_tree, size, out_axes, fun)
            return tree_unflatten(st.out_tree, placed)
        entry = cache.lookup((treedef, statics, tuple(avals), tuple(axes)), lambda stale: _compile(
            avals, examples, treedef, statics, axes, size))
        check_execution(staging.function_name(fun, "vmap"))
        outs = wrap_outputs(entry.executable(*[leaf_value(x) for x in leaves], *entry.consts),
                            entry.out_weak)
        if entry.placements:   # typed over Explicit mesh axes: placed as jit places them
            outs = placed_as_typed(outs, entry.placements)
        elif TYPED and any(id(x) in TYPED for x in leaves):   # (placed arguments)
            outs = placed_by_walk(entry.function, leaves, outs,
                                  staging.function_name(fun, "vmap"))
        return tree_unflatten(entry.out_tree, outs)

    def _through_refs(args, kwargs):
        """The call with Refs made outside among the arguments, as JAX maps them: each Ref's
        value goes in mapped along its axis, the function gets a Ref of it (each batch member
        its own slice), and the final values are written back to the Refs after the call."""
        leaves, treedef = tree_flatten((tuple(args), kwargs))
        positions = tuple(i for i, x in enumerate(leaves) if type(x) is Ref)
        arg_axes = _broadcast_prefix(in_axes, tuple(args), "in_axes") if \
            isinstance(in_axes, tuple) or in_axes is None or isinstance(in_axes, int) else None
        if arg_axes is None:
            raise ValueError("vmap of a function given Refs takes in_axes as an int, None or a "
                             "tuple with one entry per positional argument")
        axes = arg_axes + [0] * (len(leaves) - len(arg_axes))   # (keyword arguments: 0)
        ref_axes = [axes[i] for i in positions]
        key = (treedef, positions, tuple(axes))
        inner = with_refs.get(key)
        if inner is None:
            inner = with_refs[key] = vmap(
                _values_through_refs(fun, treedef, positions), in_axes=(list(axes),),
                out_axes=(out_axes, ref_axes), axis_name=axis_name, axis_size=axis_size)
        refs = [leaves[i] for i in positions]
        values = list(leaves)
        for i, r in zip(positions, refs):
            values[i] = r[...]
        try:
            out, final = inner(values)
        except ValueError as e:
            if None not in ref_axes or "out_axes is None" not in str(e):
                raise
            raise ValueError(
                f"vmap of {describe(fun)}: a Ref passed unmapped (in_axes None) is written "
                f"with a value that differs across the batch (every batch member would write "
                f"the same Ref), or an output given out_axes None differs across it. Map the "
                f"Ref along the batch (in_axes 0, a Ref with one entry per member), or write "
                f"it after the call") from None
        for r, v in zip(refs, final):
            r[...] = v
        return out

    def _compile(avals, examples, treedef, statics, axes, size):
        fn, st, own_consts = _batched_function(avals, examples, treedef, statics, axes, size)
        entry = _Entry()
        entry.function = fn
        ssa, entry.executable = staging.compile_ssa(fn)
        entry.consts = list(st.extra) + own_consts
        entry.out_tree = st.out_tree
        entry.out_weak = [v.aval.weak_type for v in ssa.outvars]
        entry.guards = st.guards
        entry.placements = placements([v.aval for v in fn.outvars], examples)
        return entry

    def _prepare(args, kwargs):
        """(traced leaves, treedef, static leaves, the traced ones' types and mapped axes, batch
        size, one example's stand-ins). Unmapped leaves that are neither arrays nor floats
        (bools, ints, strings, other objects) are static, concrete as in JAX
        (staging.static_mask)."""
        leaves, treedef = tree_flatten((tuple(args), kwargs))
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap in_axes must be an int, None, or a tuple of entries "
                             f"corresponding to the positional arguments passed to the "
                             f"function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)} ({describe(fun)})")
        statics, leaves, avals, axes, size, examples = split_mapped(
            leaves, in_axes, args, kwargs, axis_size)
        return leaves, treedef, statics, avals, axes, size, examples

    def _batched_function(avals, examples, treedef, statics, axes, size):
        """The batched SSA Function over (traced leaves, extra operands), and the staging."""
        st = _stage_example(examples, treedef, statics, size)
        b = Builder(st.fn.name, names=st.names)
        with b:
            inputs = [b.new_input(a, v.name) for a, v in zip(avals, st.fn.invars)]
            extra = [b.new_input(v.aval, v.name) for v in st.fn.invars[len(avals):]]
            outs, odims = batch_emit(st.fn, inputs + extra, axes + [None] * len(extra), size,
                                     axis_name=axis_name)
            fn = b.build(place_outputs(outs, odims, st.out_tree, size, out_axes, fun))
        return fn, st, [value for _, value, _ in b.consts]

    def _stage_example(examples, treedef, statics, size):
        """`fun` specialised for one example, with `axis_name` bound for its collectives."""
        def rebuild(tracers):
            return tree_unflatten(treedef, staging.merge_leaves(tracers, statics))
        with axis_frame(axis_name, size):
            return staging.stage(fun, examples, rebuild, staging.function_name(fun, "vmap"),
                                 api="batched by kiln.vmap")

    def make_ir(*args, **kwargs):
        _, treedef, statics, avals, axes, size, examples = _prepare(args, kwargs)
        return _batched_function(avals, examples, treedef, statics, axes, size)[0]

    name_like(batched, fun)
    batched._kiln_make_ir = make_ir
    return batched


def split_mapped(leaves, in_axes, args, kwargs, axis_size, api="vmap"):
    """The leaves of `(args, kwargs)` split by `in_axes` (a prefix of `args`; keyword
    arguments map along axis 0): (static leaves, traced leaves, their types, their mapped
    axes, the mapped size, one example's types)."""
    axes = (_broadcast_prefix(in_axes, tuple(args), "in_axes")
            + [0] * len(tree_flatten(kwargs)[0]))
    mask = staging.static_mask(leaves, [d is not None for d in axes], False)
    statics, leaves = staging.split_leaves(leaves, mask)
    axes = [d for d, m in zip(axes, mask) if not m]
    avals = list(staging.leaf_avals(leaves))
    axes, size = _normalize_axes(axes, avals, args, kwargs, axis_size, api)
    examples = [a.update(shape=a.shape[:d] + a.shape[d + 1:]) if d is not None else a
                for a, d in zip(avals, axes)]
    return statics, leaves, avals, axes, size, examples


def place_outputs(outs, odims, out_tree, size, out_axes, fun, api="vmap"):
    """The batched results `outs` (batch axis at `odims`, None: unbatched) with their batch
    axes where `out_axes` (a pytree prefix of the results) puts them."""
    specs = _broadcast_prefix(out_axes, tree_unflatten(out_tree, list(outs)), "out_axes") \
        if not (out_axes is None or isinstance(out_axes, int)) else [out_axes] * len(outs)
    placed = []
    for o, d, spec in zip(outs, odims, specs):
        nd = len(emit.aval(o).shape) + (1 if d is None else 0)
        if spec is None:
            if d is not None:
                raise ValueError(f"{api} has mapped output but out_axes is None "
                                 f"({describe(fun)})")
            placed.append(o)
            continue
        if not -nd <= spec < nd:
            raise ValueError(f"{api} out_axes {spec} is out of bounds for an output of "
                             f"rank {nd} ({describe(fun)})")
        o = to_front(o, d, size)
        placed.append(moveaxis(o, 0, spec % nd))
    return placed


def _normalize_axes(axes, avals, args, kwargs, axis_size, api="vmap"):
    """Axes made non-negative and checked; the common size of the mapped axes."""
    out, sizes = [], []
    for i, (d, a) in enumerate(zip(axes, avals)):
        if d is None:
            out.append(None)
            continue
        nd = len(a.shape)
        if not -nd <= d < nd:
            raise ValueError(f"{api} was requested to map its argument along axis {d}, which "
                             f"implies that its rank should be at least {d + 1 if d >= 0 else -d}"
                             f", but is only {nd} (its shape is {a.shape}) (argument leaf {i})")
        d %= nd
        out.append(d)
        sizes.append((i, d, a.shape[d]))
    if not sizes:
        if api != "vmap":   # JAX's pmap maps at least one argument, axis_size or not
            raise ValueError(f"{api} requires at least one argument with a mapped axis.")
        if axis_size is None:
            raise ValueError("vmap must have at least one non-None value in in_axes, or be "
                             "given axis_size")
        return out, int(axis_size)
    size = sizes[0][2]
    if any(s != size for _, _, s in sizes) or (axis_size is not None and axis_size != size):
        lines = [f"  argument leaf {i} has shape {avals[i].shape} and axis {d} is to be "
                 f"mapped" for i, d, _ in sizes]
        raise ValueError(f"{api} got inconsistent sizes for array axes to be mapped:\n"
                         + "\n".join(lines)
                         + "\nso the mapped sizes are " + ", ".join(str(s) for *_, s in sizes))
    return out, size
