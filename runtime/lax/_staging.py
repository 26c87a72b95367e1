"""`kiln.lax` names about staging, effects, platforms and sharding, whose value semantics are
simple in kiln:

- tokens: `create_token` and `after_all` make `Token`s, the ordering values of JAX's effectful
  ops (kiln orders effects by program order, so a token carries nothing; the tokens of `psend`,
  in `_parallel_more`, carry what the matching `precv` delivers).
- `dce_sink(val)`: returns None; kiln keeps what the program computes (`val` is an operand).
- `stage(x)`: the identity that makes `x` an array (of the trace, under `jit`).
- `shape_as_value(shape)`: the static shape as an int32 NumPy array (shapes are static).
- `composite(decomposition, name, version)`: the function that computes `decomposition` (JAX
  names it in StableHLO for backends that know the composite; kiln always decomposes).
- `platform_dependent(*args, default=None, **per_platform)`: calls the branch of the platform
  kiln runs on, "cpu" or "cuda" (the default device's), else `default`.
- `with_sharding_constraint(x, shardings)`: checks the shardings as JAX does and returns `x`;
  a traced `x` constrained over a mesh of PJRT devices goes through the `sharding_constraint`
  primitive, which a module partitioned over that mesh writes as `sdy.sharding_constraint`
  (GSPMD: the `@Sharding` custom call), as JAX does; one over an all-Auto mesh is recorded
  for `jit` to place its results by (sharding_propagation.constrain).
- `pbroadcast(x, axis_name, source)`: every member of the axis gets the value of the member
  at index `source` (a psum of `x` masked to that member, the equivalence JAX documents).
- `scatter_apply`: applies an elementwise `func` to the operand's elements the indices
  select (as many times as they are selected, as XLA's scatter does).
"""
import functools

import numpy as np

from ..compiler.primitives import PRIMITIVES
from ..dispatch import bind
from ..array import to_array
from ..tree_util import tree_flatten, tree_map, tree_unflatten
from ._ops import (_operands, convert_element_type, eq, full, full_like, gt, reduce_max,
                   select)
from ._gather_scatter import scatter_add

__all__ = ["after_all", "composite", "create_token", "dce_sink", "pbroadcast",
           "platform_dependent", "scatter_apply", "shape_as_value", "stage",
           "with_sharding_constraint"]


class Token:
    """An ordering value for effectful operations (it carries no data in kiln)."""

    def __repr__(self):
        return "Token()"


def create_token(_=None):
    """A fresh token."""
    return Token()


def after_all(*operands):
    """A token ordered after the tokens `operands`."""
    for t in operands:
        if not isinstance(t, Token):
            raise TypeError(f"after_all: every operand must be a token, got {type(t).__name__}")
    return Token()


def dce_sink(val, *, prevent_mlir_dce=False):
    """Marks `val` as used; returns None."""
    tree_map(lambda v: to_array(v, "lax.dce_sink"), val)


def stage(x, /):
    """`x` as an array (the identity on values)."""
    return to_array(x, "lax.stage")


def shape_as_value(shape):
    """A static shape as an int32 array."""
    return np.asarray(tuple(shape), np.int32)


def composite(decomposition, name, version=0):
    """The function `decomposition`, tagged with `name` and `version` as JAX's composites."""
    if not isinstance(name, str):
        raise TypeError(f"composite: name must be a str, got {type(name).__name__}")

    @functools.wraps(decomposition)
    def call(*args, **kwargs):
        return decomposition(*args, **kwargs)
    call.composite_name, call.composite_version = name, int(version)
    return call


def _platform():
    from ..devices import default_backend
    return "cuda" if default_backend() == "gpu" else default_backend()


def platform_dependent(*args, default=None, **per_platform):
    """`per_platform[p](*args)` for kiln's platform p ("cpu" or "cuda"), else `default(*args)`."""
    branch = per_platform.get(_platform(), default)
    if branch is None:
        raise NotImplementedError(f"platform_dependent: no branch for the platform "
                                  f"{_platform()!r} and no default")
    return branch(*args)


def with_sharding_constraint(x, shardings):
    """`x`, after JAX's checks of `shardings` (one per leaf of x, or one for all); over an
    all-Auto mesh a traced leaf's constraint is recorded for `jit` to place its results by
    (sharding_propagation.constrain), and an array is placed so."""
    from ..sharding import NamedSharding, PartitionSpec, Sharding, get_mesh
    from ..sharding_propagation import auto_mesh, constrain
    from ..placement import device_put
    leaves, treedef = tree_flatten(x)
    specs = [shardings] * len(leaves) if isinstance(shardings, (Sharding, PartitionSpec)) \
        or shardings is None else tree_flatten(shardings)[0]
    if len(specs) != len(leaves):
        raise ValueError(f"with_sharding_constraint: {len(specs)} shardings for {len(leaves)} "
                         f"arrays")
    out = []
    for leaf, spec in zip(leaves, specs):
        leaf = to_array(leaf, "lax.with_sharding_constraint")
        if isinstance(spec, PartitionSpec):
            if get_mesh() is None:
                raise RuntimeError(
                    "with_sharding_constraint requires a non-empty mesh in context if you are "
                    "passing `PartitionSpec`s to shardings. You can define a context mesh via "
                    "`kiln.set_mesh(mesh)`. Alternatively, provide `Sharding`s to shardings "
                    "and then the mesh context manager is not required.")
            if len(spec) > leaf.ndim:
                raise ValueError(f"with_sharding_constraint: the spec {spec} has {len(spec)} "
                                 f"entries for an array of rank {leaf.ndim}")
        elif spec is not None and not isinstance(spec, Sharding):
            raise TypeError(f"shardings leaf specifications are expected to be PartitionSpec "
                            f"instances or None, but got {spec}")
        where = NamedSharding(get_mesh(), spec) if isinstance(spec, PartitionSpec) else spec
        if isinstance(where, NamedSharding) and _on_pjrt(where) and \
                getattr(type(leaf), "_kiln_trace", None) is not None:
            mesh = where.mesh
            leaf = bind(PRIMITIVES["sharding_constraint"], leaf,
                        mesh=tuple(zip(mesh.axis_names, mesh.devices.shape)),
                        devices=tuple(int(d.id) for d in mesh.devices.flat),
                        spec=tuple(where.spec.names(d) for d in range(leaf.ndim)))
        if auto_mesh(where) is not None:
            if getattr(type(leaf), "_kiln_trace", None) is not None:
                constrain(leaf.var, where)
            else:   # as JAX places it (an uneven split is device_put's error, as in JAX)
                leaf = device_put(leaf, where)
        out.append(leaf)
    return tree_unflatten(treedef, out)


def _on_pjrt(sharding):
    return all(getattr(d, "layer", None) is not None and d.layer.backend == "pjrt"
               for d in sharding.device_set)


def pbroadcast(x, axis_name, source):
    """The value of `x` at index `source` of the named axis, on every member of the axis."""
    from ._parallel import axis_index, psum

    def leaf(v):
        v = to_array(v, "lax.pbroadcast")
        here = eq(axis_index(axis_name), np.int32(source))
        return psum(select(here, v, full_like(v, 0)), axis_name)
    return tree_map(leaf, x)


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """`func` (elementwise) applied to the elements of `operand` that the scatter indices
    select, once per time each is selected."""
    from ._control_flow import fori_loop
    x, = _operands("scatter_apply", operand)
    ones = full(update_shape, 1, np.int32)
    hits = scatter_add(full(x.shape, 0, np.int32), scatter_indices, ones, dimension_numbers,
                       mode=mode)
    most = reduce_max(hits, tuple(range(hits.ndim)))

    def once(i, v):
        return select(gt(hits, full_like(hits, i)), convert_element_type(func(v), v.dtype), v)
    return fori_loop(0, most, once, x)
