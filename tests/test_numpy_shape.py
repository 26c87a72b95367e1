"""kiln.numpy shape operations against NumPy (values and shapes, hypothesis over shapes with
0- and 1-sized axes, dtypes and axes) and against JAX 0.10.2 behaviour recorded here (dtype
promotion, weak types, errors)."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln.numpy as jnp

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.uint32, np.float16, np.float32,
          np.complex64]
FEW = settings(max_examples=20, deadline=None)


def make(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -20, 20, shape).astype(dtype)
    vals = rng.integers(-8, 8, shape) / 2
    if dtype.kind == "c":
        vals = vals + 1j * rng.integers(-8, 8, shape)
    return vals.astype(dtype)


shapes = st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple)
nonscalar = st.lists(st.integers(0, 3), min_size=1, max_size=4).map(tuple)


@st.composite
def arrays(draw, shape=shapes, dtypes=DTYPES):
    return make(draw(shape), draw(st.sampled_from(dtypes)), draw(st.integers(0, 2 ** 16)))


NARROW = {np.dtype(np.float64): np.float32, np.dtype(np.int64): np.int32,
          np.dtype(np.uint64): np.uint32, np.dtype(np.complex128): np.complex64}


def check(got, want):
    """Equal shapes, dtypes and values; NumPy's 64-bit defaults narrowed as kiln (x64 off)."""
    got = np.asarray(got)
    want = np.asarray(want)
    want = want.astype(NARROW.get(want.dtype, want.dtype))
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def check_all(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


def raises(exc, text):
    return pytest.raises(exc, match=re.escape(text))


# ------------------------------------------------------------------ reshape & transpose

@FEW
@given(arrays(), st.data())
def test_reshape_matches_numpy(a, data):
    candidates = [a.shape[::-1], (a.size,), (-1,), (1,) + a.shape + (1,)]
    if a.ndim and a.shape[-1]:
        candidates.append((-1, a.shape[-1]))
    shape = data.draw(st.sampled_from(candidates))
    order = data.draw(st.sampled_from("CF"))
    check(jnp.reshape(a, shape, order=order), np.reshape(a, shape, order=order))
    check(jnp.ravel(a, order=order), np.ravel(a, order=order))
    check(jnp.asarray(a).reshape(*shape) if shape else jnp.reshape(a, shape), a.reshape(shape))


@pytest.mark.parametrize("shape, exc, text", [
    ((4, 2), TypeError, "cannot reshape array of shape (6,) (size 6) into shape (4, 2) (size 8)"),
    ((-1, 4), TypeError, "product of specified axis sizes (4) does not evenly divide 6"),
    ((-1, -1), TypeError, "can only specify one unknown axis size with a `-1` value"),
    ((-2, 3), TypeError, "into shape (-2, 3) (size -6)"),
    ((3.0, 2), TypeError, "Shapes must be 1D sequences of concrete values of integer type"),
])
def test_reshape_errors(shape, exc, text):
    with raises(exc, text):
        jnp.reshape(np.arange(6.0), shape)


def test_reshape_misc():
    with raises(ValueError, "Unexpected value for 'order' argument: X."):
        jnp.reshape(np.arange(6), (3, 2), order="X")
    with raises(TypeError, "reshape requires ndarray or scalar arguments"):
        jnp.reshape([1, 2], (2,))
    with raises(TypeError, "product of specified axis sizes (0)"):
        jnp.reshape(np.zeros((2, 0)), (-1, 0))
    check(jnp.reshape(np.zeros((2, 0)), (-1, 5)), np.zeros((0, 5)))
    check(jnp.reshape(np.arange(6), (3, 2), order="A"), np.arange(6).reshape(3, 2))
    check(jnp.ravel(np.arange(6).reshape(2, 3), order="K"), np.arange(6))


@FEW
@given(arrays(nonscalar), st.data())
def test_transposes(a, data):
    perm = data.draw(st.permutations(range(a.ndim)))
    neg = [p - a.ndim if data.draw(st.booleans()) else p for p in perm]
    check(jnp.transpose(a, neg), np.transpose(a, perm))
    check(jnp.transpose(a), a.T)
    check(jnp.permute_dims(a, perm), np.transpose(a, perm))
    i, j = data.draw(st.integers(-a.ndim, a.ndim - 1)), data.draw(st.integers(-a.ndim, a.ndim - 1))
    check(jnp.swapaxes(a, i, j), np.swapaxes(a, i, j))
    k = data.draw(st.integers(0, a.ndim))
    src = tuple(perm[:k])
    dst = tuple(data.draw(st.permutations(range(a.ndim)))[:k])
    check(jnp.moveaxis(a, src, dst), np.moveaxis(a, src, dst))
    check(jnp.rollaxis(a, i, k), np.rollaxis(a, i, k))
    if a.ndim >= 2:
        check(jnp.matrix_transpose(a), np.swapaxes(a, -1, -2))


def test_transpose_errors():
    x = np.ones((2, 3))
    with raises(TypeError, "transpose permutation isn't a permutation of operand dimensions, "
                           "got permutation (0, 0) for operand shape (2, 3)."):
        jnp.transpose(x, (0, 0))
    with raises(ValueError, "axis 2 is out of bounds for array of dimension 2"):
        jnp.transpose(x, (0, 2))
    with raises(ValueError, "x must be at least two-dimensional for matrix_transpose; got ndim=1"):
        jnp.matrix_transpose(np.ones(3))
    with pytest.raises(IndexError, match="axis 2 is out of bounds"):
        jnp.swapaxes(x, 0, 2)
    with raises(ValueError, "Inconsistent number of elements: 2 vs 1"):
        jnp.moveaxis(np.ones((2, 3, 4)), (0, 1), 2)
    with raises(TypeError, "moveaxis: repeated axis in `source` argument (0, 0)"):
        jnp.moveaxis(np.ones((2, 3, 4)), (0, 0), (1, 2))


# --------------------------------------------------------------- squeeze & expand_dims

@FEW
@given(arrays(), st.data())
def test_squeeze_expand_dims(a, data):
    check(jnp.squeeze(a), np.squeeze(a))
    ones = [i for i, d in enumerate(a.shape) if d == 1]
    axes = tuple(data.draw(st.lists(st.sampled_from(ones), unique=True))) if ones else ()
    check(jnp.squeeze(a, axes), np.squeeze(a, axes))
    n = data.draw(st.integers(1, 3))
    new = data.draw(st.lists(st.integers(0, a.ndim + n - 1), min_size=n, max_size=n,
                             unique=True))
    new = tuple(d - (a.ndim + n) if data.draw(st.booleans()) else d for d in new)
    check(jnp.expand_dims(a, new), np.expand_dims(a, new))


def test_squeeze_expand_errors():
    with raises(ValueError, "cannot select an axis to squeeze out which has size not equal to "
                            "one, got shape=(2, 1) and dimensions=(0,)"):
        jnp.squeeze(np.ones((2, 1)), 0)
    with raises(ValueError, "dimensions are not unique: (1, 1)"):
        jnp.squeeze(np.ones((2, 1)), (1, -1))
    with raises(ValueError, "axis -3 is out of bounds for array of dimension 2"):
        jnp.squeeze(np.ones((2, 1)), -3)
    with raises(ValueError, "axis 3 is out of bounds for array of dimension 3"):
        jnp.expand_dims(np.ones((2, 3)), 3)
    with raises(ValueError, "repeated axis in lax.expand_dims: (0, -4)"):
        jnp.expand_dims(np.ones((2, 3)), (0, -4))


# ------------------------------------------------------------------------ broadcasting

@FEW
@given(arrays(), st.data())
def test_broadcasting(a, data):
    lead = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    target = lead + tuple(data.draw(st.sampled_from([d, 2])) if d == 1 else d for d in a.shape)
    check(jnp.broadcast_to(a, target), np.broadcast_to(a, target))
    other = make(target[len(target) - a.ndim:] if a.ndim else (), np.float32)
    check_all(jnp.broadcast_arrays(a, other), np.broadcast_arrays(a, other))
    assert jnp.broadcast_shapes(a.shape, target, ()) == np.broadcast_shapes(a.shape, target)


def test_broadcast_misc():
    assert jnp.broadcast_shapes((2, 1), 3) == (2, 3)
    assert jnp.broadcast_shapes() == ()
    with raises(ValueError, "Incompatible shapes for broadcasting: shapes=[(2,), (3,)]"):
        jnp.broadcast_shapes((2,), (3,))
    with raises(ValueError, "Cannot broadcast to shape with fewer dimensions"):
        jnp.broadcast_to(np.ones((2, 3)), (3,))
    with raises(ValueError, "Incompatible shapes for broadcasting"):
        jnp.broadcast_to(np.ones(3), (2, 4))
    with raises(TypeError, "broadcast_to requires ndarray or scalar arguments, got <class "
                           "'list'> at position 0."):
        jnp.broadcast_to([1, 2], (2,))
    out = jnp.broadcast_arrays(np.ones(3, np.float32), 2.0)
    assert [(o.dtype, o.weak_type) for o in out] == [(np.float32, False), (np.float32, True)]


@FEW
@given(arrays())
def test_atleast(a):
    check(jnp.atleast_1d(a), np.atleast_1d(a))
    check(jnp.atleast_2d(a), np.atleast_2d(a))
    check(jnp.atleast_3d(a), np.atleast_3d(a))
    check_all(jnp.atleast_3d(a, a), np.atleast_3d(a, a))
    assert jnp.atleast_1d() == []


# ----------------------------------------------------------------------------- joining

@FEW
@given(nonscalar, st.sampled_from(DTYPES), st.data())
def test_concatenate_stack(shape, dtype, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.integers(1, 3))
    parts = []
    for i in range(n):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3))
        parts.append(make(tuple(s), dtype, i))
    check(jnp.concatenate(parts, axis), np.concatenate(parts, axis))
    check(jnp.concatenate(parts, None), np.concatenate(parts, None))
    check(jnp.concat(parts, axis=axis), np.concatenate(parts, axis))
    same = [make(shape, dtype, i) for i in range(n)]
    stack_axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    check(jnp.stack(same, stack_axis), np.stack(same, stack_axis))
    check(jnp.stack(np.stack(same), stack_axis), np.stack(same, stack_axis))
    for fn in ("hstack", "vstack", "dstack", "column_stack"):
        try:
            want = getattr(np, fn)(same)
        except ValueError:
            continue
        check(getattr(jnp, fn)(same), want)
    check(jnp.concatenate(np.stack(same), axis=0), np.concatenate(same, 0))
    check(jnp.concatenate(np.stack(same), axis=-1), np.concatenate(same, -1))
    check(jnp.concatenate(np.stack(same), axis=None), np.concatenate(same, None))


# JAX 0.10.2 promotion (x64 off) for concatenate, matmul and einsum, recorded with
# jnp.concatenate([jnp.ones(2, a), jnp.ones(2, b)]).dtype; row = a, column = b.
PROMOTION_NAMES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "float16",
                   "float32", "complex64"]
PROMOTION = """
   b   i8   u8  i16  u16  i32  u32  f16  f32  c64
  i8   i8  i16  i16  i32  i32  i32  f16  f32  c64
  u8  i16   u8  i16  u16  i32  u32  f16  f32  c64
 i16  i16  i16  i16  i32  i32  i32  f16  f32  c64
 u16  i32  u16  i32  u16  i32  u32  f16  f32  c64
 i32  i32  i32  i32  i32  i32  i32  f16  f32  c64
 u32  i32  u32  i32  u32  i32  u32  f16  f32  c64
 f16  f16  f16  f16  f16  f16  f16  f16  f32  c64
 f32  f32  f32  f32  f32  f32  f32  f32  f32  c64
 c64  c64  c64  c64  c64  c64  c64  c64  c64  c64
"""
_SHORT = {"b": "bool", "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16",
          "i32": "int32", "u32": "uint32", "f16": "float16", "f32": "float32",
          "c64": "complex64"}
PROMOTED = {(a, b): _SHORT[r] for a, row in zip(PROMOTION_NAMES, PROMOTION.split("\n")[1:])
            for b, r in zip(PROMOTION_NAMES, row.split())}


@pytest.mark.parametrize("a", PROMOTION_NAMES)
def test_concatenate_promotion(a):
    for b in PROMOTION_NAMES:
        out = jnp.concatenate([np.ones(2, a), np.ones(2, b)])
        assert (str(out.dtype), out.weak_type) == (PROMOTED[a, b], False), (a, b)


def test_join_dtypes_and_errors():
    out = jnp.concatenate([np.ones(2, np.int8), np.ones(2, np.uint8)], dtype=np.float16)
    assert out.dtype == np.float16
    weak = jnp.concatenate([jnp.atleast_1d(2.0), jnp.atleast_1d(3)])
    assert (weak.dtype, weak.weak_type) == (np.float32, True)
    assert jnp.concatenate([jnp.atleast_1d(2.0), np.ones(2, np.float16)]).dtype == np.float16
    assert jnp.stack([1, 2.0]).weak_type and jnp.stack([2, np.int8(3)]).dtype == np.int8
    assert jnp.hstack([2.0, np.int8(3)]).dtype == np.float32
    with raises(TypeError, "Cannot concatenate arrays with shapes that differ in dimensions "
                           "other than the one being concatenated: concatenating along "
                           "dimension 0 for shapes (2, 3), (2, 4)."):
        jnp.concatenate([np.ones((2, 3)), np.ones((2, 4))])
    with raises(TypeError, "Cannot concatenate arrays with different numbers of dimensions: "
                           "got (2, 3), (2,)."):
        jnp.concatenate([np.ones((2, 3)), np.ones(2)], axis=1)
    with raises(ValueError, "Zero-dimensional arrays cannot be concatenated."):
        jnp.concatenate([np.ones(()), np.ones(())])
    with raises(ValueError, "Need at least one array to concatenate."):
        jnp.concatenate([])
    with raises(ValueError, "axis 2 is out of bounds for array of dimension 2"):
        jnp.concatenate([np.ones((2, 3))], axis=2)
    with raises(TypeError, "concatenate requires ndarray or scalar arguments, got <class "
                           "'list'> at position 1."):
        jnp.concatenate((np.ones(2), [1, 2]))
    with raises(ValueError, "All input arrays must have the same shape. Got (2,), (3,)."):
        jnp.stack([np.ones(2), np.ones(3)])
    with raises(ValueError, "Need at least one array to stack."):
        jnp.stack([])
    with raises(ValueError, "axis -3 is out of bounds for array of dimension 2"):
        jnp.stack([np.ones(2), np.ones(2)], axis=-3)


# --------------------------------------------------------------------------- splitting

@FEW
@given(arrays(nonscalar), st.data())
def test_split(a, data):
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    n = a.shape[axis]
    sections = data.draw(st.integers(1, 4))
    check_all(jnp.array_split(a, sections, axis), np.array_split(a, sections, axis))
    if n % sections == 0:
        check_all(jnp.split(a, sections, axis), np.split(a, sections, axis))
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    check_all(jnp.split(a, cuts, axis), np.split(a, cuts, axis))
    check_all(jnp.split(a, np.array(cuts, np.int32), axis), np.split(a, cuts, axis))
    if a.ndim >= 2:
        rows = sorted(data.draw(st.lists(st.integers(0, a.shape[0]), max_size=2)))
        cols = sorted(data.draw(st.lists(st.integers(0, a.shape[1]), max_size=2)))
        check_all(jnp.vsplit(a, rows), np.vsplit(a, rows))
        check_all(jnp.hsplit(a, cols), np.hsplit(a, cols))
    else:
        check_all(jnp.hsplit(a, cuts), np.hsplit(a, cuts))
    if a.ndim >= 3:
        cut = [min(1, a.shape[2])]
        check_all(jnp.dsplit(a, cut), np.dsplit(a, cut))
    check_all(jnp.unstack(a, axis=axis), list(np.moveaxis(a, axis, 0)))


def test_split_errors():
    with raises(ValueError, "array split does not result in an equal division: rest is 1"):
        jnp.split(np.ones(5), 2)
    with raises(ValueError, "Sizes passed to split must be nonnegative, got [3, -2, 4]"):
        jnp.split(np.ones(5), [3, 1])
    with raises(ValueError, "split: number of sections must be larger than 0"):
        jnp.split(np.ones(5), 0)
    with pytest.raises(IndexError, match="axis 1 is out of bounds"):
        jnp.split(np.ones(5), 1, axis=1)


# ------------------------------------------------------------------- tile and repeat

@FEW
@given(arrays(), st.data())
def test_tile_repeat(a, data):
    reps = tuple(data.draw(st.lists(st.integers(0, 3), max_size=4)))
    check(jnp.tile(a, reps), np.tile(a, reps))
    check(jnp.tile(a, 2), np.tile(a, 2))
    n = data.draw(st.integers(0, 3))
    check(jnp.repeat(a, n), np.repeat(a, n))
    check(jnp.resize(a, (2, 3)), np.resize(a, (2, 3)) if a.size else np.zeros((2, 3), a.dtype))
    if a.ndim:
        axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
        check(jnp.repeat(a, n, axis=axis), np.repeat(a, n, axis=axis))
        counts = np.array(data.draw(st.lists(st.integers(0, 3), min_size=a.shape[axis],
                                             max_size=a.shape[axis])), np.int32)
        check(jnp.repeat(a, counts, axis=axis), np.repeat(a, counts, axis=axis))
        check(jnp.repeat(a, jnp.asarray(counts), axis=axis), np.repeat(a, counts, axis=axis))
        total = int(counts.sum())
        check(jnp.repeat(a, counts, axis=axis, total_repeat_length=total),
              np.repeat(a, counts, axis=axis))


def test_repeat_total_length_recorded():
    # jnp.repeat with total_repeat_length: padded with the last element, or cut (JAX 0.10.2).
    x = np.arange(3, dtype=np.int32)
    check(jnp.repeat(x, np.array([1, 2, 0]), total_repeat_length=5),
          np.array([0, 1, 1, 2, 2], np.int32))
    check(jnp.repeat(x, np.array([1, 2, 0]), total_repeat_length=2), np.array([0, 1], np.int32))
    check(jnp.repeat(x, 2, total_repeat_length=4), np.array([0, 0, 1, 1], np.int32))
    check(jnp.repeat(x, 2, total_repeat_length=8), np.array([0, 0, 1, 1, 2, 2, 2, 2], np.int32))
    check(jnp.repeat(3.0, 3), np.full(3, 3.0, np.float32))
    assert jnp.repeat(3.0, 3).weak_type


def test_tile_repeat_errors():
    with raises(TypeError, "repeat requires ndarray or scalar arguments, got <class 'list'> "
                           "at position 1."):
        jnp.repeat(np.ones(3), [1, 2, 0])
    with raises(TypeError, "repeat: repeats must be integers"):
        jnp.repeat(np.ones(3), 2.0)
    with raises(ValueError, "repeat: got 2 repeat counts for axis 0 of size 3"):
        jnp.repeat(np.ones(3), np.array([1, 2]))
    with raises(ValueError, "repeats may not contain negative values"):
        jnp.repeat(np.ones(3), -1)
    with raises(ValueError, "axis 1 is out of bounds for array of dimension 1"):
        jnp.repeat(np.ones(3), 2, axis=1)
    with raises(ValueError, "tile: reps must be non-negative"):
        jnp.tile(np.ones(3), -1)
    with raises(ValueError, "all elements of `new_shape` must be non-negative"):
        jnp.resize(np.ones(3), (-1,))


# ---------------------------------------------------------------- flip, roll, rot90

@FEW
@given(arrays(), st.data())
def test_flip_roll(a, data):
    check(jnp.flip(a), np.flip(a))
    shift = data.draw(st.integers(-7, 7))
    check(jnp.roll(a, shift), np.roll(a, shift))
    if not a.ndim:
        return
    axes = tuple(data.draw(st.lists(st.integers(-a.ndim, a.ndim - 1), max_size=a.ndim)))
    if len({ax % a.ndim for ax in axes}) == len(axes):
        check(jnp.flip(a, axes), np.flip(a, axes))
    if axes:
        shifts = tuple(data.draw(st.lists(st.integers(-7, 7), min_size=len(axes),
                                          max_size=len(axes))))
        check(jnp.roll(a, shifts, axes), np.roll(a, shifts, axes))
        check(jnp.roll(a, np.array(shifts, np.int32), axes), np.roll(a, shifts, axes))
        check(jnp.roll(a, jnp.asarray(shift), axes), np.roll(a, shift, axes))
    check(jnp.flipud(a), np.flipud(a))
    if a.ndim >= 2:
        check(jnp.fliplr(a), np.fliplr(a))
        k = data.draw(st.integers(-5, 5))
        pair = data.draw(st.permutations(range(a.ndim)))[:2]
        check(jnp.rot90(a, k, pair), np.rot90(a, k, pair))


def test_flip_roll_errors():
    with raises(TypeError, "rev dimensions must be unique, got (0, 0)."):
        jnp.flip(np.ones((2, 3)), (0, 0))
    with raises(ValueError, "axis 1 is out of bounds for array of dimension 1"):
        jnp.fliplr(np.ones(3))
    with raises(ValueError, "roll: 'shift' (1, 2, 3) and 'axis' (0, 1) must have the same length"):
        jnp.roll(np.ones((2, 3)), (1, 2, 3), (0, 1))
    with raises(ValueError, "rot90 requires its first argument to have ndim at least two"):
        jnp.rot90(np.ones(3))
    with raises(ValueError, "Axes must be different"):
        jnp.rot90(np.ones((2, 3)), axes=(0, 0))
    # JAX truncates a float shift (its traced path): recorded jnp.roll(x, 1.5, 1)
    check(jnp.roll(np.arange(6).reshape(2, 3), 1.5, 1), np.roll(np.arange(6).reshape(2, 3), 1, 1))


# ------------------------------------------------------------------------------ pad

pad_widths = st.one_of(st.integers(0, 3), st.tuples(st.integers(0, 3), st.integers(0, 3)))


@FEW
@given(arrays(dtypes=[np.int8, np.int32, np.float32, np.bool_, np.complex64]), st.data())
def test_pad_matches_numpy(a, data):
    per_axis = a.ndim > 0 and data.draw(st.booleans())
    width = tuple(data.draw(st.tuples(st.integers(0, 3), st.integers(0, 3)))
                  for _ in range(a.ndim)) if per_axis else data.draw(pad_widths)
    mode = data.draw(st.sampled_from(["constant", "edge", "wrap", "reflect", "symmetric"]))
    kw = {}
    if mode in ("reflect", "symmetric") and a.dtype.kind not in "bu":
        kw["reflect_type"] = data.draw(st.sampled_from(["even", "odd"]))
    if mode == "constant" and a.dtype.kind != "b":
        kw["constant_values"] = data.draw(st.sampled_from([0, 1, (2, 3)]))
    empty_axis_padded = any(d == 0 for d in a.shape) and np.any(
        np.broadcast_to(np.asarray(width), (a.ndim, 2))[np.array(a.shape) == 0] > 0) \
        if a.ndim else False
    if mode not in ("constant",) and empty_axis_padded:
        with pytest.raises(ValueError, match=f"Cannot apply '{mode}' padding to empty axis"):
            jnp.pad(a, width, mode=mode, **kw)
        return
    check(jnp.pad(a, width, mode=mode, **kw), np.pad(a, width, mode=mode, **kw))


@FEW
@given(arrays(nonscalar, dtypes=[np.float32]), st.data())
def test_pad_ramp_and_stats(a, data):
    width = data.draw(pad_widths)
    if not a.size:
        return
    ends = data.draw(st.sampled_from([0, 5, (-2, 3)]))
    np.testing.assert_allclose(jnp.pad(a, width, mode="linear_ramp", end_values=ends),
                               np.pad(a, width, mode="linear_ramp", end_values=ends),
                               rtol=1e-5, atol=1e-5)
    for mode in ("maximum", "minimum", "mean", "median"):
        length = data.draw(st.sampled_from([None, 1, 2]))
        np.testing.assert_allclose(jnp.pad(a, width, mode=mode, stat_length=length),
                                   np.pad(a, width, mode=mode, stat_length=length), rtol=1e-5)
    assert jnp.pad(a, width, mode="empty").shape == np.pad(a, width, mode="empty").shape


def test_pad_recorded_jax():
    # Integer ramps and means round as in JAX (NumPy differs for the ramp).
    check(jnp.pad(np.ones(2, np.int32), (3, 2), mode="linear_ramp", end_values=10),
          np.array([10, 6, 3, 1, 1, 5, 10], np.int32))
    check(jnp.pad(np.ones(2, np.uint8), (1, 2), mode="linear_ramp", end_values=10),
          np.array([10, 1, 1, 5, 10], np.uint8))
    check(jnp.pad(np.arange(4, dtype=np.int32), (2, 3), mode="mean"),
          np.array([2, 2, 0, 1, 2, 3, 2, 2, 2], np.int32))
    check(jnp.pad(np.ones(2, np.int8), 1, constant_values=300), np.array([44, 1, 1, 44], np.int8))
    check(jnp.pad(np.ones(2, np.uint8), 1, constant_values=-1), np.array([255, 1, 1, 255],
                                                                          np.uint8))
    check(jnp.pad(np.arange(3, dtype=np.int32), 2, constant_values=7.5),
          np.array([7, 7, 0, 1, 2, 7, 7], np.int32))
    check(jnp.pad(np.float32(3.0), 2), np.float32(3.0))


@pytest.mark.parametrize("call, exc, text", [
    (lambda: jnp.pad(np.ones((2, 3)), ((1, 2), (0, 1), (1, 1))), ValueError,
     "jnp.pad: pad_width with nd=2 has unsupported shape (3, 2). Valid shapes are (2, 2), "
     "(1, 2), (2,), (1,), or ()."),
    (lambda: jnp.pad(np.ones((2, 3)), -1), ValueError, "index can't contain negative values"),
    (lambda: jnp.pad(np.ones((2, 3)), 1.5), TypeError, "`pad_width` must be of integral type."),
    (lambda: jnp.pad(np.ones(4), [[2, 3], [1]]), TypeError,
     "`pad_width` entries must be the same shape"),
    (lambda: jnp.pad(np.ones(3), 2, constant_values=np.array([1, 2, 3])), ValueError,
     "jnp.pad: constant_values has unsupported shape (3,)"),
    (lambda: jnp.pad(np.ones(3), 2, mode="foo"), ValueError,
     "Unimplemented padding mode 'foo' for np.pad"),
    (lambda: jnp.pad(np.ones(3), 2, mode="edge", constant_values=3), ValueError,
     "unsupported keyword arguments for mode 'edge': {'constant_values'}"),
    (lambda: jnp.pad(np.ones(3), 2, mode="reflect", reflect_type="x"), ValueError,
     "reflect_type must be 'even' or 'odd'"),
    (lambda: jnp.pad(np.ones(3), 2, mode=lambda *a: None), TypeError,
     "a callable `mode` is not supported"),
    (lambda: jnp.pad(np.ones(3), 2, mode="mean", stat_length=0), ValueError,
     "stat_length of 0 yields no value for padding"),
])
def test_pad_errors(call, exc, text):
    with raises(exc, text):
        call()


# ----------------------------------------------------------------------------- take

FILL = {"f": np.nan, "c": np.nan, "b": True}


def fill_value(dtype):
    if dtype.kind in FILL:
        return FILL[dtype.kind]
    return np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max


@FEW
@given(arrays(nonscalar), st.data())
def test_take(a, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1)))
    n = a.size if axis is None else a.shape[axis]
    idx = np.array(data.draw(st.lists(st.integers(-2 * n - 2, 2 * n + 2), max_size=5)),
                   np.int32)
    idx = idx.reshape(data.draw(st.sampled_from([(-1,), (1, -1)])))
    if n == 0:
        if idx.size:
            with raises(IndexError, "Cannot do a non-empty jnp.take() from an empty axis."):
                jnp.take(a, idx, axis)
        return
    check(jnp.take(a, idx, axis, mode="clip"), np.take(a, idx, axis, mode="clip"))
    check(jnp.take(a, idx, axis, mode="wrap"), np.take(a, idx, axis, mode="wrap"))
    inside = (idx >= -n) & (idx < n)
    want = np.take(a, np.where(inside, idx, 0), axis)
    mask = inside.reshape((1,) * (0 if axis is None else axis % a.ndim) + idx.shape
                          + (1,) * (0 if axis is None else a.ndim - axis % a.ndim - 1))
    check(jnp.take(a, idx, axis), np.where(mask, want, np.asarray(fill_value(a.dtype)).astype(
        a.dtype)))
    if a.dtype.kind in "iuf":
        check(jnp.take(a, idx, axis, fill_value=7), np.where(mask, want, a.dtype.type(7)))


@FEW
@given(arrays(nonscalar), st.data())
def test_take_along_axis(a, data):
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    n = a.shape[axis]
    idx_shape = tuple(data.draw(st.sampled_from([d, 1])) if i != axis % a.ndim
                      else data.draw(st.integers(0, 4)) for i, d in enumerate(a.shape))
    rng = np.random.default_rng(data.draw(st.integers(0, 100)))
    if n == 0:
        out = jnp.take_along_axis(a, np.zeros(idx_shape, np.int32), axis)
        check(out, np.zeros(np.broadcast_shapes(idx_shape, a.shape[:axis % a.ndim] + (1,) +
                                                a.shape[axis % a.ndim + 1:]), a.dtype))
        return
    idx = rng.integers(-n, n, idx_shape).astype(data.draw(st.sampled_from([np.int32, np.int8])))
    check(jnp.take_along_axis(a, idx, axis), np.take_along_axis(a, idx, axis))
    big = np.where(idx >= 0, idx + n, idx)  # out of bounds where non-negative
    got = np.asarray(jnp.take_along_axis(a, big.astype(np.int32), axis, mode="clip"))
    check(got, np.take_along_axis(a, np.clip(np.where(big < 0, big + n, big), 0, n - 1), axis))
    filled = np.asarray(jnp.take_along_axis(a, big.astype(np.int32), axis))
    assert filled.shape == got.shape


def test_take_recorded_jax():
    x = np.arange(5, dtype=np.float32)
    i = np.array([0, -1, 5, -6], np.int32)
    check(jnp.take(x, i), np.array([0, 4, np.nan, np.nan], np.float32))
    check(jnp.take(x.astype(np.int32), i), np.array([0, 4, -2 ** 31, -2 ** 31], np.int32))
    check(jnp.take(x.astype(np.uint8), i), np.array([0, 4, 255, 255], np.uint8))
    check(jnp.take(x, i, mode="clip"), np.array([0, 0, 4, 0], np.float32))
    check(jnp.take(x, i, mode="wrap"), np.array([0, 4, 0, 4], np.float32))
    check(jnp.take(np.zeros((2, 0)), np.zeros(0, np.int32), axis=1), np.zeros((2, 0)))
    m = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    check(jnp.take_along_axis(m, np.array([[0, 2, -1, 5]]), 1),
          np.array([[0, 2, 2, np.nan], [3, 5, 5, np.nan]], np.float32))
    check(jnp.take_along_axis(m, np.array([[0, 2, -1, 5]]), 1, mode="clip"),
          np.array([[0, 2, 2, 2], [3, 5, 5, 5]], np.float32))
    check(jnp.take_along_axis(m, np.array([[0, 2, -1, 5]]), 1, fill_value=-7),
          np.array([[0, 2, 2, -7], [3, 5, 5, -7]], np.float32))
    check(jnp.take_along_axis(m, np.array([0, 2, -1, 5]), None),
          np.array([0, 2, 5, 5], np.float32))


@pytest.mark.parametrize("call, exc, text", [
    (lambda: jnp.take(np.ones(5), 2.0), ValueError, "indices must have an integer type"),
    (lambda: jnp.take(np.ones((2, 3)), np.array([0]), axis=2), ValueError,
     "axis 2 is out of bounds for array of dimension 2"),
    (lambda: jnp.take(np.ones(3), np.array([0]), mode="foo"), ValueError,
     "Invalid mode 'foo' for np.take"),
    (lambda: jnp.take(np.ones(3), np.array([0]), mode="raise"), ValueError,
     "take: mode='raise' is not supported"),
    (lambda: jnp.take(np.ones(3), [0]), TypeError,
     "take requires ndarray or scalar arguments, got <class 'list'> at position 1."),
    (lambda: jnp.take_along_axis(np.ones((2, 3)), np.array([[0.0]]), 1), TypeError,
     "take_along_axis indices must be of integer type, got float32"),
    (lambda: jnp.take_along_axis(np.ones((2, 3)), np.array([0, 2]), 1), ValueError,
     "indices and arr must have the same number of dimensions; 1 vs. 2"),
    (lambda: jnp.take_along_axis(np.ones((2, 3)), np.array([[0]]), None), ValueError,
     "take_along_axis indices must be 1D if axis=None, got shape (1, 1)"),
    (lambda: jnp.take_along_axis(np.ones((2, 3)), np.zeros((3, 1), np.int32), 1), ValueError,
     "Incompatible shapes for broadcasting: shapes=[(3, 1), (2, 1)]"),
    (lambda: jnp.take_along_axis(np.ones((2, 3)), np.zeros((2, 1), np.int32), 1, mode="wrap"),
     ValueError, 'Unknown gather mode "wrap"'),
])
def test_take_errors(call, exc, text):
    with raises(exc, text):
        call()


# ---------------------------------------------------------- diagonals and triangles

@FEW
@given(arrays(st.lists(st.integers(0, 4), min_size=2, max_size=4).map(tuple)), st.data())
def test_diagonals(a, data):
    k = data.draw(st.integers(-5, 5))
    ax1, ax2 = data.draw(st.permutations(range(a.ndim)))[:2]
    check(jnp.diagonal(a, k, ax1, ax2), np.diagonal(a, k, ax1, ax2))
    check(jnp.tril(a, k), np.tril(a, k))
    check(jnp.triu(a, k), np.triu(a, k))
    if a.dtype.kind in "fc":
        np.testing.assert_allclose(jnp.trace(a, k, ax1, ax2), np.trace(a, k, ax1, ax2))
    if a.ndim == 2:
        check(jnp.diag(a, k), np.diag(a, k))
        check(jnp.diag(a.ravel()[:4], k), np.diag(a.ravel()[:4], k))


# trace dtypes as JAX 0.10.2 (jnp.sum's): small integers accumulate in 32 bits.
@pytest.mark.parametrize("dtype, want", [(np.int8, "int32"), (np.bool_, "int32"),
                                         (np.uint8, "uint32"), (np.float16, "float16"),
                                         (np.complex64, "complex64")])
def test_trace_dtype(dtype, want):
    out = jnp.trace(np.ones((3, 3), dtype))
    assert str(out.dtype) == want and int(np.real(out)) == 3
    assert jnp.trace(np.ones((3, 3), np.int8), dtype=np.int8).dtype == np.int8


def test_diagonal_errors():
    with raises(ValueError, "diagonal requires an array of at least two dimensions."):
        jnp.diagonal(np.ones(3))
    with raises(ValueError, "diag input must be 1d or 2d"):
        jnp.diag(np.ones((3, 4, 5)))
    with raises(ValueError, "Argument to jax.numpy.tril must be at least 2D"):
        jnp.tril(np.ones(3))
    with raises(ValueError, "trace: axis1 and axis2 can not be the same"):
        jnp.trace(np.ones((2, 3)), 0, 0, 0)
    with raises(ValueError, "axis 1 is out of bounds for array of dimension 1"):
        jnp.trace(np.ones(3))
    with raises(TypeError, "'float' object cannot be interpreted as an integer"):
        jnp.triu(np.ones((3, 4)), 1.5)


# ---------------------------------------------------------------------- weak types

# (dtype, weak_type) recorded with JAX 0.10.2 for x = jnp.broadcast_to(2.0, (2, 3)).
WEAK = {
    "jnp.tril(x)": ("float32", True),
    "jnp.diag(x)": ("float32", True),
    "jnp.diagonal(x)": ("float32", True),
    "jnp.trace(x)": ("float32", False),
    "jnp.take(x, np.array([0]))": ("float32", True),
    "jnp.take_along_axis(x, np.zeros((2, 1), np.int32), 1)": ("float32", True),
    "jnp.take_along_axis(x[:, :0], np.zeros((2, 1), np.int32), 1)": ("float32", False),
    "jnp.take(x, np.zeros((0,), np.int32))": ("float32", True),
    "jnp.pad(x, 1)": ("float32", True),
    'jnp.pad(x, 1, mode="edge")': ("float32", True),
    'jnp.pad(x, 1, mode="reflect")': ("float32", True),
    'jnp.pad(x, 1, mode="wrap")': ("float32", True),
    'jnp.pad(x, 1, mode="linear_ramp")': ("float32", True),
    'jnp.pad(x, 1, mode="maximum")': ("float32", True),
    "jnp.pad(x, 1, constant_values=((1, 2), (3, 4)))": ("float32", True),
    "jnp.tile(x, 2)": ("float32", True),
    "jnp.repeat(x, 2)": ("float32", True),
    "jnp.repeat(x, 2, total_repeat_length=5)": ("float32", True),
    "jnp.roll(x, 1)": ("float32", True),
    "jnp.roll(x, jnp.asarray(1), 1)": ("float32", True),
    "jnp.flip(x)": ("float32", True),
    "jnp.rot90(x)": ("float32", True),
    "jnp.split(x, 3, 1)[0]": ("float32", True),
    "jnp.resize(x, (7,))": ("float32", True),
    "jnp.diag(jnp.atleast_1d(2.0))": ("float32", True),
    "jnp.concatenate([x, x])": ("float32", True),
    "jnp.squeeze(x[None])": ("float32", True),
    "jnp.reshape(3.0, (1,))": ("float32", True),
    "jnp.atleast_2d(3)": ("int32", True),
    "jnp.stack([1.0, 2.0])": ("float32", True),
}


@pytest.mark.parametrize("expr", list(WEAK))
def test_weak_types(expr):
    x = jnp.broadcast_to(2.0, (2, 3))
    out = eval(expr, {"jnp": jnp, "np": np, "x": x})
    assert (str(out.dtype), out.weak_type) == WEAK[expr]


def test_queries_and_methods():
    a = np.ones((2, 3, 4))
    assert jnp.ndim(a) == 3 and jnp.shape(a) == (2, 3, 4) and jnp.size(a) == 24
    assert jnp.size(a, 1) == 3 and jnp.ndim(2.0) == 0
    x = jnp.asarray(np.arange(6).reshape(2, 3))
    check(x.reshape(3, 2), np.arange(6).reshape(3, 2))
    check(x.T, np.arange(6).reshape(2, 3).T)
    check(x.transpose(1, 0), np.arange(6).reshape(2, 3).T)
    check(x.swapaxes(0, 1), np.arange(6).reshape(2, 3).T)
    check(x.flatten(), np.arange(6))
    check(x.repeat(2, axis=0), np.arange(6).reshape(2, 3).repeat(2, axis=0))
    check(x.take(np.array([1]), axis=1), np.array([[1], [4]]))
    check(x.diagonal(), np.array([0, 4]))


def test_dtypes_x64(x64):
    # Recorded with JAX 0.10.2 and jax_enable_x64.
    out = jnp.concatenate([np.ones(2, np.int32), np.ones(2, np.uint32)])
    assert out.dtype == np.int64
    assert jnp.trace(np.ones((2, 2), np.int8)).dtype == np.int64
    out = jnp.take(np.arange(3.0), np.array([5]))
    assert out.dtype == np.float64 and np.isnan(np.asarray(out)).all()
    out = jnp.repeat(np.arange(3), np.array([1, 2, 0]), total_repeat_length=4)
    np.testing.assert_array_equal(out, [0, 1, 1, 2])
    assert out.dtype == np.int64


def flat_by_size_of_shape(x):
    return x.reshape(jnp.array(x.shape).prod())   # a concrete 0-d array, as NumPy accepts


def test_a_concrete_zero_d_integer_array_is_a_shape():
    import kiln
    np.testing.assert_array_equal(kiln.jit(flat_by_size_of_shape)(jnp.ones((2, 3))), np.ones(6))
    assert jnp.ones((2, 3)).reshape(np.int64(6)).shape == (6,)
    assert jnp.ones((2, 3)).reshape(jnp.array([3, 2])).shape == (3, 2)
