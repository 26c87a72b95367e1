"""The dispatch fast path of `kiln.jit`: calls with positional array arguments only.

`jit` keeps, per jitted function, a `FastCall` for the specialisation of its latest call when
that call passed only positional arrays or floats (kiln Arrays, NumPy arrays, Python floats;
no keyword, static or pytree arguments). The next call tries it first: it checks in Python
what the native code cannot see (the argument count, that every argument is an Array or
ndarray with the same weak type as before, or a float becoming the same dtype as before, that
the globals the specialisation read are unchanged) and hands the buffers
to the executable's `call_exact`, whose native entry point checks dtype, shape and layout of
every buffer itself (arguments typed with a sharding, sharding_types.py, take the ordinary
path) (compiler/backends/llvm/pycall.py). An executable with `array_call`
(the pjrt backend's Program) gives instead, for calls like the one that installs it, one
function that checks the guards and the Arrays themselves, runs and makes the outputs
(`Outputs` says how), a builtin with no Python in it where the interpreter allows
(runtime/pjrt.py, compiler/backends/pjrt/entry.py); `jit` calls it in place of a FastCall.
Whatever does not match, at any step, returns `MISS` before anything ran, and `jit` takes its ordinary path (flatten, signature
key, cache lookup), which re-specialises where needed. So the fast path only ever runs the
specialisation the ordinary path would have chosen.
"""
import numpy as np

from .array import Array, TYPED, placed_on, placed_sharding
from .sharding_propagation import one_shape_free
from .tree_util import tree_leaves
from .tree_util import tree_structure
from .compiler.ir.dtypes import default_float

MISS = object()


def exact_values(entry, args, weak):
    """The buffers of positional arguments exactly like those of the call `weak` was taken
    from (per argument: an Array's weak type, False for a NumPy array, or a Python float's
    staged type), for cache entry `entry`; None when one differs or a global that `entry`
    read has changed."""
    if len(args) != len(weak):
        return None
    values = []
    append = values.append
    for a, w in zip(args, weak):
        t = type(a)
        if t is Array and a.weak_type is w:
            append(a._value)
        elif t is _ndarray and not w:
            append(a)
        elif t is float and w.__class__ is _Float and w.dtype == default_float():
            append(np.asarray(a, w.dtype))
        else:
            return None
    if entry.guards and not entry.guards_ok():
        return None
    return values
_ndarray = np.ndarray
_KINDS = (Array, np.ndarray, float)


def install(entry, args, kwargs, static, wrap):
    """What `jit` calls first for calls like this one (a FastCall, or the executable's
    `array_call` function), or None where there is none: positional Arrays, ndarrays and
    Python floats only, no static arguments (`static`: the function's staging.StaticArgs),
    and an executable with a native exact-call entry (`call_exact`) or an entry for calls
    like `args` (`array_call`: given the weak types, the `Outputs` and the guards' check, it
    returns a function of the arguments giving the outputs or MISS)."""
    if kwargs or static or not all(type(a) in _KINDS for a in args) or \
            any(getattr(a, "sharding", None) is not None for a in entry.in_avals):
        return None   # (a specialisation for arguments typed with a sharding: none)
    weak = tuple(map(_slot, args, entry.in_avals))
    rebuild = _rebuild(entry, wrap)
    arrays = getattr(entry.executable, "array_call", None)
    if arrays is not None and not entry.consts:
        direct = arrays(args, weak, Outputs(entry, rebuild),
                        entry.guards_ok if entry.guards else None)
        if direct is not None:
            return direct
    if getattr(entry.executable, "call_exact", None) is None:
        return None
    return FastCall(entry, weak, rebuild)


def _rebuild(entry, wrap):
    """The outputs' pytree from the executable's output values."""
    out_tree, out_weak = entry.out_tree, entry.out_weak
    if out_tree.node_data() is None:   # a single array
        return _single(out_weak[0])
    return lambda outs: out_tree.unflatten(wrap(outs, out_weak))


class Outputs:
    """What an `array_call` function returns, given the outputs' values: `rebuild(values)`
    (the outputs' pytree), or, for a function that makes the output Arrays itself, their weak
    types (`weak`), and whether the result is the one Array itself (`single`), else the tuple
    of them (`finish` None) or `finish(arrays)` (the pytree's unflatten)."""
    __slots__ = ("rebuild", "weak", "single", "finish")

    def __init__(self, entry, rebuild):
        tree = entry.out_tree
        self.rebuild = rebuild
        self.weak = tuple(entry.out_weak)
        self.single = tree.node_data() is None
        flat = tree_structure((0,) * tree.num_leaves)
        self.finish = None if self.single or tree == flat else tree.unflatten


class _Float:
    """The slot of a Python float argument: the dtype it became (which depends on
    `enable_x64`, checked on every call)."""
    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = dtype


def _slot(arg, aval):
    """What a later argument at this position must be: the weak type of an Array or ndarray
    (True/False), or a _Float."""
    if type(arg) is float:
        return _Float(aval.dtype)
    return type(arg) is Array and arg.weak_type


class FastCall:
    __slots__ = ("entry", "weak", "call", "consts", "rebuild")

    def __init__(self, entry, weak, rebuild):
        self.entry = entry
        self.weak = weak
        self.call = entry.executable.call_exact
        self.consts = tuple(entry.consts)
        self.rebuild = rebuild

    def __call__(self, args):
        where = None
        if TYPED and any(id(a) in TYPED for a in args):
            # Arguments all committed to one device (or one mesh, whole): the results are
            # placed there after the call; other placed arguments take the ordinary path.
            where = one_shape_free([placed_sharding(a) for a in args])
            if where is None or getattr(self.entry, "constraints", None):
                return MISS
        values = exact_values(self.entry, args, self.weak)
        if values is None:
            return MISS
        outs = self.call((*values, *self.consts))
        if outs is None:
            return MISS
        out = self.rebuild(outs)
        if where is not None:
            for leaf in tree_leaves(out):
                placed_on(leaf, where)
        return out


def _single(weak, new=object.__new__):
    def rebuild(outs):
        out = new(Array)
        out._value = outs[0]
        out.weak_type = weak
        return out
    return rebuild
