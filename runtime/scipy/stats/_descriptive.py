"""The implementation of `kiln.scipy.stats`' `mode`, `rankdata` and `sem`, as JAX 0.10.2 has
them (re-exported by `kiln.scipy.stats`).

Both `mode` and `rankdata` sort the values along the axis and find the runs of equal values
(NaNs count as equal to each other): a run starts where a value differs from the one before
it. `mode` returns the value of the longest run (the smallest such value on ties) and its
length; `rankdata` gives each value its run's ranks ("min": the run's first 1-based position,
"max": its last, "average": their mean, "dense": the run's index, "ordinal": the value's own
position, ties kept in input order), in the default float dtype, and all NaN along a slice
holding a NaN. JAX supports only `nan_policy="propagate"` for these two ("omit" and "raise"
raise `NotImplementedError`); `sem` supports "propagate" and "omit".
"""
import typing

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...numpy._core import canonicalize_axis, check_arraylike, promote_args_inexact
from ...compiler.ir import dtypes

_NAN_POLICIES = ("propagate", "omit", "raise")
_RANK_METHODS = ("average", "min", "max", "dense", "ordinal")


class ModeResult(typing.NamedTuple):
    """What `mode` returns: the modal values and how often each occurs."""
    mode: typing.Any
    count: typing.Any


def _check_nan_policy(name, nan_policy):
    if nan_policy not in _NAN_POLICIES:
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of "
                         "{'propagate', 'omit', 'raise'}")
    if nan_policy == "omit":
        raise NotImplementedError(f"Logic for `nan_policy` of {nan_policy} is not implemented")
    if nan_policy == "raise":
        raise NotImplementedError(
            f"In order to best JIT compile `{name}`, we cannot know whether `x` contains nans. "
            f"Please check if nans exist in `x` outside of the `{name}` function.")


def _runs(s):
    """For values `s` sorted along the last axis: each position, where its run of equal
    values starts and where it ends (both positions on the last axis)."""
    n = s.shape[-1]
    same = (s[..., 1:] == s[..., :-1]) | (jnp.isnan(s[..., 1:]) & jnp.isnan(s[..., :-1]))
    edge = jnp.ones(s.shape[:-1] + (1,), dtype=bool)
    first = jnp.concatenate([edge, ~same], axis=-1)
    last = jnp.concatenate([~same, edge], axis=-1)
    position = lax.broadcasted_iota(np.int32, s.shape, s.ndim - 1)
    start = lax.cummax(jnp.where(first, position, 0), axis=s.ndim - 1)
    end = lax.cummin(jnp.where(last, position, n - 1), axis=s.ndim - 1, reverse=True)
    return position, first, start, end


def mode(a, axis: typing.Optional[int] = 0, nan_policy: str = "propagate",
         keepdims: bool = False):
    """The most common value along `axis` (all values if None) and its count, as a
    `ModeResult`; the smallest such value when several are equally common."""
    check_arraylike("mode", a)
    x = jnp.atleast_1d(a)
    _check_nan_policy("mode", nan_policy)
    if axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
        x = jnp.ravel(x)
    else:
        axis = canonicalize_axis(axis, x.ndim)
        out_shape = tuple(1 if keepdims and i == axis else size
                          for i, size in enumerate(x.shape) if keepdims or i != axis)
        x = jnp.moveaxis(x, axis, -1)
    if x.shape[-1] == 0:
        float_dtype = dtypes.default_float()
        return ModeResult(jnp.full(out_shape, np.nan, float_dtype),
                          jnp.zeros(out_shape, float_dtype))
    s = jnp.sort(x, axis=-1)
    position, _, start, _ = _runs(s)
    seen = position - start + 1          # how many of its run's values come up to here
    best = jnp.argmax(seen, axis=-1)
    value = jnp.take_along_axis(s, best[..., None], axis=-1)[..., 0]
    return ModeResult(value.reshape(out_shape), jnp.max(seen, axis=-1).reshape(out_shape))


def _ranks(a, method):
    order = jnp.argsort(a, axis=-1, stable=True)
    s = jnp.take_along_axis(a, order, axis=-1)
    position, first, start, end = _runs(s)
    if method == "ordinal":
        ranks = position + 1
    elif method == "dense":
        ranks = jnp.cumsum(first, axis=-1)
    elif method == "min":
        ranks = start + 1
    elif method == "max":
        ranks = end + 1
    else:
        ranks = (start + end) / 2 + 1
    ranks = ranks.astype(dtypes.default_float())
    ranks = jnp.take_along_axis(ranks, jnp.argsort(order, axis=-1), axis=-1)
    return jnp.where(jnp.any(jnp.isnan(a), axis=-1, keepdims=True), np.nan, ranks)


def rankdata(a, method: str = "average", *, axis: typing.Optional[int] = None,
             nan_policy: str = "propagate"):
    """The ranks of the values of `a` (flattened, or along `axis`), from 1, with ties
    ranked by `method`: "average", "min", "max", "dense" or "ordinal"."""
    check_arraylike("rankdata", a)
    _check_nan_policy("rankdata", nan_policy)
    if method not in _RANK_METHODS:
        raise ValueError(f"unknown method '{method}'")
    a = jnp.asarray(a)
    if axis is None:
        return _ranks(jnp.ravel(a), method)
    axis = canonicalize_axis(axis, a.ndim)
    return jnp.moveaxis(_ranks(jnp.moveaxis(a, axis, -1), method), -1, axis)


def sem(a, axis: typing.Optional[int] = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False):
    """The standard error of the mean along `axis` (all values if None): the standard
    deviation (with `ddof`) over the square root of the number of values; `nan_policy="omit"`
    leaves NaNs out of both."""
    (b,) = promote_args_inexact("sem", a)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return b.std(axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(size).astype(b.dtype)
    if nan_policy == "omit":
        count = jnp.sum(~jnp.isnan(b), axis, keepdims=keepdims)
        return (jnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims)
                / jnp.sqrt(count).astype(b.dtype))
    raise ValueError(f"{nan_policy} is not supported")
