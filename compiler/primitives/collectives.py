"""Collectives over named axes: psum, pmax, pmin, axis_index, all_gather, psum_scatter,
ppermute and all_to_all.

A collective computes across the examples (or devices) of a named axis, so it means something
only inside a transform that binds that name: `vmap(..., axis_name='i')` or
`pmap(..., axis_name='i')`. The API (`kiln.lax.psum`, ...) checks the name when the user calls
it. Under vmap the batching transform removes the collective (below); under pmap it stays in
the replicated function, and its NumPy `impl` is the exchange among the replicas running it
(replicas.py: `replica_impl` with the collective's combine rule); anywhere else the impl raises
a NameError naming the axis. Every collective has the param `axis_name` — one name, or for psum/pmax/pmin a tuple of
names (the API splits tuples for the others: an axis_index or all_gather over (i, j) is one
over i and one over j) — and carries the `collective` flag. `all_gather` may carry `to`
("invarying" or "reduced"; absent for "varying"), JAX 0.10's type of its result, which only
the shard_map body's analysis of what varies reads (runtime/vma.py).

Batching (see `batching.py`): its `BATCH` rule handles a collective over another
axis than the one being batched (the collective applies to the batched value as it is), and
`BATCH_COLLECTIVE[prim](args, dims, *, size, axis, **params)` the collective over the axis
being batched, which becomes a computation across the batch axis: psum a reduce_sum, axis_index
an iota, all_gather the batch axis moved into place, ppermute a gather along the batch axis.

Derivatives follow the SPMD convention (JAX's): psum transposes to psum, so `vmap(grad(f))` is
the gradient of the sum over the examples; all_gather and psum_scatter are each other's
transposes; ppermute's is the inverse permutation; pmax/pmin share the derivative between the
lanes equal to the result, as reduce_max does.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from . import batching as B
from .core import register, check_dtype_kinds, JVP, VJP
from .rule_forms import tangent_rule, cotangent_rule
from .indexing import GatherDimensionNumbers
from .elementwise import max_, min_
from . import replicas

_NUMBER_TEXT = "subtypes of number"
_ORDERED_TEXT = "subtypes of integer, floating, bool"


def axis_names(axis_name):
    """The names of a collective's `axis_name` param, as a tuple."""
    return axis_name if isinstance(axis_name, tuple) else (axis_name,)


def holds_collectives(fn):
    """Whether the SSA function `fn` (its regions included) calls a collective: control flow
    around one cannot run before the transform that binds its axis (see lax's `_staged`)."""
    return any(eqn.prim.collective or any(map(holds_collectives, eqn.regions()))
               for eqn in fn.eqns)


def _check_one_name(op, axis_name):
    if len(axis_names(axis_name)) != 1:
        raise TypeError(f"{op} takes one axis name, got {axis_name!r} (kiln.lax.{op} splits "
                        f"a tuple of names into one collective per name)")


def _check_axis(op, axis, limit, what):
    if not isinstance(axis, (int, np.integer)) or not 0 <= axis < limit:
        raise ValueError(f"{op}: {what} {axis} is out of range; expected 0 <= {what} < "
                         f"{limit}")


def collective(name, abstract_eval, batch, batch_collective, combine, zero_derivative=False,
               **rules):
    """Declare a collective with its batching rules, its combine rule across replicas
    (replicas.py) and its derivative rules."""
    def abstract(*args, mesh_axes=None, processes=1, **params):   # layout: see replicas.py
        return abstract_eval(*args, **params)
    prim = register(name, abstract, replicas.replica_impl(name, combine), collective=True,
                    zero_derivative=zero_derivative)
    prim.def_rules(batch=batch, batch_collective=batch_collective, **rules)
    return prim


def _linear_jvp(name):
    """The JVP of a collective linear in its operand: the collective of the tangent."""
    def jvp(primals, tangents, outs, **params):
        return E.bind(name, tangents[0], **params)
    return jvp


def _batch_in_place(name):
    """The rule for a collective over another axis that keeps its operand's shape: applied to
    the batched value, the batch axis stays where it is."""
    def rule(args, dims, **params):
        return E.bind(name, args[0], **params), dims[0]
    return rule


def _batch_at_front(name, axis_param):
    """The rule for a collective over another axis with an axis param: batch axis first,
    the param shifted past it."""
    def rule(args, dims, **params):
        params = dict(params, **{axis_param: params[axis_param] + 1})
        return E.bind(name, B.moveaxis(args[0], dims[0], 0), **params), 0
    return rule


# ----------------------------------------------------------------- psum, pmax, pmin

def _reducing_eval(name, kinds, text):
    def abstract_eval(x, *, axis_name):
        check_dtype_kinds(name, x, kinds, text)
        return x
    return abstract_eval


def _reducing_collective(name, kinds, text, reduce, unbatched, combine):
    """psum/pmax/pmin: over the batched axis, `reduce` along the batch axis (an unbatched
    operand: `unbatched(x, size)`), then the collective over the tuple's other names."""
    def batch_collective(args, dims, *, size, axis, axis_name):
        (x,), (d,) = args, dims
        y = unbatched(x, size) if d is None else E.bind(reduce, x, axes=(d,))
        rest = tuple(n for n in axis_names(axis_name) if n != axis)
        return (E.bind(name, y, axis_name=rest) if rest else y), None
    return collective(name, _reducing_eval(name, kinds, text), _batch_in_place(name),
                      batch_collective, replicas.reducer(combine))


psum = _reducing_collective("psum", "iufc", _NUMBER_TEXT, "reduce_sum",
                            lambda x, size: E.mul(x, size), np.add)
pmax = _reducing_collective("pmax", "biuf", _ORDERED_TEXT, "reduce_max", lambda x, size: x,
                            max_.impl)
pmin = _reducing_collective("pmin", "biuf", _ORDERED_TEXT, "reduce_min", lambda x, size: x,
                            min_.impl)


def _psum_vjp(ct, primals, outs, *, axis_name):
    return [E.psum(ct, axis_name=axis_name)]


JVP[psum] = tangent_rule(_linear_jvp("psum"))
VJP[psum] = cotangent_rule(_psum_vjp)


def _chosen(x, out, axis_name):
    """The lanes whose value is the result (1 there, else 0) and how many there are."""
    where = E.cast_like(E.eq(x, out), x)
    return where, E.psum(where, axis_name=axis_name)


def _chooser_jvp(primals, tangents, outs, *, axis_name):
    where, count = _chosen(primals[0], outs, axis_name)
    return E.div(E.psum(E.mul(tangents[0], where), axis_name=axis_name), count)


def _chooser_vjp(ct, primals, outs, *, axis_name):
    where, count = _chosen(primals[0], outs, axis_name)
    return [E.mul(where, E.div(E.psum(ct, axis_name=axis_name), count))]


for _p in (pmax, pmin):
    JVP[_p] = tangent_rule(_chooser_jvp)
    VJP[_p] = cotangent_rule(_chooser_vjp)


# ------------------------------------------------------------------------ axis_index

def _axis_index_eval(*, axis_name):
    _check_one_name("axis_index", axis_name)
    return ShapedArray((), np.dtype(np.int32), False)


def _axis_index_batch(args, dims, **params):   # no operands: vmap never batches it
    return E.axis_index(**params), None


def _axis_index_batch_collective(args, dims, *, size, axis, axis_name):
    return E.iota(dtype=np.dtype(np.int32), shape=(size,), dimension=0), 0


axis_index = collective("axis_index", _axis_index_eval, _axis_index_batch,
                        _axis_index_batch_collective, None, zero_derivative=True)


# ------------------------------------------------------------ all_gather, psum_scatter

# all_gather's `to`: the result's manual axis type over the axis inside a shard_map body (JAX
# 0.10's); only the body's analysis of what varies (runtime/vma.py) reads it.
ALL_GATHER_TO = ("varying", "invarying", "reduced")


def _all_gather_eval(x, *, axis_name, all_gather_dimension, tiled, axis_size, to="varying"):
    _check_one_name("all_gather", axis_name)
    if to not in ALL_GATHER_TO:
        raise ValueError(f"all_gather: to={to!r} is not one of {ALL_GATHER_TO}")
    shape, at = list(x.shape), all_gather_dimension
    _check_axis("all_gather", at, len(shape) + (0 if tiled else 1), "all_gather_dimension")
    if tiled:
        shape[at] *= axis_size
    else:
        shape.insert(at, axis_size)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _all_gather_batch_collective(args, dims, *, size, axis, axis_name, all_gather_dimension,
                                 tiled, axis_size, to="varying"):
    """Every lane's value, gathered along `all_gather_dimension`: the batch axis moved there
    (merged into the next one when tiled); the result is the same for every lane (whatever
    `to`, the type, says)."""
    at = all_gather_dimension
    y = B.moveaxis(B.to_front(args[0], dims[0], size), 0, at)
    if tiled:
        shape = list(E.aval(y).shape)
        shape[at:at + 2] = [shape[at] * shape[at + 1]]
        y = E.reshape(y, new_sizes=tuple(shape), dimensions=None)
    return y, None


def _psum_scatter_eval(x, *, axis_name, scatter_dimension, tiled, axis_size):
    _check_one_name("psum_scatter", axis_name)
    check_dtype_kinds("psum_scatter", x, "iufc", _NUMBER_TEXT)
    shape = list(x.shape)
    _check_axis("psum_scatter", scatter_dimension, len(shape), "scatter_dimension")
    n = shape[scatter_dimension]
    fits = n == axis_size if not tiled else (n % axis_size == 0 if axis_size else n == 0)
    if not fits:
        need = "a multiple of" if tiled else "equal to"
        raise ValueError(f"psum_scatter: dimension {scatter_dimension} of the operand "
                         f"{x.str_short()} must be {need} the axis size {axis_size}")
    if tiled:
        shape[scatter_dimension] = n // axis_size if axis_size else 0
    else:
        del shape[scatter_dimension]
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _psum_scatter_batch_collective(args, dims, *, size, axis, axis_name, scatter_dimension,
                                   tiled, axis_size):
    """The sum over the lanes, whose `scatter_dimension` (split into lanes of blocks when
    tiled) becomes the batch axis."""
    (x,), (d,) = args, dims
    total = E.mul(x, size) if d is None else E.reduce_sum(x, axes=(d,))
    if not tiled:
        return total, scatter_dimension
    shape = list(E.aval(total).shape)
    shape[scatter_dimension:scatter_dimension + 1] = [size, shape[scatter_dimension] // size
                                                      if size else 0]
    return E.reshape(total, new_sizes=tuple(shape), dimensions=None), scatter_dimension


def _all_gather_vjp(ct, primals, outs, *, axis_name, all_gather_dimension, tiled, axis_size,
                    to="varying"):
    """psum_scatter, whatever `to` says: kiln's derivatives keep JAX's convention before
    manual axis types, where the cotangent of a value alike in every member is spread over
    the members (psum transposes to psum), so each member's part is what JAX's invariant
    all_gather gives it (a slice of its cotangent, alike in every member there)."""
    return [E.psum_scatter(ct, axis_name=axis_name, scatter_dimension=all_gather_dimension,
                           tiled=tiled, axis_size=axis_size)]


def _psum_scatter_vjp(ct, primals, outs, *, axis_name, scatter_dimension, tiled, axis_size):
    return [E.all_gather(ct, axis_name=axis_name, all_gather_dimension=scatter_dimension,
                         tiled=tiled, axis_size=axis_size)]


all_gather = collective("all_gather", _all_gather_eval,
                        _batch_at_front("all_gather", "all_gather_dimension"),
                        _all_gather_batch_collective, replicas.all_gather, jvp=tangent_rule(_linear_jvp("all_gather")),
                        vjp=cotangent_rule(_all_gather_vjp))
psum_scatter = collective("psum_scatter", _psum_scatter_eval,
                          _batch_at_front("psum_scatter", "scatter_dimension"),
                          _psum_scatter_batch_collective, replicas.psum_scatter,
                          jvp=tangent_rule(_linear_jvp("psum_scatter")),
                          vjp=cotangent_rule(_psum_scatter_vjp))


# --------------------------------------------------------------------------- ppermute

def _ppermute_eval(x, *, axis_name, perm):
    _check_one_name("ppermute", axis_name)
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got {perm}")
    return x


def sources(perm, size):
    """The lane each lane receives from under `perm` ((source, destination) pairs), or -1."""
    src = np.full(size, -1, np.int32)
    for s, d in perm:
        src[d] = s
    return src


def _ppermute_batch_collective(args, dims, *, size, axis, axis_name, perm):
    """Lane d takes lane s's value for each pair (s, d) of `perm`: one gather along the batch
    axis, whose out-of-range index (-1: a lane that receives nothing) fills with zeros."""
    (x,), (d,) = args, dims
    src = sources(perm, size)
    if (src == np.arange(size)).all():   # every lane keeps its own value (or there are none)
        return x, d
    if d is None and (src >= 0).all():
        return x, None
    x, d = (B.to_front(x, None, size), 0) if d is None else (x, d)
    shape = E.aval(x).shape
    others = tuple(i for i in range(len(shape)) if i != d)
    dn = GatherDimensionNumbers(offset_dims=others, collapsed_slice_dims=(d,),
                                start_index_map=(d,))
    out = E.gather(x, src.reshape(size, 1), dimension_numbers=dn,
                   slice_sizes=tuple(1 if i == d else n for i, n in enumerate(shape)),
                   mode="fill", fill_value=0)
    return out, d


def _ppermute_vjp(ct, primals, outs, *, axis_name, perm):
    return [E.ppermute(ct, axis_name=axis_name, perm=tuple((d, s) for s, d in perm))]


ppermute = collective("ppermute", _ppermute_eval, _batch_in_place("ppermute"),
                      _ppermute_batch_collective, replicas.ppermute, jvp=tangent_rule(_linear_jvp("ppermute")),
                      vjp=cotangent_rule(_ppermute_vjp))


# ------------------------------------------------------------------------- all_to_all

def _all_to_all_eval(x, *, axis_name, split_axis, concat_axis, tiled, axis_size):
    _check_one_name("all_to_all", axis_name)
    shape = list(x.shape)
    _check_axis("all_to_all", split_axis, len(shape), "split_axis")
    n = shape[split_axis]
    if tiled:
        _check_axis("all_to_all", concat_axis, len(shape), "concat_axis")
        if n % axis_size if axis_size else n:
            raise ValueError(f"all_to_all: dimension {split_axis} of the operand "
                             f"{x.str_short()} must be a multiple of the axis size {axis_size}")
        shape[split_axis] = n // axis_size if axis_size else 0
        shape[concat_axis] *= axis_size
    else:
        _check_axis("all_to_all", concat_axis, len(shape), "concat_axis")
        if n != axis_size:
            raise ValueError(f"all_to_all requires the size of the mapped axis axis_name to "
                             f"equal x.shape[split_axis], but they are {axis_size} and {n} "
                             f"respectively.")
        del shape[split_axis]
        shape.insert(concat_axis, axis_size)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _all_to_all_batch(args, dims, *, split_axis, concat_axis, **params):
    x = B.moveaxis(args[0], dims[0], 0)
    return E.all_to_all(x, split_axis=split_axis + 1, concat_axis=concat_axis + 1,
                        **params), 0


def _all_to_all_batch_collective(args, dims, *, size, axis, axis_name, split_axis, concat_axis,
                                 tiled, axis_size):
    """Lane r gets block r of every lane q's `split_axis`, joined along `concat_axis` in lane
    order: the lane axis q and the block axis r trade places."""
    x = B.to_front(args[0], dims[0], size)          # (q, *S)
    shape = list(E.aval(x).shape)
    at = split_axis + 1
    if tiled:                                       # split axis -> (r, block)
        shape[at:at + 1] = [size, shape[at] // size if size else 0]
        x = E.reshape(x, new_sizes=tuple(shape), dimensions=None)
    x = B.moveaxis(x, at, 0)                        # (r, q, *S without r)
    x = B.moveaxis(x, 1, concat_axis + 1)           # (r, *S' with q at concat_axis)
    if tiled:                                       # q merges into the concat axis
        shape = list(E.aval(x).shape)
        c = concat_axis + 1
        shape[c:c + 2] = [shape[c] * shape[c + 1]]
        x = E.reshape(x, new_sizes=tuple(shape), dimensions=None)
    return x, 0


def _all_to_all_vjp(ct, primals, outs, *, axis_name, split_axis, concat_axis, tiled,
                    axis_size):
    return [E.all_to_all(ct, axis_name=axis_name, split_axis=concat_axis,
                         concat_axis=split_axis, tiled=tiled, axis_size=axis_size)]


all_to_all = collective("all_to_all", _all_to_all_eval, _all_to_all_batch,
                        _all_to_all_batch_collective, replicas.all_to_all,
                        jvp=tangent_rule(_linear_jvp("all_to_all")),
                        vjp=cotangent_rule(_all_to_all_vjp))
