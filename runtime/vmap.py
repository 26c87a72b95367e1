"""`kiln.vmap`: JAX's batching API on the batching transform of the SSA form
(`kiln.compiler.transforms.vmap`).

The function is specialised for one example (the argument types with the mapped axes
removed), so its Python control flow on values compiles as usual; the batching transform
then turns that SSA into SSA over the whole batch. Outside `jit` the batched function is
compiled once per argument signature and run on the reference backend; inside a
specialisation (`jit(vmap(f))`, `vmap(grad(f))`, `grad(vmap(f))`, nested `vmap`) it is
emitted inline.

`axis_name` is bound (with the batch size, in `kiln.lax`'s axis environment) while the
function is specialised, so collectives over it (`lax.psum(x, 'i')`, `axis_index`,
`all_gather`, ...) check their names at the user's call, and the batching transform turns them
into computations across the batch axis (`psum` a `reduce_sum`); a collective over an outer
vmap's name is batched like any operation and left for that vmap.

Every primitive batches by its own rule (docs/vmap.md); nothing falls back to a loop over
examples except host callbacks, which run once per example in order as in JAX.
"""
from .tree_util import tree_flatten, tree_unflatten, tree_structure
from .jit import _leaf_aval, wrap_outputs
from .ad import stage, _call, _name_like, _guards_ok, _is_tracer, _value, _describe
from .compiler.ir.builder import Builder, current
from .compiler.primitives import emit
from .compiler.transforms.vmap import batch_emit, moveaxis, to_front
from .lax._parallel import axis_frame


class _Example:
    """A stand-in argument of a given type (what `stage` specialises for)."""
    _kiln_trace = True
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval


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
    raise ValueError(f"vmap {what} specification must be a tree prefix of the corresponding "
                     f"value, got specification {spec!r} for value of structure "
                     f"{tree_structure(tree_value)}")


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None):
    """`kiln.vmap` (JAX's signature): map `fun` over an axis of its arguments."""
    if not callable(fun):
        raise TypeError(f"vmap requires a callable, got {fun!r}")
    _check_axis_spec("in_axes", in_axes)
    _check_axis_spec("out_axes", out_axes)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    cache = {}

    @_call
    def batched(*args, **kwargs):
        leaves, treedef, avals, axes, size, examples = _prepare(args, kwargs)
        if current() is not None or any(_is_tracer(x) for x in leaves):
            st = _stage_example(examples, treedef, size)
            outs, odims = batch_emit(st.fn, list(leaves) + list(st.extra),
                                     axes + [None] * len(st.extra), size, axis_name=axis_name)
            placed = _place(outs, odims, st.out_tree, size)
            return tree_unflatten(st.out_tree, placed)
        key = (treedef, tuple(avals), tuple(axes))
        entry = cache.get(key)
        if entry is None or not _guards_ok(entry[4]):
            entry = cache[key] = _compile(leaves, avals, examples, treedef, axes, size)
        executable, consts, out_tree, out_weak, _ = entry
        outs = executable(*[_value(x) for x in leaves], *consts)
        return tree_unflatten(out_tree, wrap_outputs(outs, out_weak))

    def _place(outs, odims, out_tree, size):
        specs = _broadcast_prefix(out_axes, tree_unflatten(out_tree, list(outs)), "out_axes") \
            if not (out_axes is None or isinstance(out_axes, int)) else [out_axes] * len(outs)
        placed = []
        for o, d, spec in zip(outs, odims, specs):
            nd = len(emit.aval(o).shape) + (1 if d is None else 0)
            if spec is None:
                if d is not None:
                    raise ValueError(f"vmap has mapped output but out_axes is None "
                                     f"({_describe(fun)})")
                placed.append(o)
                continue
            if not -nd <= spec < nd:
                raise ValueError(f"vmap out_axes {spec} is out of bounds for an output of "
                                 f"rank {nd} ({_describe(fun)})")
            o = to_front(o, d, size)
            placed.append(moveaxis(o, 0, spec % nd))
        return placed

    def _compile(leaves, avals, examples, treedef, axes, size):
        from .compiler import passes
        from .compiler.backends.reference import compile_function
        fn, st, own_consts = _batched_function(avals, examples, treedef, axes, size)
        ssa = passes.run_pipeline(fn, dump_name=fn.name)
        consts = list(st.extra) + own_consts
        return (compile_function(ssa), consts, st.out_tree,
                [v.aval.weak_type for v in ssa.outvars], list(st.guards))

    def _prepare(args, kwargs):
        """(leaves, treedef, their types, mapped axes, batch size, one example's stand-ins)"""
        leaves, treedef = tree_flatten((tuple(args), kwargs))
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap in_axes must be an int, None, or a tuple of entries "
                             f"corresponding to the positional arguments passed to the "
                             f"function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)} ({_describe(fun)})")
        axes = (_broadcast_prefix(in_axes, tuple(args), "in_axes")
                + [0] * len(tree_flatten(kwargs)[0]))
        avals = [_leaf_aval(x, f"argument {i}")[0] for i, x in enumerate(leaves)]
        axes, size = _normalize_axes(axes, avals, args, kwargs, axis_size)
        examples = [_Example(a.update(shape=a.shape[:d] + a.shape[d + 1:]) if d is not None
                             else a) for a, d in zip(avals, axes)]
        return leaves, treedef, avals, axes, size, examples

    def _batched_function(avals, examples, treedef, axes, size):
        """The batched SSA Function over (leaves, extra operands), and the staging."""
        st = _stage_example(examples, treedef, size)
        b = Builder(st.fn.name, names=st.names)
        with b:
            inputs = [b.new_input(a, v.name) for a, v in zip(avals, st.fn.invars)]
            extra = [b.new_input(v.aval, v.name) for v in st.fn.invars[len(avals):]]
            outs, odims = batch_emit(st.fn, inputs + extra, axes + [None] * len(extra), size,
                                     axis_name=axis_name)
            fn = b.build(_place(outs, odims, st.out_tree, size))
        return fn, st, [value for _, value, _ in b.consts]

    def _stage_example(examples, treedef, size):
        """`fun` specialised for one example, with `axis_name` bound for its collectives."""
        with axis_frame(axis_name, size):
            return stage(fun, examples, treedef, _vmap_name(fun))

    def make_ir(*args, **kwargs):
        _, treedef, avals, axes, size, examples = _prepare(args, kwargs)
        return _batched_function(avals, examples, treedef, axes, size)[0]

    _name_like(batched, fun)
    batched._kiln_make_ir = make_ir
    return batched


def _vmap_name(fun):
    base = getattr(fun, "__name__", None) or getattr(getattr(fun, "func", None), "__name__",
                                                    "fn")
    return f"vmap_{base}".replace("<lambda>", "lambda")


def _normalize_axes(axes, avals, args, kwargs, axis_size):
    """Axes made non-negative and checked; the common size of the mapped axes."""
    out, sizes = [], []
    for i, (d, a) in enumerate(zip(axes, avals)):
        if d is None:
            out.append(None)
            continue
        nd = len(a.shape)
        if not -nd <= d < nd:
            raise ValueError(f"vmap was requested to map its argument along axis {d}, which "
                             f"implies that its rank should be at least {d + 1 if d >= 0 else -d}"
                             f", but is only {nd} (its shape is {a.shape}) (argument leaf {i})")
        d %= nd
        out.append(d)
        sizes.append((i, d, a.shape[d]))
    if not sizes:
        if axis_size is None:
            raise ValueError("vmap must have at least one non-None value in in_axes, or be "
                             "given axis_size")
        return out, int(axis_size)
    size = sizes[0][2]
    if any(s != size for _, _, s in sizes) or (axis_size is not None and axis_size != size):
        lines = [f"  argument leaf {i} has shape {avals[i].shape} and axis {d} is to be "
                 f"mapped" for i, d, _ in sizes]
        raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n"
                         + "\n".join(lines)
                         + "\nso the mapped sizes are " + ", ".join(str(s) for *_, s in sizes))
    return out, size
