"""`kiln.api_util`, as far as kiln has JAX's `jax.api_util`: `shaped_abstractify` (the
abstract value of a value), `safe_map` (a `map` over sequences of one length), `debug_info`
(a function's name, source location and flattened argument names, JAX's `DebugInfo`), and
`flatten_fun` / `flatten_fun_nokwargs`, which turn a `kiln.extend.linear_util.WrappedFun` of
pytrees into one of flat argument lists, with a thunk for the output's tree structure."""
import inspect
from typing import NamedTuple

from .compiler.ir.abstract import ShapedArray
from .extend import linear_util as lu
from .tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten

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


class DebugInfo(NamedTuple):
    """What a transformation was applied for (`traced_for`), the function as "name at
    file:line" (`func_src_info`), the names of its flattened non-static arguments
    (`arg_names`, None where unknown) and of its results (`result_paths`, None: unknown)."""
    traced_for: str
    func_src_info: str
    arg_names: tuple | None
    result_paths: tuple | None


def _source_info(fun):
    while hasattr(fun, "func"):   # functools.partial
        fun = fun.func
    fun = inspect.unwrap(fun)
    name = getattr(fun, "__qualname__", getattr(fun, "__name__", "<unknown>"))
    code = getattr(fun, "__code__", None)
    if code is None:
        return name
    return f"{name} at {code.co_filename}:{code.co_firstlineno}"


def _arg_names(fun, args, kwargs, static_argnums, static_argnames):
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError):   # no signature, or these arguments do not fit it
        return None
    static = {n for i, n in enumerate(bound.arguments) if i in static_argnums}
    static |= set(static_argnames)
    names = []
    for name, value in bound.arguments.items():
        if name in static:
            continue
        for path, _ in tree_flatten_with_path(value)[0]:
            names.append(name + keystr(path))
    return tuple(names)


def debug_info(traced_for, fun, args, kwargs, *, static_argnums=(), static_argnames=(),
               result_paths_thunk=None, sourceinfo=None, signature=None):
    """The DebugInfo of `fun` for example arguments `args` and `kwargs` (static ones
    included, named by `static_argnums` and `static_argnames`)."""
    del result_paths_thunk, signature
    return DebugInfo(traced_for, sourceinfo or _source_info(fun),
                     _arg_names(fun, args, kwargs, tuple(static_argnums),
                                tuple(static_argnames)), None)


def _flatten(in_tree, *args_flat):
    py_args, py_kwargs = tree_unflatten(in_tree, args_flat)
    ans = yield py_args, py_kwargs
    yield tree_flatten(ans)


def _flatten_nokwargs(in_tree, *args_flat):
    py_args = tree_unflatten(in_tree, args_flat)
    ans = yield py_args, {}
    yield tree_flatten(ans)


def flatten_fun(f, in_tree):
    """(`f` taking the leaves of `(args, kwargs)`, whose structure is `in_tree`, and returning
    its result's leaves; a thunk giving the result's tree structure after a call)."""
    return lu.transformation_with_aux(_flatten, f, in_tree)


def flatten_fun_nokwargs(f, in_tree):
    """`flatten_fun` for a function of positional arguments only (`in_tree` is their
    tuple's structure)."""
    return lu.transformation_with_aux(_flatten_nokwargs, f, in_tree)


def __dir__():
    return sorted(__all__)
