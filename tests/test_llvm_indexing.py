"""The LLVM backend's indexing and sorting lowerings against the reference backend (the oracle).

dynamic_slice, dynamic_update_slice, gather, the scatter family and sort are driven through
`kiln.lax` (explicit dimension numbers, every mode) and `kiln.numpy` (indexing, `.at[]`
updates, take, take_along_axis, sort, argsort), each function compiled with
`kiln.jit(..., backend="llvm")` and with `backend="reference"` on the same data. Hypothesis
draws shapes with 0- and 1-sized axes, value dtypes float32/float64/int32/uint32/bool (NaN,
infinities and signed zeros among the floats, few distinct values so that sort keys tie),
index dtypes int8..int64 and uint8..uint64 with negative, out-of-bounds and repeated indices.
Results must agree exactly, signs of zeros included. x64 is on for the module so that 64-bit
dtypes reach the primitives.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import hypothesis.extra.numpy as hnp

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.tree_util import tree_leaves

pytestmark = pytest.mark.usefixtures("x64_module")

SETTINGS = settings(max_examples=40, deadline=None)
VALUE_DTYPES = [np.dtype(t) for t in (np.float32, np.float64, np.int32, np.uint32, np.bool_)]
INDEX_DTYPES = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8,
                                      np.uint16, np.uint32, np.uint64)]
SCATTERS = [lax.scatter, lax.scatter_add, lax.scatter_mul, lax.scatter_min, lax.scatter_max]

_FLOATS = [0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 0.5, np.nan, np.inf, -np.inf]


# ----------------------------------------------------------------------------- helpers

def both(f, *args):
    """(llvm results, reference results) of `f` jitted on each backend, as lists of arrays."""
    got = kiln.jit(f, backend="llvm")(*args)
    want = kiln.jit(f, backend="reference")(*args)
    return [np.asarray(g) for g in tree_leaves(got)], [np.asarray(w) for w in tree_leaves(want)]


def check(f, *args):
    got, want = both(f, *args)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), (k, g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w, err_msg=f"result {k}")
        if g.dtype.kind == "f":   # -0.0 and 0.0 where the reference has them (NaNs' signs vary)
            number = ~np.isnan(w)
            np.testing.assert_array_equal(np.signbit(g[number]), np.signbit(w[number]),
                                          err_msg=f"sign {k}")


def values(draw, shape, dtype, distinct=None):
    """An array of `dtype` with special values among the floats; `distinct` limits how many
    different values appear (ties)."""
    if dtype.kind == "f":
        elements = st.sampled_from(_FLOATS[:distinct] if distinct else _FLOATS)
    elif dtype.kind == "b":
        elements = st.booleans()
    elif dtype.kind == "i":
        top = np.iinfo(dtype)
        elements = st.sampled_from([-5, -1, 0, 1, 2, 3, 7, top.min, top.max][:distinct or 9])
    else:
        elements = st.sampled_from([0, 1, 2, 3, 7, np.iinfo(dtype).max][:distinct or 6])
    return draw(hnp.arrays(dtype, tuple(shape), elements=elements))


def index_values(draw, shape, dtype, bound):
    """Indices of `dtype` around [0, bound): negative and past-the-end ones, repeats, and the
    type's extremes."""
    info = np.iinfo(dtype)
    small = st.integers(max(-bound - 3, info.min), min(bound + 3, info.max))
    return draw(hnp.arrays(dtype, tuple(shape),
                           elements=st.one_of(small, st.sampled_from([info.min, info.max]))))


def shapes(min_rank=1, max_rank=3, max_side=4):
    return st.lists(st.integers(0, max_side), min_size=min_rank, max_size=max_rank)


def subsequence(draw, items, size=None):
    """`size` (default: any number) of `items` in a random order."""
    items = draw(st.permutations(list(items)))
    return items[:draw(st.integers(0, len(items))) if size is None else size]


# ------------------------------------------------------------------------- dynamic slices

@st.composite
def dynamic_slice_cases(draw):
    shape = draw(shapes(0))
    sizes = tuple(draw(st.integers(0, d)) for d in shape)
    x = values(draw, shape, draw(st.sampled_from(VALUE_DTYPES)))
    update = values(draw, sizes, x.dtype)
    dtype = draw(st.sampled_from(INDEX_DTYPES))
    starts = [index_values(draw, (), dtype, d) for d in shape]
    return x, update, sizes, starts


@SETTINGS
@given(dynamic_slice_cases())
def test_dynamic_slice_and_update(case):
    x, update, sizes, starts = case

    def f(x, update, *starts):
        return (lax.dynamic_slice(x, starts, sizes),
                lax.dynamic_update_slice(x, update, starts))
    check(f, x, update, *starts)


# -------------------------------------------------------------------------------- gather

def windows(draw):
    """What gathers and scatters share: an operand shape, the operand dimensions indexed
    (in index-vector order), the dimensions dropped from the window (collapsed / inserted:
    size 1), the window sizes of the others, the indices' batch shape, and the positions of
    the window axes among the result's (gather) or the updates' (scatter) axes."""
    shape = draw(shapes())
    rank = len(shape)
    index_map = tuple(subsequence(draw, range(rank)))
    dropped = tuple(sorted(subsequence(draw, [d for d in range(rank) if shape[d] >= 1])))
    window = [draw(st.integers(0, shape[d])) for d in range(rank) if d not in dropped]
    batch = draw(shapes(0, 2, 3))
    positions = tuple(sorted(subsequence(draw, range(len(batch) + len(window)), len(window))))
    return shape, index_map, dropped, window, batch, positions


def operand_and_indices(draw, shape, batch, index_map):
    x = values(draw, shape, draw(st.sampled_from(VALUE_DTYPES)))
    indices = index_values(draw, batch + [len(index_map)], draw(st.sampled_from(INDEX_DTYPES)),
                           max(shape))
    return x, indices


@st.composite
def gather_cases(draw):
    shape, index_map, collapsed, window, batch, offset_dims = windows(draw)
    sizes = iter(window)
    slice_sizes = tuple(1 if d in collapsed else next(sizes) for d in range(len(shape)))
    dn = lax.GatherDimensionNumbers(offset_dims=offset_dims, collapsed_slice_dims=collapsed,
                                    start_index_map=index_map)
    x, indices = operand_and_indices(draw, shape, batch, index_map)
    mode = draw(st.sampled_from(["clip", "fill", "promise_in_bounds"]))
    fill_value = draw(st.sampled_from([None, 0, 1])) if mode == "fill" else None
    return x, indices, dn, slice_sizes, mode, fill_value


@SETTINGS
@given(gather_cases())
def test_gather(case):
    x, indices, dn, slice_sizes, mode, fill_value = case
    check(lambda x, i: lax.gather(x, i, dn, slice_sizes, mode=mode, fill_value=fill_value),
          x, indices)


# ------------------------------------------------------------------------------- scatter

@st.composite
def scatter_cases(draw):
    shape, to_operand, inserted, window, batch, window_dims = windows(draw)
    sizes, w, b = [], iter(window), iter(batch)
    for k in range(len(batch) + len(window)):
        sizes.append(next(w) if k in window_dims else next(b))
    dn = lax.ScatterDimensionNumbers(update_window_dims=window_dims,
                                     inserted_window_dims=inserted,
                                     scatter_dims_to_operand_dims=to_operand)
    x, indices = operand_and_indices(draw, shape, batch, to_operand)
    updates = values(draw, sizes, x.dtype)
    return x, indices, updates, dn, draw(st.sampled_from(["clip", "drop", "promise_in_bounds"]))


@SETTINGS
@given(scatter_cases())
def test_scatter_family(case):
    x, indices, updates, dn, mode = case
    check(lambda x, i, u: [op(x, i, u, dn, mode=mode) for op in SCATTERS], x, indices, updates)


def test_scatter_repeated_indices_apply_in_order():
    x = np.zeros(3, np.float32)
    indices = np.array([[1], [1], [0], [1]], np.int32)
    updates = np.array([1.0, 2.0, -0.0, 3.0], np.float32)
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    got, want = both(lambda x, i, u: [op(x, i, u, dn) for op in SCATTERS], x, indices, updates)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert got[0].tolist() == [-0.0, 3.0, 0.0] and np.signbit(got[0][0])   # the last one wins
    assert got[1].tolist() == [0.0, 6.0, 0.0]


# ------------------------------------------------------------------------- kiln.numpy

@st.composite
def numpy_cases(draw):
    n, m = draw(st.integers(1, 5)), draw(st.integers(0, 4))
    x = values(draw, (n, m), draw(st.sampled_from(VALUE_DTYPES)))
    dtype = draw(st.sampled_from(INDEX_DTYPES))
    idx = index_values(draw, (draw(st.integers(0, 6)),), dtype, n)
    return x, idx, index_values(draw, (), dtype, n)


@SETTINGS
@given(numpy_cases())
def test_numpy_indexing(case):
    x, idx, i = case

    def f(x, idx, i):
        u = x[0]
        rows = jnp.broadcast_to(u, idx.shape + u.shape)
        arithmetic = () if x.dtype == bool else (x.at[idx].add(rows), x.at[idx].mul(rows))
        return (x[i], x[idx], x[idx, -1:], x.at[idx].get(mode="fill", fill_value=1),
                x.at[idx].set(rows), x.at[idx].min(rows), x.at[idx].max(rows),
                x.at[i, 0:1].set(u[:1]), jnp.take(x, idx, axis=0, mode="clip"),
                jnp.take(x.T, idx, axis=1)) + arithmetic
    check(f, x, idx, i)


@st.composite
def sortable(draw, min_rank=1):
    shape = draw(shapes(min_rank, 3, 6))
    x = values(draw, shape, draw(st.sampled_from(VALUE_DTYPES)), draw(st.integers(1, 10)))
    return x, draw(st.integers(-len(shape), len(shape) - 1))


@SETTINGS
@given(sortable())
def test_numpy_sort_argsort_take_along_axis(case):
    x, axis = case

    def f(x):
        order = jnp.argsort(x, axis=axis)
        return (jnp.sort(x, axis=axis), order, jnp.take_along_axis(x, order, axis=axis),
                jnp.sort(x, axis=axis, descending=True))
    check(f, x)


# ---------------------------------------------------------------------------------- sort

@st.composite
def sort_cases(draw):
    shape = draw(shapes(1, 3, 9))
    n = draw(st.integers(1, 3))
    distinct = draw(st.integers(1, 10))
    xs = [values(draw, shape, draw(st.sampled_from(VALUE_DTYPES)), distinct) for _ in range(n)]
    return xs, draw(st.integers(0, len(shape) - 1)), draw(st.integers(1, n)), draw(st.booleans())


@SETTINGS
@given(sort_cases())
def test_lax_sort_multi_operand(case):
    xs, dimension, num_keys, stable = case
    check(lambda *xs: lax.sort(xs, dimension=dimension, is_stable=stable, num_keys=num_keys),
          *xs)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 300), st.sampled_from(VALUE_DTYPES[:3]), st.integers(1, 4))
def test_sort_long_rows_stable(n, dtype, distinct):
    """Rows long enough for many merge passes with ragged runs; ties keep their order."""
    rng = np.random.default_rng(n)
    keys = np.asarray(_FLOATS[:distinct] if dtype.kind == "f" else range(distinct))[
        rng.integers(0, distinct, n)].astype(dtype)
    got, want = both(lambda k: lax.sort((k, jnp.arange(n)), num_keys=1), keys)
    canonical = np.where(np.isnan(keys), np.inf, keys) if dtype.kind == "f" else keys
    nan_last = np.isnan(keys) if dtype.kind == "f" else np.zeros(n, bool)
    assert got[1].tolist() == np.lexsort((np.arange(n), canonical, nan_last)).tolist()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_sorts_share_the_workspace():
    """Two sorts and a gather in one function: scratch space and temporaries do not clash."""
    x = np.random.default_rng(1).normal(size=(5, 37)).astype(np.float32)
    check(lambda x: jnp.sort(x * 2.0, axis=1) + jnp.sort(x, axis=0)[jnp.argsort(x[:, 0])], x)
