"""Simplification passes on the SSA form: constant folding, algebraic identities, CSE, DCE.

Each pass is `Function -> Function`: it builds a new function and never mutates its input
(unchanged `Eqn`, `Var` and region objects are shared between the two, and are treated as
immutable by every pass). Passes are deterministic and linear in the number of equations
(dict-based), and recurse into the regions of structured control flow, where an equation with
regions is one unit: it is never folded or rewritten by an identity, it is CSE'd only with an
equation holding the very same region objects, and the region's signature is left alone (only
the pass that owns a control-flow primitive may drop its unused region outputs).

- `fold_constants`: an equation whose operands are all literals and whose results are rank-0
  becomes literals, computed with the primitive's NumPy implementation (so the value is
  exactly what the reference backend would compute), keeping dtype and weak type.
- `apply_identities`: x+0, 0+x, x-0, x*1, 1*x, x/1, integer_pow(x, y=1), neg(neg(x)),
  select_n with identical cases or a literal predicate, structural ops and conversions that
  change nothing, a transpose of a transpose (one transpose), a transpose that swaps the free
  dimensions of a single-use `dot_general` (the `dot_general` with swapped operands), a
  `dot_general` of a transpose (the `dot_general` of the transpose's operand, its dimension
  numbers read through the permutation, when the operand's free axes keep their order), x*0
  for integers (to zeros: a literal, or a broadcast of one), and `copy` of an intermediate
  used nowhere else. A rewrite fires only when the
  kept value has exactly the result's type (shape, dtype and weak type), so broadcasting and
  promotion are never lost. x*0 is not rewritten for floats (NaN and inf give NaN); x+0.0 is
  rewritten for floats, as XLA's simplifier does under `jax.jit` (so -0.0 + 0.0 gives -0.0).
  `copy` of a function input is kept: it is how a result is guaranteed not to alias an
  argument (donation), and it is the one statement the seed's `stupid_fn` simplifies to.
- `cse`: equations with the same primitive, operands and params share one result.
- `dce`: equations none of whose results are used are dropped.
- `simplify`: all of them, repeated to a fixed point.

Effects: a primitive marked `effect` (a host callback such as `print`),
and any equation whose regions hold one, is never folded, CSE'd or dropped. The exception is
a `check` with `debug=True` (`checkify.debug_check`): it acts only under checkify, which runs
before any pass, so here it is dead code.
"""
import numpy as np

from ..ir.ssa import Eqn, Function, Literal, literal
from ..primitives import PRIMITIVES
from ..primitives.linalg import free_axes

_CHECK = PRIMITIVES["check"]


def fold_constants(fn):
    """Replace rank-0 equations over literals by their values."""
    return _Rewriter(fold=True).top(fn)


def apply_identities(fn):
    """Rewrite algebraic identities (see the module docstring) to the value they keep."""
    return _Rewriter(identities=True).top(fn)


def cse(fn):
    """Common-subexpression elimination: identical pure equations share one result."""
    return _Rewriter(cse=True).top(fn)


def dce(fn):
    """Dead-code elimination: drop pure equations whose results are unused."""
    return _dce(fn, {}, {})[0]


def simplify(fn):
    """Fold, rewrite identities, CSE and DCE until nothing changes."""
    effects = {}
    while True:
        rw = _Rewriter(fold=True, identities=True, cse=True, effects=effects)
        fn = rw.top(fn)
        fn, dropped = _dce(fn, {}, effects)
        if not (rw.changed or dropped):
            return fn


# ------------------------------------------------------------------------------ effects

def _effectful(eqn, memo):
    """Whether `eqn` has an effect: its primitive's, or one inside its regions."""
    if eqn.prim.effect:
        return not (eqn.prim is _CHECK and eqn.params.get("debug", False))
    for region in eqn.regions():
        hit = memo.get(id(region))
        if hit is None or hit[0] is not region:  # the object is kept: ids are never reused
            hit = memo[id(region)] = (region, any(_effectful(e, memo) for e in region.eqns))
        if hit[1]:
            return True
    return False


def _map_regions(eqn, rewrite):
    """`eqn` with each region replaced by `rewrite(region)`; the same object if none changed."""
    changed = False
    params = {}
    for k, v in eqn.params.items():
        if isinstance(v, Function):
            new = rewrite(v)
        elif isinstance(v, tuple) and any(isinstance(x, Function) for x in v):
            new = tuple(rewrite(x) if isinstance(x, Function) else x for x in v)
            new = v if all(a is b for a, b in zip(new, v)) else new
        else:
            new = v
        changed |= new is not v
        params[k] = new
    return Eqn(eqn.outvars, eqn.prim, eqn.invars, params, eqn.info) if changed else eqn


# ------------------------------------------------------------- forward rewriting sweep

class _Rewriter:
    """One forward sweep over a function: operands are renamed through a substitution as they
    are read, so a rewrite enables the next ones in the same sweep."""

    def __init__(self, fold=False, identities=False, cse=False, effects=None):
        self.fold = fold
        self.identities = identities
        self.cse = cse
        self.effects = {} if effects is None else effects
        self.regions = {}     # id(region) -> rewritten region
        self.changed = False

    def top(self, fn):
        out = self.function(fn)
        return Function(out.name, out.invars, out.eqns, out.outvars)

    def region(self, fn):
        key = id(fn)
        if key not in self.regions:
            self.regions[key] = self.function(fn)
        return self.regions[key]

    def function(self, fn):
        state = _State(fn, self.identities)
        subst = state.subst
        eqns = []
        for eqn in fn.eqns:
            if any(x in subst for x in eqn.invars):
                eqn = Eqn(eqn.outvars, eqn.prim, [subst.get(x, x) for x in eqn.invars],
                          eqn.params, eqn.info)
            if eqn.params:
                eqn = _map_regions(eqn, self.region)
            result = self.rewrite(eqn, state)
            if result is None:
                eqns.append(eqn)
                state.emitted(eqn)
                continue
            self.changed = True
            if type(result) is Eqn:
                eqns.append(result)
                state.emitted(result)
            else:
                subst.update(zip(eqn.outvars, result))
        outvars = [subst.get(x, x) for x in fn.outvars]
        if len(eqns) == len(fn.eqns) and all(a is b for a, b in zip(eqns, fn.eqns)) \
                and all(a is b for a, b in zip(outvars, fn.outvars)):
            return fn
        return Function(fn.name, fn.invars, eqns, outvars)

    def rewrite(self, eqn, state):
        """None (keep `eqn`), a list of atoms for its results, or a replacement Eqn."""
        pure = not _effectful(eqn, self.effects)
        if self.fold and pure:
            result = _fold(eqn)
            if result is not None:
                return result
        if self.identities and pure:
            rule = _IDENTITIES.get(eqn.prim.name)
            result = rule(eqn, state) if rule is not None else None
            if result is not None:
                return result
        if self.cse and pure:
            return state.common(eqn)
        return None


class _State:
    """Per-function facts for rewrite rules: substitution, producers, use counts, CSE table."""

    def __init__(self, fn, count_uses):
        self.subst = {}
        self.producer = {}      # Var -> the emitted Eqn defining it
        self.table = {}         # CSE key -> emitted Eqn
        self.uses = _use_counts(fn) if count_uses else None

    def emitted(self, eqn):
        for v in eqn.outvars:
            self.producer[v] = eqn

    def common(self, eqn):
        if eqn.prim.distinct:   # each result is a new object (a fresh tape)
            return None
        key = (eqn.prim, tuple(map(_atom_key, eqn.invars)), _params_key(eqn.params))
        hit = self.table.get(key)
        if hit is None:
            self.table[key] = eqn
            return None
        return hit.outvars


def _use_counts(fn):
    counts = {}
    for eqn in fn.eqns:
        for x in eqn.invars:
            counts[x] = counts.get(x, 0) + 1
    for x in fn.outvars:
        counts[x] = counts.get(x, 0) + 1
    return counts


def _atom_key(x):
    if type(x) is Literal:  # bytes: -0.0 differs from 0.0, a NaN equals itself
        return (x.aval, np.asarray(x.value, x.aval.dtype).tobytes())
    return x


def _params_key(params):
    if not params:
        return ()
    return tuple((k, type(v), v) for k, v in sorted(params.items()))


# ------------------------------------------------------------------------ constant folding

def _fold(eqn):
    if (any(type(x) is not Literal for x in eqn.invars)
            or any(v.aval.shape or v.aval.dtype.kind == "O" for v in eqn.outvars)
            or eqn.regions() or eqn.prim.collective or eqn.prim.host):
        return None  # only rank-0 numbers fold (a tape is not a literal; a collective's value
        #              depends on the other replicas; a host function runs when the code does)
    args = [np.asarray(x.value, x.aval.dtype) for x in eqn.invars]
    with np.errstate(all="ignore"):   # 1/0 folds to inf silently, as it computes
        out = eqn.prim.impl(*args, **eqn.params)
    outs = out if eqn.prim.multiple_results else (out,)
    return [literal(np.asarray(value)[()], v.aval.dtype, v.aval.weak_type)
            for value, v in zip(outs, eqn.outvars)]


# ---------------------------------------------------------------------- algebraic identities

def _is_const(x, c):
    return type(x) is Literal and x.value == c


def _keep(eqn, x):
    """`x` stands for the result when it has exactly the result's type."""
    return [x] if x.aval == eqn.outvars[0].aval else None


def _unit_right(unit):
    """x op unit -> x (sub, div)."""
    def rule(eqn, state):
        x, y = eqn.invars
        return _keep(eqn, x) if _is_const(y, unit) else None
    return rule


def _unit_either(unit):
    """x op unit -> x and unit op x -> x (add, mul)."""
    def rule(eqn, state):
        x, y = eqn.invars
        if _is_const(y, unit):
            return _keep(eqn, x)
        if _is_const(x, unit):
            return _keep(eqn, y)
        return None
    return rule


_times_one = _unit_either(1)


def _mul(eqn, state):
    """x*1 -> x; x*0 -> 0 for integers only (for floats NaN*0 and inf*0 are NaN)."""
    result = _times_one(eqn, state)
    if result is not None or eqn.outvars[0].aval.dtype.kind not in "iu":
        return result
    if not any(_is_const(x, 0) for x in eqn.invars):
        return None
    out = eqn.outvars[0]
    zero = literal(0, out.aval.dtype, out.aval.weak_type)
    if not out.aval.shape:
        return [zero]
    return Eqn([out], PRIMITIVES["broadcast_in_dim"], [zero],
               {"shape": out.aval.shape, "broadcast_dimensions": ()}, eqn.info)


def _integer_pow(eqn, state):
    return _keep(eqn, eqn.invars[0]) if eqn.params["y"] == 1 else None


def _neg(eqn, state):
    inner = state.producer.get(eqn.invars[0])
    if inner is not None and inner.prim is eqn.prim:
        return _keep(eqn, inner.invars[0])
    return None


def _select_n(eqn, state):
    """Identical cases, or a literal `which` (clamped to the cases, as the primitive does)."""
    which, *cases = eqn.invars
    if type(which) is Literal:
        return _keep(eqn, cases[min(max(int(which.value), 0), len(cases) - 1)])
    first, *rest = map(_atom_key, cases)
    return _keep(eqn, cases[0]) if all(k == first for k in rest) else None


def _copy(eqn, state):
    """copy of an intermediate used nowhere else; a copy of an input is kept (no aliasing)."""
    x = eqn.invars[0]
    if x in state.producer and state.uses.get(x) == 1:
        return _keep(eqn, x)
    return None


def _structural(is_identity):
    """A shape op or conversion whose params say it changes nothing."""
    def rule(eqn, state):
        x = eqn.invars[0]
        return _keep(eqn, x) if is_identity(x.aval, **eqn.params) else None
    return rule


def _transpose(eqn, state):
    """transpose(transpose(x)) -> one transpose; a transpose that swaps the free dimensions of
    a `dot_general` used nowhere else -> the `dot_general` with its operands swapped (what
    batching a derivative's outer product leaves behind)."""
    x = eqn.invars[0]
    perm = tuple(eqn.params["permutation"])
    if _ident_perm(perm, len(perm)):
        return _keep(eqn, x)
    inner = state.producer.get(x)
    if inner is None or state.uses.get(x) != 1:
        return None
    if inner.prim is eqn.prim:
        first = inner.params["permutation"]
        return Eqn(eqn.outvars, eqn.prim, inner.invars,
                   {"permutation": tuple(first[p] for p in perm)}, eqn.info)
    if inner.prim.name == "dot_general":
        return _swapped_dot_general(eqn, inner, perm)
    return None


def _swapped_dot_general(eqn, dot, perm):
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    lhs, rhs = dot.invars
    nb = len(lb)
    nl = len(lhs.aval.shape) - len(lc) - nb
    nr = len(rhs.aval.shape) - len(rc) - nb
    if perm != tuple(range(nb)) + tuple(range(nb + nl, nb + nl + nr)) + tuple(range(nb, nb + nl)):
        return None
    params = dict(dot.params, dimension_numbers=((rc, lc), (rb, lb)))
    return Eqn(eqn.outvars, dot.prim, [rhs, lhs], params, eqn.info)


def _dot_general(eqn, state):
    """dot_general(transpose(x), ...) -> dot_general(x, ...) with the dimension numbers read
    through the permutation (the operand is then read in place: a transposed matrix is a
    matrix in memory to the backends), when the operand's free axes keep their order (the
    result's layout follows it)."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    operands, dims, changed = list(eqn.invars), [[lc, lb], [rc, rb]], False
    for side, x in enumerate(operands):
        inner = state.producer.get(x)
        if inner is None or inner.prim.name != "transpose":
            continue
        perm = inner.params["permutation"]
        contract, batch = dims[side]
        free = [perm[a] for a in free_axes(len(perm), contract, batch)]
        if free != sorted(free):
            continue
        operands[side] = inner.invars[0]
        dims[side] = [tuple(perm[a] for a in contract), tuple(perm[a] for a in batch)]
        changed = True
    if not changed:
        return None
    (lc, lb), (rc, rb) = dims
    params = dict(eqn.params, dimension_numbers=((lc, rc), (lb, rb)))
    return Eqn(eqn.outvars, eqn.prim, operands, params, eqn.info)


def _ident_perm(p, n):
    return tuple(p) == tuple(range(n))


def _reshape_identity(a, *, new_sizes, dimensions=None):
    return tuple(new_sizes) == a.shape and (dimensions is None or _ident_perm(dimensions, a.ndim))


def _broadcast_identity(a, *, shape, broadcast_dimensions):
    return tuple(shape) == a.shape and _ident_perm(broadcast_dimensions, a.ndim)


def _convert_identity(a, *, new_dtype, weak_type=False):
    return True  # `_keep` compares dtype and weak type


def _squeeze_rev_identity(a, *, dimensions):
    return not dimensions


def _slice_identity(a, *, start_indices, limit_indices, strides=None):
    return (not any(start_indices) and tuple(limit_indices) == a.shape
            and all(s == 1 for s in strides or ()))


_IDENTITIES = {
    "add": _unit_either(0),
    "sub": _unit_right(0),
    "mul": _mul,
    "div": _unit_right(1),
    "integer_pow": _integer_pow,
    "neg": _neg,
    "select_n": _select_n,
    "copy": _copy,
    "reshape": _structural(_reshape_identity),
    "transpose": _transpose,
    "dot_general": _dot_general,
    "broadcast_in_dim": _structural(_broadcast_identity),
    "convert_element_type": _structural(_convert_identity),
    "squeeze": _structural(_squeeze_rev_identity),
    "rev": _structural(_squeeze_rev_identity),
    "slice": _structural(_slice_identity),
}


# -------------------------------------------------------------------- dead-code elimination

def _dce(fn, regions, effects):
    """(fn without dead equations, whether anything was dropped); regions memoised by id."""
    live = set(fn.outvars)
    kept = []
    dropped = False
    for eqn in reversed(fn.eqns):
        if not (_effectful(eqn, effects) or any(v in live for v in eqn.outvars)):
            dropped = True
            continue
        if eqn.params:
            new = _map_regions(eqn, lambda r: _dce_region(r, regions, effects))
            dropped |= new is not eqn
            eqn = new
        kept.append(eqn)
        live.update(eqn.invars)
    if not dropped:
        return Function(fn.name, fn.invars, fn.eqns, fn.outvars), False
    kept.reverse()
    return Function(fn.name, fn.invars, kept, fn.outvars), True


def _dce_region(region, memo, effects):
    key = id(region)
    if key not in memo:
        new, dropped = _dce(region, memo, effects)
        memo[key] = new if dropped else region
    return memo[key]
