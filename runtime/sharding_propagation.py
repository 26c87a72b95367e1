"""The sharding of an eager operation's result, from its operands' types (JAX's explicit-mode
rules for the common operations), so `typeof(jnp.sin(x).T)` is `f32[4@Y,8@X]` and a result
passed to `shard_map` without `in_specs` arrives as blocks, as in JAX.

`propagate(prim, args, result)` runs after an eager operation with an operand typed with a
sharding (sharding_types.py: placed split over Explicit mesh axes): the rule of `prim` (RULES,
by primitive name) gives, per result dimension, the Explicit mesh axes it is split over, and
the result is placed so (`placed_on`; one host buffer, nothing moves), unreduced over the
axes `_unreduced` says (JAX's rules for operands unreduced over mesh axes). The rules:

- elementwise primitives: a dimension is split as the operands that split it; operands
  splitting one dimension over different axes are an error (JAX's: ask for an explicit
  `reshard`);
- `broadcast_in_dim`, `transpose`: the operand's dimensions move; new or broadcast ones are
  whole; `reshape` adding or dropping size-1 dimensions keeps the others' split (other
  reshapes: a result split nowhere);
- reductions (`reduce_*`, `argmax`, `argmin`): the kept dimensions keep their split;
- `dot_general`: batch dimensions and each operand's free dimensions keep their split;
  contracting dimensions split the same way on both sides are JAX's error asking for
  `out_sharding=` (one side split: JAX gathers it, the result is not split there).

A result naming one mesh axis twice is an error, as in JAX. Operations without a rule give
untyped results. Inside a specialisation the same rules type the results of equations
(`typed_results`, which the SSA builder calls for operands typed with a sharding), so
`typeof` of an intermediate value and `shard_map` without `in_specs` see its split there too,
and `jit` places its results by their types; there the cases that are errors eagerly give
untyped results instead. `suspended()` turns the errors off while a function given `out_sharding=` runs (its
result is placed by that).

Over a mesh whose axes are all *Auto* (`auto_mesh`) nothing is typed, but results keep a
NamedSharding as XLA's propagation gives them in JAX: `auto_split` runs the same rules over
every mesh axis without errors (`_elementwise_auto`: a dimension split differently by the
operands is not split; contracting dimensions split on both sides: the result is not split
there; an axis a result would name twice: kept where it comes first), with `reshape` keeping
the split of the major dimension of each group of merged or divided dimensions where the sizes
allow, `slice` keeping the split of the dimensions it keeps whole, `squeeze` that of the
others, the linear-algebra decompositions (`REPLICATING`) replicated, and an operation without
a rule keeping the split of an operand of the result's shape (else replicated). `propagate`
places eager results so; `auto_placements` walks a `jit`'s specialisation (`placed_by_walk`:
eager `vmap`'s and `grad`'s compiled function) from its arguments' shardings (and
`with_sharding_constraint`s, `constrain`) to place its results; results computed from no
sharded argument stay on device 0, as in JAX.

Arrays committed elsewhere (`committed`: placed on one device, or over a mesh as a whole, or
split over Explicit axes) keep their results there: a result no rule splits is placed on the
operands' device or over their mesh as a whole (`_whole`), eagerly and by `jit`, `vmap` and
`grad` (`committed_placements`), and operands committed to different devices, or a
`device_put` inside `jit` onto other devices than its arguments', are JAX's ValueError.
"""
import contextlib
import math
import threading

from .compiler.primitives.elementwise import NAMES as ELEMENTWISE
from .compiler.ir.ssa import Var
from .sharding import (AbstractMesh, AxisType, Mesh, NamedSharding, PartitionSpec,
                       SingleDeviceSharding)
from .sharding_types import type_sharding, in_context, TypedAval

_STATE = threading.local()   # .suspended: inside a call given out_sharding=; .auto: below


@contextlib.contextmanager
def suspended():
    old = getattr(_STATE, "suspended", False)
    _STATE.suspended = True
    try:
        yield
    finally:
        _STATE.suspended = old


def _elementwise(name, specs, shapes, out_shape, params):
    if getattr(_STATE, "auto", None) is not None:
        return _elementwise_auto(specs, shapes, out_shape)
    out = []
    for d in range(len(out_shape)):
        seen = {s[d] for s, shape in zip(specs, shapes)
                if s is not None and len(shape) == len(out_shape) and s[d]}
        if len(seen) > 1:
            raise _error(name, specs, shapes, f"dimension {d} is split over different mesh "
                         f"axes {sorted(seen)}; reshard the operands to one sharding "
                         f"(kiln.reshard)")
        out.append(seen.pop() if seen else ())
    return out


def _elementwise_auto(specs, shapes, out_shape):
    """Over Auto axes (XLA's choice): a dimension the operands split over different axes is
    not split; an axis that would split two dimensions splits the one the first operand
    splitting over it does (`(x,-) + (-,x)` is `(x,-)`)."""
    ranked = [s for s, shape in zip(specs, shapes) if s is not None and
              len(shape) == len(out_shape)]
    out = []
    for d in range(len(out_shape)):
        seen = {s[d] for s in ranked if s[d]}
        out.append(seen.pop() if len(seen) == 1 else ())
    owner = {}
    for s in ranked:
        for d, names in enumerate(s):
            for n in names:
                owner.setdefault(n, d)
    return [names if all(owner[n] == d for n in names) else () for d, names in enumerate(out)]


def _broadcast_in_dim(name, specs, shapes, out_shape, params):
    out = [()] * len(out_shape)
    for i, d in enumerate(params["broadcast_dimensions"]):
        if shapes[0][i] == out_shape[d]:
            out[d] = specs[0][i]
    return out


def _transpose(name, specs, shapes, out_shape, params):
    return [specs[0][p] for p in params["permutation"]]


def _reshape(name, specs, shapes, out_shape, params):
    """Reshapes that only add or drop size-1 dimensions keep the split of the others; other
    reshapes give a result split nowhere (over Auto axes: `_regrouped`)."""
    sizes = getattr(_STATE, "auto", None)
    if sizes is not None and params.get("dimensions") is None and 0 not in out_shape:
        return _regrouped(specs[0], shapes[0], out_shape, sizes)
    kept = [s for s, n in zip(specs[0], shapes[0]) if n != 1]
    if [n for n in shapes[0] if n != 1] != [n for n in out_shape if n != 1] or \
            params.get("dimensions") is not None:
        return [()] * len(out_shape)
    moved = iter(kept)
    return [next(moved) if n != 1 else () for n in out_shape]


def _regrouped(spec, shape, out_shape, sizes):
    """A reshape over Auto axes: the dimensions fall into groups of equal products (merged or
    divided); the split of a group's first operand dimension larger than 1 goes to its first
    result dimension larger than 1 where that one's size is a multiple of the axes' (XLA's
    choice: `(8@x,4@y) -> (32@x)`, `(8@x,4@y) -> (8@x,2@y,2)`)."""
    out = [()] * len(out_shape)
    i = j = 0
    while i < len(shape) and j < len(out_shape):
        ins, outs = [i], [j]
        have, want = shape[i], out_shape[j]
        while have != want:
            if have < want and i + 1 < len(shape):
                i += 1
                ins.append(i)
                have *= shape[i]
            elif want < have and j + 1 < len(out_shape):
                j += 1
                outs.append(j)
                want *= out_shape[j]
            else:
                return out
        src = next((d for d in ins if shape[d] != 1), None)
        dst = next((d for d in outs if out_shape[d] != 1), None)
        if src is not None and dst is not None and spec[src]:
            if out_shape[dst] % math.prod(sizes[n] for n in spec[src]) == 0:
                out[dst] = spec[src]
        i, j = i + 1, j + 1
    return out


def _reduction(name, specs, shapes, out_shape, params):
    axes = set(params["axes"])
    return [s for d, s in enumerate(specs[0]) if d not in axes]


def _dot_general(name, specs, shapes, out_shape, params):
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    lhs, rhs = (s if s is not None else [()] * len(shape) for s, shape in zip(specs, shapes))
    for a, b in zip(lc, rc):
        if lhs[a] and rhs[b] and not getattr(_STATE, "suspended", False) and \
                getattr(_STATE, "auto", None) is None:
            raise _error(name, specs, shapes, (
                f"contracting dimensions are split (lhs {lhs[a]}, rhs {rhs[b]}) and it is "
                f"ambiguous how the result should be; give it with out_sharding=... (as JAX "
                f"asks)"))
    out = [lhs[a] or rhs[b] for a, b in zip(lb, rb)]
    out += [s for d, s in enumerate(lhs) if d not in lc and d not in lb]
    out += [s for d, s in enumerate(rhs) if d not in rc and d not in rb]
    return out


RULES = {name: _elementwise for name in ELEMENTWISE if name != "bitcast_convert_type"}
RULES.update({"broadcast_in_dim": _broadcast_in_dim, "transpose": _transpose,
              "reshape": _reshape,
              "dot_general": _dot_general, "argmax": _reduction, "argmin": _reduction})
RULES.update({name: _reduction for name in ("reduce_sum", "reduce_max", "reduce_min",
                                            "reduce_prod", "reduce_and", "reduce_or",
                                            "reduce_xor")})


def _slice(name, specs, shapes, out_shape, params):
    """Over Auto axes (XLA's choice): a dimension sliced to a smaller size is not split."""
    return [s if n == m else () for s, n, m in zip(specs[0], shapes[0], out_shape)]


def _squeeze(name, specs, shapes, out_shape, params):
    dropped = {d % len(shapes[0]) for d in params["dimensions"]}
    return [s for d, s in enumerate(specs[0]) if d not in dropped]


AUTO_RULES = {**RULES, "slice": _slice, "squeeze": _squeeze}   # (over Auto axes only)
# decompositions XLA does not partition: over Auto axes their results are replicated
REPLICATING = {"cholesky", "triangular_solve", "eig", "eigh", "lu", "qr", "schur",
               "hessenberg", "svd"}


def _error(name, specs, shapes, why):
    shown = ", ".join(_spelled(s, shape) for s, shape in zip(specs, shapes))
    return ValueError(f"{name} of operands {shown}: {why}")


def _spelled(spec, shape):
    dims = [f"{n}" + ("" if spec is None or not spec[d] else
                      "@" + (spec[d][0] if len(spec[d]) == 1 else
                             "(" + ",".join(spec[d]) + ")"))
            for d, n in enumerate(shape)]
    return f"[{','.join(dims)}]"


def _result_split(prim, params, shapes, typed, out_shape):
    """Per result dimension the mesh axes it is split over, from the operands' type shardings
    `typed` (None: untyped), or None where no rule applies (or the operands' meshes differ)."""
    rule = RULES.get(prim.name)
    if rule is None or prim.multiple_results or len({t.mesh for t in typed if t}) != 1:
        return None
    specs = [None if t is None else [t.spec.names(d) for d in range(len(shape))]
             for t, shape in zip(typed, shapes)]
    out = rule(prim.name, specs, shapes, tuple(out_shape), params)
    used = [n for names in out for n in names]
    if len(set(used)) != len(used):
        if getattr(_STATE, "suspended", False):
            return None
        raise _error(prim.name, specs, shapes, f"the result would be split over one mesh "
                     f"axis twice ({_spelled(out, out_shape)}); reshard an operand "
                     f"(kiln.reshard) or give out_sharding=...")
    return out if used else None


def _spec(split, unreduced=frozenset()):
    return PartitionSpec(*(None if not n else n[0] if len(n) == 1 else n for n in split),
                         unreduced=unreduced)


# primitives whose result is unreduced over the axes their one unreduced operand is (JAX's
# rules: a sum of the parts' results is the result of the sum)
_KEEPS_UNREDUCED = {"convert_element_type", "reduce_sum", "transpose", "reshape", "squeeze",
                    "pad", "concatenate", "reduce_precision", "copy", "select_n"}


def _unreduced(prim, typed, shapes):
    """The mesh axes the result of `prim` is unreduced over, from its operands' type
    shardings `typed` (JAX's rules): `add` of operands unreduced over the same axes; `mul` of
    one unreduced over axes by one reduced over them; the structural operations in
    _KEEPS_UNREDUCED (`select_n`: its cases). Errors, as JAX's: other mixes; any other
    operation of an unreduced operand (NotImplementedError)."""
    unreduced = [t.spec.unreduced if t is not None else frozenset() for t in typed]
    if not any(unreduced):
        return frozenset()
    name = prim.name
    specs = [None if t is None else [t.spec.names(d) for d in range(len(shape))]
             for t, shape in zip(typed, shapes)]
    if name in ("add", "add_any") and len(typed) == 2:
        if unreduced[0] and unreduced[1] and unreduced[0] != unreduced[1]:
            raise _error(name, specs, shapes, f"the operands are unreduced over different "
                         f"mesh axes ({sorted(unreduced[0])}, {sorted(unreduced[1])}); "
                         f"reshard one of them (kiln.reshard)")
        if not (unreduced[0] and unreduced[1]):
            side = "lhs" if unreduced[0] else "rhs"
            raise _error(name, specs, shapes, f"the {side} is unreduced and the other operand "
                         f"is not, which needs communication; reduce the {side} first "
                         f"(kiln.reshard(x, P(...)))")
        return unreduced[0]
    if name == "mul" and len(typed) == 2:
        if unreduced[0] and unreduced[1]:
            raise _error(name, specs, shapes, "both operands are unreduced, and mul is "
                         "bilinear; reduce one of them (kiln.reshard)")
        k = 0 if unreduced[0] else 1
        other = typed[1 - k]
        if (other.spec.reduced if other is not None else frozenset()) != unreduced[k]:
            raise _error(name, specs, shapes, f"an operand unreduced over "
                         f"{sorted(unreduced[k])} multiplies only one reduced over the same "
                         f"axes (kiln.reshard(y, P(..., reduced=...)))")
        return unreduced[k]
    if name == "dot_general":
        raise _error(name, specs, shapes, "an operand is unreduced; reduce it first "
                     "(kiln.reshard), or make the product's result unreduced with "
                     "out_sharding=P(..., unreduced=...)")
    if name in _KEEPS_UNREDUCED:
        cases = unreduced[1:] if name == "select_n" else unreduced
        if name == "select_n" and unreduced[0]:
            raise _error(name, specs, shapes, "the predicate is unreduced")
        if len(set(cases)) == 1:
            return cases[0]
        raise _error(name, specs, shapes, f"the operands are unreduced over different mesh "
                     f"axes ({', '.join(str(sorted(u)) for u in cases)}); reshard them "
                     f"to one (kiln.reshard)")
    raise NotImplementedError(f"unreduced rule for {name} is not implemented (as in JAX "
                              f"0.10.2): reduce the operand first (kiln.reshard(x, P(...)))")


def shape_free(sharding):
    """Whether `sharding` places a value of any shape whole on its devices: a
    SingleDeviceSharding, or a NamedSharding over a Mesh (not all Auto) of this process's
    devices that names no mesh axis. The results of operations on an array committed to one
    keep it, as in JAX (over several processes' devices, global_arrays.py places them)."""
    if type(sharding) is SingleDeviceSharding:
        return True
    if isinstance(sharding, NamedSharding):
        spec = sharding.spec
        return isinstance(sharding.mesh, Mesh) and auto_mesh(sharding) is None and \
            not any(spec.names(d) for d in range(len(spec))) and \
            not spec.unreduced and not spec.reduced and sharding.is_fully_addressable
    return isinstance(sharding, SingleDeviceSharding)


def one_shape_free(shardings):
    """The sharding of the placed operands when they all have one and it is shape-free,
    else None."""
    first = None
    for s in shardings:
        if s is not None and s is not first:
            if first is not None and s != first:
                return None
            first = s
    return first if first is not None and shape_free(first) else None


def _whole(sharding):
    """The sharding a result computed from an array committed to `sharding` takes when
    nothing splits it: `sharding` itself when shape-free, the whole array over the mesh of a
    NamedSharding over Explicit axes of this process's devices, else None (over Auto axes
    `auto_split` decides)."""
    if shape_free(sharding):
        return sharding
    if isinstance(sharding, NamedSharding) and isinstance(sharding.mesh, Mesh) and \
            auto_mesh(sharding) is None and sharding.is_fully_addressable:
        return NamedSharding(sharding.mesh, PartitionSpec())
    return None


def committed(shardings, args, what, targets=()):
    """The sharding that results take from `args` committed to `shardings` (each a placed
    array's, or None: not committed) where nothing else places them (`_whole` of the first
    that has one), or None; JAX's ValueError when two committed arguments are on different
    devices, or a `device_put` inside the function puts a value onto other devices than
    theirs (`targets`: (sharding, SourceInfo or None) pairs). `what` names the operation
    in the message."""
    placed = [(i, s) for i, s in enumerate(shardings) if s is not None]
    if not placed:
        return None
    i, first = placed[0]
    devices = first.device_set

    def ids(sharding):
        return sorted(d.id for d in sharding.device_set)
    about = (f"argument {i} of {what} ({args[i].aval.str_short()}) is committed to devices "
             f"{ids(first)}")
    for j, s in placed[1:]:
        if s.device_set != devices:
            raise ValueError(
                f"incompatible devices: {about} and argument {j} ({args[j].aval.str_short()}) "
                f"to devices {ids(s)}. An operation runs where its committed arguments are "
                f"(those placed by device_put, or computed from such), so they must be on the "
                f"same devices: move one with device_put(x, sharding_of_the_other) first (an "
                f"array made without a device, e.g. by jnp.asarray, is not committed and goes "
                f"along)")
    for s, info in targets:
        if s.device_set != devices:
            from .compiler.errors import located
            raise ValueError(located(
                f"incompatible devices: {about}, and a device_put inside it puts a value onto "
                f"devices {ids(s)} ({s})", info,
                "A jitted function runs on its arguments' devices and cannot move values to "
                "others: call device_put outside the function, on its result or its "
                "arguments."))
    return next((w for w in map(_whole, (s for _, s in placed)) if w is not None), None)


def propagate(prim, args, params, result, shardings):
    """`result` of the eager `prim(*args, **params)`, placed as its rule says from the
    operands' `shardings` (each a placed array's sharding, or None); with no operand typed,
    over their all-Auto mesh (`_propagate_auto`); a result no rule splits, where the operands
    are committed (`committed`: operands on different devices are an error)."""
    from .array import placed_on
    first = one_shape_free(shardings)
    if first is not None:   # the common case, quickly: all on one device (or mesh, whole)
        if prim.multiple_results:
            return tuple(placed_on(r, first) for r in result)
        return placed_on(result, first)
    shapes = [tuple(a.shape) for a in args]
    common = committed(shardings, args, prim.name)
    typed = [type_sharding(s, len(shape)) if s is not None else None
             for s, shape in zip(shardings, shapes)]
    if not any(t is not None for t in typed):
        if any(auto_mesh(s) is not None for s in shardings):
            return _propagate_auto(prim, params, shapes, shardings, result)   # (Auto axes)
        return _on_common(prim, result, common)   # (untyped)
    unreduced = _unreduced(prim, typed, shapes)
    if prim.multiple_results:   # (no rule: untyped)
        return _on_common(prim, result, common)
    split = _result_split(prim, params, shapes, typed, result.shape)
    if split is None and not unreduced:
        return _on_common(prim, result, common)
    mesh = next(s.mesh for s, t in zip(shardings, typed) if t is not None)
    return placed_on(result, NamedSharding(mesh, _spec(split or [()] * result.ndim,
                                                       unreduced)))


def _on_common(prim, result, common):
    """`result` (a tuple for several) placed on the operands' common committed sharding
    `common`, or as it is where there is none."""
    from .array import placed_on
    if common is None:
        return result
    if prim.multiple_results:
        return tuple(placed_on(r, common) for r in result)
    return placed_on(result, common)


def typed_results(prim, in_avals, params, out_avals):
    """The result types of an equation (in a specialisation) with an operand typed with a
    sharding: the rule's, over the operands' AbstractMesh (compiler/ir/builder.py calls it).
    Where the rule raises JAX's error eagerly, the result is untyped here: `grad` and the
    other transforms emit operations of their own (a weight gradient contracting the split
    batch dimension) that JAX annotates itself."""
    typed = [in_context(a.sharding) if type(a) is TypedAval else None for a in in_avals]
    shapes = [tuple(a.shape) for a in in_avals]
    try:
        split = _result_split(prim, params, shapes, typed, out_avals[0].shape)
        unreduced = frozenset() if prim.multiple_results else _unreduced(prim, typed, shapes)
    except (ValueError, NotImplementedError):   # (transforms emit products JAX would
        split, unreduced = None, frozenset()     # give out_shardings, ...: untyped)
    if split is None and not unreduced:
        return out_avals
    mesh = next(t.mesh for t in typed if t is not None)
    out = out_avals[0]
    return [TypedAval(out.shape, out.dtype, out.weak_type, NamedSharding(
        mesh, _spec(split or [()] * len(out.shape), unreduced)))]



# ---------------------------------------------------------------------------- Auto axes

def auto_mesh(sharding):
    """The Mesh of `sharding` when it is a NamedSharding over a concrete Mesh whose axes are
    all Auto (Mesh(devices, names), make_mesh(..., axis_types=(Auto, ...))), else None."""
    if isinstance(sharding, NamedSharding) and isinstance(sharding.mesh, Mesh) and \
            all(t == AxisType.Auto for t in sharding.mesh.axis_types):
        return sharding.mesh
    return None


def _auto_spec(sharding, ndim):
    return [sharding.spec.names(d) for d in range(ndim)]


def auto_split(prim, params, specs, shapes, out_shape, sizes):
    """Per result dimension the Auto mesh axes (of sizes `sizes`) it is split over, from the
    operands' `specs` (per dimension the axes; None: not placed over the mesh); never raises
    (the module's docstring says how conflicts resolve)."""
    if prim.name in REPLICATING:
        return [()] * len(out_shape)
    rule = AUTO_RULES.get(prim.name)
    if rule is None or prim.multiple_results:
        specs = [s if s is not None and shape == tuple(out_shape) else None
                 for s, shape in zip(specs, shapes)]
        rule = _elementwise
    old = getattr(_STATE, "auto", None)
    _STATE.auto = sizes
    try:
        out = rule(prim.name, specs, shapes, tuple(out_shape), params)
    except ValueError:   # operands split differently: XLA replicates the result
        return [()] * len(out_shape)
    finally:
        _STATE.auto = old
    seen = set()
    kept = []
    for names in out:
        kept.append(tuple(n for n in names if n not in seen))
        seen.update(names)
    return kept


def _auto_sharding(mesh, split, first):
    """NamedSharding(mesh, spec) of `split`: the sharding `first` (that of the first operand
    or argument placed over `mesh`) when it splits a value of its rank so, as JAX recovers
    it; else without trailing unsplit dimensions, as JAX spells the shardings XLA chooses
    (`P('x',)`, `P()`)."""
    if len(first.spec) <= len(split) and _auto_spec(first, len(split)) == list(split):
        return first
    split = list(split)
    while split and not split[-1]:
        split.pop()
    return NamedSharding(mesh, _spec(split))


def _propagate_auto(prim, params, shapes, shardings, result):
    """`result` (a tuple for several) placed over the one all-Auto mesh of its operands
    (`auto_split`); as it is when they are over several meshes."""
    meshes = {auto_mesh(s) for s in shardings} - {None}
    if len(meshes) != 1:
        return result
    mesh = meshes.pop()
    specs = [_auto_spec(s, len(shape)) if auto_mesh(s) is not None else None
             for s, shape in zip(shardings, shapes)]
    first = next(s for s in shardings if auto_mesh(s) == mesh)
    from .array import placed_on
    placed = tuple(placed_on(r, _auto_sharding(mesh, auto_split(
        prim, params, specs, shapes, r.shape, mesh.shape), first))
        for r in (result if prim.multiple_results else (result,)))
    return placed if prim.multiple_results else placed[0]


_CONSTRAINTS = {}   # id(Var) -> (Var, NamedSharding): with_sharding_constraint over Auto axes


def constrain(var, sharding):
    """Record JAX's `with_sharding_constraint(x, sharding)` of traced `x` (its SSA `var`) over
    an all-Auto mesh, for `auto_placements`, or a `device_put(x, sharding)` inside a
    function, for `committed` to check its devices (kept until `constraints_of` takes it)."""
    _CONSTRAINTS[id(var)] = (var, sharding)


def constraints_of(fn):
    """{Var: NamedSharding} of the `constrain`ed values of SSA function `fn` (and its
    regions), taken out of the record (`jit` keeps them with its specialisation)."""
    out = {}
    todo = [fn]
    while todo and _CONSTRAINTS:
        f = todo.pop()
        for v in [*f.invars, *(o for e in f.eqns for o in e.outvars)]:
            held = _CONSTRAINTS.get(id(v))
            if held is not None and held[0] is v:
                out[v] = _CONSTRAINTS.pop(id(v))[1]
        todo.extend(r for e in f.eqns for r in e.regions())
    return out


def _fitting(sharding, shape, sizes):
    """Per dimension of `shape` the axes `sharding` (a with_sharding_constraint's) splits it
    over, where they divide its size evenly (else not split: XLA's choice)."""
    return [names if n % math.prod(sizes[a] for a in names) == 0 else ()
            for names, n in zip(_auto_spec(sharding, len(shape)), shape)]


def auto_placements(fn, constraints, leaves):
    """Per result of SSA function `fn` (a `jit`'s specialisation) called with argument
    `leaves`: the NamedSharding over their one all-Auto mesh that `auto_split` gives it from
    the arguments' shardings through the equations (`constraints`, from `constraints_of`,
    placing the values they name), or None for a result computed from no sharded argument;
    None when no argument is placed over an all-Auto mesh."""
    from .array import _SHARDINGS
    shardings = [_SHARDINGS.get(id(x)) for x in leaves]
    meshes = {auto_mesh(s) for s in shardings} - {None}
    if len(meshes) != 1:
        return None
    mesh = meshes.pop()
    sizes = mesh.shape
    known = {v: _auto_spec(s, len(v.aval.shape)) for v, s in zip(fn.invars, shardings)
             if auto_mesh(s) == mesh}
    constraints = {v: s for v, s in constraints.items() if auto_mesh(s) == mesh}
    known.update((v, _fitting(s, v.aval.shape, sizes)) for v, s in constraints.items()
                 if v in fn.invars)
    for eqn in fn.eqns:
        ins = [known.get(v) if isinstance(v, Var) else None for v in eqn.invars]
        sharded = any(s is not None for s in ins)
        shapes = [tuple(v.aval.shape) for v in eqn.invars]
        for out in eqn.outvars:
            if out in constraints:
                known[out] = _fitting(constraints[out], out.aval.shape, sizes)
            elif sharded:
                known[out] = auto_split(eqn.prim, eqn.params, ins, shapes, out.aval.shape,
                                        sizes)
    first = next(s for s in shardings if auto_mesh(s) == mesh)
    return [_auto_sharding(mesh, known[v], first) if isinstance(v, Var) and v in known else None
            for v in fn.outvars]


def _made_at(fn, var):
    """The SourceInfo of the equation of SSA function `fn` (or of a region in it) that makes
    `var`, or None (an argument)."""
    todo = [fn]
    while todo:
        f = todo.pop()
        for e in f.eqns:
            if any(o is var for o in e.outvars):
                return getattr(e, "info", None)
            todo.extend(e.regions())
    return None


def committed_placements(fn, constraints, leaves, what, typed=None):
    """Per result of SSA function `fn` called with argument `leaves` (some placed): the
    sharding `auto_placements` gives it, or `typed` (jit's, per result: the sharding its type
    gives it, or None) or its type gives it (sharding_types.placements), else the one the
    arguments are committed to (`committed`, which raises for arguments on different
    devices), else None; None when nothing is placed."""
    from .array import _SHARDINGS
    from .sharding_types import placements
    shardings = [_SHARDINGS.get(id(x)) for x in leaves]
    targets = [(s, _made_at(fn, v)) for v, s in constraints.items()
               if not (isinstance(s, NamedSharding) and isinstance(s.mesh, AbstractMesh))]
    common = committed(shardings, leaves, what, targets)
    auto = auto_placements(fn, constraints, leaves)
    if auto is not None:
        return auto
    if typed is None:
        typed = placements([getattr(v, "aval", None) for v in fn.outvars], leaves)
    if typed is None:
        return None if common is None else [common] * len(fn.outvars)
    return [common if s is None else s for s in typed]


def placed_by_walk(fn, leaves, outs, what):
    """`outs`, the results of SSA function `fn` (eager `vmap`'s and `grad`'s, `what`) called
    with `leaves`, placed as `committed_placements` says (a list)."""
    placements = committed_placements(fn, {}, leaves, what)
    if not placements:
        return list(outs)
    from .array import placed_on
    return [o if s is None else placed_on(o, s) for o, s in zip(outs, placements)]
