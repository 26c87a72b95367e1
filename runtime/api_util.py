"""`kiln.api_util`, as far as kiln has JAX's `jax.api_util`: `shaped_abstractify` (the
abstract value of a value), `safe_map` (a `map` over sequences of one length), `debug_info`
(a function's name, source location and argument paths, as JAX's `DebugInfo`) and
`flatten_fun` / `flatten_fun_nokwargs`, the transformations of a
`kiln.extend.linear_util.WrappedFun` that make it take and return flat lists of leaves. JAX's helpers for its `jit` internals
(`argnums_partial`, `donation_vector`, `flatten_axes`, `rebase_donate_argnums`) are not here."""
import inspect

from .compiler.ir.abstract import ShapedArray
from .extend import linear_util as lu
from .tree_util import tree_flatten, tree_unflatten, tree_flatten_with_path, keystr

DebugInfo = lu.DebugInfo

__all__ = ["DebugInfo", "debug_info", "flatten_fun", "flatten_fun_nokwargs", "safe_map",
           "shaped_abstractify"]


def shaped_abstractify(x):
    """The ShapedArray of `x` (an array, a scalar, a traced value or a ShapeDtypeStruct)."""
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    if hasattr(x, "shape") and hasattr(x, "dtype") and not hasattr(x, "__array__"):
        return ShapedArray(x.shape, x.dtype, getattr(x, "weak_type", False))
    from .custom_derivatives import value_aval
    return value_aval(x)


def safe_map(f, *args):
    """`list(map(f, *args))`, with a ValueError when the sequences differ in length."""
    args = [list(a) for a in args]
    n = len(args[0])
    for i, a in enumerate(args[1:], 2):
        if len(a) != n:
            raise ValueError(f"safe_map() argument {i} is "
                             f"{'shorter' if len(a) < n else 'longer'} than argument 1")
    return list(map(f, *args))


def debug_info(traced_for, fun, args, kwargs, *, static_argnums=(), static_argnames=(),
               result_paths_thunk=None, sourceinfo=None, signature=None):
    """A `DebugInfo` for `fun` called with `args` and `kwargs` (the static ones among them
    named by `static_argnums` / `static_argnames`): `arg_names` are the paths of the dynamic
    leaves, positional arguments first, then keyword arguments sorted by name, as JAX
    flattens them."""
    given = getattr(fun, "__fun_debug_info__", None)
    if given is not None:
        return given
    if sourceinfo is None:
        sourceinfo = lu.fun_sourceinfo(fun)
    if signature is None:
        try:
            signature = inspect.signature(fun)
        except (ValueError, TypeError):
            signature = None
    static = object()
    nums = {i % len(args) if args else i for i in static_argnums}
    args_ = [static if i in nums else x for i, x in enumerate(args)]
    kwargs_ = {k: static if k in set(static_argnames) else x for k, x in kwargs.items()}
    return lu.DebugInfo(traced_for, sourceinfo,
                        _arg_names(signature, args_, kwargs_, static), result_paths_thunk)


def _arg_names(signature, args, kwargs, static):
    ordered = None
    if signature is not None:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            pass
        else:
            var_kw = next((n for n, p in signature.parameters.items()
                           if p.kind == inspect.Parameter.VAR_KEYWORD), None)
            ordered = [(n, x) for n, x in bound.arguments.items()
                       if n not in kwargs and n != var_kw]
            ordered += [(n if n in bound.arguments else f"{var_kw}['{n}']", x)
                        for n, x in sorted(kwargs.items())]
    if ordered is None:
        ordered = [("args", args)] + sorted((f"kwargs['{n}']", x) for n, x in kwargs.items()
                                            if x is not static)
    return tuple(name + keystr(path) for name, x in ordered
                 for path, leaf in tree_flatten_with_path(x)[0] if leaf is not static)


def _flatten_fun(f, store, in_tree, *args_flat):
    args, kwargs = tree_unflatten(in_tree, args_flat)
    leaves, out_tree = tree_flatten(f(*args, **kwargs))
    store.store(out_tree)
    return leaves


def _flatten_fun_nokwargs(f, store, in_tree, *args_flat):
    leaves, out_tree = tree_flatten(f(*tree_unflatten(in_tree, args_flat)))
    store.store(out_tree)
    return leaves


def flatten_fun(fun, in_tree):
    """`(flat, out_tree)`: `flat.call_wrapped(*leaves)` unflattens the leaves with `in_tree`
    into `(args, kwargs)`, calls `fun` and returns its result's leaves; `out_tree()` is then
    the result's tree structure."""
    return lu.transformation_with_aux2(_flatten_fun, fun, in_tree)()


def flatten_fun_nokwargs(fun, in_tree):
    """`flatten_fun` for an `in_tree` of the positional arguments alone."""
    return lu.transformation_with_aux2(_flatten_fun_nokwargs, fun, in_tree)()


def __dir__():
    return sorted(__all__)
