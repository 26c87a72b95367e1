"""Looking at a function without running it: `make_jaxpr`, `eval_shape`, `ShapeDtypeStruct`,
`typeof` (of arrays, traced values and typed keys).

kiln has no jaxprs: `make_jaxpr(f)(*args)` specialises `f` for the arguments' abstract values
(as `jit` does, without compiling) and returns a `ClosedJaxpr` that holds kiln's SSA form and
prints it as Python source. `eval_shape` specialises the same way and returns the outputs'
`ShapeDtypeStruct`s. Arguments may be arrays, numbers, or anything with `shape` and `dtype`
(a `ShapeDtypeStruct`, whose dtype may be that of typed keys); only their abstract values are
used.
"""
import numpy as np

from .array import Array
from .tree_util import tree_flatten, tree_unflatten, tree_map
from .numpy._dtypes import prng_key
from . import staging
from .sharding_types import TypedAval, as_typed
from . import vma
from .compiler.ir import dtypes


class ShapeDtypeStruct:
    """An array's shape and dtype, without data (JAX's `jax.ShapeDtypeStruct`)."""
    __slots__ = ("shape", "dtype", "sharding", "weak_type")

    def __init__(self, shape, dtype, *, sharding=None, weak_type=False):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype if _is_key(dtype) else dtypes.canonicalize(np.dtype(dtype))
        self.sharding = sharding
        self.weak_type = bool(weak_type)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __eq__(self, other):
        return isinstance(other, ShapeDtypeStruct) and \
            (self.shape, self.dtype, self.weak_type) == (other.shape, other.dtype,
                                                         other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    @classmethod
    def like(cls, x):
        """The shape, dtype, weak type (and sharding, where it has one) of `x`: an array, a
        traced value, a scalar or another ShapeDtypeStruct."""
        a = typeof(x)
        return cls(a.shape, a.dtype, sharding=getattr(x, "sharding", None),
                   weak_type=a.weak_type)

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"


def _is_key(dtype):
    """Whether `dtype` is the dtype of typed keys (`random.key(0).dtype`, `key<fry>`)."""
    return getattr(dtype, "type", None) is prng_key


def _is_abstract(x):
    return not isinstance(x, (Array, np.ndarray, np.generic)) and \
        getattr(type(x), "_kiln_trace", None) is None and \
        hasattr(x, "shape") and hasattr(x, "dtype")


def _stand_in(x):
    """An Array with `x`'s abstract value and no storage (a broadcast zero), for a leaf that
    only has a shape and a dtype; other leaves as they are."""
    if not _is_abstract(x):
        return x
    if _is_key(x.dtype):   # typed keys: key data of zeros
        from ._random import PRNGKeyArray
        return PRNGKeyArray(_stand_in(ShapeDtypeStruct(tuple(x.shape) + (2,), np.uint32)))
    dtype = dtypes.canonicalize(np.dtype(x.dtype))
    a = object.__new__(Array)
    a._value = np.broadcast_to(np.zeros((), dtype), tuple(x.shape))
    a.weak_type = bool(getattr(x, "weak_type", False))
    return a


def stand_ins(args, kwargs):
    """`(args, kwargs)` with each abstract leaf (a `ShapeDtypeStruct`) replaced by its stand-in."""
    leaves, tree = tree_flatten((tuple(args), dict(kwargs)))
    return tree_unflatten(tree, [_stand_in(x) for x in leaves])


def stage_abstractly(fun, args, kwargs, static_argnums=()):
    args, kwargs = stand_ins(args, kwargs)
    st, _, _ = staging.stage_call(fun, args, kwargs, staging.StaticArgs(fun, static_argnums),
                                  api="given to kiln.make_jaxpr / eval_shape")
    return st


def _shapes(st):
    """The `ShapeDtypeStruct`s of a staging's outputs (of a typed key's shape and dtype for
    typed keys)."""
    from ._random import PRNGKeyArray
    out = tree_unflatten(st.out_tree, [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                                       for a in st.out_avals])
    return tree_map(lambda x: ShapeDtypeStruct(x.shape, x.dtype)
                    if isinstance(x, PRNGKeyArray) else x, out,
                    is_leaf=lambda x: isinstance(x, PRNGKeyArray))


def eval_shape(fun, *args, **kwargs):
    """The shapes and dtypes `fun(*args, **kwargs)` would return, as a pytree of
    `ShapeDtypeStruct`s; nothing is computed or compiled."""
    return _shapes(stage_abstractly(fun, args, kwargs))


class Jaxpr:
    """kiln's SSA form of a function, laid out as JAX lays out a jaxpr: `invars` (the
    function's flattened arguments), `constvars` (the inputs that carry the values it closes
    over, `ClosedJaxpr.consts`), `eqns` (each with `primitive`, `invars`, `outvars` and
    `params`; operands are SSA names or `kiln.extend.core.Literal`s) and `outvars`. The
    equations are kiln's: nested `jit` calls are inlined, and control flow holds its bodies as
    SSA functions in `params`. `fn` is the SSA function itself; printing prints it."""
    __slots__ = ("fn", "invars", "constvars")

    def __init__(self, fn, n_consts):
        n = len(fn.invars) - n_consts
        self.fn, self.invars, self.constvars = fn, fn.invars[:n], fn.invars[n:]

    eqns = property(lambda self: self.fn.eqns)
    outvars = property(lambda self: self.fn.outvars)
    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: self.fn.out_avals)

    def __str__(self):
        return str(self.fn)

    __repr__ = __str__


class ClosedJaxpr:
    """What `make_jaxpr` returns: kiln's SSA form of a function (`jaxpr`, a `Jaxpr` view of
    it) and the values it closes over (`consts`); printing it prints the SSA as Python
    source."""

    def __init__(self, fn, consts):
        self.consts = list(consts)
        self.jaxpr = Jaxpr(fn, len(self.consts))

    eqns = property(lambda self: self.jaxpr.eqns)
    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: list(self.jaxpr.out_avals))

    def pretty_print(self, **_):
        return str(self.jaxpr)

    def __str__(self):
        return str(self.jaxpr)

    __repr__ = __str__


def make_jaxpr(fun, static_argnums=(), axis_env=None, return_shape=False):
    """`make_jaxpr(f)(*args)`: `f`'s SSA form for arguments like `args` (JAX returns a jaxpr;
    kiln's equivalent is its SSA, printable as Python). With `return_shape=True` also the
    outputs' `ShapeDtypeStruct`s. `axis_env` (collective axis sizes) is accepted; kiln
    specialises collectives when a function runs under `pmap`, not here."""
    def make(*args, **kwargs):
        st = stage_abstractly(fun, args, kwargs, static_argnums)
        closed = ClosedJaxpr(st.fn, st.extra)
        return (closed, _shapes(st)) if return_shape else closed
    make.__name__ = f"make_jaxpr({staging.function_name(fun)})"
    return make


def typeof(x):
    """The abstract value of `x` (shape, dtype, weak type): `f32[3]`, with the sharding of
    its type (`.sharding`; `f32[8@X]` for an argument split over the Explicit mesh axis X:
    sharding_types.py), and inside a shard_map body the manual axes it varies over
    (`f32[2,2]{V:(i,j)}`, `.manual_axis_type.varying`: vma.py) or is unreduced / reduced over
    (`f32[4]{U:i}`, `{R:i}`). Typed keys (`kiln.random.key`) have their own: `key<fry>[]`
    (`_random.KeyAval`)."""
    from ._random import PRNGKeyArray
    if isinstance(x, PRNGKeyArray):
        return x.aval
    typed = as_typed(staging.leaf_aval(_stand_in(x), "kiln.typeof's argument")[0])
    axes = vma.in_order(vma.varying(x))
    partial = tuple(vma.in_order(a) for a in vma.partial_axes(x))
    return typed if not axes and not any(partial) else TypedAval(
        typed.shape, typed.dtype, typed.weak_type, typed.sharding, axes, partial)
