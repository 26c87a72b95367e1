"""`kiln.custom_batching`: user-defined batching, as `jax.custom_batching` has it:
`custom_vmap` and `sequential_vmap`.

A `custom_vmap` function called outside any transformation just runs. While kiln specialises,
the call becomes one `custom_vmap_call` primitive over the function's region
(`compiler/primitives/autodiff.py`); when `vmap` batches it, it calls the rule given by
`def_vmap`, `rule(axis_size, in_batched, *args) -> (out, out_batched)`, specialised then with
the batch known: `in_batched` is a list with one pytree of bools per argument, batched
arguments carry the batch on axis 0, and the rule says by `out_batched` (a pytree of bools
with `out`'s structure) which outputs it returns batched (on axis 0). Unbatched calls run the
function itself, and derivatives differentiate the function, not the rule.
"""
import functools

from .tree_util import tree_flatten, tree_unflatten, tree_map
from .custom_derivatives import value_aval, _check_out, _name, is_tracing, _walk
from .compiler.ir.builder import current, trace_region, close_regions
from .compiler.primitives import PRIMITIVES, regions
from .compiler.primitives.autodiff import custom_vmap_rule

__all__ = ["custom_vmap", "sequential_vmap"]


def _positional(fun, args, kwargs, name):
    if not kwargs:
        return tuple(args)
    import inspect
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError("The input arguments to the custom_vmap-decorated function "
                        f"{name} could not be resolved to positional-only arguments. "
                        f"Binding failed with the error:\n{e}") from e
    bound.apply_defaults()
    return tuple(bound.args) + tuple(bound.kwargs.values())


def _check_trees(rule, original, out_tree, batched_tree):
    rule_name = getattr(rule, "__name__", "<unnamed rule>")
    if out_tree != batched_tree:
        raise ValueError("structure of output value and output batching specification "
                         f"returned by custom vmap rule ({rule_name}) do not match.\n"
                         f"Output values: {out_tree}\nBatching spec: {batched_tree}")
    if out_tree != original:
        raise ValueError(f"structure of output returned by custom vmap rule ({rule_name}) "
                         "does not match that of original custom-vmapped function.\n"
                         f"Original output: {original}\nRule output: {out_tree}")


class custom_vmap:
    """`@kiln.custom_batching.custom_vmap`: a function whose batching is the rule given by
    `def_vmap` instead of the batching of its body."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun, assigned=("__name__", "__qualname__", "__doc__"),
                                 updated=())
        self.fun = fun
        self.vmap_rule = None

    def def_vmap(self, vmap_rule):
        """Set the batching rule, `vmap_rule(axis_size, in_batched, *args) -> (out,
        out_batched)`; returns it, so it can decorate the rule."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args, **kwargs):
        shown = getattr(self.fun, "__name__", "<unnamed function>")
        args = _positional(self.fun, args, kwargs, shown)
        if not self.vmap_rule:
            raise AttributeError(f"No batching rule defined for custom_vmap function {shown} "
                                 "using def_vmap.")
        name = _name(self.fun)
        leaves, tree = tree_flatten(args)
        if not is_tracing(leaves):
            return self.fun(*args)
        record = {}

        def call(inputs):
            out = _walk(self.fun, tree_unflatten(tree, inputs))
            out_leaves, record["tree"] = tree_flatten(out)
            _check_out("custom_vmap function", name, out_leaves)
            return out_leaves
        b = current()
        (f,), outer = close_regions([trace_region(b, name, call, [value_aval(x) for x in leaves])])
        token = custom_vmap_rule(self._batched(name, tree, record["tree"], outer))
        outs = b.bind(PRIMITIVES["custom_vmap_call"], list(outer) + list(leaves),
                      dict(call=f, rule=token, num_consts=len(outer)))
        return tree_unflatten(record["tree"], list(outs))

    def _batched(self, name, tree, out_tree, outer):
        """The batching rule of one call for `custom_vmap_call`: specialises the user's rule
        on the batched inputs (the values the function closed over first, standing for
        `outer`) and emits it into the current builder."""
        rule = self.vmap_rule

        def batched(size, in_batched, consts, inputs):
            record = {}

            def body(values):
                b = current()
                for t, x in zip(outer, values):
                    b.alias(t, x)
                args = tree_unflatten(tree, values[len(consts):])
                flags = list(tree_unflatten(tree, in_batched))
                result = _walk(rule, [size, flags, *args])
                if not (isinstance(result, (tuple, list)) and len(result) == 2):
                    raise TypeError(f"the custom vmap rule of {name} must return a pair "
                                    f"(out, out_batched), got {type(result).__name__}")
                out_leaves, rule_tree = tree_flatten(result[0])
                spec, spec_tree = tree_flatten(result[1])
                _check_trees(rule, out_tree, rule_tree, spec_tree)
                record["batched"] = [bool(s) for s in spec]
                return out_leaves
            values = list(consts) + list(inputs)
            region = trace_region(current(), name + "_vmap_rule", body,
                                  [value_aval(v) for v in values])
            (fn,), extra = close_regions([region])
            outs, _ = regions.batch(fn, list(extra) + values, [None] * (len(extra) + len(values)),
                                    size)
            return list(outs), record["batched"]
        return batched


def sequential_vmap(f):
    """`f` as a `custom_vmap` function whose batching runs `f` once per example, in order
    (`lax.map` over the batched arguments; unbatched ones are shared): for functions with no
    batched form, or whose batched form would cost too much."""
    from . import lax
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        flags, flag_tree = tree_flatten(in_batched)
        leaves = tree_flatten(list(args))[0]
        mapped = [x for x, m in zip(leaves, flags) if m]

        def one(mapped_leaves):
            it = iter(mapped_leaves)
            merged = [next(it) if m else x for x, m in zip(leaves, flags)]
            return f(*tree_unflatten(flag_tree, merged))
        out = lax.map(one, mapped)
        return out, tree_map(lambda _: True, out)
    return f


def __dir__():
    """The public names only."""
    return sorted(__all__)
