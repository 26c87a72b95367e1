"""What an ahead-of-time library is compiled from: `Target`s, their exported names, and their
specialisation into SSA with the pytree structure of their inputs and outputs.

A `Target` is a Python function, example arguments, which of them are static, and the
transforms to apply (`("grad", argnums)`, `("value_and_grad", argnums)`, `("vmap", in_axes)` or
`("vmap", in_axes, axis_name)`, applied in order, each to the result of the previous one;
`transforms_of` reads them as `Transform`s). Its exported name is the
function's name with one prefix per transform, the last applied first: `grad_f`,
`value_and_grad_f`, `vmap_f`, `vmap_grad_f` (`Target.name` overrides it). A library's default
name is its first target's module (`library_name`).

`specialise(target)` traces it as `kiln.jit` does and returns a `Specialised`: the SSA function
(renamed to the exported name), the input and output leaves (path, abstract value), the pytree
definitions, the arrays the function closed over (extra inputs after the arguments' leaves)
and the static arguments. A transformed target is traced over its dynamic arguments only:
`dynamic_call` binds the static ones by keyword first (`kiln show`'s grad, jvp and vmap stages
do the same).

This module drives the user-facing runtime (`kiln.jit`, `kiln.grad`, `kiln.vmap`), imported
inside the functions that need it, and never imports llvmlite.
"""
import functools
import inspect
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

from .manifest import path_text


class AOTError(Exception):
    """An ahead-of-time compilation that cannot be done: an unsupported argument or result, no C
    compiler, a failed link. The message says what to do."""


class AOTUsageError(AOTError, ValueError):
    """Bad options: two functions with one exported name, a library name that is not a C
    identifier, grad argnums out of range, an unknown cpu mode."""


TRANSFORMS = ("grad", "value_and_grad", "vmap")


class Target(NamedTuple):
    fn: Callable
    args: tuple = ()              # example arguments: arrays (their shapes and dtypes matter)
    kwargs: Optional[dict] = None  # static keyword arguments
    static_argnums: tuple = ()    # positions of static positional arguments in `args`
    transforms: tuple = ()        # (kind, option[, axis_name]): Transform's fields
    source: Optional[str] = None  # where it comes from, for the manifest ("file.py:f")
    name: Optional[str] = None    # the exported name (default: see the module docstring)


class Transform(NamedTuple):
    kind: str                        # in TRANSFORMS
    option: Any = None               # argnums (grad, value_and_grad), in_axes (vmap)
    axis_name: Optional[str] = None  # vmap: the mapped axis's name, for collectives


def transforms_of(target):
    """The target's transforms as `Transform`s (from pairs or triples)."""
    return [Transform(*t) for t in target.transforms]


class Leaf(NamedTuple):
    path: str      # `x`, `params[0]['W']`, `out[1]`
    aval: Any      # ShapedArray


class Specialised(NamedTuple):
    name: str
    function: Any        # ssa.Function, named `name`
    inputs: list         # Leafs of the dynamic arguments
    outputs: list        # Leafs of the result
    in_tree: Any         # PyTreeDef of the tuple of dynamic positional arguments
    out_tree: Any
    constants: list      # arrays (NumPy) passed after the inputs
    static: dict         # parameter name -> static value


def python_function(fn):
    """The Python function under a `kiln.jit` wrapper."""
    from kiln.jit import Jitted
    return fn._fun if isinstance(fn, Jitted) else fn


def base_name(fn):
    name = getattr(python_function(fn), "__name__", None) or type(fn).__name__
    return name.replace("<lambda>", "lambda")


def exported_name(target):
    if target.name:
        return target.name
    prefix = "".join(f"{t.kind}_" for t in reversed(transforms_of(target)))
    return prefix + base_name(target.fn)


def library_name(target):
    """The default name of a library whose first target is `target`: the stem of its module
    (`model` for `path/model.py:f` or `pkg.model:f`; `fn.__module__`'s last part without a
    `source`), with characters a C identifier cannot hold made `_`; the target's exported name
    when that does not start with a letter (`__main__`, `2d.py`)."""
    where = describe(target).rpartition(":")[0]
    stem = Path(where).stem if where.endswith(".py") or "/" in where else where.split(".")[-1]
    name = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in stem)
    return name if name[:1].isascii() and name[:1].isalpha() else exported_name(target)


def check_targets(targets):
    """AOTUsageError for bad transforms, names that are not C identifiers or are exported
    twice."""
    seen = {}
    for target in targets:
        for t in transforms_of(target):
            if t.kind not in TRANSFORMS:
                raise AOTUsageError(f"unknown transform {t.kind!r}; expected one of "
                                    f"{', '.join(TRANSFORMS)}")
            if t.kind != "vmap":
                _check_argnums(target, t.option)
            if t.axis_name is not None and (t.kind != "vmap" or not isinstance(t.axis_name, str)):
                raise AOTUsageError(f"axis name {t.axis_name!r}: only vmap names its axis, "
                                    f"with a string")
        name = exported_name(target)
        if not is_c_identifier(name):
            raise AOTUsageError(f"cannot export {name!r}: a function's exported name must be "
                                f"a C identifier (letters, digits and _)")
        if name in seen:
            raise AOTUsageError(f"two functions would be exported as {name!r} ({seen[name]} "
                                f"and {describe(target)}): compile them into separate "
                                f"libraries")
        seen[name] = describe(target)


def is_c_identifier(name):
    return name.isidentifier() and name.isascii()


def describe(target):
    """Where the target comes from: its `source`, else `module:qualname`."""
    if target.source:
        return target.source
    fn = python_function(target.fn)
    qualname = getattr(fn, "__qualname__", None)
    return f"{fn.__module__}:{qualname}" if qualname else repr(target.fn)


def _check_argnums(target, argnums):
    count = len(target.args) - len(target.static_argnums)
    for a in (argnums,) if isinstance(argnums, int) else argnums:
        if not isinstance(a, int) or not 0 <= a < count:
            raise AOTUsageError(f"grad argnums {a!r} is out of range: {describe(target)} has "
                                f"{count} dynamic argument{'s' * (count != 1)}"
                                + (f" (argnums 0 to {count - 1})" if count else ""))


def dynamic_call(fn, args, static_argnums, kwargs):
    """`(function of the dynamic arguments only, their values)`: static positional arguments
    are bound by keyword with the static keyword arguments (so static arguments must come
    after the dynamic ones)."""
    plain = python_function(fn)
    names = list(inspect.signature(plain).parameters)
    statics = dict(kwargs or {})
    dynamic = []
    for i, value in enumerate(args):
        if i in static_argnums:
            if any(j > i and j not in static_argnums for j in range(len(args))):
                raise AOTError("the derivative and vmap transforms need static arguments after "
                               "the dynamic ones (they transform every dynamic positional "
                               "argument)")
            statics[names[i]] = value
        else:
            dynamic.append(value)
    return (functools.partial(plain, **statics) if statics else plain), dynamic


def _transformed(target):
    """(traceable function, its positional arguments, static argnums, static kwargs)."""
    import kiln
    if not target.transforms:
        return python_function(target.fn), tuple(target.args), tuple(target.static_argnums), \
            dict(target.kwargs or {})
    fn, dynamic = dynamic_call(target.fn, target.args, target.static_argnums, target.kwargs)
    apply = {"grad": lambda f, t: kiln.grad(f, argnums=t.option),
             "value_and_grad": lambda f, t: kiln.value_and_grad(f, argnums=t.option),
             "vmap": lambda f, t: kiln.vmap(f, in_axes=t.option, axis_name=t.axis_name)}
    for t in transforms_of(target):
        fn = apply[t.kind](fn, t)
    return fn, tuple(dynamic), (), {}


def specialise(target):
    """The Specialised form of `target` (see the module docstring)."""
    import numpy as np
    from kiln.jit import Jitted
    from kiln.tree_util import tree_flatten, tree_flatten_with_path
    from ..ir.ssa import Function
    fn, args, static_argnums, kwargs = _transformed(target)
    traced, out_tree, constants, _ = Jitted(fn, static_argnums, tuple(kwargs))._trace(args,
                                                                                      kwargs)
    dynamic = tuple(a for i, a in enumerate(args) if i not in static_argnums)
    names = _parameter_names(python_function(target.fn), target.args, target.static_argnums)
    in_leaves, in_tree = tree_flatten_with_path(dynamic)
    inputs = [Leaf(path_text(names[keys[0].idx], keys[1:]), v.aval)
              for (keys, _), v in zip(in_leaves, traced.invars)]
    out_paths = [path_text("out", keys) for keys, _ in tree_flatten_with_path(
        out_tree.unflatten([0] * out_tree.num_leaves))[0]]
    outputs = [Leaf(path, v.aval) for path, v in zip(out_paths, traced.outvars)]
    name = exported_name(target)
    return Specialised(name, Function(name, traced.invars, traced.eqns, traced.outvars),
                       inputs, outputs, tree_flatten(dynamic)[1], out_tree,
                       [np.asarray(c) for c in constants], dict(_statics(target)))


def _parameter_names(fn, args, static_argnums):
    """The name of each dynamic positional argument (`argN` beyond the named parameters)."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}"
            for i in range(len(args)) if i not in static_argnums]


def _statics(target):
    fn = python_function(target.fn)
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    for i in target.static_argnums:
        yield (params[i] if i < len(params) else f"arg{i}"), target.args[i]
    yield from (target.kwargs or {}).items()
