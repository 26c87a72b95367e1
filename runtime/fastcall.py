"""The dispatch fast path of `kiln.jit`: calls with positional array arguments only.

`jit` keeps, per jitted function, a `FastCall` for the specialisation of its latest call when
that call passed only positional arrays (kiln Arrays or NumPy arrays; no keyword, static or
pytree arguments). The next call tries it first: it checks in Python what the native code
cannot see (the argument count, that every argument is an Array or ndarray with the same weak
type as before, that the globals the specialisation read are unchanged) and hands the buffers
to the executable's `call_exact`, whose native entry point checks dtype, shape and layout of
every buffer itself (compiler/backends/llvm/pycall.py). Whatever does not match, at any step,
returns `MISS` before anything ran, and `jit` takes its ordinary path (flatten, signature
key, cache lookup), which re-specialises where needed. So the fast path only ever runs the
specialisation the ordinary path would have chosen.
"""
import numpy as np

from .array import Array

MISS = object()
_ndarray = np.ndarray


def eligible(args, kwargs, static_nums, static_names, executable):
    """Whether a call may install a FastCall: positional Arrays/ndarrays only, an executable
    with a native exact-call entry."""
    return (not kwargs and not static_nums and not static_names
            and getattr(executable, "call_exact", None) is not None
            and all(type(a) is Array or type(a) is np.ndarray for a in args))


class FastCall:
    __slots__ = ("entry", "weak", "call", "consts", "rebuild")

    def __init__(self, entry, args, wrap):
        self.entry = entry
        self.weak = tuple(type(a) is Array and a.weak_type for a in args)
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
