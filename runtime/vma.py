"""Varying manual axes (JAX's "vma") of the values inside a `shard_map` body.

Inside `shard_map(f, ...)`, JAX's types say over which manual mesh axes a value may differ
between the instances of `f` (`kiln.typeof(x)` prints `f32[2,2]{V:(i,j)}`, and
`typeof(x).manual_axis_type.varying` is `{'i', 'j'}`). kiln does not carry this in its
abstract values; it works it out when asked, from the SSA the body has staged so far:

- a body argument varies over the manual axes its `in_specs` entry names;
- `psum`, `pmax`, `pmin` (and `pmean`), and `all_gather(..., to="invarying")` or
  `to="reduced"`, over axes make their result invariant over them,
  `axis_index(a)` varies over `a`, `lax.pcast(x, a, to="varying")` adds `a` (recorded here:
  it stages a `copy`);
- `cond`, `while_loop` and `scan` look into their regions (`_REGION_RULES`: a loop's carries
  at their fixed point, a while loop's carries varying over its predicate's axes too);
  every other operation (`all_gather`, `ppermute`, ...) varies over the union of its
  operands' axes (the axes of values captured from an enclosing function included);
- constants, and values from outside the body, are invariant.

`check_vma=True` (shard_map's default) uses it to refuse an `out_specs` that leaves out an
axis its result varies over, as JAX does.
"""
import contextlib

from .compiler.ir.ssa import Var

_BODIES = []          # the shard_map bodies being staged, innermost last
_REDUCING = frozenset(("psum", "pmax", "pmin"))


class _Body:
    __slots__ = ("axes", "known", "partial")

    def __init__(self, axes):
        self.axes = tuple(axes)          # the manual axis names, in mesh order
        self.known = {}                  # id(Var) -> frozenset of axis names
        self.partial = {}                # id(Var) -> (unreduced axes, reduced axes)

    def arguments(self, tracers, varying):
        """Record the body's argument `tracers`, varying over the axes in `varying`."""
        for t, axes in zip(tracers, varying):
            self.known[id(t.var)] = frozenset(axes)


@contextlib.contextmanager
def body(axes):
    """While a shard_map body manual over `axes` is staged."""
    entry = _Body(axes)
    _BODIES.append(entry)
    try:
        yield entry
    finally:
        _BODIES.pop()


def order():
    """The manual axis names of the shard_map bodies being staged, outermost first."""
    return tuple(a for b in _BODIES for a in b.axes)


def staging_a_body():
    """Whether a shard_map body is being staged."""
    return bool(_BODIES)


def mark(tracer, axes):
    """Record that `tracer` (a fresh value in the body being staged) varies over `axes`."""
    _BODIES[-1].known[id(tracer.var)] = frozenset(axes)


def mark_partial(tracer, unreduced=frozenset(), reduced=frozenset()):
    """Record that `tracer` (a value of the body being staged) is unreduced / reduced over
    the manual axes given: what a shard_map argument with such an in_spec, or `pcast(...,
    to="unreduced")` / `to="reduced"` gives (the values that carry no such type in kiln)."""
    _BODIES[-1].partial[id(tracer.var)] = (frozenset(unreduced), frozenset(reduced))


def partial_axes(tracer):
    """(unreduced axes, reduced axes) recorded for `tracer` by `mark_partial` (empty sets
    for any other value)."""
    for b in reversed(_BODIES):
        found = b.partial.get(id(getattr(tracer, "var", None)))
        if found is not None:
            return found
    return frozenset(), frozenset()


def varying(tracer):
    """The manual axes `tracer` varies over, in the innermost body being staged (the empty
    set outside one)."""
    if not _BODIES or not hasattr(tracer, "builder"):
        return frozenset()
    known = dict(_BODIES[-1].known)
    for b in _BODIES:
        known.update(b.known)
    producers, outer = {}, {}
    b = tracer.builder
    while b is not None:
        for eqn in b.eqns:
            for v in eqn.outvars:
                producers[id(v)] = eqn
        for outer_tracer, inner in b.captured.values():
            outer[id(inner)] = outer_tracer.var
        b = b.parent
    return _of(tracer.var, known, producers, outer)


def of_outputs(fn, varying):
    """The axes each output of staged body `fn` varies over, its first arguments varying
    over the axes in `varying` (one set per argument)."""
    known = {id(v): frozenset(a) for v, a in zip(fn.invars, varying)}
    producers = {id(v): eqn for eqn in fn.eqns for v in eqn.outvars}
    return [_of(v, known, producers, {}) if isinstance(v, Var) else frozenset()
            for v in fn.outvars]


def _of(var, known, producers, outer):
    """The axes `var` varies over (iteratively, results memoised in `known`)."""
    todo = [var]
    while todo:
        v = todo[-1]
        if id(v) in known:
            todo.pop()
            continue
        if id(v) in outer:
            src = outer[id(v)]
            if id(src) not in known:
                todo.append(src)
                continue
            known[id(v)] = known[id(src)]
            todo.pop()
            continue
        eqn = producers.get(id(v))
        if eqn is None:
            known[id(v)] = frozenset()
            todo.pop()
            continue
        operands = [x for x in eqn.invars if isinstance(x, Var)]
        missing = [x for x in operands if id(x) not in known]
        if missing:
            todo.extend(missing)
            continue
        ins = [known[id(x)] if isinstance(x, Var) else frozenset() for x in eqn.invars]
        for out, axes in zip(eqn.outvars, _rule(eqn, ins)):
            known.setdefault(id(out), axes)
        todo.pop()
    return known[id(var)]


def _rule(eqn, ins):
    """The axes each result of `eqn` varies over, its operands varying over `ins`."""
    rule = _REGION_RULES.get(eqn.prim.name)
    if rule is not None:
        return rule(ins, **eqn.params)
    axes = frozenset().union(*ins)
    named = eqn.params.get("axis_name")
    named = frozenset(() if named is None else (named,) if isinstance(named, str) else named)
    if eqn.prim.name in _REDUCING or \
            eqn.prim.name == "all_gather" and eqn.params.get("to", "varying") != "varying":
        axes = axes - named
    elif eqn.prim.name == "axis_index":
        axes = axes | named
    return [axes] * len(eqn.outvars)


def _cond(ins, *, branches, **_):
    """A branch's results, whichever runs (JAX does not count the index's axes)."""
    outs = [of_outputs(b, ins[1:]) for b in branches]
    return [frozenset().union(*r) for r in zip(*outs)]


def _loop_carry(step, consts, carry):
    """The carries' axes at the fixed point of `step(consts, carry) -> carry` (they only
    grow, so it stops within one pass per axis)."""
    while True:
        new = [c | n for c, n in zip(carry, step(consts, carry))]
        if new == carry:
            return carry
        carry = new


def _while_loop(ins, *, cond_fn, body_fn, num_consts, **_):
    consts, carry = ins[:num_consts], list(ins[num_consts:])

    def step(consts, carry):
        trips = of_outputs(cond_fn, consts + carry)[0]   # a varying trip count
        return [a | trips for a in of_outputs(body_fn, consts + carry)]
    return _loop_carry(step, consts, carry)


def _scan(ins, *, body, num_consts=0, num_carry=0, **_):
    consts = ins[:num_consts]
    carry = list(ins[num_consts:num_consts + num_carry])
    xs = ins[num_consts + num_carry:]
    carry = _loop_carry(lambda c, k: of_outputs(body, c + k + xs)[:num_carry], consts, carry)
    return carry + of_outputs(body, consts + carry + xs)[num_carry:]


_REGION_RULES = {"cond": _cond, "while_loop": _while_loop, "scan": _scan}


class ManualAxisType:
    """JAX's `typeof(x).manual_axis_type`: the manual axes `x` varies over (`varying`), and
    those it is `unreduced`/`reduced` over (`mark_partial`)."""
    __slots__ = ("varying", "unreduced", "reduced")

    def __init__(self, varying=frozenset(), unreduced=frozenset(), reduced=frozenset()):
        self.varying = frozenset(varying)
        self.unreduced = frozenset(unreduced)
        self.reduced = frozenset(reduced)

    def __eq__(self, other):
        return isinstance(other, ManualAxisType) and \
            (self.varying, self.unreduced, self.reduced) == \
            (other.varying, other.unreduced, other.reduced)

    def __hash__(self):
        return hash((self.varying, self.unreduced, self.reduced))

    def __repr__(self):
        return (f"ManualAxisType(varying={self.varying!r}, unreduced={self.unreduced!r}, "
                f"reduced={self.reduced!r})")


def in_order(axes):
    """`axes` as a tuple in the order of the manual axes being staged (mesh order)."""
    return tuple(a for a in order() if a in axes)


def spelled(names, kind="V"):
    """`{V:i}` / `{V:(i,j)}` for the axis names `names` (`{U:...}` for unreduced ones), or ""
    for none."""
    if not names:
        return ""
    return "{" + kind + ":" + (names[0] if len(names) == 1 else "(" + ",".join(names) + ")") \
        + "}"
