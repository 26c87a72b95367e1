"""kiln.numpy sorting and searching against NumPy (hypothesis over shapes with 0- and 1-sized
axes, dtypes, axes; values with duplicates, NaNs, infinities and signed zeros) and against
JAX 0.10.2 behaviour recorded here (descending and unstable orders, partition layouts, dtypes,
errors)."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln.numpy as jnp

FEW = settings(max_examples=25, deadline=None)
DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.float16, np.float32,
          np.complex64]
SPECIAL = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.0, -1.0, 2.5])


def make(shape, dtype, seed=0, special=SPECIAL):
    """Values with many duplicates; floats include NaN, +-inf and signed zeros."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo, hi = (np.iinfo(dtype).min, np.iinfo(dtype).max) if dtype.itemsize == 1 else (-5, 5)
        return rng.integers(0 if dtype.kind == "u" else lo, hi, shape, endpoint=True).astype(dtype)
    out = np.zeros(shape, dtype)
    out.real = rng.choice(special, shape)
    if dtype.kind == "c":
        out.imag = rng.choice(special, shape)
    return out


shapes = st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple)


@st.composite
def arrays(draw, dtypes=DTYPES):
    return make(draw(shapes), draw(st.sampled_from(dtypes)), draw(st.integers(0, 2 ** 16)))


def check(got, want, dtype=None):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    np.testing.assert_array_equal(got, want)


def raises(exc, text):
    return pytest.raises(exc, match=re.escape(text))


def ref_argsort(a, axis=-1):
    """Stable argsort in JAX's order: NumPy's for reals; complex numbers by real part, then
    imaginary part (NumPy puts R + nanj after every R + Rj)."""
    if axis is None:
        a, axis = a.ravel(), 0
    if a.dtype.kind == "c":
        return np.lexsort((a.imag, a.real), axis=axis)
    return np.argsort(a, axis=axis, kind="stable")


def ref_sort(a, axis=-1):
    if axis is None:
        a, axis = a.ravel(), 0
    return np.take_along_axis(a, ref_argsort(a, axis), axis)


def stable_desc(a, axis):
    """JAX's stable descending argsort: reverse, stable argsort, map back, reverse."""
    n = a.shape[axis]
    rev = np.flip(a, axis)
    return np.flip(n - 1 - ref_argsort(rev, axis), axis)


# ------------------------------------------------------------------------ sort, argsort

@FEW
@given(arrays(), st.data())
def test_sort_argsort(a, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1)))
    check(jnp.sort(a, axis), ref_sort(a, axis), a.dtype)
    check(jnp.argsort(a, axis), ref_argsort(a, axis), np.int32)
    flat = a.ravel() if axis is None else a
    ax = 0 if axis is None else axis
    check(jnp.sort(a, axis, descending=True), np.flip(ref_sort(flat, ax), ax))
    check(jnp.argsort(a, axis, descending=True), stable_desc(flat, ax))
    check(jnp.argsort(a, axis, stable=False), ref_argsort(a, axis))
    check(jnp.argsort(a, axis, descending=True, stable=False),
          np.flip(ref_argsort(flat, ax), ax))
    check(jnp.argsort(a, axis, dtype=np.int8 if flat.shape[ax] < 128 else np.int32),
          ref_argsort(a, axis))
    check(jnp.sort_complex(a), ref_sort(a).astype(np.complex64))


def test_sort_complex_dtype_is_jaxs_under_x64(x64):
    # JAX's to_complex_dtype: complex128 only from 64-bit types (JAX 0.10.2 with x64 enabled).
    for dtype, want in ((np.complex64, np.complex64), (np.float16, np.complex64),
                        (np.float32, np.complex64), (np.int32, np.complex64),
                        (np.bool_, np.complex64), (np.int64, np.complex128),
                        (np.float64, np.complex128), (np.complex128, np.complex128)):
        a = np.array([2, 0, 1], dtype)
        got = jnp.sort_complex(a)
        assert got.dtype == want, dtype
        np.testing.assert_array_equal(np.asarray(got), np.sort(a).astype(want))


def test_sort_recorded_jax():
    x = np.array([3., np.nan, 1., 2., -0., 0., np.nan, 5.], np.float32)
    # -0.0 and 0.0 compare equal (a stable sort keeps their order); NaNs last.
    check(jnp.sort(np.array([0.0, -0.0, 1.0], np.float32)), [0.0, -0.0, 1.0])
    assert np.signbit(np.asarray(jnp.sort(np.array([0.0, -0.0], np.float32)))).tolist() == \
        [False, True]
    check(jnp.argsort(x), np.array([4, 5, 2, 3, 0, 7, 1, 6]), np.int32)
    check(jnp.argsort(x, descending=True), np.array([1, 6, 7, 0, 3, 2, 4, 5]))
    check(jnp.argsort(np.array([1, 2, 1, 3, 2]), descending=True), [3, 1, 4, 0, 2])
    check(jnp.argsort(np.array([1, 2, 1, 3, 2]), descending=True, stable=False), [3, 4, 1, 2, 0])
    check(jnp.sort(np.array([1 + 2j, 1 + 1j, np.nan + 0j, 0 + 5j], np.complex64)),
          np.array([5j, 1 + 1j, 1 + 2j, np.nan + 0j], np.complex64))
    # Complex numbers compare by real part, then imaginary part, NaNs last in each (JAX's
    # comparator; NumPy puts R + nanj after every R + Rj).
    z = np.zeros(9, np.complex64)
    z.real = [-1, 0, np.nan, 2, np.nan, 1, -3, np.nan, 0]
    z.imag = [np.nan, 0, -1, 1, np.nan, np.nan, -0.0, 0, -np.inf]
    check(jnp.argsort(z), [6, 0, 8, 1, 5, 3, 2, 7, 4])
    check(jnp.searchsorted(jnp.sort(z), z), [1, 3, 6, 5, 8, 4, 0, 7, 2])
    out = jnp.sort(jnp.atleast_1d(3.0))
    assert (out.dtype, out.weak_type) == (np.float32, True)
    out = jnp.argsort(jnp.atleast_1d(3.0))
    assert (out.dtype, out.weak_type) == (np.int32, False)
    check(jnp.sort(np.float32(3.0), axis=None), [3.0], np.float32)
    check(jnp.asarray(np.array([3, 1, 2])).sort(), [1, 2, 3])
    check(jnp.asarray(np.array([3, 1, 2])).argsort(), [1, 2, 0])


@pytest.mark.parametrize("call, exc, text", [
    (lambda: jnp.sort(3.0), ValueError, "axis -1 is out of bounds for array of dimension 0"),
    (lambda: jnp.argsort(np.ones((2, 3)), axis=2), ValueError,
     "axis 2 is out of bounds for array of dimension 2"),
    (lambda: jnp.sort(np.ones(3), kind="stable"), TypeError,
     "'kind' argument to sort is not supported. Use stable=True or stable=False to specify "
     "sort stability."),
    (lambda: jnp.argsort(np.ones(3), order="x"), TypeError,
     "'order' argument to argsort is not supported"),
    (lambda: jnp.sort([3, 1]), TypeError,
     "sort requires ndarray or scalar arguments, got <class 'list'> at position 0."),
])
def test_sort_errors(call, exc, text):
    with raises(exc, text):
        call()


# ----------------------------------------------------------------------------- lexsort

@FEW
@given(shapes, st.lists(st.sampled_from(DTYPES[:-1]), min_size=1, max_size=3), st.data())
def test_lexsort(shape, key_dtypes, data):
    keys = [make(shape, d, i) for i, d in enumerate(key_dtypes)]
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    check(jnp.lexsort(keys, axis), np.lexsort(keys, axis), np.int32)
    if len(set(key_dtypes)) == 1:
        check(jnp.lexsort(np.stack(keys), axis), np.lexsort(np.stack(keys), axis))


def test_lexsort_recorded_jax():
    check(jnp.lexsort([np.array([1, 2, 1]), np.array([3.0, 1, 3])]), [1, 0, 2], np.int32)
    check(jnp.lexsort([np.array(1), np.array(2)]), 0, np.int32)
    check(jnp.lexsort(np.array([1, 2, 1])), 0)
    with raises(TypeError, "need sequence of keys with len > 0 in lexsort"):
        jnp.lexsort([])
    with raises(ValueError, "all keys need to be the same shape"):
        jnp.lexsort([np.array([1, 2, 1]), np.array([3, 1])])
    with raises(ValueError, "axis 1 is out of bounds for array of dimension 1"):
        jnp.lexsort([np.array([1, 2, 1])], axis=1)


# ------------------------------------------------------------------------ searchsorted

@FEW
@given(st.integers(0, 9), st.sampled_from(DTYPES), st.lists(st.integers(0, 3), max_size=2),
       st.data())
def test_searchsorted(n, dtype, vshape, data):
    # NumPy orders complex numbers with a NaN part differently (see test_sort_recorded_jax).
    special = SPECIAL[1:] if dtype == np.complex64 else SPECIAL
    a = ref_sort(make((n,), dtype, 1, special))
    v = make(tuple(vshape), dtype, 2, special)
    side = data.draw(st.sampled_from(["left", "right"]))
    method = data.draw(st.sampled_from(["scan", "scan_unrolled", "compare_all", "sort"]))
    want = np.searchsorted(a, v, side=side)
    check(jnp.searchsorted(a, v, side=side, method=method), want, np.int32)
    perm = np.random.default_rng(3).permutation(n)
    shuffled = a[np.argsort(perm)]  # shuffled[perm] == a
    check(jnp.searchsorted(shuffled, v, side=side, sorter=perm.astype(np.int32)), want)


def test_searchsorted_recorded_jax():
    a = np.array([1.0, 2.0, 2.0, np.nan], np.float32)
    check(jnp.searchsorted(a, np.array([2.0, np.nan], np.float32)), [1, 3])
    check(jnp.searchsorted(a, np.array([2.0, np.nan], np.float32), side="right"), [3, 4])
    check(jnp.searchsorted(np.array([-0.0, 0.0]), np.array([0.0, -0.0])), [0, 0])
    # An unsorted `a` gives the binary search's answer, as JAX's default method does.
    check(jnp.searchsorted(np.array([5, 1, 4, 2, 3]), np.arange(7)), [0, 0, 2, 2, 2, 5, 5])
    check(jnp.searchsorted(np.array([3, 1, 2]), 2, sorter=np.array([-2, -1, 0])), 1)
    check(jnp.searchsorted(np.array([1, 2, 3], np.uint8), -1), 3)
    check(jnp.searchsorted(np.array([1, 2, 3]), 1.5), 1, np.int32)
    check(jnp.searchsorted(np.zeros(0), np.array([1.0, 2.0])), [0, 0], np.int32)
    check(jnp.searchsorted(np.arange(1000), np.array([-1, 0, 500, 999, 1000, 377])),
          [0, 0, 500, 999, 1000, 377])
    check(jnp.asarray(np.array([1, 2, 3])).searchsorted(2), 1)


@pytest.mark.parametrize("call, exc, text", [
    (lambda: jnp.searchsorted(np.ones((2, 3)), 2.5), ValueError, "a should be 1-dimensional"),
    (lambda: jnp.searchsorted(np.ones(3), 2, side="middle"), ValueError,
     "invalid argument side='middle', expected 'left' or 'right'"),
    (lambda: jnp.searchsorted(np.ones(3), 2, method="foo"), ValueError,
     "invalid argument method='foo', expected one of ['compare_all', 'scan', 'scan_unrolled', "
     "'sort']"),
    (lambda: jnp.searchsorted(np.ones(3), 2, sorter=[1, 2, 0]), TypeError,
     "searchsorted requires ndarray or scalar arguments, got <class 'list'> at position 2."),
    (lambda: jnp.searchsorted(np.ones(3), 2, sorter=np.ones(3)), TypeError,
     "searchsorted: sorter must have an integer type, got float32"),
])
def test_searchsorted_errors(call, exc, text):
    with raises(exc, text):
        call()


# ------------------------------------------------------------------------ partitioning

@FEW
@given(arrays(), st.data())
def test_partition(a, data):
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    n = a.shape[axis]
    if n == 0:
        return
    kth = data.draw(st.integers(-n, n - 1))
    k = kth % n
    s = ref_sort(a, axis)
    # JAX's layout: the k+1 smallest ascending, then the rest descending.
    want = np.concatenate([np.take(s, np.arange(k + 1), axis),
                           np.flip(np.take(s, np.arange(k + 1, n), axis), axis)], axis)
    got = jnp.partition(a, kth, axis)
    check(got, want, a.dtype)
    if a.dtype.kind != "c":
        np.testing.assert_array_equal(np.take(np.asarray(got), k, axis),
                                      np.take(np.partition(a, k, axis), k, axis))
    perm = ref_argsort(a, axis)
    rest = np.sort(np.take(perm, np.arange(k + 1, n), axis), axis)
    idx = jnp.argpartition(a, kth, axis)
    check(idx, np.concatenate([np.take(perm, np.arange(k + 1), axis), rest], axis), np.int32)
    check(np.take_along_axis(a, np.asarray(idx), axis).take(k, axis), np.take(s, k, axis))


def test_partition_recorded_jax():
    x = np.array([3., np.nan, 1., 2., -0., 0., np.nan, 5.], np.float32)
    check(jnp.partition(x, 2), [-0., 0., 1., np.nan, np.nan, 5., 3., 2.])
    check(jnp.argpartition(x, 2), [4, 5, 2, 0, 1, 3, 6, 7])
    check(jnp.partition(x, 5), [-0., 0., 1., 2., 3., 5., np.nan, np.nan])
    check(jnp.argpartition(x, 5), [4, 5, 2, 3, 0, 7, 1, 6])
    check(jnp.argpartition(np.array([2, 1, 2, 1, 2, 0]), 2), [5, 1, 3, 0, 2, 4])
    check(jnp.argpartition(np.array([[2, 1, 2], [1, 2, 0]]), 1, axis=0), [[1, 0, 1], [0, 1, 0]])
    check(jnp.partition(np.array([3, 1, 2, 0], np.uint8), 1), [0, 1, 3, 2])
    # Where JAX is wrong (it negates the int8 minimum), kiln partitions correctly.
    check(jnp.partition(np.array([-128, 127, 0], np.int8), 0), [-128, 127, 0])
    check(jnp.partition(np.array([3.0, 1.0, 2.0]), 1, axis=None), [1.0, 2.0, 3.0])
    check(jnp.asarray(np.array([3, 1, 2])).argpartition(1), [1, 2, 0])


def test_partition_errors():
    with raises(ValueError, "partition: kth=3 is out of bounds for an axis of size 3"):
        jnp.partition(np.ones(3), 3)
    with raises(ValueError, "axis -1 is out of bounds for array of dimension 0"):
        jnp.argpartition(3.0, 0)
    with raises(TypeError, "'float' object cannot be interpreted as an integer"):
        jnp.partition(np.ones(3), 1.0)


def test_index_dtypes_x64(x64):
    # Recorded with JAX 0.10.2 and jax_enable_x64: argsort/lexsort use the default integer,
    # argpartition and searchsorted stay int32.
    assert jnp.argsort(np.array([3.0, 1.0])).dtype == np.int64
    assert jnp.lexsort([np.array([3.0, 1.0])]).dtype == np.int64
    assert jnp.lexsort([np.ones(())]).dtype == np.int64
    assert jnp.argpartition(np.array([3.0, 1.0]), 0).dtype == np.int32
    assert jnp.searchsorted(np.array([1.0, 2.0]), 1.5).dtype == np.int32
    assert jnp.sort_complex(np.array([1.0, 0.0])).dtype == np.complex128
