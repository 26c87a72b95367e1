"""Batching rules of the structural, indexing and sorting primitives (issue 5): `kiln.vmap`
against a Python loop over the examples, eagerly and under `kiln.jit`, with hypothesis over
example shapes (sizes 0 and 1 included), batch sizes, dtypes, `in_axes` (any axis, negative
ones, or None for some operands) and `out_axes`; driven through `kiln.lax` with explicit
params and through `kiln.numpy` indexing. The rules are vectorised: no `scan` appears."""
import numpy as np
import pytest
from hypothesis import given, settings, assume, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.lax import GatherDimensionNumbers as GDN, ScatterDimensionNumbers as SDN

EXAMPLES = settings(max_examples=25, deadline=None)
DTYPES = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}


# ----------------------------------------------------------------------------- helpers

def make(rng, shape, dtype, low=-4, high=5):
    """Random values; small integers for numbers too (ties in sorts, exact scatter sums)."""
    if np.dtype(dtype) == np.bool_:
        return rng.rand(*shape) < 0.5
    return rng.randint(low, high, size=shape).astype(dtype)


def rng_of(data):
    return np.random.RandomState(data.draw(st.integers(0, 2 ** 16), label="seed"))


def batched(rng, ex_shape, size, axis, dtype, **kw):
    """An operand of one example's shape `ex_shape`, batched on `axis` (None: unbatched)."""
    if axis is None:
        return make(rng, ex_shape, dtype, **kw)
    shape = list(ex_shape)
    shape.insert(axis % (len(ex_shape) + 1), size)
    return make(rng, shape, dtype, **kw)


def example(a, axis, i):
    """Example `i` of an operand batched on `axis` (i None: a stand-in of the example's shape)."""
    if axis is None:
        return a
    if i is None:
        return np.zeros(np.delete(np.shape(a), axis), np.asarray(a).dtype)
    return np.take(a, i, axis=axis)


def loop(f, args, in_axes, out_axes, size):
    """np.stack over the examples (for 0 examples: the empty result of the right shape)."""
    def one(i):
        out = f(*[jnp.asarray(example(a, ax, i)) for a, ax in zip(args, in_axes)])
        return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]
    if size == 0:
        return [np.moveaxis(np.empty((0,) + o.shape, o.dtype), 0, out_axes) for o in one(None)]
    per = [one(i) for i in range(size)]
    return [np.stack(outs, axis=out_axes) for outs in zip(*per)]


def check(f, args, in_axes, out_axes=0):
    """vmap(f) == the loop, eagerly and under jit."""
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    want = loop(f, args, in_axes, out_axes, size)
    vf = kiln.vmap(f, in_axes=tuple(in_axes), out_axes=out_axes)
    for got in (vf(*args), kiln.jit(vf)(*args)):
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=1e-6)
            else:
                np.testing.assert_array_equal(g, w)


def no_scan(f, *args, in_axes=0):
    ir = str(kiln.make_ir(kiln.vmap(f, in_axes=in_axes))(*args))
    assert "scan(" not in ir, ir


shapes = st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple)
sizes = st.integers(0, 3)
dtypes = st.sampled_from(sorted(DTYPES))


def axis_for(ex_rank, allow_none=True):
    """in_axes for an operand whose example has rank `ex_rank` (negative ones too)."""
    axes = st.integers(-(ex_rank + 1), ex_rank)
    return st.one_of(st.none(), axes) if allow_none else axes


def some_batched(data, ranks):
    """One in_axes entry per operand rank, at least one of them not None."""
    axes = [data.draw(axis_for(r)) for r in ranks]
    if all(a is None for a in axes):
        k = data.draw(st.integers(0, len(ranks) - 1))
        axes[k] = data.draw(axis_for(ranks[k], allow_none=False))
    return axes


out_axes = st.sampled_from([0, -1])


# ------------------------------------------------------------------------- structural

@EXAMPLES
@given(data=st.data(), size=sizes, dtype=dtypes, out=out_axes)
def test_squeeze_rev_slice(data, size, dtype, out):
    shape = data.draw(shapes)
    ones = [i for i, n in enumerate(shape) if n == 1]
    squeezed = tuple(data.draw(st.sets(st.sampled_from(ones)))) if ones else ()
    flipped = tuple(data.draw(st.sets(st.integers(0, len(shape) - 1))))
    start = [data.draw(st.integers(0, n)) for n in shape]
    limit = [data.draw(st.integers(s, n)) for s, n in zip(start, shape)]
    strides = [data.draw(st.integers(1, 3)) for _ in shape]
    ax = data.draw(axis_for(len(shape), allow_none=False))
    x = batched(rng_of(data), shape, size, ax, DTYPES[dtype])

    def f(x):
        y = lax.rev(lax.slice(x, start, limit, strides), flipped)
        return lax.squeeze(x, squeezed), y, jnp.flip(x, -1), x[::-1]

    check(f, [x], [ax], out)


@EXAMPLES
@given(data=st.data(), size=sizes, dtype=dtypes, out=out_axes)
def test_pad(data, size, dtype, out):
    shape = data.draw(shapes)
    config = [(data.draw(st.integers(-1, 2)), data.draw(st.integers(-1, 2)),
               data.draw(st.integers(0, 2))) for _ in shape]
    assume(all(lo + hi + n + max(n - 1, 0) * it >= 0 for (lo, hi, it), n in zip(config, shape)))
    ax, av = some_batched(data, [len(shape), 0])
    rng = rng_of(data)
    x = batched(rng, shape, size, ax, DTYPES[dtype])
    v = batched(rng, (), size, av, DTYPES[dtype])

    def f(x, v):
        return lax.pad(x, v, config)

    check(f, [x, v], [ax, av], out)


@EXAMPLES
@given(data=st.data(), size=sizes, dtype=dtypes, out=out_axes)
def test_jnp_pad_and_concatenate(data, size, dtype, out):
    shape = data.draw(shapes)
    dim = data.draw(st.integers(0, len(shape) - 1))
    lengths = [data.draw(st.integers(0, 2)) for _ in range(3)]
    ex = [shape[:dim] + (n,) + shape[dim + 1:] for n in lengths]
    axes = some_batched(data, [len(shape)] * 3)
    rng = rng_of(data)
    xs = [batched(rng, s, size, a, DTYPES[dtype]) for s, a in zip(ex, axes)]

    def f(a, b, c):
        return lax.concatenate([a, b, c], dim), jnp.concatenate([c, a], axis=dim - len(shape))

    check(f, xs, axes, out)

    def g(a):
        return jnp.pad(a, [(1, 0)] + [(0, 2)] * (len(shape) - 1))
    if axes[0] is not None:
        check(g, xs[:1], axes[:1], out)


# ---------------------------------------------------------------------- dynamic slices

def draw_starts(data, size, rng, rank):
    """Start indices: static ints, unbatched scalars or batched vectors (out of range too)."""
    kinds = [data.draw(st.sampled_from(["int", "scalar", "batched"])) for _ in range(rank)]
    starts = [int(rng.randint(-4, 6)) if k == "int" else batched(
        rng, (), size, 0 if k == "batched" else None, np.int32, low=-4, high=6) for k in kinds]
    return kinds, starts


def split_starts(kinds, starts):
    """(the array operands with their in_axes, a function rebuilding the starts from them)."""
    arrays = [(s, 0 if k == "batched" else None) for k, s in zip(kinds, starts) if k != "int"]

    def rebuild(given):
        it = iter(given)
        return [s if k == "int" else next(it) for k, s in zip(kinds, starts)]
    return arrays, rebuild


@EXAMPLES
@given(data=st.data(), size=sizes, dtype=dtypes, out=out_axes)
def test_dynamic_slice_and_update(data, size, dtype, out):
    shape = data.draw(shapes)
    window = tuple(data.draw(st.integers(0, n)) for n in shape)
    rng = rng_of(data)
    kinds, starts = draw_starts(data, size, rng, len(shape))
    arrays, rebuild = split_starts(kinds, starts)
    ax, au = some_batched(data, [len(shape), len(shape)])
    if ax is None and au is None and all(a is None for _, a in arrays):
        ax = 0
    x = batched(rng, shape, size, ax, DTYPES[dtype])
    u = batched(rng, window, size, au, DTYPES[dtype])

    def f(x, u, *s):
        return lax.dynamic_slice(x, rebuild(s), window), \
            lax.dynamic_update_slice(x, u, rebuild(s))

    check(f, [x, u] + [a for a, _ in arrays], [ax, au] + [d for _, d in arrays], out)


# ------------------------------------------------------------------- gather and scatter

# (operand shape, index batch shape, index vector length, gather dimension numbers, slice sizes)
CONFIGS = [
    ((4, 3), (2,), 1, GDN((1,), (0,), (0,)), (1, 3)),                # rows
    ((4, 3), (2,), 2, GDN((), (0, 1), (0, 1)), (1, 1)),             # points
    ((4, 3, 2), (2, 1), 2, GDN((1, 3), (0,), (1, 0)), (1, 2, 2)),   # interleaved offset dims
    ((3, 2), (0,), 0, GDN((1, 2), (), ()), (2, 2)),                 # empty index vectors
    ((0, 3), (1,), 1, GDN((0, 1), (), (0,)), (0, 2)),               # an empty operand
    ((5,), (), 1, GDN((0,), (), (0,)), (2,)),                       # rank-1 indices
]


def gather_case(data, size):
    shape, ibatch, nvec, dn, sizes_ = data.draw(st.sampled_from(CONFIGS))
    ibatch = tuple(data.draw(st.integers(0, 2)) if n == 2 else n for n in ibatch)
    ax, ai = some_batched(data, [len(shape), len(ibatch) + 1])
    return shape, ibatch + (nvec,), dn, sizes_, ax, ai


@EXAMPLES
@given(data=st.data(), size=sizes, dtype=dtypes, out=out_axes,
       mode=st.sampled_from(["clip", "fill", "promise_in_bounds"]), fill=st.booleans())
def test_gather(data, size, dtype, out, mode, fill):
    shape, ishape, dn, slice_sizes, ax, ai = gather_case(data, size)
    rng = rng_of(data)
    x = batched(rng, shape, size, ax, DTYPES[dtype])
    idx = batched(rng, ishape, size, ai, np.int32, low=-2, high=6)
    fill_value = 1 if fill and mode == "fill" else None

    def f(x, i):
        return lax.gather(x, i, dn, slice_sizes, mode=mode, fill_value=fill_value)

    check(f, [x, idx], [ax, ai], out)


SCATTERS = {"scatter": lax.scatter, "scatter_add": lax.scatter_add,
            "scatter_mul": lax.scatter_mul, "scatter_min": lax.scatter_min,
            "scatter_max": lax.scatter_max}


@EXAMPLES
@given(data=st.data(), size=sizes, dtype=dtypes, out=out_axes,
       name=st.sampled_from(sorted(SCATTERS)),
       mode=st.sampled_from(["clip", "drop", "promise_in_bounds"]))
def test_scatter(data, size, dtype, out, name, mode):
    assume(dtype != "bool" or name == "scatter")
    shape, ishape, gdn, slice_sizes, ax, ai = gather_case(data, size)
    dn = SDN(gdn.offset_dims, gdn.collapsed_slice_dims, gdn.start_index_map)
    ushape = lax.gather(np.zeros(shape, np.float32), np.zeros(ishape, np.int32), gdn,
                        slice_sizes).shape
    au = data.draw(axis_for(len(ushape)))
    rng = rng_of(data)
    x = batched(rng, shape, size, ax, DTYPES[dtype])
    idx = batched(rng, ishape, size, ai, np.int32, low=-2, high=6)
    u = batched(rng, ushape, size, au, DTYPES[dtype])
    op = SCATTERS[name]

    def f(x, i, u):
        return op(x, i, u, dn, mode=mode)

    check(f, [x, idx, u], [ax, ai, au], out)


@EXAMPLES
@given(data=st.data(), size=sizes, dtype=st.sampled_from(["float32", "int32"]), out=out_axes,
       method=st.sampled_from(["set", "add", "mul", "min", "max", "get"]))
def test_numpy_indexing(data, size, dtype, out, method):
    n = data.draw(st.integers(1, 3))
    shape = (n, data.draw(st.integers(0, 2)), 2)
    ax, ai, av = some_batched(data, [3, 0, 0])
    rng = rng_of(data)
    x = batched(rng, shape, size, ax, DTYPES[dtype])
    i = batched(rng, (), size, ai, np.int32, low=-n, high=n)
    v = batched(rng, (), size, av, DTYPES[dtype])

    def f(x, i, v):
        return (getattr(x.at[i], method)(v) if method != "get" else x.at[i].get(),
                x[i, :, 1], x[:, :, i % 2], x[1:3], jnp.take(x, jnp.stack([i, i + 1]), axis=0),
                x[jnp.stack([i, 0])])

    check(f, [x, i, v], [ax, ai, av], out)


# ----------------------------------------------------------------------------- sorting

@EXAMPLES
@given(data=st.data(), size=sizes, dtype=dtypes, out=out_axes, num_keys=st.integers(1, 2),
       stable=st.booleans())
def test_sort(data, size, dtype, out, num_keys, stable):
    shape = data.draw(shapes)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    axes = some_batched(data, [len(shape)] * 3)
    rng = rng_of(data)
    xs = [batched(rng, shape, size, a, t, low=0, high=3)
          for a, t in zip(axes, [DTYPES[dtype], np.float32, np.int32])]

    def f(a, b, c):
        return lax.sort((a, b, c), dimension=dim, is_stable=stable, num_keys=num_keys)

    check(f, xs, axes, out)

    def g(a, b, c):
        return jnp.sort(b, axis=dim), jnp.argsort(c, axis=dim), jnp.sort(a, axis=None)
    check(g, xs, axes, out)


# ------------------------------------------------------------------------ vectorised

@pytest.mark.parametrize("name", ["gather", "scatter", "dynamic", "structural", "sort"])
def test_rules_are_vectorised(name):
    xs = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([[0, 1], [2, 0]], np.int32)
    funcs = {
        "gather": (lambda x, i: x[i[0]] + jnp.take(x, i, axis=1).sum(), (xs, idx)),
        "scatter": (lambda x, i: x.at[i[0]].add(1.0).at[:, i[1]].max(x[0, 0]), (xs, idx)),
        "dynamic": (lambda x, i: lax.dynamic_update_slice(
            x, lax.dynamic_slice(x, (i[0], 0), (1, 2)), (0, i[1])), (xs, idx)),
        "structural": (lambda x, i: jnp.concatenate([jnp.pad(x[::-1, 1:3], 1), x]) +
                       lax.squeeze(x[:1], (0,)), (xs, idx)),
        "sort": (lambda x, i: jnp.sort(x, axis=0) + jnp.argsort(x[:, 0])[0], (xs, idx)),
    }
    f, args = funcs[name]
    no_scan(f, *args)
    check(f, list(args), [0, 0])
    no_scan(f, xs, idx[0], in_axes=(1, None))


@EXAMPLES
@given(size=st.integers(1, 3), n=st.integers(1, 4), seed=st.integers(0, 100))
def test_per_example_gradients_and_jacobians_through_indexing(size, n, seed):
    rng = np.random.RandomState(seed)
    xs = rng.randn(size, n).astype(np.float32)
    idx = rng.randint(-n, n, size=size).astype(np.int32)

    def loss(x, i):
        y = jnp.pad(x.at[i].mul(3.0), 1)[::-1]
        return jnp.sum(jnp.sort(y) * jnp.arange(y.shape[0])) + x[i] ** 2 + lax.dynamic_slice(
            x, (i,), (1,))[0] * jnp.concatenate([x, x])[n - 1]

    check(kiln.grad(loss), [xs, idx], [0, 0])
    for jac in (kiln.jacfwd, kiln.jacrev):
        jx = np.asarray(jac(lambda x: jnp.sort(x)[::-1].at[0].add(x[idx[0]]))(xs[0]))
        want = np.zeros((n, n), np.float32)
        order = np.argsort(xs[0], kind="stable")[::-1]
        want[np.arange(n), order] = 1.0
        want[0, idx[0] % n] += 1.0
        np.testing.assert_allclose(jx, want)
