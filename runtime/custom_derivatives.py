"""User-defined derivatives and rematerialisation: `kiln.custom_jvp`, `kiln.custom_vjp`,
`kiln.checkpoint` (alias `kiln.remat`), with JAX's interfaces.

Called outside any transformation, a decorated function just runs. While kiln specialises
(under `jit`, `grad`, `jvp`, ...), the function and its rules are specialised into regions of
one primitive (`custom_jvp_call`, `custom_vjp_call`, `remat`; see
`compiler/primitives/autodiff.py`), so the transforms use the user's rule instead of
differentiating the function's body. Values the functions close over have no derivative
through them (as in JAX, where such rules do not see closed-over values). Rules that reach
only plain functions, numbers, arrays and modules are deferred (`defer_region`): specialised
only when a derivative needs them, as JAX traces them. Inside its own rules, a custom function
called again always defers its rules, so derivatives of every order use the user's rules, as
in JAX, and specialisation ends.

`custom_vjp.defvjp(..., symbolic_zeros=True)` gives `fwd` its arguments as `CustomVJPPrimal`s
with JAX's `perturbed` flags, and lets `bwd` return `SymbolicZero`s; `custom_jvp_call_p` and
`custom_vjp_call_p` are the primitives of the calls in kiln's SSA, under JAX's names.
"""
import contextlib
import functools
import inspect
import types

import numpy as np

from .array import to_array
from .tree_util import tree_flatten, tree_unflatten
from .compiler.ir.builder import current, trace_region, close_regions
from .compiler.ir.abstract import ShapedArray
from .compiler.primitives import PRIMITIVES
from .compiler.primitives.autodiff import defer_region, with_policy


def is_tracing(leaves):
    return current() is not None or any(
        getattr(type(x), "_kiln_trace", None) is not None for x in leaves)


def value_aval(x):
    if hasattr(x, "aval"):
        return x.aval
    a = to_array(x)
    return ShapedArray(a.shape, a.dtype, a.weak_type)


def _walk(fun, args):
    """Call a user function during specialisation (its source is walked)."""
    from .compiler.frontend.specialise import call_function
    return call_function(fun, list(args), {})


def _resolve(fun, args, kwargs):
    """Keyword arguments folded into positions (JAX's custom rules take positional args)."""
    if not kwargs:
        return tuple(args)
    sig = inspect.signature(fun)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.args) + tuple(bound.kwargs.values())


def _split(args, nondiff_argnums):
    nondiff = {i: a for i, a in enumerate(args) if i in nondiff_argnums}
    diff = [a for i, a in enumerate(args) if i not in nondiff_argnums]
    return nondiff, diff


def _merge(nondiff, diff):
    out, it = [], iter(diff)
    for i in range(len(nondiff) + len(diff)):
        out.append(nondiff[i] if i in nondiff else next(it))
    return out


def _inexact(a):
    return a.dtype.kind in "fc"


def _name(fun):
    return getattr(fun, "__name__", "fn").replace("<lambda>", "lambda")


def _check_out(what, name, out_leaves):
    for leaf in out_leaves:
        if not (hasattr(leaf, "aval") or isinstance(leaf, (bool, int, float, complex,
                                                            np.ndarray, np.generic))
                or type(leaf).__name__ == "Array"):
            raise TypeError(f"{what} of {name} returned a value of type {type(leaf)}, which "
                            f"is not a valid kiln type")


def _as(x, aval, what):
    """`x` (a rule's output) with `aval`'s shape and dtype, or a TypeError saying so."""
    from . import lax
    a = value_aval(x)
    if a.shape != aval.shape:
        raise TypeError(f"{what} has shape {a.shape} where the primal output has shape "
                        f"{aval.shape}; a derivative must have its primal's shape")
    if a.dtype != aval.dtype:
        return lax.convert_element_type(x, aval.dtype)
    return x


class _CustomFunction:
    """What `custom_jvp` and `custom_vjp` share: the wrapped function, its non-differentiable
    arguments, and the specialisation of the call into a primal region plus rule regions."""
    _what = "custom function"
    _defer_rules = False   # True: defer the rules whatever they reach (`_stands_alone`)

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun, assigned=("__name__", "__qualname__", "__doc__"),
                                 updated=())
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self._in_rule = False

    def _arguments(self, args, kwargs):
        """(args, nondiff by position, the differentiable args, their leaves, their tree)."""
        args = _resolve(self.fun, args, kwargs)
        nondiff, diff = _split(args, self.nondiff_argnums)
        leaves, tree = tree_flatten(tuple(diff))
        return args, nondiff, diff, leaves, tree

    def _primal_region(self, nondiff, tree, record, name):
        """The region running the function itself; records its output tree and types."""
        def call(inputs):
            out = _walk(self.fun, _merge(nondiff, tree_unflatten(tree, inputs)))
            out_leaves, record["tree"] = tree_flatten(out)
            _check_out(self._what, name, out_leaves)
            record["avals"] = [value_aval(x) for x in out_leaves]
            return out_leaves
        return call

    @contextlib.contextmanager
    def _tracing_rules(self):
        """While the rules are specialised, their own calls of the function defer their
        rules (otherwise each would specialise the rules again, without end)."""
        outer, self._in_rule = self._in_rule, True
        try:
            yield
        finally:
            self._in_rule = outer

    def _rule_regions(self, b, name, primal, rules, leaves):
        """Bind `custom_*_call` of the traced `primal` region and the `rules`
        ((param, name, fn, input types) each; the types may be a callable giving them once
        the earlier rules are traced): deferred when this call is inside one of the
        function's own rules or the rules stand alone (`_stands_alone`), else traced now."""
        if not (self._in_rule or self._defer_rules or self._stands_alone()):
            children = [primal]
            with self._tracing_rules():
                for _, rule_name, fn, avals in rules:
                    children.append(trace_region(b, rule_name, fn,
                                                 avals() if callable(avals) else avals))
            (f, *regions), outer = close_regions(children)
        else:
            child = primal[0]
            for t in self._closed_over_tracers():
                try:
                    child.operand(t)   # an unused input of the primal region, for the rule
                except RuntimeError:   # of a specialisation that has ended: not reachable
                    pass
            (f,), outer = close_regions([primal])
            regions = [defer_region(rule_name, self._deferred(fn, outer),
                                    takes_active=getattr(fn, "takes_active", False))
                       for _, rule_name, fn, _ in rules]
        params = dict(zip([r[0] for r in rules], regions), call=f, num_consts=len(outer))
        return b.bind(PRIMITIVES[self._primitive], list(outer) + list(leaves), params)

    def _reachable(self):
        """The values the rules reach through closures (`reachable`)."""
        return reachable(self._rules())

    def _stands_alone(self):
        """Whether the rules reach nothing but plain functions, numbers, arrays and modules
        (a module-level rule, as most are): their regions are then deferred, specialised
        only when a derivative needs them, as JAX traces a rule only then. Rules that reach
        other objects (methods, partials, functions defined inside the traced function) might
        hold traced values, so they are specialised with the call, unless the custom function
        says `_defer_rules` (a `VJPHiPrimitive`'s, experimental/hijax.py, as JAX always
        defers its rules: the traced values they reach become the deferred rule's inputs)."""
        return all(v is None or isinstance(v, (_CustomFunction, tuple, list))
                   or inspect.isfunction(v) for v in self._reachable())

    def _closed_over_tracers(self):
        """The traced values the rules reach (`closed_over_tracers`): a deferred rule receives
        them as inputs."""
        return closed_over_tracers(self._rules())

    def _deferred(self, fn, outer):
        """`fn` as a deferred rule: its first inputs are the values the primal region
        captured (`outer`: a traced non-differentiable argument, ...), which stand for those
        values when it is specialised later; its own calls of the function defer their rules
        again."""
        def rule(inputs, active=None):
            b = current()
            for t, x in zip(outer, inputs):
                b.alias(t, x)
            with self._tracing_rules():
                if active is None:
                    return fn(inputs[len(outer):])
                return fn(inputs[len(outer):], active[len(outer):])
        return rule


def reachable(roots):
    """The values `roots` reach through closures: the roots, the values their closure cells
    (or, for a function defined inside a function being specialised, the enclosing frames)
    hold, the items of tuples and lists and the parts of partials among them, the functions
    and rules of custom functions among them, and so on."""
    todo, seen = [r for r in roots if r is not None], set()
    while todo:
        value = todo.pop()
        if id(value) in seen or isinstance(value, _PLAIN):
            continue
        seen.add(id(value))
        yield value
        if isinstance(value, _CustomFunction):
            todo += [value.fun] + value._rules()
        elif getattr(value, "_kiln_rule_owner", False):
            todo += list(value.params.values())
        elif isinstance(value, functools.partial):
            todo += [value.func, *value.args, *value.keywords.values()]
        elif isinstance(value, (tuple, list)):
            todo += list(value)
        elif inspect.isfunction(value) or hasattr(value, "closure_values"):
            todo += _closure_values(value)


def closed_over_tracers(roots):
    """The traced values `roots` reach (`reachable`, and the leaves of the pytrees among
    those), once each: what a function closes over that a region must take as inputs."""
    from .tracer import Tracer
    found = {}
    for value in reachable(roots):
        for leaf in tree_flatten(value)[0]:
            if isinstance(leaf, Tracer):
                found.setdefault(id(leaf.var), leaf)
    return list(found.values())


def alias_closed_over(tracers, values):
    """In the region being specialised (and the regions inside it), each traced value of
    `tracers`, which a function closes over, stands for the matching value of `values`, the
    region's input given for it: closure conversion (`closure_convert`, odeint's dynamics). A
    value that is its tracer itself needs nothing; another value for a tracer of the region
    being specialised cannot stand for it (the region computes with its own values), a
    TypeError."""
    b = current()
    if b is None:
        return
    for tracer, value in zip(tracers, values):
        if value is tracer:
            continue
        if tracer.builder is b:
            raise TypeError(
                "a closure-converted function was called, in the function whose traced values "
                "it closes over, with other values for them: pass the hoisted constants "
                "across a custom_vjp or custom_jvp boundary (JAX's pattern for "
                "closure_convert), or call the original function")
        b.alias(tracer, value)


_PLAIN = (bool, int, float, complex, str, bytes, np.ndarray, np.generic, np.dtype, type,
          types.ModuleType)


def _closure_values(fn):
    """The values `fn` closes over: its cells', or, for a function defined inside a function
    being specialised, the enclosing frames' variables."""
    local = getattr(fn, "closure_values", None)
    if local is not None:
        return list(local())
    values = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:   # an empty cell
            pass
    return values


class custom_jvp(_CustomFunction):
    """`@kiln.custom_jvp`: a function whose JVP is given by `defjvp` / `defjvps` (JAX's
    interface; `nondiff_argnums` are passed to the rule first and must be static values)."""

    _what = "custom_jvp function"
    _primitive = "custom_jvp_call"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None

    def _rules(self):
        return [self.jvp]

    def defjvp(self, jvp, symbolic_zeros=False):
        """`jvp(primals, tangents) -> (primal_out, tangent_out)`."""
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, `jvp_i(g_i, ans, *primals)`; `None` for no dependence."""
        fun = self.fun

        def jvp(primals, tangents):
            ans = _walk(fun, primals)
            total = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                term = _walk(rule, [t, ans] + list(primals))
                total = term if total is None else _tree_add(total, term)
            if total is None:
                total = _tree_zeros(ans)
            return ans, total
        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {_name(self.fun)} "
                                 f"using defjvp.")
        args, nondiff, diff, leaves, tree = self._arguments(args, kwargs)
        if not is_tracing(leaves):
            return self.fun(*args)
        avals = [value_aval(x) for x in leaves]
        t_avals = [a for a in avals if _inexact(a)]
        record = {}
        name = _name(self.fun)

        call = self._primal_region(nondiff, tree, record, name)

        def jvp(inputs):
            primals = tree_unflatten(tree, inputs[:len(leaves)])
            it = iter(inputs[len(leaves):])
            t_leaves = [next(it) if _inexact(a) else np.zeros(a.shape, a.dtype) for a in avals]
            tangents = tree_unflatten(tree, t_leaves)
            pair = _walk(self.jvp, [*[nondiff[i] for i in sorted(nondiff)], tuple(primals),
                                    tuple(tangents)])
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise TypeError(f"Custom JVP rule of {name} must return a pair (primal_out, "
                                f"tangent_out), got {type(pair).__name__}")
            out_leaves, out_tree = tree_flatten(pair[0])
            t_out, t_tree = tree_flatten(pair[1])
            if out_tree != record["tree"] or t_tree != out_tree:
                raise TypeError(f"Custom JVP rule of {name} must produce primal and tangent "
                                f"outputs with the primal function's container (pytree) "
                                f"structure {record['tree']}, but got {out_tree} and {t_tree}")
            outs = [_as(o, a, f"custom JVP rule of {name}: primal output")
                    for o, a in zip(out_leaves, record["avals"])]
            touts = [_as(t, a, f"custom JVP rule of {name}: tangent output")
                     for t, a in zip(t_out, record["avals"]) if _inexact(a)]
            return outs + touts
        b = current()
        outs = self._rule_regions(b, name, trace_region(b, name, call, avals),
                                  [("jvp", name + "_jvp", jvp, avals + t_avals)], leaves)
        return tree_unflatten(record["tree"], list(outs))


class custom_vjp(_CustomFunction):
    """`@kiln.custom_vjp`: a function whose VJP is given by `defvjp(fwd, bwd)` (JAX's
    interface: `fwd(*args) -> (out, residuals)`, `bwd(residuals, ct) -> tuple of cotangents`
    per argument, `None` for a zero one; `nondiff_argnums` go to `bwd` first)."""

    _what = "custom_vjp function"
    _primitive = "custom_vjp_call"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None
        self.symbolic_zeros = False

    def _rules(self):
        return [self.fwd, self.bwd]

    def defvjp(self, fwd, bwd, symbolic_zeros=False, optimize_remat=False):
        """`symbolic_zeros=True`: `fwd` receives each leaf of the differentiable arguments as
        a `CustomVJPPrimal(value, perturbed)`, `perturbed` true where reverse mode
        differentiates it (the rule is then deferred until reverse mode needs it, which
        knows, also for a call `vmap` batched first; where a rule is specialised without
        that knowledge, every inexact leaf counts as perturbed). `bwd` may return a `SymbolicZero` (or None) for a
        zero cotangent; the cotangents it receives are arrays, zeros included."""
        self.fwd, self.bwd = fwd, bwd
        self.symbolic_zeros = bool(symbolic_zeros)
        if self.symbolic_zeros:
            self._defer_rules = True

    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {_name(self.fun)} "
                                 f"using defvjp.")
        args, nondiff, diff, leaves, tree = self._arguments(args, kwargs)
        if not is_tracing(leaves):
            return self.fun(*args)
        avals = [value_aval(x) for x in leaves]
        record = {}
        name = _name(self.fun)

        call = self._primal_region(nondiff, tree, record, name)

        def fwd(inputs, active=None):
            if self.symbolic_zeros:
                perturbed = [_inexact(a) and (active is None or bool(f))
                             for a, f in zip(avals, active or avals)]
                inputs = [CustomVJPPrimal(x, p) for x, p in zip(inputs, perturbed)]
            pair = _walk(self.fwd, _merge(nondiff, tree_unflatten(tree, inputs)))
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise TypeError(f"Custom VJP fwd rule of {name} must return a pair (primal "
                                f"output, residuals), got {type(pair).__name__}")
            out_leaves, out_tree = tree_flatten(pair[0])
            if out_tree != record["tree"]:
                raise TypeError(f"Custom VJP fwd rule of {name} must produce primal outputs "
                                f"with the primal function's structure {record['tree']}, but "
                                f"got {out_tree}")
            res_leaves, record["res_tree"] = tree_flatten(pair[1])
            # Python scalars (a `perturbed` flag) reach bwd as they are, as in JAX, where
            # they are not traced; arrays go through the residual outputs.
            record["res_static"] = {i: r for i, r in enumerate(res_leaves)
                                    if isinstance(r, (bool, int, float, complex))}
            res_leaves = [r if hasattr(r, "aval") else to_array(r)
                          for i, r in enumerate(res_leaves) if i not in record["res_static"]]
            record["res_avals"] = [value_aval(r) for r in res_leaves]
            return [_as(o, a, f"custom VJP fwd rule of {name}: primal output")
                    for o, a in zip(out_leaves, record["avals"])] + res_leaves

        fwd.takes_active = True

        def bwd(inputs):
            n_res = len(record["res_avals"])
            traced, static = iter(inputs[:n_res]), record["res_static"]
            res = tree_unflatten(record["res_tree"], [
                static[i] if i in static else next(traced)
                for i in range(record["res_tree"].num_leaves)])
            it = iter(inputs[n_res:])
            cts = [next(it) if _inexact(a) else np.zeros(a.shape, a.dtype)
                   for a in record["avals"]]
            ct = tree_unflatten(record["tree"], cts)
            out = _walk(self.bwd, [*[nondiff[i] for i in sorted(nondiff)], res, ct])
            if not isinstance(out, (tuple, list)) or len(out) != len(diff):
                raise TypeError(f"Custom VJP bwd rule of {name} must produce a tuple with one "
                                f"cotangent per differentiable argument ({len(diff)}), got "
                                f"{type(out).__name__}"
                                + (f" of length {len(out)}" if isinstance(out, (tuple, list))
                                   else ""))
            grads = []
            for i, (ct_i, arg) in enumerate(zip(out, diff)):
                arg_leaves, arg_tree = tree_flatten(arg)
                if ct_i is None:
                    grads += [None] * len(arg_leaves)
                    continue
                ct_leaves, ct_tree = tree_flatten(ct_i, is_leaf=lambda v: v is None)
                if ct_tree != arg_tree:   # a None for a None in the argument: no cotangent
                    with_none, none_tree = tree_flatten(arg, is_leaf=lambda v: v is None)
                    if none_tree == ct_tree:
                        ct_leaves = [c for c, a in zip(ct_leaves, with_none) if a is not None]
                if ct_tree != arg_tree and len(ct_leaves) != len(arg_leaves):
                    raise TypeError(f"Custom VJP bwd rule of {name} must produce an output "
                                    f"with the same container (pytree) structure as the "
                                    f"args tuple of the primal function; argument {i} has "
                                    f"structure {arg_tree} but its cotangent has {ct_tree}")
                grads += ct_leaves
            out_cts = []
            for g, a in zip(grads, avals):
                if not _inexact(a):
                    continue
                out_cts.append(np.zeros(a.shape, a.dtype) if g is None
                               or isinstance(g, SymbolicZero) else
                               _as(g, a, f"custom VJP bwd rule of {name}: cotangent"))
            return out_cts
        def bwd_avals():
            return record["res_avals"] + [a for a in record["avals"] if _inexact(a)]
        b = current()
        outs = self._rule_regions(b, name, trace_region(b, name, call, avals),
                                  [("fwd", name + "_fwd", fwd, avals),
                                   ("bwd", name + "_bwd", bwd, bwd_avals)], leaves)
        return tree_unflatten(record["tree"], list(outs))


def checkpoint(fun=None, *, prevent_cse=True, policy=None, static_argnums=()):
    """`kiln.checkpoint` (`kiln.remat`): reverse mode recomputes `fun`'s intermediate values
    in the backward section instead of storing them, except the results of the equations of
    `fun`'s body that `policy` (`kiln.checkpoint_policies`) accepts, which it saves
    (`with_policy`). `static_argnums` are passed through as Python values."""
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums)
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun, assigned=("__name__", "__qualname__", "__doc__"), updated=())
    def remat_fun(*args, **kwargs):
        args = _resolve(fun, args, kwargs)
        static, dyn = _split(args, nums)
        leaves, tree = tree_flatten(tuple(dyn))
        if not is_tracing(leaves):
            return fun(*args)
        record = {}

        def body(inputs):
            out = _walk(fun, _merge(static, tree_unflatten(tree, inputs)))
            out_leaves, record["tree"] = tree_flatten(out)
            return out_leaves
        b = current()
        child = trace_region(b, _name(fun), body, [value_aval(x) for x in leaves])
        (fn,), outer = close_regions([child])
        params = dict(body=fn, prevent_cse=bool(prevent_cse))
        n_saved = 0
        if policy is not None:
            params["body"], n_saved = with_policy(fn, policy)
            if n_saved:
                params["num_saved"] = n_saved
        outs = b.bind(PRIMITIVES["remat"], list(outer) + list(leaves), params)
        return tree_unflatten(record["tree"], list(outs)[:len(outs) - n_saved])
    return remat_fun


remat = checkpoint


def _tree_add(a, b):
    from . import lax
    la, ta = tree_flatten(a)
    lb, _ = tree_flatten(b)
    return tree_unflatten(ta, [lax.add(x, y) for x, y in zip(la, lb)])


def _tree_zeros(tree):
    from .numpy import zeros_like
    leaves, t = tree_flatten(tree)
    return tree_unflatten(t, [zeros_like(x) for x in leaves])


class SymbolicZero:
    """A zero tangent or cotangent of abstract value `aval` (JAX's `SymbolicZero`): `shape`,
    `dtype` and the other attributes are `aval`'s. kiln's rules receive zeros as arrays
    (see `custom_vjp.defvjp`); a `bwd` rule may return a SymbolicZero for a zero cotangent."""

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return "SymbolicZero"

    def __getattr__(self, name):
        if name == "aval":   # not set yet (while unpickling or copying)
            raise AttributeError(name)
        return getattr(self.aval, name)

    @staticmethod
    def from_primal_value(val):
        return SymbolicZero(value_aval(val).to_tangent_aval())


class CustomVJPPrimal:
    """An argument of a `custom_vjp` forward rule defined with `symbolic_zeros=True` (JAX's
    `CustomVJPPrimal`): its `value`, and `perturbed`, whether it is being differentiated."""
    __slots__ = ("value", "perturbed")

    def __init__(self, value, perturbed):
        self.value, self.perturbed = value, perturbed

    def __repr__(self):
        return f"CustomVJPPrimal(value={self.value!r}, perturbed={self.perturbed!r})"


# The primitives of custom-rule calls in kiln's SSA (their equations' `prim`), under JAX's names.
custom_jvp_call_p = PRIMITIVES["custom_jvp_call"]
custom_vjp_call_p = PRIMITIVES["custom_vjp_call"]
