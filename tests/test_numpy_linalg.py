"""kiln.numpy products, einsum and kiln.numpy.linalg norms against NumPy (hypothesis over batch
shapes with 0- and 1-sized axes, 1-D operands, dtypes) and against JAX 0.10.2 behaviour
recorded here (dtype promotion, weak types, errors)."""
import re
import string

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln.numpy as jnp

FEW = settings(max_examples=25, deadline=None)
NUMERIC = [np.int8, np.int32, np.uint8, np.float16, np.float32, np.complex64, np.bool_]


def make(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    vals = rng.integers(0 if dtype.kind == "u" else -3, 4, shape)
    if dtype.kind == "c":
        vals = vals + 1j * rng.integers(-3, 4, shape)
    return vals.astype(dtype)


def wide(x):
    """x in the precision NumPy references are computed in (booleans stay boolean)."""
    x = np.asarray(x)
    return x if x.dtype == np.bool_ else x.astype(np.complex128)


def close(got, want, rtol=1e-5):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    if got.dtype == np.bool_:
        np.testing.assert_array_equal(got, want)
        return
    tol = 2e-2 if got.dtype == np.float16 else rtol
    np.testing.assert_allclose(got.astype(np.complex128) if got.dtype.kind == "c" else
                               got.astype(np.float64), want, rtol=tol, atol=tol)


def raises(exc, text):
    return pytest.raises(exc, match=re.escape(text))


batch = st.lists(st.integers(0, 3), max_size=3).map(tuple)
dim = st.integers(0, 4)


@st.composite
def broadcastable(draw, base):
    """A shape that broadcasts with `base` (some axes 1, fewer leading axes)."""
    lead = draw(st.integers(0, len(base)))
    return tuple(draw(st.sampled_from([d, 1])) for d in base[lead:])


# ----------------------------------------------------------------- matmul, dot & co

@FEW
@given(batch, dim, dim, dim, st.sampled_from(NUMERIC), st.data())
def test_matmul_matches_numpy(b, m, k, n, dtype, data):
    a_shape = data.draw(broadcastable(b)) + (m, k)
    b_shape = data.draw(broadcastable(b)) + (k, n)
    x, y = make(a_shape, dtype, 1), make(b_shape, dtype, 2)
    got = jnp.matmul(x, y)
    assert got.dtype == np.dtype(dtype)
    close(got, np.matmul(wide(x), wide(y)))
    vec = make((k,), dtype, 3)
    close(jnp.matmul(x, vec), np.matmul(wide(x), wide(vec)))
    close(jnp.matmul(vec, y), np.matmul(wide(vec), wide(y)))
    close(jnp.matmul(vec, vec), np.matmul(wide(vec), wide(vec)))
    close(jnp.asarray(x) @ jnp.asarray(y), np.matmul(wide(x), wide(y)))
    close(jnp.matvec(x, vec), np.matmul(wide(x), wide(vec)))
    close(jnp.vecmat(make((m,), dtype, 4), x), np.matmul(np.conj(wide(make((m,), dtype, 4))),
                                                         wide(x)))


@FEW
@given(st.lists(st.integers(0, 3), max_size=3).map(tuple), st.lists(st.integers(0, 3),
       max_size=3).map(tuple), st.sampled_from(NUMERIC[:-1]), st.data())
def test_dot_inner_outer_kron(sa, sb, dtype, data):
    x = make(sa, dtype, 1)
    if sa and len(sb) >= 1:
        sb = sb[:-2] + (sa[-1],) + sb[-1:] if len(sb) >= 2 else (sa[-1],)
    y = make(sb, dtype, 2)
    c128 = wide
    close(jnp.dot(x, y), np.dot(c128(x), c128(y)))
    if x.ndim and y.ndim:
        z = make(sb[:-1] + (sa[-1],), dtype, 3)
        close(jnp.inner(x, z), np.inner(c128(x), c128(z)))
    close(jnp.outer(x, y), np.outer(c128(x), c128(y)))
    close(jnp.kron(x, y), np.kron(c128(x), c128(y)))
    close(jnp.vdot(x, x), np.vdot(c128(x), c128(x)))
    if x.ndim:
        axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
        other = make(data.draw(broadcastable(x.shape)), dtype, 4)
        if other.ndim >= -axis if axis < 0 else other.ndim == x.ndim:
            other = np.broadcast_to(other, x.shape) if other.shape[axis] != x.shape[axis] \
                else other
            want = np.sum(np.conj(c128(x)) * c128(other), axis=axis)
            close(jnp.vecdot(x, other, axis=axis), want)


@FEW
@given(st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple), st.data())
def test_tensordot(shape, data):
    n = data.draw(st.integers(0, len(shape)))
    x = make(shape, np.float32, 1)
    y = make(shape[len(shape) - n:] + (2,), np.float32, 2)
    close(jnp.tensordot(x, y, n), np.tensordot(x.astype(np.float64), y, n))
    if shape:
        perm = data.draw(st.permutations(range(len(shape))))
        y2 = make(tuple(shape[p] for p in perm), np.float32, 3)
        axes = (list(range(len(shape))), [perm.index(i) for i in range(len(shape))])
        close(jnp.tensordot(x, y2, axes), np.tensordot(x.astype(np.float64), y2, axes))
        close(jnp.tensordot(x, y2, (axes[0][0] - len(shape), axes[1][0])),
              np.tensordot(x.astype(np.float64), y2, (axes[0][0], axes[1][0])))


def cross_ref(a, b):
    """NumPy's cross product along the last axis; 2-vectors get a zero z component."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    a, b = (np.concatenate([v, np.zeros(v.shape[:-1] + (1,))], -1) if v.shape[-1] == 2 else v
            for v in (a, b))
    return np.cross(a, b)


@FEW
@given(batch, st.sampled_from([2, 3]), st.sampled_from([2, 3]), st.data())
def test_cross(b, n1, n2, data):
    x, y = make(b + (n1,), np.float32, 1), make(data.draw(broadcastable(b)) + (n2,),
                                                   np.float32, 2)
    want = cross_ref(x, y)
    close(jnp.cross(x, y), want)
    if b:
        xt, yt = np.moveaxis(x, -1, 0), np.moveaxis(np.broadcast_to(y, b + (n2,)), -1, 0)
        close(jnp.cross(xt, yt, axisa=0, axisb=0, axisc=0),
              np.moveaxis(want, -1, 0) if want.ndim > len(b) else want)


# JAX 0.10.2 promotion for matmul/einsum (same table as concatenate), rows a, columns b.
NAMES = ["bool", "int8", "uint8", "int16", "float16", "float32", "complex64"]
PROMOTED = {
    "bool": ["bool", "int8", "uint8", "int16", "float16", "float32", "complex64"],
    "int8": ["int8", "int8", "int16", "int16", "float16", "float32", "complex64"],
    "uint8": ["uint8", "int16", "uint8", "int16", "float16", "float32", "complex64"],
    "int16": ["int16", "int16", "int16", "int16", "float16", "float32", "complex64"],
    "float16": ["float16"] * 5 + ["float32", "complex64"],
    "float32": ["float32"] * 6 + ["complex64"],
    "complex64": ["complex64"] * 7,
}


@pytest.mark.parametrize("a", NAMES)
def test_product_promotion(a):
    for b, want in zip(NAMES, PROMOTED[a]):
        x, y = np.ones((2, 2), a), np.ones((2, 2), b)
        for out in (jnp.matmul(x, y), jnp.dot(x, y), jnp.einsum("ij,jk", x, y),
                    jnp.tensordot(x, y, 1)):
            assert (str(out.dtype), out.weak_type) == (want, False), (a, b)
        expected = (np.ones((2, 2)) @ np.ones((2, 2))).astype(want)
        np.testing.assert_array_equal(jnp.matmul(x, y), expected)


# (dtype, weak_type) recorded with JAX 0.10.2.
WEAK = {
    "jnp.dot(2.0, 3)": ("float32", True),
    "jnp.dot(2, 3)": ("int32", True),
    "jnp.dot(np.ones(3, np.float32), 3)": ("float32", False),
    "jnp.dot(np.ones(3, np.int8), 3.0)": ("float32", True),
    "jnp.dot(np.ones(3, np.float16), 3.0)": ("float16", False),
    "jnp.dot(np.ones(3, np.float16), 3j)": ("complex64", False),
    "jnp.dot(np.ones(3, np.bool_), 2)": ("int32", True),
    "jnp.dot(np.ones(3, np.int32), 2)": ("int32", False),
    "jnp.einsum(',', 2, True)": ("int32", True),
    "jnp.einsum(',->', 2.0, 3)": ("float32", True),
    "jnp.tensordot(np.ones((2, 2), np.float32), 2.0, 0)": ("float32", False),
    "jnp.inner(2.0, 3)": ("float32", True),
    "jnp.outer(2.0, 3)": ("float32", True),
    "jnp.kron(2.0, np.ones(2, np.int8))": ("float32", True),
    "jnp.kron(2.0, np.ones(2, np.float32))": ("float32", False),
    "jnp.vdot(np.ones(2, np.int8), np.ones(2, np.float32))": ("float32", False),
    "jnp.vecdot(np.ones(2, np.int8), np.ones(2, np.float16))": ("float16", False),
    "jnp.cross(np.ones(3, np.int8), np.ones(3, np.uint8))": ("int16", False),
    "jnp.matmul(x, x.T)": ("float32", True),
    "jnp.einsum('ij,kj', x, x)": ("float32", True),
    "jnp.einsum('ij->', x)": ("float32", True),
    "jnp.kron(x, x)": ("float32", True),
    "jnp.outer(x, x)": ("float32", True),
    "jnp.vecdot(x, x)": ("float32", True),
    "jnp.cross(x[0], x[1])": ("float32", False),
    "jnp.linalg.norm(x)": ("float32", False),
    "jnp.linalg.vector_norm(x, ord=1)": ("float32", False),
    "jnp.linalg.norm(3.0)": ("float32", False),
    "jnp.linalg.norm(np.ones(3, np.int8))": ("float32", False),
    "jnp.linalg.norm(np.ones(3, np.float16))": ("float16", False),
    "jnp.linalg.norm(np.ones(3, np.complex64))": ("float32", False),
    "jnp.linalg.norm(np.ones((2, 2), np.complex64), ord=0, axis=0)": ("float32", False),
    "jnp.linalg.vector_norm(np.ones((2, 3), np.int32), ord=1)": ("int32", False),
    "jnp.linalg.vector_norm(np.ones((2, 3), np.int32), ord=np.inf)": ("int32", False),
    "jnp.linalg.vector_norm(np.ones((2, 3), np.int32), ord=2)": ("float32", False),
}


@pytest.mark.parametrize("expr", list(WEAK))
def test_weak_types(expr):
    x = jnp.broadcast_to(2.0, (3, 3))
    out = eval(expr, {"jnp": jnp, "np": np, "x": x})
    assert (str(out.dtype), out.weak_type) == WEAK[expr]


def test_products_recorded_jax():
    # bool products are OR-of-ANDs; int8 products wrap in int8 (as XLA does).
    t, f = np.array([[True, False]]), np.array([[False], [False]])
    np.testing.assert_array_equal(jnp.matmul(t, f), [[False]])
    out = jnp.matmul(np.full((2, 3), 100, np.int8), np.full((3, 2), 100, np.int8))
    np.testing.assert_array_equal(out, np.full((2, 2), 48, np.int8))
    out = jnp.dot(np.arange(3), np.arange(3), preferred_element_type=np.float32)
    assert out.dtype == np.float32 and float(out) == 5.0
    out = jnp.einsum("ij,jk", np.ones((2, 3)), np.ones((3, 5)), preferred_element_type=np.float16)
    assert out.dtype == np.float16 and np.all(np.asarray(out) == 3)
    np.testing.assert_array_equal(jnp.cross(np.arange(2.0), np.arange(2.0)[::-1]), -1.0)


@pytest.mark.parametrize("call, exc, text", [
    (lambda: jnp.matmul(np.ones((2, 3)), np.ones((4, 5))), TypeError,
     "dot_general requires contracting dimensions to have the same shape, got (3,) and (4,)."),
    (lambda: jnp.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 5))), ValueError,
     "Incompatible types for matmul arguments: float32[2,2,3] and float32[3,3,5]"),
    (lambda: jnp.matmul(np.ones(3), 2.0), ValueError,
     "matmul input operand 1 must have ndim at least 1, but it has ndim 0"),
    (lambda: jnp.matmul(np.ones(3), np.ones(4)), TypeError,
     "dot_general requires contracting dimensions to have the same shape, got (3,) and (4,)."),
    (lambda: jnp.dot(np.ones((2, 3)), np.ones((4, 5))), TypeError,
     "dot_general requires contracting dimensions to have the same shape"),
    (lambda: jnp.dot([1, 2], np.ones(2)), TypeError,
     "dot requires ndarray or scalar arguments, got <class 'list'> at position 0."),
    (lambda: jnp.vdot(np.ones(2), np.ones(3)), TypeError, "(vdot of arrays with shapes (2,)"),
    (lambda: jnp.vecdot(np.ones(2), np.ones(3)), ValueError,
     "axes must match; got shapes (2,) and (3,) with axis=-1"),
    (lambda: jnp.matvec(np.ones(4), np.ones(4)), ValueError,
     "matvec: input with shape (4,) does not have enough dimensions"),
    (lambda: jnp.tensordot(np.ones((2, 3)), np.ones((3, 4)), 3), TypeError,
     "Number of tensordot axes (axes 3) exceeds input ranks ((2, 3) and (3, 4))"),
    (lambda: jnp.tensordot(np.ones((2, 3)), np.ones((3, 4)), ((1,), (0, 1))), TypeError,
     "tensordot requires axes lists to have equal length, got (1,) and (0, 1)."),
    (lambda: jnp.tensordot(np.ones((2, 3)), np.ones((3, 4)), ((1,), 0)), TypeError,
     "tensordot requires both axes lists to be either ints, tuples or lists"),
    (lambda: jnp.tensordot(np.ones((2, 3)), np.ones((3, 4)), (1,)), TypeError,
     "tensordot axes argument must be an int, a pair of ints, or a pair of lists/tuples"),
    (lambda: jnp.tensordot(np.ones((2, 3)), np.ones((3, 4)), (5, 0)), ValueError,
     "axis 5 is out of bounds for array of dimension 2"),
    (lambda: jnp.tensordot(np.ones((2, 3)), np.ones((3, 4)), -1), ValueError,
     "the number of axes must be non-negative"),
    (lambda: jnp.cross(np.ones(4), np.ones(3)), ValueError,
     "Dimension must be either 2 or 3 for cross product"),
    (lambda: jnp.outer(np.ones(2), np.ones(2), out=np.ones(4)), TypeError,
     "the 'out' argument is not supported"),
])
def test_product_errors(call, exc, text):
    with raises(exc, text):
        call()


# ----------------------------------------------------------------------------- einsum

@st.composite
def einsum_problems(draw):
    """Random einsum specifications (repeated, summed, broadcast and batch indices,
    ellipses, implicit or explicit output) with matching operands."""
    letters = string.ascii_letters[:draw(st.integers(1, 5))]
    sizes = {c: draw(st.integers(0, 3)) for c in letters}
    n_ops = draw(st.integers(1, 3))
    ell = draw(st.booleans())
    ell_shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    terms, ops = [], []
    for i in range(n_ops):
        term = draw(st.lists(st.sampled_from(letters), max_size=4))
        shape = [1 if sizes[c] and draw(st.integers(0, 4)) == 0 else sizes[c] for c in term]
        # repeated labels within an operand need equal sizes
        for j, c in enumerate(term):
            if term.index(c) != j:
                shape[j] = shape[term.index(c)]
        text = "".join(term)
        if ell and draw(st.booleans()):
            pos = draw(st.integers(0, len(term)))
            own = ell_shape[draw(st.integers(0, len(ell_shape))):]
            own = tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in own)
            text = text[:pos] + "..." + text[pos:]
            shape = shape[:pos] + list(own) + shape[pos:]
        terms.append(text)
        ops.append(make(tuple(shape), np.float32, i))
    spec = ",".join(terms)
    if draw(st.booleans()):
        used = sorted({c for t in terms for c in t if c != "."})
        out = "".join(draw(st.permutations(used))[:draw(st.integers(0, len(used)))])
        if "..." in spec and draw(st.booleans()):
            out = "..." + out
        spec += "->" + out
    return spec, ops


@settings(max_examples=60, deadline=None)
@given(einsum_problems(), st.sampled_from(["auto", False, True, "greedy"]))
def test_einsum_matches_numpy(problem, optimize):
    spec, ops = problem
    try:
        want = np.einsum(spec, *[o.astype(np.float64) for o in ops])
    except ValueError:
        return  # a size-1/size-n mix NumPy rejects within one operand
    close(jnp.einsum(spec, *ops, optimize=optimize), want, rtol=1e-4)


def test_einsum_forms():
    a, b, c = make((2, 3), np.float32, 1), make((3, 4), np.float32, 2), make((4, 5), np.float32, 3)
    want = np.einsum("ij,jk,kl->li", a, b, c)
    close(jnp.einsum("ij,jk,kl->li", a, b, c), want)
    close(jnp.einsum("ij,jk,kl->li", a, b, c, optimize=[(0, 2), (0, 1)]), want)
    close(jnp.einsum("ij,jk,kl->li", a, b, c, optimize=["einsum_path", (1, 2), (0, 1)]), want)
    close(jnp.einsum(a, [0, 1], b, [1, 2], [2, 0]), np.einsum(a, [0, 1], b, [1, 2], [2, 0]))
    close(jnp.einsum(a, [Ellipsis, 1], b, [1, 2]), np.einsum(a, [Ellipsis, 1], b, [1, 2]))
    close(jnp.einsum(" i j , j k ", a, b), a @ b)
    close(jnp.einsum("IJ,Jk", a, b), a @ b)
    close(jnp.einsum("ijij->ij", make((2, 3, 2, 3), np.float32)),
          np.einsum("ijij->ij", make((2, 3, 2, 3), np.float32)))
    # JAX's dtypes: int8 sums stay int8, bools reduce with OR.
    assert jnp.einsum("ij->", np.ones((2, 3), np.int8)).dtype == np.int8
    out = jnp.einsum("ij,jk", np.ones((2, 3), bool), np.ones((3, 5), bool))
    assert out.dtype == np.bool_ and np.all(np.asarray(out))
    assert bool(jnp.einsum("ij->", np.zeros((2, 3), bool))) is False


@pytest.mark.parametrize("spec, shapes, text", [
    ("ij,jk->ik", [(2, 3), (4, 5)], "Size of label 'j' for operand 1 (4) does not match "
                                    "previous terms (3)."),
    ("ij,jk->ik", [(2, 3), (3, 5), (3,)], "Number of einsum subscripts, 2, must be equal to "
                                          "the number of operands, 3."),
    ("ij->ik", [(2, 3)], "Output character 'k' did not appear in the input"),
    ("ij->ii", [(2, 3)], "Output character 'i' appeared more than once in the output."),
    ("ijk->ij", [(2, 3)], "Einstein sum subscript 'ijk' does not contain the correct number of "
                          "indices for operand 0"),
    ("ij.,jk", [(2, 3), (3, 5)], "Invalid Ellipses"),
    ("ij->j->", [(2, 3)], "Subscripts can only contain one '->'."),
    ("i-", [(3,)], "Subscripts can only contain one '->'."),
    ("...ij->", [(3,)], "does not contain the correct number of indices for operand 0"),
    ("ii->i", [(3, 1)], "dimensions in operand 0 for collapsing index 'i' don't match (3 != 1)"),
    ("...ij,...ij->...", [(5, 2, 3), (4, 2, 3)], "Size of label '...' for operand 1 (4)"),
])
def test_einsum_errors(spec, shapes, text):
    with raises(ValueError, text):
        jnp.einsum(spec, *[np.ones(s, np.float32) for s in shapes])


def test_einsum_argument_errors():
    with raises(TypeError, "einsum requires ndarray or scalar arguments, got <class 'list'> at "
                           "position 1."):
        jnp.einsum("ij,jk->ik", np.ones((2, 3)), [[1.0]])
    with raises(TypeError, "einsum: the 'out' argument is not supported"):
        jnp.einsum("i", np.ones(2), out=np.ones(2))
    with raises(ValueError, "einsum: subscript 60 is not within the valid range [0, 52)"):
        jnp.einsum(np.ones(2), [60])


# ------------------------------------------------------------------------------ norms

@FEW
@given(st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple),
       st.sampled_from([np.float32, np.int8, np.complex64, np.float16]), st.data())
def test_vector_norms(shape, dtype, data):
    x = make(shape, dtype, data.draw(st.integers(0, 99)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdims = data.draw(st.booleans())
    ords = [None, 1, 2, np.inf, 0, 0.5, 3, -1]
    if x.shape[axis]:
        ords.append(-np.inf)
    ref = x.astype(np.complex128 if dtype == np.complex64 else np.float64)
    for ord in ords:
        with np.errstate(divide="ignore"):
            want = np.linalg.norm(ref, ord, axis, keepdims)
        got = jnp.linalg.norm(x, ord, axis, keepdims)
        assert got.dtype == (np.float16 if dtype == np.float16 else np.float32)
        close(got, want)
    close(jnp.linalg.norm(x), np.linalg.norm(ref.ravel()))
    close(jnp.linalg.vector_norm(x, axis=None, keepdims=keepdims),
          np.linalg.norm(ref.ravel()) * np.ones((1,) * x.ndim if keepdims else ()))


@FEW
@given(st.lists(st.integers(0, 3), min_size=2, max_size=3).map(tuple), st.data())
def test_matrix_norms(shape, data):
    x = make(shape, np.float32, data.draw(st.integers(0, 99)))
    rows, cols = data.draw(st.permutations(range(len(shape))))[:2]
    keepdims = data.draw(st.booleans())
    ords = [None, "fro", 1, np.inf]
    if x.shape[rows] and x.shape[cols]:
        ords += [-1, -np.inf, 2, -2, "nuc"]   # (the last three through the SVD)
    for ord in ords:
        want = np.linalg.norm(x.astype(np.float64), ord, (rows, cols), keepdims)
        close(jnp.linalg.norm(x, ord, (rows, cols), keepdims), want)
    if len(shape) >= 2:
        close(jnp.linalg.matrix_norm(x, ord=1), np.linalg.norm(x.astype(np.float64), 1,
                                                               (-2, -1)))


def test_linalg_helpers():
    x = make((2, 3, 4), np.float32)
    close(jnp.linalg.matmul(x, np.ones(4)), x @ np.ones(4))
    close(jnp.linalg.tensordot(x, np.ones((4, 2)), axes=1), x @ np.ones((4, 2)))
    close(jnp.linalg.vecdot(x, np.ones(4)), x.sum(-1))
    close(jnp.linalg.outer(np.arange(2), np.arange(3.0)), np.outer(np.arange(2), np.arange(3)))
    close(jnp.linalg.cross(np.arange(3.0), np.ones(3)), np.cross(np.arange(3.0), np.ones(3)))
    close(jnp.linalg.diagonal(x, offset=1), np.diagonal(x, 1, -2, -1))
    close(jnp.linalg.trace(x, offset=1), np.trace(x, 1, -2, -1))
    close(jnp.linalg.matrix_transpose(x), np.swapaxes(x, -1, -2))


@pytest.mark.parametrize("call, exc, text", [
    (lambda: jnp.linalg.norm(np.ones((2, 3, 4)), ord=2), ValueError,
     "Improper number of axes for norm: axis=(0, 1, 2). Pass one axis to compute a "
     "vector-norm, or two axes to compute a matrix-norm."),
    (lambda: jnp.linalg.norm(np.ones((2, 3)), ord=3), ValueError,
     "Invalid order '3' for matrix norm."),
    (lambda: jnp.linalg.norm(np.ones((2, 3)), ord="fro", axis=1), ValueError,
     "Invalid order 'fro' for vector norm."),
    (lambda: jnp.linalg.norm(np.ones((2, 3)), ord="inf", axis=1), ValueError,
     "Invalid order 'inf' for vector norm. Use 'jax.numpy.inf' instead."),
    (lambda: jnp.linalg.norm(np.ones((2, 3, 4)), axis=(1, 1)), ValueError,
     "duplicate value in 'axis': (1, 1)"),
    (lambda: jnp.linalg.norm(np.ones((2, 3)), axis=4), ValueError,
     "axis 4 is out of bounds for array of dimension 2"),
    (lambda: jnp.linalg.norm(np.ones((2, 3)), axis=1.0), TypeError,
     "'float' object cannot be interpreted as an integer"),
    (lambda: jnp.linalg.matrix_norm(np.ones(3), ord=1), ValueError,
     "axis -2 is out of bounds for array of dimension 1"),
    (lambda: jnp.linalg.outer(np.ones((2, 3)), np.ones(3)), ValueError,
     "Input arrays must be one-dimensional, but they are x1.ndim=2 x2.ndim=1"),
    (lambda: jnp.linalg.cross(np.ones(2), np.ones(2)), ValueError,
     "Both input arrays must be (arrays of) 3-dimensional vectors"),
])
def test_norm_errors(call, exc, text):
    with raises(exc, text):
        call()


def test_dtypes_x64(x64):
    # Recorded with JAX 0.10.2 and jax_enable_x64.
    out = jnp.matmul(np.ones((2, 2), np.int32), np.ones((2, 2), np.uint32))
    assert (out.dtype, out.weak_type) == (np.int64, False)
    out = jnp.dot(2.0, 3)
    assert (out.dtype, out.weak_type) == (np.float64, True)
    assert jnp.einsum("i,i", np.ones(2), np.ones(2, np.float32)).dtype == np.float64
    assert jnp.linalg.norm(np.ones(3, np.int32)).dtype == np.float32
    assert jnp.linalg.norm(np.ones(3)).dtype == np.float64
