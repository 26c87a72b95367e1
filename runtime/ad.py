"""Automatic differentiation: `grad`, `value_and_grad`, `vjp`, `jvp`, `linearize`, `jacfwd`,
`jacrev`, `hessian` — JAX's signatures and semantics, built on the SSA transforms and the
staging service (`kiln.staging`).

Every API function works the same way:
1. the user's function is staged into SSA (`staging.stage`) for the abstract values of its
   traced arguments, the others static by value as JAX users expect (`staging.static_mask`:
   outside `jit`, what is not differentiated and is no array; docs/autodiff.md); a function
   called inside a specialisation captures the enclosing values it reads;
2. a transform from `kiln.compiler.transforms` (`jvp`, `vjp`, `jacobian`) emits the derivative
   as new SSA;
3. outside `jit` the derivative is simplified, compiled by the reference backend
   (`staging.compile_ssa`) and cached per argument signature in a `staging.GuardedCache`
   (so `grad(f)(x)` costs a dictionary lookup and a run after the first call); inside a
   function being specialised (`jit(grad(f))`, `grad(grad(f))`) the derivative is emitted
   inline into the enclosing SSA, which is how higher orders come from transforming generated
   code again.

`kiln.make_ir(kiln.grad(f))(x)` shows the derivative as Python.
"""
import functools

import numpy as np

from .array import Array, TYPED
from .sharding_propagation import placed_by_walk
from .sharding_types import placements, placed_as_typed
from .tree_util import tree_flatten, tree_unflatten, tree_structure, register_pytree_node
from . import staging
from .staging import leaf_value as _value, wrap_outputs
from .dispatch import is_traced as _is_tracer
from .execution_guards import check_execution
from .wrappers import user_facing as _call, name_like as _name_like, describe as _describe
from .compiler.errors import ConcretizationError
from .compiler.ir.builder import Builder, current
from .compiler.ir.ssa import Literal
from .compiler.ir import dtypes as _dtypes
from .compiler.primitives import emit
from .compiler.transforms.jvp import jvp_emit
from .compiler.transforms.vjp import vjp_forward, vjp_backward

float0 = _dtypes.FLOAT0


class ArgnumsError(ValueError, TypeError):
    """`argnums` that the call cannot satisfy (a ValueError, and a TypeError as in JAX)."""


# ------------------------------------------------------------------------------ staging

def stage(fun, leaves, treedef, name, hints=None, statics=()):
    """`staging.stage` of `fun` called with `leaves` unflattened through `treedef` as
    `(args, kwargs)`; `leaves` are the dynamic ones, `statics` (staging.split_leaves) the
    others, put back by value."""
    def rebuild(tracers):
        return tree_unflatten(treedef, staging.merge_leaves(tracers, statics))
    avals = [_aval(x, i) for i, x in enumerate(leaves)]
    return staging.stage(fun, avals, rebuild, name, hints)


def _aval(x, i):
    return staging.leaf_aval(x, f"argument {i}")[0]


def _cotangent_type(g, aval):
    """The gradient `g` for an input of type `aval`: typed unreduced over the mesh axes the
    input is reduced over (JAX's rule: the cotangent of a value whole on every device of an
    axis is a sum of their parts), as `aval` otherwise."""
    sharding = getattr(aval, "sharding", None)
    reduced = getattr(getattr(sharding, "spec", None), "reduced", None)
    if not reduced or not _is_tracer(g):
        return g
    from .sharding import NamedSharding, PartitionSpec
    from .sharding_types import retyped
    spec = sharding.spec
    names = [spec.names(d) for d in range(len(aval.shape))]
    return retyped(g, NamedSharding(sharding.mesh, PartitionSpec(
        *(None if not n else n[0] if len(n) == 1 else n for n in names), unreduced=reduced)))


class _Entry(staging.Entry):
    __slots__ = ("executable", "consts", "out_weak", "post", "ssa",
                 "function",   # the derivative's SSA (sharding_propagation.placed_by_walk)
                 "placements")   # how its typed results are placed (sharding_types.placements)


class Transformation:
    """Runs `rule(staged, values) -> (flat outputs, post)` on the specialisation of `fun`:
    compiled and cached outside `jit`, emitted inline inside it. `post(flat_outputs)`
    rebuilds the result's pytree.

    A call passes the leaves of `(args, kwargs)`, their `treedef`, and per leaf whether it
    lies in a differentiated position (None when every leaf is a kiln Array: then none is
    static, whatever the positions); the leaves `staging.static_mask` marks are staged by
    value (part of the cache key) and `make_rule(leaves, treedef, dynamic)` (`dynamic`: per
    leaf, whether it is traced) makes a rule over the traced ones. `static_floats` turns on
    (for good) when staging needed the value of a Python float outside the differentiated
    positions."""

    LIMIT = 128   # specialisations kept per transformation (static values in the key)

    def __init__(self, fun, name, make_rule):
        self.fun = fun
        self.name = name
        self.make_rule = make_rule
        self.cache = staging.GuardedCache(self.LIMIT)
        self.static_floats = False

    def __call__(self, leaves, treedef, differentiated):
        return self._retrying(self._call, leaves, treedef, differentiated)

    def make_ir(self, leaves, treedef, differentiated):
        """The derivative's SSA for these arguments, before the passes."""
        return self._retrying(self._make_ir, leaves, treedef, differentiated)

    def _retrying(self, run, leaves, treedef, differentiated):
        if differentiated is None:
            return run(leaves, treedef, (False,) * len(leaves))
        mask = staging.static_mask(leaves, differentiated, self.static_floats)
        try:
            return run(leaves, treedef, mask)
        except ConcretizationError:
            floats = staging.static_mask(leaves, differentiated, True)
            if mask == floats:
                raise
        out = run(leaves, treedef, floats)
        self.static_floats = True   # only once static floats made it work
        return out

    def _call(self, leaves, treedef, mask):
        statics, dynamic = staging.split_leaves(leaves, mask)
        if current() is not None or any(_is_tracer(x) for x in dynamic):
            rule = self.make_rule(leaves, treedef, [not m for m in mask])
            st = stage(self.fun, dynamic, treedef, self.name, statics=statics)
            # a value from outside (`grad(f)(0.25)` inside jit) enters as a copy: the rules
            # give literal operands no derivative
            values = [x if _is_tracer(x) else emit.bind("copy", emit.convert(
                x, v.aval.dtype, v.aval.weak_type)) for x, v in zip(dynamic, st.fn.invars)]
            outs, post = rule(st, values + list(st.extra))
            # a constant output (a NumPy-constant `aux`) is an SSA Literal here: returned as
            # its value, as a staged function returning that constant would return it
            return post([o.value if type(o) is Literal else o for o in outs])
        avals = staging.leaf_avals(dynamic)
        entry = self.cache.lookup((treedef, statics, avals), lambda stale: self._compile(
            leaves, treedef, mask, avals))
        check_execution(self.name)
        outs = wrap_outputs(entry.executable(*[_value(x) for x in dynamic], *entry.consts),
                            entry.out_weak)
        if entry.placements:   # typed over Explicit mesh axes: placed as jit places them
            outs = placed_as_typed(outs, entry.placements)
        elif TYPED and any(id(x) in TYPED for x in dynamic):   # (placed arguments)
            outs = placed_by_walk(entry.function, dynamic, outs, self.name)
        return entry.post(outs)

    def _compile(self, leaves, treedef, mask, avals):
        if staging.log_compiles():
            staging.logger.warning("kiln: compiling %s for %s", self.name,
                                   ", ".join(a.str_short() for a in avals))
        st, fn = self._derivative(leaves, treedef, mask)
        entry = _Entry()
        entry.function = fn.fn
        entry.ssa, entry.executable = staging.compile_ssa(fn.fn)
        entry.consts = list(st.extra) + fn.consts
        entry.out_weak = [v.aval.weak_type for v in entry.ssa.outvars]
        entry.post = fn.post
        entry.guards = st.guards
        entry.placements = placements([v.aval for v in fn.fn.outvars], leaves)
        return entry

    def _make_ir(self, leaves, treedef, mask):
        return self._derivative(leaves, treedef, mask)[1].fn

    def _derivative(self, leaves, treedef, mask):
        """(the staging, the derivative as a top-level SSA Function over (dynamic leaves,
        extra operands))."""
        rule = self.make_rule(leaves, treedef, [not m for m in mask])
        statics, dynamic = staging.split_leaves(leaves, mask)
        st = stage(self.fun, dynamic, treedef, self.name, _hints(self.fun, treedef, leaves,
                                                                 mask), statics)
        b = Builder(st.fn.name, names=st.names)
        with b:
            inputs = [b.tracer(v) for v in st.fn.invars]
            b.invars = list(st.fn.invars)
            outs, post = rule(st, inputs)
            fn = b.build(list(outs))
        out = _Derivative()
        out.fn, out.post = fn, post
        out.consts = [value for _, value, _ in b.consts]
        return st, out


class _Derivative:
    __slots__ = ("fn", "post", "consts")


def _hints(fun, treedef, leaves, mask=None):
    """Input names for the derivative's SSA: the parameter names of `fun` (with pytree key
    paths), as `jit` gives them, for the leaves `mask` leaves traced."""
    args, kwargs = tree_unflatten(treedef, leaves)
    hints = staging.input_names(staging.positional_names(fun), list(args), kwargs)
    if len(hints) != len(leaves):
        return None
    return [h for h, m in zip(hints, mask or [False] * len(hints)) if not m]


# ---------------------------------------------------------------------- argument checks

def _argnums_tuple(argnums):
    if isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool):
        return (int(argnums),), True
    try:
        nums = tuple(argnums)
    except TypeError:
        raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}") from None
    if not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in nums):
        raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}")
    return tuple(int(a) for a in nums), False


def _check_argnums(argnums, nargs, fun):
    for a in argnums:
        if not -nargs <= a < nargs:
            raise ArgnumsError(
                f"differentiating with respect to argnums={argnums if len(argnums) > 1 else argnums[0]} "
                f"requires at least {max(a + 1 if a >= 0 else -a for a in argnums)} positional "
                f"arguments to be passed by the caller, but got only {nargs} positional "
                f"arguments (calling {_describe(fun)}).")
    return [a % nargs for a in argnums]


def _check_input_dtypes(what, leaves, allow_int, fun):
    for x in leaves:
        dt = _aval(x, 0).dtype
        if dt.kind not in "fc" and not allow_int:
            raise TypeError(f"{what} requires real- or complex-valued inputs (input dtype that "
                            f"is a sub-dtype of np.inexact), but got {dt.name}. If you want to "
                            f"use Boolean- or integer-valued inputs, use vjp or set allow_int to "
                            f"True. (Differentiating {_describe(fun)}.)")


def _check_scalar_output(what, aval, fun, holomorphic):
    if holomorphic:
        _check_holomorphic(what, [aval.dtype], "outputs", fun)
    else:
        _check_real_output(what, aval, fun)
    if aval.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: "
                        f"{aval.shape}. (Differentiating {_describe(fun)}.)")


def _check_holomorphic(what, dtypes, side, fun):
    for dt in dtypes:
        if dt.kind != "c":
            raise TypeError(f"{what} with holomorphic=True requires {side} with complex dtype, "
                            f"but got {dt.name}. (Differentiating {_describe(fun)}.)")


def _check_real_output(what, aval, fun):
    if aval.dtype.kind != "f":
        extra = ("For holomorphic differentiation, pass holomorphic=True. For differentiation "
                 "of non-holomorphic functions involving complex outputs, use kiln.vjp directly."
                 if aval.dtype.kind == "c" else
                 "For differentiation of functions with integer outputs, use kiln.vjp directly.")
        raise TypeError(f"{what} requires real-valued outputs (output dtype that is a sub-dtype "
                        f"of np.floating), but got {aval.dtype.name}. {extra} "
                        f"(Differentiating {_describe(fun)}.)")


def _split_aux(out_tree, fun):
    """(number of value leaves, value tree, aux tree) for a `has_aux` output `(value, aux)`."""
    node = out_tree.node_data()
    if node is None or not issubclass(node[0], (tuple, list)) or len(out_tree.children()) != 2:
        raise TypeError(f"expected function with aux output to return a two-element tuple, "
                        f"but got a value with structure {out_tree} "
                        f"({_describe(fun)}).")
    value_tree, aux_tree = out_tree.children()
    return value_tree.num_leaves, value_tree, aux_tree


def _float0_zeros(aval):
    return np.zeros(aval.shape, float0)


# ---------------------------------------------------------------------------- grad family

def _flags(treedef, positions):
    """One flag per leaf of `((args...), kwargs)` (`treedef` its structure): inside a
    differentiated position or not."""
    args_tree, kwargs_tree = treedef.children()
    flags = []
    for i, t in enumerate(args_tree.children()):
        flags += [i in positions] * t.num_leaves
    return flags + [False] * kwargs_tree.num_leaves


def _traced(per_leaf, dynamic):
    """`per_leaf` restricted to the traced leaves."""
    return [x for x, d in zip(per_leaf, dynamic) if d]


def _argnums_order(args, positions):
    """For each differentiated leaf in `argnums` order, its rank among the differentiated
    leaves in argument order (the order the transforms return their derivatives in)."""
    starts = np.cumsum([0] + [tree_structure(a).num_leaves for a in args])
    leaves = [k for i in positions for k in range(starts[i], starts[i + 1])]
    rank = {k: r for r, k in enumerate(sorted(leaves))}
    return [rank[k] for k in leaves]


def _check_callable(fun):
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")


def _transformed(fun, kind, make_rule, argnums):
    """The user-facing callable: flattens `(args, kwargs)` and runs the Transformation, the
    arguments at `argnums` differentiated (the others static where staging.static_mask says).
    Transformations are shared by every call of the API with the same function and options
    (`kind`: the API's name and options), so `kiln.grad(f)(x)` written inline in a loop
    compiles once, not at every iteration."""
    t = cached_transformation(kind, fun, fun, make_rule)

    def flat(args, kwargs):
        leaves, treedef = tree_flatten((tuple(args), kwargs))
        if all(type(x) is Array for x in leaves):   # kiln Arrays only: nothing is static
            return leaves, treedef, None
        return leaves, treedef, _flags(treedef, _check_argnums(argnums, len(args), fun))

    @_call
    def call(*args, **kwargs):
        return t(*flat(args, kwargs))

    def make_ir(*args, **kwargs):
        return t.make_ir(*flat(args, kwargs))
    _name_like(call, fun)
    call._kiln_make_ir = make_ir
    call._kiln_transformation = t
    return call


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False,
                   reduce_axes=()):
    """`(value, gradient)` of a scalar function (`((value, aux), gradient)` with `has_aux`);
    the gradient has the structure of the differentiated argument, a tuple of them when
    `argnums` is a tuple. Integer inputs need `allow_int=True` and get float0 zeros."""
    _check_callable(fun)
    nums, single = _argnums_tuple(argnums)

    def make_rule(leaves, treedef, dynamic):
        args, kwargs = tree_unflatten(treedef, leaves)
        pos = _check_argnums(nums, len(args), fun)
        diff_leaves = [x for i in pos for x in tree_flatten(args[i])[0]]
        if holomorphic:
            _check_holomorphic("grad", [_aval(x, 0).dtype for x in diff_leaves], "inputs", fun)
        else:
            _check_input_dtypes("grad", diff_leaves, allow_int, fun)
        flags = _traced(_flags(treedef, pos), dynamic)
        order = _argnums_order(args, pos)
        arg_trees = [tree_structure(args[i]) for i in pos]
        diff_avals = [_aval(x, i) for i, x in enumerate(diff_leaves)]

        def rule(st, values):
            if has_aux:
                n_val, value_tree, aux_tree = _split_aux(st.out_tree, fun)
            else:
                n_val, value_tree, aux_tree = st.out_tree.num_leaves, st.out_tree, None
            if value_tree.num_nodes != 1 or n_val != 1:   # a single array, not a container
                raise TypeError(f"Gradient only defined for scalar-output functions. Output "
                                f"was a pytree with structure {value_tree} ({_describe(fun)}).")
            state = vjp_forward(st.fn, values, flags + [False] * len(st.extra))
            outs = state.outs
            with current().naming("out_bar"):
                seed = emit.ones_like(outs[0])
            grads = vjp_backward(state, [seed] + [None] * (len(outs) - 1))
            # checked after differentiating, as JAX does: an operation without a derivative
            # (a pure_callback, ...) is the error a non-scalar function reports first
            _check_scalar_output("grad", st.out_avals[0], fun, holomorphic)
            grads = [g for g, f in zip(grads, flags) if f]
            grads = [grads[r] for r in order]
            real = [_cotangent_type(emit.zeros(a) if g is None else g, a)
                    for g, a in zip(grads, diff_avals) if a.dtype.kind in "fc"]
            n_out = len(outs)

            def post(flat):
                value = tree_unflatten(value_tree, flat[:n_val])
                it = iter(flat[n_out:])
                fg = [next(it) if a.dtype.kind in "fc" else Array(_float0_zeros(a), False)
                      for a in diff_avals]
                per_arg, k = [], 0
                for t in arg_trees:
                    per_arg.append(tree_unflatten(t, fg[k:k + t.num_leaves]))
                    k += t.num_leaves
                g = per_arg[0] if single else tuple(per_arg)
                if has_aux:
                    return (value, tree_unflatten(aux_tree, flat[n_val:n_out])), g
                return value, g
            return list(outs) + real, post
        return rule
    return _transformed(fun, ("grad", nums, single, has_aux, holomorphic, allow_int), make_rule,
                        nums)


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
    """The gradient of a scalar-valued function (JAX's `grad`)."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @_call
    def g(*args, **kwargs):
        out, gradient = vg(*args, **kwargs)
        return (gradient, out[1]) if has_aux else gradient
    g._kiln_make_ir = vg._kiln_make_ir
    _name_like(g, fun)
    return g


# ------------------------------------------------------------------------- forward mode

def _check_tuple(what, x):
    if not isinstance(x, (tuple, list)):
        raise TypeError(f"{what} arguments to kiln.jvp must be tuples or lists; found "
                        f"{type(x).__name__}.")


def jvp(fun, primals, tangents, has_aux=False):
    """`(fun(*primals), J(primals) @ tangents)` (JAX's `jvp`): primals and tangents are tuples
    of matching pytrees; integer primals take float0 (or None-like zero) tangents."""
    _check_callable(fun)
    _check_tuple("primal", primals)
    _check_tuple("tangent", tangents)
    if len(primals) != len(tangents):
        raise TypeError(f"primal and tangent arguments to kiln.jvp must have equal length; "
                        f"got {len(primals)} primals and {len(tangents)} tangents")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError(f"primal and tangent arguments to kiln.jvp must have the same tree "
                        f"structure; primals have tree structure {p_tree} whereas tangents "
                        f"have tree structure {t_tree}.")
    for p, t in zip(p_leaves, t_leaves):
        _check_tangent(p, t, fun)
    return _jvp_call(fun, primals, p_leaves, t_leaves, has_aux)


def _check_tangent(p, t, fun):
    pa = _aval(p, 0)
    if _is_float0(t):
        t_dtype, t_shape = "float0", tuple(t.shape)
    else:
        ta = _aval(t, 0)
        t_dtype, t_shape = ta.dtype.name, ta.shape
    want = pa.dtype.name if pa.dtype.kind in "fc" else "float0"
    if t_dtype != want:
        raise TypeError(f"primal and tangent arguments to kiln.jvp do not match; dtypes must "
                        f"be equal, or in case of int/bool primal dtype the tangent dtype must "
                        f"be float0. Got primal dtype {pa.dtype.name} and so expected tangent "
                        f"dtype {want}, but got tangent dtype {t_dtype} instead. "
                        f"(Differentiating {_describe(fun)}.)")
    if t_shape != pa.shape:
        raise ValueError(f"kiln.jvp called with different primal and tangent shapes; got "
                         f"primal shape {pa.shape} and tangent shape as {t_shape}. "
                         f"(Differentiating {_describe(fun)}.)")


def _is_float0(x):
    return getattr(getattr(x, "dtype", None), "names", None) == ("float0",)


def _jvp_call(fun, primals, p_leaves, t_leaves, has_aux):
    n = len(p_leaves)

    def make_rule(leaves, treedef, dynamic):
        # The transformation is shared by calls with other argument types: everything the
        # rule needs comes from this call's `leaves` (n and has_aux are in the cache key).
        traced = dynamic[:n]
        flags = [_aval(p, 0).dtype.kind in "fc" for p in _traced(leaves[:n], traced)]
        n_dyn = len(flags)

        def rule(st, values):
            # values: the traced primals, every tangent, the extra operands.
            tangents = _traced(values[n_dyn:n_dyn + n], traced)
            tans = [emit.cast_like(t, v.aval) if f else None
                    for t, v, f in zip(tangents, st.fn.invars, flags)]
            # The staged function also takes the tangent leaves (unused by `fun`).
            outs, touts = jvp_emit(st.fn, values, tans + [None] * (n + len(st.extra)))
            n_val = st.out_tree.num_leaves
            value_tree, aux_tree = st.out_tree, None
            if has_aux:
                n_val, value_tree, aux_tree = _split_aux(st.out_tree, fun)
            touts = [emit.zeros(a) if t is None and a.dtype.kind in "fc" else t
                     for t, a in zip(touts[:n_val], st.out_avals)]
            real = [t for t in touts if t is not None]

            def post(flat):
                it = iter(flat[len(outs):])
                tl = [next(it) if t is not None else Array(_float0_zeros(a), False)
                      for t, a in zip(touts, st.out_avals)]
                value = tree_unflatten(value_tree, flat[:n_val])
                tangent = tree_unflatten(value_tree, tl)
                if has_aux:
                    return value, tangent, tree_unflatten(aux_tree, flat[n_val:len(outs)])
                return value, tangent
            return list(outs) + real, post
        return rule

    # The staged function takes (primals, tangents) leaves; only the primals reach `fun`.
    p_tree = tree_structure(tuple(primals))

    def on_primals(*flat):
        return specialised_call(fun, tree_unflatten(p_tree, list(flat[:n])))
    on_primals.__name__ = getattr(fun, "__name__", "fn")
    t_vals = [_tangent_value(t, p) for t, p in zip(t_leaves, p_leaves)]
    t = cached_transformation(("jvp", p_tree, has_aux), fun, on_primals, make_rule)
    leaves = list(p_leaves) + t_vals
    return t(leaves, tree_structure((tuple(leaves), {})), _primal_flags(p_leaves) + [True] * n)


def _primal_flags(p_leaves):
    """Per primal of vjp/jvp/linearize: whether it is differentiated (Python bools and ints
    are not: their tangents are float0, and they are staged by value)."""
    return [not staging.is_int_scalar(p) for p in p_leaves]


def _tangent_value(t, p):
    """A tangent leaf as an array operand (float0 / integer primals: zeros of the primal)."""
    pa = _aval(p, 0)
    if pa.dtype.kind not in "fc":
        return np.zeros(pa.shape, pa.dtype)
    return t


_CACHE = {}


def cached_transformation(kind, fun, staged_fun, make_rule):
    """One Transformation per (API and options, user function), so repeated eager calls
    reuse the compiled derivative. `kind` must determine everything `make_rule` closes over
    besides the argument types."""
    key = (id(fun),) + kind
    hit = _CACHE.get(key)
    if hit is None or hit[0] is not fun:
        hit = _CACHE[key] = (fun, Transformation(staged_fun, staging.function_name(fun, kind[0]),
                                                 make_rule))
        if len(_CACHE) > 512:
            _CACHE.pop(next(iter(_CACHE)))
    return hit[1]


def linearize(fun, *primals):
    """`(fun(*primals), f_jvp)` where `f_jvp(*tangents)` is the JVP at `primals` (JAX's
    `linearize`). Outside `jit` the JVP function is split (`partial_eval.split`): the primal
    half runs once, now, and `f_jvp` runs only the tangent half on its residuals."""
    _check_callable(fun)
    p_leaves, p_tree = tree_flatten(tuple(primals))
    if current() is not None or any(_is_tracer(x) for x in p_leaves):
        out, _ = jvp(fun, primals, tuple(_zeros_like_tree(p) for p in primals))

        @_call
        def traced_jvp(*tangents):
            _check_linearized(tangents, p_tree)
            return jvp(fun, primals, tangents)[1]
        return out, traced_jvp
    flags = [_aval(p, 0).dtype.kind in "fc" for p in p_leaves]
    avals = tuple(_aval(x, i) for i, x in enumerate(p_leaves))
    entry, outs, residuals = _run_split(
        (fun, "linearize", p_tree), p_leaves,
        lambda statics, dynamic: _compile_split_jvp(fun, p_tree, flags, statics, dynamic))

    @_call
    def f_jvp(*tangents):
        _check_linearized(tangents, p_tree)
        t_leaves = tree_flatten(tuple(tangents))[0]
        if current() is not None or any(_is_tracer(t) for t in t_leaves):
            # called while kiln specialises a function (jit, vmap of f_jvp): emit it there
            return jvp(fun, primals, tangents)[1]
        for p, t in zip(p_leaves, t_leaves):
            _check_tangent(p, t, fun)
        ts = [np.asarray(_value(t), a.dtype) for t, a, f in zip(t_leaves, avals, flags) if f]
        touts = iter(wrap_outputs(entry.unknown(*residuals, *ts), entry.grad_weak))
        tl = [next(touts) if a.dtype.kind in "fc" else Array(_float0_zeros(a), False)
              for a in entry.out_avals]
        return tree_unflatten(entry.out_tree, tl)
    return tree_unflatten(entry.out_tree, outs), f_jvp


def _unsplit(whole, n_f, n_t, n_out, t_avals):
    """(known, unknown) callables over a JVP function that does not split: known runs it on
    zero tangents and keeps its inputs as the residuals; unknown runs it again."""
    zeros = [np.zeros(a.shape, a.dtype) for a in t_avals]

    def known(*args):
        outs = whole(*args[:n_f], *zeros, *args[n_f:])
        return list(outs[:n_out]) + list(args)

    def unknown(*args):
        res, ts = args[:-n_t] if n_t else args, args[len(args) - n_t:]
        return whole(*res[:n_f], *ts, *res[n_f:])[n_out:]
    return known, unknown


def _check_linearized(tangents, p_tree):
    if tree_structure(tuple(tangents)) != p_tree:
        raise TypeError(f"linearized function called on tangents with structure "
                        f"{tree_structure(tuple(tangents))}, expected {p_tree}")


_SPLIT_CACHE = staging.GuardedCache(256)


class _SplitEntry(staging.Entry):
    __slots__ = ("known", "unknown", "consts", "n_out", "n_val", "out_tree", "out_avals",
                 "out_weak", "grad_weak", "later", "res_spec", "res_weak")


def _split_primals(p_leaves):
    """(statics, dynamic): the primals staged by value and the traced ones."""
    return staging.split_leaves(
        p_leaves, staging.static_mask(p_leaves, _primal_flags(p_leaves), False))


def _run_split(kind, p_leaves, compile_split):
    """Outside `jit`: the split derivative of `kind` (the function and options) for these
    primals, compiled once per signature by `compile_split(statics, dynamic)`, its known
    section run now: (entry, its primal outputs, the residuals for the late section)."""
    statics, dynamic = _split_primals(p_leaves)
    key = kind + (statics, staging.leaf_avals(dynamic))
    entry = _SPLIT_CACHE.lookup(key, lambda stale: compile_split(statics, dynamic))
    known = entry.known(*[_value(x) for x in dynamic], *entry.consts)
    outs = wrap_outputs(known[:entry.n_out], entry.out_weak)
    where = placements(entry.out_avals, dynamic)   # (typed over Explicit axes: as jit)
    return entry, placed_as_typed(outs, where) if where else outs, known[entry.n_out:]


def _stage_primals(fun, what, p_tree, n, statics, dynamic):
    """`fun` staged on the flat primals (`dynamic` traced, `statics` by value)."""
    leaves = staging.merge_leaves(dynamic, statics)
    treedef = tree_structure((tuple(leaves), {}))
    mask = [False] * len(leaves)
    for i, _, _ in statics:
        mask[i] = True
    return stage(_on_leaves(fun, p_tree, n), dynamic, treedef, staging.function_name(fun, what),
                 _hints(fun, treedef, leaves, mask), statics)


def _compile_split_jvp(fun, p_tree, flags, statics, dynamic):
    st = _stage_primals(fun, "linearize", p_tree, len(flags), statics, dynamic)
    b = Builder(st.fn.name, names=st.names)
    with b:
        inputs = [b.tracer(v) for v in st.fn.invars]
        b.invars = list(st.fn.invars)
        tans = [b.new_input(v.aval, v.name + "_dot") if f else None
                for v, f in zip(st.fn.invars, _dynamic_only(flags, statics))]
        outs, touts = jvp_emit(st.fn, inputs, tans + [None] * len(st.extra))
        real = [emit.zeros(a) if t is None else t
                for t, a in zip(touts, st.out_avals) if a.dtype.kind in "fc"]
        fn = b.build(list(outs) + real)
    return _split_entry(st, b, fn, len(outs), len(outs), sum(flags))


def _dynamic_only(per_primal, statics):
    """`per_primal` without the static primals' entries."""
    static = {i for i, _, _ in statics}
    return [x for i, x in enumerate(per_primal) if i not in static]


def _split_entry(st, b, fn, n_out, n_val, n_unknown):
    """Simplify the derivative `fn` built in builder `b` over (st's inputs, `n_unknown` late
    inputs, b's constants), split it after its first `n_out` outputs and compile both parts."""
    from .compiler.transforms.partial_eval import split
    n_f = len(st.fn.invars)
    unknown = [False] * n_f + [True] * n_unknown + [False] * (len(fn.invars) - n_f - n_unknown)
    fn = staging.run_pipeline(fn)
    entry = _SplitEntry()
    try:
        known, later, n_res = split(fn, unknown, n_out)
        entry.known = staging.compile_function(known)
        entry.unknown = staging.compile_function(later)
        entry.later, residuals = later, later.invars[:n_res]
    except ValueError:
        # Control flow computing known and late values in one equation does not split: run
        # the whole function, with zeros for the late inputs now and the real ones later.
        entry.known, entry.unknown = _unsplit(staging.compile_function(fn), n_f, n_unknown,
                                              n_out, fn.in_avals[n_f:n_f + n_unknown])
        entry.later = None
        residuals = fn.invars[:n_f] + fn.invars[n_f + n_unknown:]
    # each residual: ("arg", k) the k-th traced primal itself, ("const", j) entry.consts[j]
    # (the values the function captured, then the builder's constants), or ("opaque", None)
    # a value the known section computes
    n_dyn = n_f - len(st.extra)
    position = {id(v): k for k, v in enumerate(fn.invars)}
    entry.res_spec = [
        ("opaque", None) if id(v) not in position else
        ("arg", position[id(v)]) if position[id(v)] < n_dyn else
        ("const", position[id(v)] - n_dyn) if position[id(v)] < n_f else
        ("const", position[id(v)] - n_dyn - n_unknown) for v in residuals]
    entry.res_weak = [v.aval.weak_type for v in residuals]
    entry.consts = list(st.extra) + [value for _, value, _ in b.consts]
    entry.n_out, entry.n_val, entry.out_tree = n_out, n_val, st.out_tree
    entry.out_avals = st.out_avals
    entry.out_weak = [a.weak_type for a in st.out_avals]
    entry.grad_weak = [v.aval.weak_type for v in fn.outvars[n_out:]]
    entry.guards = list(st.guards)
    return entry


def _zeros_like_tree(tree):
    leaves, t = tree_flatten(tree)
    avals = [_aval(x, 0) for x in leaves]
    return tree_unflatten(t, [np.zeros(a.shape, a.dtype if a.dtype.kind in "fc" else float0)
                              for a in avals])


# ------------------------------------------------------------------------- reverse mode

def vjp(fun, *primals, has_aux=False, reduce_axes=()):
    """`(fun(*primals), vjp_fun)` (plus `aux` with `has_aux`): `vjp_fun(ct)` returns a tuple
    of cotangents, one per primal, with the primals' structures (JAX's `vjp`).

    Outside `jit`, `vjp_fun` runs the compiled forward-and-backward function on the stored
    primals; inside, it emits the backward section, whose forward half the simplifier merges
    with the forward values already computed."""
    _check_callable(fun)
    p_leaves, p_tree = tree_flatten(tuple(primals))
    flags = [_aval(p, 0).dtype.kind in "fc" for p in p_leaves]
    eager = current() is None and not any(_is_tracer(x) for x in p_leaves)
    if eager:
        return _vjp_eager(fun, p_leaves, p_tree, flags, has_aux)
    value, made, *aux = _vjp_specialised(fun, p_leaves, p_tree, flags, has_aux)
    # inside a specialisation the residuals are the primals: a pytree jit may return
    out_tree = tree_structure(value)
    return (value, VJP(_Backward(fun, p_tree, has_aux, p_leaves, made), p_tree, out_tree,
                       _tuptree(p_tree, p_leaves), []), *aux)


class _Backward:
    """The backward pass of a `vjp` made inside a specialisation, given the `VJP` object
    (whose residuals are the primals) and the cotangent: `made`, the backward pass `vjp`
    made, where they are the primals it was made for, else the backward pass of `fun` at the
    primals given (a `VJP` object rebuilt by jit over traced primals, or over others)."""

    def __init__(self, fun, p_tree, has_aux, primals, made):
        self.key = (fun, p_tree, has_aux)
        self.primals, self.made = list(primals), made

    def __call__(self, f_vjp, ct):
        p_leaves = tree_flatten(f_vjp.args_res)[0]
        if len(p_leaves) == len(self.primals) and \
                all(a is b for a, b in zip(p_leaves, self.primals)):
            return self.made(ct)
        fun, p_tree, has_aux = self.key
        return vjp(fun, *tree_unflatten(p_tree, p_leaves), has_aux=has_aux)[1](ct)

    def __eq__(self, other):
        return type(other) is _Backward and self.key == other.key

    def __hash__(self):
        return hash(self.key)


class _Empty:
    """A sentinel of JAX's vjp objects: an empty pytree node (it holds no leaves)."""
    __slots__ = ()

    def __repr__(self):
        return f"{type(self).__name__}()"

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))


class NotNeeded(_Empty):
    """In a `VJP` object's `args_res`: an argument leaf the backward pass does not read."""


class GradRef(_Empty):
    """What `f_vjp.with_refs(ref, ...)(ct)` returns for an argument whose cotangent it added
    into a Ref."""


class DidntWant(_Empty):
    """What `f_vjp.with_refs(DontWant(), ...)(ct)` returns for that argument."""


def _rebuild_empty(cls, aux, children):
    return cls()


for _sentinel in (NotNeeded, GradRef, DidntWant):
    register_pytree_node(_sentinel, lambda x: ((), None),
                         functools.partial(_rebuild_empty, _sentinel))


class GradValue(_Empty):
    """`with_refs` entry: return this argument's cotangent as a value (the default)."""


class DontWant(_Empty):
    """`with_refs` entry: this argument's cotangent is not wanted; `DidntWant()` stands in
    for it."""


class VJP:
    """The backward function `vjp` returns, JAX 0.10.2's VJP object: `f_vjp(ct)` returns the
    cotangents of the arguments. It is a pytree whose leaves are its residuals: `args_res`,
    per argument, the argument's leaves (as nested tuples) that the backward pass reads
    as they are, `NotNeeded()` for the others; `opaque_residuals`, the values the forward pass
    computed for it. Both may be assigned into before the call.
    `with_refs(*entries)` returns the backward function that adds each cotangent into a
    Ref entry (returning `GradRef()` there), returns it for `GradValue()` and returns
    `DidntWant()` for `DontWant()`."""

    def __init__(self, backward, in_tree, out_tree, args_res, opaque_residuals):
        self._backward = backward
        self.in_tree, self.out_tree = in_tree, out_tree
        self.args_res, self.opaque_residuals = args_res, opaque_residuals

    def __call__(self, ct, *extra):
        if extra:
            raise TypeError(f"The function returned by kiln.vjp was called with "
                            f"{len(extra) + 1} arguments; it takes one, the cotangent of the "
                            f"differentiated function's output (a tuple or other container "
                            f"when that output is one: f_vjp((a, b)), not f_vjp(a, b)).")
        return self._backward(self, ct)

    def with_refs(self, *entries):
        e_leaves, e_tree = tree_flatten(entries)
        if e_tree != self.in_tree:
            raise ValueError(f"with_refs takes one entry per leaf of the differentiated "
                             f"function's arguments, with their structure {self.in_tree}; "
                             f"got {e_tree}")

        def backward(ct):
            from .refs import Ref
            grads = tree_flatten(self(ct))[0]
            out = []
            for g, e in zip(grads, e_leaves):
                if isinstance(e, Ref):
                    e[...] += g
                    out.append(GradRef())
                elif isinstance(e, DontWant):
                    out.append(DidntWant())
                elif isinstance(e, GradValue):
                    out.append(g)
                else:
                    raise TypeError(f"with_refs: an entry is a Ref, kiln.ad.GradValue() or "
                                    f"kiln.ad.DontWant(), not {type(e).__name__}")
            return tree_unflatten(self.in_tree, out)
        return backward


register_pytree_node(
    VJP, lambda v: ((v.args_res, v.opaque_residuals), (v._backward, v.in_tree, v.out_tree)),
    lambda meta, children: VJP(*meta, *children))


def _tuptree(treedef, leaves):
    """`leaves` arranged as `treedef`'s containers, each container a tuple: the list of the
    top-level arguments' entries that a VJP object's `args_res` is."""
    it = iter(leaves)

    def build(t):
        if t.node_data() is None:
            return next(it)
        return tuple(build(c) for c in t.children())
    return list(build(treedef))


def _vjp_specialised(fun, p_leaves, p_tree, flags, has_aux):
    """`vjp` inside a specialisation (or of traced primals): (value, vjp_fun) or (value,
    vjp_fun, aux), where `vjp_fun` emits the backward pass where it is called."""
    staged_fun = _on_leaves(fun, p_tree, len(p_leaves))
    n = len(p_leaves)
    primal_flags = _primal_flags(p_leaves)

    def value_rule(leaves, treedef, dynamic):
        def rule(st, values):
            return _replay(st.fn, values), lambda flat: (list(flat), st.out_tree)
        return rule
    # (Inside a specialisation each call emits its own code: nothing to share between calls,
    # and the rules below close over this call's types.)
    fwd = Transformation(staged_fun, staging.function_name(fun, "vjp"), value_rule)
    out_flat, out_tree = fwd(list(p_leaves), tree_structure((tuple(p_leaves), {})),
                             primal_flags)
    if has_aux:
        n_val, value_tree, aux_tree = _split_aux(out_tree, fun)
    else:
        n_val, value_tree, aux_tree = out_tree.num_leaves, out_tree, None
    value_leaves = out_flat[:n_val]
    out_avals = [_aval(o, 0) for o in value_leaves]

    def back_rule(leaves, treedef, dynamic):
        traced = _traced(flags, dynamic[:n])
        n_dyn = len(traced)

        def rule(st, values):
            cts = [emit.cast_like(c, a) if a.dtype.kind in "fc" else None
                   for c, a in zip(values[n_dyn:n_dyn + n_val], out_avals)]
            # The staged function also takes the cotangent leaves (unused by `fun`).
            state = vjp_forward(st.fn, values, traced + [False] * (n_val + len(st.extra)))
            grads = vjp_backward(state, cts + [None] * (len(state.outs) - n_val))
            real = [emit.zeros(v.aval) if g is None else g
                    for g, v, f in zip(grads, st.fn.invars, traced) if f]

            def post(flat):
                it = iter(flat)
                fl = [next(it) if f else Array(_float0_zeros(_aval(p, 0)), False)
                      for p, f in zip(p_leaves, flags)]
                return tree_unflatten(p_tree, fl)
            return real, post
        return rule

    def staged_back(*flat):
        return staged_fun(*flat[:n])
    staged_back.__name__ = staged_fun.__name__
    back = Transformation(staged_back, staging.function_name(fun, "vjp"), back_rule)

    @_call
    def vjp_fun(ct):
        c_leaves = _check_cotangents(fun, ct, value_tree, out_avals)
        c_leaves = [c if a.dtype.kind in "fc" else np.zeros(a.shape, a.dtype)
                    for c, a in zip(c_leaves, out_avals)]
        leaves = list(p_leaves) + c_leaves
        return back(leaves, tree_structure((tuple(leaves), {})),
                    primal_flags + [True] * len(c_leaves))

    value = tree_unflatten(value_tree, value_leaves)
    if has_aux:
        return value, vjp_fun, tree_unflatten(aux_tree, out_flat[n_val:])
    return value, vjp_fun


def _vjp_eager(fun, p_leaves, p_tree, flags, has_aux):
    """`vjp` outside any specialisation: the derivative is compiled once per signature and
    split (`partial_eval.split`) into the forward section, run now, and the backward section,
    run by each call of the `VJP` object on the residuals it holds (so the forward's effects
    happen once, as in JAX)."""
    entry, outs, residuals = _run_split(
        (fun, "vjp", p_tree, has_aux), p_leaves,
        lambda statics, dynamic: _compile_split_vjp(fun, p_tree, flags, has_aux, statics,
                                                    dynamic))
    n_val = entry.n_val
    value_tree = entry.out_tree
    aux_tree = None
    if has_aux:
        _, value_tree, aux_tree = _split_aux(entry.out_tree, fun)
    statics, _ = _split_primals(p_leaves)
    traced_at = [i for i in range(len(p_leaves)) if i not in {j for j, _, _ in statics}]
    needed = {traced_at[k] for kind, k in entry.res_spec if kind == "arg"}
    args_res = [p if i in needed else NotNeeded() for i, p in enumerate(p_leaves)]
    opaque = wrap_outputs([r for r, (kind, _) in zip(residuals, entry.res_spec)
                           if kind == "opaque"],
                          [w for w, (kind, _) in zip(entry.res_weak, entry.res_spec)
                           if kind == "opaque"])
    backward = _SplitBackward(fun, p_tree, has_aux, entry, value_tree, flags, traced_at,
                              statics, [None if f else _aval(p, 0)
                                        for p, f in zip(p_leaves, flags)],
                              placements([_aval(p, 0) for p in p_leaves], p_leaves))
    f_vjp = VJP(backward, p_tree, value_tree, _tuptree(p_tree, args_res), opaque)
    value = tree_unflatten(value_tree, outs[:n_val])
    if has_aux:
        return value, f_vjp, tree_unflatten(aux_tree, outs[n_val:])
    return value, f_vjp


class _SplitBackward:
    """The backward pass of an eager `vjp`: the late section of its split derivative, run on
    the residuals a `VJP` object holds (compiled, on concrete values; emitted into the
    function being specialised, on traced ones)."""

    def __init__(self, fun, p_tree, has_aux, entry, value_tree, flags, traced_at, statics,
                 zero_avals, where):
        self.fun, self.p_tree, self.has_aux, self.entry = fun, p_tree, has_aux, entry
        self.value_tree, self.flags, self.traced_at = value_tree, flags, traced_at
        self.statics = statics
        self.zero_avals = zero_avals   # the types of the primals with float0 cotangents
        self.where = where   # each primal's sharding type (sharding_types.placements) or None

    def __call__(self, f_vjp, ct):
        entry = self.entry
        out_avals = entry.out_avals[:entry.n_val]
        c_leaves = _check_cotangents(self.fun, ct, self.value_tree, out_avals)
        arg_leaves = tree_flatten(f_vjp.args_res, is_leaf=lambda x: isinstance(x, NotNeeded))[0]
        opaque = iter(f_vjp.opaque_residuals)
        residuals = []
        for kind, k in entry.res_spec:
            if kind == "arg":
                leaf = arg_leaves[self.traced_at[k]]
                if isinstance(leaf, NotNeeded):
                    raise ValueError(f"the VJP function of {_describe(self.fun)} needs "
                                     f"argument leaf {self.traced_at[k]}, but its `args_res` "
                                     f"holds NotNeeded() there; put the argument back first")
                residuals.append(leaf)
            else:
                residuals.append(next(opaque) if kind == "opaque" else entry.consts[k])
        cts = [c for c, a in zip(c_leaves, out_avals) if a.dtype.kind in "fc"]
        if current() is None and not any(_is_tracer(x) for x in residuals + cts):
            grads = wrap_outputs(entry.unknown(
                *[_value(r) for r in residuals],
                *[np.asarray(_value(c), a.dtype) for c, a in zip(cts, (
                    a for a in out_avals if a.dtype.kind in "fc"))]), entry.grad_weak)
        elif entry.later is not None:
            # called while kiln specialises a function (jit of the VJP object, vmap): the
            # backward section is emitted there, on the residuals given
            ct_avals = [a for a in out_avals if a.dtype.kind in "fc"]
            grads = _replay(entry.later, residuals + [emit.cast_like(c, a)
                                                      for c, a in zip(cts, ct_avals)])
        else:
            primals = staging.merge_leaves([arg_leaves[i] for i in self.traced_at],
                                           self.statics)
            return vjp(self.fun, *tree_unflatten(self.p_tree, primals),
                       has_aux=self.has_aux)[1](ct)
        grads = iter(grads)
        fl = [Array(_float0_zeros(a), False) if a is not None else next(grads)
              for a in self.zero_avals]
        return tree_unflatten(self.p_tree, placed_as_typed(fl, self.where) if self.where
                              else fl)

    def __eq__(self, other):
        return type(other) is _SplitBackward and self.entry is other.entry and \
            self.p_tree == other.p_tree

    def __hash__(self):
        return hash((id(self.entry), self.p_tree))


def _compile_split_vjp(fun, p_tree, flags, has_aux, statics, dynamic):
    return _split_entry(*_vjp_function(fun, p_tree, flags, has_aux, statics, dynamic))


def _vjp_function(fun, p_tree, flags, has_aux, statics, dynamic):
    """(st, builder, the forward-and-backward function over (primals, cotangents, constants),
    its number of forward outputs, of value outputs, of cotangent inputs)."""
    st = _stage_primals(fun, "vjp", p_tree, len(flags), statics, dynamic)
    flags = _dynamic_only(flags, statics)
    n_val = _split_aux(st.out_tree, fun)[0] if has_aux else st.out_tree.num_leaves
    b = Builder(st.fn.name, names=st.names)
    with b:
        inputs = [b.tracer(v) for v in st.fn.invars]
        b.invars = list(st.fn.invars)
        state = vjp_forward(st.fn, inputs, flags + [False] * len(st.extra))
        ct_avals = [a for a in st.out_avals[:n_val] if a.dtype.kind in "fc"]
        it = iter([b.new_input(a, "out_bar") for a in ct_avals])
        cts = [next(it) if a.dtype.kind in "fc" else None for a in st.out_avals[:n_val]]
        grads = vjp_backward(state, cts + [None] * (len(state.outs) - n_val))
        real = [emit.zeros(v.aval) if g is None else g
                for g, v, f in zip(grads, st.fn.invars, flags) if f]
        fn = b.build(list(state.outs) + real)
    return st, b, fn, len(state.outs), n_val, len(ct_avals)


def saved_residuals(fun, *args, **kwargs):
    """[(ShapedArray, where it comes from)]: the values kiln's reverse mode of `fun` at these
    arguments keeps from the forward pass for the backward one, after simplification (the
    known section's outputs that the late section reads; partial_eval.split)."""
    from .compiler.transforms.partial_eval import split
    fun = functools.partial(fun, **kwargs) if kwargs else fun
    p_leaves, p_tree = tree_flatten(tuple(args))
    flags = [_aval(p, 0).dtype.kind in "fc" for p in p_leaves]
    statics, dynamic = _split_primals(p_leaves)
    st, _, fn, n_out, _, n_ct = _vjp_function(fun, p_tree, flags, False, statics, dynamic)
    n_f = len(st.fn.invars)
    static_at = {i for i, _, _ in statics}
    leaf_names = [name for i, name in enumerate(argument_leaf_names(fun, args))
                  if i not in static_at]
    fn = staging.run_pipeline(fn)
    unknown = [False] * n_f + [True] * n_ct + [False] * (len(fn.invars) - n_f - n_ct)
    known, _, _ = split(fn, unknown, n_out)
    made_by = {id(v): (k, eqn, _made_inside(eqn, i))
               for k, eqn in enumerate(known.eqns) for i, v in enumerate(eqn.outvars)}
    arguments = {id(v): k for k, v in enumerate(fn.invars[:n_f])}
    place = _forward_places(known, n_out)
    out = []   # (arguments in order, then values in the order the forward pass computes them)
    for v in known.outvars[n_out:]:
        k, eqn, inner = made_by.get(id(v), (None, None, None))
        if eqn is not None:
            eqn = inner[1] if inner is not None else eqn
            where = f"output of {eqn.prim.name}" if eqn.prim.name != "name" \
                else f"named {eqn.params['name']!r}"
            if eqn.info is not None:
                fn_name = f" ({eqn.info.function})" if eqn.info.function else ""
                where += f" from {eqn.info.filename}:{eqn.info.lineno}:{eqn.info.col}{fn_name}"
            order = (1, place[k]) if inner is None else (1, place[k], inner[0])
        elif id(v) in arguments:
            k = arguments[id(v)]
            name = leaf_names[k] if k < len(leaf_names) else v.name
            where, order = f"from the argument {name}", (0, k)
        else:
            where, order = "a constant of the function", (2, 0)
        out.append((order, v.aval, where))
    out.sort(key=lambda t: t[0])
    out = [(aval, where) for _, aval, where in out]
    return out


def _forward_places(known, n_out):
    """For each equation of the known section, a sort key placing it where JAX's forward pass
    computes it. The equations the primal outputs need keep their order. Kiln's reverse mode
    emits a linearisation coefficient (the `cos` of `sin`'s derivative) in the backward pass,
    from which `split` moves it into the known section after every primal equation; JAX's
    forward pass computes it beside the primal operation it differentiates. That operation
    is the first primal equation at the coefficient's source position from its latest primal
    input on (or, with no such equation, the first primal reader of that input)."""
    index = {id(v): k for k, eqn in enumerate(known.eqns) for v in eqn.outvars}
    arguments = {id(v) for v in known.invars}
    primal = set()
    todo = [index[id(v)] for v in known.outvars[:n_out] if id(v) in index]
    while todo:
        k = todo.pop()
        if k not in primal:
            primal.add(k)
            todo += [index[id(v)] for v in known.eqns[k].invars if id(v) in index]
    first_reader, at_source = {}, {}
    for k in sorted(primal):
        for v in known.eqns[k].invars:
            first_reader.setdefault(id(v), k)
        at_source.setdefault(_source(known.eqns[k]), []).append(k)
    anchor, places = {}, []   # anchor: a coefficient's latest primal input, as (k, v)
    for k, eqn in enumerate(known.eqns):
        if k in primal:
            places.append((k, 0, k))
            continue
        inputs = [anchor.get(id(v), (index.get(id(v), -1), v)) for v in eqn.invars
                  if id(v) in index or id(v) in arguments]
        at, var = max(inputs, key=lambda a: a[0], default=(-1, None))
        for v in eqn.outvars:
            anchor[id(v)] = (at, var)
        same = [j for j in at_source.get(_source(eqn), ()) if j >= at]
        places.append((same[0] if same else first_reader.get(id(var), at), 1, k))
    return places


def _source(eqn):
    info = eqn.info
    return None if info is None else (info.filename, info.lineno, info.col)


def _made_inside(eqn, i):
    """(its index in the body, the body's equation that computes it) for the `i`-th result of
    a `remat` (`checkpoint`) equation, looking through nested `remat`s, as JAX names a
    checkpointed value by the operation inside that made it; None for other equations and
    for a result the body passes through from its inputs."""
    found = None
    while eqn.prim.name == "remat":
        v = eqn.params["body"].outvars[i]
        inner = next(((k, e, e.outvars.index(v)) for k, e in enumerate(eqn.params["body"].eqns)
                      if v in e.outvars), None)
        if inner is None:
            return found
        k, eqn, i = inner
        found = (k, eqn) if found is None else (found[0], eqn)
    return found


def argument_leaf_names(fun, args):
    """JAX's name of each leaf of the positional `args` of `fun`: its parameter's name and
    the leaf's path in it (`params[0]`, `x`, `args[1]['w']`), or `args[i]...` where the
    signature cannot say."""
    import inspect
    from .tree_util import keystr, tree_flatten_with_path
    try:
        bound = inspect.signature(fun).bind(*args).arguments
    except (TypeError, ValueError):
        bound = {"args": tuple(args)}
    return [name + keystr(path) for name, value in bound.items()
            for path, _ in tree_flatten_with_path(value)[0]]


def _check_cotangents(fun, ct, value_tree, out_avals):
    """The cotangent leaves given to a VJP function, checked against the primal outputs."""
    c_leaves, c_tree = tree_flatten(ct)
    if c_tree != value_tree:
        raise ValueError(f"unexpected tree structure: the argument to a VJP function "
                         f"returned by kiln.vjp must match the pytree structure of the "
                         f"output of {_describe(fun)}; got {c_tree}, expected "
                         f"{value_tree}.")
    for c, a in zip(c_leaves, out_avals):
        if _is_float0(c):   # integer outputs take float0 (or integer) cotangents
            got, shape, ok = f"float0{list(c.shape)}", tuple(c.shape), a.dtype.kind not in "fc"
        else:
            ca = _aval(c, 0)
            got, shape = ca.str_short(), ca.shape
            ok = ca.dtype == a.dtype or a.dtype.kind not in "fc"
        if not ok or shape != a.shape:
            raise ValueError(f"unexpected type (shape/dtype) for argument to VJP function:"
                             f" got {got}, but expected {a.str_short()} because "
                             f"the corresponding output of the differentiated function "
                             f"had type {a.str_short()}. (Differentiating {_describe(fun)}.)")
    return c_leaves


def _on_leaves(fun, p_tree, n):
    def staged(*flat):
        return specialised_call(fun, tree_unflatten(p_tree, list(flat[:n])))
    staged.__name__ = getattr(fun, "__name__", "fn")
    return staged


def specialised_call(fun, args):
    """Call the user's `fun` from kiln's own code during specialisation: its source is walked
    (so its Python control flow on traced values compiles), as if the user had called it."""
    from .compiler.frontend.specialise import call_function
    return call_function(fun, list(args), {})


def _replay(fn, values):
    """Emit `fn`'s equations into the current builder (no derivative): its outputs."""
    outs, _ = jvp_emit(fn, values, [None] * len(values))
    return outs


# ---------------------------------------------------------------------------- Jacobians

def _jacobian(fun, argnums, has_aux, holomorphic, allow_int, mode):
    from .compiler.transforms.jacobian import jacfwd_emit, jacrev_emit
    _check_callable(fun)
    nums, single = _argnums_tuple(argnums)
    what = "jacfwd" if mode == "fwd" else "jacrev"

    def make_rule(leaves, treedef, dynamic):
        args, kwargs = tree_unflatten(treedef, leaves)
        pos = _check_argnums(nums, len(args), fun)
        diff_leaves = [x for i in pos for x in tree_flatten(args[i])[0]]
        if holomorphic:
            _check_holomorphic(what, [_aval(x, 0).dtype for x in diff_leaves], "inputs", fun)
        elif mode == "rev":
            _check_input_dtypes(what, diff_leaves, allow_int, fun)
        for x in diff_leaves if mode == "fwd" and not holomorphic else ():
            dt = _aval(x, 0).dtype
            if dt.kind != "f":
                raise TypeError(f"{what} requires real-valued inputs (input dtype that is a "
                                f"sub-dtype of np.floating), but got {dt.name}. For holomorphic "
                                f"differentiation, pass holomorphic=True. For differentiation "
                                f"of non-holomorphic functions involving complex inputs or "
                                f"integer inputs, use kiln.jvp directly. (Differentiating "
                                f"{_describe(fun)}.)")
        flags = _traced(_flags(treedef, pos), dynamic)
        order = _argnums_order(args, pos)
        arg_trees = [tree_structure(args[i]) for i in pos]

        def rule(st, values):
            if has_aux:
                n_val, value_tree, aux_tree = _split_aux(st.out_tree, fun)
            else:
                n_val, value_tree, aux_tree = st.out_tree.num_leaves, st.out_tree, None
            if holomorphic:
                _check_holomorphic(what, [a.dtype for a in st.out_avals[:n_val]], "outputs", fun)
            elif mode == "rev":
                for a in st.out_avals[:n_val]:
                    _check_real_output(what, a, fun)
            value_fn = _prefix(st.fn, n_val)
            active = flags + [False] * len(st.extra)
            if mode == "fwd":
                blocks = jacfwd_emit(value_fn, values, active)
                aux = _replay(st.fn, values)[n_val:] if has_aux else []
            else:
                blocks, outs = jacrev_emit(st.fn, values, active)
                blocks = blocks[:n_val]
                aux = outs[n_val:]
            flat = [row[r] for row in blocks for r in order]
            n_in = sum(flags)

            def post(res):
                rows = []
                for i in range(n_val):
                    row = res[i * n_in:(i + 1) * n_in]
                    per_arg, k = [], 0
                    for t in arg_trees:
                        per_arg.append(tree_unflatten(t, row[k:k + t.num_leaves]))
                        k += t.num_leaves
                    rows.append(per_arg[0] if single else tuple(per_arg))
                jac = tree_unflatten(value_tree, rows)
                if has_aux:
                    return jac, tree_unflatten(aux_tree, res[n_val * n_in:])
                return jac
            return flat + list(aux), post
        return rule
    return _transformed(fun, (what, nums, single, has_aux, holomorphic, allow_int), make_rule,
                        nums)


def _prefix(fn, n):
    """`fn` restricted to its first `n` outputs."""
    from .compiler.ir.ssa import Function
    return Function(fn.name, fn.invars, fn.eqns, fn.outvars[:n])


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian by forward mode (JAX's `jacfwd`): for each output leaf, a block per
    differentiated argument leaf, of shape `out.shape + in.shape`."""
    return _jacobian(fun, argnums, has_aux, holomorphic, False, "fwd")


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The Jacobian by reverse mode (JAX's `jacrev`), same layout as `jacfwd`."""
    return _jacobian(fun, argnums, has_aux, holomorphic, allow_int, "rev")


jacobian = jacrev


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Hessian, `jacfwd(jacrev(fun))` as in JAX."""
    return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)
