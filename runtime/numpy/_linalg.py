"""`kiln.numpy` products and contractions: dot, matmul, matvec, vecmat, vdot, vecdot, inner,
outer, tensordot, einsum, kron, cross.

Every contraction ends in one `lax.dot_general`. The result dtype is JAX's promotion of the
operands (weak types included: `jnp.dot(2.0, 3)` is a weak float32), or
`preferred_element_type` when given. Operands are converted to that dtype before the
contraction; boolean products are computed in int32 and compared with zero (XLA's OR-of-ANDs).
`precision` is accepted and ignored: kiln always multiplies at the full precision of the
dtype. `einsum` parses its subscripts
(`...`, implicit output, the interleaved operand/sublist form), extracts diagonals for indices
repeated within one operand, sums indices that appear once, and contracts operands pairwise
(greedily by the size of the intermediate, or in a given path).
"""
import collections
import math
import operator
import string

import numpy as np

from .. import lax
from ..array import to_array
from ..compiler.ir import dtypes
from ._core import (check_arraylike, canonicalize_axis, canonical_dtype, promote_dtypes,
                    broadcast_shapes, broadcast_to, _convert)
from . import _shape, _ufuncs
from ..sharding_types import out_sharding_keyword

__all__ = ["dot", "matmul", "matvec", "vecmat", "vdot", "vecdot", "inner", "outer",
           "tensordot", "einsum", "kron", "cross"]


# ------------------------------------------------------------------------------- helpers

def _arrs(fun_name, *xs):
    check_arraylike(fun_name, *xs)
    return [to_array(x, fun_name) for x in xs]


def _out_type(fun_name, xs, preferred_element_type):
    """(dtype, weak_type) of a contraction's result."""
    if preferred_element_type is None:
        return dtypes.result_type(*((x.dtype, x.weak_type) for x in xs))
    return canonical_dtype(preferred_element_type, fun_name), False


# Accumulation dtype of a product whose result has the key dtype.
_ACCUMULATE = {dtypes.bool_: dtypes.int32}


def _as_dtype(x, dtype):
    return x if x.dtype == dtype else lax.convert_element_type(x, dtype)


def _contract(lhs, rhs, dimension_numbers, out_dtype, weak, dot_general=None, precision=None):
    """lax.dot_general with kiln.numpy's result dtype (see the module docstring); or
    `dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type=...)`, the
    function einsum's `_dot_general` names, on the operands in the accumulation dtype."""
    acc = _ACCUMULATE.get(out_dtype, out_dtype)
    if dot_general is None:
        out = lax.dot_general(_as_dtype(lhs, acc), _as_dtype(rhs, acc), dimension_numbers)
    else:
        out = dot_general(_as_dtype(lhs, acc), _as_dtype(rhs, acc), dimension_numbers,
                          precision, preferred_element_type=acc)
    if out_dtype == dtypes.bool_:
        out = lax.ne(out, np.int32(0))
    return _convert(out, out_dtype, weak)


def _check_contracting(fun_name, a, b, a_axes, b_axes):
    sa = tuple(a.shape[i] for i in a_axes)
    sb = tuple(b.shape[i] for i in b_axes)
    if sa != sb:
        raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                        f"got {sa} and {sb}. ({fun_name} of arrays with shapes {a.shape} and "
                        f"{b.shape})")


def _aval_str(x):
    return f"{x.dtype}[{','.join(map(str, x.shape))}]"


# ------------------------------------------------------------------------- dot, matmul

@out_sharding_keyword
def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """NumPy's dot: a product over the last axis of `a` and the second-to-last of `b` (the
    only axis of a 1-D `b`); scalars multiply."""
    a, b = _arrs("dot", a, b)
    out_dtype, weak = _out_type("dot", (a, b), preferred_element_type)
    if a.ndim == 0 or b.ndim == 0:
        contract = ((), ())
    else:
        contract = ((a.ndim - 1,), (0 if b.ndim == 1 else b.ndim - 2,))
    _check_contracting("dot", a, b, *contract)
    return _contract(a, b, (contract, ((), ())), out_dtype, weak)


@out_sharding_keyword
def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """Matrix product with broadcast batch axes; a 1-D operand is a vector (a row on the left,
    a column on the right) whose axis is removed from the result."""
    a, b = _arrs("matmul", a, b)
    for i, x in enumerate((a, b)):
        if x.ndim < 1:
            raise ValueError(f"matmul input operand {i} must have ndim at least 1, but it has "
                             f"ndim {x.ndim}")
    out_dtype, weak = _out_type("matmul", (a, b), preferred_element_type)
    a_mat, b_mat = a.ndim > 1, b.ndim > 1
    a_batch, b_batch = a.shape[:-2] if a_mat else (), b.shape[:-2] if b_mat else ()
    nb = max(len(a_batch), len(b_batch))
    a_batch = (None,) * (nb - len(a_batch)) + a_batch
    b_batch = (None,) * (nb - len(b_batch)) + b_batch
    # JAX's plan: size-1 batch axes are squeezed and the other side's axis becomes free,
    # so broadcasting never materialises a copy.
    a_squeeze, b_squeeze, both, a_bdims, b_bdims = [], [], [], [], []
    idx_batch, idx_a, idx_b = [], [], []
    for i, (ba, bb) in enumerate(zip(a_batch, b_batch)):
        a_pos = len(idx_batch) + len(idx_a) + len(a_squeeze)
        b_pos = len(idx_batch) + len(idx_b) + len(b_squeeze)
        if ba is None:
            idx_b.append(i)
        elif bb is None:
            idx_a.append(i)
        elif ba == 1 and bb == 1:
            a_squeeze.append(a_pos)
            b_squeeze.append(b_pos)
            both.append(i)
        elif ba == 1:
            idx_b.append(i)
            a_squeeze.append(a_pos)
        elif bb == 1:
            idx_a.append(i)
            b_squeeze.append(b_pos)
        elif ba == bb:
            a_bdims.append(len(idx_batch) + len(idx_a))
            b_bdims.append(len(idx_batch) + len(idx_b))
            idx_batch.append(i)
        else:
            raise ValueError(f"Incompatible types for matmul arguments: {_aval_str(a)} and "
                             f"{_aval_str(b)} (batch dimensions {a.shape[:-2]} and "
                             f"{b.shape[:-2]} do not broadcast)")
    if a_mat:
        idx_a.append(nb)
    if b_mat:
        idx_b.append(nb + a_mat)
    order = idx_batch + idx_a + idx_b
    perm = sorted(range(len(order)), key=order.__getitem__)
    a2, b2 = lax.squeeze(a, a_squeeze), lax.squeeze(b, b_squeeze)
    contract = ((a2.ndim - 1,), (b2.ndim - 1 - b_mat,))
    _check_contracting("matmul", a, b, (a.ndim - 1,), (b.ndim - 1 - b_mat,))
    out = _contract(a2, b2, (contract, (tuple(a_bdims), tuple(b_bdims))), out_dtype, weak)
    out = lax.transpose(out, perm)
    return lax.expand_dims(out, tuple(both)) if both else out


def _core_dims(fun_name, x, n, signature):
    if x.ndim < n:
        raise ValueError(f"{fun_name}: input with shape {x.shape} does not have enough "
                         f"dimensions for all core dimensions of the signature {signature}")


def matvec(x1, x2, /):
    """Matrix-vector products over broadcast batch axes: (..., n, m), (..., m) -> (..., n)."""
    x1, x2 = _arrs("matvec", x1, x2)
    _core_dims("matvec", x1, 2, "(n,m),(m)->(n)")
    _core_dims("matvec", x2, 1, "(n,m),(m)->(n)")
    out = matmul(x1, lax.expand_dims(x2, (x2.ndim,)))
    return lax.squeeze(out, (out.ndim - 1,))


def vecmat(x1, x2, /):
    """Conjugated-vector-matrix products: (..., n), (..., n, m) -> (..., m)."""
    x1, x2 = _arrs("vecmat", x1, x2)
    _core_dims("vecmat", x1, 1, "(n),(n,m)->(m)")
    _core_dims("vecmat", x2, 2, "(n),(n,m)->(m)")
    out = matmul(lax.expand_dims(_ufuncs.conj(x1), (x1.ndim - 1,)), x2)
    return lax.squeeze(out, (out.ndim - 2,))


def vdot(a, b, *, precision=None, preferred_element_type=None):
    """Dot product of the flattened arrays, conjugating a complex first argument."""
    a, b = _arrs("vdot", a, b)
    if dtypes.is_complex(a.dtype):
        a = lax.conj(a)
    a, b = _shape.ravel(a), _shape.ravel(b)
    _check_contracting("vdot", a, b, (0,), (0,))
    return dot(a, b, preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """Vector dot products (first argument conjugated) along `axis`, other axes broadcast."""
    x1, x2 = _arrs("vecdot", x1, x2)
    ax1 = canonicalize_axis(axis, x1.ndim, "vecdot")
    ax2 = canonicalize_axis(axis, x2.ndim, "vecdot")
    if x1.shape[ax1] != x2.shape[ax2]:
        raise ValueError(f"axes must match; got shapes {x1.shape} and {x2.shape} with "
                         f"axis={axis}")
    out_dtype, weak = _out_type("vecdot", (x1, x2), preferred_element_type)
    x1 = _shape.moveaxis(x1, ax1, -1)
    x2 = _shape.moveaxis(x2, ax2, -1)
    if dtypes.is_complex(x1.dtype):
        x1 = lax.conj(x1)
    batch = broadcast_shapes(x1.shape[:-1], x2.shape[:-1])
    x1 = broadcast_to(x1, batch + x1.shape[-1:])
    x2 = broadcast_to(x2, batch + x2.shape[-1:])
    nb = tuple(range(len(batch)))
    return _contract(x1, x2, (((len(batch),), (len(batch),)), (nb, nb)), out_dtype, weak)


def inner(a, b, *, precision=None, preferred_element_type=None):
    """Sum-product over the last axes of `a` and `b` (scalars multiply)."""
    a, b = _arrs("inner", a, b)
    if a.ndim == 0 or b.ndim == 0:
        if preferred_element_type is not None:
            dtype = canonical_dtype(preferred_element_type, "inner")
            a, b = _as_dtype(a, dtype), _as_dtype(b, dtype)
        return _ufuncs.multiply(a, b)
    return tensordot(a, b, (-1, -1), preferred_element_type=preferred_element_type)


def outer(a, b, out=None):
    """Outer product of the flattened arrays."""
    if out is not None:
        raise TypeError("outer: the 'out' argument is not supported; kiln arrays are "
                        "immutable, use the returned array")
    a, b = promote_dtypes(*_arrs("outer", a, b))
    a, b = _shape.ravel(a), _shape.ravel(b)
    return _ufuncs.multiply(lax.expand_dims(a, (1,)), lax.expand_dims(b, (0,)))


def _tensordot_axes(axes, a, b):
    if isinstance(axes, (tuple, list)) and len(axes) == 2:
        ax1, ax2 = axes
        if all(isinstance(v, (int, np.integer)) for v in (ax1, ax2)):
            return (canonicalize_axis(ax1, a.ndim, "tensordot"),), \
                (canonicalize_axis(ax2, b.ndim, "tensordot"),)
        if isinstance(ax1, (tuple, list)) and isinstance(ax2, (tuple, list)):
            if len(ax1) != len(ax2):
                raise TypeError(f"tensordot requires axes lists to have equal length, got "
                                f"{ax1} and {ax2}.")
            return (tuple(canonicalize_axis(i, a.ndim, "tensordot") for i in ax1),
                    tuple(canonicalize_axis(i, b.ndim, "tensordot") for i in ax2))
        raise TypeError(f"tensordot requires both axes lists to be either ints, tuples or "
                        f"lists, got {ax1} and {ax2}")
    try:
        n = operator.index(axes)
    except TypeError:
        raise TypeError("tensordot axes argument must be an int, a pair of ints, or a pair of "
                        "lists/tuples of ints.") from None
    if n < 0:
        raise ValueError(f"tensordot: the number of axes must be non-negative, got {n}")
    if n > min(a.ndim, b.ndim):
        raise TypeError(f"Number of tensordot axes (axes {n}) exceeds input ranks ({a.shape} "
                        f"and {b.shape})")
    return tuple(range(a.ndim - n, a.ndim)), tuple(range(n))


@out_sharding_keyword
def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None,
              out_sharding=None):
    """Sum-product over the given axes: an int n (last n of `a`, first n of `b`) or a pair
    of axis lists."""
    a, b = _arrs("tensordot", a, b)
    out_dtype, weak = _out_type("tensordot", (a, b), preferred_element_type)
    ca, cb = _tensordot_axes(axes, a, b)
    _check_contracting("tensordot", a, b, ca, cb)
    return _contract(a, b, ((ca, cb), ((), ())), out_dtype, weak)


def kron(a, b):
    """Kronecker product: blocks of `b` scaled by the elements of `a`."""
    a, b = promote_dtypes(*_arrs("kron", a, b))
    nd = max(a.ndim, b.ndim)
    a = lax.expand_dims(a, tuple(range(nd - a.ndim)))
    b = lax.expand_dims(b, tuple(range(nd - b.ndim)))
    prod = _ufuncs.multiply(lax.expand_dims(a, tuple(range(1, 2 * nd, 2))),
                            lax.expand_dims(b, tuple(range(0, 2 * nd, 2))))
    return lax.reshape(prod, tuple(i * j for i, j in zip(a.shape, b.shape)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 2- or 3-element vectors along the given axes (2-D vectors give the
    z component only when both are 2-D)."""
    a, b = _arrs("cross", a, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a = _shape.moveaxis(a, axisa, -1)
    b = _shape.moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(f"Dimension must be either 2 or 3 for cross product, got vectors of "
                         f"length {a.shape[-1]} and {b.shape[-1]}")
    mul, sub = _ufuncs.multiply, _ufuncs.subtract
    a0, a1, b0, b1 = (lax.index_in_dim(v, i, v.ndim - 1, keepdims=False)
                      for v, i in ((a, 0), (a, 1), (b, 0), (b, 1)))
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return sub(mul(a0, b1), mul(a1, b0))
    a2 = lax.index_in_dim(a, 2, a.ndim - 1, False) if a.shape[-1] == 3 else lax.full_like(a0, 0)
    b2 = lax.index_in_dim(b, 2, b.ndim - 1, False) if b.shape[-1] == 3 else lax.full_like(b0, 0)
    c = _shape.stack([sub(mul(a1, b2), mul(a2, b1)), sub(mul(a2, b0), mul(a0, b2)),
                      sub(mul(a0, b1), mul(a1, b0))])
    c = _convert(c, c.dtype, False)  # JAX builds the result with jnp.array: never weak
    return _shape.moveaxis(c, 0, axisc)


# ------------------------------------------------------------------------------- einsum
#
# Labels are one-character strings for named indices and (None, r) tuples for the axes an
# ellipsis stands for, r counting from the right, so that ellipsis axes broadcast NumPy-style.

def _label_text(label):
    return "'...'" if isinstance(label, tuple) else repr(label)


def _split_ellipsis(term, where):
    """(before, has_ellipsis, after) of one subscript term."""
    if "." not in term:
        return term, False, ""
    if term.count(".") != 3 or "..." not in term:
        raise ValueError(f"Invalid Ellipses in einsum subscripts {where}.")
    before, after = term.split("...")
    return before, True, after


def _parse_term(term, ndim, pos):
    before, has_ell, after = _split_ellipsis(term, f"'{term}'")
    n_ell = ndim - len(before) - len(after)
    if not has_ell and n_ell != 0 or n_ell < 0:
        raise ValueError(f"Einstein sum subscript '{term}' does not contain the correct number "
                         f"of indices for operand {pos} (which has {ndim} dimensions).")
    return list(before) + [(None, r) for r in reversed(range(n_ell))] + list(after)


def _parse_output(spec, terms):
    n_ell = max((sum(isinstance(l, tuple) for l in t) for t in terms), default=0)
    ellipsis = [(None, r) for r in reversed(range(n_ell))]
    if spec is None:
        counts = collections.Counter(l for t in terms for l in t if not isinstance(l, tuple))
        return ellipsis + sorted(l for l, c in counts.items() if c == 1)
    before, _, after = _split_ellipsis(spec, f"'->{spec}'")
    inputs = {l for t in terms for l in t}
    for c in before + after:
        if c not in inputs:
            raise ValueError(f"Output character '{c}' did not appear in the input")
        if (before + after).count(c) > 1:
            raise ValueError(f"Output character '{c}' appeared more than once in the output.")
    return list(before) + (ellipsis if "." in spec else []) + list(after)


def _parse(spec, ndims):
    """(input label lists, output label list) of an einsum specification string."""
    spec = spec.replace(" ", "")
    if "-" in spec or ">" in spec:
        if spec.count("-") > 1 or spec.count(">") > 1 or "->" not in spec:
            raise ValueError("Subscripts can only contain one '->'.")
        inputs, output = spec.split("->")
    else:
        inputs, output = spec, None
    terms = inputs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(f"Number of einsum subscripts, {len(terms)}, must be equal to the "
                         f"number of operands, {len(ndims)}.")
    terms = [_parse_term(t, nd, i) for i, (t, nd) in enumerate(zip(terms, ndims))]
    return terms, _parse_output(output, terms)


def _sublist_spec(sublist):
    out = []
    for s in sublist:
        if s is Ellipsis:
            out.append("...")
        else:
            i = operator.index(s)
            if not 0 <= i < len(string.ascii_letters):
                raise ValueError(f"einsum: subscript {i} is not within the valid range "
                                 f"[0, {len(string.ascii_letters)})")
            out.append(string.ascii_letters[i])
    return "".join(out)


def _interleaved(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [output_sublist]) as (spec, operands)."""
    k = len(args) // 2
    spec = ",".join(_sublist_spec(s) for s in args[1:2 * k:2])
    if len(args) % 2:
        spec += "->" + _sublist_spec(args[-1])
    return spec, list(args[0:2 * k:2])


def _label_sizes(arrays, terms):
    sizes = {}
    for pos, (x, labels) in enumerate(zip(arrays, terms)):
        for label, d in zip(labels, x.shape):
            prev = sizes.get(label)
            if prev is None or prev == 1:
                sizes[label] = d
            elif d not in (1, prev):
                raise ValueError(f"Size of label {_label_text(label)} for operand {pos} ({d}) "
                                 f"does not match previous terms ({prev}).")
    return sizes


def _collapse_repeats(x, labels, pos):
    """Replace each index repeated within one operand by its diagonal."""
    while len(set(labels)) != len(labels):
        label = next(l for l in labels if labels.count(l) > 1)
        i, j = [k for k, l in enumerate(labels) if l == label][:2]
        if x.shape[i] != x.shape[j]:
            raise ValueError(f"einsum: dimensions in operand {pos} for collapsing index "
                             f"{_label_text(label)} don't match ({x.shape[i]} != "
                             f"{x.shape[j]})")
        x = _shape.diagonal(x, 0, i, j)
        labels = [l for k, l in enumerate(labels) if k not in (i, j)] + [label]
    return x, labels


def _sum_labels(x, labels, drop):
    """Sum x over the axes whose labels are in `drop`."""
    axes = tuple(i for i, l in enumerate(labels) if l in drop)
    if not axes:
        return x, labels
    x = (lax.reduce_or if x.dtype == dtypes.bool_ else lax.reduce_sum)(x, axes)
    return x, [l for l in labels if l not in drop]


def _pair(lhs, rhs, keep, out_dtype, hook):
    """Contract two labelled operands, keeping the labels in `keep` (with `hook`, a
    (dot_general, precision) pair, or None)."""
    (x, la), (y, lb) = lhs, rhs
    x, la = _sum_labels(x, la, {l for l in la if l not in keep and l not in lb})
    y, lb = _sum_labels(y, lb, {l for l in lb if l not in keep and l not in la})
    batch = [l for l in la if l in lb and l in keep]
    contract = [l for l in la if l in lb and l not in keep]
    dims = ((tuple(la.index(l) for l in contract), tuple(lb.index(l) for l in contract)),
            (tuple(la.index(l) for l in batch), tuple(lb.index(l) for l in batch)))
    out = _contract(x, y, dims, out_dtype, False, *(hook or ()))
    used = set(batch) | set(contract)
    return out, batch + [l for l in la if l not in used] + [l for l in lb if l not in used]


def _greedy_pair(ops, output, sizes):
    """The pair of operands whose contraction has the smallest result (first on ties)."""
    best = None
    for i in range(len(ops)):
        for j in range(i + 1, len(ops)):
            keep = set(output).union(*(ops[k][1] for k in range(len(ops)) if k not in (i, j)))
            cost = math.prod(sizes[l] for l in set(ops[i][1]) | set(ops[j][1]) if l in keep)
            if best is None or cost < best[0]:
                best = (cost, (i, j))
    return best[1]


def _path(optimize, n):
    """The explicit contraction steps `optimize` asks for (empty: contract greedily)."""
    if optimize is False:
        return [tuple(range(n))]  # one step: left to right
    if isinstance(optimize, (list, tuple)):
        return [tuple(operator.index(i) for i in s) for s in optimize if s != "einsum_path"]
    if optimize is True or isinstance(optimize, str):
        return []
    raise TypeError(f"einsum: optimize must be a bool, a strategy name or a contraction path, "
                    f"got {optimize!r}")


def _contract_all(ops, output, sizes, steps, out_dtype, hook=None):
    """Contract labelled operands: each step names positions in the current list and appends
    its result at the end (opt_einsum's convention); without steps, greedily by pairs."""
    ops, steps = list(ops), list(steps)
    while len(ops) > 1:
        step = steps.pop(0) if steps else _greedy_pair(ops, output, sizes)
        picked = [ops[i] for i in step]
        ops = [op for k, op in enumerate(ops) if k not in step]
        acc = picked[0]
        for k, nxt in enumerate(picked[1:], 2):
            keep = set(output).union(*(l for _, l in ops), *(l for _, l in picked[k:]))
            acc = _pair(acc, nxt, keep, out_dtype, hook)
        ops.append(acc)
    return ops[0]


@out_sharding_keyword
def einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None, _dot_general=lax.dot_general, out_sharding=None):
    """Einstein summation: `einsum('ij,jk->ik', a, b)`, with `...`, implicit output
    (indices appearing once, sorted) and the interleaved form `einsum(a, [0, 1], b, [1, 2])`.
    `optimize` may be True/False, a strategy name (greedy contraction order) or an explicit
    path such as `[(0, 1), (0, 1)]`. `_dot_general` is JAX's hook: the function each pairwise
    contraction calls in place of `lax.dot_general` (flax's attention passes its own)."""
    if out is not None:
        raise TypeError("einsum: the 'out' argument is not supported; kiln arrays are "
                        "immutable, use the returned array")
    if isinstance(subscripts, str):
        spec, operands = subscripts, list(operands)
    else:
        spec, operands = _interleaved((subscripts,) + operands)
    arrays = _arrs("einsum", *operands)
    terms, output = _parse(spec, [x.ndim for x in arrays])
    sizes = _label_sizes(arrays, terms)
    out_dtype, weak = _out_type("einsum", arrays, preferred_element_type)
    ops = []
    for pos, (x, labels) in enumerate(zip(arrays, terms)):
        if dtypes.result_type((x.dtype, False), (out_dtype, False))[0] == out_dtype:
            x = _as_dtype(x, out_dtype)
        x, labels = _collapse_repeats(x, labels, pos)
        stretched = tuple(i for i, l in enumerate(labels) if x.shape[i] == 1 and sizes[l] != 1)
        x = lax.squeeze(x, stretched)
        ops.append((x, [l for i, l in enumerate(labels) if i not in stretched]))
    hook = None if _dot_general is lax.dot_general else (_dot_general, precision)
    x, labels = _contract_all(ops, output, sizes, _path(optimize, len(ops)), out_dtype, hook)
    x, labels = _sum_labels(x, labels, set(labels) - set(output))
    x = lax.transpose(x, tuple(labels.index(l) for l in output))
    return _convert(_as_dtype(x, out_dtype), out_dtype, weak)
