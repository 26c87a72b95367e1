"""Sharding in types (JAX's "explicit sharding" mode), as far as kiln carries it.

- `TypedAval`: what `kiln.typeof(x)` answers, a ShapedArray with a `.sharding`: a
  NamedSharding over the AbstractMesh of the array's mesh whose spec names the *Explicit*
  mesh axes the array is split over (`f32[8@X,4@Y]`); an array that is not split over an
  Explicit axis has the empty mesh and spec `P(None, ...)`.
- `typed_aval(aval, sharding)`: the abstract value staging gives an Array argument that was
  placed (device_put, shard_map's and jit's results) split over Explicit axes, so a
  specialisation (`jit`, `grad`, ...) sees the split in `typeof` of its inputs and
  `shard_map` without `in_specs` takes their blocks; specialisations are kept per sharding.
- `auto_axes` / `explicit_axes`: JAX's decorators switching the axis types of the current
  (abstract) mesh inside a function (types over Auto axes are not seen there), placing the
  result by `out_sharding` / the arguments by `in_sharding`.
- `retyped(x, where)`: a traced value typed with a sharding (`reshard` and `out_sharding=`
  inside a specialisation); `out_sharding_keyword`: JAX's `out_sharding=` for a function
  (`sharding_keyword`: the `sharding=` of `lax.full` and `lax.full_like`).

The results of operations on typed values are typed by sharding_propagation.py's rules,
eagerly and inside specialisations; `placements` gives `jit` the shardings to place its
typed results with.
"""
import inspect

from .compiler.ir.abstract import ShapedArray
from .wrappers import name_like
from .compiler.ir.builder import TYPED_RESULTS
from .vma import ManualAxisType, spelled as spelled_vma
from .compiler.ir import dtypes
from .sharding import (AbstractMesh, AxisType, Mesh, NamedSharding, PartitionSpec,
                       _abstract_stack, get_abstract_mesh, get_mesh)

_EMPTY = AbstractMesh((), ())


class TypedAval(ShapedArray):
    """A ShapedArray with the sharding of its type (`.sharding`, a NamedSharding over an
    AbstractMesh). Equal only to avals of the same sharding, so caches keyed by abstract
    values keep one specialisation per sharding. The first one made turns on the SSA
    builder's typing of results (sharding_propagation.typed_results)."""

    __slots__ = ("sharding", "vma", "partial")

    def __init__(self, shape, dtype, weak_type, sharding, vma=(), partial=((), ())):
        super().__init__(shape, dtype, weak_type)
        self.sharding = sharding
        self.vma = vma      # inside a shard_map body: the manual axes it varies over (vma.py)
        self.partial = partial   # and those it is (unreduced, reduced) over, in mesh order
        if TYPED_RESULTS[0] is None and (any(sharding.spec) or sharding.spec.unreduced):
            from .sharding_propagation import typed_results
            TYPED_RESULTS[0] = typed_results

    def __eq__(self, other):
        return ShapedArray.__eq__(self, other) and \
            getattr(other, "sharding", None) == self.sharding

    def __hash__(self):
        return ShapedArray.__hash__(self)

    def spelled(self):
        """`f32[8@X,4@(Y,Z)]`: each dimension with the Explicit axes it is split over (kiln's
        dtype spelling, as in the rest of its types; JAX prints `float32[8@X,...]`)."""
        spec = self.sharding.spec
        dims = []
        for d, n in enumerate(self.shape):
            names = spec.names(d)
            at = "" if not names else "@" + (names[0] if len(names) == 1 else
                                             "(" + ",".join(names) + ")")
            dims.append(f"{n}{at}")
        return f"{dtypes.short_name(self.dtype)}[{','.join(dims)}]"

    @property
    def manual_axis_type(self):
        """JAX's: the manual axes of the enclosing shard_maps this value varies over."""
        return ManualAxisType(self.vma, *self.partial)

    def __str__(self):
        spec = self.sharding.spec
        unreduced, reduced = (tuple(self.partial[k]) + tuple(
            n for n in self.sharding.mesh.axis_names if n in axes)
            for k, axes in enumerate((spec.unreduced, spec.reduced)))
        return (self.spelled() if _split(spec) else ShapedArray.__str__(self)) \
            + spelled_vma(self.vma) + spelled_vma(unreduced, "U") + spelled_vma(reduced, "R")

    def __repr__(self):
        spec = self.sharding.spec
        plain = not (_split(spec) or self.vma or any(self.partial) or spec.unreduced
                     or spec.reduced)
        return ShapedArray.__repr__(self) if plain else f"ShapedArray({self})"


def _split(spec):
    return any(spec.names(d) for d in range(len(spec)))


def type_sharding(sharding, ndim):
    """The sharding of the type of an array placed with `sharding`: its spec (padded to
    `ndim`) with the axes that are not Explicit left out (as the mesh says, or inside
    `auto_axes`/`explicit_axes` as they switched them), over the mesh's AbstractMesh; None
    when no dimension is split over an Explicit axis."""
    if not isinstance(sharding, NamedSharding) or not isinstance(sharding.mesh, Mesh):
        return None
    return _explicit_part(sharding.mesh.abstract_mesh, sharding.spec, ndim)


def in_context(sharding):
    """A type's `sharding` (over an AbstractMesh) as the current context sees it: without the
    axes `auto_axes` switched to Auto; None when nothing is left split."""
    return _explicit_part(sharding.mesh, sharding.spec, len(sharding.spec))


def _explicit_part(mesh, spec, ndim):
    """NamedSharding(mesh, spec) over the axes that are Explicit (as `mesh` says, or inside
    `auto_axes`/`explicit_axes` as they switched them), spec padded to `ndim`; None when no
    dimension is split over one."""
    types = mesh.axis_types
    stack = _abstract_stack()
    if stack and stack[-1].axis_names == mesh.axis_names:   # inside auto_axes / explicit_axes
        types = stack[-1].axis_types
    explicit = {n for n, t in zip(mesh.axis_names, types) if t == AxisType.Explicit}
    entries = []
    for d in range(ndim):
        kept = tuple(n for n in spec.names(d) if n in explicit)
        entries.append(None if not kept else kept[0] if len(kept) == 1 else kept)
    unreduced, reduced = spec.unreduced & explicit, spec.reduced & explicit
    if not any(entries) and not unreduced and not reduced:
        return None
    return NamedSharding(mesh, PartitionSpec(*entries, unreduced=unreduced, reduced=reduced))


def typed_aval(aval, sharding):
    """`aval` typed with `sharding` (a placed array's), or `aval` itself when that splits no
    dimension over an Explicit axis."""
    if sharding is None:
        return aval
    typed = type_sharding(sharding, len(aval.shape))
    return aval if typed is None else TypedAval(aval.shape, aval.dtype, aval.weak_type, typed)


def as_typed(aval):
    """`aval` (a ShapedArray) as a TypedAval (an untyped one: the empty mesh, no split
    dimension); other abstract values (Refs) as they are."""
    if type(aval) is TypedAval:
        seen = in_context(aval.sharding)
        if seen is not None:
            return aval if seen == aval.sharding else \
                TypedAval(aval.shape, aval.dtype, aval.weak_type, seen)
    elif type(aval) is not ShapedArray:
        return aval
    return TypedAval(aval.shape, aval.dtype, aval.weak_type,
                     NamedSharding(_EMPTY, PartitionSpec(*([None] * len(aval.shape)))))


def spec_of(aval):
    """The PartitionSpec of `aval`'s type (over Explicit axes), or None when untyped."""
    return aval.sharding.spec if type(aval) is TypedAval else None


def retyped(x, where):
    """Traced `x` as a new value (a `copy`) whose type carries `where` (a NamedSharding, or a
    PartitionSpec over the current abstract mesh): reshard / out_sharding= inside a
    specialisation."""
    from .dispatch import bind
    from .compiler.primitives import PRIMITIVES
    if isinstance(where, PartitionSpec):
        mesh = get_abstract_mesh()
        if mesh.empty:
            raise ValueError(f"resharding onto {where!r} needs a mesh: use kiln.set_mesh(mesh) "
                             f"or pass a NamedSharding")
        where = NamedSharding(mesh, where)
    if not isinstance(where, NamedSharding):
        return x
    where.check_shape(tuple(x.shape))
    out = bind(PRIMITIVES["copy"], x)
    typed = _explicit_part(where.mesh.abstract_mesh, where.spec, len(x.shape))
    aval = out.var.aval
    if typed is not None:
        out.var.aval = TypedAval(aval.shape, aval.dtype, aval.weak_type, typed)
    elif type(aval) is TypedAval:   # (the copy of a split value, now whole)
        out.var.aval = ShapedArray(aval.shape, aval.dtype, aval.weak_type)
    return out


def typed_outputs(out_avals):
    """Whether a specialisation has an output typed with a sharding (`placements` places it)."""
    return any(type(a) is TypedAval for a in out_avals)


def placements(out_avals, leaves):
    """Per output type of a specialisation called with argument `leaves`: the NamedSharding
    its type gives it over the concrete mesh of an argument typed over the same
    AbstractMesh, else None; None when no output is typed (what `jit` places its results
    with, at every call: one specialisation serves every mesh of the same shape)."""
    if not typed_outputs(out_avals):
        return None
    from .array import _SHARDINGS
    current = get_mesh()
    meshes = {} if current is None else {current.abstract_mesh: current}
    for x in leaves:
        s = _SHARDINGS.get(id(x))
        if isinstance(s, NamedSharding) and isinstance(s.mesh, Mesh):
            meshes.setdefault(s.mesh.abstract_mesh, s.mesh)
    out = []
    for a in out_avals:
        mesh = meshes.get(a.sharding.mesh) if type(a) is TypedAval else None
        out.append(None if mesh is None else NamedSharding(mesh, a.sharding.spec))
    return out


def placed_as_typed(outs, where):
    """`outs` (a list), each placed with its entry of `where` (`placements`) unless None."""
    from .array import placed_on
    return [o if s is None else placed_on(o, s) for o, s in zip(outs, where)]


# ----------------------------------------------------------------- auto_axes, explicit_axes

def _switching(f, axes, new_type, keyword, default):
    """`f` run with the current mesh's `axes` switched to `new_type`, the sharding `keyword`
    (given at definition, `default`, or at the call) placing its arguments inside
    (`in_sharding`) or its result after (`out_sharding`)."""
    what = f"{new_type.value.lower()}_axes"

    def wrapper(*args, **kwargs):
        where = kwargs.pop(keyword, default)
        if where is None:
            raise TypeError(f"{getattr(f, '__name__', 'the function')} decorated with {what} "
                            f"needs {keyword}=... (at the call or in the decorator)")
        mesh = get_abstract_mesh()
        if mesh.empty:
            raise ValueError(f"{what} needs a mesh: call it under kiln.set_mesh(mesh)")
        if AxisType.Manual in mesh.axis_types:
            raise NotImplementedError(f"{what} inside shard_map (Manual mesh axes) is not "
                                      f"supported, as in JAX")
        stack = _abstract_stack()
        stack.append(mesh.with_axis_types(new_type, axes))
        try:
            if keyword == "in_sharding":
                args = _placed(tuple(args), where)
            out = f(*args, **kwargs)
        finally:
            stack.pop()
        return _placed(out, where) if keyword == "out_sharding" else out
    name_like(wrapper, f)   # (kiln's module: the front end runs it rather than compiling it)
    return wrapper


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    """JAX's `auto_axes`: `f` with the mesh axes `axes` (default all) of type Auto inside;
    its result placed by `out_sharding` (given here or as a keyword of the call)."""
    if f is None:
        return lambda g: auto_axes(g, axes=axes, out_sharding=out_sharding)
    return _switching(f, axes, AxisType.Auto, "out_sharding", out_sharding)


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    """JAX's `explicit_axes`: `f` with the mesh axes `axes` (default all) of type Explicit
    inside, its arguments placed by `in_sharding` first (given here or at the call)."""
    if f is None:
        return lambda g: explicit_axes(g, axes=axes, in_sharding=in_sharding)
    return _switching(f, axes, AxisType.Explicit, "in_sharding", in_sharding)


def _placed(value, where):
    """`value` resharded as `where` says (None: as it is); inside a specialisation as it is
    (placement.reshard: kiln's traced values carry no sharding)."""
    from .placement import reshard
    return value if where is None else reshard(value, where)


def out_sharding_keyword(f):
    """`f` taking JAX's keyword `out_sharding=` (a Sharding, or a PartitionSpec over the
    current mesh): its result placed so (eagerly; `_placed`). A function whose signature
    already names `out_sharding` gets it too (and keeps its signature)."""
    return _placement_keyword(f, "out_sharding")


def sharding_keyword(f):
    """`f` taking `sharding=` (lax.full's and lax.full_like's name for `out_sharding=`)."""
    return _placement_keyword(f, "sharding")


def device_keyword(f):
    """`f` taking JAX's keyword `device=` of the array-creation functions (a Device or a
    Sharding): its result placed there, as `out_sharding=` places it; both at once are
    refused, as in JAX."""
    return _placement_keyword(f, "device")


def _placement_keyword(f, keyword):
    sig = inspect.signature(f)
    passes = keyword in sig.parameters
    # where `f` takes the keyword positionally too (lax.reduce, lax.full_like): its position
    at = list(sig.parameters).index(keyword) if passes and \
        sig.parameters[keyword].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD else None

    def wrapper(*args, **kwargs):
        if at is not None and len(args) > at:
            where = args[at]
        else:
            where = kwargs.get(keyword) if passes else kwargs.pop(keyword, None)
        if where is None:
            return f(*args, **kwargs)
        if keyword == "device" and kwargs.get("out_sharding") is not None:
            raise ValueError(f"Only one of `device` or `out_sharding` can be set. Got "
                             f"device={where} and out_sharding={kwargs['out_sharding']}")
        from .sharding_propagation import suspended
        with suspended():   # (the operands' shardings need not agree: placed by this)
            out = f(*args, **kwargs)
        return _placed(out, where)
    for name in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(wrapper, name, getattr(f, name))
    if not passes:
        params = list(sig.parameters.values())
        at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
        params.insert(at, inspect.Parameter(keyword, inspect.Parameter.KEYWORD_ONLY,
                                            default=None))
        sig = sig.replace(parameters=params)
    wrapper.__signature__ = sig
    return wrapper
