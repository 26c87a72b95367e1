"""The dispatch fast path of `kiln.jit`: calls with positional array arguments only.

`jit` keeps, per jitted function, a `FastCall` for the specialisation of its latest call when
that call passed only positional arrays or floats (kiln Arrays, NumPy arrays, Python floats;
no keyword, static or pytree arguments). The next call tries it first: it checks in Python
what the native code cannot see (the argument count, that every argument is an Array or
ndarray with the same weak type as before, or a float becoming the same dtype as before, that
the globals the specialisation read are unchanged) and hands the buffers
to the executable's `call_exact`, whose native entry point checks dtype, shape and layout of
every buffer itself (compiler/backends/llvm/pycall.py). Whatever does not match, at any step,
returns `MISS` before anything ran, and `jit` takes its ordinary path (flatten, signature
key, cache lookup), which re-specialises where needed. So the fast path only ever runs the
specialisation the ordinary path would have chosen.
"""
import numpy as np

from .array import Array
from .compiler.ir.dtypes import default_float

MISS = object()
_ndarray = np.ndarray
_KINDS = (Array, np.ndarray, float)


def eligible(args, kwargs, static, executable):
    """Whether a call may install a FastCall: positional Arrays, ndarrays and Python floats
    only, no static arguments (`static`: the function's staging.StaticArgs), an executable
    with a native exact-call entry."""
    return (not kwargs and not static
            and getattr(executable, "call_exact", None) is not None
            and all(type(a) in _KINDS for a in args))


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

    def __init__(self, entry, args, wrap):
        self.entry = entry
        self.weak = tuple(map(_slot, args, entry.in_avals))
        self.call = entry.executable.call_exact
        self.consts = tuple(entry.consts)
        out_tree, out_weak = entry.out_tree, entry.out_weak
        if out_tree.node_data() is None:   # a single array
            self.rebuild = _single(out_weak[0])
        else:
            self.rebuild = lambda outs: out_tree.unflatten(wrap(outs, out_weak))

    def __call__(self, args):
        weak = self.weak
        if len(args) != len(weak):
            return MISS
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
                return MISS
        entry = self.entry
        if entry.guards and not entry.guards_ok():
            return MISS
        outs = self.call((*values, *self.consts))
        return MISS if outs is None else self.rebuild(outs)


def _single(weak, new=object.__new__):
    def rebuild(outs):
        out = new(Array)
        out._value = outs[0]
        out.weak_type = weak
        return out
    return rebuild
