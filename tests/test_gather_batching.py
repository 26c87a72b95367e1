"""Operand batching dimensions of `lax.gather` and the `lax.scatter` family against JAX 0.10.2.

Hypothesis draws valid batched gathers and scatters: operand ranks 1 to 4 with one or more
batching dimensions anywhere (leading, trailing, several), the indices' batching dimensions
in any order among their batch dimensions, index batch sizes 0 and 1 included, every mode,
value and index dtypes, indices out of bounds and repeated. Results are compared with JAX
eagerly, and the LLVM backend with the reference backend under `jit`. vmap, grad (check_grads
in both modes), scatter_apply, the flags, the named tuples and JAX's error texts for invalid
batching dimensions are checked case by case.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
from kiln import lax
from kiln.test_util import check_grads

jax = pytest.importorskip("jax")
jl = jax.lax

SETTINGS = settings(max_examples=30, deadline=None)
COMPILED = settings(max_examples=10, deadline=None)
GATHER_MODES = ["clip", "fill", "promise_in_bounds"]
SCATTER_MODES = ["clip", "drop", "promise_in_bounds"]
SCATTERS = ["scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"]
INDEX_DTYPES = [np.int32, np.int8, np.uint8]


# ----------------------------------------------------------------------------- drawing

@st.composite
def batched_layout(draw, max_rank=4):
    """(operand shape, operand batching dims, index batch shape, indices batching dims, the
    other operand dims): the indices' batching dims are placed among the index batch dims."""
    rank = draw(st.integers(1, max_rank))
    shape = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    batching = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1)))
    others = [d for d in range(rank) if d not in batching]
    extra = draw(st.lists(st.integers(0, 3), max_size=2))
    nbatch = len(batching) + len(extra)
    positions = draw(st.permutations(range(nbatch)))[:len(batching)]
    index_batch = [0] * nbatch
    for d, p in zip(batching, positions):
        index_batch[p] = shape[d]
    rest = iter(extra)
    for p in range(nbatch):
        if p not in positions:
            index_batch[p] = next(rest)
    return shape, tuple(batching), index_batch, tuple(positions), others


def draw_values(draw, shape, dtype):
    if np.dtype(dtype) == np.bool_:
        return np.array(draw(st.lists(st.booleans(), min_size=int(np.prod(shape)),
                                      max_size=int(np.prod(shape)))), bool).reshape(shape)
    elements = st.sampled_from([-2, -1, 0, 1, 2, 3])
    flat = draw(st.lists(elements, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    return np.array(flat, dtype).reshape(shape)


def draw_indices(draw, shape, bound, dtype):
    lo = -2 if np.dtype(dtype).kind == "i" else 0
    flat = draw(st.lists(st.integers(lo, bound + 2), min_size=int(np.prod(shape)),
                         max_size=int(np.prod(shape))))
    return np.array(flat, dtype).reshape(shape)


@st.composite
def gathers(draw, dtypes=(np.float32, np.int32, np.bool_)):
    shape, batching, index_batch, index_batching, others = draw(batched_layout())
    index_map = draw(st.permutations(others))[:draw(st.integers(0, len(others)))]
    nonempty = [d for d in others if shape[d]]   # (JAX's lowering refuses to collapse a 0)
    collapsed = sorted(draw(st.sets(st.sampled_from(nonempty))) if nonempty else ())
    slice_sizes = [1 if d in batching or d in collapsed else draw(st.integers(0, shape[d]))
                   for d in range(len(shape))]
    n_offset = len(shape) - len(batching) - len(collapsed)
    out_rank = len(index_batch) + n_offset
    offset = sorted(draw(st.permutations(range(out_rank)))[:n_offset])
    dn = jl.GatherDimensionNumbers(tuple(offset), tuple(collapsed), tuple(index_map),
                                   batching, index_batching)
    dtype = draw(st.sampled_from(dtypes))
    x = draw_values(draw, shape, dtype)
    idx = draw_indices(draw, index_batch + [len(index_map)], max(shape, default=1),
                       draw(st.sampled_from(INDEX_DTYPES)))
    mode = draw(st.sampled_from(GATHER_MODES))
    return x, idx, dn, tuple(slice_sizes), mode


@st.composite
def scatters(draw, dtypes=(np.float32, np.int32)):
    shape, batching, index_batch, index_batching, others = draw(batched_layout())
    to_operand = draw(st.permutations(others))[:draw(st.integers(0, len(others)))]
    inserted = sorted(draw(st.sets(st.sampled_from(others))) if others else ())
    window = [d for d in others if d not in inserted]
    window_sizes = [draw(st.integers(0, shape[d])) for d in window]
    upd_rank = len(index_batch) + len(window)
    window_dims = sorted(draw(st.permutations(range(upd_rank)))[:len(window)])
    sizes, batch, win = [], iter(index_batch), iter(window_sizes)
    for i in range(upd_rank):
        sizes.append(next(win) if i in window_dims else next(batch))
    dn = jl.ScatterDimensionNumbers(tuple(window_dims), tuple(inserted), tuple(to_operand),
                                    batching, index_batching)
    dtype = draw(st.sampled_from(dtypes))
    x = draw_values(draw, shape, dtype)
    u = draw_values(draw, sizes, dtype)
    idx = draw_indices(draw, index_batch + [len(to_operand)], max(shape, default=1),
                       draw(st.sampled_from(INDEX_DTYPES)))
    return x, idx, u, dn, draw(st.sampled_from(SCATTER_MODES)), draw(st.sampled_from(SCATTERS))


def kiln_dn(dn):
    """JAX's dimension numbers as kiln's named tuple of the same name."""
    return getattr(lax, type(dn).__name__)(*dn)


def same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------- against JAX

@SETTINGS
@given(gathers())
def test_gather_matches_jax(case):
    x, idx, dn, sizes, mode = case
    want = jl.gather(x, idx, dn, sizes, mode=mode)
    same(lax.gather(x, idx, kiln_dn(dn), sizes, mode=mode), want)


@SETTINGS
@given(scatters())
def test_scatter_matches_jax(case):
    x, idx, u, dn, mode, name = case
    want = getattr(jl, name)(x, idx, u, dn, mode=mode)
    same(getattr(lax, name)(x, idx, u, kiln_dn(dn), mode=mode), want)


# ---------------------------------------------------------------- compiled backends

@COMPILED
@given(gathers(dtypes=(np.float32, np.int32)), scatters())
def test_llvm_matches_reference(gcase, scase):
    x, idx, dn, sizes, mode = gcase
    y, sidx, u, sdn, smode, name = scase
    gdn, sdn = kiln_dn(dn), kiln_dn(sdn)

    def f(x, idx, y, sidx, u):
        return (lax.gather(x, idx, gdn, sizes, mode=mode),
                getattr(lax, name)(y, sidx, u, sdn, mode=smode))
    got = kiln.jit(f)(x, idx, y, sidx, u)
    want = kiln.jit(f, backend="reference")(x, idx, y, sidx, u)
    for g, w in zip(got, want):
        same(g, w)
    same(want[0], jl.gather(x, idx, dn, sizes, mode=mode))


@pytest.mark.parametrize("name", SCATTERS)
def test_clipped_scatter_into_an_empty_operand(name):
    """Windows of 1 clamped into a dimension of 0 write nothing (the LLVM and CUDA lowerings
    once wrote past the end)."""
    x, idx, u = np.zeros((2, 0), np.float32), np.array([[3], [-1]], np.int32), np.ones(2, np.float32)
    dn = jl.ScatterDimensionNumbers((), (1,), (1,), (0,), (0,))
    for backend in ("llvm", "reference"):
        got = kiln.jit(lambda x, i, u: getattr(lax, name)(x, i, u, kiln_dn(dn), mode="clip"),
                       backend=backend)(x, idx, u)
        same(got, getattr(jl, name)(x, idx, u, dn, mode="clip"))


# ------------------------------------------------------------------ transformations

# take_along_axis's gather as JAX emits it (two batching dims around the gathered one).
TAKE_DN = jl.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(1,),
                                    start_index_map=(1,), operand_batching_dims=(0, 2),
                                    start_indices_batching_dims=(0, 2))
SCATTER_DN = jl.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(1,),
                                        scatter_dims_to_operand_dims=(1,),
                                        operand_batching_dims=(0,),
                                        scatter_indices_batching_dims=(0,))
RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 5, 3)).astype(np.float32)
TAKE_IDX = np.array([[[0], [4], [9]], [[2], [-1], [3]]], np.int32).reshape(2, 1, 3, 1)
TAKE_IDX = np.broadcast_to(TAKE_IDX, (2, 2, 3, 1)).copy()
S_IDX = np.array([[1], [4]], np.int32)
S_UPD = RNG.normal(size=(2, 3)).astype(np.float32)


def take(lib, x, mode="fill"):
    return lib.gather(x, TAKE_IDX, TAKE_DN if lib is jl else kiln_dn(TAKE_DN), (1, 1, 1),
                      mode=mode, fill_value=0)


def test_jaxpr_dimension_numbers_under_jit_and_modes():
    for mode in GATHER_MODES:
        np.testing.assert_allclose(kiln.jit(lambda x: take(lax, x, mode))(X),
                                   take(jl, X, mode), rtol=1e-6)


def test_vmap_matches_jax():
    xs = np.stack([X, 2 * X])
    idx = np.stack([S_IDX, np.array([[0], [9]], np.int32)])
    np.testing.assert_allclose(kiln.vmap(lambda x: take(lax, x))(xs),
                               jax.vmap(lambda x: take(jl, x))(xs), rtol=1e-6)
    for name in SCATTERS[1:]:
        def k(x, i, u):
            return getattr(lax, name)(x, i, u, kiln_dn(SCATTER_DN), mode="drop")

        def j(x, i, u):
            return getattr(jl, name)(x, i, u, SCATTER_DN, mode="drop")
        np.testing.assert_allclose(kiln.vmap(k, (0, 0, None))(xs, idx, S_UPD),
                                   jax.vmap(j, (0, 0, None))(xs, idx, S_UPD),
                                   rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("mode", ["clip", "fill"])
def test_gather_grads(mode):
    check_grads(lambda x: take(lax, x, mode), (X,), order=2, modes=("fwd", "rev"))
    got = kiln.grad(lambda x: (take(lax, x, mode) ** 2).sum())(X)
    want = jax.grad(lambda x: (take(jl, x, mode) ** 2).sum())(X)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("name", SCATTERS)
def test_scatter_grads(name):
    x = X
    u = S_UPD + 3.0   # (no ties with the operand, no zeros)

    def f(lib, dn):
        return lambda x, u: getattr(lib, name)(x, S_IDX, u, dn, mode="drop", unique_indices=True)
    check_grads(f(lax, kiln_dn(SCATTER_DN)), (x, u), order=1, modes=("fwd", "rev"))
    got = kiln.grad(lambda x, u: f(lax, kiln_dn(SCATTER_DN))(x, u).sum(), (0, 1))(x, u)
    want = jax.grad(lambda x, u: f(jl, SCATTER_DN)(x, u).sum(), (0, 1))(x, u)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_scatter_apply_and_flags():
    x = X
    idx = np.array([[1], [1]], np.int32)
    got = lax.scatter_apply(x, idx, lambda v: v * 2, kiln_dn(SCATTER_DN), update_shape=(2, 3),
                            mode="drop")
    want = jl.scatter_apply(x, idx, lambda v: v * 2, SCATTER_DN, update_shape=(2, 3),
                            mode="drop")
    np.testing.assert_allclose(got, want)
    got = lax.scatter_add(x, S_IDX, S_UPD, kiln_dn(SCATTER_DN), unique_indices=True,
                          indices_are_sorted=True)
    want = jl.scatter_add(x, S_IDX, S_UPD, SCATTER_DN, unique_indices=True,
                          indices_are_sorted=True)
    np.testing.assert_allclose(got, want)
    got = lax.gather(X, TAKE_IDX, kiln_dn(TAKE_DN), (1, 1, 1), unique_indices=True,
                     indices_are_sorted=True, mode="clip")
    np.testing.assert_allclose(got, jl.gather(X, TAKE_IDX, TAKE_DN, (1, 1, 1),
                                              unique_indices=True, indices_are_sorted=True,
                                              mode="clip"))


@pytest.mark.parametrize("dtype,size", [(np.int8, 200), (np.uint8, 300)])
def test_batch_larger_than_the_index_type(dtype, size):
    x = np.arange(size * 2, dtype=np.float32).reshape(size, 2)
    idx = np.tile(np.array([[1]], dtype), (size, 1))
    dn = jl.GatherDimensionNumbers((), (1,), (1,), (0,), (0,))
    same(lax.gather(x, idx, kiln_dn(dn), (1, 1), mode="fill"),
         jl.gather(x, idx, dn, (1, 1), mode="fill"))
    sdn = jl.ScatterDimensionNumbers((), (1,), (1,), (0,), (0,))
    u = np.ones(size, np.float32)
    same(lax.scatter_add(x, idx, u, kiln_dn(sdn)), jl.scatter_add(x, idx, u, sdn))


@pytest.mark.parametrize("mode", GATHER_MODES)
def test_batching_slice_size_zero_reads_nothing(mode):
    """(XLA's result for a batch of 2 or more; for a batch of 1, XLA itself fails or reads.)"""
    x = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([[1], [7]], np.int32)
    dn = jl.GatherDimensionNumbers((1,), (1,), (1,), (0,), (0,))
    same(lax.gather(x, idx, kiln_dn(dn), (0, 1, 4), mode=mode),
         jl.gather(x, idx, dn, (0, 1, 4), mode=mode))


def test_named_tuples_are_jaxs():
    for name in ("GatherDimensionNumbers", "ScatterDimensionNumbers"):
        ours, theirs = getattr(lax, name), getattr(jl, name)
        assert ours._fields == theirs._fields
        assert ours._field_defaults == theirs._field_defaults


# ------------------------------------------------------------------------------ errors

G = dict(offset_dims=(1,), collapsed_slice_dims=(1,), start_index_map=(1,))
S = dict(update_window_dims=(1,), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,))
GATHER_ERRORS = [   # (operand shape, indices shape, dimension numbers, slice sizes)
    ((2, 3, 4), (2, 1), dict(G, operand_batching_dims=(0,)), (1, 1, 4)),
    ((2, 3, 4), (2, 1), dict(G, start_indices_batching_dims=(0,)), (1, 1, 4)),
    ((2, 3, 4), (2, 1), dict(G, operand_batching_dims=(0, 0), start_indices_batching_dims=(0, 0)), (1, 1, 4)),
    ((2, 3, 4), (2, 1), dict(G, operand_batching_dims=(3,), start_indices_batching_dims=(0,)), (1, 1, 4)),
    ((2, 3, 4), (2, 1), dict(G, operand_batching_dims=(1,), start_indices_batching_dims=(0,)), (1, 1, 4)),
    ((2, 3, 4), (2, 1), dict(G, collapsed_slice_dims=(), operand_batching_dims=(0,), start_indices_batching_dims=(0,)), (1, 1, 4)),
    ((2, 3, 4), (2, 1), dict(G, operand_batching_dims=(0,), start_indices_batching_dims=(1,)), (1, 1, 4)),
    ((2, 3, 4), (2, 1), dict(G, operand_batching_dims=(0,), start_indices_batching_dims=(2,)), (1, 1, 4)),
    ((3, 3, 4), (2, 1), dict(G, operand_batching_dims=(0,), start_indices_batching_dims=(0,)), (1, 1, 4)),
    ((2, 3, 4), (2, 1), dict(G, operand_batching_dims=(0,), start_indices_batching_dims=(0,)), (2, 1, 4)),
    ((2, 3, 4, 5), (2, 4, 1), dict(offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1,), operand_batching_dims=(2, 0), start_indices_batching_dims=(1, 0)), (1, 1, 1, 5)),
    ((2, 3, 4), (2, 1), dict(G, operand_batching_dims=(0,), start_indices_batching_dims=(0,)), (1, 1)),
]
SCATTER_ERRORS = [   # (operand shape, indices shape, updates shape, dimension numbers)
    ((2, 3, 4), (2, 1), (2, 4), dict(S, operand_batching_dims=(0,))),
    ((2, 3, 4), (2, 1), (2, 4), dict(S, scatter_indices_batching_dims=(0,))),
    ((2, 3, 4), (2, 1), (2, 4), dict(S, operand_batching_dims=(2, 0), scatter_indices_batching_dims=(0, 0))),
    ((2, 3, 4), (2, 1), (2, 4), dict(S, operand_batching_dims=(3,), scatter_indices_batching_dims=(0,))),
    ((2, 3, 4), (2, 1), (2, 4), dict(S, operand_batching_dims=(1,), scatter_indices_batching_dims=(0,))),
    ((2, 3, 4), (2, 1), (2, 4), dict(S, inserted_window_dims=(), operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))),
    ((2, 3, 4), (2, 1), (2, 4), dict(S, operand_batching_dims=(0,), scatter_indices_batching_dims=(1,))),
    ((3, 3, 4), (2, 1), (2, 4), dict(S, operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))),
    ((2, 3, 4), (2, 1), (2, 4), dict(S, operand_batching_dims=(0,), scatter_indices_batching_dims=(-1,))),
    ((2, 3, 4), (2, 1), (2, 5), dict(S, operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))),
    ((2, 3, 4), (2, 1), (2, 4), dict(S, operand_batching_dims=(0,), scatter_indices_batching_dims=(0,), inserted_window_dims=(1, 2))),
]


def _message(fn):
    with pytest.raises(TypeError) as e:
        fn()
    return str(e.value)


@pytest.mark.parametrize("case", GATHER_ERRORS)
def test_gather_errors_are_jaxs(case):
    shape, ishape, dn, sizes = case
    x, idx = np.zeros(shape, np.float32), np.zeros(ishape, np.int32)
    want = _message(lambda: jl.gather(x, idx, jl.GatherDimensionNumbers(**dn), sizes))
    assert _message(lambda: lax.gather(x, idx, lax.GatherDimensionNumbers(**dn), sizes)) == want
    under_jit = _message(lambda: kiln.jit(lambda x: lax.gather(
        x, idx, lax.GatherDimensionNumbers(**dn), sizes))(x))
    assert under_jit.startswith(want + "\nFile ") and "test_gather_batching.py" in under_jit


@pytest.mark.parametrize("case", SCATTER_ERRORS)
def test_scatter_errors_are_jaxs(case):
    shape, ishape, ushape, dn = case
    x, idx, u = (np.zeros(shape, np.float32), np.zeros(ishape, np.int32),
                 np.zeros(ushape, np.float32))
    want = _message(lambda: jl.scatter_add(x, idx, u, jl.ScatterDimensionNumbers(**dn)))
    assert _message(lambda: lax.scatter_add(x, idx, u, lax.ScatterDimensionNumbers(**dn))) == want
