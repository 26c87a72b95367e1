"""Eager calls of kiln's composite library functions, compiled once they repeat, and long
eager loops, whose remaining iterations are compiled (`compiled_rest`, used by
lax/_control_flow.py; docs/control_flow.md).

The functions so compiled are `kiln.random`'s samplers (random.py) and the composite
functions of `kiln.numpy`, `kiln.numpy.linalg`, `kiln.nn`, `kiln.scipy.linalg` and
`kiln.scipy.special` that JAX 0.10.2 jits and whose compiled code gives the eager bits; each
namespace's table (`tier_names`) names them with JAX's static parameters
(docs/performance.md says which functions and why the others stay eager).

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

from . import _default_device
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
MAX_SIGNATURES = 256      # per function; beyond, the table is cleared and counting restarts
HOT_ITERATIONS = 1000     # iterations of one eager loop before the rest of it is compiled
MAX_LOOPS = 64            # compiled loop rests kept (the least recently used dropped)
ENABLED = os.environ.get("KILN_EAGER_TIERS", "1").lower() not in ("0", "false", "no")

_EAGER = "eager"          # a signature or loop that does not compile (tiered, compiled_rest)
_NUMBERS = (int, float, complex, bool)
_STATIC_TYPES = (int, float, complex, bool, str, type(None), np.dtype, type)


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
    one."""
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
            if found is None and type(leaf) in _NUMBERS and name not in static:
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
                found = (type(leaf), leaf)
            else:
                return None
            parts.append(found)
            position += 1
    layout = (len(args), tuple(keywords), tuple(trees))   # how the leaves make the call
    return (layout, tuple(parts)), tuple(dynamic), leaves


def plain_eager():
    """May an eager call be compiled now? (see the module docstring)"""
    from .jit import _DISABLED
    return not (_BUILDER_STATE.stack or _DISABLED.on or _GUARDS.no_execution
                or _default_device.IN_FORCE[0] and _default_device.current() is not None)


def _compiled(fn, layout, leaves, dynamic):
    """`fn` jitted for one signature: it takes the array leaves; the others are fixed.
    `layout`: (positional count, keyword names, each argument's treedef)."""
    from .jit import jit
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
    return jit(run)


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


def tiered(fn, static=()):
    """`fn`, its eager calls compiled once a signature repeats (see the module docstring);
    `static`: names of the parameters whose Python values stay fixed in the compiled code."""
    seen = {}   # signature -> eager calls so far (int), the compiled function, or _EAGER
    names = [None]   # the positional parameters' names, then the name of any beyond them
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names.insert(-1, parameter.name)
        elif parameter.kind is parameter.VAR_POSITIONAL:
            names[-1] = parameter.name
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
