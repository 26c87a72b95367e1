"""The staging service: how every API turns a user's function into something that runs.

`jit`, `grad` and the other autodiff APIs, `vmap`, `kiln show` and `kiln compile` are adapters
over these steps (pmap and further backends are meant to be too):

1. **arguments**: `leaf_aval` gives each argument leaf its abstract value (and the value
   passed at run time); `StaticArgs` is JAX's `static_argnums`/`static_argnames` (which
   arguments are specialised by value) and splits a call into static and dynamic parts;
   `static_mask` is the transforms' staticness outside `jit` (below).
2. **stage**: `stage(fun, avals, rebuild, name)` specialises `fun` into SSA for the abstract
   values of its dynamic leaves (`rebuild` turns the leaves' tracers back into the call's
   `(args, kwargs)`, static values included); `stage_call` does it for a plain call with
   `StaticArgs`. Inside a function being specialised the function is staged in a child builder
   whose captured outer values become extra operands; outside, the arrays it closes over do.
3. **transforms** (autodiff, batching) are applied by the callers on the `Staged` SSA.
4. **compile**: `compile_ssa(fn, backend)` runs the backend's named pipeline
   (`kiln.compiler.passes.PIPELINES`) and its `compile_function`. `BACKENDS` is the table of
   backends by name (`ALIASES`: "cpu" is "llvm", "gpu" is "cuda"); a function a backend cannot lower (a
   `BackendUnsupportedError`) is compiled for `fallback` instead when one is given (`jit`
   without an explicit `backend=` falls back to "reference").
5. **cache**: a `GuardedCache` maps a key (pytree structure, abstract values, static values)
   to an `Entry`; an entry stays valid while the globals read at specialisation (`guards`)
   hold the values they had. Making a missing entry holds the cache's lock (one per function:
   threads calling a function for the first time at once compile it once); finding one takes
   none. A key that cannot be hashed (an unhashable static value) is made afresh every call.

Staticness of the transforms' arguments (`static_mask`): outside `jit`, JAX traces only the
differentiated arguments of `grad`, `value_and_grad`, `jacfwd`/`jacrev`, and only primals with
real tangents in `vjp`, `jvp` and `linearize`; every other argument is a concrete Python value.
So kiln specialises by value (the values are part of the cache key) every leaf in a
non-differentiated position that is not an array: bools, ints, strings and any other Python
object, and Python bool/int primals of `vjp`/`jvp`/`linearize` (their tangents are float0).
`jnp.sum(x, keepdims=flag)`, `if flag:` changing shapes, `xs[i]` on a Python tuple and
`mode="sum"` then work as in JAX. Python floats in such positions are the exception, chosen for
cache growth: a float that changes every call (a learning rate, a temperature) is traced as a
weak-typed scalar so that one compiled derivative serves every value; only when staging needs
its concrete value (a `ConcretizationError`) does the transformation restage with such floats
static, and keys them by value from then on (`Transformation.static_floats` in `ad.py`).
`vmap` applies the same rule to its unmapped leaves (`in_axes` None), floats traced.
Arrays are always traced; inside `jit` nothing changes (jit's arguments are tracers).
"""
import contextlib
import importlib
import inspect
import logging
import os
import threading
import types
import weakref
from typing import Callable, NamedTuple

import numpy as np

from .array import Array, to_array, placed_sharding, TYPED
from .sharding_types import typed_aval
from .global_arrays import spanning_argument
from .dispatch import is_traced
from .tree_util import tree_flatten, tree_unflatten, tree_flatten_with_path, keystr
from .compiler.ir.abstract import ShapedArray
from .compiler.config import config
from .compiler.errors import BackendUnsupportedError, located
from .compiler.primitives.checks import undischarged, FUNCTIONALIZATION, CHECK_HINT
from .compiler.ir.builder import Builder, current
from . import tracer as _tracer  # noqa: F401  (installs the Tracer type in the builder)
from . import _host  # noqa: F401  (fills the specialiser's host interface)
from .execution_guards import STATE as _GUARDS, check_tracing
from . import user_context, profiler
from .refs import Ref, STAGING as _REF_STAGING
from .ref_staging import RefStaging

logger = logging.getLogger("kiln")


JIT = "compiled by kiln.jit"   # what made a function, in messages about it


def log_compiles():
    """Whether `KILN_LOG_COMPILES` or the `log_compiles` option asks for every
    (re)specialisation to be logged."""
    return os.environ.get("KILN_LOG_COMPILES", "").lower() in ("1", "true", "yes") or \
        config.read("log_compiles") or config.read("explain_cache_misses")


# ------------------------------------------------------------------------------- arguments

class RefAval(NamedTuple):
    """The abstract value of a Ref argument leaf of `jit` (its value's, `aval`)."""
    aval: ShapedArray

    def str_short(self):
        return f"Ref{{{self.aval.str_short()}}}"

    __str__ = str_short


def leaf_aval(x, where, dense=False, refs=False):
    """(abstract value, run-time value) of an argument leaf; a TypeError naming `where` for a
    value that is neither an array, a number nor a traced value. `dense`: an Array's buffer as
    compiled code takes it (Array._dense: a broadcast one is made contiguous once, and kept,
    not copied on every call). `refs`: a Ref is a RefAval with its value (`jit`), else a
    TypeError."""
    t = type(x)
    if t is Ref and refs:
        aval, value = leaf_aval(x._live(), where, dense)
        return RefAval(aval), value
    if t is Array:
        v = x._value
        if dense and not v.flags.c_contiguous:
            v = x._dense()
        aval = ShapedArray(v.shape, v.dtype, x.weak_type)
        if TYPED and id(x) in TYPED:   # placed, split over Explicit axes: typed
            aval = typed_aval(aval, placed_sharding(x))
        return aval, v
    if t in (int, float, complex, bool):
        a = to_array(x, where)
        return ShapedArray((), a.dtype, a.weak_type), a._value
    if isinstance(x, (np.ndarray, np.generic)):
        a = to_array(x, where)
        return ShapedArray(a.shape, a.dtype, False), a._value
    if getattr(t, "_kiln_trace", None) is not None:
        return x.aval, x
    if t is Ref:
        raise TypeError(f"{where}: {x._kiln_not_traceable()}")
    if isinstance(x, Array):
        raise spanning_argument(where, x)
    raise TypeError(f"{where} of type {t} is not a valid kiln type: pass arrays, scalars or "
                    f"pytrees of them, or mark the argument static with static_argnums / "
                    f"static_argnames.")


def leaf_avals(leaves):
    return tuple(leaf_aval(x, f"argument {i}")[0] for i, x in enumerate(leaves))


def leaf_value(x):
    """The NumPy value an executable receives for the argument leaf `x`."""
    return x._value if type(x) is Array else to_array(x)._value


def wrap_outputs(values, weak_types):
    """An executable's NumPy results as kiln Arrays (the dispatch fast path: no checks)."""
    wrapped = []
    for o, weak in zip(values, weak_types):
        a = object.__new__(Array)
        a._value = o
        a.weak_type = weak
        wrapped.append(a)
    return wrapped


def check_outputs(name, out, api):
    """Every output leaf must be an array or a number (JAX's check, with kiln's words);
    `api` says what made the function ("compiled by kiln.jit"). `jit`'s results must be
    numeric; a transform's may also be float0 (integer inputs' derivatives)."""
    kinds = "biufc" if api == JIT else "biufcV"
    for path, leaf in tree_flatten_with_path(out)[0]:
        if type(leaf) is Ref:
            raise ValueError(f"function {name} {api} returned a Ref at output component "
                             f"{keystr(path) or '(the output)'}, but Refs cannot be returned "
                             f"(as in JAX): return its value `ref[...]` (or kiln.freeze(ref))")
        ok = isinstance(leaf, (Array, bool, int, float, complex, np.ndarray, np.generic)) or \
            is_traced(leaf)
        if not ok or getattr(getattr(leaf, "dtype", None), "kind", "b") not in kinds:
            raise TypeError(f"function {name} {api} returned a value of type "
                            f"{type(leaf)} at output component {keystr(path) or '(the output)'}"
                            f", which is not a valid kiln type: return arrays, numbers, or "
                            f"pytrees of them")


_P = inspect.Parameter
_PARAMETERS = {}   # code object -> parameters of the plain functions made from it


def parameters(fun):
    """`fun`'s parameters as `(name, kind)` pairs (`kind` an `inspect.Parameter` kind), or None
    when it has no signature. `inspect.signature` costs about 10 us; a plain function's names
    and kinds are those of its code object, so they are read once per code object (a fresh
    closure or lambda of the same code costs a dictionary lookup)."""
    code = getattr(fun, "__code__", None) if type(fun) is types.FunctionType else None
    if code is not None and not ("__wrapped__" in fun.__dict__ or
                                 "__signature__" in fun.__dict__):
        params = _PARAMETERS.get(code)
        if params is None:
            if len(_PARAMETERS) >= 4096:   # code made at run time (exec) in a loop
                _PARAMETERS.clear()
            params = _PARAMETERS[code] = _signature_parameters(fun)
        return params
    return _signature_parameters(fun)


def _signature_parameters(fun):
    try:
        return tuple((p.name, p.kind) for p in inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return None


def positional_names(fun):
    """The names of `fun`'s positional parameters ([] when it has no signature)."""
    return _positional(parameters(fun) or ())


def _positional(params):
    return [name for name, kind in params if kind in (_P.POSITIONAL_ONLY,
                                                      _P.POSITIONAL_OR_KEYWORD)]


def input_names(positional, dyn_args, dyn_kwargs, static_positions=()):
    """SSA names for the dynamic leaves: the parameter name, plus the key path inside a pytree
    (`params_0_1` for params[0][1], `opt_W` for opt['W'])."""
    names = [n for i, n in enumerate(positional) if i not in static_positions]
    hints = []
    for i, arg in enumerate(dyn_args):
        base = names[i] if i < len(names) else f"arg{i}"
        for path, _ in tree_flatten_with_path(arg)[0]:
            hints.append("_".join([base] + [_key_text(k) for k in path]))
    for k in sorted(dyn_kwargs):   # in the order of the leaves: pytree dicts sort their keys
        for path, _ in tree_flatten_with_path(dyn_kwargs[k])[0]:
            hints.append("_".join([k] + [_key_text(p) for p in path]))
    return hints


def _key_text(k):
    for attr in ("idx", "key", "name"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return "x"


class StaticArgs:
    """JAX's `static_argnums` / `static_argnames` (or `donate_argnums` / `donate_argnames`,
    `what="donate"`) of `fun`, each implied by the other as in JAX, checked against `fun`'s
    signature when it has one."""

    def __init__(self, fun, argnums=(), argnames=(), what="static"):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums or ())
        names = (argnames,) if isinstance(argnames, str) else tuple(argnames or ())
        self._fun = fun
        self._positional = None
        if not (nums or names):   # nothing to check or imply: the signature is read if needed
            self.names = self.nums = frozenset()
            return
        params = parameters(fun)
        positional = self._positional = _positional(params or ())
        if params is not None:
            _validate_static(params, positional, nums, names, what)
        self.names = frozenset(set(names) | {positional[n] for n in nums
                                             if -len(positional) <= n < len(positional)})
        self.nums = frozenset(set(nums) | {positional.index(n) for n in self.names
                                           if n in positional})

    @property
    def positional(self):
        """The names of the function's positional parameters (SSA names of its inputs)."""
        if self._positional is None:
            self._positional = positional_names(self._fun)
        return self._positional

    def __bool__(self):
        return bool(self.nums or self.names)

    def split(self, args, kwargs, fun_name):
        """(statics, dynamic positional arguments, dynamic keyword arguments); `statics` are
        `("#", position, value)` and `("=", name, value)`, hashable (a ValueError otherwise)."""
        nargs = len(args)
        statics, dyn_args = [], []
        for i, a in enumerate(args):
            if i in self.nums or (i - nargs) in self.nums:
                statics.append(("#", i, a))
            else:
                dyn_args.append(a)
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self.names:
                statics.append(("=", k, v))
            else:
                dyn_kwargs[k] = v
        for kind, where, v in statics:
            try:
                hash(v)
            except TypeError:
                what = f"argument {where}" if kind == "#" else f"argument {where!r}"
                raise ValueError(
                    f"Non-hashable static arguments are not supported: {what} of "
                    f"{fun_name} is static but has unhashable type "
                    f"{type(v).__name__} ({v!r}). Pass a tuple instead of a list, or make the "
                    f"argument dynamic.") from None
        return tuple(statics), dyn_args, dyn_kwargs


def _validate_static(params, positional, nums, names, what):
    """JAX's checks, at `jit` time: static (or donated) arguments the function cannot take."""
    kinds = {kind for _, kind in params}
    n = len(positional)
    if _P.VAR_POSITIONAL not in kinds and any(not -n <= i < n for i in nums):
        raise ValueError(f"Jitted function has {what}_argnums={nums}, but only accepts {n} "
                         f"positional arguments.")
    keywords = {name for name, kind in params if kind in (_P.POSITIONAL_OR_KEYWORD,
                                                          _P.KEYWORD_ONLY)}
    invalid = set(names) - keywords
    if _P.VAR_KEYWORD not in kinds and invalid:
        raise ValueError(f"Jitted function has invalid argnames {invalid} in {what}_argnames. "
                         f"Function does not take these args.")


def merge_statics(dyn_args, dyn_kwargs, statics):
    """The call's `(args, kwargs)` with the static values of `StaticArgs.split` put back."""
    args = list(dyn_args)
    for _, where, v in sorted((s for s in statics if s[0] == "#"), key=lambda s: s[1]):
        args.insert(where, v)
    return args, {**dyn_kwargs, **{w: v for kind, w, v in statics if kind == "="}}


# ------------------------------------------------------------------ staticness (transforms)

def static_mask(leaves, differentiated, static_floats):
    """Per leaf of a transform's call outside `jit`: whether it is specialised by value (see the
    module docstring). `differentiated`: per leaf, whether it lies in a differentiated
    position; `static_floats`: whether Python floats outside them are static too."""
    return tuple(False if d or type(x) is Array else _static_kind(x, static_floats)
                 for x, d in zip(leaves, differentiated))


def _static_kind(x, static_floats):
    if type(x) is Array or is_traced(x) or isinstance(x, (np.ndarray, np.generic)):
        return False
    if isinstance(x, (float, complex)):
        return static_floats
    return True


def is_int_scalar(x):
    """A Python bool or int: a primal whose tangent is float0 (never differentiated)."""
    return isinstance(x, int)


def split_leaves(leaves, mask):
    """(statics: `(index, type, value)` of the masked leaves, the other leaves). The type is
    part of the key: `True`, `1` and `1.0` are equal in Python but specialise differently."""
    if True not in mask:
        return (), list(leaves)
    statics = tuple((i, type(x), x) for i, (x, m) in enumerate(zip(leaves, mask)) if m)
    return statics, [x for x, m in zip(leaves, mask) if not m]


def merge_leaves(dynamic, statics):
    """The leaves of `split_leaves` put back together."""
    out = list(dynamic)
    for i, _, value in statics:
        out.insert(i, value)
    return out


# ------------------------------------------------------------------------------------ stage

class Staged:
    """A user function specialised into SSA: `fn` takes (dynamic leaves, extra operands);
    `names` is its name supply (a transform of `fn` reuses its regions: names must not
    collide)."""
    __slots__ = ("fn", "out_tree", "extra", "guards", "out_avals", "names", "writes", "refs")


def stage(fun, avals, rebuild, name, hints=None, api="transformed by kiln", shown=None):
    """Specialise `fun` for inputs of abstract values `avals`; `rebuild(tracers)` returns the
    call's `(args, kwargs)`; errors name the function `shown` (default `name`). Inside a specialisation the function is traced in a child
    builder, so values it reads from the enclosing function become extra operands (`extra`);
    outside, arrays it closes over become extra operands too (the builder's consts)."""
    with profiler.span(f"specialise {shown or name}", "compile"):
        return _stage(fun, avals, rebuild, name, hints, api, shown)


def _stage(fun, avals, rebuild, name, hints, api, shown):
    from .compiler.frontend import specialise
    parent = current()
    if parent is None and _GUARDS.no_tracing:
        check_tracing(shown or name)
    b = Builder(name, parent=parent) if parent is not None else Builder(name)
    hints = hints or [f"x{i}" if len(avals) > 1 else "x" for i in range(len(avals))]
    outer_writes = specialise.current_writes()
    writes = specialise.GlobalWrites(b) if api == JIT else \
        specialise.GlobalWrites(b, static_only=True, seed=outer_writes)
    # Refs made outside: jit's top level passes them in and out; elsewhere they are refused,
    # except inside a jit specialisation, whose RefStaging stays in force.
    refs = RefStaging(b) if api == JIT and parent is None else \
        _REF_STAGING.active if parent is not None else None
    with b, _ref_staging(refs):
        tracers = [b.new_input(a.aval if type(a) is RefAval else a, h) for a, h in zip(avals, hints)]
        args, kwargs = rebuild(tracers)
        out, guards = specialise.specialise_call(fun, list(args), dict(kwargs), writes)
        out_leaves, out_tree = tree_flatten(out)
        check_outputs(shown or name, out, api)
        st = Staged()
        if api == JIT:
            st.writes = _global_writes(writes, out_leaves)
        else:
            writes.finish_static(outer_writes)
            st.writes = []
        st.refs = refs.finish(out_leaves) if refs is not None and refs.builder is b else None
        fn = b.build(out_leaves)
    st.fn, st.out_tree, st.guards = fn, out_tree, unique_guards(guards + user_context.guards())
    st.names = b.names
    if parent is not None:
        st.extra = [outer for outer, _ in b.captured.values()]
    else:
        # captured Arrays as compiled code takes them: a broadcast one contiguous once
        st.extra = [x._dense() if type(x) is Array else value for _, value, x in b.consts]
    st.out_avals = [v.aval for v in fn.outvars]
    return st


@contextlib.contextmanager
def _ref_staging(refs):
    """Within: `refs` (a RefStaging or None) handles the Refs made outside the function."""
    old, _REF_STAGING.active = _REF_STAGING.active, refs
    try:
        yield
    finally:
        _REF_STAGING.active = old


class GlobalWrite(NamedTuple):
    """A global a jitted function assigns: after each call `scope[name]` becomes the pytree
    `tree` of `leaves`, each ("out", k) (the function's k-th output) or ("const", value)."""
    scope: dict
    name: str
    tree: object
    leaves: list


def _global_writes(writes, out_leaves):
    """The GlobalWrites of a specialisation as GlobalWrite records; their traced leaves are
    appended to `out_leaves` (extra outputs after the function's own)."""
    if writes is None:
        return []
    records = []
    for scope, name, value in writes.items():
        leaves, tree = tree_flatten(value)
        slots = []
        for x in leaves:
            if is_traced(x):
                slots.append(("out", len(out_leaves)))
                out_leaves.append(x)
            else:
                slots.append(("const", x))
        records.append(GlobalWrite(scope, name, tree, slots))
    return records


def assign_globals(writes, outs):
    """Assign each global a jitted call wrote, from its outputs `outs` (kiln Arrays)."""
    for w in writes:
        w.scope[w.name] = tree_unflatten(
            w.tree, [outs[v] if kind == "out" else v for kind, v in w.leaves])


def stage_call(fun, args, kwargs, static, api=JIT, shown=None, avals=None):
    """`stage` for the call `fun(*args, **kwargs)` with `static` (StaticArgs) arguments by
    value: (Staged, the dynamic leaves' pytree definition, statics). `avals`: the dynamic
    leaves' abstract values when not their own (global arrays: their global shapes)."""
    name = function_name(fun)
    statics, dyn_args, dyn_kwargs = static.split(args, kwargs, shown or name)
    leaves, treedef = tree_flatten((tuple(dyn_args), dyn_kwargs))
    hints = input_names(static.positional, dyn_args, dyn_kwargs,
                        {w for k, w, _ in statics if k == "#"})

    if avals is None:
        avals = [leaf_aval(x, f"argument {i}", refs=api == JIT)[0]
                 for i, x in enumerate(leaves)]

    def rebuild(tracers):
        tracers = [_REF_STAGING.active.argument(leaves[i], t, i) if type(a) is RefAval else t
                   for i, (t, a) in enumerate(zip(tracers, avals))]
        targs, tkwargs = tree_unflatten(treedef, tracers)
        return merge_statics(targs, tkwargs, statics)
    return stage(fun, avals, rebuild, name, hints, api, shown), treedef, statics


def function_name(fun, prefix=None):
    """`fun`'s name as an SSA function name (`<lambda>` -> `lambda`), with `prefix_`."""
    base = getattr(fun, "__name__", None) or getattr(getattr(fun, "func", None), "__name__",
                                                    "fn")
    return (f"{prefix}_{base}" if prefix else base).replace("<lambda>", "lambda")


# ---------------------------------------------------------------------------------- compile

class Backend(NamedTuple):
    pipeline: str       # its pass pipeline: a key of kiln.compiler.passes.PIPELINES
    load: Callable      # () -> its compile_function(ssa, ...), imported on first use
    donation: bool      # whether compile_function takes `donated=` (inputs it may overwrite)


def _compiler_of(module):
    """A `Backend.load` for `kiln.compiler.backends.<module>.compile_function`."""
    def load():
        return importlib.import_module(f"{__package__}.compiler.backends.{module}")\
            .compile_function
    return load


def _pjrt_compiler():
    """backend="pjrt"'s compile_function: StableHLO through a PJRT plug-in (runtime/pjrt.py,
    which holds the plug-in's client and devices)."""
    return importlib.import_module(f"{__package__}.pjrt").compile_function


BACKENDS = {
    "reference": Backend("reference", _compiler_of("reference"), False),
    # the reference backend without passes: the eager bits (eager composites, eager_tiers.py)
    "exact": Backend("exact", _compiler_of("reference"), False),
    "llvm": Backend("llvm", _compiler_of("llvm"), True),
    "cuda": Backend("llvm", _compiler_of("cuda"), False),   # the LLVM pipeline's fused groups
    "pjrt": Backend("reference", _pjrt_compiler, True),   # XLA fuses on its own
}
ALIASES = {"cpu": "llvm", "gpu": "cuda"}


def backend_name(name):
    """The `BACKENDS` key that `name` (a key or an alias) stands for; a ValueError listing the
    available names otherwise."""
    key = ALIASES.get(name, name)
    if key not in BACKENDS:
        raise ValueError(f"kiln.jit: unknown backend {name!r}; available: "
                         + ", ".join(map(repr, [*BACKENDS, *ALIASES])))
    return key


def run_pipeline(fn, backend="reference", dump_name=None):
    """`fn` after `backend`'s named pass pipeline."""
    from .compiler import passes
    return passes.run_pipeline(fn, dump_name=dump_name or fn.name,
                               pipeline=passes.PIPELINES[BACKENDS[backend].pipeline])


def compile_function(ssa, backend="reference", donated=()):
    """`backend`'s executable for `ssa` (after the pipeline); its module is imported on first
    use (llvmlite loads only then)."""
    b = BACKENDS[backend]
    if b.donation:
        return b.load()(ssa, donated=donated)
    return b.load()(ssa)


def compile_ssa(fn, backend="reference", donated=(), fallback=None, name=None, finish=None):
    """(the SSA after `backend`'s pipeline, its executable). A function `backend` cannot lower
    (a BackendUnsupportedError) is compiled for `fallback` instead when one is given, logged
    under KILN_LOG_COMPILES. A `check` that no checkify discharged is JAX's ValueError for any
    backend but the reference one, whose executables raise when it fails (eager transforms). `finish(ssa) -> ssa` runs after the pipeline (pmap and shard_map
    tell the collectives the replicas' layout there)."""
    # compiled code cannot raise: a check must be discharged (the reference backends raise)
    if backend not in ("reference", "exact"):
        unchecked = undischarged(fn)
        if unchecked is not None:
            raise ValueError(located(FUNCTIONALIZATION, unchecked.info, CHECK_HINT))
    with profiler.span(f"backend compile {name or fn.name}", "compile", backend=backend):
        ssa = run_pipeline(fn, backend)
        if finish is not None:
            ssa = finish(ssa)
        try:
            return ssa, compile_function(ssa, backend, donated)
        except BackendUnsupportedError as e:
            if fallback is None or backend == fallback:
                raise
            if log_compiles():
                logger.warning("kiln: %s runs on the %s backend: %s", name or fn.name,
                               fallback, e.bare_message)
            return compile_ssa(fn, fallback, name=name, finish=finish)


# ------------------------------------------------------------------------------------ cache

_MISSING = object()


def unique_guards(guards):
    """One guard per (scope, name): `(scope, name, value)` triples of the globals read."""
    return list({(id(g[0]), g[1]): g for g in guards}.values())


class Entry:
    """A cached specialisation; valid while the globals it read (`guards`) are unchanged.
    Adapters subclass it with what they run."""
    __slots__ = ("guards",)

    def guards_ok(self):
        return self.changed_global() is None

    def changed_global(self):
        """The name of the first global read at specialisation that has changed, or None."""
        for scope, name, value in self.guards:
            if scope.get(name, _MISSING) is not value:
                return name
        return None


ALL_CACHES = weakref.WeakSet()   # every GuardedCache: what `kiln.clear_caches` empties
# The options a specialisation depends on beyond its arguments (the dtypes `jnp.zeros(3)` and
# Python numbers get): each GuardedCache keys its entries by their values too.
TRACE_OPTIONS = ("enable_x64",)
# Objects whose `_fast` is a dispatch fast path of one of their entries (jit's, pmap's): it is
# dropped when a trace option changes, so that the next call looks its entry up again.
FAST_PATHS = weakref.WeakSet()


class FastSlot:
    """A `_fast` slot for FAST_PATHS (pmap's)."""
    __slots__ = ("_fast", "__weakref__")

    def __init__(self):
        self._fast = None


def _trace_options():
    return tuple(config.read(name) for name in TRACE_OPTIONS)


def _drop_fast_paths(key, value):
    if key in TRACE_OPTIONS:
        for holder in list(FAST_PATHS):
            holder._fast = None


config.on_change(_drop_fast_paths)


class GuardedCache:
    """key -> Entry, for one function (see the module docstring), per value of the trace
    options (`TRACE_OPTIONS`); at most `limit` entries, the oldest made dropped first."""

    def __init__(self, limit=None):
        self._entries = {}
        self._lock = threading.RLock()
        self.limit = limit
        ALL_CACHES.add(self)

    def get(self, key):
        """The valid entry for `key`, or None."""
        try:
            entry = self._entries.get((key, _trace_options()))
        except TypeError:   # an unhashable static value: never cached
            return None
        return entry if entry is not None and entry.guards_ok() else None

    def lookup(self, key, make):
        """The valid entry for `key`; else `make(stale)` (`stale`: the entry whose guards
        failed, or None) makes it, under this cache's lock."""
        entry = self.get(key)
        if entry is not None:
            return entry
        try:
            hash(key)
        except TypeError:
            return make(None)
        full = (key, _trace_options())
        with self._lock:
            stale = self._entries.get(full)   # another thread may have made it meanwhile
            if stale is not None and stale.guards_ok():
                return stale
            entry = self._entries[full] = make(stale)
            if self.limit is not None and len(self._entries) > self.limit:
                self._entries.pop(next(iter(self._entries)))
        return entry

    def keys(self):
        """The keys of the entries (made under any value of the trace options)."""
        return [key for key, _ in self._entries]

    def values(self):
        return list(self._entries.values())

    def __len__(self):
        return len(self._entries)

    def clear(self):
        self._entries.clear()
