"""sort: a stable (optionally) multi-operand sort along one dimension.

The first `num_keys` operands are keys compared lexicographically; every operand is permuted
the same way. Floating-point keys are compared as JAX's comparator does after canonicalising
them: -0.0 equals 0.0 (a stable sort keeps their order) and every NaN is one NaN, sorted last
(as NumPy). Complex keys compare by real part, then imaginary part, each that way (JAX's
order; NumPy instead puts R + nanj after every R + Rj).

Batched, every operand carries its batch on one axis (the first batched operand's) and the
sorted dimension is renumbered around it: one sort for the whole batch.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from .core import register, JVP, VJP, BATCH
from .rule_forms import tangent_rule, cotangent_rule
from .structural import around, align_batch_axes


def _sort_eval(*xs, dimension, is_stable=True, num_keys=1):
    if not xs:
        raise TypeError("sort requires at least one operand")
    if any(x.shape != xs[0].shape for x in xs):
        raise TypeError("Arguments to sort must have equal shapes, got: "
                        + " ".join(str(x.shape) for x in xs))
    if not 0 <= dimension < xs[0].ndim:
        raise ValueError(f"axis {dimension} is out of bounds for array of dimension "
                         f"{xs[0].ndim}")
    if not 1 <= num_keys <= len(xs):
        raise ValueError(f"num_keys={num_keys} must be between 1 and len(operand)={len(xs)}")
    return tuple(ShapedArray(x.shape, x.dtype, x.weak_type) for x in xs)


def _total_order_key(x):
    """An integer key ordering floats with -0.0 == 0.0 and NaNs (all equal) last."""
    if x.dtype.kind != "f":
        return x
    bits = x.dtype.itemsize * 8
    x = np.where(np.isnan(x), np.asarray(np.nan, x.dtype), x)  # one canonical (positive) NaN
    x = np.where(x == 0, np.zeros((), x.dtype), x)  # -0.0 -> 0.0
    i = x.view(np.dtype(f"i{x.dtype.itemsize}")).astype(np.int64)
    mask = np.int64((1 << (bits - 1)) - 1)
    return np.where(i < 0, i ^ mask, i)


def _order_keys(x):
    """The keys one sort operand contributes: (real, imag) for complex numbers."""
    if x.dtype.kind == "c":
        return [_total_order_key(x.real), _total_order_key(x.imag)]
    return [_total_order_key(x)]


def _sort(*xs, dimension, is_stable=True, num_keys=1):
    keys = [k for x in xs[:num_keys] for k in _order_keys(x)]
    moved = [np.moveaxis(k, dimension, -1) for k in keys]
    if len(moved) == 1:
        perm = np.argsort(moved[0], axis=-1, kind="stable")
    else:
        perm = np.lexsort(moved[::-1], axis=-1)
    perm = np.moveaxis(perm, -1, dimension)
    return tuple(np.take_along_axis(x, perm, axis=dimension) for x in xs)


sort = register("sort", _sort_eval, _sort, multiple_results=True)


# ---------------------------------------------------------------------------- derivative rules
# Sorting permutes: tangents are permuted like the operands (sorted along with the keys), and
# the VJP applies the inverse permutation: sorting the cotangents by the forward permutation
# (the sorted positions of an iota) puts each back where its operand came from.


def _sort_jvp(primals, tangents, outs, *, dimension, is_stable=True, num_keys=1):
    carried = [i for i, t in enumerate(tangents) if t is not None]
    sorted_ = E.sort(*primals[:num_keys], *[tangents[i] for i in carried], dimension=dimension,
                     is_stable=is_stable, num_keys=num_keys)
    out = [None] * len(primals)
    for j, i in enumerate(carried):
        out[i] = sorted_[num_keys + j]
    return out


def _sort_vjp(cts, primals, outs, *, dimension, is_stable=True, num_keys=1):
    shape = E.aval(primals[0]).shape
    index = np.int32 if shape[dimension] < np.iinfo(np.int32).max else np.int64
    iota = E.iota(dtype=np.dtype(index), shape=shape, dimension=dimension)
    perm = E.sort(*primals[:num_keys], iota, dimension=dimension, is_stable=is_stable,
                  num_keys=num_keys)[-1]
    carried = [i for i, c in enumerate(cts) if c is not None and E.is_float(primals[i])]
    if not carried:
        return [None] * len(primals)
    back = E.sort(perm, *[cts[i] for i in carried], dimension=dimension, is_stable=True,
                  num_keys=1)
    out = [None] * len(primals)
    for j, i in enumerate(carried):
        out[i] = back[1 + j]
    return out


JVP[sort] = tangent_rule(_sort_jvp)
VJP[sort] = cotangent_rule(_sort_vjp)


def _sort_batch(args, dims, *, dimension, is_stable=True, num_keys=1):
    d, xs = align_batch_axes(args, dims)
    outs = E.sort(*xs, dimension=around((dimension,), d)[0], is_stable=is_stable,
                  num_keys=num_keys)
    return list(outs), [d] * len(outs)


BATCH[sort] = _sort_batch
