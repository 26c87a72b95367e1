"""`kiln.lax` operations: JAX's names and signatures over the primitive set.

Each function converts its operands (Python scalars become weakly typed arrays; a weak operand
takes the dtype of the strong one, and rank-0 operands broadcast, as JAX's lax does), then
binds one primitive. Nothing here promotes dtypes between strong operands: that is
`kiln.numpy`'s job, and a mismatch is the primitive's TypeError.
"""
import builtins
import enum
import operator

import numpy as np

from ..array import to_array
from ..dispatch import bind
from ..compiler.ir import dtypes
from ..compiler.config import config
from ..compiler.primitives import PRIMITIVES as P
from ._precision import Precision, check_accuracy, check_precision
from ..sharding_types import out_sharding_keyword, sharding_keyword

# The public names (`kiln.lax` re-exports them); imports and helpers stay private.
__all__ = [
    "GatherScatterMode", "Precision", "RoundingMethod", "abs", "acos", "acosh", "add",
    "argmax", "argmin", "asin", "asinh", "atan", "atan2", "atanh", "batch_matmul", "bitcast_convert_type", "bitwise_and",
    "bitwise_not", "bitwise_or", "bitwise_xor", "broadcast", "broadcast_in_dim",
    "broadcast_to_rank", "broadcasted_iota", "cbrt", "ceil", "clamp", "clz", "complex",
    "concatenate", "conj", "convert_element_type", "copy_p", "cos", "cosh", "cumlogsumexp",
    "cummax", "cummin", "cumprod", "cumsum", "digamma", "div", "dot", "dot_general",
    "dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim",
    "dynamic_update_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim", "eq",
    "erf", "erf_inv", "erfc", "exp", "exp2", "expand_dims", "expm1", "floor", "full",
    "full_like", "ge", "gt", "imag", "index_in_dim", "integer_pow", "iota",
    "is_finite", "le", "lgamma", "log", "log1p", "logistic", "lt", "max", "min", "mul", "ne",
    "neg", "nextafter", "pad", "population_count", "pow", "real", "reduce", "reduce_and",
    "reduce_max", "reduce_min", "reduce_or", "reduce_prod", "reduce_sum", "reduce_xor", "rem",
    "reshape", "rev", "round", "rsqrt", "select", "select_n", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "sign", "sin", "sinh", "slice", "slice_in_dim", "sort",
    "sort_key_val", "sqrt", "square", "squeeze", "stop_gradient", "sub", "tan", "tanh", "top_k",
    "transpose"]


class RoundingMethod(enum.IntEnum):
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


class GatherScatterMode(enum.Enum):
    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"
    ONE_HOT = "one_hot"

    @staticmethod
    def from_any(s):
        if isinstance(s, GatherScatterMode):
            return s
        if s is None:
            return GatherScatterMode.FILL_OR_DROP
        return {"clip": GatherScatterMode.CLIP, "fill": GatherScatterMode.FILL_OR_DROP,
                "drop": GatherScatterMode.FILL_OR_DROP,
                "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS}[s]


def _operands(name, *xs):
    """Convert lax operands. As in JAX, nothing is promoted: a Python scalar is a weakly typed
    int32/float32/complex64 that must match the other operand's dtype exactly. Rank-0 operands
    and size-1 axes broadcast."""
    return _broadcast_ones(name, [to_array(x, f"lax.{name}") for x in xs])


def _broadcast_ones(name, arrs):
    """JAX's lax broadcasting: equal ranks (rank 0 aside), size-1 axes stretch."""
    shapes = [a.shape for a in arrs if a.shape]
    if len(set(shapes)) <= 1:
        return arrs
    ranks = {len(s) for s in shapes}
    if len(ranks) != 1:
        raise TypeError(f"{name}: arrays must have the same number of dimensions, got {ranks}")
    out = []
    for ds in zip(*shapes):
        sizes = {d for d in ds if d != 1}
        if len(sizes) > 1:
            return arrs  # the primitive reports the incompatible shapes
        out.append(sizes.pop() if sizes else 1)
    out = tuple(out)
    dims = tuple(range(len(out)))
    return [broadcast_in_dim(a, out, dims) if a.shape and a.shape != out else a for a in arrs]


# The unary functions that take JAX's `accuracy` (checked, then kiln's one accuracy applies).
_WITH_ACCURACY = {"exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan",
                  "sqrt", "rsqrt", "cbrt"}


def _unary(name):
    prim = P[name]

    def fn(x):
        return bind(prim, to_array(x, f"lax.{name}"))

    def fn_with_accuracy(x, *, accuracy=None):
        check_accuracy(accuracy)
        return bind(prim, to_array(x, f"lax.{name}"))
    fn = fn_with_accuracy if name in _WITH_ACCURACY else fn
    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}` (the `{name}` primitive)."
    return fn


def _binary(name):
    prim = P[name]

    def fn(x, y):
        return bind(prim, *_operands(name, x, y))
    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}` (the `{name}` primitive); no implicit promotion."
    return fn


neg, sign, floor, ceil, is_finite = map(_unary, ("neg", "sign", "floor", "ceil", "is_finite"))
exp, exp2, log, log1p, expm1 = map(_unary, ("exp", "exp2", "log", "log1p", "expm1"))
tanh, logistic, sin, cos, tan = map(_unary, ("tanh", "logistic", "sin", "cos", "tan"))
asin, acos, atan, sinh, cosh = map(_unary, ("asin", "acos", "atan", "sinh", "cosh"))
asinh, acosh, atanh, sqrt, rsqrt, cbrt = map(_unary, ("asinh", "acosh", "atanh", "sqrt", "rsqrt",
                                                      "cbrt"))
abs, population_count, clz = map(_unary, ("abs", "population_count", "clz"))  # noqa: A001
erf, erfc, erf_inv, lgamma, digamma = map(_unary, ("erf", "erfc", "erf_inv", "lgamma", "digamma"))
real, imag, conj, square = map(_unary, ("real", "imag", "conj", "square"))
bitwise_not = _unary("not")

add, sub, _mul, div, rem = map(_binary, ("add", "sub", "mul", "div", "rem"))


def mul(x, y, *, out_dtype=None):
    """Elementwise `mul`; with `out_dtype`, of both operands converted to `out_dtype` first
    (then they need not share a dtype; the result is weak if both are), as JAX."""
    if out_dtype is None:
        return _mul(x, y)
    out_dtype = dtypes.canonicalize(out_dtype)
    xs = [to_array(v, "lax.mul") for v in (x, y)]
    for at, v in enumerate(xs):
        if v.dtype.kind not in "iufc":
            raise TypeError(f"mul does not accept dtype {v.dtype} at position {at}. Accepted "
                            f"dtypes at position {at} are subtypes of integer, floating, "
                            f"complexfloating.")
    return _mul(*(v if v.dtype == out_dtype else bind(
        P["convert_element_type"], v, new_dtype=out_dtype, weak_type=v.weak_type) for v in xs))
pow, max, min, atan2 = map(_binary, ("pow", "max", "min", "atan2"))  # noqa: A001
_nextafter = _binary("nextafter")


def nextafter(x1, x2):
    """The next float after `x1` towards `x2` (the `nextafter` primitive; JAX's names)."""
    return _nextafter(x1, x2)
complex = _binary("complex")  # noqa: A001
bitwise_and, bitwise_or, bitwise_xor = map(_binary, ("and", "or", "xor"))
shift_left, shift_right_logical, shift_right_arithmetic = map(
    _binary, ("shift_left", "shift_right_logical", "shift_right_arithmetic"))
eq, ne, lt, le, gt, ge = map(_binary, ("eq", "ne", "lt", "le", "gt", "ge"))


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):  # noqa: A001
    return bind(P["round"], to_array(x, "lax.round"), rounding_method=int(rounding_method))


def integer_pow(x, y):
    return bind(P["integer_pow"], to_array(x, "lax.integer_pow"), y=operator.index(y))


def copy_p(x):
    return bind(P["copy"], to_array(x, "lax.copy"))


def select_n(which, *cases):
    if not cases:
        raise ValueError("select_n() must have at least one case")
    which = to_array(which, "lax.select_n")
    return bind(P["select_n"], which, *(to_array(c, "lax.select_n") for c in cases))


def select(pred, on_true, on_false):
    return select_n(pred, on_false, on_true)


def clamp(min, x, max):  # noqa: A002
    return bind(P["clamp"], *(to_array(v, "lax.clamp") for v in (min, x, max)))


def convert_element_type(operand, new_dtype):
    x = to_array(operand, "lax.convert_element_type")
    weak = False
    if isinstance(new_dtype, type) and new_dtype in (int, float, builtins.complex, bool):
        new_dtype, weak = dtypes.python_scalar_dtype(new_dtype(0))
    new_dtype = dtypes.canonicalize(new_dtype)
    if x.dtype == new_dtype and x.weak_type == weak:
        return x
    return bind(P["convert_element_type"], x, new_dtype=new_dtype, weak_type=weak)


def bitcast_convert_type(operand, new_dtype):
    return bind(P["bitcast_convert_type"], to_array(operand, "lax.bitcast_convert_type"),
                new_dtype=dtypes.canonicalize(new_dtype))


# --------------------------------------------------------------------------- structural

def _shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(operator.index(d) for d in shape)


def iota(dtype, size):
    return broadcasted_iota(dtype, (size,), 0)


@out_sharding_keyword
def broadcasted_iota(dtype, shape, dimension):
    return bind(P["iota"], dtype=dtypes.canonicalize(dtype), shape=_shape(shape),
                dimension=operator.index(dimension))


@out_sharding_keyword
def broadcast_in_dim(operand, shape, broadcast_dimensions):
    x = to_array(operand, "lax.broadcast_in_dim")
    shape, bdims = _shape(shape), tuple(broadcast_dimensions)
    if x.shape == shape and bdims == tuple(range(len(shape))):
        return x
    return bind(P["broadcast_in_dim"], x, shape=shape, broadcast_dimensions=bdims)


@out_sharding_keyword
def broadcast(operand, sizes):
    x = to_array(operand, "lax.broadcast")
    sizes = _shape(sizes)
    return broadcast_in_dim(x, sizes + x.shape, tuple(range(len(sizes), len(sizes) + x.ndim)))


def broadcast_to_rank(x, rank):
    x = to_array(x)
    return broadcast(x, (1,) * (rank - x.ndim)) if x.ndim < rank else x


@out_sharding_keyword
def reshape(operand, new_sizes, dimensions=None):
    x = to_array(operand, "lax.reshape")
    new_sizes = _shape(new_sizes)
    dims = None if dimensions is None else tuple(dimensions)
    if dims is not None and dims == tuple(range(x.ndim)):
        dims = None
    if x.shape == new_sizes and dims is None:
        return x
    return bind(P["reshape"], x, new_sizes=new_sizes, dimensions=dims)


def transpose(operand, permutation):
    x = to_array(operand, "lax.transpose")
    perm = tuple(operator.index(p) for p in permutation)
    if perm == tuple(range(x.ndim)):
        return x
    return bind(P["transpose"], x, permutation=perm)


def _canonical_axis(axis, ndim):
    """NumPy's rule, as JAX's lax helpers: -ndim <= axis < ndim."""
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise ValueError(f"axis {a} is out of bounds for array of dimension {ndim}")
    return a + ndim if a < 0 else a


def squeeze(array, dimensions):
    x = to_array(array, "lax.squeeze")
    dims = tuple(sorted(_canonical_axis(d, x.ndim) for d in dimensions))
    if not dims:
        return x
    return bind(P["squeeze"], x, dimensions=dims)


def expand_dims(array, dimensions):
    x = to_array(array, "lax.expand_dims")
    ndim_out = x.ndim + len(dimensions)
    dims = sorted(d % ndim_out for d in dimensions)
    shape = list(x.shape)
    for d in dims:
        shape.insert(d, 1)
    return reshape(x, shape)


def rev(operand, dimensions):
    x = to_array(operand, "lax.rev")
    dims = tuple(operator.index(d) for d in dimensions)
    return bind(P["rev"], x, dimensions=dims) if dims else x


def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001
    x = to_array(operand, "lax.slice")
    start, limit = _shape(start_indices), _shape(limit_indices)
    strides = None if strides is None else _shape(strides)
    if start == (0,) * x.ndim and limit == x.shape and strides in (None, (1,) * x.ndim):
        return x
    return bind(P["slice"], x, start_indices=start, limit_indices=limit, strides=strides)


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    x = to_array(operand, "lax.slice_in_dim")
    axis = _canonical_axis(axis, x.ndim)
    size = x.shape[axis]
    start = 0 if start_index is None else operator.index(start_index)
    limit = size if limit_index is None else operator.index(limit_index)
    start = start + size if start < 0 else start
    limit = limit + size if limit < 0 else limit
    starts, limits, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice(x, starts, limits, strides)


def index_in_dim(operand, index, axis=0, keepdims=True):
    x = to_array(operand, "lax.index_in_dim")
    axis = _canonical_axis(axis, x.ndim)
    index, size = operator.index(index), x.shape[axis]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {size}")
    index = index + size if index < 0 else index
    out = slice_in_dim(x, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def _start_indices(x, start_indices, allow_negative_indices, what):
    """JAX's `_dynamic_slice_indices`: one scalar per axis. Where `allow_negative_indices`
    (a bool, or one per axis) is true, negative indices count from the end; where it is
    false, a static negative index is a ValueError and a traced one is left as it is. Then
    the primitive clamps the window into range (a negative start to 0)."""
    starts = _unstack_starts(start_indices)
    if len(starts) != x.ndim:
        raise ValueError(f"Length of slice indices must match number of operand dimensions "
                         f"({len(starts)} vs {x.shape})")
    allow = allow_negative_indices
    if isinstance(allow, (bool, np.bool_)):
        allow = [bool(allow)] * x.ndim
    allow = list(allow)
    if len(allow) != x.ndim:
        raise ValueError(f"lax.{what}: allow_negative_indices={allow_negative_indices!r} has "
                         f"{len(allow)} entries for an operand of {x.ndim} dimensions "
                         f"(shape {x.shape}); pass one bool, or one per dimension")
    return [_wrap_index(i, d, a) for i, d, a in zip(starts, x.shape, allow)]


def _wrap_index(i, size, allow_negative):
    if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
        if i < 0 and not allow_negative:
            raise ValueError(f"Index {i} is out of bounds for dimension {size} if "
                             f"allow_negative_indices=False")
        # static: wrap now, in i's own type (NumPy raises, as JAX does, if i + size overflows)
        return to_array(i + size if i < 0 else i, "start index")
    i = to_array(i, "start index")
    if i.dtype.kind != "i" or i.ndim or not allow_negative:
        return i  # unsigned cannot be negative; a bad dtype or rank is the primitive's error
    return select(lt(i, full_like(i, 0)), add(i, full_like(i, size)), i)


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    x = to_array(operand, "lax.dynamic_slice")
    starts = _start_indices(x, start_indices, allow_negative_indices, "dynamic_slice")
    return bind(P["dynamic_slice"], x, *starts, slice_sizes=_shape(slice_sizes))


def _unstack_starts(starts):
    if hasattr(starts, "shape"):
        s = to_array(starts, "start_indices")
        if s.ndim != 1:
            raise ValueError(f"Slice indices must be a 1D sequence, got {s.shape}")
        return [index_in_dim(s, k, 0, False) for k in range(s.shape[0])]
    return list(starts)


def _in_dim_starts(ndim, axis, start_index, allow_negative_indices):
    """Zeros of the start index's own type on the other axes, as JAX, and
    `allow_negative_indices` per axis (the bool on `axis`; the zeros need no wrapping)."""
    zero = 0 if isinstance(start_index, (int, np.integer)) else \
        full_like(to_array(start_index, "start index"), 0)
    starts, allow = [zero] * ndim, [False] * ndim
    starts[axis], allow[axis] = start_index, bool(allow_negative_indices)
    return starts, allow


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *,
                         allow_negative_indices=True):
    x = to_array(operand)
    axis = _canonical_axis(axis, x.ndim)
    sizes = list(x.shape)
    sizes[axis] = slice_size
    starts, allow = _in_dim_starts(x.ndim, axis, start_index, allow_negative_indices)
    return dynamic_slice(x, starts, sizes, allow_negative_indices=allow)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True, *,
                         allow_negative_indices=True):
    x = to_array(operand)
    axis = _canonical_axis(axis, x.ndim)
    out = dynamic_slice_in_dim(x, _traced_index(index, allow_negative_indices), 1, axis,
                               allow_negative_indices=allow_negative_indices)
    return out if keepdims else squeeze(out, (axis,))


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    x = to_array(operand, "lax.dynamic_update_slice")
    u = to_array(update, "lax.dynamic_update_slice")
    starts = _start_indices(x, start_indices, allow_negative_indices, "dynamic_update_slice")
    return bind(P["dynamic_update_slice"], x, u, *starts)


def dynamic_update_slice_in_dim(operand, update, start_index, axis, *,
                                allow_negative_indices=True):
    x = to_array(operand)
    axis = _canonical_axis(axis, x.ndim)
    starts, allow = _in_dim_starts(x.ndim, axis, start_index, allow_negative_indices)
    return dynamic_update_slice(x, update, starts, allow_negative_indices=allow)


def dynamic_update_index_in_dim(operand, update, index, axis, *, allow_negative_indices=True):
    x, u = to_array(operand), to_array(update)
    axis = _canonical_axis(axis, x.ndim)
    if u.ndim == x.ndim - 1:
        u = expand_dims(u, (axis,))
    return dynamic_update_slice_in_dim(x, u, _traced_index(index, allow_negative_indices),
                                       axis, allow_negative_indices=allow_negative_indices)


def _traced_index(index, allow_negative_indices):
    """The index of JAX's `dynamic_index_in_dim` / `dynamic_update_index_in_dim`, which JAX
    jits: an array, so that a negative one with allow_negative_indices=False is clamped to 0
    rather than refused, as there (with True, wrapped either way)."""
    return index if allow_negative_indices else to_array(index, "index")


def pad(operand, padding_value, padding_config):
    x, pv = to_array(operand, "lax.pad"), to_array(padding_value, "lax.pad")
    cfg = tuple(tuple(operator.index(v) for v in c) for c in padding_config)
    return bind(P["pad"], x, pv, padding_config=cfg)


def concatenate(operands, dimension):
    xs = [to_array(o, "lax.concatenate") for o in operands]
    if not xs:
        raise ValueError("concatenate requires a non-empty sequences of arrays")
    if len(xs) == 1:
        return xs[0]
    return bind(P["concatenate"], *xs, dimension=operator.index(dimension))


# --------------------------------------------------------------------------- reductions

def _axes(x, axes):
    """Negative axes count from the end; out-of-range axes are left for the primitive's error."""
    return tuple(sorted(_wrap_axis(a, x.ndim) for a in axes))


def _wrap_axis(axis, ndim):
    a = operator.index(axis)
    return a + ndim if -ndim <= a < 0 else a


def _reducer(name):
    prim = P[name]

    def fn(operand, axes):
        x = to_array(operand, f"lax.{name}")
        return bind(prim, x, axes=_axes(x, axes))
    fn.__name__ = name
    return fn


reduce_prod, reduce_max, reduce_min = map(_reducer, ("reduce_prod", "reduce_max", "reduce_min"))
_reduce_sum = _reducer("reduce_sum")


@out_sharding_keyword
def reduce_sum(operand, axes):
    """The sum over `axes`; with `kiln.allow_f16_reductions(False)` a float16 operand is a
    ValueError (as JAX's; `jnp.sum` accumulates float16 in float32 and is not affected)."""
    if not config.read("allow_f16_reductions") and \
            to_array(operand, "lax.reduce_sum").dtype == np.float16:
        raise ValueError(f"reduce_sum on operand f16{list(operand.shape)} is not allowed "
                         f"when allow_f16_reductions is False; sum in float32 (jnp.sum does) "
                         f"or leave the option on")
    return _reduce_sum(operand, axes)
reduce_and, reduce_or, reduce_xor = map(_reducer, ("reduce_and", "reduce_or", "reduce_xor"))


_MONOIDS = {"add": "reduce_sum", "mul": "reduce_prod", "max": "reduce_max", "min": "reduce_min",
            "and": "reduce_and", "or": "reduce_or", "xor": "reduce_xor"}


@out_sharding_keyword
def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """`lax.reduce`. The monoids lax.add/mul/max/min/bitwise_and/or/xor bind one reduction
    primitive; any other `computation` is applied as a sequential fold over the reduced
    elements (in order), with pytrees of operands as in JAX. (`out_sharding`, by keyword or
    position, places the results: out_sharding_keyword.)"""
    single = not isinstance(operands, (list, tuple))
    ops = [to_array(o, "lax.reduce") for o in ([operands] if single else operands)]
    inits = [to_array(i, "lax.reduce") for i in ([init_values] if single else init_values)]
    if len(ops) != len(inits):
        raise ValueError(f"lax.reduce: got {len(ops)} operands but {len(inits)} init_values")
    name = getattr(computation, "__name__", None)
    if name in _MONOIDS and getattr(computation, "__module__", None) == __name__:
        red = _reducer(_MONOIDS[name])
        outs = [computation(red(o, dimensions), i) for o, i in zip(ops, inits)]
    else:
        outs = _fold(ops, inits, computation, _axes(ops[0], dimensions), single)
    return outs[0] if single else type(operands)(outs)


def argmax(operand, axis, index_dtype):
    x = to_array(operand, "lax.argmax")
    return bind(P["argmax"], x, axes=_axes(x, (axis,)), index_dtype=dtypes.canonicalize(index_dtype))


def argmin(operand, axis, index_dtype):
    x = to_array(operand, "lax.argmin")
    return bind(P["argmin"], x, axes=_axes(x, (axis,)), index_dtype=dtypes.canonicalize(index_dtype))


def _cumulative(name):
    prim = P[name]

    def fn(operand, axis=0, reverse=False):
        x = to_array(operand, f"lax.{name}")
        if name == "cumlogsumexp" and x.dtype.kind == "c":
            return _complex_cumlogsumexp(x, _wrap_axis(axis, x.ndim), bool(reverse))
        return bind(prim, x, axis=_wrap_axis(axis, x.ndim), reverse=bool(reverse))
    fn.__name__ = name
    return fn


cumsum, cumprod, cummax, cummin, cumlogsumexp = map(
    _cumulative, ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"))


def _complex_cumlogsumexp(x, axis, reverse):
    """cumlogsumexp of complex `x`, decomposed into existing primitives (so every backend runs
    it and it differentiates). JAX folds `logaddexp`'s complex form (the lexicographic maximum
    plus log1p(exp) of the difference, the imaginary part wrapped into [-pi, pi)) over each
    prefix, starting from -inf; here a parallel-prefix `associative_scan` of the same
    combination, then one more step from -inf so that the first element is wrapped too. As in
    JAX, whose fold combines -inf with -inf into NaN, an output is NaN + NaN i where its fold
    starts at a real part of -inf: the first element of the axis (or, reversed, the element
    itself)."""
    from ..numpy import logaddexp
    from ._control_flow import associative_scan
    scanned = associative_scan(logaddexp, x, reverse=reverse, axis=axis)
    out = logaddexp(full_like(x, -np.inf), scanned)
    first = x
    if not reverse:
        first = broadcast_in_dim(slice_in_dim(x, 0, 1, axis=axis), x.shape, tuple(range(x.ndim)))
    starts_at_minus_inf = eq(real(first), full_like(real(first), -np.inf))
    return select(starts_at_minus_inf, full_like(x, complex(np.nan, np.nan)), out)


# ------------------------------------------------------------------------ linear algebra

@out_sharding_keyword
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    a, b = to_array(lhs, "lax.dot_general"), to_array(rhs, "lax.dot_general")
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    check_precision(precision)  # accepted as JAX does; kiln computes at full precision
    pet = None if preferred_element_type is None else dtypes.canonicalize(preferred_element_type)
    return bind(P["dot_general"], a, b, dimension_numbers=dn, precision=None,
                preferred_element_type=pet)


@out_sharding_keyword
def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None):
    """`dot_general` with `dimension_numbers`; without them, the product of matrices and
    vectors (the last axis of `lhs` with the first of `rhs`), as JAX."""
    a, b = to_array(lhs, "lax.dot"), to_array(rhs, "lax.dot")
    if dimension_numbers is None:
        if not (1 <= a.ndim <= 2 and 1 <= b.ndim <= 2 and a.shape[-1] == b.shape[0]):
            raise ValueError(f"jax.lax.dot: dimension_numbers must be specified when not "
                             f"performing simple un-batched matrix-matrix, matrix-vector, or "
                             f"vector-vector products; got lhs_shape={a.shape} "
                             f"rhs_shape={b.shape}")
        dimension_numbers = (((a.ndim - 1,), (0,)), ((), ()))
    return dot_general(a, b, dimension_numbers, precision, preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
    a, b = to_array(lhs), to_array(rhs)
    if a.ndim < 2 or a.ndim != b.ndim:
        raise ValueError(f"batch_matmul requires operands of equal rank >= 2, got {a.shape} "
                         f"and {b.shape}")
    batch = tuple(range(a.ndim - 2))
    return dot_general(a, b, (((a.ndim - 1,), (b.ndim - 2,)), (batch, batch)), precision)


# -------------------------------------------------------------------------------- sorting

def _fold(ops, inits, computation, dims, single):
    keep = [d for d in range(ops[0].ndim) if d not in dims]
    kept_shape = tuple(ops[0].shape[d] for d in keep)
    n = 1
    for d in dims:
        n *= ops[0].shape[d]
    flat = [reshape(transpose(o, keep + list(dims)), kept_shape + (n,)) for o in ops]
    acc = [broadcast(i, kept_shape) for i in inits]
    for k in range(n):
        cur = [index_in_dim(f, k, len(kept_shape), keepdims=False) for f in flat]
        out = computation(acc[0], cur[0]) if single else computation(tuple(acc), tuple(cur))
        acc = [out] if single else list(out)
    return acc


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """`lax.sort`: one array, or a sequence sorted together by its first `num_keys` arrays
    (returned as a tuple, as JAX)."""
    single = not isinstance(operand, (list, tuple))
    xs = [to_array(o, "lax.sort") for o in ([operand] if single else operand)]
    if not xs:
        raise TypeError("sort requires at least one operand")
    dim = _canonical_axis(dimension, xs[0].ndim)
    out = bind(P["sort"], *xs, dimension=dim, is_stable=bool(is_stable),
               num_keys=operator.index(num_keys))
    return out[0] if single else tuple(out)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    k, v = sort((keys, values), dimension, is_stable, 1)
    return k, v


def _total_order_key(x):
    """An integer with the order of IEEE totalOrder on floats (the identity on integers)."""
    if x.dtype.kind != "f":
        return x
    i = bitcast_convert_type(x, np.dtype(f"i{x.dtype.itemsize}"))
    mask = full_like(i, (1 << (8 * x.dtype.itemsize - 1)) - 1)
    return select(lt(i, full_like(i, 0)), bitwise_xor(i, mask), i)


def top_k(operand, k, *, axis=-1):
    """The `k` largest entries along `axis` and their indices, larger first, ties by lower
    index. Floats use IEEE total order, as JAX: NaN is largest, -NaN smallest, 0.0 > -0.0."""
    x = to_array(operand, "lax.top_k")
    axis = _canonical_axis(axis, x.ndim)
    k = operator.index(k)
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
    if k > x.shape[axis]:
        raise ValueError(f"k argument to top_k must be no larger than size along axis; got "
                         f"k={k} with shape={list(x.shape)} and axis={axis}")
    if x.dtype.kind == "c":
        raise TypeError(f"top_k does not accept dtype {x.dtype}: operands must be non-complex")
    return first_by_key(x, bitwise_not(_total_order_key(x)), axis, k)


def first_by_key(x, key, axis, count):
    """[the `count` entries of x with the smallest `key` along `axis`, their int32 indices],
    in key order, ties by lower index."""
    idx = broadcasted_iota(dtypes.int32, x.shape, axis)
    _, vals, sidx = sort((key, x, idx), axis, True, 1)
    return [slice_in_dim(vals, 0, count, 1, axis), slice_in_dim(sidx, 0, count, 1, axis)]


# --------------------------------------------------------------------------------- misc

@sharding_keyword
def full(shape, fill_value, dtype=None, *, sharding=None):
    """`lax.full`; `sharding` places the result (sharding_types.sharding_keyword)."""
    shape = _shape(shape)
    v = to_array(fill_value, "lax.full")
    if v.ndim:
        raise TypeError(f"lax.full: fill_value must be a scalar, got shape {v.shape}")
    if dtype is not None:
        v = convert_element_type(v, dtype)
    return broadcast(v, shape)


@sharding_keyword
def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """As JAX: without `dtype`, the result keeps `x`'s dtype and weak type; `sharding` (by
    keyword or position) places the result (sharding_types.sharding_keyword)."""
    x = to_array(x)
    out = full(x.shape if shape is None else shape, fill_value,
               x.dtype if dtype is None else dtype)
    if dtype is None and x.weak_type:
        out = bind(P["convert_element_type"], out, new_dtype=out.dtype, weak_type=True)
    return out


def stop_gradient(x):
    """Identity on values; differentiation transforms treat its output as a constant (the
    `stop_gradient` primitive). Applies to every leaf of a pytree; integer and boolean leaves,
    which have no derivative anyway, pass through unchanged."""
    from ..tree_util import tree_map

    def stop(v):
        v = v if hasattr(v, "aval") else to_array(v)
        if v.dtype.kind not in "fc":
            return v
        return bind(P["stop_gradient"], v)
    return tree_map(stop, x)
