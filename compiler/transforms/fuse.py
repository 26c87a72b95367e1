"""The fusion pass: group chains of elementwise, view and reduction equations into `fusion`
equations, each of which a backend runs as one loop nest (intermediates never reach memory).

    t = mul(x, x); u = mul(x, 2.0); y = add(t, u)
becomes
    def fused(x_1: 'f32[...]') -> 'f32[...]':
        t_1 = mul(x_1, x_1)
        ...
        return y_1
    y = fusion(x, body=fused)

What joins a group (compiler/primitives/fusion.py describes the primitive):
- *elementwise* equations (every primitive of the elementwise family, `stop_gradient`,
  `no_derivative`, `name`, `iota`)
  and *reductions* over at least one axis, whose iteration space (the result shape; for a
  reduction, its operand's shape) is the group's;
- *views* (broadcast_in_dim, transpose, rev, slice, squeeze, reshape): these read their operand
  in place through an affine map and compute nothing, so they are not members of their own:
  every group whose equations read a view carries a copy of the chain of views that produces
  it from a value (a reshape of a strided view starts a new chain), and the view stays on its
  own only where something outside a group reads it. A view's operand is never computed in
  the group that reads the view: it must be in memory.

The pass walks the equations once, in order. An equation joins (merging them) the open groups
that produce its operands when they share its iteration space; any other group whose value it
reads is closed: that value becomes a group output, so the group must be complete before the
reader. Reduction results are never read inside their group (the reduction completes only
after the whole nest), and a view of a group's value closes the group too. A group is emitted
where its last member was, which keeps every operand defined before use. A group of one
equation without views stays as it is. Regions of control flow are fused the same way.

Names: the region's variables are fresh names derived from the originals (`x_1`), regions are
called `fused`, `fused_1`, ... (one name supply over the whole function, so names stay unique).
"""
from ..ir.ssa import Eqn, Function, Var, NameSupply
from ..ir.builder import reserved_names
from ..primitives import PRIMITIVES
from ..primitives import elementwise

ELEMENTWISE = frozenset(elementwise.NAMES) | {"stop_gradient", "no_derivative", "name",
                                              "sharding_constraint", "iota"}
VIEWS = frozenset({"broadcast_in_dim", "transpose", "rev", "slice", "squeeze", "reshape"})
REDUCTIONS = frozenset({"reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
                        "reduce_or", "reduce_xor"})


def fuse(fn):
    """`fn` with its fusible chains grouped into `fusion` equations (a new Function)."""
    names = NameSupply(reserved_names() | _names(fn, set()))
    return _Fuser(names).function(fn)


def _names(fn, out):
    out.add(fn.name)
    out.update(v.name for v in fn.invars)
    for eqn in fn.eqns:
        out.update(v.name for v in eqn.outvars)
        for region in eqn.regions():
            _names(region, out)
    return out


def kind(eqn):
    """'elementwise', 'view', 'reduce' or None (not fusible)."""
    name = eqn.prim.name
    if name in ELEMENTWISE:
        if name == "bitcast_convert_type" and \
                eqn.invars[0].aval.dtype.itemsize != eqn.outvars[0].aval.dtype.itemsize:
            return None
        return "elementwise"
    if name in VIEWS:
        if name == "reshape" and eqn.params.get("dimensions") is not None:
            return None
        return "view"
    if name in REDUCTIONS and eqn.params["axes"]:
        return "reduce"
    return None


def space(eqn, k):
    return tuple(eqn.invars[0].aval.shape if k == "reduce" else eqn.outvars[0].aval.shape)


class _Group:
    __slots__ = ("space", "members", "views", "open", "reduced")

    def __init__(self, space):
        self.space = space
        self.members = []      # indices of its elementwise and reduction equations
        self.views = set()     # indices of the view equations it reads through
        self.open = True
        self.reduced = set()   # results of the group's reductions

    def size(self):
        return len(self.members) + len(self.views)

    def absorb(self, other, owner, eqns):
        self.members = sorted(self.members + other.members)
        self.views |= other.views
        self.reduced |= other.reduced
        for j in other.members:
            for v in eqns[j].outvars:
                owner[v] = self


class _Fuser:
    def __init__(self, names):
        self.names = names
        self.regions = {}

    def function(self, fn):
        eqns = [self.recurse(e) for e in fn.eqns]
        groups = self.group(eqns)
        return Function(fn.name, fn.invars, self.rebuild(eqns, groups, fn.outvars), fn.outvars)

    def recurse(self, eqn):
        regions = eqn.regions()
        if not regions:
            return eqn
        params = {}
        for k, v in eqn.params.items():
            if isinstance(v, Function):
                v = self.region(v)
            elif isinstance(v, tuple) and any(isinstance(x, Function) for x in v):
                v = tuple(self.region(x) if isinstance(x, Function) else x for x in v)
            params[k] = v
        return Eqn(eqn.outvars, eqn.prim, eqn.invars, params, eqn.info)

    def region(self, fn):
        hit = self.regions.get(id(fn))
        if hit is None or hit[0] is not fn:
            hit = self.regions[id(fn)] = (fn, self.function(fn))
        return hit[1]

    # --------------------------------------------------------------------- grouping
    def group(self, eqns):
        """The groups of two or more equations (members and absorbed views)."""
        owner = {}     # Var -> the _Group of the equation computing it
        chains = {}    # Var -> indices of the view equations that produce it from a value
        groups = []
        for i, eqn in enumerate(eqns):
            k = kind(eqn)
            if k == "view":
                self.chain(i, eqn, owner, chains)
                continue
            sources = {id(owner[x]): owner[x] for x in eqn.invars
                       if isinstance(x, Var) and x in owner}
            joined = [] if k is None else [g for g in sources.values()
                                           if self.can_join(g, eqn, k)]
            for g in sources.values():
                if g not in joined:
                    g.open = False
            if k is None:
                continue
            target = joined[0] if joined else _Group(space(eqn, k))
            if not joined:
                groups.append(target)
            for g in joined[1:]:
                target.absorb(g, owner, eqns)
                groups.remove(g)
            target.members.append(i)
            for x in eqn.invars:
                if isinstance(x, Var):
                    target.views.update(chains.get(x, ()))
            if k == "reduce":
                target.reduced.update(eqn.outvars)
            for v in eqn.outvars:
                owner[v] = target
        return [g for g in groups if g.size() > 1]

    @staticmethod
    def chain(i, eqn, owner, chains):
        """A view reads a value in place: one computed by a group makes that group complete
        (the value must reach memory); a view of a view extends that chain (except a reshape
        of a strided view, which is not a view of it: the chain restarts there)."""
        x = eqn.invars[0]
        if not isinstance(x, Var):
            chains[eqn.outvars[0]] = [i]
            return
        if x in owner:
            owner[x].open = False
        below = chains.get(x, [])
        if eqn.prim.name == "reshape" and not _unit_reshape(eqn):
            below = []
        chains[eqn.outvars[0]] = below + [i]

    @staticmethod
    def can_join(g, eqn, k):
        return g.open and g.space == space(eqn, k) and \
            not any(isinstance(x, Var) and x in g.reduced for x in eqn.invars)

    # ------------------------------------------------------------------- rebuilding
    def rebuild(self, eqns, groups, fn_outvars):
        last = {g.members[-1]: g for g in groups}
        fused = {j for g in groups for j in g.members}
        kept_views = _needed_views(eqns, groups, fn_outvars)
        users = _users(eqns, fn_outvars)
        out = []
        for i, eqn in enumerate(eqns):
            if i in last:
                out.append(self.fusion(eqns, last[i], users))
            elif i not in fused and (kind(eqn) != "view" or i in kept_views):
                out.append(eqn)
        return out

    def fusion(self, eqns, group, users):
        members = [eqns[j] for j in sorted(group.views | set(group.members))]
        produced = {v for e in members for v in e.outvars}
        inputs = []
        for e in members:
            for x in e.invars:
                if isinstance(x, Var) and x not in produced and x not in inputs:
                    inputs.append(x)
        computing = set(group.members)
        outputs = [v for j in group.members for v in eqns[j].outvars
                   if users.get(v, set()) - computing]
        if not outputs:
            outputs = list(eqns[group.members[-1]].outvars)
        rename = {v: Var(self.names.fresh(v.name), v.aval) for v in inputs}
        rename.update((v, Var(self.names.fresh(v.name), v.aval)) for v in produced)
        body = [Eqn([rename[v] for v in e.outvars], e.prim,
                    [rename.get(x, x) if isinstance(x, Var) else x for x in e.invars],
                    e.params, e.info) for e in members]
        region = Function(self.names.fresh("fused"), [rename[v] for v in inputs], body,
                          [rename[v] for v in outputs])
        return Eqn(outputs, PRIMITIVES["fusion"], inputs, {"body": region},
                   eqns[group.members[-1]].info)


def _unit_reshape(eqn):
    """Whether a reshape only inserts or removes axes of size 1."""
    def big(shape):
        return [d for d in shape if d != 1]
    return big(eqn.invars[0].aval.shape) == big(eqn.outvars[0].aval.shape)


def _needed_views(eqns, groups, fn_outvars):
    """Indices of the view equations whose results must still be computed on their own: read
    by an equation that does not carry the view in its own group (or returned)."""
    view_of = {v: i for i, e in enumerate(eqns) if kind(e) == "view" for v in e.outvars}
    needed = {v for v in fn_outvars if isinstance(v, Var)}
    in_group = {}
    for g in groups:
        for j in g.members + sorted(g.views):
            in_group[j] = g
    for j, eqn in enumerate(eqns):
        g = in_group.get(j)
        if g is None and kind(eqn) == "view":
            continue   # decided below, once its own readers are known
        for x in eqn.invars:
            if isinstance(x, Var) and x in view_of and (g is None or view_of[x] not in g.views):
                needed.add(x)
    kept = set()
    for j in sorted(set(view_of.values()), reverse=True):
        eqn = eqns[j]
        if eqn.outvars[0] in needed:
            kept.add(j)
            x = eqn.invars[0]
            if isinstance(x, Var):
                needed.add(x)
    return kept


def _users(eqns, fn_outvars):
    """Var -> indices of the equations reading it (len(eqns) for a function output)."""
    users = {}
    for i, eqn in enumerate(eqns):
        for x in eqn.invars:
            if isinstance(x, Var):
                users.setdefault(x, set()).add(i)
    for v in fn_outvars:
        if isinstance(v, Var):
            users.setdefault(v, set()).add(len(eqns))
    return users
