"""Reductions and scans: reduce_{sum,prod,max,min,and,or,xor}, argmax/argmin, and the cumulative
family cumsum/cumprod/cummax/cummin/cumlogsumexp.

`axes` are static sorted tuples of non-negative ints; reductions drop those axes (keepdims is a
reshape above). Reductions of empty axes give the monoid's identity (0, 1, -inf/min, +inf/max,
True, False), as XLA does.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from . import batching as B
from .core import register, check_dtype_kinds, JVP, VJP, BATCH
from .rule_forms import tangent_rule, cotangent_rule

NUMBER, ANY, ORDERED, FLOAT, LOGICAL = "iufc", "biufc", "biuf", "f", "biu"
_KIND_TEXT = {NUMBER: "subtypes of number", ANY: "any dtype", FLOAT: "subtypes of floating",
              ORDERED: "subtypes of integer, floating, bool"}


def _identity_max(dtype):
    if dtype.kind in "fc":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def _identity_min(dtype):
    if dtype.kind in "fc":
        return np.inf
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max


def winning_zeros(x, negative):
    """Where `x` holds the zero that max (`negative` False: 0.0) or min (True: -0.0) returns
    when both zeros meet: XLA orders -0.0 below 0.0, NumPy returns either."""
    return (x == 0) & (np.signbit(x) == negative)


def order_zeros(out, won, negative):
    """NumPy's max/min results `out` with XLA's zeros: a zero result is the winning zero where
    one of the zeros combined into it was (`won`), else the other."""
    if out.dtype.kind != "f":
        return out
    winner = np.array(-0.0 if negative else 0.0, out.dtype)
    return np.where(out == 0, np.where(won, winner, -winner), out).astype(out.dtype)


def _zeros_ordered(combine, any_of, negative):
    """NumPy's max/min-like `combine(x, axis)` with XLA's zeros; `any_of(mask, axis)` combines
    a mask the same way (np.any for reductions, logical_or.accumulate for scans)."""
    def fn(x, axis):
        out = np.asarray(combine(x, axis=axis))
        if x.dtype.kind != "f":
            return out
        return order_zeros(out, any_of(winning_zeros(x, negative), axis=axis), negative)
    return fn


def check_reduction_axes(x, axes):
    """JAX's errors for reduction axes (rank-checked, no duplicates)."""
    if any(not 0 <= a < x.ndim for a in axes):
        raise ValueError(f"reduction axes {tuple(axes)} contains out-of-bounds indices for "
                         f"{x.dtype}[{','.join(map(str, x.shape))}].")
    if len(set(axes)) != len(axes):
        raise ValueError(f"duplicate value in 'axes' of reduction: {tuple(axes)}")


def _check_logical(name, x):
    if x.dtype.kind not in "biu":
        raise TypeError(f"logical reduction requires operand dtype bool or int, got {x.dtype}.")


def _logical_reduce(logical, bitwise):
    def reduce(x, axis):
        return (logical if x.dtype == np.bool_ else bitwise).reduce(x, axis=axis)
    return reduce


def reduction(name, np_fn, kinds, identity):
    """Factory: a monoid reduction over static axes."""
    def abstract_eval(x, *, axes):
        if kinds == LOGICAL:
            _check_logical(name, x)
        else:
            check_dtype_kinds(name, x, kinds, _KIND_TEXT[kinds])
        check_reduction_axes(x, axes)
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes),
                           x.dtype, x.weak_type)

    def impl(x, *, axes):
        if x.size == 0 or not axes:
            if not axes:
                return np.array(x, copy=True)
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
            return np.full(shape, identity(x.dtype), x.dtype)
        with np.errstate(all="ignore"):
            return np.asarray(np_fn(x, axis=tuple(axes))).astype(x.dtype)
    return register(name, abstract_eval, impl)


# Float sums as accurate as JAX's: NumPy adds pairwise only along a contiguous trailing run of
# reduced axes; over leading axes it adds row after row (a float32 sum over 10^6 rows errs by
# 1e-2), and float16 rounds every partial sum. Those narrow sums run in double precision,
# rounded once.
_SUM_CARRY = {np.dtype(np.float16): np.float64, np.dtype(np.float32): np.float64,
              np.dtype(np.complex64): np.complex128}


def _sum(x, axis):
    carry = _SUM_CARRY.get(x.dtype)
    trailing = axis == tuple(range(x.ndim - len(axis), x.ndim)) and x.flags.c_contiguous
    if carry is None or (trailing and x.dtype != np.float16):
        return np.sum(x, axis=axis)
    return np.sum(x, axis=axis, dtype=carry)


reduce_sum = reduction("reduce_sum", _sum, NUMBER, lambda d: 0)
reduce_prod = reduction("reduce_prod", np.prod, NUMBER, lambda d: 1)
reduce_max = reduction("reduce_max", _zeros_ordered(np.max, np.any, False), ANY, _identity_max)
reduce_min = reduction("reduce_min", _zeros_ordered(np.min, np.any, True), ANY, _identity_min)
# On integers the logical reductions are bitwise (identity of `and`: all bits set).
reduce_and = reduction("reduce_and", _logical_reduce(np.logical_and, np.bitwise_and), LOGICAL,
                       lambda d: True if d == np.bool_ else np.invert(np.zeros((), d)))
reduce_or = reduction("reduce_or", _logical_reduce(np.logical_or, np.bitwise_or), LOGICAL,
                      lambda d: False)
reduce_xor = reduction("reduce_xor", _logical_reduce(np.logical_xor, np.bitwise_xor), LOGICAL,
                       lambda d: False)


# ---------------------------------------------------------------------------- reduction rules

def _kept(ndim, axes):
    return tuple(i for i in range(ndim) if i not in axes)


def _unreduce(y, like, axes):
    """`y` (a reduction's result) broadcast back along the reduced `axes` of `like`."""
    shape = E.aval(like).shape
    return E.broadcast_in_dim(y, shape=shape, broadcast_dimensions=_kept(len(shape), axes))


def _reduce_sum_jvp(primals, tangents, outs, *, axes):
    return E.reduce_sum(tangents[0], axes=axes)


def _reduce_sum_vjp(ct, primals, outs, *, axes):
    return [_unreduce(ct, primals[0], axes)]


JVP[reduce_sum] = tangent_rule(_reduce_sum_jvp)
VJP[reduce_sum] = cotangent_rule(_reduce_sum_vjp)


def _reduced_first(x, axes):
    """`x` with the reduced `axes` moved to the front and flattened into one: (n, *kept)."""
    a = E.aval(x)
    perm = tuple(axes) + _kept(a.ndim, axes)
    if perm != tuple(range(a.ndim)):
        x = E.transpose(x, permutation=perm)
    shape = (int(np.prod([a.shape[i] for i in axes], dtype=np.int64)),) + \
        tuple(a.shape[i] for i in _kept(a.ndim, axes))
    return x if E.aval(x).shape == shape else E.reshape(x, new_sizes=shape, dimensions=None)


def _reduced_back(y, like, axes):
    """The inverse of `_reduced_first`: `y` of shape (n, *kept) in the layout of `like`."""
    a = E.aval(like)
    perm = tuple(axes) + _kept(a.ndim, axes)
    moved = tuple(a.shape[i] for i in perm)
    if E.aval(y).shape != moved:
        y = E.reshape(y, new_sizes=moved, dimensions=None)
    if perm == tuple(range(a.ndim)):
        return y
    return E.transpose(y, permutation=tuple(int(i) for i in np.argsort(perm)))


def _prod_partials(x, axes):
    """d prod(x, axes) / dx without division (right at zeros): the product of the other
    factors, exclusive prefix times exclusive suffix products along the reduced axes, flattened
    to a leading axis (JAX multiplies a tree instead; the values are the same products)."""
    flat = _reduced_first(x, axes)
    n = _length(flat, 0)
    one = E.scalar(1, E.aval(x))
    before = _pad_axis(slice_axis(E.cumprod(flat, axis=0, reverse=False), 0, n - 1, 1, 0),
                       one, 1, 0, 0, 0)
    after = _pad_axis(slice_axis(E.cumprod(flat, axis=0, reverse=True), 1, n, 1, 0),
                      one, 0, 1, 0, 0)
    return E.mul(before, after)


def _reduce_prod_jvp(primals, tangents, outs, *, axes):
    if E.aval(primals[0]).size == 0:
        return E.zeros(E.aval(outs))
    partials = _prod_partials(primals[0], axes)
    return E.reduce_sum(E.mul(_reduced_first(tangents[0], axes), partials), axes=(0,))


def _reduce_prod_vjp(ct, primals, outs, *, axes):
    x = primals[0]
    if E.aval(x).size == 0:
        return [E.zeros_like(x)]
    partials = _prod_partials(x, axes)
    shape = E.aval(partials).shape
    spread = E.broadcast_in_dim(ct, shape=shape, broadcast_dimensions=tuple(range(1, len(shape))))
    return [_reduced_back(E.mul(spread, partials), x, axes)]


JVP[reduce_prod] = tangent_rule(_reduce_prod_jvp)
VJP[reduce_prod] = cotangent_rule(_reduce_prod_vjp)


def _chosen(x, out, axes):
    """JAX's reduce_max/min convention: the chosen locations (1.0 where x equals the result)
    and their count; ties share the derivative equally."""
    where = E.cast_like(E.eq(x, _unreduce(out, x, axes)), x)
    return where, E.reduce_sum(where, axes=axes)


def _chooser_jvp(primals, tangents, outs, *, axes):
    where, counts = _chosen(primals[0], outs, axes)
    return E.div(E.reduce_sum(E.mul(tangents[0], where), axes=axes), counts)


def _chooser_vjp(ct, primals, outs, *, axes):
    where, counts = _chosen(primals[0], outs, axes)
    return [E.mul(_unreduce(E.div(ct, counts), primals[0], axes), where)]


for _p in (reduce_max, reduce_min):
    JVP[_p] = tangent_rule(_chooser_jvp)
    VJP[_p] = cotangent_rule(_chooser_vjp)
for _p in (reduce_and, reduce_or, reduce_xor):
    _p.zero_derivative = True


def _arg_eval(name):
    def abstract_eval(x, *, axes, index_dtype):
        if len(axes) != 1 or not 0 <= axes[0] < x.ndim:
            raise ValueError(f"Invalid axis {axes[0] if len(axes) == 1 else tuple(axes)} for "
                             f"operand shape {x.shape}")
        check_dtype_kinds(name, x, ORDERED, _KIND_TEXT[ORDERED])
        if x.shape[axes[0]] == 0:
            raise ValueError(f"argmin and argmax require non-empty reduced dimension. "
                             f"operand.shape={x.shape} axis={axes[0]}")
        if np.dtype(index_dtype).kind not in "iu":
            raise TypeError(f"index_dtype must be an integer type, but got "
                            f"{np.dtype(index_dtype)}")
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i != axes[0]),
                           index_dtype, False)
    return abstract_eval


def _argminmax(np_arg):
    def impl(x, *, axes, index_dtype):
        axis = axes[0]
        if x.dtype.kind == "f":
            # NaN wins, as in JAX/NumPy: the first NaN's index.
            nan = np.isnan(x)
            any_nan = nan.any(axis=axis)
            out = np.where(any_nan, np.argmax(nan, axis=axis), np_arg(np.where(nan, 0, x), axis=axis))
        else:
            out = np_arg(x, axis=axis)
        return np.asarray(out).astype(index_dtype)
    return impl


argmax = register("argmax", _arg_eval("argmax"), _argminmax(np.argmax))
argmin = register("argmin", _arg_eval("argmin"), _argminmax(np.argmin))
argmax.zero_derivative = True
argmin.zero_derivative = True


def cumulative(name, accumulate, kinds):
    """Factory: an inclusive scan along one axis, optionally from the end."""
    def abstract_eval(x, *, axis, reverse=False):
        check_dtype_kinds(name, x, kinds, _KIND_TEXT[kinds])
        if not 0 <= axis < x.ndim:
            raise ValueError(f"axis {axis} is out of bounds for array of shape {x.shape}")
        return x

    def impl(x, *, axis, reverse=False):
        if reverse:
            x = np.flip(x, axis)
        with np.errstate(all="ignore"):
            out = np.asarray(accumulate(x, axis)).astype(x.dtype)
        return np.flip(out, axis) if reverse else out
    return register(name, abstract_eval, impl)


def _cumlogsumexp(x, axis):
    return np.logaddexp.accumulate(x, axis=axis)


# Narrow floats run their cumulative sums in double precision, rounded once per output (the
# LLVM backend's wide carry: lower_reductions.py): a float32 running sum drifts by n * 2^-24.
_CUMSUM_CARRY = {np.dtype(np.float16): np.float64, np.dtype(np.float32): np.float64,
                 np.dtype(np.complex64): np.complex128}


def _cumsum(x, axis):
    return np.cumsum(x, axis=axis, dtype=_CUMSUM_CARRY.get(x.dtype, x.dtype))


cumsum = cumulative("cumsum", _cumsum, NUMBER)
cumprod = cumulative("cumprod", lambda x, axis: np.cumprod(x, axis=axis, dtype=x.dtype), NUMBER)
cummax = cumulative("cummax", _zeros_ordered(np.maximum.accumulate, np.logical_or.accumulate,
                                             False), NUMBER)
cummin = cumulative("cummin", _zeros_ordered(np.minimum.accumulate, np.logical_or.accumulate,
                                             True), NUMBER)
cumlogsumexp = cumulative("cumlogsumexp", _cumlogsumexp, FLOAT)


# ---------------------------------------------------------------------------- cumulative rules
#
# cumsum is linear. The others differentiate as JAX does, through the parallel prefix scan of
# `lax.associative_scan` (JAX's `_cumulative_jvp_rule`): the derivative of each combine
# `c = f(a, b)` is `wa * da + wb * db`, and the weights of every combine in the scan tree are
# what the tangent (JVP) or cotangent (VJP, the exact transpose) flows through. That tree fixes
# how ties share the derivative in cummax/cummin (a tie halves it at each combine, so the split
# depends on the tree, as in JAX) and keeps cumprod right at zeros (no division).

def _cumsum_jvp(primals, tangents, outs, *, axis, reverse=False):
    return E.cumsum(tangents[0], axis=axis, reverse=reverse)


def _cumsum_vjp(ct, primals, outs, *, axis, reverse=False):
    return [E.cumsum(ct, axis=axis, reverse=not reverse)]


JVP[cumsum] = tangent_rule(_cumsum_jvp)
VJP[cumsum] = cotangent_rule(_cumsum_vjp)


def slice_axis(x, start, limit, stride, axis):
    """`x[start:limit:stride]` along `axis` (x itself when that is all of it)."""
    shape = E.aval(x).shape
    limit = max(limit, start)
    if (start, limit, stride) == (0, shape[axis], 1):
        return x
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return E.slice_(x, start_indices=tuple(starts), limit_indices=tuple(limits),
                    strides=tuple(strides))


def _pad_axis(x, value, low, high, interior, axis):
    if low == high == interior == 0:
        return x
    config = [(0, 0, 0)] * E.aval(x).ndim
    config[axis] = (low, high, interior)
    return E.pad(x, value, padding_config=tuple(config))


def _length(x, axis):
    return E.aval(x).shape[axis]


def interleave(a, b, axis):
    """a[0], b[0], a[1], b[1], ... (JAX's `interleave`: len(a) is len(b) or len(b) + 1)."""
    zero = E.scalar(0, E.aval(a))
    same = _length(a, axis) == _length(b, axis)
    return E.add(_pad_axis(a, zero, 0, 1 if same else 0, 1, axis),
                 _pad_axis(b, zero, 1, 0 if same else 1, 1, axis))


def _weighted(weights, ta, tb):
    """The derivative of one combine: wa * ta + wb * tb."""
    wa, wb = weights
    return E.add(E.mul(ta, wa), E.mul(tb, wb))


def _scan_tree(combine, x, axis, top=True):
    """JAX's associative_scan of `x` (forward values), recording every combine's weights.

    Returns (scan values, record). The values are not built at the top, where the primitive's
    own output stands for them. A record is None for fewer than two elements, else
    (n, weights of the pair combines, record of the pairs' scan, weights of the combines that
    make the even positions from the second on (None for n = 2, which has none))."""
    n = _length(x, axis)
    if n < 2:
        return x, None
    pairs, pair_weights = combine(slice_axis(x, 0, n - 1, 2, axis),
                                  slice_axis(x, 1, n, 2, axis))
    odd, inner = _scan_tree(combine, pairs, axis, top=False)
    evens = even_weights = None
    if n > 2:
        left = odd if n % 2 else slice_axis(odd, 0, n // 2 - 1, 1, axis)
        evens, even_weights = combine(left, slice_axis(x, 2, n, 2, axis))
    record = (n, pair_weights, inner, even_weights)
    if top:
        return None, record
    head = slice_axis(x, 0, 1, 1, axis)
    even = head if evens is None else E.concatenate(head, evens, dimension=axis)
    return interleave(even, odd, axis), record


def _scan_jvp(record, t, axis):
    """The scan's tangent: the linear map the record's weights define, applied to `t`."""
    if record is None:
        return t
    n, pair_weights, inner, even_weights = record
    odd = _scan_jvp(inner, _weighted(pair_weights, slice_axis(t, 0, n - 1, 2, axis),
                                     slice_axis(t, 1, n, 2, axis)), axis)
    even = slice_axis(t, 0, 1, 1, axis)
    if even_weights is not None:
        left = odd if n % 2 else slice_axis(odd, 0, n // 2 - 1, 1, axis)
        even = E.concatenate(even, _weighted(even_weights, left, slice_axis(t, 2, n, 2, axis)),
                             dimension=axis)
    return interleave(even, odd, axis)


def _scan_vjp(record, ct, axis):
    """The transpose of `_scan_jvp`: the cotangent of the scanned elements."""
    if record is None:
        return ct
    n, (pair_wa, pair_wb), inner, even_weights = record
    zero = E.scalar(0, E.aval(ct))
    ct_even = slice_axis(ct, 0, n, 2, axis)                       # ceil(n/2) positions
    ct_odd = slice_axis(ct, 1, n, 2, axis)                        # n//2 positions
    at_even = slice_axis(ct_even, 0, 1, 1, axis)                  # the first element's
    if even_weights is not None:
        wa, wb = even_weights
        ct_rest = slice_axis(ct_even, 1, (n + 1) // 2, 1, axis)
        ct_odd = E.add(ct_odd, _pad_axis(E.mul(ct_rest, wa), zero, 0, 1 - n % 2, 0, axis))
        at_even = E.concatenate(at_even, E.mul(ct_rest, wb), dimension=axis)
    ct_pairs = _scan_vjp(inner, ct_odd, axis)
    at_even = E.add(at_even, _pad_axis(E.mul(ct_pairs, pair_wa), zero, 0, n % 2, 0, axis))
    return interleave(at_even, E.mul(ct_pairs, pair_wb), axis)


def _combine_mul(a, b):
    return E.mul(a, b), (b, a)


def _chooser_combine(op):
    """max/min with JAX's weights: 1 for the chosen operand, 1/2 each on a tie."""
    def combine(a, b):
        c = op(a, b)
        at_a, at_b = E.cast_like(E.eq(a, c), c), E.cast_like(E.eq(b, c), c)
        return c, (E.div(at_a, E.add(at_b, 1)), E.div(at_b, E.add(at_a, 1)))
    return combine


def _replace_posinf(x):
    return E.select(E.eq(x, np.inf), E.zeros_like(x), x)


def _combine_logaddexp(a, b):
    """JAX's `lax.logaddexp` and its custom JVP's weights exp(a - c), exp(b - c)."""
    delta = E.sub(a, b)
    c = E.select(E.ne(delta, delta), E.add(a, b),
                 E.add(E.max_(a, b), E.log1p(E.exp(E.neg(E.abs_(delta))))))
    rc = _replace_posinf(c)
    return c, (E.exp(E.sub(_replace_posinf(a), rc)), E.exp(E.sub(_replace_posinf(b), rc)))


def _oriented(x, axis, reverse):
    return E.rev(x, dimensions=(axis,)) if reverse else x


def _cumulative_rules(prim, combine):
    def jvp(primals, tangents, outs, *, axis, reverse=False):
        _, record = _scan_tree(combine, _oriented(primals[0], axis, reverse), axis)
        return _oriented(_scan_jvp(record, _oriented(tangents[0], axis, reverse), axis),
                         axis, reverse)

    def vjp(ct, primals, outs, *, axis, reverse=False):
        _, record = _scan_tree(combine, _oriented(primals[0], axis, reverse), axis)
        return [_oriented(_scan_vjp(record, _oriented(ct, axis, reverse), axis), axis, reverse)]
    JVP[prim] = tangent_rule(jvp)
    VJP[prim] = cotangent_rule(vjp)


# How each cumulative scan combines two partial results (a block's total with the next
# block's scan: partitioning.py's scans across processes).
SCAN_COMBINE = {"cumsum": E.add, "cumprod": E.mul, "cummax": E.max_, "cummin": E.min_,
                "cumlogsumexp": lambda a, b: _combine_logaddexp(a, b)[0]}

_cumulative_rules(cumprod, _combine_mul)
_cumulative_rules(cummax, _chooser_combine(E.max_))
_cumulative_rules(cummin, _chooser_combine(E.min_))
_cumulative_rules(cumlogsumexp, _combine_logaddexp)

for _p in (reduce_sum, reduce_max, reduce_min, reduce_prod, reduce_and, reduce_or, reduce_xor,
           argmax, argmin):
    BATCH[_p] = B.axes_rule(_p, "axes")
for _p in (cumsum, cumprod, cummax, cummin, cumlogsumexp):
    BATCH[_p] = B.axes_rule(_p, "axis")
