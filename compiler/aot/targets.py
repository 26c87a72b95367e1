"""What an ahead-of-time library is compiled from: `Target`s, their exported names, and the
`Specialised` form (SSA with the pytree structure of its inputs and outputs) a target becomes.

A `Target` is a Python function, example arguments, which of them are static, and the
transforms to apply (`("grad", argnums)`, `("value_and_grad", argnums)`, `("vmap", in_axes)` or
`("vmap", in_axes, axis_name)`, applied in order, each to the result of the previous one;
`transforms_of` reads them as `Transform`s). Its exported name is the
function's name with one prefix per transform, the last applied first: `grad_f`,
`value_and_grad_f`, `vmap_f`, `vmap_grad_f` (`Target.name` overrides it). A library's default
name is its first target's module (`library_name`).

A `Specialised` is the SSA function (renamed to the exported name), the input and output
leaves (path, abstract value), the pytree definitions, the arrays the function closed over
(extra inputs after the arguments' leaves) and the static arguments. Staging a Python function
into it is the runtime's job (`kiln.cli.aot.specialise`, which gives `library.compile_library`
plain Python functions: a `kiln.jit` one is unwrapped first); this module imports neither the
runtime nor llvmlite.
"""
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional


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


def base_name(fn):
    name = getattr(fn, "__name__", None) or type(fn).__name__
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
    qualname = getattr(target.fn, "__qualname__", None)
    return f"{target.fn.__module__}:{qualname}" if qualname else repr(target.fn)


def _check_argnums(target, argnums):
    count = len(target.args) - len(target.static_argnums)
    for a in (argnums,) if isinstance(argnums, int) else argnums:
        if not isinstance(a, int) or not 0 <= a < count:
            raise AOTUsageError(f"grad argnums {a!r} is out of range: {describe(target)} has "
                                f"{count} dynamic argument{'s' * (count != 1)}"
                                + (f" (argnums 0 to {count - 1})" if count else ""))
