"""`kiln.lax` collectives over named axes (JAX's names and signatures): psum, pmean, pmax,
pmin, all_gather, psum_scatter, axis_index, axis_size, ppermute, pshuffle, all_to_all,
pswapaxes — and the axis environment they read.

The axis environment is a stack of (name, size) frames. A transform that names an axis binds
one with `axis_frame` while it specialises the user's function (`kiln.vmap(f, axis_name='i')`
and `pmap(f, axis_name='i')` do), so a collective knows at the user's call whether its names are
bound (`NameError: unbound axis name: j` otherwise, eagerly or while tracing) and how large the
axes are (`pmean` divides by it, `psum` of a Python number multiplies by it, as in JAX). The
collective itself is one primitive per name group (compiler/primitives/collectives.py); the
transform that bound the name turns it into a computation across its axis. Names are found
innermost first, so an inner `vmap` shadows an outer one of the same name.
"""
import contextlib
import math

from ..array import to_array
from ..dispatch import bind
from ..tree_util import tree_map
from ..compiler.ir.builder import current, PerThread
from ..compiler.primitives import PRIMITIVES as P
from ..compiler.primitives.collectives import sources, ALL_GATHER_TO
from .. import vma
from . import _ops

_FRAMES = PerThread(stack=list)   # (axis name, size) bound by this thread's transforms now


@contextlib.contextmanager
def axis_frame(name, size):
    """Bind the axis `name` of `size` examples (devices) inside this block; None binds nothing."""
    if name is None:
        yield
        return
    _FRAMES.stack.append((name, int(size)))
    try:
        yield
    finally:
        _FRAMES.stack.pop()


def axis_size(axis_name):
    """The size of the bound axis `axis_name` (over a tuple of names, the product of their
    sizes); NameError (JAX's text) when one is not bound."""
    if isinstance(axis_name, (tuple, list)):
        return math.prod(axis_size(n) for n in axis_name)
    name = axis_name
    for bound, size in reversed(_FRAMES.stack):
        if bound == name:
            return size
    known = ", ".join(repr(n) for n, _ in reversed(_FRAMES.stack))
    where = f"the bound names are {known}" if known else "no axis is bound here"
    raise NameError(f"unbound axis name: {name} ({where}; name an axis with "
                    f"kiln.vmap(f, axis_name={name!r}) or kiln.pmap(f, axis_name={name!r}) "
                    f"around the function that calls the collective)")


def _names(op, axis_name, axis_index_groups=None):
    """The names of `axis_name` (one or a tuple), each checked to be bound."""
    if axis_index_groups is not None:
        raise NotImplementedError(f"lax.{op}: axis_index_groups is not supported by kiln's "
                                  f"collectives; split the axis into two named axes (nested "
                                  f"vmaps) and reduce over one of them instead")
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    for name in names:
        axis_size(name)
    return names


def _size(names):
    return math.prod(axis_size(n) for n in names)


def _param(names):
    return names[0] if len(names) == 1 else names


def _bind(name, *args, **params):
    """Bind a collective into the function being specialised (its operands may be constants:
    the collective still runs across the axis), or eagerly outside any."""
    b = current()
    if b is not None:
        return b.bind(P[name], args, params)
    return bind(P[name], *args, **params)


def _leaf(x, op):
    return to_array(x, f"lax.{op}")


def _positional(axis_name):
    """(the int entries of `axis_name`: positional axes of the operand, as JAX allows, the
    named ones)."""
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    return (tuple(n for n in names if isinstance(n, int)),
            tuple(n for n in names if not isinstance(n, int)))


def _over_positions(reducer, v, positions, op):
    """`v` reduced by the lax `reducer` over its positional axes (negative ones count back)."""
    v = _leaf(v, op)
    return getattr(_ops, reducer)(v, tuple(sorted(p % max(v.ndim, 1) for p in positions)))


def psum(x, axis_name, *, axis_index_groups=None):
    """The sum of `x` (a pytree) over the named axis (or tuple of axes; an int names an axis
    of the operand itself, as in JAX); a Python number `n` sums to `n` times the axis size
    (`psum(1, 'i')` is the size of axis 'i')."""
    positions, named = _positional(axis_name)
    if positions:
        x = tree_map(lambda v: _over_positions("reduce_sum", v, positions, "psum"), x)
        return psum(x, named, axis_index_groups=axis_index_groups) if named else x
    names = _names("psum", axis_name, axis_index_groups)

    def leaf(v):
        if type(v) in (int, float, complex):
            return v * _size(names)
        return _bind("psum", _leaf(v, "psum"), axis_name=_param(names))
    return tree_map(leaf, x)


def pmean(x, axis_name, *, axis_index_groups=None):
    """The mean of `x` (a pytree) over the named axis: its psum divided by the axis size."""
    positions, named = _positional(axis_name)
    n = _size(_names("pmean", named, axis_index_groups))

    def mean(v, total):
        return total / (n * math.prod(_leaf(v, "pmean").shape[p] for p in positions))
    return tree_map(mean, x, psum(x, axis_name))


def _extremum(op):
    def collective(x, axis_name, *, axis_index_groups=None):
        positions, named = _positional(axis_name)
        if positions:
            x = tree_map(lambda v: _over_positions("reduce_" + op[1:], v, positions, op), x)
            if not named:
                return x
            axis_name = named
        names = _names(op, axis_name, axis_index_groups)
        return tree_map(lambda v: _bind(op, _leaf(v, op), axis_name=_param(names)), x)
    collective.__name__ = op
    collective.__doc__ = (f"The {'maximum' if op == 'pmax' else 'minimum'} of `x` (a pytree) "
                          f"over the named axis (or tuple of axes).")
    return collective


pmax, pmin = _extremum("pmax"), _extremum("pmin")


def axis_index(axis_name):
    """This example's (device's) index along the named axis; over a tuple of names, the
    row-major index into their product."""
    names = _names("axis_index", axis_name)
    index, stride = None, 1
    for name in reversed(names):
        term = _bind("axis_index", axis_name=name)
        term = term if stride == 1 else term * stride
        index = term if index is None else term + index
        stride *= axis_size(name)
    return index


def _canonical(op, axis, rank, what):
    if not -rank <= axis < rank:
        raise ValueError(f"lax.{op}: {what}={axis} is out of bounds: expected "
                         f"{-rank} <= {what} < {rank}")
    return axis % rank


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False, to="varying"):
    """Every example's `x` (a pytree) along a new axis `axis` (tiled: concatenated along the
    existing axis `axis`); over a tuple of names, in row-major order of their product.
    `to` is the result's manual axis type over the names, as JAX 0.10's: "varying" (the
    default), "invarying" or "reduced" (of a value that varies over the names). Values and
    derivatives are the same for all three; inside a shard_map body the result varies over
    the names only with "varying" (vma.py), so that the others may be returned under
    out_specs that leave the names out."""
    if to not in ALL_GATHER_TO:
        raise ValueError(f"Got unexpected `to` value {to!r} for `lax.all_gather`. Allowed "
                         f"`to` values are: {set(ALL_GATHER_TO)}")
    names = _names("all_gather", axis_name, axis_index_groups)
    typed = {} if to == "varying" else {"to": to}

    def leaf(v):
        v = _leaf(v, "all_gather")
        if to == "reduced" and vma.staging_a_body() and not vma.varying(v) & set(names):
            raise ValueError(f"all_gather(..., to='reduced') is a Varying -> Reduced "
                             f"collective: its operand must vary over axis_name="
                             f"{_param(names)!r}, but typeof(x).manual_axis_type.varying is "
                             f"{set(vma.varying(v))}; gather a varying value, or use "
                             f"to='invarying'")
        at = _canonical("all_gather", axis, v.ndim + (0 if tiled else 1), "axis")
        if len(names) == 1:
            return _bind("all_gather", v, axis_name=names[0], all_gather_dimension=at,
                         tiled=bool(tiled), axis_size=axis_size(names[0]), **typed)
        for name in reversed(names):   # innermost name first: (n1, ..., nk) at `at`
            v = _bind("all_gather", v, axis_name=name, all_gather_dimension=at, tiled=False,
                      axis_size=axis_size(name), **typed)
        return _merge(v, at, len(names) + (1 if tiled else 0))
    return tree_map(leaf, x)


def _merge(v, at, count):
    """`v` with its axes at..at+count-1 merged into one."""
    shape = list(v.shape)
    shape[at:at + count] = [math.prod(shape[at:at + count])]
    return _ops.reshape(v, tuple(shape))


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """The psum of `x` (a pytree), of which each example keeps its own part along
    `scatter_dimension`: the index equal to its axis_index (tiled: its block)."""
    names = _names("psum_scatter", axis_name, axis_index_groups)

    def leaf(v):
        v = _leaf(v, "psum_scatter")
        at = _canonical("psum_scatter", scatter_dimension, v.ndim, "scatter_dimension")
        if len(names) == 1:
            return _bind("psum_scatter", v, axis_name=names[0], scatter_dimension=at,
                         tiled=bool(tiled), axis_size=axis_size(names[0]))
        sizes = [axis_size(n) for n in names]
        n, total = v.shape[at], math.prod(sizes)
        if (n % total if total else n) if tiled else n != total:
            raise ValueError(f"lax.psum_scatter: dimension {at} of the operand (shape "
                             f"{v.shape}) must be {'a multiple of' if tiled else 'equal to'} "
                             f"the size {total} of the axes {names}")
        shape = list(v.shape)
        shape[at:at + 1] = sizes + ([n // total if total else 0] if tiled else [])
        v = _ops.reshape(v, tuple(shape))
        for name, size in zip(names, sizes):   # outermost name first
            v = _bind("psum_scatter", v, axis_name=name, scatter_dimension=at, tiled=False,
                      axis_size=size)
        return v
    return tree_map(leaf, x)


def ppermute(x, axis_name, perm):
    """`x` (a pytree) sent from example `src` to example `dst` for each (src, dst) pair of
    `perm`; an example that receives nothing gets zeros."""
    names = _names("ppermute", axis_name)
    size = _size(names)
    perm = tuple((int(s), int(d)) for s, d in perm)
    for pair in perm:
        if not all(0 <= i < size for i in pair):
            raise ValueError(f"lax.ppermute: the pair {pair} of perm={perm} is out of range "
                             f"for the axis {_param(names)!r} of size {size}")
    if len(names) == 1:
        return tree_map(lambda v: _bind("ppermute", _leaf(v, "ppermute"), axis_name=names[0],
                                        perm=perm), x)
    src = _ops.dynamic_index_in_dim(to_array(sources(perm, size)), axis_index(names),
                                    keepdims=False)
    received = _ops.ge(src, 0)

    def leaf(v):   # over several names: this lane's source out of the gathered values
        gathered = all_gather(v, names)
        value = _ops.dynamic_index_in_dim(gathered, _ops.max(src, 0), keepdims=False)
        return _ops.select(received, value, _ops.full_like(value, 0))
    return tree_map(leaf, x)



def pshuffle(x, axis_name, perm):
    """`x` (a pytree) of example `perm[i]` at example `i` (`perm` a permutation of the axis)."""
    names = _names("pshuffle", axis_name)
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(_size(names))):
        raise ValueError(f"lax.pshuffle: perm={perm} is not a permutation of "
                         f"range({_size(names)}), the size of the axis {_param(names)!r}")
    return ppermute(x, axis_name, [(p, i) for i, p in enumerate(perm)])


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
    """Each example splits `x` (a pytree) along `split_axis` into one block per example, sends
    block r to example r, and joins what it receives along `concat_axis` in example order
    (a new axis there unless `tiled`)."""
    names = _names("all_to_all", axis_name, axis_index_groups)

    def leaf(v):
        v = _leaf(v, "all_to_all")
        split = _canonical("all_to_all", split_axis, v.ndim, "split_axis")
        concat = _canonical("all_to_all", concat_axis, v.ndim, "concat_axis")
        if len(names) > 1:
            return _all_to_all_over(v, names, split, concat, bool(tiled))
        return _bind("all_to_all", v, axis_name=names[0], split_axis=split, concat_axis=concat,
                     tiled=bool(tiled), axis_size=axis_size(names[0]))
    return tree_map(leaf, x)


def _all_to_all_over(v, names, split, concat, tiled):
    """all_to_all over several names (one axis of their combined size, the first name major,
    as JAX orders them): every example gathers all the operands and keeps its own block of
    each. The shape checks are the primitive's, made on the combined size."""
    size = _size(names)
    out = P["all_to_all"].abstract_eval(v.aval, axis_name=names[0], split_axis=split,
                                        concat_axis=concat, tiled=tiled, axis_size=size)
    block = v.shape[split] // size if size else 0
    gathered = all_gather(v, names)   # (size, *v.shape)
    mine = _ops.dynamic_slice_in_dim(gathered, _ops.mul(axis_index(names), block), block,
                                     axis=split + 1)
    if not tiled:
        mine = _ops.squeeze(mine, (split + 1,))
    order = list(range(1, mine.ndim))
    order.insert(concat, 0)   # the examples' axis goes where the blocks are joined
    return _ops.reshape(_ops.transpose(mine, order), out.shape)


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """The named axis and the positional axis `axis` of `x` swapped (an all_to_all that splits
    and joins along `axis`)."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)
