"""The sharding of an eager operation's result, from its operands' types (JAX's explicit-mode
rules for the common operations), so `typeof(jnp.sin(x).T)` is `f32[4@Y,8@X]` and a result
passed to `shard_map` without `in_specs` arrives as blocks, as in JAX.

`propagate(prim, args, result)` runs after an eager operation with an operand typed with a
sharding (sharding_types.py: placed split over Explicit mesh axes): the rule of `prim` (RULES,
by primitive name) gives, per result dimension, the Explicit mesh axes it is split over, and
the result is placed so (`placed_on`; one host buffer, nothing moves). The rules:

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
"""
import contextlib
import threading

from .compiler.primitives.elementwise import NAMES as ELEMENTWISE
from .sharding import NamedSharding, PartitionSpec
from .sharding_types import type_sharding, in_context, TypedAval

_STATE = threading.local()   # .suspended: inside a call given out_sharding=


@contextlib.contextmanager
def suspended():
    old = getattr(_STATE, "suspended", False)
    _STATE.suspended = True
    try:
        yield
    finally:
        _STATE.suspended = old


def _elementwise(name, specs, shapes, out_shape, params):
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
    reshapes give a result split nowhere."""
    kept = [s for s, n in zip(specs[0], shapes[0]) if n != 1]
    if [n for n in shapes[0] if n != 1] != [n for n in out_shape if n != 1] or \
            params.get("dimensions") is not None:
        return [()] * len(out_shape)
    moved = iter(kept)
    return [next(moved) if n != 1 else () for n in out_shape]


def _reduction(name, specs, shapes, out_shape, params):
    axes = set(params["axes"])
    return [s for d, s in enumerate(specs[0]) if d not in axes]


def _dot_general(name, specs, shapes, out_shape, params):
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    lhs, rhs = (s if s is not None else [()] * len(shape) for s, shape in zip(specs, shapes))
    for a, b in zip(lc, rc):
        if lhs[a] and rhs[b] and not getattr(_STATE, "suspended", False):
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


def _spec(split):
    return PartitionSpec(*(None if not n else n[0] if len(n) == 1 else n for n in split))


def propagate(prim, args, params, result, shardings):
    """`result` of the eager `prim(*args, **params)`, placed as its rule says from the
    operands' `shardings` (each a placed array's sharding, or None)."""
    shapes = [tuple(a.shape) for a in args]
    typed = [type_sharding(s, len(shape)) if s is not None else None
             for s, shape in zip(shardings, shapes)]
    split = _result_split(prim, params, shapes, typed, result.shape)
    if split is None:
        return result
    from .array import placed_on
    mesh = next(s.mesh for s, t in zip(shardings, typed) if t is not None)
    return placed_on(result, NamedSharding(mesh, _spec(split)))


def typed_results(prim, in_avals, params, out_avals):
    """The result types of an equation (in a specialisation) with an operand typed with a
    sharding: the rule's, over the operands' AbstractMesh (compiler/ir/builder.py calls it).
    Where the rule raises JAX's error eagerly, the result is untyped here: `grad` and the
    other transforms emit operations of their own (a weight gradient contracting the split
    batch dimension) that JAX annotates itself."""
    typed = [in_context(a.sharding) if type(a) is TypedAval else None for a in in_avals]
    try:
        split = _result_split(prim, params, [tuple(a.shape) for a in in_avals], typed,
                              out_avals[0].shape)
    except ValueError:   # (transforms emit products JAX would give out_shardings: untyped)
        split = None
    if split is None:
        return out_avals
    mesh = next(t.mesh for t in typed if t is not None)
    out = out_avals[0]
    return [TypedAval(out.shape, out.dtype, out.weak_type, NamedSharding(mesh, _spec(split)))]

