"""`kiln.jit`: specialise a Python function for its argument types, then run the compiled code.

`jit` is an adapter over the staging service (`kiln.staging`): a call flattens the arguments
(pytrees), splits static from dynamic ones (`staging.StaticArgs`), and looks up a
specialisation in the function's `staging.GuardedCache`, keyed by (pytree structure, abstract
value of every dynamic leaf, static values); a specialisation also stays valid only while the
globals it read still hold the values it saw (`guards`), so changing a global re-specialises
instead of returning a stale result. `jit` objects of one Python function with the same options (static and donated
arguments, backend) share that cache, as JAX's jit caches by function, so `jit(f)(x)` written
inline specialises `f` once per type; a partial or a callable object has a cache of its own.
A miss stages the function into SSA
(`staging.stage_call`) and compiles it for the backend (`staging.compile_ssa`, which runs the
backend's pass pipeline): `backend="llvm"` (alias "cpu", the default: native code through
LLVM, after the LLVM pipeline, which also fuses; see `kiln.compiler.passes.PIPELINES`) or
`backend="reference"` (the SSA run as Python over NumPy, the oracle) or `backend="exact"` (the
reference backend without passes: the eager operations' bits, what eager composites run as,
eager_tiers.py); `staging.BACKENDS` is the
table of backends. Here live what only `jit` has: the dispatch fast path (`fastcall`),
donation, miss reasons, `lower`/`compile`.

The default backend is "cpu" (LLVM); `KILN_BACKEND=reference` (or `llvm`) sets the backend of
every `jit` that names none (read when the `jit` is created; for testing one backend against the
whole suite). Without an explicit `backend=`, a function the LLVM backend cannot lower (a
`BackendUnsupportedError`) is compiled for the reference backend instead.
`backend="pjrt"` lowers the SSA (after the reference pipeline) to StableHLO and runs it
through a PJRT plug-in (runtime/pjrt.py, docs/pjrt.md), its results left on the device.
Without an explicit `backend=`, a call with an argument on a GPU (an Array holding a device
buffer: `device_put` onto a GPU device, a GPU result) runs with backend="cuda", as JAX's
computations follow their data, and one with an argument on a PJRT device with
backend="pjrt" (the layer's `backend`); every call while the default device in force is a GPU
runs with backend="cuda", and one while it is a PJRT device with backend="pjrt" on that device
(kiln.default_device). `KILN_LOG_COMPILES=1` logs every (re)specialisation with its
reason; `KILN_DUMP_DIR=dir` writes every stage; `kiln.disable_jit()` (or the
`disable_jit` option: `KILN_DISABLE_JIT=1`, `config.update("jax_disable_jit", True)`) runs
functions as plain Python.

Threads: any number of threads may call jitted functions, for the first time or not. The
specialiser's state is per thread (builder.STATE, specialise._STATE), a function's
specialisations are made while holding its cache's lock (threads calling it first at once
compile it once; different functions specialise side by side), and calling an existing
specialisation takes no lock.

Donation (`donate_argnums` / `donate_argnames`, JAX's): the LLVM backend may compute an output
of a donated argument's shape and dtype in that argument's buffer (updated in place). The
argument must not be used afterwards: a donated kiln Array whose buffer was taken over is
deleted after the call (using it raises, as in JAX). Only a buffer nothing else uses is taken
over (reference counts: no other Array, NumPy view or reference); otherwise, and for NumPy
arrays and Python numbers, the code works on a copy. A donation no output can use warns
("Some donated buffers were not usable") and leaves the argument alone. On PJRT devices
(backend="pjrt", pjrt.py) the device buffer itself is donated, PJRT aliasing it to the output.
"""
import contextlib
import functools
import os
import sys
import threading
import types
import warnings
import weakref

import numpy as np

from . import monitoring
from .array import Array, placed_on, placed_sharding, TYPED
from .sharding_propagation import committed_placements, constraints_of
from .sharding_types import placements, typed_outputs
from .compiler.backends.cuda.device import DeviceBuffer, Layer as CudaLayer
from .tree_util import tree_flatten, tree_unflatten, tree_map, tree_leaves
from . import fastcall, staging, profiler, _default_device as default_device
from .float_checks import STATE as _FLOAT_CHECKS, check as _check_floats
from .execution_guards import STATE as _GUARDS, check_execution
from .staging import leaf_aval, wrap_outputs
from ._traceback import filter_traceback, show_full
from .compiler.ir.builder import current, STATE as _BUILDERS, ACTIVE as _BUILDING
from .compiler.config import config
from .distributed import process_layout
from .global_jit import sharded_call
from .global_arrays import SpansProcesses
from .pjrt_spread import LAYER as SPREAD_LAYER
from .layouts import formats_as_shardings


class _JitSwitch(threading.local):
    """`on`: whether jitted functions run as plain Python in this thread: the innermost
    `disable_jit` block's choice in this thread, else the `disable_jit` option (JAX's
    `jax_disable_jit`, or `KILN_DISABLE_JIT=1` / `JAX_DISABLE_JIT=1`), which holds in every
    thread."""

    def __init__(self):
        self.block = None   # this thread's innermost disable_jit block: True/False, or None

    @property
    def on(self):
        block = self.block
        return _OPTION_ON[0] if block is None else block


_MISS = fastcall.MISS
_OPTION_ON = [config.read("disable_jit")]
_DISABLED = _JitSwitch()
# disable_jit blocks open in any thread, plus 1 while the disable_jit option is on: while it is
# not 0, a native call goes through Python, which reads this thread's `on` (native_call_checks).
_DISABLING = [int(_OPTION_ON[0])]
_DISABLING_LOCK = threading.Lock()


def _option_changed(key, value):
    if key == "disable_jit" and bool(value) != _OPTION_ON[0]:
        with _DISABLING_LOCK:
            _OPTION_ON[0] = bool(value)
            _DISABLING[0] += 1 if value else -1


config.on_change(_option_changed)


_TRACING = profiler.TRACING   # 1 while a kiln.profiler trace records calls


def trace_calls(on):
    """A kiln.profiler trace starts (`on`) or stops recording calls: while it does, native
    calls go through `Jitted.__call__` (the disable_jit counter they read) and no fast path is
    kept (the fast paths made are dropped; `_call` installs none), so that every call takes the
    ordinary path, which records it."""
    with _DISABLING_LOCK:
        _DISABLING[0] += 1 if on else -1
    if on:
        for holder in list(staging.FAST_PATHS):
            holder._fast = None


@contextlib.contextmanager
def disable_jit(disable=True):
    """Run jitted functions as plain Python inside this block (for debugging; in this thread
    only, as JAX's configuration contexts); `disable_jit(False)` runs them compiled inside the
    block even while the `disable_jit` option is on."""
    old, _DISABLED.block = _DISABLED.block, bool(disable)
    with _DISABLING_LOCK:
        _DISABLING[0] += 1
    try:
        yield
    finally:
        _DISABLED.block = old
        with _DISABLING_LOCK:
            _DISABLING[0] -= 1


class _Entry(staging.Entry):
    __slots__ = ("function", "ssa", "executable", "in_tree", "out_tree", "out_weak", "consts",
                 "closed",   # the arrays it closes over (consts, before a backend holds them)
                 "in_avals", "held", "writes", "refs",   # held: donated inputs whose buffers become outputs
                 "out_typed",   # its outputs' types when one has a sharding, else None
                 "constraints",   # sharding_propagation.constraints_of its function
                 "auto_placed")   # {arguments' shardings: sharding_propagation.committed_placements}


# Jitted objects of one Python function with the same options share their specialisations,
# as JAX's jit caches by function: `jit(f)(x)` written inline specialises `f` once.
_SHARED = weakref.WeakKeyDictionary()   # function -> {options: GuardedCache}
_SHARED_LOCK = threading.Lock()


def _hashable(names):
    return tuple(names) if isinstance(names, (list, tuple)) else names


def _shared_cache(fun, options):
    """The specialisation cache of `fun` under `options`, made on first use; a cache of its
    own for what cannot be shared (a partial or callable object, unhashable options)."""
    if type(fun) is not types.FunctionType or options is None:
        return staging.GuardedCache()
    try:
        hash(options)
    except TypeError:
        return staging.GuardedCache()
    with _SHARED_LOCK:
        per_function = _SHARED.setdefault(fun, {})
        cache = per_function.get(options)
        if cache is None:
            cache = per_function[options] = staging.GuardedCache()
        return cache


class Jitted:
    """A jit-compiled function (what `kiln.jit(f)` returns)."""

    # The primitive's name for the jit runtime/pjrt_eager.py runs one eager operation with,
    # which a float check names instead of re-running it op by op.
    _one_operation = None

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=(),
                 donate_argnames=(), backend=None, inline=False, keep_unused=False,
                 in_shardings=None, out_shardings=None):
        if not callable(fun):
            raise TypeError(f"Expected a callable value, got {fun!r}")
        self._fun = fun
        functools.update_wrapper(self, fun, updated=())
        if not hasattr(self, "__name__"):  # functools.partial and other unnamed callables
            self.__name__ = getattr(getattr(fun, "func", fun), "__name__", type(fun).__name__)
        self._static = staging.StaticArgs(fun, static_argnums, static_argnames)
        self.donate_argnums = tuple(donate_argnums) if not isinstance(donate_argnums, int) \
            else (donate_argnums,)
        self.donate_argnames = tuple(donate_argnames) if not isinstance(donate_argnames, str) \
            else (donate_argnames,)
        self._donate = staging.StaticArgs(fun, self.donate_argnums, self.donate_argnames,
                                          "donate")
        self._backend = staging.backend_name(backend or os.environ.get("KILN_BACKEND") or "cpu")
        # Without an explicit backend, what the chosen one cannot lower runs on the reference.
        self._fallback = None if backend is not None else "reference"
        self._cache = _shared_cache(fun, None if self._shardings_given(in_shardings,
                                                                        out_shardings) else (
            _hashable(static_argnums), _hashable(static_argnames), self.donate_argnums,
            self.donate_argnames, self._backend, self._fallback))
        self._fast = None   # fastcall.install of the latest all-array call, or None
        self.miss_reasons = []
        self._placed = {}   # backend -> the Jitted that arguments on its devices call
        self._shardings = None if in_shardings is None and out_shardings is None else \
            (in_shardings, out_shardings)

    # Caches made on first use (a jit object is cheap to make: `jit(f)(x)` inline is common).
    @functools.cached_property
    def _spanning(self):
        """Specialisations for global arrays over several processes (global_jit.py)."""
        return staging.GuardedCache()

    @functools.cached_property
    def _partitioned(self):
        """Specialisations for arguments spread over several PJRT devices (pjrt_partitioned)."""
        return staging.GuardedCache()

    @functools.cached_property
    def _on_mesh(self):
        """{call key: the Mesh of PJRT devices a shard_map in the function runs over}: those
        calls run partitioned over it (pjrt_partitioned.py), as in JAX."""
        return {}

    def _entry_or_mesh(self, key, args, kwargs):
        """(the entry of the call `key`, None), or (None, the Mesh of PJRT devices a shard_map
        in the function runs over) where the call runs on that mesh: no backend named, or
        "pjrt" (as in JAX; `_on_mesh`)."""
        from .shard_map import OnPjrtMesh, finding_pjrt_meshes
        mesh = self._on_mesh.get(key)
        if mesh is not None:
            return None, mesh
        if self._fallback is None and self._backend != "pjrt":
            return self._entry(key, args, kwargs), None
        try:
            with finding_pjrt_meshes():
                return self._entry(key, args, kwargs), None
        except OnPjrtMesh as found:
            self._on_mesh[key] = found.mesh
            return None, found.mesh

    @staticmethod
    def _shardings_given(in_shardings, out_shardings):
        return in_shardings is not None or out_shardings is not None

    # ----------------------------------------------------------------------- calling
    def __call__(self, *args, **kwargs):
        try:
            fast = self._fast
            # The fast path first, where nothing else may take the call (what _call and the
            # float checks look at, read once each).
            if fast is not None and not kwargs and self._shardings is None and not (
                    _DISABLED.on or _BUILDERS.stack or _GUARDS.no_execution or _FLOAT_CHECKS.on
                    or self._fallback is not None and default_device.IN_FORCE[0]):
                out = fast(args)
                if out is not _MISS:
                    return out
            if self._shardings is not None:
                return _sharded_call(self, args, kwargs)
            out = self._call(args, kwargs) if not _TRACING[0] else \
                profiler.traced_call(self, args, kwargs)   # (a kiln.profiler trace is active)
            if _FLOAT_CHECKS.on and current() is None and not _DISABLED.on:
                try:
                    _check_floats([x._value for x in tree_leaves(out) if type(x) is Array],
                                  f"jit({self.__name__})")
                except FloatingPointError as e:
                    if self._one_operation is not None:   # pjrt_eager's: nothing to re-run
                        raise FloatingPointError(str(e).replace(
                            f"jit({self.__name__})", self._one_operation)) from None
                    self._rerun_op_by_op(e, args, kwargs)
            return out
        except Exception as e:
            if show_full() or current() is not None:
                raise
            raise e.with_traceback(filter_traceback(e.__traceback__)) from None

    def _rerun_op_by_op(self, error, args, kwargs):
        """A result had a NaN (an infinity) under debug_nans (debug_infs): run the function
        again as plain Python, as JAX does, so that the eager operation that makes it raises,
        naming itself, with the user's line in the traceback; else say why none did."""
        print("Invalid nan value encountered in the output of a jax.jit function. "
              "Calling the de-optimized version.")
        try:
            with disable_jit():
                self._fun(*args, **kwargs)
        except (FloatingPointError, ZeroDivisionError) as found:
            raise found from None
        raise FloatingPointError(
            f"{error}. Because debug_nans and/or debug_infs is on, the function was run again "
            f"operation by operation, as if `jit` were removed, to name the operation that "
            f"makes the invalid value; none did. The compiled code's rewrites can make it (run "
            f"without `jit` to avoid it), or the function returns a NaN or infinity it was "
            f"given or wrote as a constant, as `jit(lambda x: jnp.nan)`.") from None

    def _call(self, args, kwargs):
        if _DISABLED.on:
            return self._fun(*args, **kwargs)
        if current() is not None:  # jit inside a function being compiled: inline it
            from .compiler.frontend.specialise import call_function
            return call_function(self._fun, args, kwargs)
        if _GUARDS.no_execution:
            check_execution(f"jit({self.__name__})")
        if self._fallback is not None and default_device.IN_FORCE[0]:
            placed = default_device.jit_backend()
            if placed is not None:
                return self._on(placed)._call(args, kwargs)
        fast = self._fast
        if fast is not None and not kwargs:
            out = fast(args)
            if out is not fastcall.MISS:
                return out
        try:
            key, dyn_values, leaves = self._signature(args, kwargs)
        except SpansProcesses:   # a global array: one program over the processes
            return sharded_call(self, args, kwargs)
        if _spread(dyn_values):   # arguments spread over several PJRT devices
            from .pjrt_partitioned import partitioned_call
            return partitioned_call(self, args, kwargs)
        if self._fallback is not None:
            placed = _placed_backend(dyn_values)
            if placed is not None:
                return self._on(placed)._call(args, kwargs)
        entry, mesh = self._entry_or_mesh(key, args, kwargs)
        if mesh is not None:   # a shard_map over PJRT devices: run on its mesh
            from .pjrt_partitioned import partitioned_call
            return partitioned_call(self, args, kwargs, mesh)
        if entry.held:
            return _run_donating(entry, leaves, dyn_values)
        if not entry.writes and entry.refs is None and not _TRACING[0]:
            self._fast = fastcall.install(entry, args, kwargs, self._static, wrap_outputs) \
                or self._fast
            staging.FAST_PATHS.add(self)
        return self._run(entry, dyn_values, leaves)

    def _on(self, backend):
        """This function with `backend` ("cuda", "pjrt"): calls with an argument on one of its
        devices run there."""
        placed = self._placed.get(backend)
        if placed is None:
            placed = self._placed[backend] = Jitted(
                self._fun, tuple(self._static.nums), tuple(self._static.names),
                self.donate_argnums, self.donate_argnames, backend=backend)
        return placed

    def _split(self, args, kwargs):
        return self._static.split(args, kwargs, self.__name__)

    def _signature(self, args, kwargs):
        statics, dyn_args, dyn_kwargs = self._split(args, kwargs)
        leaves, treedef = tree_flatten((tuple(dyn_args), dyn_kwargs))
        avals, values = [], []
        for i, leaf in enumerate(leaves):
            aval, value = leaf_aval(leaf, f"argument {i} of {self.__name__}", dense=True,
                                    refs=True)
            avals.append(aval)
            values.append(value)
        return (treedef, tuple(avals), statics), values, leaves

    def _entry(self, key, args, kwargs):
        """The specialisation for `key`, made now when it is missing or stale (under this
        function's lock: threads calling it for the first time at once specialise and compile
        it once; finding one takes no lock)."""
        return self._cache.lookup(key, lambda stale: self._specialise(key, args, kwargs, stale))

    def _run(self, entry, dyn_values, leaves):
        typed = getattr(entry, "out_typed", None)   # placed over the meshes of this call's
        where = None if typed is None else placements(typed, leaves)   # arguments
        if TYPED and any(id(x) in TYPED for x in leaves):   # (placed arguments: checked
            where = _committed_placed(entry, leaves, where)   # before running)
        refs = entry.refs   # Refs made outside: their values in, the new ones written back
        if refs is not None:
            dyn_values = [*dyn_values, *refs.values()]
        outs = wrap_outputs(entry.executable(*dyn_values, *entry.consts), entry.out_weak)
        if refs is not None:
            refs.assign(outs, leaves)
        if entry.writes:   # `global g; g = ...`: assigned after the call, from extra outputs
            staging.assign_globals(entry.writes, outs)
        if refs is not None or entry.writes:
            outs = outs[:entry.out_tree.num_leaves]
        if where:   # outputs typed with a sharding (sharding_types.placements)
            outs = [o if s is None else placed_on(o, s) for o, s in zip(outs, where)]
        return tree_unflatten(entry.out_tree, outs)

    def _leaves(self, args, kwargs):
        _, dyn_args, dyn_kwargs = self._split(args, kwargs)
        return tree_flatten((tuple(dyn_args), dyn_kwargs))[0]

    def _donated_leaves(self, args, kwargs):
        """The flat indices of the dynamic leaves that `donate_argnums` / `donate_argnames`
        donate."""
        nums, names = self._donate.nums, self._donate.names
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
        if not len(self._cache):
            return "first call"
        if key in self._cache.keys():
            return f"an option changed since it was compiled ({', '.join(staging.TRACE_OPTIONS)})"
        treedef, avals, statics = key
        best = None
        for (t2, a2, s2) in self._cache.keys():  # the reason against the closest specialisation
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
            t2 = self._cache.keys()[0][0]
            return f"argument structure changed: {t2} -> {treedef}"
        return "; ".join(best[1]) or "new specialisation"

    def _specialise(self, key, args, kwargs, stale=None):
        reason = self._miss_reason(key, stale)
        self.miss_reasons.append(reason)
        if staging.log_compiles():
            staging.logger.warning("kiln: compiling %s (%s)", self.__name__, reason)
        with profiler.span(f"compile {self.__name__}", "compile", reason=reason):
            return self._make_entry(key, args, kwargs)

    def _make_entry(self, key, args, kwargs):
        """The specialisation of the call `(args, kwargs)` with key `key`, staged and
        compiled."""
        with monitoring.timed(monitoring.TRACE_EVENT, self.__name__):
            st, _, _ = staging.stage_call(self._fun, args, kwargs, self._static,
                                          shown=self.__name__)
        donated = self._donated_leaves(args, kwargs)
        with monitoring.timed(monitoring.BACKEND_COMPILE_EVENT, f"jit({self.__name__})"):
            ssa, executable = staging.compile_ssa(st.fn, self._backend, donated,
                                                  self._fallback, self.__name__)
        entry = _Entry()
        entry.function = st.fn
        entry.ssa = ssa
        entry.executable = executable
        entry.in_tree = key[0]
        entry.out_tree = st.out_tree
        entry.writes = st.writes
        entry.refs = st.refs
        entry.out_weak = [v.aval.weak_type for v in ssa.outvars]
        hold = getattr(executable, "hold_constants", None)   # (pjrt, cuda: on the device once)
        entry.consts = st.extra if hold is None else hold(st.extra)
        entry.closed = st.extra
        entry.guards = st.guards
        entry.in_avals = key[1]
        entry.out_typed = st.out_avals if typed_outputs(st.out_avals) else None
        entry.constraints = constraints_of(st.fn)
        entry.held = sorted(set(getattr(executable, "held", {}).values()))
        _warn_unusable(donated, entry)
        return entry

    # ------------------------------------------------------------------- inspection
    def lower(self, *args, **kwargs):
        from . import pjrt_partitioned
        from .introspection import stand_ins
        stood = stand_ins(args, kwargs)
        if process_layout()[1] == 1 and pjrt_partitioned.wanted(
                self, [a._value for a in tree_leaves(stood) if type(a) is Array]):
            return pjrt_partitioned.lowered(self, *stood)
        key, _, _ = self._signature(*stood)
        entry, mesh = self._entry_or_mesh(key, *stood)
        if mesh is not None:   # a shard_map over PJRT devices: lowered on its mesh
            return pjrt_partitioned.lowered(self, *stood, mesh)
        return Traced(entry).lower()

    def trace(self, *args, **kwargs):
        """JAX's `jit(f).trace(*args)`: the specialisation for these arguments (arrays,
        numbers or `ShapeDtypeStruct`s), whose `jaxpr` is kiln's SSA form."""
        from .introspection import stand_ins
        args, kwargs = stand_ins(args, kwargs)
        key, _, _ = self._signature(args, kwargs)
        return Traced(self._entry(key, args, kwargs))

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


def _placed_backend(values):
    """The backend the first argument on a device asks for: "cuda" on a GPU, a PJRT layer's
    "pjrt"; None when every argument is on the host."""
    for v in values:
        if type(v) is DeviceBuffer:
            return "cuda" if isinstance(v.layer, CudaLayer) else v.layer.backend
    return None


def _spread(values):
    """Whether an argument is spread over several PJRT devices (pjrt_spread.py)."""
    for v in values:
        if type(v) is DeviceBuffer and v.layer is SPREAD_LAYER:
            return True
    return False


def _committed_placed(entry, leaves, typed):
    """sharding_propagation.committed_placements of `entry` called with `leaves` (a
    ValueError for arguments committed to different devices), its outputs' `typed`
    placements given, kept per arguments' shardings."""
    key = tuple(placed_sharding(x) for x in leaves)
    cache = getattr(entry, "auto_placed", None)
    if cache is None:
        cache = entry.auto_placed = {}
    if key not in cache:
        cache[key] = committed_placements(entry.function, getattr(entry, "constraints", {}),
                                          leaves, f"jit({entry.function.name})", typed)
    return cache[key]


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
            values[i] = leaf._value if type(leaf._value) is DeviceBuffer or \
                _sole_buffer(leaf) else np.array(leaf._value, order="C")   # (PJRT: its own)
        else:
            values[i] = np.array(value, order="C")
    out = Jitted._run(None, entry, values, leaves)
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
    if hasattr(entry.executable, "held"):
        warn_unusable([entry.in_avals[i] for i in donated if i not in entry.held], 8)


def warn_unusable(avals, stacklevel):
    """JAX's warning for donated inputs (`avals`) no output could take over, if any."""
    if avals:
        shown = ", ".join(a.str_short() for a in avals)
        warnings.warn(f"Some donated buffers were not usable: {shown} (no output of the same "
                      f"shape and dtype could be computed in their place).",
                      stacklevel=stacklevel + 1)


def _show(aval, other):
    """`f32[3]`, with `{weak}` where the weak type is what differs from `other`."""
    return str(aval) if aval.weak_type != other.weak_type else aval.str_short()


class Traced:
    """`jit(f).trace(*args)`: `jaxpr`, the SSA form (a ClosedJaxpr, as `make_jaxpr` gives),
    `out_info`, the outputs' `ShapeDtypeStruct`s, and `lower()`."""

    def __init__(self, entry):
        self._entry = entry

    @property
    def jaxpr(self):
        from .introspection import ClosedJaxpr
        return ClosedJaxpr(self._entry.ssa, self._entry.consts)

    @property
    def out_info(self):
        return _out_info(self._entry)

    @property
    def fun_name(self):
        return self._entry.function.name

    def lower(self):
        return Lowered(self._entry)


def _out_info(entry):
    from .introspection import ShapeDtypeStruct
    avals = [v.aval for v in entry.ssa.outvars][:entry.out_tree.num_leaves]
    return tree_unflatten(entry.out_tree, [ShapeDtypeStruct(a.shape, a.dtype,
                                                            weak_type=a.weak_type)
                                           for a in avals])


class Lowered:
    """`jit(f).lower(*args)`: the SSA form after the passes; `out_info` as `Traced`'s."""

    def __init__(self, entry):
        self._entry = entry

    out_info = property(lambda self: _out_info(self._entry))

    def as_text(self, dialect=None):
        """The SSA after the passes; `dialect` "stablehlo": the StableHLO module of it
        (docs/stablehlo.md)."""
        if dialect == "stablehlo":
            return _stablehlo_text(self._entry)
        if dialect is not None:
            raise ValueError(f"Lowered.as_text: unknown dialect {dialect!r}; kiln has None "
                             f"(the SSA form) and 'stablehlo'")
        return str(self._entry.ssa)

    def compile(self):
        return Compiled(self._entry)

    def cost_analysis(self):
        """XLA's cost properties counted over the SSA after the passes (a dict of floats:
        "flops", "transcendentals", "bytes accessed", ...; runtime/analysis.py)."""
        from .analysis import lowered_cost
        return lowered_cost(self._entry)

    def compile_for_topology(self, topology):
        """The StableHLO module compiled by libtpu for the TPU topology `topology` ("v5e:2x2",
        ...) without a TPU: a `CompiledForTopology` (kiln.pjrt.compile_for_topology;
        docs/pjrt.md)."""
        from .pjrt import compile_for_topology
        return CompiledForTopology(self._entry,
                                   compile_for_topology(_stablehlo_text(self._entry), topology))


class CompiledForTopology:
    """`Lowered.compile_for_topology(name)`: the plug-in's executable for a topology whose
    devices this machine lacks. `serialized` is the plug-in's bytes of it, `topology`,
    `platform`, `platform_version`, `device_kinds` and `device_ids` (the topology's devices
    it runs on, in replica or partition order) say what it was compiled for, `in_tree` and
    `out_tree` are the function's. It does not run here:
    `kiln.experimental.serialize_executable.serialize(it)` packs it with what loading it on
    such devices needs (its arguments' types, its constants, its module). `entry` is the
    single-device jit's entry it was compiled from; for a partitioned jit or a pmap,
    `source` is the `PartitionedCompiled` or `PmapCompiled` (and `name` its function's)."""

    def __init__(self, entry, compiled, source=None, name=None):
        self._entry, self.source = entry, source
        self.name = entry.function.name if source is None else name
        self.topology, self.platform, self.platform_version, self.device_kinds, \
            self.serialized, self.device_ids = compiled

    in_tree = property(lambda self: (self.source or self._entry).in_tree)
    out_tree = property(lambda self: (self.source or self._entry).out_tree)

    def __repr__(self):
        return (f"CompiledForTopology({self.name!r}, topology={self.topology!r}, "
                f"platform={self.platform!r}, {len(self.device_ids)} devices)")


class Compiled:
    """The backend's executable; `as_text()` is what the backend runs; `in_tree` and
    `out_tree` the pytrees of its (dynamic) arguments, as `((args...), {kwargs})`, and of its
    results."""

    def __init__(self, entry):
        self._entry = entry

    in_tree = property(lambda self: self._entry.in_tree)
    out_tree = property(lambda self: self._entry.out_tree)

    def as_text(self, level=None):
        """What the backend runs: for the LLVM backend the optimised IR, or `level`
        "llvm-unoptimized" or "asm"; for the reference backend the SSA it executes. `level`
        "cuda" or "ptx" is what the CUDA backend makes of the same SSA (NVRTC; no GPU);
        "stablehlo" its StableHLO module (the arrays it closes over are @main's last
        arguments)."""
        if level == "stablehlo":
            return _stablehlo_text(self._entry)
        if level in ("cuda", "ptx"):
            from .compiler.backends.cuda import program
            return program.text(self._entry.ssa, level)
        ex = self._entry.executable
        return ex.as_text() if level is None else ex.as_text(level)

    def cost_analysis(self):
        """XLA's cost properties of what the backend runs (a dict of floats; for the pjrt
        backend XLA's own figures; runtime/analysis.py)."""
        from .analysis import compiled_cost
        return compiled_cost(self._entry)

    def memory_analysis(self):
        """A `CompiledMemoryStats`: the bytes of the arguments, outputs, donated aliases,
        temporaries and generated code (runtime/analysis.py)."""
        from .analysis import memory_analysis
        return memory_analysis(self._entry)

    def __call__(self, *args, **kwargs):
        """Run on the dynamic arguments (pytrees as at `lower`, static ones left out)."""
        leaves, pairs = checked_call(self._entry.in_tree, self._entry.in_avals, args, kwargs)
        values = [v for _, v in pairs]
        check_execution(f"the compiled {self._entry.function.name}")
        if self._entry.held:   # `pairs` holds the buffers too: donated ones are copied
            return _run_donating(self._entry, leaves, values)
        return Jitted._run(None, self._entry, values, leaves)


def checked_call(in_tree, in_avals, args, kwargs):
    """(the leaves of a call of a compiled executable, their (aval, value) pairs), after
    JAX's checks that its pytree is `in_tree` and its types `in_avals` (a TypeError)."""
    leaves, tree = tree_flatten((tuple(args), kwargs))
    if tree != in_tree:
        raise TypeError(f"Function compiled with input pytree does not match the input "
                        f"pytree it was called with: compiled for {in_tree}, called with "
                        f"{tree}")
    pairs = [leaf_aval(x, f"argument {i}", dense=True, refs=True) for i, x in enumerate(leaves)]
    strip = lambda t: [(a.shape, a.dtype) for a in t]  # noqa: E731  (weak types may differ)
    if strip(a for a, _ in pairs) != strip(in_avals):
        show = lambda t: "(" + ", ".join(a.str_short() for a in t) + ")"  # noqa: E731
        raise TypeError(f"this executable was compiled for arguments of types "
                        f"{show(in_avals)} but is called with {show([a for a, _ in pairs])}; "
                        f"call the jitted function instead to compile for new types")
    return leaves, pairs


def _stablehlo_text(entry):
    from .compiler.backends.stablehlo import lower_module
    return lower_module(entry.ssa).text


def _sharded_call(jitted, args, kwargs):
    """A call of a jit with `in_shardings`/`out_shardings`: the inputs checked against their
    shardings (JAX's errors), the one program run over the shared host memory, and the results
    placed as `out_shardings` says (docs/pmap.md, "Sharded jit"). With several processes, the
    program is partitioned over them (global_jit.py)."""
    from .placement import device_put
    if process_layout()[1] > 1:
        return sharded_call(jitted, args, kwargs)
    from . import pjrt_partitioned
    if pjrt_partitioned.wanted(jitted, [a._value for a in tree_leaves(args)
                                        if type(a) is Array]):
        return pjrt_partitioned.partitioned_call(jitted, args, kwargs)
    in_shardings, out_shardings = jitted._shardings
    if in_shardings is not None:
        device_put(tuple(args), in_shardings)
    out = jitted._call(args, kwargs)
    return out if out_shardings is None else device_put(out, out_shardings)


def jit(fun=None, *, in_shardings=None, out_shardings=None, static_argnums=(),
        static_argnames=(), donate_argnums=(), donate_argnames=(), backend=None, inline=False,
        keep_unused=False, device=None, **unused):
    """`kiln.jit`: JAX's signature; usable as `@jit`, `@jit(...)` and `partial(jit, ...)`.
    `in_shardings`/`out_shardings` (Shardings, PartitionSpecs over the current mesh, or None,
    as pytree prefixes, or `Format`s of a row-major layout and a sharding) check the inputs and
    place the outputs."""
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                                 backend=backend, device=device)
    if isinstance(fun, Jitted) and not (static_argnums or static_argnames or donate_argnums
                                        or donate_argnames or in_shardings is not None
                                        or out_shardings is not None):
        return fun
    in_shardings, out_shardings = (formats_as_shardings(in_shardings),
                                   formats_as_shardings(out_shardings))
    if device is not None:
        from .sharding import SingleDeviceSharding
        out_shardings = out_shardings if out_shardings is not None else \
            SingleDeviceSharding(device)
    kind = NativeCallJitted if backend == "pjrt" and in_shardings is None and \
        out_shardings is None else Jitted
    return kind(fun, static_argnums, static_argnames, donate_argnums, donate_argnames,
                backend, inline, keep_unused, in_shardings, out_shardings)


class NativeCallJitted(Jitted):
    """`kiln.jit(f, backend="pjrt")` without shardings. Its `_fast` is a slot, at an offset
    native code can read, so that `__call__` can be a native method (runtime/pjrt.py
    installs it with the first native fast path: compiler/backends/pjrt/methods.py). That
    method makes the checks of `Jitted.__call__`'s first lines (`native_call_checks`; no
    keywords; this class has no shardings and, its backend named, no fallback) and calls the
    fast path's entry directly; anything else is `Jitted.__call__`."""
    __slots__ = ("_fast",)


def native_call_checks():
    """What a native `__call__` reads before the fast path: the (object, slot) pairs that must
    be False (execution guards, float checks), and the one-item lists that must hold 0 (the
    disable_jit blocks and the builders of functions being specialised, in all threads: a
    call while one is open goes through `Jitted.__call__`, which reads this thread's)."""
    return [(_GUARDS, "no_execution"), (_FLOAT_CHECKS, "on")], [_DISABLING, _BUILDING]


def make_ir(fun, static_argnums=(), static_argnames=()):
    """`make_ir(f)(*args)`: the SSA form of `f` specialised for `args` (before the passes).
    For a transformed function (`kiln.grad(f)`, `kiln.jvp`-based ones ...) it is the
    generated derivative code."""
    target = fun._fun if isinstance(fun, Jitted) else fun
    transformed = getattr(target, "_kiln_make_ir", None)
    if transformed is not None and not (static_argnums or static_argnames):
        return transformed

    static = staging.StaticArgs(target, static_argnums, static_argnames)

    def make(*args, **kwargs):
        return staging.stage_call(target, args, kwargs, static)[0].fn
    return make
