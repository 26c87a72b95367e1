"""`kiln.numpy.ufunc` and `frompyfunc`: NumPy's universal-function objects as JAX has them.

A `ufunc` wraps an elementwise function with NumPy's methods: `reduce`, `accumulate`, `at`
(`inplace=False` only: arrays are immutable), `reduceat` and `outer`, and the attributes `nin`,
`nout`, `nargs`, `identity`, `__name__`. As in JAX, a method is either given when the ufunc is
built (`jnp.add.reduce` is `jnp.sum`, `jnp.add.accumulate` is `jnp.cumsum`, `jnp.add.at` is
`.at[].add`) or derived from the binary function with a loop (`lax.fori_loop`/`lax.scan`), in
the order NumPy applies it. `frompyfunc(f, nin, nout, identity=...)` makes one from a scalar
function, applied elementwise through `jnp.vectorize`.

This module also rebinds JAX's fourteen ufunc names (`add`, `multiply`, `maximum`,
`logical_and`, `negative`, ...) to `ufunc` objects whose `__call__` is kiln's plain function
from `_ufuncs.py`, so calls stay as fast as before. Under `kiln.jit` the front end calls
kiln's library objects with the traced values (it does not walk their source), so a ufunc and
every method emit the same SSA as the functions they are made of.
"""
import operator

import numpy as np

from .. import lax
from ..compiler.ir import dtypes
from ..wrappers import user_facing
from ._core import (check_arraylike, as_array, canonicalize_axis, broadcast_to,
                    promote_args_inexact)
from . import _ufuncs, _reductions
from ._editing import append
from ._functional import vectorize
from ._shape import take
from ._reductions import _reduction, _cast_to_bool

__all__ = ["ufunc", "frompyfunc"]

_AT_INPLACE = ("Because JAX arrays are immutable, jnp.ufunc.at() cannot operate inplace like "
               "np.ufunc.at(). Instead, you can pass inplace=False and capture the result; e.g.\n"
               ">>> arr = jnp.add.at(arr, ind, val, inplace=False)\n")


def _one(x):
    """A rank-0 one of x's dtype (for finding a function's result dtype)."""
    return lax.full_like(x, 1, shape=())


def _moveaxis(x, source, destination):
    perm = [i for i in range(x.ndim) if i != source]
    perm.insert(destination, source)
    return lax.transpose(x, perm)


class ufunc:
    """A universal function: elementwise, with NumPy's methods (JAX's `jax.numpy.ufunc`)."""

    def __init__(self, func, /, nin, nout, *, name=None, nargs=None, identity=None, call=None,
                 reduce=None, accumulate=None, at=None, reduceat=None):
        self.__doc__ = func.__doc__
        self.__name__ = name or func.__name__
        self._func = func
        self._nin = operator.index(nin)
        self._nout = operator.index(nout)
        self._nargs = operator.index(nargs or nin)
        self._identity = identity
        self._call = call
        self._methods = {"reduce": reduce, "accumulate": accumulate, "at": at,
                         "reduceat": reduceat}

    nin = property(lambda self: self._nin)
    nout = property(lambda self: self._nout)
    nargs = property(lambda self: self._nargs)
    identity = property(lambda self: self._identity)

    def _key(self):
        return (self._func, self.__name__, self._identity, self._nin, self._nout, self._nargs)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, ufunc) and self._key() == other._key()

    def __repr__(self):
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=None):
        if out is not None:
            raise NotImplementedError(f"out argument of {self}")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}")
        if self._call is not None:
            return self._call(*args)
        check_arraylike(self.__name__, *args)
        return vectorize(self._func)(*args)

    def _binary_only(self, method):
        if self._nin != 2:
            raise ValueError(f"{method} only supported for binary ufuncs")
        if self._nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value")

    def _result_dtype(self, *args):
        return self._func(*(_one(a) for a in args)).dtype

    # ------------------------------------------------------------------------- reduce
    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
        """Reduce `a` along `axis` (None: all axes) with the binary function."""
        check_arraylike(f"{self.__name__}.reduce", a)
        self._binary_only("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        if initial is not None:
            check_arraylike(f"{self.__name__}.reduce", initial)
        if where is not None:
            check_arraylike(f"{self.__name__}.reduce", where)
            if self._identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an "
                                 f"identity, so to use a where mask one has to specify "
                                 f"'initial'.")
            where_dtype = as_array(where).dtype
            if where_dtype != dtypes.bool_:
                raise ValueError(f"where argument must have dtype=bool; got "
                                 f"dtype={where_dtype}")
        reduce = self._methods["reduce"] or self._reduce_via_loop
        return reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                      where=where)

    def _reduce_via_loop(self, arr, axis=0, dtype=None, keepdims=False, initial=None,
                         where=None):
        arr = as_array(arr)
        if initial is None:
            initial = self._identity
        if dtype is None:
            dtype = self._result_dtype(arr, arr)
        if where is not None:
            where = broadcast_to(where, arr.shape)
        if isinstance(axis, tuple):
            for ax in axis:
                canonicalize_axis(ax, arr.ndim)
            raise NotImplementedError("tuple of axes")
        if axis is None:
            final_shape = (1,) * arr.ndim if keepdims else ()
            arr = lax.reshape(arr, (arr.size,))
            if where is not None:
                where = lax.reshape(where, (where.size,))
            axis = 0
        else:
            axis = canonicalize_axis(axis, arr.ndim)
            final_shape = arr.shape[:axis] + ((1,) if keepdims else ()) + arr.shape[axis + 1:]
        arr = _moveaxis(arr, axis, 0)
        if where is not None:
            where = _moveaxis(where, axis, 0)
        if arr.shape[0] == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} "
                                 f"which has no identity")
            return lax.full(final_shape, initial, dtype)

        def body(i, val):
            new = self(val, arr[i].astype(dtype))
            return new if where is None else _ufuncs.where(where[i], new, val)
        if initial is None:
            start, value = 1, arr[0]
        else:
            start, value = 0, initial
        value = broadcast_to(as_array(value).astype(dtype), arr.shape[1:])
        result = lax.fori_loop(start, arr.shape[0], body, value)
        return lax.reshape(result, final_shape) if keepdims else result

    # --------------------------------------------------------------------- accumulate
    def accumulate(self, a, axis=0, dtype=None, out=None):
        """The running reduction along `axis`: `out[i] = f(out[i-1], a[i])`."""
        self._binary_only("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        accumulate = self._methods["accumulate"] or self._accumulate_via_scan
        return accumulate(a, axis=axis, dtype=dtype)

    def _accumulate_via_scan(self, arr, axis=0, dtype=None):
        check_arraylike(f"{self.__name__}.accumulate", arr)
        arr = as_array(arr)
        if dtype is None:
            dtype = self._result_dtype(arr, arr)
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        axis = canonicalize_axis(axis, arr.ndim)
        if arr.size == 0:
            return lax.full(arr.shape, 0, dtype)
        arr = _moveaxis(arr, axis, 0).astype(dtype)

        def step(carry, x):
            y = self(carry, x).astype(dtype)
            return y, y
        _, rest = lax.scan(step, arr[0], arr[1:])
        result = lax.concatenate([lax.expand_dims(arr[0], (0,)), rest], 0)
        return _moveaxis(result, 0, axis)

    # ----------------------------------------------------------------------------- at
    def at(self, a, indices, b=None, /, *, inplace=True):
        """`a` with the function applied at `indices` (with `b`), repeated indices applied
        once each; a new array (`inplace=False` is required)."""
        if inplace:
            raise NotImplementedError(_AT_INPLACE)
        at = self._methods["at"] or self._at_via_scan
        return at(a, indices) if b is None else at(a, indices, b)

    def _at_via_scan(self, a, indices, *args):
        check_arraylike(f"{self.__name__}.at", a, *args)
        dtype = self._result_dtype(a, *args)
        a = as_array(a).astype(dtype)
        args = tuple(as_array(arg).astype(dtype) for arg in args)
        indices = indices if isinstance(indices, tuple) else (indices,)
        if not indices:
            return a
        shapes = [np.shape(i) for i in indices if not isinstance(i, slice)]
        shape = shapes and np.broadcast_shapes(*shapes)
        if not shape:
            return a.at[indices].set(self(a.at[indices].get(), *args))
        if args:
            arg = args[0]
            arg = broadcast_to(arg, (*shape, *arg.shape[len(shape):]))
            args = (lax.reshape(arg, (int(np.prod(shape)), *arg.shape[len(shape):])),)
        flat = tuple(i if isinstance(i, slice) else broadcast_to(i, shape).ravel()
                     for i in indices)

        def step(carry, x):
            i, a = carry
            idx = tuple(ind if isinstance(ind, slice) else ind[i] for ind in flat)
            a = a.at[idx].set(self(a.at[idx].get(), *(arg[i] for arg in args)))
            return (i + 1, a), x
        n = next(len(i) for i in flat if not isinstance(i, slice))
        (_, a), _ = lax.scan(step, (0, a), None, n)
        return a

    # ----------------------------------------------------------------------- reduceat
    def reduceat(self, a, indices, axis=0, dtype=None, out=None):
        """Reductions over `a[indices[k]:indices[k+1]]` along `axis` (the last to the end;
        `a[indices[k]]` where `indices[k] >= indices[k+1]`)."""
        self._binary_only("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        reduceat = self._methods["reduceat"] or self._reduceat_via_loop
        return reduceat(a, indices, axis=axis, dtype=dtype)

    def _reduceat_via_loop(self, a, indices, axis=0, dtype=None):
        # As in JAX, `dtype` is accepted and the result keeps a's dtype.
        check_arraylike(f"{self.__name__}.reduceat", a, indices)
        a, indices = as_array(a), as_array(indices)
        if a.ndim == 0:
            raise ValueError(f"reduceat: a must have 1 or more dimension, got a.shape={a.shape}")
        if indices.ndim != 1:
            raise ValueError(f"reduceat: indices must be one-dimensional, got "
                             f"indices.shape={indices.shape}")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        axis = canonicalize_axis(axis, a.ndim)
        out = take(a, indices, axis=axis)
        bounds = lax.expand_dims(append(indices, a.shape[axis]),
                                 [d for d in range(out.ndim) if d != axis])
        start = lax.slice_in_dim(bounds, 0, bounds.shape[axis] - 1, axis=axis)
        end = lax.slice_in_dim(bounds, 1, bounds.shape[axis], axis=axis)

        def body(i, out):
            inside = _ufuncs.logical_and(i > start, i < end)
            return _ufuncs.where(inside, self(out, take(a, lax.expand_dims(i, (0,)),
                                                        axis=axis)), out)
        return lax.fori_loop(0, a.shape[axis], body, out)

    # -------------------------------------------------------------------------- outer
    def outer(self, A, B, /):
        """The function of every pair: shape `A.shape + B.shape`."""
        self._binary_only("outer")
        check_arraylike(f"{self.__name__}.outer", A, B)
        A, B = as_array(A), as_array(B)
        result = self(lax.reshape(A, (A.size, 1)), lax.reshape(B, (1, B.size)))
        return lax.reshape(result, A.shape + B.shape)


def frompyfunc(func, /, nin, nout, *, identity=None):
    """A `ufunc` from a scalar function of `nin` arguments returning `nout` values."""
    return ufunc(func, nin, nout, identity=identity)


# ------------------------------------------------------ the methods JAX gives its ufuncs

def _require_integer(a):
    if not (a.dtype == dtypes.bool_ or a.dtype.kind in "iu"):
        raise ValueError(f"integer argument required; got dtype={a.dtype}")
    return a


def _monoid(name, op, init, preproc, has_identity=True):
    def reduce(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
        return _reduction(a, name, op, init, has_identity=has_identity, preproc=preproc,
                          axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                          where_=where)
    return reduce


def _logsumexp(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
    """`logaddexp.reduce`: log(sum(exp(a))), the maximum taken out first. As in JAX, `dtype`
    is checked and otherwise unused."""
    if dtype is not None:
        _reductions._user_dtype(dtype, "jnp.logaddexp.reduce")
    check_arraylike("logsumexp", a)
    where = _reductions._check_where("logsumexp", where)
    (a,) = promote_args_inexact("logsumexp", a)
    dims = _reductions._reduction_dims(a, axis, "logsumexp")
    amax = _reductions.max(_ufuncs.real(a), axis=dims, keepdims=keepdims, where=where,
                           initial=-np.inf)
    amax = lax.stop_gradient(lax.select(_ufuncs.isfinite(amax), amax, lax.full_like(amax, 0)))
    amax_dims = amax if keepdims else lax.expand_dims(amax, dims)
    exp_a = lax.exp(lax.sub(a, amax_dims.astype(a.dtype)))
    sumexp = _reductions.sum(exp_a, axis=dims, keepdims=keepdims, where=where)
    result = lax.add(lax.log(sumexp), amax.astype(sumexp.dtype))
    return result if initial is None else _ufuncs.logaddexp(initial, result)


def _logsumexp2(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
    if dtype is not None:
        _reductions._user_dtype(dtype, "jnp.logaddexp2.reduce")
    check_arraylike("logsumexp2", a)
    ln2 = float(np.log(2))
    if initial is not None:
        initial = initial * ln2
    return _logsumexp(_ufuncs.multiply(a, ln2), axis=axis, keepdims=keepdims, where=where,
                      initial=initial) / ln2


def _bool_as_int(update):
    """JAX's `add.at`/`multiply.at`: booleans combine as int32, then convert back."""
    def at(a, indices, b):
        a = as_array(a)
        if a.dtype == dtypes.bool_:
            b = lax.convert_element_type(lax.convert_element_type(b, dtypes.bool_),
                                         dtypes.int32)
            return update(a.astype(dtypes.int32).at[indices], b).astype(dtypes.bool_)
        return update(a.at[indices], b)
    return at


def _subtract_at(a, indices, b):
    return as_array(a).at[indices].subtract(b)


_IDENTITY_AND_METHODS = {
    "add": dict(identity=0, reduce=_reductions.sum, accumulate=_reductions.cumsum,
                at=_bool_as_int(lambda ref, b: ref.add(b))),
    "multiply": dict(identity=1, reduce=_reductions.prod, accumulate=_reductions.cumprod,
                     at=_bool_as_int(lambda ref, b: ref.multiply(b))),
    "subtract": dict(identity=None, at=_subtract_at),
    "bitwise_and": dict(identity=-1, reduce=_monoid("reduce_bitwise_and", "and", -1,
                                                    _require_integer)),
    "bitwise_or": dict(identity=0, reduce=_monoid("reduce_bitwise_or", "or", 0,
                                                  _require_integer)),
    "bitwise_xor": dict(identity=0, reduce=_monoid("reduce_bitwise_xor", "xor", 0,
                                                   _require_integer)),
    "minimum": dict(identity=None, reduce=_monoid("min", "min", np.inf, None, False)),
    "maximum": dict(identity=None, reduce=_monoid("max", "max", -np.inf, None, False)),
    "logical_and": dict(identity=True, reduce=_monoid("reduce_logical_and", "and", True,
                                                      _cast_to_bool)),
    "logical_or": dict(identity=False, reduce=_monoid("reduce_logical_or", "or", False,
                                                      _cast_to_bool)),
    "logical_xor": dict(identity=False, reduce=_monoid("reduce_logical_xor", "xor", False,
                                                       _cast_to_bool)),
    "logaddexp": dict(identity=-np.inf, reduce=_logsumexp),
    "logaddexp2": dict(identity=-np.inf, reduce=_logsumexp2),
}


def _as_ufunc(name, nin, **methods):
    fn = user_facing(getattr(_ufuncs, name))
    u = ufunc(fn, nin, 1, name=name, call=fn, **methods)
    globals()[name] = u
    __all__.append(name)


for _name, _methods in _IDENTITY_AND_METHODS.items():
    _as_ufunc(_name, 2, **_methods)
_as_ufunc("negative", 1)
