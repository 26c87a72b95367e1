"""Eager calls of kiln's composite library functions, compiled once they repeat, and long
eager loops, whose remaining iterations are compiled (`compiled_rest`, used by
lax/_control_flow.py; docs/control_flow.md).

The functions so compiled (`tiered`) are `kiln.random`'s samplers (random.py) and the
composite functions of `kiln.numpy`, `kiln.numpy.linalg`, `kiln.nn`, `kiln.scipy.linalg` and
`kiln.scipy.special` that JAX 0.10.2 jits and whose compiled code gives the eager bits; each
namespace's table (`tier_names`) names them with JAX's static parameters
(docs/performance.md says which functions and why the others are not compiled). Every other
function of those namespaces (`tier_composites`) runs as one unit from the second call of a
signature (`composite`): specialised once, its SSA run on the `exact` backend, whose
primitives are the eager operations' NumPy definitions, so the results are the eager bits
without the library's Python and the dispatch of each operation.

A function such as `kiln.random.normal` is a few hundred primitives (the threefry hash, the
sampler's arithmetic). Called outside `jit`, each primitive is dispatched on its own: about
2-6 ms a call. JAX compiles its samplers on their first call (about 100 ms per new shape)
and then runs them in tens of microseconds. `tiered(fn)` takes the middle road:

- the first `EAGER_CALLS` calls of one *signature* run eagerly, as before, so a one-off call
  never waits for a compile and errors are raised by the eager code, with its messages;
  except a large call (an array argument or a shape argument of `LARGE_CALL` elements or
  more), which compiles at once, as eager NumPy passes over so many elements cost far more
  than a compile (a compile that fails falls back to the eager code, which raises);
- the next call of that signature compiles it with `kiln.jit` (once per signature and
  process; the LLVM backend's disk cache keeps the object code for later processes), and every
  call after that runs the compiled function.

A signature is the call's pytree structure, each array leaf's shape, dtype and weak type, the
type of each Python number (and an int's sign) passed to the compiled function, weakly typed
as `jit` passes one, and the value of every other leaf: the numbers of the parameters named
static (shapes, counts, axes), dtypes, strings, `None`, which stay fixed in the compiled
function. A call compiled so gives the same bits as the eager one: the reference backend and
the LLVM backend agree on every primitive a sampler uses (tests/test_eager_tiers.py checks
each sampler), and the library functions tiered are those built of primitives that agree
(tests/test_eager_composites.py checks each). A signature whose compile fails (its code needs
a number passed as an array to be static) stays eager.

A call stays eager whenever anything but plain host values is involved, where `jit` could
place or check the result differently from the eager operations: inside a function being
specialised (the call is then part of that function), under `disable_jit` or `no_execution`,
while a default device is set, or when an
argument is a traced value (eager `grad`/`vmap`), an array on a device other than the host's
first (a PJRT or GPU buffer, a sharded array), or an unhashable static value; arrays committed
to one device (or to a mesh, whole) compile, and `jit` places the results where they are.
Under the float checks (`debug_nans`/`debug_infs`) a call is compiled at once: as in JAX,
whose samplers and library functions are jitted, only the results are checked, not the
function's own steps (a sampler's `erf_inv` makes NaNs it then discards, `median` a NaN a
`where` drops). `KILN_EAGER_TIERS=0` turns the compiling off (every
call eager).
"""
import collections
import functools
import inspect
import os

import numpy as np

from . import _default_device, staging
from .compiler.config import config
from .array import Array, _SHARDINGS
from .sharding_propagation import shape_free
from .compiler.ir.builder import STATE as _BUILDER_STATE
from .execution_guards import STATE as _GUARDS
from .float_checks import STATE as _FLOAT_CHECKS
from .tree_util import tree_flatten, tree_unflatten

# Calls of one signature that run eagerly before it is compiled. A compile costs about as much
# as 10-30 eager calls of a sampler (50-100 ms against 2-5 ms), so compiling after 16 calls
# never spends more than about twice what the better choice, known in advance, would.
EAGER_CALLS = 16
# A call this big (elements of an array argument, or of a shape argument such as a sampler's
# `shape`) compiles at once: one eager pass over millions of elements costs seconds, far more
# than a compile, and the compiled code gives the eager bits anyway.
LARGE_CALL = 1 << 16
# A composite's (`composite`) eager calls of one signature before it runs as one unit: its
# compile costs about 20-90 eager calls (5-50 ms), and a signature called twice is usually
# called in a loop.
UNIT_EAGER_CALLS = 1
MIN_UNIT = 3              # equations a composite's unit needs to beat its eager calls
SMALL_UNITS = 3           # units under MIN_UNIT after which a composite stays eager for good
MAX_SIGNATURES = 256      # per function; beyond, the table is cleared and counting restarts
HOT_ITERATIONS = 1000     # iterations of one eager loop before the rest of it is compiled
MAX_LOOPS = 64            # compiled loop rests kept (the least recently used dropped)
ENABLED = os.environ.get("KILN_EAGER_TIERS", "1").lower() not in ("0", "false", "no")

_EAGER = "eager"          # a signature or loop that does not compile (tiered, compiled_rest)
_NUMBERS = (int, float, complex, bool)
_STATIC_TYPES = (int, float, complex, bool, str, type(None), np.dtype, type)
_INEXACT = (float, complex)


def _array_signature(leaf):
    """(shape, dtype, weak type) of an array the compiled function takes, or None."""
    kind = type(leaf)
    if kind is Array:
        value = leaf._value
        placed = _SHARDINGS.get(id(leaf))
        if type(value) is not np.ndarray or placed is not None and not shape_free(placed):
            return None   # (committed to one device, or a mesh whole: jit places the results)
        return value.shape, value.dtype, leaf.weak_type
    if kind is np.ndarray or isinstance(leaf, np.generic):
        return leaf.shape, leaf.dtype, False
    return None


def _number_signature(number):
    """The signature of a Python number the compiled function takes: its type, and for an
    int its sign (eager code converting it may refuse a negative one: `fold_in(key, -5)`);
    None for an int beyond int32, which stays eager."""
    if type(number) is int:
        return (int, number < 0) if -2 ** 31 <= number < 2 ** 31 else None
    return (type(number),)


def _signature(names, static, args, kwargs):
    """(key, positions of the leaves passed to the compiled function, the leaves) of a
    call, or None where it must stay eager. `names`: the positional parameters' names, the
    last naming every argument beyond them (a `*args` parameter's name, or None);
    `static`: the parameters whose Python values are fixed in the compiled function (shapes,
    counts, axes); every other Python number is passed to it, weakly typed, as `jit` passes
    one; `static` None fixes every Python value (`composite`)."""
    keywords = sorted(kwargs)
    named = [names[min(i, len(names) - 1)] for i in range(len(args))] + keywords
    leaves, trees, parts, dynamic = [], [], [], []
    position = 0
    for name, argument in zip(named, list(args) + [kwargs[k] for k in keywords]):
        argument_leaves, tree = tree_flatten(argument)
        trees.append(tree)
        leaves += argument_leaves
        for leaf in argument_leaves:
            found = _array_signature(leaf)
            if found is None and type(leaf) in _NUMBERS and static is not None and \
                    name not in static:
                found = _number_signature(leaf)
                if found is None:
                    return None
            if found is not None:
                dynamic.append(position)
            elif isinstance(leaf, _STATIC_TYPES):
                try:
                    hash(leaf)
                except TypeError:
                    return None
                # (a float by its repr: -0.0 and 0.0 are equal keys, and not the same value)
                found = (type(leaf), repr(leaf) if type(leaf) in _INEXACT else leaf)
            else:
                return None
            parts.append(found)
            position += 1
    layout = (len(args), tuple(keywords), tuple(trees))   # how the leaves make the call
    return (layout, tuple(parts)), tuple(dynamic), leaves


def plain_eager():
    """May an eager call be compiled now? (see the module docstring) Not while the key-reuse
    checker is on: it follows each eager draw's key (runtime/_key_reuse.py)."""
    disabled = _JIT_SWITCH[0]
    if disabled is None:   # (jit imports this module: its switch is read at the first call)
        from .jit import _DISABLED as disabled
        _JIT_SWITCH[0] = disabled
    return not (_BUILDER_STATE.stack or disabled.on or _GUARDS.no_execution
                or _default_device.IN_FORCE[0] and _default_device.current() is not None
                or config.read("debug_key_reuse"))


_JIT_SWITCH = [None]   # jit._DISABLED, once read


def _compiled(fn, layout, leaves, dynamic):
    """`fn` jitted for one signature: it takes the array leaves; the others are fixed.
    `layout`: (positional count, keyword names, each argument's treedef)."""
    from .jit import jit
    return jit(_bound(fn, layout, leaves, dynamic))


def _bound(fn, layout, leaves, dynamic):
    """`fn` as a function of the array leaves of one signature, the other leaves fixed."""
    fixed = list(leaves)
    for i in dynamic:
        fixed[i] = None

    def run(*arrays):
        filled = list(fixed)
        for i, a in zip(dynamic, arrays):
            filled[i] = a
        count, keywords, trees = layout
        arguments, start = [], 0
        for tree in trees:
            arguments.append(tree_unflatten(tree, filled[start:start + tree.num_leaves]))
            start += tree.num_leaves
        return fn(*arguments[:count], **dict(zip(keywords, arguments[count:])))

    run.__name__ = run.__qualname__ = getattr(fn, "__name__", "run")
    return run


def _call_size(args, kwargs):
    """The most elements a call's arguments speak of: an array's size, or the product of a
    tuple of ints (a shape)."""
    largest = 0
    for argument in list(args) + list(kwargs.values()):
        shape = None if isinstance(argument, type) else getattr(argument, "shape", None)
        if isinstance(argument, (tuple, list)) and argument and all(
                type(n) is int for n in argument):
            shape = argument
        if shape is not None:
            largest = max(largest, int(np.prod(shape, dtype=np.int64)))
    return largest


def _parameter_names(fn):
    """`fn`'s positional parameters' names, then the name of any parameter beyond them (a
    `*args` parameter's, or None): `_signature`'s `names`."""
    names = [None]
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names.insert(-1, parameter.name)
        elif parameter.kind is parameter.VAR_POSITIONAL:
            names[-1] = parameter.name
    return names


def tiered(fn, static=()):
    """`fn`, its eager calls compiled once a signature repeats (see the module docstring);
    `static`: names of the parameters whose Python values stay fixed in the compiled code."""
    seen = {}   # signature -> eager calls so far (int), the compiled function, or _EAGER
    names = _parameter_names(fn)
    static = frozenset(static)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not ENABLED or not plain_eager():
            return fn(*args, **kwargs)
        found = _signature(names, static, args, kwargs)
        if found is None:
            return fn(*args, **kwargs)
        key, dynamic, leaves = found
        entry = seen.get(key, 0)
        if entry is _EAGER:
            return fn(*args, **kwargs)
        if type(entry) is not int:
            return entry(*[leaves[i] for i in dynamic])
        if entry < EAGER_CALLS and not _FLOAT_CHECKS.on and \
                _call_size(args, kwargs) < LARGE_CALL:
            out = fn(*args, **kwargs)
            if len(seen) >= MAX_SIGNATURES:
                seen.clear()
            seen[key] = entry + 1
            return out
        compiled = _compiled(fn, key[0], leaves, dynamic)
        try:
            out = compiled(*[leaves[i] for i in dynamic])
        except Exception:   # it does not compile so: eager, which raises a real error
            seen[key] = _EAGER
            return fn(*args, **kwargs)
        seen[key] = compiled
        return out

    call._kiln_tiers, call._kiln_static = seen, static
    return call


def tier_names(namespace, static_by_name):
    """Tier each function `namespace[name]` (a `wrappers.user_facing` one) with `static`, for
    each (name, static) of `static_by_name`: a library namespace's table of the functions that
    compile once their eager calls repeat, with their static parameters. The tiers go inside
    the user-facing wrapper, so that tracebacks hide their frames too."""
    from .wrappers import user_facing
    for name, static in static_by_name.items():
        namespace[name] = user_facing(tiered(namespace[name].__wrapped__, static))


def composite(fn):
    """`fn`, its eager calls run as one unit once a signature repeats: the second call of a
    signature (every Python value fixed: `_signature` with `static` None) specialises `fn`
    and runs the SSA on the `exact` backend, the reference backend without the simplifier,
    whose primitives are the eager operations' NumPy implementations: the eager bits, without
    the library's Python and the dispatch of each operation. A change of any option but the
    trace options (which are part of the signature) drops every unit (`_forget_units`).
    A unit of fewer than `MIN_UNIT` equations gains nothing: its signature runs eagerly, and
    a function with `SMALL_UNITS` such units (a thin wrapper over a primitive or two) runs
    eagerly from then on (a call without arrays, whose unit is a constant, only marks its
    signature eager); a call whose eager
    result is not a pytree of arrays (a string, a number, None, a function) marks its
    signature eager, as does a compile that fails. A compiled call that raises is run again
    eagerly, which raises the eager error, as do the first calls; under the float checks
    (`debug_nans`/`debug_infs`) every call runs eagerly, each operation checked, as before,
    and so do calls with arrays committed to a device (the eager operations place their
    results)."""
    seen = {}   # signature -> eager calls so far (int), the compiled unit, or _EAGER
    names = _parameter_names(fn)
    # "on" False once SMALL_UNITS of the function's units proved too small to pay
    state = {"on": True, "small": 0}

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not (state["on"] and ENABLED) or _FLOAT_CHECKS.on or not plain_eager():
            return fn(*args, **kwargs)
        key = None if kwargs else _arrays_key(args)
        if key is None:
            found = _signature(names, None, args, kwargs)
            if found is None or any(id(leaf) in _SHARDINGS for leaf in found[2]):
                return fn(*args, **kwargs)   # (placed arrays: the eager results are placed)
            key, dynamic, leaves = found
        else:   # positional host arrays only: the leaves are the arguments
            found, dynamic, leaves = None, range(len(args)), args
        key = (key, _trace_options())
        entry = seen.get(key, 0)
        if entry is _EAGER:
            return fn(*args, **kwargs)
        arrays = [leaves[i] for i in dynamic]
        if type(entry) is not int:
            if entry.guards and not entry.guards_ok():   # a global it read has changed
                entry = seen[key] = 0
            else:
                try:
                    return entry(*arrays)
                except Exception:   # the eager code raises the error, naming the user's line
                    return fn(*args, **kwargs)
        if entry < UNIT_EAGER_CALLS:
            out = fn(*args, **kwargs)
            if len(seen) >= MAX_SIGNATURES:
                seen.clear()
            results = tree_flatten(out)[0]
            seen[key] = entry + 1 if results and all(type(r) is Array for r in results) \
                else _EAGER
            return out
        layout = (len(args), (), (_LEAF,) * len(args)) if found is None else key[0][0]
        try:
            unit = _Unit(_bound(fn, layout, leaves, dynamic), arrays)
        except Exception:   # it does not specialise so: eager, which raises a real error
            seen[key] = _EAGER
            return fn(*args, **kwargs)
        if unit.size < MIN_UNIT:   # (all-static calls fold to constants: only that one)
            seen[key] = _EAGER
            if dynamic:   # (one small case, a mean of a scalar, does not stop the others)
                state["small"] += 1
                if state["small"] >= SMALL_UNITS:
                    state["on"] = False
                    seen.clear()
            return fn(*args, **kwargs)
        seen[key] = unit
        try:
            return unit(*arrays)
        except Exception:
            return fn(*args, **kwargs)

    call._kiln_units, call._kiln_unit_state = seen, state
    _UNIT_TABLES.append(seen)
    return call


_UNIT_TABLES = []   # every composite's table of signatures


def _forget_units(name, value):
    """An option changed (rank promotion, dtype promotion, matmul precision, ...): the
    library may read it while it is specialised, so every composite's units are made again
    (enable_x64, a trace option, is part of each signature instead)."""
    if name not in staging.TRACE_OPTIONS:
        for table in _UNIT_TABLES:
            table.clear()


config.on_change(_forget_units)


class _Unit(staging.Entry):
    """A composite specialised for one signature (`run`, a function of its `arrays`), on the
    exact backend; called with the arrays of a call of that signature, it runs the SSA and
    makes the results as `jit` does, without `jit`'s dispatch (the signature is known).
    `size`: its equations."""
    __slots__ = ("executable", "consts", "out_tree", "out_weak", "size")

    def __init__(self, run, arrays):
        avals = [staging.leaf_aval(a, f"argument {i}")[0] for i, a in enumerate(arrays)]
        st = staging.stage(run, avals, lambda tracers: (tracers, {}), run.__name__)
        if st.writes or st.refs is not None:
            raise ValueError(f"{run.__name__} writes a global or a Ref: it stays eager")
        ssa, self.executable = staging.compile_ssa(st.fn, "exact", name=run.__name__)
        self.consts = tuple(st.extra)
        self.out_tree = st.out_tree
        self.out_weak = [v.aval.weak_type for v in ssa.outvars]
        self.guards = st.guards
        self.size = len(ssa.eqns)

    def __call__(self, *arrays):
        values = [a._value if type(a) is Array else staging.leaf_value(a) for a in arrays]
        outs = self.executable(*values, *self.consts)
        return tree_unflatten(self.out_tree, staging.wrap_outputs(outs, self.out_weak))


def _arrays_key(args):
    """The signature of a call whose arguments are all host Arrays (`_signature`'s key for
    them, without flattening): their shapes, dtypes and weak types; None for any other."""
    parts = []
    for a in args:
        if type(a) is not Array or type(a._value) is not np.ndarray or id(a) in _SHARDINGS:
            return None
        value = a._value
        parts.append((value.shape, value.dtype, a.weak_type))
    return tuple(parts)


_LEAF = tree_flatten(0)[1]   # the pytree definition of one leaf


def _trace_options():
    """The values of the options a specialisation depends on (`staging.TRACE_OPTIONS`)."""
    return tuple(config.read(name) for name in staging.TRACE_OPTIONS)


def tier_composites(namespace, exclude=()):
    """Make every function `namespace["__all__"]` names (a `wrappers.user_facing` one, not
    already tiered by `tier_names`, not in `exclude`) a `composite`, inside its user-facing
    wrapper; aliases, in one namespace or several (`nn.logsumexp` is
    `scipy.special.logsumexp`), stay one object. Only plain functions: a `custom_jvp` or
    `custom_vjp` (`nn.relu`, whose `__wrapped__` is its undifferentiated function) stays the
    object it is, so transforms still find its rule."""
    from .wrappers import user_facing
    for name in namespace["__all__"]:
        value = namespace.get(name)
        inner = getattr(value, "__wrapped__", None)
        if name in exclude or not (inspect.isfunction(value) and inspect.isfunction(inner)) \
                or hasattr(inner, "_kiln_tiers") or hasattr(inner, "_kiln_units"):
            continue
        made = _COMPOSITES.get(id(inner))
        if made is None or made[0] is not inner:
            made = _COMPOSITES[id(inner)] = (inner, user_facing(composite(inner)))
        namespace[name] = made[1]


_COMPOSITES = {}   # id(function) -> (the function, its composite's user-facing wrapper)


_LOOPS = collections.OrderedDict()   # loop key -> its compiled rest, or _EAGER


def compiled_rest(key, rest, *arrays):
    """The rest of an eager loop that ran `HOT_ITERATIONS` times, compiled: `jit(rest)` run on
    `arrays` (the loop's carry and what is left to scan), kept by `key` (the loop's kind, its
    functions and static values). None where the loop goes on eagerly: not `plain_eager()`,
    an argument that is not a plain host array or a Python number, or a rest that does not compile (a body whose
    source kiln cannot read, or that needs a value it is given as an array); that `key` is
    then not tried again."""
    if not ENABLED or not plain_eager():
        return None
    if any(_array_signature(leaf) is None and type(leaf) not in _NUMBERS
           for leaf in tree_flatten(arrays)[0]):
        return None
    try:
        compiled = _LOOPS.get(key)
    except TypeError:   # an unhashable function or static value
        return None
    if compiled is _EAGER:
        return None
    if compiled is None:
        from .jit import jit
        compiled = jit(rest)
    try:
        out = compiled(*arrays)
    except Exception:
        compiled, out = _EAGER, None
    _LOOPS[key] = compiled
    _LOOPS.move_to_end(key)
    if len(_LOOPS) > MAX_LOOPS:
        _LOOPS.popitem(last=False)
    return out
