"""`kiln.jit`: specialise a Python function for its argument types, then run the compiled code.

A call flattens the arguments (pytrees), splits static from dynamic ones, and looks up a
specialisation keyed by (pytree structure, abstract value of every dynamic leaf, static values);
a specialisation also stays valid only while the globals it read still hold the values it saw
(`guards`), so changing a global re-specialises instead of returning a stale result. A miss
specialises the function into SSA (`kiln.compiler.frontend.specialise`), runs the pass
pipeline, and compiles it with the backend: `backend="llvm"` (alias "cpu", the default: native
code through LLVM, after the LLVM pipeline, which also fuses; see
`kiln.compiler.passes.PIPELINES`) or `backend="reference"` (the SSA run as Python over NumPy,
the oracle).

The default backend is "cpu" (LLVM); `KILN_BACKEND=reference` (or `llvm`) sets the backend of
every `jit` that names none (read when the `jit` is created; for testing one backend against the
whole suite). Without an explicit `backend=`, a function the LLVM backend cannot lower (a
`BackendUnsupportedError`) is compiled for the reference backend instead.
`KILN_LOG_COMPILES=1` logs every (re)specialisation with its reason; `KILN_DUMP_DIR=dir`
writes every stage; `kiln.disable_jit()` (or `KILN_DISABLE_JIT=1`) runs functions as plain
Python.

Threads: any number of threads may call jitted functions, for the first time or not. The
specialiser's state is per thread (builder.STATE, specialise._STATE), a function's
specialisations are made while holding its lock (threads calling it first at once compile it
once; different functions specialise side by side), and calling an existing specialisation
takes no lock.

Donation (`donate_argnums` / `donate_argnames`, JAX's): the LLVM backend may compute an output
of a donated argument's shape and dtype in that argument's buffer (updated in place). The
argument must not be used afterwards: a donated kiln Array whose buffer was taken over is
deleted after the call (using it raises, as in JAX). Only a buffer nothing else uses is taken
over (reference counts: no other Array, NumPy view or reference); otherwise, and for NumPy
arrays and Python numbers, the code works on a copy. A donation no output can use warns
("Some donated buffers were not usable") and leaves the argument alone.
"""
import contextlib
import functools
import inspect
import logging
import os
import sys
import warnings
import threading

import numpy as np

from .array import Array, to_array
from .tree_util import tree_flatten, tree_unflatten, tree_map
from .compiler.ir.abstract import ShapedArray
from . import fastcall
from . import tracer as _tracer  # noqa: F401  (installs the Tracer type in the builder)
from . import _host  # noqa: F401  (fills the specialiser's host interface)
from ._traceback import filter_traceback, show_full
from .compiler.ir.builder import current, PerThread
from .compiler.errors import BackendUnsupportedError

logger = logging.getLogger("kiln")

_DISABLED_BY_ENV = os.environ.get("KILN_DISABLE_JIT", "").lower() in ("1", "true", "yes")

_DISABLED = PerThread(on=lambda: _DISABLED_BY_ENV)   # `on`: in this thread (`disable_jit`)


@contextlib.contextmanager
def disable_jit(disable=True):
    """Run jitted functions as plain Python inside this block (for debugging; in this thread
    only, as JAX's configuration contexts)."""
    old, _DISABLED.on = _DISABLED.on, bool(disable)
    try:
        yield
    finally:
        _DISABLED.on = old


def _log_compiles():
    return os.environ.get("KILN_LOG_COMPILES", "").lower() in ("1", "true", "yes")


# ------------------------------------------------------------------------------ argument keys

def _leaf_aval(x, where):
    t = type(x)
    if t is Array:
        v = x._value
        return ShapedArray(v.shape, v.dtype, x.weak_type), v
    if t in (int, float, complex, bool):
        a = to_array(x, where)
        return ShapedArray((), a.dtype, a.weak_type), a._value
    if isinstance(x, (np.ndarray, np.generic)):
        a = to_array(x, where)
        return ShapedArray(a.shape, a.dtype, False), a._value
    if getattr(t, "_kiln_trace", None) is not None:
        return x.aval, x
    raise TypeError(f"{where} of type {t} is not a valid kiln type: pass arrays, scalars or "
                    f"pytrees of them, or mark the argument static with static_argnums / "
                    f"static_argnames.")


def _normalize_static(fun, static_argnums, static_argnames, what="static"):
    """(argument positions, names, the positional parameters' names) of `what` ("static" or
    "donate") arguments, each implied by the other as in JAX."""
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums or ())
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames or ())
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = None
    positional = [p.name for p in params or () if p.kind in (p.POSITIONAL_ONLY,
                                                             p.POSITIONAL_OR_KEYWORD)]
    if params is not None:
        _validate_static(params, positional, nums, names, what)
    # As in JAX: static_argnums imply the matching names and vice versa.
    names = set(names) | {positional[n] for n in nums if -len(positional) <= n < len(positional)}
    nums = set(nums) | {positional.index(n) for n in names if n in positional}
    return nums, frozenset(names), positional


def _validate_static(params, positional, nums, names, what):
    """JAX's checks, at `jit` time: static (or donated) arguments the function cannot take."""
    kinds = {p.kind for p in params}
    n = len(positional)
    if inspect.Parameter.VAR_POSITIONAL not in kinds and any(not -n <= i < n for i in nums):
        raise ValueError(f"Jitted function has {what}_argnums={nums}, but only accepts {n} "
                         f"positional arguments.")
    keywords = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    invalid = set(names) - keywords
    if inspect.Parameter.VAR_KEYWORD not in kinds and invalid:
        raise ValueError(f"Jitted function has invalid argnames {invalid} in {what}_argnames. "
                         f"Function does not take these args.")


def wrap_outputs(values, weak_types):
    """An executable's NumPy results as kiln Arrays (the dispatch fast path: no checks)."""
    wrapped = []
    for o, weak in zip(values, weak_types):
        a = object.__new__(Array)
        a._value = o
        a.weak_type = weak
        wrapped.append(a)
    return wrapped


class _Entry:
    __slots__ = ("function", "ssa", "executable", "out_tree", "out_weak", "consts", "guards",
                 "in_avals", "held")   # held: donated inputs whose buffers become outputs

    def guards_ok(self):
        return self.changed_global() is None

    def changed_global(self):
        """The name of the first global read at specialisation that has changed, or None."""
        for scope, name, value in self.guards:
            if scope.get(name, _MISSING) is not value:
                return name
        return None


_MISSING = object()

# `jit(backend=...)` names -> the backend (and pipeline) that compiles.
_BACKENDS = {"reference": "reference", "llvm": "llvm", "cpu": "llvm"}


def _backend_compiler(backend):
    """The backend's `compile_function`, imported on first use (llvmlite loads only then)."""
    if backend == "llvm":
        from .compiler.backends.llvm import compile_function
    else:
        from .compiler.backends.reference import compile_function
    return compile_function


class Jitted:
    """A jit-compiled function (what `kiln.jit(f)` returns)."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=(),
                 donate_argnames=(), backend=None, inline=False, keep_unused=False):
        if not callable(fun):
            raise TypeError(f"Expected a callable value, got {fun!r}")
        self._fun = fun
        functools.update_wrapper(self, fun, updated=())
        if not hasattr(self, "__name__"):  # functools.partial and other unnamed callables
            self.__name__ = getattr(getattr(fun, "func", fun), "__name__", type(fun).__name__)
        self._static_nums, self._static_names, self._positional = _normalize_static(
            fun, static_argnums, static_argnames)
        self.donate_argnums = tuple(donate_argnums) if not isinstance(donate_argnums, int) \
            else (donate_argnums,)
        self.donate_argnames = tuple(donate_argnames) if not isinstance(donate_argnames, str) \
            else (donate_argnames,)
        self._donate_nums, self._donate_names, _ = _normalize_static(
            fun, self.donate_argnums, self.donate_argnames, "donate")
        self._explicit_backend = backend is not None
        self._backend = _BACKENDS.get(backend or os.environ.get("KILN_BACKEND") or "cpu")
        if self._backend is None:
            raise ValueError(f"kiln.jit: unknown backend "
                             f"{backend or os.environ.get('KILN_BACKEND')!r}; available: "
                             + ", ".join(map(repr, _BACKENDS)))
        self._cache = {}
        self._lock = threading.RLock()   # held while specialising (see `_entry`)
        self._fast = None   # fastcall.FastCall of the latest all-array call, or None
        self.miss_reasons = []

    # ----------------------------------------------------------------------- calling
    def __call__(self, *args, **kwargs):
        try:
            return self._call(args, kwargs)
        except Exception as e:
            if show_full() or current() is not None:
                raise
            raise e.with_traceback(filter_traceback(e.__traceback__)) from None

    def _call(self, args, kwargs):
        if _DISABLED.on:
            return self._fun(*args, **kwargs)
        if current() is not None:  # jit inside a function being compiled: inline it
            from .compiler.frontend.specialise import call_function
            return call_function(self._fun, args, kwargs)
        fast = self._fast
        if fast is not None and not kwargs:
            out = fast(args)
            if out is not fastcall.MISS:
                return out
        key, dyn_values, _ = self._signature(args, kwargs)
        entry = self._entry(key, args, kwargs)
        if entry.held:
            return _run_donating(entry, self._leaves(args, kwargs), dyn_values)
        if fastcall.eligible(args, kwargs, self._static_nums, self._static_names,
                             entry.executable):
            self._fast = fastcall.FastCall(entry, args, wrap_outputs)
        return self._run(entry, dyn_values)

    def _split(self, args, kwargs):
        nargs = len(args)
        statics, dyn_args = [], []
        for i, a in enumerate(args):
            if i in self._static_nums or (i - nargs) in self._static_nums:
                statics.append(("#", i, a))
            else:
                dyn_args.append(a)
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self._static_names:
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
                    f"{self.__name__} is static but has unhashable type "
                    f"{type(v).__name__} ({v!r}). Pass a tuple instead of a list, or make the "
                    f"argument dynamic.") from None
        return tuple(statics), dyn_args, dyn_kwargs

    def _signature(self, args, kwargs):
        statics, dyn_args, dyn_kwargs = self._split(args, kwargs)
        leaves, treedef = tree_flatten((tuple(dyn_args), dyn_kwargs))
        avals, values = [], []
        for i, leaf in enumerate(leaves):
            aval, value = _leaf_aval(leaf, f"argument {i} of {self.__name__}")
            avals.append(aval)
            values.append(value)
        return (treedef, tuple(avals), statics), values, (dyn_args, dyn_kwargs, statics)

    def _entry(self, key, args, kwargs):
        """The specialisation for `key`, made now when it is missing or stale. Making one holds
        this function's lock, so threads calling it for the first time at once specialise
        and compile it once; finding one takes no lock."""
        entry = self._cache.get(key)
        if entry is not None and entry.guards_ok():
            return entry
        with self._lock:
            entry = self._cache.get(key)   # another thread may have made it meanwhile
            if entry is None or not entry.guards_ok():
                entry = self._specialise(key, args, kwargs, reason_entry=entry)
        return entry

    def _run(self, entry, dyn_values):
        outs = entry.executable(*dyn_values, *entry.consts)
        return tree_unflatten(entry.out_tree, wrap_outputs(outs, entry.out_weak))

    def _leaves(self, args, kwargs):
        _, dyn_args, dyn_kwargs = self._split(args, kwargs)
        return tree_flatten((tuple(dyn_args), dyn_kwargs))[0]

    def _donated_leaves(self, args, kwargs):
        """The flat indices of the dynamic leaves that `donate_argnums` / `donate_argnames`
        donate."""
        nums, names = self._donate_nums, self._donate_names
        if not (nums or names):
            return ()
        nargs = len(args)
        mask = [tree_map(lambda _: i in nums or (i - nargs) in nums, a)
                for i, a in enumerate(args)]
        masked = {k: tree_map(lambda _: k in names, v) for k, v in kwargs.items()}
        leaves = self._leaves(mask, masked)
        return tuple(i for i, donated in enumerate(leaves) if donated)

    # ------------------------------------------------------------------ specialising
    def _miss_reason(self, key, previous):
        if previous is not None:
            return f"global {previous.changed_global()!r} changed since it was compiled"
        if not self._cache:
            return "first call"
        treedef, avals, statics = key
        best = None
        for (t2, a2, s2) in self._cache:  # the reason against the closest specialisation
            if t2 != treedef:
                continue
            pairs = [(i, x, y) for i, (x, y) in enumerate(zip(a2, avals)) if x != y]
            diffs = [f"argument {i}: {_show(x, y)} -> {_show(y, x)}" for i, x, y in pairs]
            if s2 != statics:
                diffs += [f"static argument {w}: {v2!r} -> {v!r}"
                          for (_, w, v2), (_, _, v) in zip(s2, statics) if v2 != v]
            # A difference in weak type only is the smallest one.
            cost = len(diffs) - sum(0.5 for _, x, y in pairs if x.str_short() == y.str_short())
            if best is None or cost < best[0]:
                best = (cost, diffs)
        if best is None:
            t2 = next(iter(self._cache))[0]
            return f"argument structure changed: {t2} -> {treedef}"
        return "; ".join(best[1]) or "new specialisation"

    def _trace(self, args, kwargs):
        """Specialise into SSA: (Function before passes, out_tree, consts, guards)."""
        from .compiler.ir.builder import Builder
        from .compiler.frontend import specialise
        statics, dyn_args, dyn_kwargs = self._split(args, kwargs)
        leaves, treedef = tree_flatten((tuple(dyn_args), dyn_kwargs))
        hints = _arg_hints(self._positional, dyn_args, dyn_kwargs, statics)
        b = Builder(getattr(self._fun, "__name__", "fn").replace("<lambda>", "lambda"))
        with b:
            tracers = [b.new_input(_leaf_aval(x, f"argument {i}")[0], h)
                       for i, (x, h) in enumerate(zip(leaves, hints))]
            targs, tkwargs = tree_unflatten(treedef, tracers)
            full_args = _merge_statics(list(targs), statics)
            static_kw = {w: v for kind, w, v in statics if kind == "="}
            out, guards = specialise.specialise_call(self._fun, full_args,
                                                     {**tkwargs, **static_kw})
            out_leaves, out_tree = tree_flatten(out)
            _check_outputs(self.__name__, out)
            fn = b.build(out_leaves)
        consts = [value for _, value, _ in b.consts]
        return fn, out_tree, consts, guards

    def _specialise(self, key, args, kwargs, reason_entry=None):
        reason = self._miss_reason(key, reason_entry)
        self.miss_reasons.append(reason)
        if _log_compiles():
            logger.warning("kiln: compiling %s (%s)", self.__name__, reason)
        fn, out_tree, consts, guards = self._trace(args, kwargs)
        donated = self._donated_leaves(args, kwargs)
        ssa, executable = self._compile(fn, donated=donated)
        entry = _Entry()
        entry.function = fn
        entry.ssa = ssa
        entry.executable = executable
        entry.out_tree = out_tree
        entry.out_weak = [v.aval.weak_type for v in ssa.outvars]
        entry.consts = consts
        entry.guards = list({(id(g[0]), g[1]): g for g in guards}.values())  # one per name
        entry.in_avals = key[1]
        entry.held = sorted(set(getattr(executable, "held", {}).values()))
        _warn_unusable(donated, entry)
        self._cache[key] = entry
        return entry

    def _compile(self, fn, backend=None, donated=()):
        """(the SSA after the backend's pipeline, its executable; the LLVM backend may
        overwrite the `donated` inputs). Without an explicit `backend=`, a function the LLVM
        backend cannot lower (a BackendUnsupportedError) runs on the reference backend
        instead, logged under KILN_LOG_COMPILES."""
        from .compiler import passes
        backend = backend or self._backend
        ssa = passes.run_pipeline(fn, dump_name=fn.name, pipeline=passes.PIPELINES[backend])
        try:
            if backend == "llvm":
                return ssa, _backend_compiler(backend)(ssa, donated=donated)
            return ssa, _backend_compiler(backend)(ssa)
        except BackendUnsupportedError as e:
            if self._explicit_backend or backend == "reference":
                raise
            if _log_compiles():
                logger.warning("kiln: %s runs on the reference backend: %s", self.__name__,
                               e.bare_message)
            return self._compile(fn, "reference")

    # ------------------------------------------------------------------- inspection
    def lower(self, *args, **kwargs):
        key, _, _ = self._signature(args, kwargs)
        return Lowered(self._entry(key, args, kwargs))

    def _cache_size(self):
        return len(self._cache)

    def clear_cache(self):
        self._cache.clear()
        self._fast = None

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self):
        return f"<kiln.jit of {getattr(self._fun, '__qualname__', self._fun)!r}>"


def _check_outputs(name, out):
    """Every output leaf must be an array or a number (JAX's check, with kiln's words)."""
    from .tree_util import tree_flatten_with_path, keystr
    for path, leaf in tree_flatten_with_path(out)[0]:
        ok = isinstance(leaf, (Array, bool, int, float, complex, np.ndarray, np.generic)) or \
            getattr(type(leaf), "_kiln_trace", None) is not None
        if not ok or getattr(getattr(leaf, "dtype", None), "kind", "b") not in "biufc":
            raise TypeError(f"function {name} compiled by kiln.jit returned a value of type "
                            f"{type(leaf)} at output component {keystr(path) or '(the output)'}"
                            f", which is not a valid kiln type: return arrays, numbers, or "
                            f"pytrees of them")


def _run_donating(entry, leaves, values):
    """A call whose compiled code overwrites donated inputs (`entry.held`) and returns their
    buffers as outputs: an Array's own buffer when nothing else uses it (`_sole_buffer`), else
    a copy; the donated Arrays are deleted afterwards, as in JAX."""
    donors = []
    for i in entry.held:
        leaf, value = leaves[i], values[i]
        values[i] = None   # references count in `_sole_buffer`: this frame must hold none
        if type(leaf) is Array:
            del value
            donors.append(leaf)
            values[i] = leaf._value if _sole_buffer(leaf) else np.array(leaf._value, order="C")
        else:
            values[i] = np.array(value, order="C")
    out = Jitted._run(None, entry, values)
    for a in donors:
        a.delete()
    return out


def _sole_buffer(array):
    """Whether nothing but `array` uses its NumPy buffer (no other Array, NumPy view or
    reference to it: CPython's reference counts), so that compiled code may overwrite it.
    A buffer of the memory pool (memory.py) is a view of a token array over the pool's
    block: the token must have no other view either."""
    v = array._value
    if type(v) is not np.ndarray or not v.flags.writeable or sys.getrefcount(v) > _SOLE:
        return False
    base = v.base
    if base is None:
        return True
    return type(base) is np.ndarray and not isinstance(base.base, (np.ndarray, type(None))) \
        and sys.getrefcount(base) <= _SOLE


_SOLE = 3   # references to a buffer nothing else uses: its holder, a local, getrefcount's


def _warn_unusable(donated, entry):
    """JAX's warning for donated inputs no output could take over."""
    unused = [i for i in donated if i not in entry.held]
    if unused and hasattr(entry.executable, "held"):
        avals = ", ".join(entry.in_avals[i].str_short() for i in unused)
        warnings.warn(f"Some donated buffers were not usable: {avals} (no output of the same "
                      f"shape and dtype could be computed in their place).", stacklevel=6)


def _show(aval, other):
    """`f32[3]`, with `{weak}` where the weak type is what differs from `other`."""
    return str(aval) if aval.weak_type != other.weak_type else aval.str_short()


def _merge_statics(dyn_args, statics):
    out = list(dyn_args)
    for kind, where, v in sorted((s for s in statics if s[0] == "#"),
                                 key=lambda s: s[1]):
        out.insert(where, v)
    return out


def _arg_hints(positional, dyn_args, dyn_kwargs, statics):
    """SSA names for the inputs: the parameter name, plus the key path inside a pytree
    (`params_0_1` for params[0][1], `opt_W` for opt['W'])."""
    from .tree_util import tree_flatten_with_path
    static_pos = {w for k, w, _ in statics if k == "#"}
    names = [n for i, n in enumerate(positional) if i not in static_pos]
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


class Lowered:
    """`jit(f).lower(*args)`: the SSA form after the passes."""

    def __init__(self, entry):
        self._entry = entry

    def as_text(self):
        return str(self._entry.ssa)

    def compile(self):
        return Compiled(self._entry)


class Compiled:
    """The backend's executable; `as_text()` is what the backend runs."""

    def __init__(self, entry):
        self._entry = entry

    def as_text(self, level=None):
        """What the backend runs: for the LLVM backend the optimised IR, or `level`
        "llvm-unoptimized" or "asm"; for the reference backend the SSA it executes."""
        ex = self._entry.executable
        return ex.as_text() if level is None else ex.as_text(level)

    def __call__(self, *args, **kwargs):
        """Run on the dynamic arguments (pytrees as at `lower`, static ones left out)."""
        leaves, _ = tree_flatten((tuple(args), kwargs))
        pairs = [_leaf_aval(x, f"argument {i}") for i, x in enumerate(leaves)]
        avals = tuple(a for a, _ in pairs)
        if avals != tuple(self._entry.in_avals):
            show = lambda t: "(" + ", ".join(a.str_short() for a in t) + ")"  # noqa: E731
            raise TypeError(f"this executable was compiled for arguments of types "
                            f"{show(self._entry.in_avals)} but is called with {show(avals)}; "
                            f"call the jitted function instead to compile for new types")
        values = [v for _, v in pairs]
        if self._entry.held:   # `pairs` holds the buffers too: donated ones are copied
            return _run_donating(self._entry, leaves, values)
        return Jitted._run(None, self._entry, values)


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        donate_argnames=(), backend=None, inline=False, keep_unused=False, **unused):
    """`kiln.jit`: JAX's signature; usable as `@jit`, `@jit(...)` and `partial(jit, ...)`."""
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, donate_argnums=donate_argnums,
                                 donate_argnames=donate_argnames, backend=backend)
    if isinstance(fun, Jitted) and not (static_argnums or static_argnames or donate_argnums
                                        or donate_argnames):
        return fun
    return Jitted(fun, static_argnums, static_argnames, donate_argnums, donate_argnames,
                  backend, inline, keep_unused)


def make_ir(fun, static_argnums=(), static_argnames=()):
    """`make_ir(f)(*args)`: the SSA form of `f` specialised for `args` (before the passes).
    For a transformed function (`kiln.grad(f)`, `kiln.jvp`-based ones ...) it is the
    generated derivative code."""
    target = fun._fun if isinstance(fun, Jitted) else fun
    transformed = getattr(target, "_kiln_make_ir", None)
    if transformed is not None and not (static_argnums or static_argnames):
        return transformed

    def make(*args, **kwargs):
        j = Jitted(target, static_argnums, static_argnames)
        fn, _, _, _ = j._trace(args, kwargs)
        return fn
    return make
